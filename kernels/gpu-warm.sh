#!/bin/bash
# castscope GPU warm-start run (issue 20, branch warmbuild; kernels/BENCH-RESULTS.md run 46):
# bench-cublaslt (each first call of cuBLASLt's start-up; twice lazy, once with
# CUDA_MODULE_LOADING=EAGER); the builds of the 8-block LLaMA (.gpu/traces/
# thunder_llama_stack_initial.txt), the 32-layer one (.gpu/traces/llama32.txt, written by
# `bench-compile --emit 32`) and the 4-block GPT (tests/oracle/gpt_stack4_initial.txt), each
# `castscope-cli run FILE --device cuda --iters 3` three times cold (an empty cache each), three
# times warm into the last cache, twice warm with CASTSCOPE_PLAN_CACHE=0 (build lines and the
# command's wall time in res/builds.txt); `--check` on the three models from their warm caches
# and on every data/*.txt cold then warm; test-kernels-cuda and -attention twice into one cache
# (the second pass builds from cached plans) and test-kernels-plan.  Binaries and libraries in
# .gpu/ (./dev.sh gpu-bundle), results under $OUT/res, packed into $OUT/results.tgz.
set -u
R=$(pwd); C=$(mktemp -d); mkdir -p "$OUT/res"; trap 'tar -czf "$OUT/results.tgz" -C "$OUT" res' EXIT
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$R/.gpu/lib:$CUDNN_DIR:/usr/local/cuda/lib64 CASTSCOPE_KERNELS_DIR=$R/.gpu/bin \
       CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data G_TEST_SRCDIR=$R/tests
B=.gpu/bin; T=.gpu/traces; O=$OUT/res   # the traces: ../shared/traces and llama32.txt
nproc > $O/nproc.txt
# 1. cuBLASLt's start-up, call by call (lazy, then eager module loading)
$B/bench-cublaslt > $O/lt-lazy.txt 2>&1
$B/bench-cublaslt > $O/lt-lazy2.txt 2>&1
CUDA_MODULE_LOADING=EAGER $B/bench-cublaslt > $O/lt-eager.txt 2>&1
# 2. build times: 3 cold (each an empty cache), then 3 warm into the last one; plan cache off x2
bt () { # name file cachedir extra-env...
  local n=$1 f=$2 c=$3; shift 3
  local s=$(date +%s%N)
  env "$@" CASTSCOPE_CACHE_DIR=$c $B/castscope-cli run $f --device cuda --iters 3 > $O/tmp.txt 2>&1; local rc=$?
  local e=$(( ($(date +%s%N) - s) / 1000000 ))
  echo "== $n rc=$rc wall_ms=$e" >> $O/builds.txt
  grep -E "^build |^cuBLASLt start-up|^step:|ignoring" $O/tmp.txt >> $O/builds.txt
}
for w in llama8:$T/thunder_llama_stack_initial.txt llama32:$T/llama32.txt gpt4:tests/oracle/gpt_stack4_initial.txt; do
  n=${w%%:*}; f=${w#*:}
  for i in 1 2 3; do rm -rf $C/c-$n; bt "$n cold $i" $f $C/c-$n X=1; done
  for i in 1 2 3; do bt "$n warm $i" $f $C/c-$n X=1; done
  for i in 1 2; do bt "$n warm-no-plan-cache $i" $f $C/c-$n CASTSCOPE_PLAN_CACHE=0; done
done
# 3. --check: the models from their warm caches (plans read back), data/*.txt cold then warm
for w in llama8:$T/thunder_llama_stack_initial.txt llama32:$T/llama32.txt gpt4:tests/oracle/gpt_stack4_initial.txt; do
  n=${w%%:*}; f=${w#*:}
  CASTSCOPE_CACHE_DIR=$C/c-$n $B/castscope-cli run $f --device cuda --check > $O/check-$n.txt 2>&1; echo "rc=$?" >> $O/check-$n.txt
done
for f in data/*.txt; do for k in cold warm; do
  echo "== $f $k" >> $O/check-data.txt
  CASTSCOPE_CACHE_DIR=$C/c-data $B/castscope-cli run $f --device cuda --check --iters 2 2>&1 | grep -E "^check:|^build |ignoring|rror" >> $O/check-data.txt
done; done
# 4. GPU tests (their own cache, run twice: the second builds from cached plans)
export CASTSCOPE_CACHE_DIR=$C/tc
$B/test-kernels-cuda > $O/tk-cuda.txt 2>&1; echo "rc=$?" >> $O/tk-cuda.txt
$B/test-kernels-cuda > $O/tk-cuda2.txt 2>&1; echo "rc=$?" >> $O/tk-cuda2.txt
$B/test-kernels-attention > $O/tk-attn.txt 2>&1; echo "rc=$?" >> $O/tk-attn.txt
$B/test-kernels-attention > $O/tk-attn2.txt 2>&1; echo "rc=$?" >> $O/tk-attn2.txt
$B/test-kernels-plan > $O/tk-plan.txt 2>&1; echo "rc=$?" >> $O/tk-plan.txt
ls -la $C/c-llama8 > $O/cache-ls.txt
