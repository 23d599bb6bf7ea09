#!/bin/bash
# ab.sh A B OUT PAIRS: A/B of two cairn-bench binaries on flodb_scan_write (Membuffer on), alternating order.
A=$1; B=$2; OUT=$3; N=${4:-6}
mkdir -p $OUT
for i in $(seq 1 $N); do
  if [ $((i % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for w in $order; do
    bin=$A; [ $w = B ] && bin=$B
    db=$(mktemp -d /tmp/ab.XXXXXX)
    $bin --engines cairn-membuffer --benchmarks flodb_scan_write --num 2000000 --threads 1,2 --duration 10 --repetitions 1 --db $db --out $OUT/$w-$i --no_plots --progress false 2>&1 | grep "rep 1/1" | sed "s/^/$w $i /" >> $OUT/ab.log
    rm -rf $db
  done
done
echo done >> $OUT/ab.log
