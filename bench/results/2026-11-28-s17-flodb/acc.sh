#!/bin/bash
# Session 17 acceptance runs with the final binary, nothing else running.
set -x
cd "$(git rev-parse --show-toplevel)"
export CAIRN_BENCH=${CAIRN_BENCH:-target/release/cairn-bench}
OUT=${1:-/tmp/s17-acc}
mkdir -p $OUT
REPS=1 bench/flodb/run.sh fig17 $OUT > $OUT/fig17.log 2>&1
REPS=3 bench/flodb/run.sh noregress $OUT > $OUT/noregress.log 2>&1
REPS=4 bench/flodb/run.sh scan $OUT > $OUT/scan.log 2>&1
REPS=3 BUDGETS="1024 2048" bench/flodb/run.sh fig15 $OUT > $OUT/fig15.log 2>&1
echo ALLDONE > $OUT/done
