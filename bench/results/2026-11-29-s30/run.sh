#!/usr/bin/env bash
# Session 30's runs, in order. BIN: release cairn-bench built with
# `--features rocksdb,leveldb,flodb-variants`.
#   BIN=... run.sh OUT [STEP...]
# STEP (default: all but fig17-ab, in this order; never run two at once on a 2-core machine):
#   scan-instructions: YCSB E (1 thread, 200,000 keys, 200,000 operations) under callgrind,
#     counting only the instructions inside the benchmark's scan call
#     (`--toggle-collect='*CairnEngine*Engine*scan*'`), so loading, inserts and background
#     threads do not count; the operations are the same in every run (seeded), so the totals
#     compare directly. Every cairn variant BIN has, one at a time. Needs valgrind, and a copy
#     of BIN without debug info (valgrind cannot read the peers').
#   ycsb-e: session 27's step (Membuffer on, the default: bypassed when scans dominate, vs
#     off), then the same with the Membuffer never bypassed (`cairn-membuffer-nobypass`).
#   scan-write: session 28's step (flodb_scan_write: 95 % updates, 5 % scans; the Membuffer
#     must stay, and stay no slower).
#   ycsb-e-rocksdb: YCSB E with RocksDB beside cairn on and off (3 interleaved phases each).
#   fig17-ab: FloDB Fig. 17's cell (2 threads, 4 GiB, WAL off, sealed buffers dropped),
#     OLD_BIN (another build) and BIN alternating, three times each: the write path's extra
#     load.
set -euo pipefail
BIN="${BIN:?release cairn-bench}"
OUT="${1:?output directory}"
shift
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
DB="$(mktemp -d "${TMPDIR:-/tmp}/cairn-s30.XXXXXX")"
count() { grep -h "Collected" "$1" | awk '{print $4}'; }
for step in "${@:-scan-instructions ycsb-e scan-write}"; do
  for one in $step; do
    case "$one" in
      scan-instructions)
        cp "$BIN" "$DB/bench" && strip --strip-debug "$DB/bench"
        for engine in cairn-membuffer cairn-membuffer-nobypass cairn-nomembuffer; do
          valgrind --tool=callgrind --callgrind-out-file="$DB/cg.out" \
            --toggle-collect='*CairnEngine*Engine*scan*' "$DB/bench" \
            --engines "$engine" --benchmarks compact,ycsb_e --num 200000 --reads 200000 \
            --threads 1 --repetitions 1 --warmup false --db "$DB/db" --out "$DB/out" \
            --no_plots --progress false > "$DB/log" 2> "$DB/err"
          echo "$engine: $(count "$DB/err") instructions in the scans of 200000 operations"
          rm -rf "$DB/db" "$DB/out"
        done > "$OUT/scan-instructions.txt" ;;
      ycsb-e)
        BIN="$BIN" "$HERE/../2026-11-29-s27/run.sh" "$OUT" ycsb-e
        "$BIN" --engines cairn-membuffer-nobypass,cairn-nomembuffer --interleave_phases \
          --benchmarks "compact$(printf ',ycsb_e%.0s' $(seq 12))" --num 2000000 --threads 1,2 \
          --duration 10 --repetitions 2 --db "$DB/db" --out "$OUT/ycsbe-nobypass" --no_plots \
          --progress false > "$OUT/ycsbe-nobypass.txt" 2>&1
        rm -rf "$DB/db" ;;
      scan-write)
        BIN="$BIN" "$HERE/../2026-11-29-s28/run.sh" "$OUT" scan-write ;;
      ycsb-e-rocksdb)
        "$BIN" --engines cairn-membuffer,cairn-nomembuffer,rocksdb --interleave_phases \
          --benchmarks "compact$(printf ',ycsb_e%.0s' $(seq 3))" --num 2000000 --threads 1,2 \
          --duration 10 --repetitions 1 --db "$DB/db" --out "$OUT/ycsbe-rocksdb" --no_plots \
          --progress false > "$OUT/ycsbe-rocksdb.txt" 2>&1
        rm -rf "$DB/db" ;;
      fig17-ab)
        OLD_BIN="${OLD_BIN:?another cairn-bench}" BIN="$BIN" \
          "$HERE/../2026-11-29-s29/run.sh" "$OUT" fig17-ab ;;
      *) echo "unknown step $one" >&2; exit 2 ;;
    esac
  done
done
rmdir "$DB" 2>/dev/null || true
