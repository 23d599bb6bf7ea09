//! Writing a job's output: the entries a [`VersionFilter`] keeps, cut into `SSTables`.
//!
//! [`write_tables`] walks sorted input once, asks the filter about each entry, and appends the
//! survivors to a table until it reaches `target_file_size_bytes`; it only cuts between two
//! user keys, so no user key spans two outputs.
//!
//! Invariants (postconditions of `write_tables`, asserted in debug builds):
//! 1. Outputs are sorted and non-overlapping in user keys (they form one run).
//! 2. Every output's key range lies within the range of the input keys.
//! 3. Each output's recorded smallest/largest key and sequence bounds are those of the
//!    entries written to it.
//!
//! Thread-safety contract: a call owns its input iterator, filter and output files; nothing is
//! shared but the file system, which is `Sync`.

use super::filter::{Decision, VersionFilter};
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{
    compare_internal_keys, internal_key, parse_internal_key, user_key, SequenceNumber,
};
use crate::sstable::{TableBuilder, TableOptions};
use crate::version::AddedFile;
use std::cmp::Ordering;
use std::path::Path;

/// Where a job writes and how.
#[derive(Debug)]
pub struct OutputSettings<'a> {
    /// File system.
    pub file_system: &'a dyn FileSystem,
    /// Database directory.
    pub directory: &'a Path,
    /// `SSTable` format options.
    pub table_options: TableOptions,
    /// Cut a new file once one reaches this size (None: one file).
    pub target_file_size_bytes: Option<u64>,
}

/// The table being written and what is known about it so far.
struct OpenTable {
    builder: TableBuilder,
    file: AddedFile,
}

/// The job's outputs, finished and open.
struct Outputs<'s, 'a> {
    settings: &'s OutputSettings<'a>,
    finished: Vec<AddedFile>,
    open: Option<OpenTable>,
    last_user_key: Vec<u8>,
}

impl Outputs<'_, '_> {
    /// True if the open table is full and `key` starts a new user key (a legal cut point).
    fn should_cut(&self, key: &[u8]) -> bool {
        let full = self.open.as_ref().is_some_and(|current| {
            self.settings
                .target_file_size_bytes
                .is_some_and(|target| current.builder.file_size() >= target)
        });
        full && user_key(key) != self.last_user_key.as_slice()
    }

    fn start_table(
        &mut self,
        first_key: &[u8],
        new_file_number: &mut dyn FnMut() -> u64,
    ) -> Result<()> {
        let number = new_file_number();
        let path = filename::table_path(self.settings.directory, number);
        let file = self.settings.file_system.create(&path)?;
        self.open = Some(OpenTable {
            builder: TableBuilder::new(file, path, self.settings.table_options),
            file: AddedFile {
                number,
                size_bytes: 0,
                smallest: first_key.to_vec(),
                largest: Vec::new(),
                smallest_sequence: SequenceNumber::MAX,
                largest_sequence: 0,
            },
        });
        Ok(())
    }

    /// Appends one entry, cutting a new table first when the open one is full.
    fn add(
        &mut self,
        key: &[u8],
        sequence: SequenceNumber,
        value: &[u8],
        new_file_number: &mut dyn FnMut() -> u64,
    ) -> Result<()> {
        if self.should_cut(key) {
            self.finish_open()?;
        }
        if self.open.is_none() {
            self.start_table(key, new_file_number)?;
        }
        if let Some(current) = self.open.as_mut() {
            current.builder.add(key, value)?;
            current.file.largest.clear();
            current.file.largest.extend_from_slice(key);
            current.file.smallest_sequence = current.file.smallest_sequence.min(sequence);
            current.file.largest_sequence = current.file.largest_sequence.max(sequence);
        }
        if user_key(key) != self.last_user_key.as_slice() {
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(user_key(key));
        }
        Ok(())
    }

