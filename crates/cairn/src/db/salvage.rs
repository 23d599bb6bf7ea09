//! Salvaging a flushed table whose MANIFEST edit was lost, at a writable open.
//!
//! A flush writes and syncs its level-0 table, then appends its edit to the MANIFEST. When
//! recovery ignored the MANIFEST's last record as a torn tail (`manifest_torn_tail`), that
//! record may have been such an edit: a bit flip in a synced record, or, with `sync` off, a
//! power loss during the append (the flushed WAL then still exists but may have lost its
//! unsynced tail, so the table holds more than the WALs). Either way the table is an orphan
//! in the directory, and without salvage the database would open with the state from before
//! the flush and the obsolete-file sweep would delete the table, the only copy of writes
//! that may have been acknowledged.
//!
//! A *candidate* is an orphan table (in the directory, listed by no version) that opens and
//! reads back whole with checksums verified and whose smallest sequence is above the
//! recovered `last_sequence`: it holds only writes past the recovered state, which is what a
//! flush whose edit was lost leaves. Compaction outputs hold older sequences and are never
//! candidates; the table of a flush whose edit never started is one, and salvaging it is
//! harmless (its WAL holds the same writes, skipped at replay).
//!
//! Invariants:
//! 1. Nothing is salvaged unless the MANIFEST had an ignored tail and the open is writable
//!    (a read-only handle beside a live writer routinely sees tables not yet listed).
//! 2. Exactly one candidate is added at level 0, as the newest level-0 run, and
//!    `last_sequence` is raised to its largest sequence; WAL replay then skips every batch
//!    at or below it and checks that the first one it replays continues it, so the
//!    recovered state stays a prefix of sequence order with no internal key twice. Several
//!    candidates, or one numbered below a listed level-0 table (level 0 orders its runs by
//!    file number, so it would read as older), are corruption at the MANIFEST's ignored
//!    tail: nothing is guessed.
//!
//! Thread-safety contract: runs on the opening thread before any other thread exists.

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, SequenceNumber};
use crate::sstable::Table;
use crate::version::{AddedFile, VersionEdit, VersionSet};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

/// Salvages the table of a flush whose MANIFEST edit was lost (module doc). Returns the
/// sequence through which the salvaged table holds the writes (WAL replay skips batches at
/// or below it), or None if nothing was salvaged.
pub(super) fn salvage_lost_flush(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    read_only: bool,
) -> Result<Option<SequenceNumber>> {
    let Some((manifest, tail)) = versions.manifest_torn_tail.clone() else {
        return Ok(None);
    };
    if read_only {
        return Ok(None); // invariant 1
    }
    let damaged = |reason: String| {
        Error::corruption(
            &manifest,
            tail,
            format!("damaged last record (not a torn write): {reason}"),
        )
    };
    let mut candidates = Vec::new();
    for number in orphan_tables(directory, file_system, versions)? {
        if let Some(file) = candidate(directory, file_system, number, versions.last_sequence)? {
            candidates.push(file);
        }
    }
    let Some(file) = the_only_candidate(candidates, versions).map_err(damaged)? else {
        return Ok(None);
    };
    let through = file.largest_sequence;
    log::warn!(
        "cairn: {} ended in a damaged record at offset {tail}, ignored as a torn tail; \
         salvaged table {} (sequences {}..={through}, past the MANIFEST's last sequence {}) \
         as the flush that record added",
        manifest.display(),
        filename::table_path(directory, file.number).display(),
        file.smallest_sequence,
        versions.last_sequence
    );
    versions.reserve_file_numbers_through(file.number);
    versions.apply_unlogged(&VersionEdit {
        added_files: vec![(0, file)],
        last_sequence: Some(through),
        ..VersionEdit::default()
    })?;
    Ok(Some(through))
}

/// The one candidate, if there is exactly one and it can be the newest level-0 run; None
/// if there is none; otherwise why nothing can be salvaged (invariant 2).
fn the_only_candidate(
    mut candidates: Vec<AddedFile>,
    versions: &VersionSet,
) -> std::result::Result<Option<AddedFile>, String> {
    let file = match candidates.len() {
        0 => return Ok(None),
        1 => candidates.pop(),
        _ => {
            let numbers: Vec<String> = candidates
                .iter()
                .map(|file| file.number.to_string())
                .collect();
            return Err(format!(
                "tables {} each hold only writes past the MANIFEST's last sequence {}; which \
                 one a lost flush edit added is unknown",
                numbers.join(", "),
                versions.last_sequence
            ));
        }
    };
    let current = versions.current();
    let newer = file.as_ref().and_then(|file| {
        current
            .files(0)
            .iter()
            .find(|listed| listed.number > file.number)
            .map(|listed| (file.number, listed.number))
    });
    if let Some((number, newer)) = newer {
        // Level 0 orders runs by file number: the salvaged table would read as older.
        return Err(format!(
            "table {number} holds only writes past the MANIFEST's last sequence, but level-0 \
             table {newer} is numbered above it"
        ));
    }
    Ok(file)
}

