#!/bin/bash
# castscope GPU acceptance run (kernels/): tests, run --device cuda --check on every bundled
# sample under both matmul policies, compute-sanitizer memcheck, castscope bench and the PyTorch
# baselines, in one call.  Binaries and libraries come in .gpu/ (../shared/tools/gpu-bundle).
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
export CASTSCOPE_CACHE_DIR="${TMPDIR:-/tmp}"/castscope-kernel-cache
B=$R/.gpu/bin
O=${OUT:-"${TMPDIR:-/tmp}"/castscope-gpu-out}; mkdir -p "$O"
SECTIONS=${SECTIONS:-tests check memcheck bench torch}
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; date -u) > $O/env.txt 2>&1
for s in $SECTIONS; do
  case $s in
  tests)
    timeout 120 $B/test-kernels-cuda --verbose > $O/tests.log 2>&1; echo "test-kernels-cuda rc=$?" | tee -a $O/tests.log
    [ -x $B/test-kernels-codegen ] && { timeout 120 $B/test-kernels-codegen >> $O/tests.log 2>&1; echo "test-kernels-codegen rc=$?" | tee -a $O/tests.log; }
    [ -x $B/test-kernels-xentropy ] && { timeout 300 $B/test-kernels-xentropy --verbose >> $O/tests.log 2>&1; echo "test-kernels-xentropy rc=$?" | tee -a $O/tests.log; } ;;
  check)
    for f in ${CHECK_FILES:-data/*.txt}; do for pol in ${CHECK_POLICIES:-native upcast-f32}; do
      echo "==== castscope-cli run $f --device cuda --policy matmul=$pol --check --iters 20" >> $O/check.log
      timeout 90 $B/castscope-cli run $f --device cuda --policy matmul=$pol --check --iters 20 >> $O/check.log 2>&1
      echo "rc=$?" >> $O/check.log
    done; done
    grep -E "^====|^check:|MISMATCH|castscope-cli:|^rc=" $O/check.log ;;
  memcheck)
    timeout ${MEMCHECK_TIMEOUT:-150} compute-sanitizer --tool memcheck --error-exitcode 9 $B/castscope-cli bench --iters 2 $MEMCHECK_ARGS ${MEMCHECK_FILES:-data/*.txt} > $O/memcheck.log 2>&1; echo "memcheck rc=$?" | tee -a $O/memcheck.log
    grep -E "ERROR SUMMARY|rc=" $O/memcheck.log ;;
  bench)
    timeout ${BENCH_TIMEOUT:-200} $B/castscope-cli bench --iters 30 $BENCH_ARGS ${BENCH_FILES:-data/bench/*.txt} > $O/bench.log 2>&1; echo "bench rc=$?" | tee -a $O/bench.log
    grep -E "^====|^step:|castscope-cli:" $O/bench.log ;;
  torch)
    PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-220} python3 .gpu/bench/torch_baselines.py > $O/torch.jsonl 2>&1; echo "torch rc=$?"; tail -3 $O/torch.jsonl ;;
  esac
done
# extra: a LLaMA block stack through castscope's pipeline (embedding + backward, RoPE cat,
# decomposed attention), executed and timed (the CPU reference lacks embedding_backward).
if [ -n "$LLAMA" ]; then
  timeout 120 $B/castscope-cli run .gpu/traces/thunder_llama_stack_initial.txt --device cuda --iters 10 > $O/llama.log 2>&1; echo "llama rc=$?" | tee -a $O/llama.log
  grep -E "^step:|^build|castscope-cli:" $O/llama.log
fi
