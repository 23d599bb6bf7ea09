#!/bin/bash
# prof.sh BIN ENGINE THREADS OUT: perf of the ycsb_e phase only (first repetition)
BIN=$1; E=$2; T=$3; OUT=$4
$BIN --engines $E --benchmarks compact,ycsb_e --num 2000000 --threads $T --duration 10 --repetitions 1 > $OUT.txt 2>&1 &
PID=$!
until grep -q "compact t=$T" $OUT.txt; do sleep 0.2; done
sleep 0.5
perf record -F 1999 -g -p $PID -o $OUT.data -- sleep 8 2>/dev/null
wait $PID
