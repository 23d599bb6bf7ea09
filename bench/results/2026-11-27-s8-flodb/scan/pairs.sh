#!/usr/bin/env bash
# Membuffer on against off, phase by phase in one process (--interleave_phases):
#   CAIRN_BENCH=<release cairn-bench> [BENCH=flodb_scan_write] [PAIRS=8] [DUR=5] pairs.sh NAME [THREADS]
# writes NAME.log and prints the paired throughput ratios (ilpairs.py, one directory up).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
list=$(python3 -c "print(','.join(['${BENCH:-flodb_scan_write}']*${PAIRS:-8}))")
db="$(mktemp -d)"
"${CAIRN_BENCH:-target/release/cairn-bench}" --engines cairn-membuffer,cairn-nomembuffer \
  --interleave_phases --num 2000000 --threads "${2:-1}" --duration "${DUR:-5}" --repetitions 1 \
  --warmup false --no_plots --progress false --db "$db" --benchmarks "$list" --out "$db/out" \
  > "$1.log" 2>&1
rm -rf "$db"
python3 "$here/../ilpairs.py" "$1.log" cairn-membuffer cairn-nomembuffer
