#!/usr/bin/env bash
# dev.sh: castscope's build helper.  The README's two quick-start commands:
#
#   ./dev.sh          install what is missing, build, open the bundled seed sample in the app
#                     (with no display: render the sample's traces to out/ instead)
#   ./dev.sh test     install what is missing, build, run every test: the normal build, the
#                     AddressSanitizer + UndefinedBehaviorSanitizer build and a fuzz smoke run
#
# Other commands: ./dev.sh deps | build | asan | fuzz [SECONDS] | valgrind | gpu-bundle
# Works on a fresh Debian 12 machine (apt-get, as root or through sudo).  The CUDA toolkit is
# optional: kernels/ is built when meson finds it (GPU tests skip without a device).
#
# Steps are quiet when they work; the output of apt-get, meson setup and ninja goes to
# build-logs/STEP.log (CASTSCOPE_LOG_DIR), and a step that fails shows its error (the tail of
# the log, or ninja's first failed command), the log's path and what to do.
# CASTSCOPE_DEV_SOURCE_ONLY=1 makes `source dev.sh` define the functions without running a
# command (tests/dev-sh.sh tests them).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

BUILD=${CASTSCOPE_BUILD:-build}
ASAN_BUILD=${CASTSCOPE_ASAN_BUILD:-build-asan}
FUZZ_BUILD=${CASTSCOPE_FUZZ_BUILD:-build-fuzz}

# Debian 12 packages castscope needs to build and test.
PACKAGES=(
  build-essential meson ninja-build pkg-config python3
  libglib2.0-dev libjson-glib-dev libopenblas-dev
  libgraphviz-dev libcairo2-dev libpango1.0-dev
  libgtk-4-dev xvfb xauth
  clang libclang-rt-14-dev
)

LOG_DIR=${CASTSCOPE_LOG_DIR:-$here/build-logs}

# Bold and red only when stderr is a terminal: a log file or a pipe gets plain text.
if [ -t 2 ]; then
  BOLD=$'\033[1m' RED=$'\033[1;31m' PLAIN=$'\033[0m'
else
  BOLD='' RED='' PLAIN=''
fi

log() { printf '%s==> %s%s\n' "$BOLD" "$*" "$PLAIN" >&2; }

# quiet NAME HINT COMMAND...: runs COMMAND with its stdout and stderr in $LOG_DIR/NAME.log and
# prints nothing when it succeeds.  When it fails, prints on stderr the command, the part of the
# log that holds the error (from ninja's first "FAILED:" line, else the last 40 lines), the
# log's path and HINT (what to do next), and returns the command's exit status.
quiet() {
  local name=$1 hint=$2 rc=0 log
  shift 2
  mkdir -p "$LOG_DIR"
  log="$LOG_DIR/$name.log"
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    {
      printf '%s==> failed (exit %d): %s%s\n' "$RED" "$rc" "$*" "$PLAIN"
      if grep -q '^FAILED: ' "$log"; then
        echo "---- the first failed build step (of $log) ----"
        sed -n '/^FAILED: /,$p' "$log" | head -n 40
      else
        echo "---- last 40 lines of $log ----"
        tail -n 40 "$log"
      fi
      echo "---- full output: $log"
      printf '%s==> %s%s\n' "$BOLD" "$hint" "$PLAIN"
    } >&2
  fi
  return "$rc"
}

# The hints of the quiet steps.
HINT_APT="apt-get could not install castscope's build dependencies: check the network and \
/etc/apt/sources.list (the error is above), or install them by hand: apt-get install ${PACKAGES[*]}"
HINT_SETUP="meson could not configure the build (the reason is above; a missing dependency? \
./dev.sh deps installs the Debian packages).  Then run ./dev.sh again."
HINT_NINJA="the build failed: fix the error above, then run ninja -C <build dir> (or ./dev.sh again)."

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  log "installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  quiet apt-get-update "$HINT_APT" $sudo apt-get update -qq
  quiet apt-get-install "$HINT_APT" $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# setup_dir DIR [MESON OPTIONS...]: meson setup DIR unless it is configured; a folder left by a
# setup that failed is configured again (--wipe).
setup_dir() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    return 0
  fi
  if [ -d "$dir/meson-private" ]; then
    quiet "configure-$(basename "$dir")" "$HINT_SETUP" meson setup --wipe "$dir" "$@"
  else
    quiet "configure-$(basename "$dir")" "$HINT_SETUP" meson setup "$dir" "$@"
  fi
}

build() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    log "configuring $BUILD"
    setup_dir "$BUILD"
  fi
  log "building $BUILD"
  quiet "ninja-$(basename "$BUILD")" "${HINT_NINJA/<build dir>/$BUILD}" ninja -C "$BUILD"
}

