#!/bin/bash
# usage: f17n.sh reps threads budget BIN...
reps=$1; t=$2; b=$3; shift 3
for r in $(seq 1 $reps); do for B in "$@"; do rm -rf /tmp/f17db; echo -n "$(basename $B) "; $B --engines cairn-membuffer --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 --value_size 100 --threads $t --write_buffer_size $(( b << 20 )) --warmup false --repetitions 1 --db /tmp/f17db --no_plots --progress false 2>&1 | grep -E "rep 1/1" | sed 's/rep 1.1 cairn-membuffer fillrandom//'; done; done
