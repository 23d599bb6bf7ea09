#!/bin/bash
# usage: f15n.sh reps budget BIN...
reps=$1; b=$2; shift 2
for r in $(seq 1 $reps); do for B in "$@"; do rm -rf /tmp/f15db; echo -n "$(basename $B) "; $B --engines cairn-membuffer --benchmarks flodb_burst --threads ${T:-2} --write_buffer_size $(( b << 20 )) --warmup false --repetitions 1 --db /tmp/f15db --no_plots --progress false 2>&1 | grep -E "rep 1/1" | sed 's/rep 1.1 cairn-membuffer//'; done; done
