#!/bin/bash
# ab17.sh OUT REPS BIN... : Fig. 17 cells (cairn-membuffer), binaries alternating per budget
OUT=$1; REPS=$2; shift 2
for rep in $(seq 1 $REPS); do
 for bud in ${BUDGETS:-256 1024 4096}; do
  for B in "$@"; do
   /work/runs/bin/$B --engines ${ENGINES:-cairn-membuffer} --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 --value_size 100 --threads ${THREADS:-1,2} --write_buffer_size $((bud<<20)) --warmup false --repetitions 1 --db /tmp/f17db-ab --out /tmp/f17out-ab --no_plots --progress false 2>&1 | grep "rep 1" | sed "s/^/$B $bud /" >> $OUT
   rm -rf /tmp/f17db-ab
  done
 done
done
