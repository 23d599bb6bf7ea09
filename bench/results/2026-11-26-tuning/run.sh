#!/bin/bash
# Runs the tuning grid of docs/tuning.md, one cairn-bench command per configuration, in
# priority order; a configuration whose results.json exists is skipped (re-runnable).
# Usage: run.sh CAIRN_BENCH [GROUP...]   (groups: styles compression repeat lazy5 bloom bloom-a bloom-b runs lookup fanout leveling5)
set -u
BENCH=${1:?usage: run.sh CAIRN_BENCH [GROUP...]}
shift
GROUPS_WANTED=${*:-styles compression lazy5 bloom runs lookup fanout leveling5}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/runs
DB=${TUNING_DB:-/tmp/tuning-db}
mkdir -p "$OUT"
# The tree: 8 M random keys (about 5 M distinct, ~650 MiB of tables), a 4 MiB level 1 and
# 1 MiB write buffers (level 1 = level-0 trigger x write buffer, as RocksDB sizes them):
# levels of 4, 40 and 400 MiB and the rest below, 16-byte keys, 100-byte values.
TREE="--engines cairn --num 8000000 --reads 300000 --level1_size 4194304 --write_buffer_size 1048576 --threads 1 --repetitions 1 --warmup false --no_plots --progress false --db $DB"
SHAPE_BENCH="fillrandom,settle,readrandom,multireadrandom,readmissing,seekrandom:0,seekrandom:9,seekrandom:99,seekrandom:999"
READ_BENCH="fillrandom,settle,readrandom,multireadrandom,readmissing"
# Compression: 3 M keys in the same shape; space is read after `compact`.
SMALL="--engines cairn --num 3000000 --reads 300000 --level1_size 4194304 --write_buffer_size 1048576 --threads 1 --repetitions 1 --warmup false --no_plots --progress false --db $DB"

run() {
  local name=$1
  shift
  if [ -f "$OUT/$name/results.json" ]; then
    echo "skip $name"
    return
  fi
  echo "$(date -u +%H:%M:%S) start $name: $*"
  "$BENCH" "$@" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1 || echo "FAILED $name (see $OUT/$name.txt)"
  echo "$(date -u +%H:%M:%S) end $name"
}

for group in $GROUPS_WANTED; do
  case $group in
  styles)
    run style-leveling-T10 $TREE --benchmarks $SHAPE_BENCH --compaction_style leveling --fanout 10
    run style-tiering-T10-D4 $TREE --benchmarks $SHAPE_BENCH --compaction_style tiering --fanout 10 --runs_per_level 4
    run style-lazy-T10-D4 $TREE --benchmarks $SHAPE_BENCH --compaction_style lazy --fanout 10 --runs_per_level 4
    ;;
  repeat)
    # Two more runs of the incompressible case, none against LZ4, interleaved: what trying
    # to compress blocks that do not shrink costs (single runs on a loaded machine vary).
    for rep in 2 3; do
      for codec in none lz4; do
        run compression-$codec-r1.0-rep$rep $SMALL --benchmarks fillrandom,compact,readrandom --compression_type $codec --compression_ratio 1.0
      done
    done
    ;;
  lazy5)
    # Lazy leveling levels the last level of the tree (Options::level_count - 1): with the
    # default 7 levels this tree never reaches it, so lazy leveling and tiering are compared
    # again with 5 levels (L4 last), where the data ends up under leveling too.
    run style-tiering-T10-D4-levels5 $TREE --benchmarks $SHAPE_BENCH --compaction_style tiering --fanout 10 --runs_per_level 4 --levels 5
    run style-lazy-T10-D4-levels5 $TREE --benchmarks $SHAPE_BENCH --compaction_style lazy --fanout 10 --runs_per_level 4 --levels 5
    ;;
  leveling5)
    # The control: leveling's shape is the same with 5 levels (its data ends in L4 anyway).
    run style-leveling-T10-levels5 $TREE --benchmarks $SHAPE_BENCH --compaction_style leveling --fanout 10 --levels 5
    ;;
  compression)
    for ratio in 0.5 1.0; do
      for codec in none lz4 zstd; do
        run compression-$codec-r$ratio $SMALL --benchmarks fillrandom,compact,readrandom --compression_type $codec --compression_ratio $ratio
      done
      run compression-perlevel-r$ratio $SMALL --benchmarks fillrandom,compact,readrandom --compression_type zstd --level_compression none,none --compression_ratio $ratio
    done
    ;;
  bloom)
    # Uniform at 10 bits is style-leveling-T10 (same tree, same readmissing).
    run bloom-monkey-10 $TREE --benchmarks fillrandom,settle,readmissing,readrandom --compaction_style leveling --fanout 10 --bloom_bits 10 --bloom_allocation monkey
    for bits in ${BLOOM_BITS:-4}; do
      for allocation in uniform monkey; do
        run bloom-$allocation-$bits $TREE --benchmarks fillrandom,settle,readmissing,readrandom --compaction_style leveling --fanout 10 --bloom_bits $bits --bloom_allocation $allocation
      done
    done
    # Monkey sizes levels by capacity (T^i), so when the last level is not full it spends
    # more than the setting; these settings bracket uniform's memory at 4 and 10 bits.
    for bits in ${MONKEY_EXTRA_BITS:-8 2}; do
      run bloom-monkey-$bits $TREE --benchmarks fillrandom,settle,readmissing,readrandom --compaction_style leveling --fanout 10 --bloom_bits $bits --bloom_allocation monkey
    done
    ;;
  bloom-a)
    # The bloom group split in two, to run beside each other.
    run bloom-monkey-10 $TREE --benchmarks fillrandom,settle,readmissing,readrandom --compaction_style leveling --fanout 10 --bloom_bits 10 --bloom_allocation monkey
    run bloom-monkey-8 $TREE --benchmarks fillrandom,settle,readmissing,readrandom --compaction_style leveling --fanout 10 --bloom_bits 8 --bloom_allocation monkey
    ;;
  bloom-b)
    for run in uniform-4 monkey-4 monkey-2; do
      run bloom-$run $TREE --benchmarks fillrandom,settle,readmissing,readrandom --compaction_style leveling --fanout 10 --bloom_bits ${run#*-} --bloom_allocation ${run%-*}
    done
    ;;
  runs)
    for d in 2 8; do
      run runs-tiering-T10-D$d $TREE --benchmarks $READ_BENCH --compaction_style tiering --fanout 10 --runs_per_level $d
    done
    ;;
  lookup)
    run lookup2-tiering-T10-D8 $TREE --benchmarks $READ_BENCH --compaction_style tiering --fanout 10 --runs_per_level 8 --lookup_threads 2
    ;;
  fanout)
    for t in 4 16; do
      run fanout-leveling-T$t $TREE --benchmarks $READ_BENCH --compaction_style leveling --fanout $t
      run fanout-tiering-T$t-D4 $TREE --benchmarks $READ_BENCH --compaction_style tiering --fanout $t --runs_per_level 4
    done
    ;;
  esac
done
echo "$(date -u +%H:%M:%S) all done"