    fn finish_open(&mut self) -> Result<()> {
        if let Some(OpenTable { builder, mut file }) = self.open.take() {
            let (properties, size_bytes) = builder.finish_with_size()?;
            // Postcondition (invariant 3): the recorded bounds are the table's.
            debug_assert_eq!(properties.smallest_key, file.smallest);
            debug_assert_eq!(properties.largest_key, file.largest);
            debug_assert_eq!(properties.smallest_sequence, file.smallest_sequence);
            debug_assert_eq!(properties.largest_sequence, file.largest_sequence);
            file.size_bytes = size_bytes;
            self.finished.push(file);
        }
        Ok(())
    }
}

/// Writes the entries of `input` that `filter` keeps into new `SSTables`. `new_file_number`
/// allocates a number (and registers it as a pending output) for each file started. Output
/// files are synced and their directory entry is synced before this returns.
pub fn write_tables(
    input: &mut dyn InternalIterator,
    filter: &mut VersionFilter<'_>,
    settings: &OutputSettings<'_>,
    new_file_number: &mut dyn FnMut() -> u64,
) -> Result<Vec<AddedFile>> {
    // Precondition: a zero target would cut after every user key; callers never ask for it.
    debug_assert!(settings.target_file_size_bytes != Some(0));
    let mut outputs = Outputs {
        settings,
        finished: Vec::new(),
        open: None,
        last_user_key: Vec::new(),
    };
    let mut input_range: Option<(Vec<u8>, Vec<u8>)> = None;
    input.seek_to_first();
    while input.valid() {
        let key = input.key();
        let Some(parsed) = parse_internal_key(key) else {
            input.status()?;
            return Err(Error::Internal(
                "compaction input holds a malformed internal key".into(),
            ));
        };
        if cfg!(debug_assertions) {
            note_input_key(&mut input_range, key);
        }
        match filter.decide(parsed.user_key, parsed.sequence, parsed.kind, input.value()) {
            Decision::Drop => {}
            Decision::Keep => outputs.add(key, parsed.sequence, input.value(), new_file_number)?,
            Decision::Rewrite(kind, value) => {
                let rewritten = internal_key(parsed.user_key, parsed.sequence, kind);
                outputs.add(&rewritten, parsed.sequence, &value, new_file_number)?;
            }
        }
        input.next();
    }
    input.status()?;
    outputs.finish_open()?;
    let finished = outputs.finished;
    debug_assert_eq!(check_outputs(&finished, input_range.as_ref()), Ok(()));
    if !finished.is_empty() {
        settings.file_system.sync_dir(settings.directory)?;
    }
    Ok(finished)
}

/// Widens `range` to include `key` (debug bookkeeping for invariant 2).
fn note_input_key(range: &mut Option<(Vec<u8>, Vec<u8>)>, key: &[u8]) {
    match range {
        None => *range = Some((key.to_vec(), key.to_vec())),
        Some((_, largest)) => {
            largest.clear();
            largest.extend_from_slice(key);
        }
    }
}

/// Invariants 1 and 2 on finished outputs; `input_range` is the first and last input key.
/// A rewritten entry (compaction filter) keeps its user key and sequence, so it stays within
/// the input's user-key range.
fn check_outputs(
    outputs: &[AddedFile],
    input_range: Option<&(Vec<u8>, Vec<u8>)>,
) -> std::result::Result<(), String> {
    for pair in outputs.windows(2) {
        let [left, right] = pair else { continue };
        if user_key(&left.largest) >= user_key(&right.smallest) {
            return Err(format!(
                "outputs {} and {} overlap",
                left.number, right.number
            ));
        }
    }
    for file in outputs {
        if compare_internal_keys(&file.smallest, &file.largest) == Ordering::Greater
            || file.smallest_sequence > file.largest_sequence
        {
            return Err(format!("output {} has inverted bounds", file.number));
        }
        let Some((first, last)) = input_range else {
            return Err(format!("output {} written from no input", file.number));
        };
        if user_key(&file.smallest) < user_key(first) || user_key(&file.largest) > user_key(last) {
            return Err(format!(
                "output {} lies outside the input range",
                file.number
            ));
        }
    }
    Ok(())
}
