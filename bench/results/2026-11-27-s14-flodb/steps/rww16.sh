#!/bin/bash
# usage: rww16.sh BIN CAP OUT  -- 16 interleaved readwhilewriting pairs per thread count after an ops-bounded fill
BIN=$1; CAP=$2; OUT=$3
R=readwhilewriting; B=fillrandom,settle; for i in $(seq 16); do B=$B,$R; done
$BIN --engines cairn-membuffer,cairn-nomembuffer --interleave_phases --num 2000000 --reads 1000000 --threads 1,2 --repetitions 1 --warmup false --writer_ops_per_sec $CAP --benchmarks $B --db /tmp/nrdb --out $OUT --no_plots --progress false
