#!/bin/bash
# scan-skew.sh OUT: drainer 1 (default) vs 0 on the scan workloads and Fig. 16's ends
B=${CAIRN_BENCH:-target/release/cairn-bench}; O=${1:-/tmp/s18-ab2}; mkdir -p $O
db=$(mktemp -d /tmp/ab2.XXXX)
$B --engines cairn-membuffer,cairn-membuffer-writerdrain,cairn-nomembuffer --benchmarks compact,flodb_scan_write,compact,ycsb_e --num 2000000 --threads 1,2 --duration 10 --repetitions 4 --db $db --out $O/scan --no_plots --progress false > $O/scan.log 2>&1
for budget in 16 1024; do
$B --engines cairn-membuffer,cairn-membuffer-writerdrain,rocksdb --benchmarks flodb_skew --num 20000000 --threads 2 --write_buffer_size $((budget<<20)) --duration 10 --warmup false --repetitions 2 --db $db --out $O/skew$budget --no_plots --progress false > $O/skew$budget.log 2>&1
done
rm -rf $db; echo done > $O/done
