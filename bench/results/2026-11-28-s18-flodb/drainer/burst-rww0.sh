#!/bin/bash
# burst-rww0.sh [OUT]: the 10 s burst at 1 GiB (no drainer / one / RocksDB) and readwhilewriting with an unpaced writer
B=${CAIRN_BENCH:-target/release/cairn-bench}; O=${1:-/tmp/s18-dr2}; mkdir -p $O
db=$(mktemp -d /tmp/dr2.XXXX)
$B --engines cairn-membuffer,cairn-membuffer-drainer,rocksdb --benchmarks flodb_burst --threads 2 --write_buffer_size $((1024<<20)) --warmup false --repetitions 3 --db $db --out $O/fig15 --no_plots --progress false > $O/fig15.log 2>&1
$B --engines cairn-membuffer,cairn-membuffer-drainer,cairn-nomembuffer --benchmarks readwhilewriting --num 2000000 --threads 1,2 --writer_ops_per_sec 0 --repetitions 3 --db $db --out $O/rww0 --no_plots --progress false > $O/rww0.log 2>&1
rm -rf $db; echo done > $O/done
