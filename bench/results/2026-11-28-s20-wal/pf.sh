#!/bin/bash
# pf.sh NAME BIN [extra flags]: perf of the flodb_burst at 1 GiB, 2 threads (one repetition);
# writes NAME.log, NAME.data and NAME.top (self time by symbol) into $OUT (default: here)
N=$1; B=$2; shift 2; O=${OUT:-.}; db=$(mktemp -d /tmp/pf.XXXX)
$B --engines cairn-membuffer --benchmarks flodb_burst --threads 2 --write_buffer_size 1073741824 --warmup false --repetitions 1 --db $db --out $O/$N-res --no_plots --progress false "$@" > $O/$N.log 2>&1 &
P=$!
sleep 1.5
perf record -F 1999 -g -p $P -o $O/$N.data -- sleep 7 2>/dev/null
wait $P; rm -rf $db
grep flodb_burst $O/$N.log
perf report -i $O/$N.data --no-children --sort symbol --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -70 > $O/$N.top
