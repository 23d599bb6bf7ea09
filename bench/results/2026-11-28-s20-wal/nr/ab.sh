#!/bin/bash
# ab.sh OUT ROUNDS "BENCH ARGS" BINS...: alternate binaries, cairn engine, 1 repetition each
O=$1; R=$2; ARGS=$3; shift 3; mkdir -p $O
for r in $(seq $R); do for bin in "$@"; do
 db=$(mktemp -d /tmp/nr.XXXX)
 $bin --engines cairn $ARGS --warmup false --repetitions 1 --db $db --out $O/tmp --no_plots --progress false 2>&1 | grep "rep 1/1" | sed "s/^/$r $(basename $bin) /" | tee -a $O/summary
 rm -rf $db
done; done
