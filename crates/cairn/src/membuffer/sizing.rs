//! How big a partition's next table is: a pure decision from how full the drained one got.
//!
//! Why: a drain allocates the partition's next table (its slot array zeroed whole) and reads
//! every slot of the drained one back, so a drain costs the table's size, not its contents.
//! Writers drain a table once it is full (drainer threads at half full): there the full size
//! is right. A scan drains every partition holding anything, often a handful of versions; at
//! the full size each such drain allocated, zeroed and scanned hundreds of kilobytes, and a
//! scan-heavy workload (`flodb_scan_write`) ran at a fifth of its speed without the
//! Membuffer. So the size follows the use: doubled after a drain of a table at least half
//! full, halved after one under an eighth full, kept between.
//!
//! Thread-safety contract: pure functions.
//!
//! Invariants:
//! 1. `next_table_bytes` returns a size in `[min, max]` (with `min` clamped to `max`).
//! 2. Within `[min, max]`, a table drained at least half full (or one that turned a record
//!    away as full: `Table::fill` then reports it full) never makes the next one smaller, and
//!    one drained under an eighth full never makes it larger. A table smaller than a
//!    record the partition takes grows at its next drain, since the record overflows it.

/// The smallest table: room for values up to a quarter of it (a larger version goes to the
/// memtable directly) and a slot array of a few kilobytes.
const TABLE_BYTES_MIN: usize = 64 << 10;

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
        assert_eq!((bytes, steps), (min, 4));
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
}
