#!/usr/bin/env bash
# A/B of two binaries on flodb_scan_write (on/off interleaved inside each run, x6), alternating runs.
cd /work/runs/s12
sw=$(python3 -c "print(','.join(['flodb_scan_write']*6))")
for round in 1 2; do
for name in eea0f90 db652b6; do
BIN=/work/runs/bin/cairn-bench-$name
$BIN --engines cairn-membuffer,cairn-nomembuffer --interleave_phases --num 2000000 --threads 2 --duration 5 --repetitions 1 --warmup false --no_plots --progress false --db /tmp/s12-s --benchmarks $sw --out sw-$name-$round > sw-$name-$round.txt 2>&1
rm -rf /tmp/s12-s
echo "== $name $round $(python3 /work/main/bench/results/2026-11-27-s8-flodb/ilpairs.py sw-$name-$round.txt cairn-membuffer cairn-nomembuffer | grep flodb)"
done; done