build_asan() {
  if [ ! -f "$ASAN_BUILD/build.ninja" ]; then
    log "configuring $ASAN_BUILD (AddressSanitizer + UndefinedBehaviorSanitizer)"
    setup_dir "$ASAN_BUILD" -Db_sanitize=address,undefined -Dbuildtype=debug \
      -Db_lundef=true -Dcuda=disabled
  fi
  log "building $ASAN_BUILD"
  quiet "ninja-$(basename "$ASAN_BUILD")" "${HINT_NINJA/<build dir>/$ASAN_BUILD}" ninja -C "$ASAN_BUILD"
}

# meson test; never stops the script (the summary decides the exit status).
run_tests() {
  local dir=$1; shift
  log "testing $dir"
  meson test -C "$dir" --print-errorlogs "$@" || true
}

# The sanitizer build's tests: LeakSanitizer needs full (slow) unwinding at malloc, or the
# stacks through GLib are cut short and tests/lsan.supp's suppressions do not match (false
# leaks); the GPU suite needs a device the sanitizer build does not have.
run_asan_tests() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests "$ASAN_BUILD" --no-suite gpu
}

# Prints 'N passed, N failed, N skipped' over the TAP subtests of every test log given, and
# returns non-zero if anything failed.  A test executable that produced no TAP result at all
# (a crash before its first subtest) counts as one failure.  Before that line: the reasons of
# the skipped subtests, most frequent first (e.g. a missing ../shared/traces, no CUDA device).
summary() {
  python3 - "$@" <<'EOF'
import collections, json, re, sys
passed = failed = skipped = 0
reasons = collections.Counter()
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        print(f"missing test log {path}", file=sys.stderr)
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        out = t.get("stdout") or ""
        ok = len(re.findall(r"^ok \d+.*$", out, re.M))
        skip = len(re.findall(r"^ok \d+.*# SKIP", out, re.M))
        bad = len(re.findall(r"^not ok \d+", out, re.M))
        res = t.get("result")
        if ok + bad == 0:
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif res == "SKIP":
                skipped += 1
            else:
                failed += 1
            continue
        passed += ok - skip
        skipped += skip
        for why in re.findall(r"^ok \d+.*# SKIP\s*(.*)$", out, re.M):
            # one reason per cause: paths and counts vary between subtests
            why = "../shared/traces absent" if "shared" in why.lower() else why.strip()
            reasons[why or "no reason given"] += 1
        failed += bad
        if bad == 0 and res not in ("OK", "SKIP", "EXPECTEDFAIL"):
            failed += 1   # crashed or timed out after its last subtest line
for why, count in reasons.most_common():
    print(f"  skipped {count}: {why}")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
EOF
}