/// The tables in `directory` that the recovered version does not list, ascending.
fn orphan_tables(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &VersionSet,
) -> Result<Vec<u64>> {
    let listed: HashSet<u64> = versions.current().file_numbers().collect();
    let mut orphans: Vec<u64> = file_system
        .list(directory)?
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some(FileKind::Table(number)) if !listed.contains(&number) => Some(number),
            _ => None,
        })
        .collect();
    orphans.sort_unstable();
    Ok(orphans)
}

/// Table `number` as an edit would add it, if it is a candidate (module doc): it opens, every
/// block passes its checksum, and every entry's sequence lies in its properties' range,
/// which starts above `last_sequence`. A damaged or partial table is not a candidate; an
/// I/O error is returned.
fn candidate(
    directory: &Path,
    file_system: &dyn FileSystem,
    number: u64,
    last_sequence: SequenceNumber,
) -> Result<Option<AddedFile>> {
    let path = filename::table_path(directory, number);
    let checked = file_system
        .open_read(&path)
        .and_then(|file| {
            let size_bytes = file.size_bytes();
            Ok((Arc::new(Table::open(file, number, None, true)?), size_bytes))
        })
        .and_then(|(table, size_bytes)| {
            let properties = table.properties();
            if properties.entry_count == 0 || properties.smallest_sequence <= last_sequence {
                return Ok(None);
            }
            check_entries(&table, &path)?;
            Ok(Some(AddedFile {
                number,
                size_bytes,
                smallest: properties.smallest_key.clone(),
                largest: properties.largest_key.clone(),
                smallest_sequence: properties.smallest_sequence,
                largest_sequence: properties.largest_sequence,
            }))
        });
    match checked {
        Err(Error::Corruption { reason, .. }) => {
            log::debug!("cairn: orphan {} is not salvaged: {reason}", path.display());
            Ok(None)
        }
        other => other,
    }
}

/// Reads every entry of `table` (at `path`; checksums verified): each key parses and its sequence lies
/// within the properties' range.
fn check_entries(table: &Arc<Table>, path: &Path) -> Result<()> {
    let properties = table.properties();
    let range = properties.smallest_sequence..=properties.largest_sequence;
    let mut entries = table.iter_with(false);
    entries.seek_to_first();
    while entries.valid() {
        let in_range = parse_internal_key(entries.key())
            .is_some_and(|parsed| range.contains(&parsed.sequence));
        if !in_range {
            return Err(Error::corruption(
                path,
                0,
                "an entry lies outside the table's sequence range",
            ));
        }
        entries.next();
    }
    entries.status()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::fs::MemFs;
    use crate::key::{internal_key, ValueKind};

    fn table(number: u64, sequences: (SequenceNumber, SequenceNumber)) -> AddedFile {
        AddedFile {
            number,
            size_bytes: 100,
            smallest: internal_key(b"a", sequences.1, ValueKind::Put),
            largest: internal_key(b"z", sequences.0, ValueKind::Put),
            smallest_sequence: sequences.0,
            largest_sequence: sequences.1,
        }
    }

    /// One candidate is taken only if it can be the newest level-0 run; none is nothing to
    /// salvage; two are refused.
    #[test]
    fn only_a_single_candidate_above_every_level_0_table_is_salvaged() {
        let mut versions = VersionSet::new(Path::new("/db"), Arc::new(MemFs::new()), 4, 1 << 20);
        versions
            .apply_unlogged(&VersionEdit {
                added_files: vec![(0, table(10, (1, 5)))],
                last_sequence: Some(5),
                ..VersionEdit::default()
            })
            .unwrap();
        assert_eq!(the_only_candidate(Vec::new(), &versions), Ok(None));
        let newest = table(11, (6, 9));
        assert_eq!(
            the_only_candidate(vec![newest.clone()], &versions),
            Ok(Some(newest.clone()))
        );
        let below = the_only_candidate(vec![table(7, (6, 9))], &versions).unwrap_err();
        assert!(
            below.contains("level-0 table 10 is numbered above"),
            "{below}"
        );
        let several = the_only_candidate(vec![newest, table(12, (6, 9))], &versions).unwrap_err();
        assert!(several.contains("tables 11, 12"), "{several}");
    }
}
