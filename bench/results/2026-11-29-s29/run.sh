#!/usr/bin/env bash
# Session 29's runs, in order. BIN: release cairn-bench built with
# `--features rocksdb,leveldb,flodb-variants`.
#   BIN=... run.sh OUT [STEP...]
# STEP: ycsb-e (session 27's step; run twice, kept as ycsbe-a.txt and ycsbe-b.txt),
# instructions, scan-instructions, scan-write (session 28's step), fig17-ab (needs OLD_BIN)
# (default: all but fig17-ab, in that order). Never run two at once on a 2-core machine.
#   instructions: YCSB E under callgrind (1 thread, 200,000 keys, 10 s and 30 s): the
#     instructions per operation of each engine are the difference of the two runs' totals
#     over the difference of their operations (load and compaction cancel out). Needs
#     valgrind, and a copy of BIN without debug info (valgrind cannot read the peers').
#   scan-instructions: `examples/scan_overhead.rs` under callgrind, counting `round` only:
#     the instructions the Membuffer adds to one scan. BASE (optional): a checkout of another
#     commit with that example copied in, counted the same way.
set -euo pipefail
BIN="${BIN:?release cairn-bench}"
OUT="${1:?output directory}"
shift
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
DB="$(mktemp -d "${TMPDIR:-/tmp}/cairn-s29.XXXXXX")"
count() { grep -h "Collected" "$1" | awk '{print $4}'; }
for step in "${@:-ycsb-e instructions scan-instructions scan-write}"; do
  for one in $step; do
    case "$one" in
      ycsb-e)
        BIN="$BIN" "$HERE/../2026-11-29-s27/run.sh" "$OUT" ycsb-e ;;
      instructions)
        cp "$BIN" "$DB/bench" && strip --strip-debug "$DB/bench"
        for engine in cairn-membuffer cairn-nomembuffer; do
          for seconds in 10 30; do
            valgrind --tool=callgrind --callgrind-out-file="$DB/cg.out" "$DB/bench" \
              --engines "$engine" --benchmarks compact,ycsb_e --num 200000 --threads 1 \
              --duration "$seconds" --repetitions 1 --warmup false --db "$DB/db" \
              --out "$DB/out" --no_plots --progress false > "$DB/log" 2> "$DB/err"
            ops=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print([r for r in d['results'] if r['benchmark']=='ycsb_e'][0]['runs'][0]['ops'])" \
              "$DB/out/results.json")
            echo "$engine $seconds s: $ops ops, $(count "$DB/err") instructions"
            rm -rf "$DB/db" "$DB/out"
          done
        done > "$OUT/instructions.txt" ;;
      scan-instructions)
        for tree in . ${BASE:-}; do
          (cd "$tree" && cargo build --release -q -p cairn --example scan_overhead)
          for mode in on off; do
            valgrind --tool=callgrind --callgrind-out-file="$DB/cg.out" \
              --toggle-collect='scan_overhead::round' \
              "$tree/target/release/examples/scan_overhead" "$mode" 1 1 > /dev/null 2> "$DB/err"
            echo "$(cd "$tree" && git rev-parse --short HEAD) $mode: $(count "$DB/err") instructions in 300000 scans"
          done
        done > "$OUT/scan-instructions.txt" ;;
      scan-write)
        BIN="$BIN" "$HERE/../2026-11-29-s28/run.sh" "$OUT" scan-write ;;
      fig17-ab)
        # Fig. 17's cell (2 threads, 4 GiB, WAL off, sealed buffers dropped), alternating
        # OLD_BIN (another build) and BIN, three times each.
        for round in 1 2 3; do
          for bin in "${OLD_BIN:?another cairn-bench}" "$BIN"; do
            "$bin" --engines cairn-membuffer --benchmarks fillrandom --disable_wal --drop_sealed \
              --num 20000000 --key_size 16 --value_size 100 --threads 2 \
              --write_buffer_size $((4096 << 20)) --warmup false --repetitions 1 --db "$DB/db" \
              --out "$DB/out" --no_plots --progress false 2>&1 | grep "fillrandom t=" \
              | sed "s|^|$(basename "$bin") |"
            rm -rf "$DB/db" "$DB/out"
          done
        done > "$OUT/fig17-ab.txt" ;;
      *) echo "unknown step $one" >&2; exit 2 ;;
    esac
  done
done
rm -rf "$DB"
