#!/bin/bash
# castscope GPU precision run (issue 19): the GPU tests (f64 reference vs CPU f64, PyTorch's
# verdict, the broken-kernel hook), then `run --device cuda --check --json` on every trace of
# .gpu/traces (a copy of ../shared/traces), data/, data/bench/ and data/aten/ under the default and
# matmul=upcast-f32 policies (and autocast=bf16 where a Thunder trace has f32 inputs), with the
# verdict counts and the check times in summary.md.  Binaries and libraries come in .gpu/
# (../shared/tools/gpu-bundle; libcscuda.so beside castscope-cli in .gpu/bin).
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CS_SHARED_TRACES=$R/.gpu/traces CS_DATA_DIR=$R/data
export CASTSCOPE_CACHE_DIR="${TMPDIR:-/tmp}"/castscope-kernel-cache
B=$R/.gpu/bin
O=${OUT:-"${TMPDIR:-/tmp}"/castscope-gpu-out}; mkdir -p "$O"
J=$(mktemp -d)   # per-run JSON and stderr; each run's JSON is appended to $O/runs.jsonl at once
SECTIONS=${SECTIONS:-tests broken check}
(nvidia-smi --query-gpu=name,driver_version --format=csv; date -u; git log -1 --oneline 2>/dev/null) > $O/env.txt 2>&1
for s in $SECTIONS; do
  case $s in
  tests)
    timeout 150 $B/test-kernels-cuda --verbose > $O/tests.log 2>&1; echo "test-kernels-cuda rc=$?" | tee -a $O/tests.log
    grep -E "^(ok|not ok)" $O/tests.log ;;
  check)
    n=0
    for f in ${CHECK_FILES:-data/*.txt .gpu/traces/*.txt data/bench/*.txt data/aten/*.txt}; do
      case $f in *_bwd.txt) continue ;; esac   # a backward runs with its *_fwd.txt
      pols="native upcast-f32"
      # final traces run as they are (the policy does not apply): once
      if grep -m1 '^# Constructed by' "$f" | grep -qE 'Delete Last Used|Unwrap'; then pols="final"; fi
      # torch.compile graphs (data/aten) are already past autocast: matmul precision only
      case $f in */aten/*) ;; *) if [ "$pols" != final ] && grep -qE 'f32\[' "$f"; then pols="$pols autocast=bf16"; fi ;; esac
      for pol in $pols; do
        n=$((n + 1)); j=$J/$n.json
        case $pol in native|upcast-f32) parg="--policy matmul=$pol" ;; final) parg="" ;; *) parg="--policy $pol" ;; esac
        t0=$(date +%s.%N)
        timeout ${CHECK_TIMEOUT:-60} $B/castscope-cli run $f --device cuda --check --json $parg > $j 2> $J/$n.err
        rc=$?; t1=$(date +%s.%N)
        printf '%s\t%s\t%s\t%s\t%s\n' "$f" "$pol" "$rc" "$(python3 -c "print('%.2f' % ($t1 - $t0))")" "$(tail -c 300 $J/$n.err | tr '\n\t' '  ')" >> $O/runs.tsv
        if [ -s $j ]; then head -c 4000000 $j | tr -d '\n' >> $O/runs.jsonl; else printf 'null' >> $O/runs.jsonl; fi
        echo >> $O/runs.jsonl
      done
    done
    python3 - "$O" <<'EOF'
import json, sys, os
O = sys.argv[1]
rows = [l.rstrip('\n').split('\t') for l in open(O + '/runs.tsv')]
jsons = open(O + '/runs.jsonl').read().split('\n')
out = ['| trace | policy | rc | outputs | pass | fail | f64 / ref | check s | wall s | worst (ratio, err/bound) |', '|---|---|---|---|---|---|---|---|---|---|']
tot = {'runs': 0, 'ok': 0, 'failed': 0, 'error': 0, 'outputs': 0, 'pass': 0}
for i, (f, pol, rc, wall, err) in enumerate(rows, 1):
    tot['runs'] += 1
    try:
        d = json.loads(jsons[i - 1])
        if d is None: raise ValueError
    except Exception:
        tot['error'] += 1
        out.append('| %s | %s | %s | - | - | - | - | - | %s | does not run: %s |' % (f, pol, rc, wall, err[-160:].replace('|', '/')))
        continue
    outs = d.get('outputs', [])
    npass = sum(1 for o in outs if o.get('pass'))
    ref = d.get('reference', {})
    worst = outs[0] if outs else {}
    def num(v):
        return ('%.3g' % v) if isinstance(v, (int, float)) else str(v)
    wb = '-'
    if isinstance(worst.get('err'), (int, float)) and isinstance(worst.get('bound'), (int, float)) and worst['bound'] > 0:
        wb = '%.3g' % (worst['err'] / worst['bound'])
    out.append('| %s | %s | %s | %d | %d | %d | %s / %s | %.2f | %s | %s %s, %s |' % (
        f, pol, rc, len(outs), npass, len(outs) - npass, ref.get('f64', '-'), ref.get('ref', '-'),
        ref.get('check_ms', 0) / 1000.0, wall, worst.get('name', '-'), num(worst.get('ratio', '-')), wb))
    tot['outputs'] += len(outs); tot['pass'] += npass
    if rc == '0': tot['ok'] += 1
    else: tot['failed'] += 1
out.append('')
out.append('runs %(runs)d: passed %(ok)d, failed %(failed)d, did not run %(error)d; outputs %(outputs)d, passing %(pass)d' % tot)
open(O + '/summary.md', 'w').write('\n'.join(out) + '\n')
print('\n'.join(out[-3:]))
EOF
    ;;
  broken)
    for f in data/mlp_gelu.txt data/bench/mlp_gelu_d768.txt; do
      CASTSCOPE_TEST_BREAK_KERNEL=0 timeout 90 $B/castscope-cli run $f --device cuda --check > $O/broken.log.tmp 2>&1
      echo "==== CASTSCOPE_TEST_BREAK_KERNEL=0 castscope-cli run $f --device cuda --check: rc=$?" >> $O/broken.log
      grep -E "^check|FAIL" $O/broken.log.tmp | head -8 >> $O/broken.log
    done
    cat $O/broken.log ;;
  esac
done
