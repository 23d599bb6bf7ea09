#!/bin/bash
# ab.sh OUT REPS BIN...: the scan figure (cairn on/off, no peers) per binary, alternating
OUT=$1; R=$2; shift 2; mkdir -p $OUT
for round in 1 2; do for b in "$@"; do
  CAIRN_BENCH=/work/runs/bin/$b PEERS="" REPS=$R bash bench/flodb/run.sh scan $OUT/$b-r$round > $OUT/$b-r$round.log 2>&1
done; done
