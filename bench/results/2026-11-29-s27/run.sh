#!/usr/bin/env bash
# Session 27's runs, in order. BIN: release cairn-bench built with
# `--features rocksdb,leveldb,flodb-variants`; OLD: a second binary for the A/B step.
#   BIN=... [OLD=...] run.sh OUT [STEP...]
# STEP: fig17-variants, fig17-partitions, fig17-ab, ycsb-e, fig15-alternating, fig16,
# noregress
# (default: all, in that order). Never run two at once on a 2-core machine.
set -euo pipefail
BIN="${BIN:?release cairn-bench}"
OUT="${1:?output directory}"
shift
mkdir -p "$OUT"
DB="$(mktemp -d "${TMPDIR:-/tmp}/cairn-s27.XXXXXX")"
# One Fig. 17 cell: 2 threads, 4 GiB, multi-insert, one repetition.
fig17_cell() { # fig17_cell BINARY EXTRA-FLAGS...
  local binary="$1"
  shift
  "$binary" --engines cairn-membuffer --benchmarks fillrandom --disable_wal --drop_sealed \
    --num 20000000 --key_size 16 --value_size 100 --threads 2 \
    --write_buffer_size $((4096 << 20)) --warmup false --repetitions 1 --db "$DB/db" \
    --out "$DB/out" --no_plots --progress false "$@" 2>&1 | grep -E "rep [0-9]"
  rm -rf "$DB/db"
}
for step in "${@:-fig17-variants fig17-partitions fig17-ab ycsb-e fig15-alternating fig16 noregress}"; do
  for one in $step; do
    case "$one" in
      fig17-variants)
        for flags in "--membuffer_drainers 1" "--membuffer_drainers 0" \
          "--membuffer_partitions 64" "--membuffer_partitions 256" "--membuffer_drainers 1"; do
          echo "== $flags"
          # shellcheck disable=SC2086
          fig17_cell "$BIN" $flags
          # shellcheck disable=SC2086
          fig17_cell "$BIN" $flags
        done > "$OUT/fig17-variants.txt" ;;
      fig17-partitions)
        for round in 1 2 3 4; do
          for partitions in 16 64 256; do
            echo "== p=$partitions i=$round"
            fig17_cell "$BIN" --membuffer_partitions "$partitions"
          done
        done > "$OUT/fig17-partitions.txt" ;;
      fig17-ab)
        for round in 1 2 3 4; do
          for binary in "${OLD:?OLD binary}" "$BIN"; do
            echo "== $binary i=$round"
            fig17_cell "$binary"
          done
        done > "$OUT/fig17-drop-filters.txt" ;;
      ycsb-e)
        "$BIN" --engines cairn-membuffer,cairn-nomembuffer --interleave_phases \
          --benchmarks "compact$(printf ',ycsb_e%.0s' $(seq 12))" --num 2000000 --threads 1,2 \
          --duration 10 --repetitions 2 --db "$DB/db" --out "$OUT/ycsbe" --no_plots \
          --progress false > "$OUT/ycsbe.txt" 2>&1
        rm -rf "$DB/db" ;;
      fig15-alternating)
        for round in 1 2 3 4 5; do
          for mib in 512 1024 2048; do
            echo "== budget ${mib}MiB i=$round"
            "$BIN" --engines cairn-membuffer --benchmarks flodb_burst --threads 2 \
              --write_buffer_size $((mib << 20)) --warmup false --repetitions 1 --db "$DB/db" \
              --out "$DB/out" --no_plots --progress false 2>&1 | grep -E "rep [0-9]"
            rm -rf "$DB/db"
          done
        done > "$OUT/fig15-alternating.txt" ;;
      fig16) CAIRN_BENCH="$BIN" REPS=2 BUDGETS="64 256" bench/flodb/run.sh fig16 "$OUT" ;;
      noregress) CAIRN_BENCH="$BIN" REPS=3 bench/flodb/run.sh noregress "$OUT" ;;
      *) echo "unknown step $one" >&2; exit 2 ;;
    esac
  done
done
rm -rf "$DB"
