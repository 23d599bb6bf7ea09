#!/usr/bin/env bash
# No-regression A/B of two cairn-bench binaries, alternating per round (RocksDB beside each).
# Usage: ab.sh OUT ROUNDS BIN... (binaries in /work/runs/bin)
set -u
out=$1; rounds=$2; shift 2
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    /work/runs/bin/$bin --engines cairn,rocksdb --benchmarks fillrandom,readrandom \
      --num 1000000 --threads 1,2,16 --duration 4 \
      > "$out/$bin-r$round.txt" 2>&1
  done
done
