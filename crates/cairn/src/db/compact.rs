//! Compaction: the background loop that asks the database's `CompactionPolicy` for work and
//! runs it,
//! `Db::compact_range`, the merge-write-install of one plan, and the deletion of files no
//! longer needed.
//!
//! Thread-safety contract: one compaction runs at a time (`compaction_lock`, taken by the
//! compaction thread and by `compact_range`); it holds `versions` only to read the current
//! version and across the MANIFEST write of its edit. Obsolete-file deletion may run on the
//! flush thread, the compaction thread and a client thread at once: each decides from a
//! consistent listing, pending set and live set (see `delete_obsolete_files`).
//!
//! Invariants:
//! 1. A compaction's inputs are in the version it was chosen on, and its edit deletes
//!    exactly its inputs.
//! 2. No live file is deleted: a table is removed only if no version still held lists it and
//!    it is not a pending output; a WAL only below the durable `log_number` (db invariant 4).

use super::inner::{lock, DbInner, WAIT_SLICE};
use crate::compaction::{self, Choice, CompactionState, Plan, VersionFilter};
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::iter::{InternalIterator, MergingIterator};
use crate::stats::Counters;
use crate::table_cache::LevelIterator;
use crate::version::{AddedFile, Version, VersionEdit};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl DbInner {
    /// The compaction thread: runs compactions while the policy finds work.
    pub(super) fn compaction_loop(&self) {
        loop {
            {
                let mut background = lock(&self.background);
                if background.shutting_down || self.has_sticky_error.load(Ordering::Acquire) {
                    return;
                }
                if !background.compaction_wanted {
                    let _ = self
                        .background_changed
                        .wait_timeout(background, WAIT_SLICE * 10);
                    continue;
                }
                background.compaction_wanted = false;
            }
            if !self.compact_while_needed() {
                return;
            }
        }
    }

    /// Runs compactions until none is needed; false when the thread must stop (shutdown or
    /// a sticky error).
    fn compact_while_needed(&self) -> bool {
        loop {
            let _compacting = lock(&self.compaction_lock);
            if lock(&self.background).shutting_down {
                return false;
            }
            let (version, state) = {
                let versions = lock(&self.versions);
                let mut state = CompactionState::new(self.shape.clone());
                state
                    .compact_pointers
                    .clone_from(&versions.compact_pointers);
                (versions.current(), state)
            };
            // One compaction runs at a time (`compaction_lock`), so nothing is busy here; the
            // state's busy sets are for policies run beside a running compaction.
            let plan = match self.policy.choose(&version, &state) {
                Choice::Nothing => return true,
                Choice::Compact(plan) => plan,
            };
            debug_assert!(plan.output_level < version.level_count());
            let inputs: Vec<(usize, u64)> = plan
                .inputs
                .iter()
                .map(|file| (plan.level, file.number))
                .collect();
            if let Err(error) = self.run_compaction(version, &plan) {
                self.set_sticky_error(&error);
                return false;
            }
            // Postcondition: the inputs left the current version (moved or merged away).
            let current = self.super_version.load_full();
            debug_assert!(inputs.iter().all(|&(level, number)| current
                .version
                .files(level)
                .iter()
                .all(|file| file.number != number)));
        }
    }

    /// Compacts every level's files overlapping `[lower, upper]` down into the next level.
    pub(super) fn compact_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<()> {
        let _compacting = lock(&self.compaction_lock);
        let level_count = self.options.level_count;
        for level in 0..level_count - 1 {
            let version = self.super_version.load().version.clone();
            let plan = if level == 0 {
                // Level-0 files overlap one another: compacting only some of them could put
                // an older version above a newer one, so take them all.
                compaction::plan_for_inputs(&version, 0, version.files(0).to_vec())
            } else {
                compaction::plan_for_range(&version, level, lower, upper)
            };
            if let Some(plan) = plan {
                if let Err(error) = self.run_compaction(version, &plan) {
                    // As in the background compactor: a failed write or sync here may leave
                    // the MANIFEST or the directory in an unknown state (sticky error).
                    self.set_sticky_error(&error);
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    /// Executes `plan` (chosen on `version`, which must still be current for its levels),
    /// then deletes the files it made obsolete. Caller holds `compaction_lock`.
    ///
    /// It takes `version` by value so that it can let go of it before the deletion pass: a
    /// version still held keeps its files live, so the inputs of this compaction would
    /// otherwise wait for the next pass (and, after the last compaction of a busy spell,
    /// sit on disk until the next open).
    pub(super) fn run_compaction(&self, version: Arc<Version>, plan: &Plan) -> Result<()> {
        debug_assert!(
            self.compaction_lock.try_lock().is_err(),
            "caller holds compaction_lock"
        );
        let result = self.compact_plan(&version, plan);
        drop(version);
        if result.is_ok() {
            self.delete_obsolete_files();
        }
        result
    }

    /// The work of `run_compaction` while it still holds `version`: merge, write, install.
    fn compact_plan(&self, version: &Arc<Version>, plan: &Plan) -> Result<()> {
        debug_assert!(
            plan.inputs.iter().all(|file| version
                .files(plan.level)
                .iter()
                .any(|live| live.number == file.number)),
            "invariant 1: an input is not in the version"
        );
        debug_assert!(plan.output_level > plan.level || plan.is_trivial_move());
        let mut edit = VersionEdit::default();
        for file in &plan.inputs {
            edit.deleted_files.push((plan.level, file.number));
        }
        for file in &plan.output_level_inputs {
            edit.deleted_files.push((plan.output_level, file.number));
        }
        if let Some(largest) = plan.largest_input_key() {
            edit.compact_pointers.push((plan.level, largest.to_vec()));
        }
        if plan.is_trivial_move() {
            for file in &plan.inputs {
                edit.added_files
                    .push((plan.output_level, AddedFile::from_meta(file)));
            }
            self.apply_and_install(edit, None)?;
            Counters::add(&self.counters.compactions, 1);
            Counters::add(&self.counters.trivial_moves, 1);
            return Ok(());
        }
        let mut merged = self.compaction_input(plan)?;
        let snapshots = self.snapshots.sequences();
        let mut filter = VersionFilter::new(&snapshots, Some((version, plan.output_level)))
            .with_compaction_filter(self.options.compaction_filter.as_deref(), plan.output_level);
        let outputs = self.write_outputs(
            &mut merged,
            &mut filter,
            Some(self.options.target_file_size_bytes),
        )?;
        let written: u64 = outputs.iter().map(|file| file.size_bytes).sum();
        edit.added_files = outputs
            .into_iter()
            .map(|file| (plan.output_level, file))
            .collect();
        self.apply_and_install(edit, None)?;
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_read_bytes, plan.input_bytes());
        Counters::add(&self.counters.compaction_write_bytes, written);
        Ok(())
    }

    /// The merged input of a plan. Compaction reads each input block once: filling the block
    /// cache with them would evict the blocks reads keep hot, and cost an insert and an
    /// eviction per block.
    fn compaction_input(&self, plan: &Plan) -> Result<MergingIterator> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for file in &plan.inputs {
            children.push(Box::new(self.table_cache.table(file)?.iter_with(false)));
        }
        if !plan.output_level_inputs.is_empty() {
            children.push(Box::new(LevelIterator::new(
                plan.output_level_inputs.clone(),
                Arc::clone(&self.table_cache),
                false,
            )));
        }
        Ok(MergingIterator::new(children))
    }

    /// Deletes files no version, pending output or unflushed buffer needs (invariant 2).
    /// Failures are ignored: a leftover file is harmless and retried next time.
    pub(super) fn delete_obsolete_files(&self) {
        // Order matters: list first, then pending outputs, then live files. A file in the
        // listing was numbered (and made pending) before it was created; if it is no longer
        // pending it was installed first, so the live set read afterwards contains it.
        let Ok(names) = self.file_system.list(&self.directory) else {
            return;
        };
        let pending = lock(&self.pending_outputs).clone();
        let (live, log_number, manifest_number) = {
            let mut versions = lock(&self.versions);
            (
                versions.live_file_numbers(),
                versions.log_number,
                versions.manifest_number(),
            )
        };
        let current = self.super_version.load_full();
        for name in names {
            let obsolete = match filename::parse_file_name(&name) {
                Some(FileKind::Wal(number)) => number < log_number,
                Some(FileKind::Table(number)) => {
                    !live.contains(&number) && !pending.contains(&number)
                }
                Some(FileKind::Manifest(number)) => number < manifest_number,
                _ => false,
            };
            if !obsolete {
                continue;
            }
            if let Some(FileKind::Table(number)) = filename::parse_file_name(&name) {
                // Invariant 2: the current version's files are always live (the current
                // super version was installed before the live set was read, or is older
                // and then its files are still held, hence live).
                debug_assert!(current.version.file_numbers().all(|live| live != number));
            }
            if self.file_system.remove(&self.directory.join(&name)).is_ok() {
                Counters::add(&self.counters.files_deleted, 1);
            }
        }
    }
}
