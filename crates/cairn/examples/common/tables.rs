//! The table set `manifest_recovery` and `version_install` build: one level-1 run of tables
//! with disjoint key ranges, each replaced in turn by a new table of the same range.

use cairn::testing::key::{internal_key, ValueKind};
use cairn::testing::version::AddedFile;

/// The run every table belongs to.
pub const RUN_ID: u64 = 1;

/// Table `slot`'s key range, under file number `number`.
pub fn table(slot: u64, number: u64) -> AddedFile {
    let key = |offset: u64| internal_key(&(slot * 10 + offset).to_be_bytes(), 1, ValueKind::Put);
    AddedFile {
        number,
        size_bytes: 64 << 20,
        smallest: key(0),
        largest: key(9),
        smallest_sequence: 1,
        largest_sequence: 1,
    }
}
