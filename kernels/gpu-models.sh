#!/bin/bash
# Whole-model training steps on the GPU beside PyTorch (issue 20), in one call from the
# repository root after `./dev.sh gpu-bundle` (castscope-cli, libcscuda.so and bench-compile in
# .gpu/bin, ../shared/traces in .gpu/traces) with `.thunder-kit` carried
# (../shared/thunder-kit/README.md): Thunder traces the GPT stack of tests/oracle/gpt_stack.py
# at 4 and 12 blocks (Thunder's default executors without nvFuser, as the shared LLaMA trace;
# the INITIAL section kept), bench-compile writes the 32-layer LLaMA, then per model
# `castscope-cli run FILE --device cuda --iters 50` and `--check`, then
# kernels/bench/torch_models.py (PyTorch eager and torch.compile of the same four models).
# castscope finds cuDNN in PyTorch's nvidia-cudnn package; PyTorch runs with its own library path.
# Results under $OUT/res, also packed as $OUT/results.tgz (the device returns at most 8 files).
R=$(pwd)
TORCH_LD=${LD_LIBRARY_PATH:-}
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDNN_DIR:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
export CASTSCOPE_CACHE_DIR="${TMPDIR:-/tmp}"/castscope-kernel-cache
B=$R/.gpu/bin
O=${OUT:-"${TMPDIR:-/tmp}"/castscope-gpu-out}/res; mkdir -p "$O"
trap 'tar -czf "$O/../results.tgz" -C "$O/.." res' EXIT
LD_LIBRARY_PATH=$TORCH_LD timeout 200 python3 .thunder-kit/thunder_oracle.py tests/oracle/gpt_stack.py --nvfuser-stub off \
  --executors default --outdir "$O/thunder-gpt" > "$O/thunder.log" 2>&1
echo "thunder rc=$?"
mkdir -p "$O/traces"
for n in 4 12; do
  awk '/^# ===== \[/{on = index($0, "[INITIAL]") > 0; next} on' \
    "$O/thunder-gpt/gpt${n}__ex_default.txt" > "$O/traces/gpt${n}_initial.txt"
done
$B/bench-compile --emit 32 > "$O/traces/llama32_initial.txt" || echo "bench-compile --emit failed"
cp "$CS_SHARED_TRACES/thunder_llama_stack_initial.txt" "$O/traces/llama8_initial.txt"
for m in llama8 llama32 gpt4 gpt12; do
  f=$O/traces/${m}_initial.txt
  timeout 120 $B/castscope-cli run "$f" --device cuda --iters 3 > /dev/null 2>&1   # fills the plan cache
  timeout 120 $B/castscope-cli run "$f" --device cuda --iters 50 > "$O/cs-$m.log" 2>&1
  echo "== castscope $m rc=$?"; grep -E "^step:|^build|castscope-cli:" "$O/cs-$m.log" | head -4
  timeout 120 $B/castscope-cli run "$f" --device cuda --check > "$O/cs-$m-check.log" 2>&1
  echo "== castscope $m --check rc=$?"; grep -E "^check|castscope-cli:" "$O/cs-$m-check.log" | tail -2
done
LD_LIBRARY_PATH=$TORCH_LD timeout 360 python3 kernels/bench/torch_models.py > "$O/torch.log" 2>&1
echo "torch rc=$?"; cat "$O/torch.log"
