//! How big a partition's next table is: a pure decision from how full the drained one got.
//!
//! Why: a drain allocates the partition's next table (its slot array zeroed whole) and
//! reads every slot of the drained one back, so a drain costs the table's size, not its
//! contents. Writers drain a table once it is full (drainer threads at three quarters
//! full): there the full size is right. A scan drains every partition holding anything,
//! often a handful of versions; at the full size each such drain allocated, zeroed and
//! scanned hundreds of kilobytes, and a scan-heavy workload (`flodb_scan_write`) ran at a
//! fifth of its speed without the Membuffer. So the size follows the use: doubled after a
//! drain of a table at least half full, halved after one under an eighth full, kept
//! between.
//!
//! The slot array follows the records too: a table of `b` bytes expecting records of `r`
//! bytes takes `b / r` keys and has about twice that many slots. Sized for the smallest
//! record (64 bytes) whatever the records are, a workload of 160-byte records filled its
//! slots to a fifth at most, and the slot arrays took 4.3 MiB beside a 64 MiB write buffer
//! (2.2 MiB now). So each drain measures the drained table's mean record size and the next
//! table expects that.
//!
//! Thread-safety contract: pure functions.
//!
//! Invariants:
//! 1. `next_table_bytes` returns a size in `[min, max]` (with `min` clamped to `max`).
//! 2. Within `[min, max]`, a table drained at least half full (or one that turned a record
//!    away as full: `Table::fill` then reports it full) never makes the next one smaller, and
//!    one drained under an eighth full never makes it larger. A table smaller than a
//!    record the partition takes grows at its next drain, since the record overflows it.
//! 3. `next_record_bytes` returns at least `RECORD_BYTES_MIN`, and keeps the current
//!    expectation when the drained table held fewer than `RECORDS_TO_MEASURE` records.
//!    A table whose records are smaller than expected fills by keys: it drains at half its
//!    keys like any other, and the next one expects the smaller size.

/// The smallest table, the one a scan-heavy partition's tables shrink to: a scan drains the
/// few versions written since the previous scan (about twenty in `flodb_scan_write`), and a
/// drain's fixed cost — zeroing the next table's slots, walking the drained one's — follows
/// the table's size. Measured there (1 thread, 6 interleaved pairs,
/// `bench/results/2026-11-28-s15-flodb`): 16 KiB ran 1.02–1.06× as fast as 64 KiB in every
/// pair (level at 2 threads); 4 KiB ran 0.94–1.00× of 16 KiB in 5 pairs (likely because
/// its ~25 keys are about what a partition takes between two scans). A record larger than
/// a small table makes its writer drain the partition, whose next table doubles
/// (invariant 2); the record goes there if it fits, else to the memtable.
const TABLE_BYTES_MIN: usize = 16 << 10;

/// The smallest record size a slot array is sized for (a record's header and one word
/// each of key and value are 48 bytes), and the expectation before any drain measured one.
pub(super) const RECORD_BYTES_MIN: usize = 64;

/// Records a drained table must hold for its mean record size to set the next table's.
const RECORDS_TO_MEASURE: usize = 64;

/// The smallest table of a partition whose full share is `max` bytes.
pub(super) fn table_bytes_min(max: usize) -> usize {
    TABLE_BYTES_MIN.min(max)
}

/// How full a table was when its drain began: the larger of its share of keys and of bytes,
/// in thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fill {
    pub(super) per_mille: usize,
}

/// The byte budget of a partition's next table, given its current one's and how full that
/// got (see the module documentation).
pub(super) fn next_table_bytes(current: usize, fill: Fill, min: usize, max: usize) -> usize {
    let min = min.min(max);
    let next = if fill.per_mille >= 500 {
        current.saturating_mul(2)
    } else if fill.per_mille < 125 {
        current / 2
    } else {
        current
    };
    let next = next.clamp(min, max);
    debug_assert!((min..=max).contains(&next), "invariant 1");
    next
}

/// The record size the partition's next table expects (see the module documentation):
/// the drained table's mean, `bytes` of records over `records`, floored at
/// `RECORD_BYTES_MIN`; `current` when the table held too few records to tell.
pub(super) fn next_record_bytes(current: usize, bytes: usize, records: usize) -> usize {
    let next = if records < RECORDS_TO_MEASURE {
        current
    } else {
        bytes / records
    };
    let next = next.max(RECORD_BYTES_MIN);
    debug_assert!(next >= RECORD_BYTES_MIN, "invariant 3");
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    fn fill(per_mille: usize) -> Fill {
        Fill { per_mille }
    }

    #[test]
    fn full_tables_grow_to_the_share_and_stay_there() {
        let min = table_bytes_min(MAX);
        assert_eq!(next_table_bytes(MAX, fill(1000), min, MAX), MAX);
        assert_eq!(next_table_bytes(MAX, fill(500), min, MAX), MAX);
        assert_eq!(next_table_bytes(min, fill(700), min, MAX), 2 * min);
        let mut bytes = min;
        for _ in 0..20 {
            bytes = next_table_bytes(bytes, fill(600), min, MAX);
        }
        assert_eq!(bytes, MAX);
    }

    #[test]
    fn nearly_empty_drains_shrink_to_the_floor() {
        let min = table_bytes_min(MAX);
        let mut bytes = MAX;
        let mut steps = 0;
        while bytes > min {
            bytes = next_table_bytes(bytes, fill(3), min, MAX);
            steps += 1;
        }
        // One halving per drain: MAX / min is a power of two.
        assert_eq!((bytes, steps), (min, (MAX / min).ilog2()));
        assert_eq!(next_table_bytes(min, fill(0), min, MAX), min);
    }

    #[test]
    fn between_an_eighth_and_a_half_keeps_the_size() {
        for per_mille in [125, 300, 499] {
            assert_eq!(
                next_table_bytes(256 << 10, fill(per_mille), 64 << 10, MAX),
                256 << 10
            );
        }
    }

    #[test]
    fn a_share_below_the_floor_is_the_size() {
        let max = 16 << 10;
        let min = table_bytes_min(max);
        assert_eq!(min, max);
        for per_mille in [0, 200, 900] {
            assert_eq!(next_table_bytes(max, fill(per_mille), min, max), max);
        }
        // A current size above a (changed) share is brought back under it.
        assert_eq!(next_table_bytes(4 * max, fill(900), min, max), max);
    }

    #[test]
    fn the_next_table_expects_the_drained_tables_mean_record() {
        assert_eq!(RECORD_BYTES_MIN, 64);
        assert_eq!(next_record_bytes(64, 140 * 1000, 1000), 140);
        assert_eq!(next_record_bytes(140, 48 * 1000, 1000), RECORD_BYTES_MIN);
        assert_eq!(next_record_bytes(200, 4096 * 100, 100), 4096);
    }

    #[test]
    fn a_table_of_few_records_keeps_the_expectation() {
        assert_eq!(next_record_bytes(140, 10_000, RECORDS_TO_MEASURE - 1), 140);
        assert_eq!(next_record_bytes(140, 0, 0), 140);
        assert_eq!(next_record_bytes(0, 0, 0), RECORD_BYTES_MIN);
    }
}
