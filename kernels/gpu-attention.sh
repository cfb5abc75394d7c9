#!/bin/bash
# Fused attention on the GPU (kernels/cs-cuda-attention.c), in one call from the repository root
# after `./dev.sh gpu-bundle`: the test binary (every case against the CPU f64 reference, the
# logsumexp layouts, the LLaMA stack's and the torch.compile sample's verdicts), then
# `run --device cuda --check` under the sdpa executor on the LLaMA stack and the torch.compile
# cuDNN attention graphs, each with --iters for the step's time.  OUT, EXECUTORS, FILES
# override the output folder, the executor list and the files.
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
export CASTSCOPE_CACHE_DIR="${TMPDIR:-/tmp}"/castscope-kernel-cache
B=$R/.gpu/bin
O=${OUT:-"${TMPDIR:-/tmp}"/castscope-gpu-out}; mkdir -p "$O"
EX=${EXECUTORS:-sdpa,nvfuser,torch}
timeout 600 $B/test-kernels-attention --verbose > $O/attention-tests.log 2>&1
echo "test-kernels-attention rc=$?" | tee -a $O/attention-tests.log
grep -E "^(ok|not ok)|rel.L2|ratio|FAIL|ERROR" $O/attention-tests.log | tail -60
for f in ${FILES:-.gpu/traces/thunder_llama_stack_initial.txt data/aten/attention_softmax_bf16.txt}; do
  [ -f "$f" ] || continue
  echo "==== castscope-cli run $f --device cuda --check --policy executors=$EX --iters 20"
  timeout 180 $B/castscope-cli run "$f" --device cuda --check --policy executors=$EX --iters 20 > $O/att-run.log 2>&1
  echo "rc=$?"
  grep -E "^check:|MISMATCH|FAIL|castscope-cli:|attention|^step:" $O/att-run.log | head -30
done
