//! `sizes`: approximately how many table bytes hold a key range, per level.
//!
//! A table wholly inside the range counts whole; one that straddles a bound counts the data
//! blocks whose key span meets the range (read from its index block, found through the
//! table's fence keys). Memtables and WALs are not counted: like `RocksDB`'s
//! `GetApproximateSizes` without memtables, this measures what is on disk in tables.
//!
//! Thread-safety contract: a pure function of the files' bytes; see the parent module.
//!
//! Invariants:
//! 1. The estimate of a range is at most the sum of the live tables' sizes, and a range
//!    covering every key counts every live table whole.
//! 2. `total_bytes` is the sum of `level_bytes`.

use super::manifest::live_tables;
use super::table::block_fences;
use crate::error::Result;
use std::path::Path;

/// The estimate [`approximate_sizes`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RangeSizes {
    /// Bytes per level (index = level), up to the deepest level with a live table.
    pub level_bytes: Vec<u64>,
    /// Live tables that meet the range.
    pub table_count: usize,
    /// Sum of `level_bytes`.
    pub total_bytes: u64,
}

/// True if the user-key span `[smallest, largest]` meets `[from, to)`.
fn meets(smallest: &[u8], largest: &[u8], from: Option<&[u8]>, to: Option<&[u8]>) -> bool {
    from.is_none_or(|from| largest >= from) && to.is_none_or(|to| smallest < to)
}

/// Approximate table bytes holding keys in `[from, to)` (`None`: unbounded) in `directory`.
///
/// # Panics
///
/// With the `invariants` feature, if the per-level sums disagree with the total (a bug in
/// this function, never a property of the files).
///
/// ```
/// # fn main() -> cairn::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("cairn-sizes-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut options = cairn::Options::default();
/// options.create_if_missing = true;
/// let db = cairn::Db::open(&dir, options)?;
/// db.put(b"k", b"v")?;
/// db.flush()?;
/// drop(db);
/// let all = cairn::inspect::sizes::approximate_sizes(&dir, None, None)?;
/// assert!(all.total_bytes > 0);
/// let none = cairn::inspect::sizes::approximate_sizes(&dir, Some(b"x"), None)?;
/// assert_eq!(none.total_bytes, 0);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn approximate_sizes(
    directory: &Path,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
) -> Result<RangeSizes> {
    let mut sizes = RangeSizes::default();
    for live in live_tables(directory)? {
        let table = &live.table;
        if !meets(&table.smallest_key, &table.largest_key, from, to) {
            continue;
        }
        let inside = from.is_none_or(|from| table.smallest_key.as_slice() >= from)
            && to.is_none_or(|to| table.largest_key.as_slice() < to);
        let bytes = if inside {
            table.size_bytes
        } else {
            straddling_bytes(&live.path, &table.smallest_key, from, to)?
        };
        if sizes.level_bytes.len() <= table.level {
            sizes.level_bytes.resize(table.level + 1, 0);
        }
        if let Some(level) = sizes.level_bytes.get_mut(table.level) {
            *level += bytes;
        }
        sizes.table_count += 1;
        sizes.total_bytes += bytes;
    }
    if cfg!(feature = "invariants") {
        // Invariant 2.
        assert_eq!(
            sizes.total_bytes,
            sizes.level_bytes.iter().sum::<u64>(),
            "range sizes: total differs from the sum of the levels"
        );
    }
    Ok(sizes)
}

/// The data block bytes of a table straddling a bound whose key spans meet the range.
fn straddling_bytes(
    path: &Path,
    smallest: &[u8],
    from: Option<&[u8]>,
    to: Option<&[u8]>,
) -> Result<u64> {
    let mut block_first: Vec<u8> = smallest.to_vec();
    let mut bytes = 0;
    for (last, span) in block_fences(path)? {
        if meets(&block_first, &last, from, to) {
            bytes += span.size_bytes;
        }
        block_first = last;
    }
    Ok(bytes)
}
