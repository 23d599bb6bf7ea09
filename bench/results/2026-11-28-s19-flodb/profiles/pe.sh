#!/bin/bash
# pe.sh ENGINE: perf of the ycsb_e phase (2 threads) after load + compact
E=$1; O=/work/runs/s19/perf; db=$(mktemp -d /tmp/pe.XXXX)
/work/runs/bin/s19-a --engines $E --benchmarks compact,ycsb_e --num 2000000 --threads 2 --duration 10 --repetitions 1 --warmup false --db $db --out $O/$E-res --no_plots --progress false > $O/$E.log 2>&1 &
P=$!
while ! grep -q "compact t=2" $O/$E.log; do sleep 0.2; done
sleep 1
perf record -F 999 -g -p $P -o $O/$E.data -- sleep 7 2>/dev/null
wait $P; rm -rf $db
perf report -i $O/$E.data --no-children --sort symbol --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -60 > $O/$E.top
