#!/usr/bin/env bash
# Session 28's runs, in order. BIN: release cairn-bench built with
# `--features rocksdb,leveldb,flodb-variants`.
#   BIN=... run.sh OUT [STEP...]
# STEP: version-install, ceiling, ycsb-e (session 27's step), scan-write (default: all, in
# that order). Never run two at once on a 2-core machine. version-install times this tree's
# example; to time another commit, build the same example there (it needs `cairn::testing`).
set -euo pipefail
BIN="${BIN:?release cairn-bench}"
OUT="${1:?output directory}"
shift
mkdir -p "$OUT"
DB="$(mktemp -d "${TMPDIR:-/tmp}/cairn-s28.XXXXXX")"
for step in "${@:-version-install ceiling ycsb-e scan-write}"; do
  for one in $step; do
    case "$one" in
      version-install)
        cargo build --release -q -p cairn --features testing --example version_install
        for files in 1000 10000 50000; do
          target/release/examples/version_install "$files" 1000 3
        done > "$OUT/version-install.txt" ;;
      ceiling)
        # Fig. 17's cell (2 threads, 4 GiB, WAL off, sealed buffers dropped) beside the
        # in-memory hash tables the benchmark knows, which ignore the cairn-only flags.
        "$BIN" --engines cairn-membuffer,dashmap,rwlock-hashmap,memstore --interleave_phases \
          --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 \
          --value_size 100 --threads 1,2 --write_buffer_size $((4096 << 20)) --warmup false \
          --repetitions 2 --db "$DB/db" --out "$OUT/ceiling" --no_plots --progress false \
          > "$OUT/ceiling.txt" 2>&1
        rm -rf "$DB/db" ;;
      ycsb-e)
        # Session 27's step, unchanged: 24 interleaved pairs per thread count.
        BIN="$BIN" "$(dirname "$0")/../2026-11-29-s27/run.sh" "$OUT" ycsb-e ;;
      scan-write)
        "$BIN" --engines cairn-membuffer,cairn-nomembuffer,rocksdb --interleave_phases \
          --benchmarks "compact$(printf ',flodb_scan_write%.0s' $(seq 6))" --num 2000000 \
          --threads 1,2 --duration 10 --repetitions 2 --db "$DB/db" --out "$OUT/scanwrite" \
          --no_plots --progress false > "$OUT/scanwrite.txt" 2>&1
        rm -rf "$DB/db" ;;
      *) echo "unknown step $one" >&2; exit 2 ;;
    esac
  done
done
rmdir "$DB" 2>/dev/null || true
