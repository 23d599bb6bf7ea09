#!/bin/bash
# fig17-drainers.sh OUT [REPS]: the Fig. 17 fill (Membuffer, multi-insert), 0 vs 1 drainer thread, alternating (BUDGETS, THREADS, BIN)
OUT=$1; REPS=${2:-2}; BIN=${BIN:-target/release/cairn-bench}
mkdir -p $OUT
for rep in $(seq $REPS); do
for budget in ${BUDGETS:-256 4096}; do
for t in ${THREADS:-1 2}; do
for d in 0 1; do
  db=$(mktemp -d /tmp/dr.XXXX)
  line=$($BIN --engines cairn-membuffer --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 --value_size 100 --threads $t --write_buffer_size $((budget<<20)) --warmup false --repetitions 1 --db $db --out $OUT/r$rep-b$budget-t$t-d$d --no_plots --progress false --membuffer_drainers $d 2>&1 | grep "rep 1/1")
  echo "rep=$rep budget=$budget t=$t d=$d $line" | tee -a $OUT/summary
  rm -rf $db
done; done; done; done
