#!/bin/bash
# The session's final acceptance runs, one after another, binary $1, out dir $2.
BIN=$1; OUT=$2
cd /work/main
export CAIRN_BENCH=$BIN
REPS=3 EXTRA="--writer_ops_per_sec 100000" bench/flodb/run.sh noregress $OUT > $OUT/noregress.log 2>&1
REPS=3 bench/flodb/run.sh scan $OUT > $OUT/scan.log 2>&1
REPS=3 bench/flodb/run.sh fig15 $OUT > $OUT/fig15.log 2>&1
REPS=3 bench/flodb/run.sh fig16 $OUT > $OUT/fig16.log 2>&1
REPS=1 bench/flodb/run.sh fig17 $OUT > $OUT/fig17.log 2>&1
echo done > $OUT/DONE
