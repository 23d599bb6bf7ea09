#!/bin/bash
# The three styles of docs/tuning.md's "Styles" table, re-run with one binary (default 7 levels).
set -u
BENCH=$1; OUT=$2; DB=${3:-/tmp/s5-styles-db}
mkdir -p "$OUT"
TREE="--engines cairn --num 8000000 --reads 300000 --level1_size 4194304 --write_buffer_size 1048576 --threads 1 --repetitions 1 --warmup false --no_plots --progress false --db $DB"
SHAPE_BENCH="fillrandom,settle,readrandom,multireadrandom,readmissing,seekrandom:0,seekrandom:9,seekrandom:99,seekrandom:999"
run() { local name=$1; shift; echo "$(date -u +%H:%M:%S) start $name"; "$BENCH" "$@" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1 || echo "FAILED $name"; echo "$(date -u +%H:%M:%S) end $name"; }
run style-leveling-T10 $TREE --benchmarks $SHAPE_BENCH --compaction_style leveling --fanout 10
run style-lazy-T10-D4 $TREE --benchmarks $SHAPE_BENCH --compaction_style lazy --fanout 10 --runs_per_level 4
run style-tiering-T10-D4 $TREE --benchmarks $SHAPE_BENCH --compaction_style tiering --fanout 10 --runs_per_level 4
