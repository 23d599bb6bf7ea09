#!/bin/bash
# ab.sh ROUNDS "BUDGET_MIB:PARTITIONS ...": fig17 cell, cairn-membuffer, 2 threads, alternating
B=${B:-/work/runs/bin/s21-final}; R=$1; shift
for round in $(seq $R); do for cell in "$@"; do
  mib=${cell%%:*}; p=${cell##*:}
  D=$(mktemp -d /tmp/f17.XXXX)
  line=$($B --engines cairn-membuffer --benchmarks fillrandom --disable_wal --drop_sealed --num 20000000 --key_size 16 --value_size 100 --threads ${T:-2} --write_buffer_size $((mib<<20)) --warmup false --repetitions 1 --membuffer_partitions $p --db $D --no_plots --progress false --out /tmp/f17-out 2>&1 | grep "rep 1/1")
  rm -rf $D $D.*
  echo "$round $mib MiB p=$p $(echo $line | sed 's/.*t=[0-9]*: //' | cut -c1-110)"
done; done
