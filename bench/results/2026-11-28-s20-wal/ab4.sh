#!/bin/bash
# ab4.sh OUT ROUNDS BUDGET_MIB BINS...: flodb_burst 2 threads, cairn-membuffer, binaries alternating
O=$1; R=$2; M=$3; shift 3; mkdir -p $O
for r in $(seq $R); do for bin in "$@"; do
 db=$(mktemp -d /tmp/ab.XXXX)
 v=$($bin --engines cairn-membuffer --benchmarks flodb_burst --threads 2 --write_buffer_size $((M<<20)) --warmup false --repetitions 1 --db $db --out $O/tmp --no_plots --progress false $EXTRA 2>&1 | grep "rep 1/1")
 rm -rf $db; echo "$r $(basename $bin) $v" | sed 's/cairn-membuffer flodb_burst//' | tee -a $O/summary
done; done
