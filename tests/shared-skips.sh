#!/usr/bin/env bash
# shared-skips.sh: a clone without ../shared loses no subtest silently (issue 21 item 8).  TAP.
#
# Runs every test program that reads $CS_SHARED_TRACES with it pointing at a missing folder:
# each must still report every subtest it registers (g_test's -l list), pass, and report the
# ones that need the shared traces as '# SKIP' with a reason that names them.  goldens.sh
# must report one skipped subtest per shared trace it has goldens for, and .ci/run must refuse
# to run without ../shared/traces.
# Usage: shared-skips.sh SOURCE_ROOT BUILD_ROOT
set -u

root=${1:?usage: shared-skips.sh SOURCE_ROOT BUILD_ROOT}
build=${2:?usage: shared-skips.sh SOURCE_ROOT BUILD_ROOT}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
absent="$tmp/shared/traces"

programs=()
for t in test-core-meta test-core-decompose test-core-fuse test-core-parse test-core-parse-errors \
         test-core-ref test-core-grad test-core-split test-core-pipeline test-core-executors test-render-files \
         test-cli-basic test-kernels-codegen test-kernels-plan; do
  [ -x "$build/tests/$t" ] && programs+=("$t")
done

echo "1..$((${#programs[@]} + 2))"
n=0
failed=0

say() {   # say OK-OR-NOT DESCRIPTION
  n=$((n + 1))
  if [ "$1" = ok ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}

for t in "${programs[@]}"; do
  registered=$(CS_SHARED_TRACES="$absent" "$build/tests/$t" -l 2>/dev/null | grep -c '^/')
  out=$(CS_SHARED_TRACES="$absent" "$build/tests/$t" 2>/dev/null)
  rc=$?
  results=$(grep -cE '^(not )?ok [0-9]+' <<< "$out")
  bad=$(grep -cE '^not ok [0-9]+' <<< "$out")
  skips=$(grep -E '^ok [0-9]+ .*# SKIP' <<< "$out")
  shared_skips=$(grep -ciE 'shared' <<< "$skips")
  unexplained=$(grep -cE '# SKIP *$' <<< "$skips")
  if [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$results" -eq "$registered" ] \
     && [ "$shared_skips" -ge 1 ] && [ "$unexplained" -eq 0 ]; then
    say ok "$t without ../shared: $results of $registered subtests reported, $shared_skips skipped naming the shared traces"
  else
    say not "$t without ../shared: exit $rc, $results of $registered subtests reported, $bad failed, $shared_skips skips name the shared traces, $unexplained skips without a reason"
  fi
done

# goldens.sh: one skipped subtest per shared trace of SHA256SUMS (a stand-in CLI: only the
# shared lines are looked at, the data/ goldens fail against it)
printf '#!/bin/sh\nexit 0\n' > "$tmp/cli"
chmod +x "$tmp/cli"
want=$(sed -n 's/^[0-9a-f]*  shared__\([^.]*\)\..*/\1/p' "$root/tests/golden/SHA256SUMS" | sort -u | wc -l)
got=$(CS_SHARED_TRACES="$absent" "$root/tests/golden/goldens.sh" check "$tmp/cli" 2>/dev/null \
      | grep -cE "^ok [0-9]+ - shared/[^ ]+\.txt # SKIP $absent is absent")
if [ "$want" -gt 0 ] && [ "$got" -eq "$want" ]; then
  say ok "goldens.sh without ../shared: $got shared traces reported as skipped"
else
  say not "goldens.sh without ../shared: $got skipped shared traces reported, want $want"
fi

# .ci/run in a clone with no ../shared beside it: exit 1 and the reason, before any build
mkdir -p "$tmp/clone/.ci"
cp "$root/.ci/run" "$tmp/clone/.ci/run"
out=$("$tmp/clone/.ci/run" 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && grep -qF "../shared/traces is missing" <<< "$out"; then
  say ok ".ci/run refuses to run without ../shared"
else
  say not ".ci/run without ../shared: exit $rc, output: $out"
fi

[ "$failed" -eq 0 ]
