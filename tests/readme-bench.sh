#!/usr/bin/env bash
# readme-bench.sh: the benchmark command README.md documents prints the benchmarks' timings to
# the terminal (issue 21 item 11: `meson test --benchmark` alone shows only OK).  TAP.
# Runs README's command on BUILD_ROOT for one benchmark (bench-parse), without rebuilding and
# with its own log name, and looks for bench-parse's timing lines in what it printed.
# Usage: readme-bench.sh SOURCE_ROOT BUILD_ROOT
set -u
root=${1:?usage: readme-bench.sh SOURCE_ROOT BUILD_ROOT}
build=${2:?usage: readme-bench.sh SOURCE_ROOT BUILD_ROOT}
echo "1..1"
line=$(grep -m1 -E '^meson test -C build --benchmark' "$root/README.md" | sed 's/ *#.*//')
if [ -z "$line" ]; then
  echo "not ok 1 - README.md documents no 'meson test -C build --benchmark ...' command"
  exit 1
fi
read -ra cmd <<< "${line/-C build/-C $build}"
out=$(cd "$root" && "${cmd[@]}" --no-rebuild --logbase readme-bench bench-parse 2>&1)
if grep -qE '^  parse +[0-9.]+ ms wall' <<< "$out" && grep -qE '^  print +[0-9.]+ ms wall' <<< "$out"; then
  echo "ok 1 - '$line' prints the timings (bench-parse: $(grep -E '^  parse' <<< "$out" | tr -s ' '))"
else
  echo "not ok 1 - '$line' printed no timings:"
  sed 's/^/# /' <<< "$out"
  exit 1
fi
