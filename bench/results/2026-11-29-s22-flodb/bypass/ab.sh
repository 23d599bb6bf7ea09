#!/bin/bash
# ab.sh OUT REPS ROUNDS BIN...: flodb_scan_write, cairn on/off, per binary, alternating
OUT=$1; R=$2; N=$3; shift 3; mkdir -p $OUT
for round in $(seq $N); do for b in "$@"; do
  D=$(mktemp -d /tmp/fsw.XXXX)
  /work/runs/bin/$b --engines cairn-membuffer,cairn-nomembuffer --benchmarks compact,flodb_scan_write --num 2000000 --threads ${T:-1,2} --duration 10 --repetitions $R --db $D --no_plots --progress false --out $OUT/$b-r$round > $OUT/$b-r$round.log 2>&1
  rm -rf $D $D.*
done; done
