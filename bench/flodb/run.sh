#!/usr/bin/env bash
# FloDB acceptance runs (issue 19): one command per figure, the grid as in the issue.
#
#   bench/flodb/run.sh fig17|fig15|fig16|scan|noregress|all   [OUT_DIR]
#
# Environment:
#   CAIRN_BENCH  release cairn-bench built with `--features rocksdb,leveldb,flodb-variants`
#                (default: target/release/cairn-bench)
#   REPS         measured repetitions per cell (default 3; engines interleaved)
#   DB_DIR       where the databases go, wiped after each run (default: a fresh mktemp -d
#                per run, so two of these scripts never share one)
#   EXTRA        extra cairn-bench flags appended to every command
#   BUDGETS      budgets in MiB to run instead of the figure's grid (e.g. "4096 1024")
#   FIG17_NUM    keys of the Fig. 17 fill (default 20000000)
#   PEERS        engines beside cairn's in fig15/fig16/scan (default rocksdb; "" for none)
#   RWW_WRITER_OPS  noregress's readwhilewriting writer pace in puts/s (default 100000; 0: unpaced)
#
# Every run writes OUT_DIR/<figure>/<budget>/results.json (+ the run's stdout in run.log);
# `python3 bench/flodb/plot.py OUT_DIR` then draws one throughput-vs-budget plot per figure
# and prints the tables (with the Membuffer counters) that go into the README.
set -euo pipefail

FIGURE="${1:-all}"
OUT="${2:-bench/results/2026-11-26-flodb}"
BIN="${CAIRN_BENCH:-target/release/cairn-bench}"
REPS="${REPS:-3}"
DB_DIR="${DB_DIR:-}"
EXTRA="${EXTRA:-}"
MIB=$((1 << 20))
PEERS="${PEERS-rocksdb}"
CAIRNS="cairn-membuffer,cairn-nomembuffer"
WITH_PEERS="$CAIRNS${PEERS:+,$PEERS}"
budgets() { echo "${BUDGETS:-$*}"; }

run() { # run FIGURE BUDGET_LABEL cairn-bench-args...
  local figure="$1" label="$2"
  shift 2
  local dir="$OUT/$figure/$label"
  local db="${DB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/cairn-flodb-db.XXXXXX")}"
  mkdir -p "$dir"
  echo "== $figure $label: $BIN $* --repetitions $REPS $EXTRA" | tee "$dir/run.log"
  # shellcheck disable=SC2086
  "$BIN" "$@" --repetitions "$REPS" --db "$db" --out "$dir" --no_plots --progress false \
    $EXTRA 2>&1 | tee -a "$dir/run.log"
  rm -rf "$db"
}

# FloDB Fig. 17: the memory component alone (WAL off, sealed memtables dropped), 20 M keys of
# 16 B with 100 B values, three variants, 1 and 2 threads, budgets 256 MiB, 1 GiB, 4 GiB.
fig17() {
  for budget in $(budgets 256 1024 4096); do
    run fig17 "${budget}MiB" --engines cairn-nomembuffer,cairn-simpleinsert,cairn-membuffer \
      --benchmarks fillrandom --disable_wal --drop_sealed --num "${FIG17_NUM:-20000000}" --key_size 16 \
      --value_size 100 --threads 1,2 --write_buffer_size $((budget * MIB)) --warmup false
  done
}

# FloDB Fig. 15: 10-second write burst, WAL on, 2 threads, budgets 128 MiB to 2 GiB.
fig15() {
  for budget in $(budgets 128 512 1024 2048); do
    run fig15 "${budget}MiB" --engines "$WITH_PEERS" \
      --benchmarks flodb_burst --threads 2 --write_buffer_size $((budget * MIB)) --warmup false
  done
}

# FloDB Fig. 16: 50 % reads / 50 % updates, 98 % of operations on 2 % of 20 M keys, budgets
# 16 MiB to 1 GiB, each measured phase 10 s.
fig16() {
  for budget in $(budgets 16 64 256 1024); do
    run fig16 "${budget}MiB" --engines "$WITH_PEERS" \
      --benchmarks flodb_skew --num 20000000 --threads 2 --write_buffer_size $((budget * MIB)) \
      --duration 10 --warmup false
  done
}

# flodb_scan_write (95 % updates, 5 % scans of 100 keys) and YCSB E, Membuffer on vs off.
# Each starts from a compacted tree: a scan's cost follows the sorted runs it merges, and
# without it YCSB E at 2 threads landed near 85 k or near 230 k ops/s as the preceding phase's
# flushes left three level-0 runs or none, whatever the memory component (session 17's run).
# `compact` is implemented for cairn and RocksDB only (PEERS=leveldb fails here).
scan() {
  run scan 64MiB --engines "$WITH_PEERS" \
    --benchmarks compact,flodb_scan_write,compact,ycsb_e --num 2000000 --threads 1,2 --duration 10
}

# No regression: fillrandom, readrandom, readwhilewriting at 1 and 2 threads, on vs off.
# readwhilewriting's writer is paced (RWW_WRITER_OPS puts/s, default 100000; 0 = unpaced):
# unpaced, the Membuffer's faster writer takes more of the two cores from the readers it is
# compared by (bench/README.md).
noregress() {
  run noregress 64MiB --engines cairn-membuffer,cairn-nomembuffer \
    --benchmarks fillrandom,readrandom,readwhilewriting --num 2000000 --threads 1,2 \
    --writer_ops_per_sec "${RWW_WRITER_OPS:-100000}"
}

case "$FIGURE" in
  fig17) fig17 ;;
  fig15) fig15 ;;
  fig16) fig16 ;;
  scan) scan ;;
  noregress) noregress ;;
  all) noregress; scan; fig15; fig16; fig17 ;;
  *) echo "usage: $0 fig17|fig15|fig16|scan|noregress|all [OUT_DIR]" >&2; exit 2 ;;
esac
