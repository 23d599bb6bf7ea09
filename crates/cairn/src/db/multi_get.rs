//! `multi_get`: batched point lookups that share work per table (like `MultiGet` in `RocksDB`).
//!
//! Job: answer many keys from one super version (so the answers are one consistent state).
//! Keys the memory component answers are done first; the rest are sorted and walked through
//! the tables run by run, newest first — level-0 files, then each run of each deeper level —
//! and each table is asked once for all the pending keys in its range
//! ([`crate::sstable::Table::get_batch`]), so keys in one data block share its filter-free
//! index walk and its one block read. A key leaves the pending set at its first hit (the
//! newest version, invariant 3 of `version`).
//!
//! Thread-safety contract: as `read`: lock-free, holding a super version guard throughout.
//!
//! Invariants:
//! 1. Every answer equals what `get` would return for that key at the same sequence.
//! 2. `pending` stays sorted by user key, so the keys of one file of a run are consecutive.

use super::inner::DbInner;
use super::read::{memory_version, moved_version, OwnedVersion};
use crate::error::Result;
use crate::key::{check_key, internal_key, SequenceNumber, ValueKind};
use crate::version::{FileMeta, Version};

/// A key still being looked for: its position in the caller's list and its seek key.
struct Pending<'k> {
    position: usize,
    user_key: &'k [u8],
    lookup: Vec<u8>,
}

impl DbInner {
    /// The values of `keys` at `sequence` (None: the latest state), in the order given.
    pub(super) fn multi_get(
        &self,
        keys: &[&[u8]],
        sequence: Option<SequenceNumber>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        for key in keys {
            check_key(key)?;
        }
        let Some(sequence) = sequence else {
            return self.multi_get_latest(keys);
        };
        self.multi_get_at(&self.super_version.load(), keys, sequence)
    }

    /// The latest values of `keys`: validated against the Membuffer's drop marks and redone
    /// in a hold if an in-place update may have dropped one (`read` invariant 3).
    fn multi_get_latest(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let (sequence, super_version) = self.read_point();
        self.race_point("get: read point");
        let answers = self.multi_get_at(&super_version, keys, sequence)?;
        if !keys.iter().any(|key| self.read_may_be_stale(key, sequence)) {
            return Ok(answers);
        }
        drop(super_version);
        let _hold = self.hold_for_retry();
        let (sequence, super_version) = self.read_point();
        self.multi_get_at(&super_version, keys, sequence)
    }

    /// The values of `keys` at `sequence` in `super_version`.
    fn multi_get_at(
        &self,
        super_version: &super::SuperVersion,
        keys: &[&[u8]],
        sequence: SequenceNumber,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let mut answers: Vec<Option<OwnedVersion>> = vec![None; keys.len()];
        let mut pending = Vec::new();
        for (position, (key, answer)) in keys.iter().zip(answers.iter_mut()).enumerate() {
            match super_version.memory.get(key, sequence) {
                Some((version, kind, value)) => {
                    *answer = Some(memory_version(version, kind, value));
                }
                None => pending.push(Pending {
                    position,
                    user_key: key,
                    lookup: internal_key(key, sequence, ValueKind::SEEK),
                }),
            }
        }
        pending.sort_by(|a, b| a.user_key.cmp(b.user_key));
        self.tables_multi_get(&super_version.version, &mut pending, &mut answers)?;
        Ok(answers
            .into_iter()
            .map(|answer| answer.and_then(|(_, value, _)| value))
            .collect())
    }

    /// Resolves `pending` against the tables of `version`, newest run first.
    fn tables_multi_get(
        &self,
        version: &Version,
        pending: &mut Vec<Pending<'_>>,
        answers: &mut [Option<OwnedVersion>],
    ) -> Result<()> {
        for file in version.files(0) {
            if pending.is_empty() {
                return Ok(());
            }
            let (start, end) = file_span(file, pending, 0);
            self.probe_file(file, pending, start..end, answers)?;
        }
        for level in 1..version.level_count() {
            for run in version.runs(level) {
                let mut start = 0;
                while start < pending.len() {
                    let Some(first) = pending.get(start) else {
                        break;
                    };
                    let Some(file) = run.find_file(first.user_key) else {
                        start += 1;
                        continue;
                    };
                    let (_, end) = file_span(file, pending, start);
                    let kept = self.probe_file(file, pending, start..end, answers)?;
                    start += kept;
                }
            }
        }
        Ok(())
    }

    /// Looks up `pending[range]` in `file`, records hits in `answers` and drops them from
    /// `pending`; returns how many of the range are still pending.
    fn probe_file(
        &self,
        file: &FileMeta,
        pending: &mut Vec<Pending<'_>>,
        range: std::ops::Range<usize>,
        answers: &mut [Option<OwnedVersion>],
    ) -> Result<usize> {
        let Some(batch) = pending.get(range.clone()) else {
            return Ok(0);
        };
        if batch.is_empty() {
            return Ok(0);
        }
        let table = self.table_cache.table_ref(file)?;
        let lookups: Vec<&[u8]> = batch.iter().map(|key| key.lookup.as_slice()).collect();
        let found = table.get_batch(&lookups, true)?;
        let mut hit = vec![false; batch.len()];
        for ((key, result), hit) in batch.iter().zip(found).zip(hit.iter_mut()) {
            if let Some((sequence, kind, value)) = result {
                if let Some(answer) = answers.get_mut(key.position) {
                    *answer = Some(moved_version(sequence, kind, value));
                }
                *hit = true;
            }
        }
        let mut index = 0;
        pending.retain(|_| {
            let in_range = range.contains(&index);
            let drop = in_range && hit.get(index - range.start).copied().unwrap_or(false);
            index += 1;
            !drop
        });
        Ok(hit.iter().filter(|hit| !**hit).count())
    }
}

/// The span `[start, end)` of `pending` (sorted, from `from` on) whose keys lie in `file`'s
/// user-key range; `start` is the first key at or above the file's smallest key.
fn file_span(file: &FileMeta, pending: &[Pending<'_>], from: usize) -> (usize, usize) {
    let tail = pending.get(from..).unwrap_or_default();
    let start = from + tail.partition_point(|key| key.user_key < file.smallest_user_key());
    let end = from + tail.partition_point(|key| key.user_key <= file.largest_user_key());
    (start, end.max(start))
}
