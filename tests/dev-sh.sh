#!/usr/bin/env bash
# dev-sh.sh: dev.sh shows what went wrong (issue 21 item 2).  TAP.
#
# dev.sh is sourced with CASTSCOPE_DEV_SOURCE_ONLY=1 (functions only) and its real build()
# and deps() run against a scratch meson project and stand-ins for apt-get:
#   1. a step that works prints nothing;
#   2. a C syntax error: the compiler's error line, the log's path and the hint are shown;
#   3. a missing dependency at configure time: meson's reason and the hint to run deps;
#   4. apt-get failing: its error and the hint are shown, and deps fails;
#   5. with stderr not a terminal (a pipe, here) no ANSI escape is written;
#   6, 7. ./dev.sh --help lists the commands with what they do and exits 0; an unknown command
#      exits 2 with the list.
# Usage: dev-sh.sh SOURCE_ROOT
set -u

root=${1:?usage: dev-sh.sh SOURCE_ROOT}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0

echo "1..7"

# check NAME OUTPUT RC WANT-RC NEEDLE...: ok when the exit status is WANT-RC (nonzero: any
# failure) and every NEEDLE (a fixed string) is in OUTPUT.
check() {
  local name=$1 out=$2 rc=$3 want=$4 missing=""
  shift 4
  n=$((n + 1))
  if [ "$want" = 0 ] && [ "$rc" -ne 0 ]; then missing="exit 0 (got $rc)"; fi
  if [ "$want" != 0 ] && [ "$rc" -eq 0 ]; then missing="a failing exit status"; fi
  for needle in "$@"; do
    if ! grep -qF -- "$needle" <<< "$out"; then missing="$missing '$needle'"; fi
  done
  if [ -z "$missing" ]; then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name: missing$missing"
    sed 's/^/# /' <<< "$out"
    failed=$((failed + 1))
  fi
}

# run_dev DIR CODE: sources dev.sh and runs CODE in DIR (a subshell: dev.sh sets -e)
run_dev() {
  local dir=$1 code=$2
  (
    export CASTSCOPE_DEV_SOURCE_ONLY=1 CASTSCOPE_LOG_DIR="$tmp/logs" CASTSCOPE_BUILD=b
    # shellcheck source=/dev/null
    source "$root/dev.sh"
    cd "$dir" || exit 99
    eval "$code"
  ) 2>&1
}

# 1. quiet: nothing printed when the step works
out=$(run_dev "$tmp" 'quiet ok-step "should not be shown" echo chatter')
rc=$?
n=$((n + 1))
if [ "$rc" -eq 0 ] && [ -z "$out" ] && grep -qx chatter "$tmp/logs/ok-step.log"; then
  echo "ok $n - a step that works prints nothing (its output is in the log)"
else
  echo "not ok $n - a step that works: exit $rc, printed '$out'"
  failed=$((failed + 1))
fi

# 2. a syntax error in a C file: the compiler's line reaches the terminal
mkdir -p "$tmp/syntax"
cat > "$tmp/syntax/meson.build" <<'EOF'
project('devsh-syntax', 'c')
executable('t', 't.c')
EOF
printf 'int main (void)\n{\n  return 0 +;\n}\n' > "$tmp/syntax/t.c"
out=$(run_dev "$tmp/syntax" 'build')
check "a compile error is shown with the log and the hint" "$out" $? 1 \
  "t.c:3:" "error:" "FAILED:" "$tmp/logs/ninja-b.log" "fix the error above, then run ninja -C b"
syntax_out=$out

# 3. a missing dependency: meson's reason and the hint
mkdir -p "$tmp/dep"
cat > "$tmp/dep/meson.build" <<'EOF'
project('devsh-dep', 'c')
dependency('castscope-no-such-library-for-dev-sh')
EOF
out=$(run_dev "$tmp/dep" 'build')
check "a missing dependency is shown with the hint" "$out" $? 1 \
  "castscope-no-such-library-for-dev-sh" "not found" "$tmp/logs/configure-b.log" "./dev.sh deps"

# 4. apt-get fails: its message and the hint; deps fails
mkdir -p "$tmp/bin"
cat > "$tmp/bin/dpkg-query" <<'EOF'
#!/bin/sh
exit 1
EOF
cat > "$tmp/bin/apt-get" <<'EOF'
#!/bin/sh
echo "E: Unable to locate package castscope-fake" >&2
exit 100
EOF
printf '#!/bin/sh\nexec "$@"\n' > "$tmp/bin/sudo"
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/apt-get" "$tmp/bin/sudo"
out=$(PATH="$tmp/bin:$PATH" run_dev "$tmp" 'deps')
check "an apt-get failure is shown with the hint" "$out" $? 1 \
  "E: Unable to locate package castscope-fake" "$tmp/logs/apt-get-update.log" \
  "apt-get could not install"

# 5. stderr is a pipe above: dev.sh's own lines carry no escape (the compiler's colours are
# its own: the log of a failed step is shown as it is)
n=$((n + 1))
if grep -q '==>' <<< "$syntax_out" && ! grep '==>' <<< "$syntax_out" | grep -q $'\033'; then
  echo "ok $n - no ANSI escapes in dev.sh's lines when stderr is not a terminal"
else
  echo "not ok $n - dev.sh's lines with stderr a pipe:"
  grep '==>' <<< "$syntax_out" | cat -v | sed 's/^/# /'
  failed=$((failed + 1))
fi

# 6. --help: every command with a description, exit 0; an unknown command: exit 2
out=$("$root/dev.sh" --help 2>&1)
check "./dev.sh --help lists the commands" "$out" $? 0 \
  "usage: ./dev.sh [COMMAND]" "  build           install what is missing and build build/" \
  "  test            install, build, run every test" "  fuzz [SECONDS]  run each libFuzzer"
out=$("$root/dev.sh" nosuch 2>&1)
rc=$?
n=$((n + 1))
if [ "$rc" -eq 2 ] && grep -qF "./dev.sh: unknown command 'nosuch'" <<< "$out" \
   && grep -qF "  asan " <<< "$out"; then
  echo "ok $n - an unknown command exits 2 with the list"
else
  echo "not ok $n - ./dev.sh nosuch: exit $rc, output: $out"
  failed=$((failed + 1))
fi

[ "$failed" -eq 0 ]
