#!/usr/bin/env bash
# Session 31's runs: BIN=path/to/cairn-bench run.sh OUT [STEP...]
#
# STEP: grid, many, glibc, profile, profile64 (default: all, in that order). BIN is a release
# cairn-bench built with `--features rocksdb,leveldb,flodb-variants` (session 31: `s31-a`).
set -euo pipefail
cd "$(dirname "$0")/../../.."
BIN="${BIN:?a cairn-bench binary}"
OUT="${1:?an output directory}"
shift
mkdir -p "$OUT"
DB="$(mktemp -d "${TMPDIR:-/tmp}/cairn-s31.XXXXXX")"

fill() { # fill THREADS BUDGET_MIB [ENGINES]: Fig. 17's fill, one repetition
  "$BIN" --engines "${3:-cairn-membuffer}" --benchmarks fillrandom --disable_wal --drop_sealed \
    --num 20000000 --key_size 16 --value_size 100 --threads "$1" \
    --write_buffer_size $(($2 << 20)) --warmup false --repetitions 1 --db "$DB/db" \
    --out "$DB/out" --no_plots --progress false 2>&1 | grep "fillrandom t="
  rm -rf "$DB/db" "$DB/out"
}

for step in "${@:-grid many glibc profile profile64}"; do
  for one in $step; do
    case "$one" in
      grid)
        # The whole Fig. 17 grid: 3 variants x 1, 2 threads x 256 MiB, 1 GiB, 4 GiB, 3
        # interleaved repetitions; then the tables and the plot.
        CAIRN_BENCH="$BIN" REPS=3 DB_DIR="$DB/grid" bench/flodb/run.sh fig17 "$OUT"
        python3 bench/flodb/plot.py "$OUT" ;;
      many)
        # 16 and 64 threads at 4 GiB: nothing collapses.
        mkdir -p "$OUT/many"
        "$BIN" --engines cairn-membuffer,cairn-nomembuffer --benchmarks fillrandom \
          --disable_wal --drop_sealed --num 20000000 --key_size 16 --value_size 100 \
          --threads 16,64 --write_buffer_size $((4096 << 20)) --warmup false --repetitions 1 \
          --db "$DB/db" --out "$OUT/many" --no_plots --progress false > "$OUT/many/run.log" 2>&1
        rm -rf "$DB/db" ;;
      glibc)
        # Fresh-page faults: glibc keeping freed memory (no trimming, no mmap for chunks up
        # to 32 MiB), then transparent huge pages through glibc, each against the default.
        for round in 1 2; do
          echo base; fill 1 4096
          echo tun
          GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184 \
            fill 1 4096
        done > "$OUT/glibc-no-trim.txt"
        for round in 1 2; do
          echo base; fill 1 4096
          echo thp; GLIBC_TUNABLES=glibc.malloc.hugetlb=1 fill 1 4096
        done > "$OUT/glibc-hugetlb.txt" ;;
      profile)
        # Where one writer's time goes, 256 MiB against 4 GiB (perf, cpu-clock sampling).
        for budget in 256 4096; do
          perf record -F 2999 -e cpu-clock -o "$DB/perf.data" -- "$BIN" --engines cairn-membuffer \
            --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 \
            --value_size 100 --threads 1 --write_buffer_size $((budget << 20)) --warmup false \
            --repetitions 1 --db "$DB/db" --out "$DB/out" --no_plots --progress false \
            2>&1 | grep "fillrandom t="
          perf report -i "$DB/perf.data" --no-children --sort comm,sym 2>/dev/null \
            | grep -v '^#' | grep -v '^$' | head -40 > "$OUT/profile-$budget-1t.txt"
          rm -rf "$DB/db" "$DB/out" "$DB/perf.data"
        done ;;
      profile64)
        # Where the extra CPU per put goes with 64 writers on two cores (4 GiB).
        perf record -F 1999 -e cpu-clock -o "$DB/perf.data" -- "$BIN" --engines cairn-membuffer \
          --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 \
          --value_size 100 --threads 64 --write_buffer_size $((4096 << 20)) --warmup false \
          --repetitions 1 --db "$DB/db" --out "$DB/out" --no_plots --progress false \
          2>&1 | grep "fillrandom t="
        perf report -i "$DB/perf.data" --no-children --sort sym 2>/dev/null \
          | grep -v '^#' | grep -v '^$' | head -40 > "$OUT/profile-4096-64t.txt"
        rm -rf "$DB/db" "$DB/out" "$DB/perf.data" ;;
      *) echo "unknown step $one" >&2; exit 2 ;;
    esac
  done
done
rm -rf "$DB"
