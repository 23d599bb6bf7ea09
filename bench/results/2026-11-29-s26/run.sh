#!/usr/bin/env bash
# Session 26's acceptance runs for issue 19, one after another with nothing else running.
# From the repository root:
#   BIN=/work/runs/bin/s26-final bench/results/2026-11-29-s26/run.sh OUT [STEP...]
# STEP: scan-write, ycsb-e, fig17, fig15, fig16 (default: all, in that order).
set -euo pipefail
BIN="${BIN:?release cairn-bench with --features rocksdb,leveldb,flodb-variants}"
OUT="${1:?output directory}"
shift
mkdir -p "$OUT"
# The scan point: engines interleaved phase by phase (each takes its turn going first), so
# each pair shares a minute of the machine and usually its placement. `pairs.py` reads it.
scans() { # scans NAME WORKLOAD REPETITIONS
  "$BIN" --engines cairn-membuffer,cairn-nomembuffer,rocksdb --interleave_phases \
    --benchmarks "compact$(printf ",$2%.0s" 1 2 3 4 5 6)" --num 2000000 --threads 1,2 \
    --duration 10 --repetitions "$3" --out "$OUT/$1" --no_plots --progress false \
    > "$OUT/$1.txt" 2>&1
}
for step in "${@:-scan-write ycsb-e fig17 fig15 fig16}"; do
  for one in $step; do
    case "$one" in
      scan-write) scans scan-write-il flodb_scan_write 3 ;;
      ycsb-e) scans ycsb-e-il ycsb_e 1 ;;
      fig17) CAIRN_BENCH="$BIN" REPS=2 bench/flodb/run.sh fig17 "$OUT" ;;
      fig15) CAIRN_BENCH="$BIN" REPS=3 bench/flodb/run.sh fig15 "$OUT" ;;
      fig16) CAIRN_BENCH="$BIN" REPS=2 BUDGETS="16 1024" bench/flodb/run.sh fig16 "$OUT" ;;
      *) echo "unknown step $one" >&2; exit 2 ;;
    esac
  done
done
