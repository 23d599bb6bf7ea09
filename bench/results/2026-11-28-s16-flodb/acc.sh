#!/bin/bash
# Session 16 acceptance runs with the final binary, nothing else running.
set -x
cd /work/wt16b
export CAIRN_BENCH=/work/runs/bin/s16-final
OUT=/work/runs/s16/acc
REPS=1 bench/flodb/run.sh fig17 $OUT > $OUT/fig17.log 2>&1
REPS=4 bench/flodb/run.sh scan $OUT > $OUT/scan.log 2>&1
REPS=3 bench/flodb/run.sh noregress $OUT > $OUT/noregress.log 2>&1
REPS=3 BUDGETS="1024 2048" bench/flodb/run.sh fig15 $OUT > $OUT/fig15.log 2>&1
echo ALLDONE > $OUT/done
