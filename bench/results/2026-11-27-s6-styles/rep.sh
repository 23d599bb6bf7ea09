#!/usr/bin/env bash
# Lazy leveling vs leveling point lookups with the borrowed-view binary (issue 20), after quiet2.
set -u
BENCH=/work/runs/bin/cairn-bench-view0; OUT=/work/runs/s6/styles; DB=/tmp/s6-styles-db
while pgrep -f quiet2.sh > /dev/null; do sleep 10; done
mkdir -p $OUT
TREE="--engines cairn --num 8000000 --reads 300000 --level1_size 4194304 --write_buffer_size 1048576 --threads 1 --repetitions 1 --warmup false --no_plots --progress false --db $DB"
RB="fillrandom,settle,readrandom,readmissing"
for rep in 1 2 3; do
  for style in leveling lazy; do
    extra=""; [ $style = lazy ] && extra="--runs_per_level 4"
    echo "$(date -u +%T) $style rep$rep"
    "$BENCH" $TREE --benchmarks $RB --compaction_style $style --fanout 10 $extra --out "$OUT/$style-rep$rep" > "$OUT/$style-rep$rep.txt" 2>&1 || echo FAILED
  done
done
echo "end $(date -u +%T)"
