//! Compaction: the background loop that asks the database's `CompactionPolicy` for work and
//! runs it,
//! `Db::compact_range`, the merge-write-install of one plan, and the deletion of files no
//! longer needed.
//!
//! Thread-safety contract: `Options::compaction_threads` threads run `compaction_loop`. A
//! thread chooses and registers its plan in `running` while holding `compaction_lock`, then
//! runs it without the lock, so compactions of disjoint levels and files run at once (the
//! policy is told what is busy). The chooser reads the current version and `running` in one
//! critical section of `versions` (invariant 5); a job leaves `running` only after its edit
//! is installed. `compact_range` holds `compaction_lock` throughout and first
//! waits for `running` to empty, so it runs alone. A job holds `versions` only to read the
//! current version and across the MANIFEST write of its edit. Obsolete-file deletion may run on the
//! flush thread, the compaction thread and a client thread at once: each decides from a
//! consistent listing, pending set and live set (see `delete_obsolete_files`).
//!
//! Invariants:
//! 1. A compaction's inputs are in the version it was chosen on, and its edit deletes
//!    exactly its inputs.
//! 2. No live file is deleted: a table is removed only if no version still held lists it and
//!    it is not a pending output; a WAL only below the durable `log_number` (db invariant 4).
//! 3. Running compactions are disjoint: no two hold the same level or file (`running`).
//! 4. A plan's new run gets an id drawn from the file-number counter when its edit is made,
//!    larger than every existing run id (version invariant 6).
//! 5. A plan is chosen on a version that shows every compaction no longer in `running`: the
//!    version and the running set are read together under `versions`. So a chosen plan
//!    holds on the current version too (checked in debug builds when it is registered),
//!    not only on the one it was chosen from.

use super::inner::{lock, DbInner, WAIT_SLICE};
use crate::compaction::{self, Choice, CompactionState, OutputRun, Plan, VersionFilter};
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::iter::{InternalIterator, MergingIterator};
use crate::stats::Counters;
use crate::table_cache::LevelIterator;
use crate::version::{AddedFile, Version, VersionEdit};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The background compactions running now (invariant 3).
#[derive(Debug, Default)]
pub(super) struct RunningCompactions {
    /// Levels held, once per holder (a plan holds its input and output level).
    levels: Vec<usize>,
    /// Files being read.
    files: HashSet<u64>,
}

impl RunningCompactions {
    /// Fills `state`'s busy sets.
    fn describe(&self, state: &mut CompactionState) {
        state.busy_levels.extend(self.levels.iter().copied());
        state.compacting_files.extend(self.files.iter().copied());
    }

    fn register(&mut self, plan: &Plan) {
        // Invariant 3, checked before taking.
        debug_assert!(!self.levels.contains(&plan.level));
        debug_assert!(!self.levels.contains(&plan.output_level));
        debug_assert!(plan
            .all_inputs()
            .all(|file| !self.files.contains(&file.number)));
        self.levels.push(plan.level);
        self.levels.push(plan.output_level);
        self.files.extend(plan.all_inputs().map(|file| file.number));
    }

    fn release(&mut self, plan: &Plan) {
        for level in [plan.level, plan.output_level] {
            if let Some(index) = self.levels.iter().position(|&held| held == level) {
                self.levels.swap_remove(index);
            }
        }
        for file in plan.all_inputs() {
            self.files.remove(&file.number);
        }
    }

    fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }
}

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
            let Some((version, plan)) = self.choose_and_register() else {
                return !lock(&self.background).shutting_down;
            };
            if self.options.compaction_threads > 1 {
                // Another idle thread may find disjoint work beside this one.
                self.request_compaction();
            }
            let inputs: Vec<(usize, u64)> = plan
                .inputs
                .iter()
                .map(|file| (plan.level, file.number))
                .collect();
            if let Err(error) = self.run_registered(version, &plan) {
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

    /// Runs `plan` (chosen on `version` and registered by `choose_and_register`), then
    /// releases its registration.
    pub(super) fn run_registered(&self, version: Arc<Version>, plan: &Plan) -> Result<()> {
        let result = self.run_compaction(version, plan);
        lock(&self.running).release(plan);
        self.background_changed.notify_all();
        result
    }

    /// Under `compaction_lock`: asks the policy for work disjoint from what is running and
    /// registers it. None if there is nothing to do (or the database is shutting down).
    pub(super) fn choose_and_register(&self) -> Option<(Arc<Version>, Plan)> {
        let _choosing = lock(&self.compaction_lock);
        if lock(&self.background).shutting_down {
            return None;
        }
        let (version, state) = self.compaction_state();
        self.race_point("choose: state taken");
        let Choice::Compact(plan) = self.policy.choose(&version, &state) else {
            return None;
        };
        debug_assert!(plan.output_level < version.level_count());
        debug_assert_eq!(
            plan.check(&lock(&self.versions).current()),
            Ok(()),
            "invariant 5: a plan that does not hold on the current version"
        );
        lock(&self.running).register(&plan);
        Some((version, plan))
    }

    /// The current version and what the policy must know besides it, taken together
    /// (invariant 5): a job installs its edit under `versions` before it leaves `running`,
    /// so reading both under `versions` sees every job either still running (its levels and
    /// files busy) or installed (in the version). Read apart, a job finishing in between
    /// would look done in `running` but not yet done in the version, and its inputs —
    /// already merged away — would be chosen again.
    fn compaction_state(&self) -> (Arc<Version>, CompactionState) {
        let versions = lock(&self.versions);
        let mut state = CompactionState::new(self.shape.clone());
        state
            .compact_pointers
            .clone_from(&versions.compact_pointers);
        lock(&self.running).describe(&mut state);
        (versions.current(), state)
    }

    /// Compacts every level's files overlapping `[lower, upper]` down into the next level.
    pub(super) fn compact_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<()> {
        let _compacting = lock(&self.compaction_lock);
        self.wait_for_running_compactions()?;
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
                self.run_manual(version, &plan)?;
            }
        }
        // The last level has nowhere to drain: merge its runs (a tiered shape) into one. A
        // full-range compaction rewrites it even as one run: files moved down unread (keys
        // that never overlapped the level below) would otherwise keep expired values and
        // tombstones, and the compaction filter would never see them.
        let version = self.super_version.load().version.clone();
        let last = level_count - 1;
        let plan = if lower.is_none() && upper.is_none() {
            compaction::rewrite_level_fully(&version, last)
        } else {
            compaction::rewrite_level(&version, last)
        };
        if let Some(plan) = plan {
            self.run_manual(version, &plan)?;
        }
        Ok(())
    }

    /// One plan of `compact_range`.
    fn run_manual(&self, version: Arc<Version>, plan: &Plan) -> Result<()> {
        self.run_compaction(version, plan).inspect_err(|error| {
            // As in the background compactor: a failed write or sync here may leave the
            // MANIFEST or the directory in an unknown state (sticky error).
            self.set_sticky_error(error);
        })
    }

    /// Waits until no background compaction runs (the caller holds `compaction_lock`, so
    /// none starts meanwhile).
    fn wait_for_running_compactions(&self) -> Result<()> {
        loop {
            self.check_writable()?;
            if lock(&self.running).is_empty() {
                return Ok(());
            }
            let background = lock(&self.background);
            if background.shutting_down {
                return Err(crate::error::Error::Closed);
            }
            let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
        }
    }

    /// Executes `plan` (chosen on `version`, which must still be current for its levels),
    /// then deletes the files it made obsolete. Caller holds `compaction_lock` or has the
    /// plan registered in `running`.
    ///
    /// It takes `version` by value so that it can let go of it before the deletion pass: a
    /// version still held keeps its files live, so the inputs of this compaction would
    /// otherwise wait for the next pass (and, after the last compaction of a busy spell,
    /// sit on disk until the next open).
    pub(super) fn run_compaction(&self, version: Arc<Version>, plan: &Plan) -> Result<()> {
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
        debug_assert!(plan.output_level > plan.level || plan.is_level_rewrite());
        let mut edit = VersionEdit::default();
        // Invariant 4: the run the outputs join.
        let run_id = match plan.output_run {
            OutputRun::Merge(index) => version.level(plan.output_level).run_id(index),
            OutputRun::New => None,
        }
        .unwrap_or_else(|| self.file_numbers.fetch_add(1, Ordering::SeqCst));
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
                edit.file_runs.push((file.number, run_id));
            }
            self.apply_and_install(edit, None)?;
            Counters::add(&self.counters.compactions, 1);
            Counters::add(&self.counters.trivial_moves, 1);
            return Ok(());
        }
        let mut merged = self.compaction_input(plan)?;
        let snapshots = self.snapshots.sequences();
        let input_numbers: HashSet<u64> = plan.all_inputs().map(|file| file.number).collect();
        let mut filter = VersionFilter::new(&snapshots, Some((version, plan.output_level)))
            .excluding(&input_numbers)
            .with_compaction_filter(self.options.compaction_filter.as_deref(), plan.output_level);
        let outputs = self.write_outputs(
            &mut merged,
            &mut filter,
            Some(self.options.target_file_size_bytes),
            plan.output_level,
        )?;
        let written: u64 = outputs.iter().map(|file| file.size_bytes).sum();
        edit.file_runs = outputs.iter().map(|file| (file.number, run_id)).collect();
        edit.added_files = outputs
            .into_iter()
            .map(|file| (plan.output_level, file))
            .collect();
        self.apply_and_install(edit, None)?;
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_read_bytes, plan.input_bytes());
        Counters::add(&self.counters.compaction_write_bytes, written);
        self.counters.add_level_write(plan.output_level, written);
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

    /// Calls `visit` with the `Put` entries of the write buffers (`None`) or of on-disk level
    /// `level`, every version present, run by run (newest run first) and by key within a run,
    /// until it returns false (`Db::visit_level_entries`). Reads the tables without filling
    /// the block cache, and holds no entry itself.
    pub(super) fn visit_level_entries(
        &self,
        level: Option<usize>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let super_version = self.super_version.load_full();
        let sources: Vec<Box<dyn InternalIterator>> = match level {
            None => super_version.memory.iterators(),
            Some(level) => super_version
                .version
                .runs(level)
                .map(|run| -> Box<dyn InternalIterator> {
                    Box::new(LevelIterator::new(
                        run.files().to_vec(),
                        Arc::clone(&self.table_cache),
                        false,
                    ))
                })
                .collect(),
        };
        let now_millis = crate::expiry::now_millis();
        for mut source in sources {
            source.seek_to_first();
            while source.valid() {
                // Stored values with an expiry count too (their value without the expiry
                // prefix), unless already expired: they read as tombstones, which are left out.
                if let Some(key) = crate::key::parse_internal_key(source.key()) {
                    let visible = crate::expiry::visible(key.kind, source.value(), now_millis);
                    if let Some((value, _)) = visible {
                        if !visit(key.user_key, value) {
                            return source.status();
                        }
                    }
                }
                source.next();
            }
            source.status()?;
        }
        Ok(())
    }

    /// The first `limit` entries [`DbInner::visit_level_entries`] visits
    /// (`Db::level_entries`).
    pub(super) fn level_entries(
        &self,
        level: Option<usize>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut entries = Vec::new();
        self.visit_level_entries(level, &mut |key, value| {
            if entries.len() >= limit {
                return false;
            }
            entries.push((key.to_vec(), value.to_vec()));
            entries.len() < limit
        })?;
        Ok(entries)
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
