#!/bin/bash
# castscope GPU compile-time run (issue 20, "compile once per structure"): the GPU tests, then
# the build of the 8-block LLaMA step (../shared/traces/thunder_llama_stack_initial.txt) and of
# a 32-layer one made from it (bench-compile --emit 32), each `castscope-cli run --device cuda`
# twice: into an empty kernel cache (cold) and from that cache (warm).  Printed per run: the
# CLI's own build line (program_new wall time, NVRTC programs from the disk cache) and the wall
# time of the whole command.  Then bench-compile (the NVRTC compile alone, no device, on this
# host's cores) with a sweep of the number of NVRTC programs.  Binaries and libraries come in
# .gpu/ (../shared/tools/gpu-bundle; castscope-cli, libcscuda.so, test-kernels-cuda and
# bench-compile in .gpu/bin; the traces in .gpu/traces).  Results under $OUT.
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
B=$R/.gpu/bin
O=${OUT:-"${TMPDIR:-/tmp}"/castscope-gpu-out}; mkdir -p "$O"
T=$(mktemp -d)
(nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; date -u; git log -1 --oneline 2>/dev/null) > $O/env.txt 2>&1
SECTIONS=${SECTIONS:-tests run bench}
for s in $SECTIONS; do
  case $s in
  tests)
    export CASTSCOPE_CACHE_DIR=$T/test-cache
    timeout 200 $B/test-kernels-cuda --verbose > $O/tests.log 2>&1; echo "test-kernels-cuda rc=$?" | tee -a $O/tests.log
    grep -E "^(ok|not ok)" $O/tests.log ;;
  run)
    $B/bench-compile --emit 32 > $T/llama32.txt || echo "bench-compile --emit failed"
    for f in $CS_SHARED_TRACES/thunder_llama_stack_initial.txt $T/llama32.txt; do
      export CASTSCOPE_CACHE_DIR=$T/cache-$(basename $f .txt)
      rm -rf "$CASTSCOPE_CACHE_DIR"
      for pass in cold warm warm; do
        t0=$(date +%s.%N)
        timeout 300 $B/castscope-cli run $f --device cuda --iters 10 > $T/run.log 2>&1
        rc=$?; t1=$(date +%s.%N)
        echo "==== $pass: castscope-cli run $(basename $f) --device cuda --iters 10: rc=$rc, command wall $(python3 -c "print('%.3f s' % ($t1 - $t0))")" | tee -a $O/run.log
        grep -E "^step:|^build|castscope-cli:" $T/run.log | tee -a $O/run.log
      done
    done ;;
  bench)
    BENCH_SPLITS=${BENCH_SPLITS:-"1 4 8 16 32"} timeout 400 $B/bench-compile 8 32 > $O/bench-compile.log 2>&1
    echo "bench-compile rc=$?" | tee -a $O/bench-compile.log
    cat $O/bench-compile.log ;;
  esac
done
rm -rf "$T"