fuzz() {
  local seconds=${1:-20}
  if ! command -v clang >/dev/null; then
    log "clang missing: no fuzz run"
    return 0
  fi
  if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
    log "configuring $FUZZ_BUILD (libFuzzer)"
    CC=clang setup_dir "$FUZZ_BUILD" -Dfuzz=true -Db_sanitize=address,undefined \
      -Db_lundef=false -Dbuildtype=debugoptimized -Dgui=disabled -Dcuda=disabled
  fi
  quiet "ninja-$(basename "$FUZZ_BUILD")" "${HINT_NINJA/<build dir>/$FUZZ_BUILD}" ninja -C "$FUZZ_BUILD"
  if [ ! -d "$FUZZ_BUILD/tests/fuzz" ]; then
    return 0
  fi
  for f in "$FUZZ_BUILD"/tests/fuzz/fuzz-*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    log "fuzzing $(basename "$f") for ${seconds}s"
    local corpus
    corpus=$(mktemp -d)
    cp data/*.txt "$corpus"/ 2>/dev/null || true
    cp ../shared/traces/*.txt "$corpus"/ 2>/dev/null || true
    "$f" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
      -print_final_stats=1 "$corpus" tests/fuzz/regressions 2>&1 | tail -n 12
    rm -rf "$corpus"
  done
}

main_job() {
  local sample=data/seed_foo.txt
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$BUILD/app/castscope" ]; then
    log "opening $sample in castscope"
    exec "$BUILD/app/castscope" "$sample"
  fi
  log "no display: rendering $sample to out/"
  mkdir -p out
  local cli="$BUILD/app/castscope-cli"
  for trace in forward backward; do
    for matmul in native upcast-f32; do
      "$cli" render "$sample" --policy "matmul=$matmul" --trace "$trace" -o "out/seed_foo-$trace-$matmul.svg"
      "$cli" render "$sample" --policy "matmul=$matmul" --trace "$trace" -o "out/seed_foo-$trace-$matmul.png"
    done
  done
  "$cli" stats "$sample" > out/seed_foo-stats.txt
  "$cli" diff "$sample" --policy matmul=native --vs matmul=upcast-f32 > out/seed_foo-diff.txt
  ls -1 out/
}

usage() {
  cat <<'EOF'
usage: ./dev.sh [COMMAND]
  run             (default) install what is missing, build, open data/seed_foo.txt in the app
                  (with no display: render its traces, stats and diff to out/)
  test            install, build, run every test: normal build, ASan+UBSan build, fuzz smoke run
  deps            install the Debian packages castscope needs (apt-get, as root or with sudo)
  build           install what is missing and build build/ (meson setup + ninja)
  asan            build build-asan/ and run the tests under AddressSanitizer + UBSan
  fuzz [SECONDS]  run each libFuzzer harness for SECONDS (default 600; clang build in build-fuzz/)
  valgrind        run the tests under valgrind memcheck
  gpu-bundle      build the CUDA executor and its tests and bundle them for a GPU machine
  gpu-gui-bundle  bundle the GUI test with GTK's broadway backend for a GPU machine
  help            print this
Logs of the quiet steps: build-logs/STEP.log (CASTSCOPE_LOG_DIR).
EOF
}

if [ "${CASTSCOPE_DEV_SOURCE_ONLY:-}" = 1 ]; then
  return 0
fi

cmd=${1:-run}
case "$cmd" in
  run)
    deps; build; main_job ;;
  test)
    deps
    build
    run_tests "$BUILD"
    build_asan
    run_asan_tests
    fuzz "${CASTSCOPE_FUZZ_SECONDS:-20}"
    summary "$BUILD/meson-logs/testlog.json" "$ASAN_BUILD/meson-logs/testlog.json"
    ;;
  deps) deps ;;
  build) deps; build ;;
  asan) deps; build_asan; run_asan_tests; summary "$ASAN_BUILD/meson-logs/testlog.json" ;;
  fuzz) deps; fuzz "${2:-600}" ;;
  valgrind)
    deps; build
    if ! command -v valgrind >/dev/null; then
      quiet apt-get-valgrind "$HINT_APT valgrind" apt-get install -y -qq valgrind
    fi
    G_SLICE=always-malloc G_DEBUG=gc-friendly meson test -C "$BUILD" --no-suite gui --no-suite gpu \
      --wrapper "valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --suppressions=$here/tests/valgrind.supp" \
      --timeout-multiplier 20 --print-errorlogs
    ;;
  gpu-gui-bundle)
    # test-app-window, gtk4-broadwayd, their libraries, Graphviz plugins and two fonts in
    # .gpu/gui.tar.xz, for tests/gpu/run-gui-gpu.sh on the GPU machine (no GTK there)
    deps; build
    g=$(mktemp -d)/gui; mkdir -p "$g/bin" "$g/gv" "$g/fonts"
    cp "$BUILD/tests/test-app-window" "$(command -v gtk4-broadwayd)" "$g/bin/"
    gvdir=$(pkg-config --variable=libdir libgvc)/graphviz
    # every plugin with the config6a that lists them; only the ones castscope loads (core for
    # xdot, dot_layout) get their libraries bundled
    cp -L "$gvdir"/config6a "$gvdir"/libgvplugin_*.so.6 "$g/gv/"
    ../shared/tools/gpu-bundle "$g" "$g"/bin/* "$g"/gv/libgvplugin_core.so.6 "$g"/gv/libgvplugin_dot_layout.so.6
    cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf \
       /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf "$g/fonts/"
    printf '<?xml version="1.0"?>\n<fontconfig><dir prefix="relative">fonts</dir><cachedir prefix="xdg">castscope-fontconfig</cachedir></fontconfig>\n' > "$g/fonts.conf"
    mkdir -p .gpu && tar -cJf .gpu/gui.tar.xz -C "$(dirname "$g")" gui
    echo "gpu-gui-bundle: .gpu/gui.tar.xz ($(du -h .gpu/gui.tar.xz | cut -f1))" ;;
  gpu-bundle)
    deps
    setup_dir build-gpu -Dcuda=enabled -Dgui=disabled
    quiet ninja-build-gpu "${HINT_NINJA/<build dir>/build-gpu}" ninja -C build-gpu
    # the test programs and benchmarks (regular executables, not meson's *.p folders) and the
    # CUDA module beside the CLI in .gpu/bin
    mkdir -p .gpu/bin
    bins=(build-gpu/app/castscope-cli)
    for f in build-gpu/tests/test-* build-gpu/tests/bench-*; do
      [ -f "$f" ] && [ -x "$f" ] && bins+=("$f")
    done
    cp "${bins[@]}" build-gpu/kernels/libcscuda.so .gpu/bin/
    ../shared/tools/gpu-bundle .gpu .gpu/bin/* ;;
  -h|--help|help)
    usage ;;
  *)
    echo "./dev.sh: unknown command '$cmd'" >&2
    usage >&2
    exit 2 ;;
esac
