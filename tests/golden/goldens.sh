#!/usr/bin/env bash
# Golden outputs of the core pipeline, for the core redesign (issue 16): `transform --all-passes`
# and `stats --json` of every trace in ../shared/traces, data/ and data/bench/ under the nine
# policies test-core-pipeline uses.  Each golden file holds the command's stdout and then a line
# `rc=N` with its exit status (stderr is left out: messages may improve without the passes'
# output changing; a failed check prints it); the pass times in the trace headers ("took N
# milliseconds") are masked.
#
#   goldens.sh make  CLI OUTDIR    write every golden into OUTDIR
#   goldens.sh check CLI           compare against tests/golden/SHA256SUMS; TAP, one subtest per
#                                  input trace; a failure names the outputs that differ (the full
#                                  goldens are in tests/golden/goldens.tar.xz)
#   goldens.sh make-legacy CLI OUTDIR  write the legacy outputs into OUTDIR and their sums into
#                                  SHA256SUMS.legacy
#   goldens.sh legacy CLI          the same under the executors castscope had before issue 18:
#                                  every policy plus executors=nvfuser,torch and --grad all, the
#                                  stats' new lines (the policy's executors=, regions_by_executor)
#                                  left out, against SHA256SUMS.legacy (the goldens before issue
#                                  18); the outputs listed in LEGACY-CHANGES must differ (each
#                                  says why), every other one must be as it was
#
# The goldens were made by ea291c5 (the last round's landing) and changed on purpose since (see the
# commits that touch SHA256SUMS).  A commit that changes one says
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
# $legacy set: every run also gets executors=nvfuser,torch and --grad all, and the stats lose
# what issue 18 added to them (the policy's " executors=nvfuser,torch", "regions_by_executor")
# and the lens' "removed_user_casts".
legacy=
# The stats JSON less its members from "removed_user_casts" on (the precision lens' list and
# "duplicate_saved", both added after the legacy goldens were made); the rest of the text is
# left byte for byte.
drop_removed_user_casts() {
  python3 -c '
import sys
t = sys.stdin.read()
i = t.rfind(",\n  \"removed_user_casts\" : ")
if i >= 0:
    j = t.find("\n}\n", i)
    t = t[:i] + t[j:]
sys.stdout.write(t)'
}
# $errs set (check, legacy): each command's stderr goes to $errs/<output name>, which a failed
# subtest prints (the abort message of a sanitizer or of CASTSCOPE_CHECK_IO); else it is dropped.
errs=
golden() {
  local cli=$1 path=$2 name=$3 out=$4 p args kv x pn dir base e
  dir=$(dirname "$path")
  base=$(basename "$path")
  for p in "${policies[@]}"; do
    args=()
    if [ "$p" != default ]; then
      IFS=, read -ra kv <<< "$p"
      for x in "${kv[@]}"; do args+=(--policy "$x"); done
    fi
    [ -n "$legacy" ] && args+=(--policy executors=nvfuser,torch --grad all)
    pn=${p//[=,]/_}
    e=/dev/null
    [ -n "$errs" ] && e=$errs/$name.$pn.transform
    { (cd "$dir" && "$cli" transform "$base" "${args[@]}" --all-passes 2>"$e"); echo "rc=$?"; } \
      | sed 's/(took [0-9]* milliseconds)/(took N milliseconds)/' > "$out/$name.$pn.transform"
    [ -n "$errs" ] && e=$errs/$name.$pn.stats
    if [ -n "$legacy" ]; then
      { (cd "$dir" && "$cli" stats "$base" "${args[@]}" --json 2>"$e"); echo "rc=$?"; } \
        | sed -e 's/ executors=nvfuser,torch"/"/' -e '/"regions_by_executor" : {/,/}/d' \
        | drop_removed_user_casts > "$out/$name.$pn.stats"
    else
      { (cd "$dir" && "$cli" stats "$base" "${args[@]}" --json 2>"$e"); echo "rc=$?"; } \
        > "$out/$name.$pn.stats"
    fi
  done
}

# explain OUTPUT...: for each output that differs, its exit status line and the first 20 lines
# of the command's stderr, as TAP comments (CI logs keep them; the outputs are removed).
explain() {
  local o
  for o in "$@"; do
    echo "# $o: $(tail -n 1 "$tmp/$o" 2>/dev/null)"
    [ -s "$errs/$o" ] && head -n 20 "$errs/$o" | sed "s/^/#   /"
  done
  return 0
}

cmd=${1:-}
cli=${2:-}
if [ -z "$cli" ] || [ ! -x "$cli" ]; then
  echo "usage: goldens.sh make CLI OUTDIR | make-legacy CLI OUTDIR | check CLI | legacy CLI  (CLI: the built castscope-cli)" >&2
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
  make-legacy)
    # SHA256SUMS.legacy from the outputs under the pre-issue-18 executors (a change that moves
    # them on purpose says why in LEGACY-CHANGES' header)
    legacy=1
    out=${3:?OUTDIR}
    mkdir -p "$out"
    while IFS=$'\t' read -r rel path; do
      name=${rel//\//__}; name=${name%.txt}
      golden "$cli" "$path" "$name" "$out"
    done < <(inputs)
    (cd "$out" && sha256sum -- * > "$here/SHA256SUMS.legacy.new") \
      && mv "$here/SHA256SUMS.legacy.new" "$here/SHA256SUMS.legacy"
    echo "goldens: $(wc -l < "$here/SHA256SUMS.legacy") legacy outputs in $out; SHA256SUMS.legacy written"
    ;;
  legacy)
    # TAP, one subtest per input: its outputs under the pre-issue-18 executors as they were,
    # except those LEGACY-CHANGES lists, which must differ
    legacy=1
    tmp=$(mktemp -d)
    errs=$(mktemp -d)
    trap 'rm -rf "$tmp" "$errs"' EXIT
    mapfile -t rows < <(inputs)
    if [ ! -d "$shared" ]; then
      rows=()
      for f in "$root"/data/*.txt; do rows+=("$(printf 'data/%s\t%s' "$(basename "$f")" "$f")"); done
      for f in "$root"/data/bench/*.txt; do rows+=("$(printf 'data-bench/%s\t%s' "$(basename "$f")" "$f")"); done
    fi
    changes=$(sed -n 's/^\([^ #][^ ]*\) .*/\1/p' "$here/LEGACY-CHANGES")
    echo "1..${#rows[@]}"
    i=0 failed=0
    for row in "${rows[@]}"; do
      IFS=$'\t' read -r rel path <<< "$row"
      name=${rel//\//__}; name=${name%.txt}
      i=$((i + 1))
      golden "$cli" "$path" "$name" "$tmp"
      want=$(grep "  $name\.[^.]*\.[a-z]*$" "$here/SHA256SUMS.legacy")
      if [ -z "$want" ]; then
        echo "ok $i - $rel # SKIP no legacy golden (an input added after issue 18)"
        rm -f "$tmp"/* "$errs"/*
        continue
      fi
      bad=$(cd "$tmp" && sha256sum --quiet -c - <<< "$want" 2>&1 | sed -n 's/: FAILED.*//p' | sort)
      expect=$(grep "^$name\.[^.]*\.[a-z]*$" <<< "$changes" | sort)
      if [ "$bad" != "$expect" ]; then
        echo "not ok $i - $rel: differs from its pre-issue-18 golden: [$(tr '\n' ' ' <<< "$bad")]; LEGACY-CHANGES expects [$(tr '\n' ' ' <<< "$expect")]"
        # shellcheck disable=SC2086  # one word per output name
        explain $bad
        failed=$((failed + 1))
      else
        echo "ok $i - $rel ($(wc -l <<< "$want") outputs as before$([ -n "$expect" ] && echo ", $(wc -l <<< "$expect") changed as LEGACY-CHANGES says"))"
      fi
      rm -f "$tmp"/* "$errs"/*
    done
    [ "$failed" -eq 0 ]
    ;;
  check)
    tmp=$(mktemp -d)
    errs=$(mktemp -d)
    trap 'rm -rf "$tmp" "$errs"' EXIT
    mapfile -t rows < <(inputs)
    # the shared traces SHA256SUMS has goldens for: one subtest each, skipped when absent
    mapfile -t shared_names < <(sed -n 's/^[0-9a-f]*  shared__\(.*\)\.[^.]*\.[a-z]*$/\1/p' \
                                  "$here/SHA256SUMS" | sort -u)
    n=${#rows[@]}
    [ -d "$shared" ] || n=$((n + ${#shared_names[@]}))
    echo "1..$n"
    i=0 failed=0
    if [ ! -d "$shared" ]; then
      for s in "${shared_names[@]}"; do
        i=$((i + 1))
        echo "ok $i - shared/$s.txt # SKIP $shared is absent (../shared/traces): its $(grep -c "  shared__$s\." "$here/SHA256SUMS") golden outputs not checked"
      done
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
        # shellcheck disable=SC2086  # one word per output name
        explain $bad
        failed=$((failed + 1))
      else
        echo "ok $i - $rel ($(wc -l <<< "$want") outputs)"
      fi
      rm -f "$tmp"/* "$errs"/*
    done
    [ "$failed" -eq 0 ]
    ;;
  *)
    echo "usage: goldens.sh make CLI OUTDIR | make-legacy CLI OUTDIR | check CLI | legacy CLI" >&2
    exit 2
    ;;
esac
