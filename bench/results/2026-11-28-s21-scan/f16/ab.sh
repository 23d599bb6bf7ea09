#!/bin/bash
# ab.sh ROUNDS BIN...: Fig. 16's 256 MiB cell, cairn-membuffer, 2 threads, binaries alternating
R=$1; shift
for r in $(seq $R); do for b in "$@"; do db=$(mktemp -d /tmp/f16.XXXX)
 /work/runs/bin/$b --engines cairn-membuffer --benchmarks flodb_skew --num 20000000 --threads 2 --write_buffer_size $((256<<20)) --duration 10 --warmup false --repetitions 1 --db $db --out /tmp/f16-res-$b --no_plots --progress false 2>&1 | grep "rep 1/1" | sed "s/^/$b r$r /"
 rm -rf $db; done; done
