#!/bin/bash
# perfsw.sh ENGINE OUT: perf of the first ycsb_e phase
B=${B:-/work/runs/bin/s21-final}; E=$1; O=$2
D=$(mktemp -d /tmp/sw.XXXX)
$B --engines $E --benchmarks compact,ycsb_e --num 2000000 --threads ${T:-1} --duration 10 --repetitions 1 --db $D --no_plots --progress false --out /tmp/ye-out-$E > $O.log 2>&1 &
P=$!
for i in $(seq 120); do sleep 0.5; grep -q "compact t=${T:-1}" $O.log && break; done
perf record -F ${F:-1999} ${G--g} -p $P -o $O.data -- sleep 8 2>/dev/null >/dev/null
wait $P
rm -rf $D $D.*
perf report -i $O.data --no-children --sort symbol 2>/dev/null | grep -v "^#" | grep "%" | head -60 > $O.txt
