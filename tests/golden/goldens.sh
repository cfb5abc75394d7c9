#!/usr/bin/env bash
# Golden outputs of the core pipeline, for the core redesign (issue 16): `transform --all-passes`
# and `stats --json` of every trace in ../shared/traces, data/ and data/bench/ under the nine
# policies test-core-pipeline uses.  Each golden file holds the command's stdout and then a line
# `rc=N` with its exit status (stderr is left out: messages may improve without the passes'
# output changing); the pass times in the trace headers ("took N milliseconds") are masked.
#
#   goldens.sh make  CLI OUTDIR    write every golden into OUTDIR
#   goldens.sh check CLI           compare against tests/golden/SHA256SUMS; TAP, one subtest per
#                                  input trace; a failure names the outputs that differ (the full
#                                  goldens are in tests/golden/goldens.tar.xz)
#
# The goldens were made by ea291c5 (the last round's landing).  A commit that changes one says
# why, and regenerates SHA256SUMS and goldens.tar.xz with `make`.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
shared=${CS_SHARED_TRACES:-$root/../shared/traces}

policies=(
  default
  matmul=upcast-f32
  elementwise=native
  fusion=dataflow
  fuse-matmul=on,fuse-linear=on
  redundant-casts=keep
  autocast=bf16
  fusion=off
  fusion=dataflow,matmul=upcast-f32,fuse-linear=on
)

# inputs: "group/name.txt" relative names with their path, one per line
inputs() {
  local f
  if [ -d "$shared" ]; then
    for f in "$shared"/*.txt; do printf 'shared/%s\t%s\n' "$(basename "$f")" "$f"; done
  fi
  for f in "$root"/data/*.txt; do printf 'data/%s\t%s\n' "$(basename "$f")" "$f"; done
  for f in "$root"/data/bench/*.txt; do printf 'data-bench/%s\t%s\n' "$(basename "$f")" "$f"; done
}

# golden CLI INPUT-PATH NAME OUTDIR: every output of one input into OUTDIR/NAME.<policy>.<cmd>.
# The CLI runs in the input's folder on its bare file name, so `stats --json`'s "file" field
# holds no machine path (the goldens are the same in every checkout).
golden() {
  local cli=$1 path=$2 name=$3 out=$4 p args kv x pn dir base
  dir=$(dirname "$path")
  base=$(basename "$path")
  for p in "${policies[@]}"; do
    args=()
    if [ "$p" != default ]; then
      IFS=, read -ra kv <<< "$p"
      for x in "${kv[@]}"; do args+=(--policy "$x"); done
    fi
    pn=${p//[=,]/_}
    { (cd "$dir" && "$cli" transform "$base" "${args[@]}" --all-passes 2>/dev/null); echo "rc=$?"; } \
      | sed 's/(took [0-9]* milliseconds)/(took N milliseconds)/' > "$out/$name.$pn.transform"
    { (cd "$dir" && "$cli" stats "$base" "${args[@]}" --json 2>/dev/null); echo "rc=$?"; } \
      > "$out/$name.$pn.stats"
  done
}

cmd=${1:-}
cli=${2:-}
if [ -z "$cli" ] || [ ! -x "$cli" ]; then
  echo "usage: goldens.sh make CLI OUTDIR | check CLI  (CLI: the built castscope-cli)" >&2
  exit 2
fi
cli=$(realpath "$cli")

case "$cmd" in
  make)
    out=${3:?OUTDIR}
    mkdir -p "$out"
    while IFS=$'\t' read -r rel path; do
      name=${rel//\//__}; name=${name%.txt}
      golden "$cli" "$path" "$name" "$out"
    done < <(inputs)
    (cd "$out" && sha256sum -- * > "$here/SHA256SUMS.new") && mv "$here/SHA256SUMS.new" "$here/SHA256SUMS"
    tar -cJf "$here/goldens.tar.xz" -C "$out" .
    echo "goldens: $(wc -l < "$here/SHA256SUMS") outputs in $out; SHA256SUMS and goldens.tar.xz written"
    ;;
  check)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mapfile -t rows < <(inputs)
    expected_shared=$(grep -c '^[0-9a-f]*  shared__' "$here/SHA256SUMS")
    n=${#rows[@]}
    [ -d "$shared" ] || n=$((n + 1))
    echo "1..$n"
    i=0 failed=0
    if [ ! -d "$shared" ]; then
      i=$((i + 1))
      echo "ok $i - shared traces # SKIP $shared is absent: $expected_shared golden outputs of ../shared/traces not checked"
    fi
    for row in "${rows[@]}"; do
      IFS=$'\t' read -r rel path <<< "$row"
      name=${rel//\//__}; name=${name%.txt}
      i=$((i + 1))
      golden "$cli" "$path" "$name" "$tmp"
      want=$(grep "  $name\.[^.]*\.[a-z]*$" "$here/SHA256SUMS")
      if [ -z "$want" ]; then
        echo "not ok $i - $rel: no golden in SHA256SUMS (a new input: regenerate with 'make')"
        failed=$((failed + 1))
        continue
      fi
      bad=$(cd "$tmp" && sha256sum --quiet -c - <<< "$want" 2>&1 | sed -n 's/: FAILED.*//p' | tr '\n' ' ')
      if [ -n "$bad" ]; then
        echo "not ok $i - $rel: differs from the golden: $bad"
        failed=$((failed + 1))
      else
        echo "ok $i - $rel ($(wc -l <<< "$want") outputs)"
      fi
      rm -f "$tmp"/*
    done
    [ "$failed" -eq 0 ]
    ;;
  *)
    echo "usage: goldens.sh make CLI OUTDIR | check CLI" >&2
    exit 2
    ;;
esac
