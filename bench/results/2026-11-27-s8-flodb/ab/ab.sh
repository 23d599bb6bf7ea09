#!/usr/bin/env bash
# usage: ab.sh NAME BENCH THREADS BIN_A BIN_B [ROUNDS]: two cairn-bench binaries in alternating
# processes, cairn-membuffer only, 4 phases of 5 s each; writes ab-NAME/ and prints B / A.
out=ab-$1; mkdir -p $out; : > $out/summary.txt
list=$(python3 -c "print(','.join(['$2']*4))")
for r in $(seq 1 ${6:-4}); do for side in A B; do
  bin=$4; [ $side = B ] && bin=$5
  $bin --engines cairn-membuffer --num 2000000 --threads $3 --duration 5 --repetitions 1 --warmup false --no_plots --progress false --db /tmp/s8-ab --benchmarks $list --out $out/$side$r > $out/$side$r.log 2>&1
  rm -rf /tmp/s8-ab
  grep "^  rep" $out/$side$r.log | awk -v s=$side '{print s, $6}' >> $out/summary.txt
done; done
python3 - $out/summary.txt <<'PY'
import sys,statistics
a=[];b=[]
for line in open(sys.argv[1]):
  s,v=line.split(); (a if s=='A' else b).append(float(v))
print(f"A median {statistics.median(a)/1e3:.0f}k  B median {statistics.median(b)/1e3:.0f}k  B/A {statistics.median(b)/statistics.median(a):.3f}  (A n={len(a)}, B n={len(b)})")
PY
