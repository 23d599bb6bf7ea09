#!/usr/bin/env bash
# Lazy leveling vs leveling point lookups, interleaved phase by phase (issue 20).
B=${B:-target/release/cairn-bench}; OUT=${OUT:-cairn-bench-out}
R=$(python3 -c "print(','.join(['readrandom']*${PAIRS:-8}))")
$B --engines cairn-leveling,cairn-lazy --interleave_phases --num 8000000 --reads 300000 \
  --level1_size 4194304 --write_buffer_size 1048576 --fanout 10 --runs_per_level 4 --threads 1 \
  --repetitions ${REPS:-4} --warmup false --no_plots --progress false --db /tmp/s7-il \
  --benchmarks fillrandom,settle,$R --out $OUT
