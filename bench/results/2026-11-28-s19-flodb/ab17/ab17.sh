#!/bin/bash
# ab17.sh OUT REPS BUDGETS...: Fig. 17 fill (multi-insert Membuffer), drain at 1/2 (s18-c) vs 3/4 (s19-a), alternating binaries
O=$1; REPS=$2; shift 2; mkdir -p $O
for rep in $(seq $REPS); do for b in "$@"; do for tag in s18-c s19-a; do
  db=$(mktemp -d /tmp/ab17.XXXX)
  /work/runs/bin/$tag --engines cairn-membuffer --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 --value_size 100 --threads 1,2 --write_buffer_size $((b<<20)) --warmup false --repetitions 1 --db $db --out $O/$tag-b$b-$rep --no_plots --progress false 2>&1 | grep "rep 1/1" | sed "s/^/$tag B=$b /" | tee -a $O/summary
  rm -rf $db
done; done; done
