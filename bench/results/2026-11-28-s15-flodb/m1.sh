#!/bin/bash
cd /work/main
export CAIRN_BENCH=/work/runs/bin/cairn-bench-s15a
REPS=6 bench/flodb/run.sh scan /work/runs/s15/m1 > /work/runs/s15/m1-scan.log 2>&1
date >> /work/runs/s15/m1-scan.log
REPS=6 bench/flodb/run.sh noregress /work/runs/s15/m1 > /work/runs/s15/m1-noregress.log 2>&1
date >> /work/runs/s15/m1-noregress.log
