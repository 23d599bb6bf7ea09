#!/bin/bash
# usage: rww.sh BIN CAP OUT   (fill is ops-bounded: both engines hold the same keys)
BIN=$1; CAP=$2; OUT=$3
R=readwhilewriting
$BIN --engines cairn-membuffer,cairn-nomembuffer --interleave_phases --num 2000000 --reads 1000000 --threads 1,2 --repetitions 1 --warmup false --writer_ops_per_sec $CAP --benchmarks fillrandom,settle,$R,$R,$R,$R,$R,$R,$R,$R --db /tmp/nrdb --out $OUT --no_plots --progress false
