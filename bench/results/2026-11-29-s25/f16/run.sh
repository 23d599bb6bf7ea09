#!/bin/bash
# Fig. 16 cells at 64 and 256 MiB: s25-a (before the WAL bound) and s25-c (after), RocksDB beside s25-c.
for budget in 64 256; do
  /work/runs/bin/s25-a --engines cairn-membuffer --benchmarks flodb_skew --num 20000000 --threads 2 \
    --write_buffer_size $((budget << 20)) --duration 10 --warmup false --repetitions 2 > s25-a-${budget}.txt 2>&1
  /work/runs/bin/s25-c --engines cairn-membuffer,rocksdb --benchmarks flodb_skew --num 20000000 --threads 2 \
    --write_buffer_size $((budget << 20)) --duration 10 --warmup false --repetitions 2 > s25-c-${budget}.txt 2>&1
done
echo done
