#!/usr/bin/env bash
# Paired comparison of two revisions of cairn with cairn-bench.
#
#   bench/compare.sh OLD_REV NEW_REV [-n REPS] -- <cairn-bench args>
#
# Builds `cairn-bench` (release, cairn engine only) at both revisions in throwaway git worktrees,
# then runs them interleaved REPS times (old, new, new, old, ... so neither side always runs
# first), one measured repetition per run. Prints, per benchmark and thread count, each
# repetition's new/old throughput ratio with both runs' placement tags, and the paired median.
# "No regression" in this project means a paired median >= 0.95 over >= 5 repetitions.
# Results (every run's JSON and the summary) go to $COMPARE_OUT (default /tmp/cairn-compare).
# Every run gets its own database directory (mktemp -d, removed after it) unless the
# cairn-bench args name a --db: an OLD_REV from before private default roots would otherwise
# share /tmp/cairn-bench-db with any other run on the machine and wipe its tables.
set -euo pipefail
usage() { echo "usage: $0 OLD_REV NEW_REV [-n REPS] -- <cairn-bench args>" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
old_rev=$1 new_rev=$2; shift 2
reps=5
while [[ $# -gt 0 && $1 != "--" ]]; do
  case $1 in
    -n) reps=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $# -gt 0 ]] && shift
bench_args=("$@")
repo=$(git rev-parse --show-toplevel)
out=${COMPARE_OUT:-/tmp/cairn-compare}
builds=${COMPARE_BUILDS:-/tmp/cairn-compare-builds}
mkdir -p "$out" "$builds"

build() { # build REV -> prints the binary's path
  local rev commit dir
  rev=$1
  commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}")
  dir="$builds/$commit"
  if [[ ! -x "$dir/cairn-bench" ]]; then
    rm -rf "$dir.src"
    git -C "$repo" worktree add --detach -f "$dir.src" "$commit" >&2
    CARGO_TARGET_DIR="$builds/target" cargo build --release -q -p cairn-bench \
      --manifest-path "$dir.src/Cargo.toml" >&2
    mkdir -p "$dir"
    cp "$builds/target/release/cairn-bench" "$dir/cairn-bench"
    git -C "$repo" worktree remove --force "$dir.src" >&2
  fi
  echo "$dir/cairn-bench"
}
old_bin=$(build "$old_rev")
new_bin=$(build "$new_rev")
echo "old $old_rev: $old_bin" >&2
echo "new $new_rev: $new_bin" >&2

own_db=true
for arg in ${bench_args[@]+"${bench_args[@]}"}; do
  if [[ $arg == --db || $arg == --db=* ]]; then own_db=false; fi
done
db_dir=""
trap 'if [[ -n $db_dir ]]; then rm -rf "$db_dir"; fi' EXIT

run() { # run SIDE REP BIN
  local db=()
  if $own_db; then
    db_dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-compare-db.XXXXXX")
    db=(--db "$db_dir")
  fi
  "$3" --engines cairn --repetitions 1 --no_plots --progress false ${db[@]+"${db[@]}"} \
    ${bench_args[@]+"${bench_args[@]}"} \
    --out "$out/$1-$2" --json "$out/$1-$2.json" > "$out/$1-$2.txt" 2>&1
  if [[ -n $db_dir ]]; then rm -rf "$db_dir"; db_dir=""; fi
}
for ((rep = 1; rep <= reps; rep++)); do
  if ((rep % 2)); then run old "$rep" "$old_bin"; run new "$rep" "$new_bin"
  else run new "$rep" "$new_bin"; run old "$rep" "$old_bin"; fi
  echo "repetition $rep of $reps done" >&2
done
python3 "$repo/bench/compare.py" "$out" "$reps" "$old_rev" "$new_rev" | tee "$out/summary.txt"
