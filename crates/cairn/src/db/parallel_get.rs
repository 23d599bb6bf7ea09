//! Point lookups that probe several sorted runs concurrently (`Options::lookup_threads`).
//!
//! Job: when a lookup misses the memory component and more than one run may hold the key
//! (overlapping level-0 files, one candidate file per deeper run), the candidates past the
//! first are handed to the table cache's [`LookupPool`] while the calling thread probes the
//! first itself; the answers are then taken in run order, newest first, and the first hit
//! wins — exactly the answer of the sequential search.
//!
//! Thread-safety contract: pool jobs own what they touch (the file's `Arc<FileMeta>`, the
//! table cache, the lookup key), so a caller that returns early (a hit in a newer run) leaves
//! the remaining jobs harmless: their answers go to a closed channel.
//!
//! Invariants:
//! 1. The answer equals the sequential search's: runs are consulted newest first and a run's
//!    answer is used only once every newer run answered "absent".
//! 2. Every candidate is probed at most once.

use super::inner::DbInner;
use super::read::{moved_version, OwnedVersion};
use crate::error::{Error, Result};
use crate::lookup_pool::LookupPool;
use crate::sstable::reader::TableGet;
use crate::version::{FileMeta, Version};
use std::sync::{mpsc, Arc};

impl DbInner {
    /// The files that may hold `key`, newest first (level 0 in order, then one per run).
    pub(super) fn lookup_candidates<'a>(
        version: &'a Version,
        key: &'a [u8],
    ) -> Vec<&'a Arc<FileMeta>> {
        Self::candidate_files(version, key).collect()
    }

    /// Probes `candidates` (two or more) concurrently; see the module documentation.
    pub(super) fn tables_version_parallel(
        &self,
        pool: &LookupPool,
        candidates: &[&Arc<FileMeta>],
        lookup: &[u8],
    ) -> Result<Option<OwnedVersion>> {
        let (sender, receiver) = mpsc::channel::<(usize, Result<TableGet>)>();
        let shared_lookup: Arc<[u8]> = Arc::from(lookup);
        for (index, file) in candidates.iter().enumerate().skip(1) {
            let file = Arc::clone(file);
            let tables = Arc::clone(&self.table_cache);
            let lookup = Arc::clone(&shared_lookup);
            let sender = sender.clone();
            let job = Box::new(move || {
                let answer = tables.table_ref(&file).and_then(|table| table.get(&lookup));
                // The caller may have stopped listening (an earlier hit): nothing to do.
                let _ = sender.send((index, answer));
            });
            if let Err(job) = pool.try_submit(job) {
                job();
            }
        }
        drop(sender);
        let mut answers: Vec<Option<Result<TableGet>>> =
            (0..candidates.len()).map(|_| None).collect();
        if let (Some(first), Some(slot)) = (candidates.first(), answers.first_mut()) {
            *slot = Some(
                self.table_cache
                    .table_ref(first)
                    .and_then(|table| table.get(lookup)),
            );
        }
        for next in 0..candidates.len() {
            let answer = loop {
                if let Some(answer) = answers.get_mut(next).and_then(Option::take) {
                    break answer;
                }
                let (index, answer) = receiver.recv().map_err(|_| {
                    Error::InvalidArgument("a parallel lookup probe did not answer".to_string())
                })?;
                if let Some(slot) = answers.get_mut(index) {
                    *slot = Some(answer);
                }
            };
            if let Some((sequence, kind, value)) = answer? {
                return Ok(Some(moved_version(sequence, kind, value)));
            }
        }
        Ok(None)
    }
}
