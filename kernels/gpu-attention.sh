#!/bin/bash
# Fused attention on the GPU (kernels/cs-cuda-attention.c), in one call from the repository root
# after `./dev.sh gpu-bundle`: the test binary (every case against the CPU f64 reference, the
# tensor-core forward's cases among them; the logsumexp layouts, the LLaMA stack's and the
# torch.compile sample's verdicts), then `run --device cuda --check` under the sdpa executor on
# the LLaMA stack, the torch.compile cuDNN attention graphs and a generated sdpa trace of
# [1, 8, 512, 64] bf16 (causal), each with --iters for the step's time; then, timing only (the
# f64 CPU reference would take minutes), generated sdpa traces at the size of
# data/bench/attention_softmax_t2048.txt ([4, 32, 2048, 128] bf16, causal and not: the fused
# kernels, tensor cores for the forward) and that hand-written matmul/softmax pattern itself.
# The step table's labels say "(cuDNN)", "(tensor cores)" or "(CUDA cores)" per attention step.
# cuDNN (kernels/cs-cuda-cudnn.c, opened at run time): PyTorch's pip package nvidia-cudnn-cu13,
# found through python3 (else any libcudnn.so.9 on the machine) and put ahead of
# /usr/local/cuda/lib64, whose cuDNN may be older; the timed traces run with CASTSCOPE_CUDNN=1
# and 0 (our kernels) one after the other, then PyTorch's SDPA (flash and cuDNN backends) at the
# same size (kernels/bench/torch_sdpa.py, with the machine's own library path).
# OUT, EXECUTORS, FILES, CUDNN_DIR override the output folder, the executor list, the checked
# files and cuDNN's folder.
R=$(pwd)
TORCH_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
CUDNN_DIR=${CUDNN_DIR:-$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)}
[ -f "$CUDNN_DIR/libcudnn.so.9" ] || CUDNN_DIR=$(dirname "$(find / -xdev -name libcudnn.so.9 2>/dev/null | head -1)")
echo "cuDNN from $CUDNN_DIR"
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDNN_DIR:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
export CASTSCOPE_CACHE_DIR="${TMPDIR:-/tmp}"/castscope-kernel-cache
B=$R/.gpu/bin
O=${OUT:-"${TMPDIR:-/tmp}"/castscope-gpu-out}; mkdir -p "$O"
EX=${EXECUTORS:-sdpa,nvfuser,torch}
# sdpa_trace NAME B H L E CAUSAL: a Thunder initial trace of one scaled_dot_product_attention
sdpa_trace () {
  local t="bf16[$2, $3, $4, $5]"
  cat > "$O/$1.txt" <<TRACE
import thunder
import thunder.core.dtypes as dtypes
import thunder.core.prims as prims
import thunder.torch as ltorch
import torch

def computation(q, k, v):
  # q: "cuda:0 $t"
  # k: "cuda:0 $t"
  # v: "cuda:0 $t"
  y = ltorch.scaled_dot_product_attention(q, k, v, None, 0.0, $6, scale=None)  # y: "cuda:0 $t"
  return (y,)
TRACE
}
sdpa_trace sdpa_b1h8_t512_e64_causal 1 8 512 64 True
sdpa_trace sdpa_b4h32_t2048_e128_causal 4 32 2048 128 True
sdpa_trace sdpa_b4h32_t2048_e128 4 32 2048 128 False
timeout 600 $B/test-kernels-attention --verbose > $O/attention-tests.log 2>&1
echo "test-kernels-attention rc=$?" | tee -a $O/attention-tests.log
grep -E "^(ok|not ok)|rel.L2|ratio|FAIL|ERROR" $O/attention-tests.log | tail -80
n=0
run_one () {   # FILE LOG [--check]
  echo "==== CASTSCOPE_CUDNN=${CASTSCOPE_CUDNN:-1} castscope-cli run $1 --device cuda $3 --policy executors=$EX --iters 20"
  timeout 300 $B/castscope-cli run "$1" --device cuda $3 --policy executors=$EX --iters 20 > "$2" 2>&1
  echo "rc=$?"
  grep -E "^check:|MISMATCH|FAIL|castscope-cli:|attention|^step:|matmul|softmax" "$2" | head -40
}
for f in ${FILES:-.gpu/traces/thunder_llama_stack_initial.txt data/aten/attention_softmax_bf16.txt $O/sdpa_b1h8_t512_e64_causal.txt}; do
  [ -f "$f" ] || continue
  n=$((n + 1)); run_one "$f" "$O/att-run-$n.log" --check
done
for f in $O/sdpa_b4h32_t2048_e128_causal.txt $O/sdpa_b4h32_t2048_e128.txt data/bench/attention_softmax_t2048.txt; do
  for c in 1 0; do
    n=$((n + 1)); CASTSCOPE_CUDNN=$c run_one "$f" "$O/att-run-$n.log"
  done
done
LD_LIBRARY_PATH=$TORCH_LD_LIBRARY_PATH timeout 300 python3 kernels/bench/torch_sdpa.py 4 32 2048 128 --iters 20 2>&1 | tee "$O/torch-sdpa.log"
