#!/bin/bash
# usage: mte.sh BIN OUT -- YCSB E at 16 and 64 threads, Membuffer on vs off, 3 interleaved pairs
BIN=$1; OUT=$2
rm -rf /tmp/mtdb
$BIN --engines cairn-membuffer,cairn-nomembuffer --interleave_phases --num 1000000 --reads 1000000 --threads 16,64 --repetitions 1 --warmup false --duration 5 --benchmarks fillrandom,compact,ycsb_e,ycsb_e,ycsb_e,ycsb_e,ycsb_e --db /tmp/mtdb --out $OUT --no_plots --progress false
