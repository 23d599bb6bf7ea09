#!/bin/bash
# pct.sh OUT REPS BUDGET_MIB PCTS...: Fig. 15 burst, cairn-membuffer with different membuffer_percent, alternating
O=$1; REPS=$2; B=$3; shift 3; mkdir -p $O
for rep in $(seq $REPS); do for p in "$@"; do
  db=$(mktemp -d /tmp/pct.XXXX)
  /work/runs/bin/s19-pct --engines cairn-membuffer --benchmarks flodb_burst --threads 2 --write_buffer_size $((B<<20)) --warmup false --membuffer_percent $p --repetitions 1 --db $db --out $O/b$B-p$p-$rep --no_plots --progress false 2>&1 | grep "rep 1/1" | sed "s/^/pct=$p B=$B /" | tee -a $O/summary
  rm -rf $db
done; done
