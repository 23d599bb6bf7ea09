#!/bin/bash
cd /work/main
export CAIRN_BENCH=/work/runs/bin/cairn-bench-s15a
REPS=8 bench/flodb/run.sh noregress /work/runs/s15/m2 > /work/runs/s15/m2-noregress.log 2>&1
date >> /work/runs/s15/m2-noregress.log
