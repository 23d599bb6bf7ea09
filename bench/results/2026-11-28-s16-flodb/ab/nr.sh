#!/bin/bash
# nr.sh OUT ROUNDS BIN... : noregress's command, Membuffer on, binaries alternating
OUT=$1; ROUNDS=$2; shift 2
for r in $(seq 1 $ROUNDS); do for B in "$@"; do
 /work/runs/bin/$B --engines cairn-membuffer --benchmarks fillrandom,readrandom,readwhilewriting --num 2000000 --threads 1,2 --writer_ops_per_sec 100000 --repetitions 1 --db /tmp/nr-db --out /tmp/nr-out --no_plots --progress false 2>&1 | grep "rep 1" | sed "s/^/$B /" >> $OUT
 rm -rf /tmp/nr-db
done; done
