#!/bin/bash
# castscope GPU acceptance run (kernels/): tests, --check on every bundled sample under both
# policies, compute-sanitizer memcheck, castscope bench and the PyTorch baselines.
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
export CASTSCOPE_CACHE_DIR=/tmp/cscache
B=$R/.gpu/bin
O=${OUT:-/tmp/out}; mkdir -p $O
SECTIONS=${SECTIONS:-tests check memcheck bench torch}
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; date -u) > $O/env.txt 2>&1
for s in $SECTIONS; do
  case $s in
  tests)
    timeout 120 $B/test-kernels-cuda --verbose > $O/tests.log 2>&1; echo "test-kernels-cuda rc=$?" | tee -a $O/tests.log
    timeout 120 $B/test-kernels-codegen >> $O/tests.log 2>&1; echo "test-kernels-codegen rc=$?" | tee -a $O/tests.log ;;
  check)
    timeout 200 $B/castscope-cli bench --check --iters 20 data/*.txt > $O/check.log 2>&1; echo "check rc=$?" | tee -a $O/check.log
    grep -E "^====|check:|MISMATCH|castscope-cli:" $O/check.log ;;
  memcheck)
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/castscope-cli bench --check --iters 1 data/seed_foo.txt data/mlp_gelu.txt data/ln_mlp_residual.txt data/cross_entropy.txt data/rmsnorm_swiglu.txt > $O/memcheck.log 2>&1; echo "memcheck rc=$?" | tee -a $O/memcheck.log
    grep -E "ERROR SUMMARY|rc=" $O/memcheck.log ;;
  bench)
    timeout 240 $B/castscope-cli bench --iters 30 ${BENCH_FILES:-data/bench/*.txt} > $O/bench.log 2>&1; echo "bench rc=$?" | tee -a $O/bench.log
    grep -E "^====|^step:|castscope-cli:" $O/bench.log ;;
  torch)
    PYTHONUNBUFFERED=1 timeout 300 python3 .gpu/bench/torch_baselines.py > $O/torch.jsonl 2>&1; echo "torch rc=$?" ;;
  esac
done
