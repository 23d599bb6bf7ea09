#!/bin/bash
cd /work/wt-min
export CAIRN_BENCH=/work/runs/bin/cairn-bench-s15c
REPS=6 bench/flodb/run.sh scan /work/runs/s15/m3 > /work/runs/s15/m3-scan.log 2>&1
REPS=4 bench/flodb/run.sh noregress /work/runs/s15/m3 > /work/runs/s15/m3-noregress.log 2>&1
echo finished >> /work/runs/s15/m3-noregress.log
