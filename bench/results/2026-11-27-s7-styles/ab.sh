#!/usr/bin/env bash
# Paired A/B of main (OLD: 6773d05) against this session's read path, default leveling, 1 thread.
OLD=${OLD:?release cairn-bench of the old revision}; NEW=${NEW:?release cairn-bench of the new one}
ARGS="--engines cairn --benchmarks readrandom --num 2000000 --reads 300000 --threads 1 --repetitions 1 --warmup false --no_plots --progress false"
for i in 1 2 3 4 5 6; do
  if [ $((i % 2)) = 1 ]; then order="OLD NEW"; else order="NEW OLD"; fi
  for which in $order; do
    bin=${!which}
    line=$($bin $ARGS --db /tmp/s7-ab --out /tmp/s7-ab-out 2>&1 | grep "rep 1/1 cairn readrandom")
    echo "$i $which $line"
  done
done
