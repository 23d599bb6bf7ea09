#!/bin/bash
# Session 19 acceptance runs with the final binary (drainers take a table at 3/4 full),
# nothing else running. Usage: CAIRN_BENCH=... acc.sh OUT
set -x
cd "$(git rev-parse --show-toplevel)"
export CAIRN_BENCH=${CAIRN_BENCH:-target/release/cairn-bench}
OUT=${1:-/tmp/s19-acc}
mkdir -p $OUT
REPS=3 bench/flodb/run.sh noregress $OUT > $OUT/noregress.log 2>&1
REPS=3 bench/flodb/run.sh fig15 $OUT > $OUT/fig15.log 2>&1
REPS=4 bench/flodb/run.sh scan $OUT > $OUT/scan.log 2>&1
REPS=2 bench/flodb/run.sh fig17 $OUT > $OUT/fig17.log 2>&1
REPS=1 bench/flodb/run.sh fig16 $OUT > $OUT/fig16.log 2>&1
echo ALLDONE > $OUT/done
