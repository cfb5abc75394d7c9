#!/bin/bash
# castscope GPU run of the plan file's device parts (issue 20; kernels/BENCH-RESULTS.md "Run 50"):
# bench-cublaslt --algo (the heuristic first, then the algorithm read back: lazy twice,
# --concurrent, EAGER, LAZY); per model (8-block LLaMA .gpu/traces/thunder_llama_stack_initial.txt,
# 32 layers .gpu/traces/llama32.txt from `bench-compile --emit 32`, the 4-block GPT) one cold and
# three warm `castscope-cli run FILE --device cuda --iters 3` (res/builds.txt), `--check` from
# the warm cache; the GPT's cuDNN debug lines; test-kernels-cuda and -attention twice into one
# cache, test-kernels-plan.  Binaries in .gpu/ (./dev.sh gpu-bundle); results in $OUT/results.tgz.
set -u
R=$(pwd); C=$(mktemp -d); mkdir -p "$OUT/res"; trap 'tar -czf "$OUT/results.tgz" -C "$OUT" res' EXIT
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDNN_DIR:/usr/local/cuda/lib64 CASTSCOPE_KERNELS_DIR=$R/.gpu/bin \
       CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data G_TEST_SRCDIR=$R/tests
B=.gpu/bin; T=.gpu/traces; O=$OUT/res
echo "cudnn dir: $CUDNN_DIR" > $O/env.txt; ls $CUDNN_DIR >> $O/env.txt 2>&1
# 1. cuBLASLt's start-up: the heuristic first (writes the algorithm), then the algorithm read back
rm -f $C/algo.bin
$B/bench-cublaslt --algo $C/algo.bin > $O/lt-1-heuristic-first.txt 2>&1
$B/bench-cublaslt --algo $C/algo.bin > $O/lt-2-read-algo.txt 2>&1
$B/bench-cublaslt --algo $C/algo.bin > $O/lt-3-read-algo.txt 2>&1
$B/bench-cublaslt --algo $C/algo.bin --concurrent > $O/lt-4-read-algo-concurrent.txt 2>&1
CUDA_MODULE_LOADING=EAGER $B/bench-cublaslt --algo $C/algo.bin > $O/lt-5-read-algo-eager.txt 2>&1
CUDA_MODULE_LOADING=LAZY $B/bench-cublaslt --algo $C/algo.bin > $O/lt-6-read-algo-lazy.txt 2>&1
# 2. builds: 1 cold (a fresh cache), 3 warm; --check from the warm cache
bt () { # name file cachedir
  local n=$1 f=$2 c=$3; local s=$(date +%s%N)
  CASTSCOPE_CACHE_DIR=$c $B/castscope-cli run $f --device cuda --iters 3 > $O/tmp.txt 2>&1; local rc=$?
  local e=$(( ($(date +%s%N) - s) / 1000000 ))
  echo "== $n rc=$rc wall_ms=$e" >> $O/builds.txt
  grep -E "^build |^cuBLASLt start-up|^from the plan cache|^step:|ignoring|rror" $O/tmp.txt >> $O/builds.txt
}
for w in llama8:$T/thunder_llama_stack_initial.txt llama32:$T/llama32.txt gpt4:tests/oracle/gpt_stack4_initial.txt; do
  n=${w%%:*}; f=${w#*:}
  rm -rf $C/c-$n; bt "$n cold" $f $C/c-$n
  for i in 1 2 3; do bt "$n warm $i" $f $C/c-$n; done
  ls -la $C/c-$n > $O/cache-$n.txt
  CASTSCOPE_CACHE_DIR=$C/c-$n $B/castscope-cli run $f --device cuda --check > $O/check-$n.txt 2>&1; echo "rc=$?" >> $O/check-$n.txt
done
# the GPT's cuDNN plans, loaded or built (debug lines)
G_MESSAGES_DEBUG=cs-kernels CASTSCOPE_CACHE_DIR=$C/c-gpt4 $B/castscope-cli run tests/oracle/gpt_stack4_initial.txt --device cuda --iters 3 2>&1 | grep -E "cuDNN|^build |^from" | cut -c1-400 > $O/gpt4-cudnn-debug.txt
# 3. GPU tests, each twice into one cache (the second pass builds from the cached plans)
export CASTSCOPE_CACHE_DIR=$C/tc
for t in cuda attention; do for k in 1 2; do
  $B/test-kernels-$t > $O/tk-$t-$k.txt 2>&1; echo "rc=$?" >> $O/tk-$t-$k.txt
done; done
$B/test-kernels-plan > $O/tk-plan.txt 2>&1; echo "rc=$?" >> $O/tk-plan.txt
