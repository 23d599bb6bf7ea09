#!/bin/bash
# thr.sh OUT REPS: drain threshold 1/2 (s18-c) vs 3/4 (s18-thr), alternating binaries
O=$1; REPS=${2:-3}; mkdir -p $O
for rep in $(seq $REPS); do
for tag in c thr; do
  B=${BIN_PREFIX:-target/release/cairn-bench-}$tag; db=$(mktemp -d /tmp/thr.XXXX)
  $B --engines cairn-membuffer --benchmarks compact,flodb_scan_write --num 2000000 --threads 1,2 --duration 10 --repetitions 1 --db $db --out $O/scan-$tag-$rep --no_plots --progress false 2>&1 | grep "rep 1/1" | grep -v compact | sed "s/^/$tag /" | tee -a $O/summary
  $B --engines cairn-membuffer --benchmarks fillrandom --num 2000000 --threads 1,2 --repetitions 1 --db $db --out $O/fill-$tag-$rep --no_plots --progress false 2>&1 | grep "rep 1/1" | sed "s/^/$tag /" | tee -a $O/summary
  rm -rf $db
done; done
