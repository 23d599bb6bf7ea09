//! Flush: the background thread that writes the oldest sealed write buffer to a level-0
//! table, builds Bloom filters for quiet sealed buffers meanwhile, and `Db::flush`, which
//! seals the active buffer and waits for the sealed ones to reach disk. Also the shared
//! tail of flushes and compactions: writing outputs and installing a MANIFEST edit.
//!
//! Thread-safety contract: `flush_loop` runs on the one flush thread; `flush` on any client
//! thread (it claims the switch like a writer). Installs hold `versions` across MANIFEST I/O
//! and `super_version_update` only for the pointer swap.
//!
//! Invariants:
//! 1. A buffer is flushed only once it is quiet: its last sequence is visible (db
//!    invariant 3), so its contents are final.
//! 2. The table a flush installs covers exactly the buffer's entries: its key range is
//!    within the buffer's, and the buffer leaves the super version in the same swap that
//!    installs the table, after the MANIFEST edit is durable.
//! 3. Every output file is pending (never swept as obsolete) from its numbering until it is
//!    installed or its write failed.

use super::inner::{lock, DbInner, WAIT_SLICE};
use crate::compaction::{self, OutputSettings, VersionFilter};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::memory::WriteBuffer;
use crate::stats::Counters;
use crate::version::{AddedFile, VersionEdit};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl DbInner {
    /// Seals the active buffer (if not empty) and waits until every buffer sealed up to now
    /// is on disk.
    pub(super) fn flush(&self) -> Result<()> {
        self.check_writable()?;
        let buffer = Arc::clone(self.super_version.load().memory.active());
        if !buffer.is_empty() {
            // Claim the switch like a writer that found the buffer full; if a writer already
            // claimed it, its switch does the job.
            self.make_room(&buffer)?;
        }
        let first = buffer.log().first_sequence();
        // Postcondition of the seal above: the buffer no longer takes writes, so waiting for
        // every sealed buffer up to it terminates.
        debug_assert!(buffer.is_empty() || buffer.last_sequence().is_some());
        loop {
            self.check_writable()?;
            let super_version = self.super_version.load();
            let pending = super_version
                .memory
                .sealed()
                .iter()
                .any(|sealed| sealed.log().first_sequence() <= first);
            if !pending {
                return Ok(());
            }
            drop(super_version);
            let background = lock(&self.background);
            if background.shutting_down {
                return Err(Error::Closed);
            }
            let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
        }
    }

    /// The flush thread: flushes the oldest sealed buffer whenever there is one.
    pub(super) fn flush_loop(&self) {
        loop {
            {
                let background = lock(&self.background);
                if background.shutting_down || self.has_sticky_error.load(Ordering::Acquire) {
                    return;
                }
                if self.super_version.load().memory.sealed().is_empty() {
                    let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
                    continue;
                }
            }
            self.build_filters();
            if let Err(error) = self.flush_oldest() {
                self.set_sticky_error(&error);
                return;
            }
            self.request_compaction();
        }
    }

    /// Gives every quiet sealed buffer a Bloom filter, so gets skip the ones that cannot
    /// hold their key (sLSM §2.1). Cheap next to a flush, and done while the flush waits.
    fn build_filters(&self) {
        if self.options.bloom_bits_per_key == 0 {
            return;
        }
        let super_version = self.super_version.load_full();
        for sealed in super_version.memory.sealed() {
            let quiet = sealed
                .last_sequence()
                .is_some_and(|last| self.inserted.get() >= last);
            if quiet && !sealed.has_filter() {
                sealed.build_filter(self.options.bloom_bits_per_key);
            }
        }
    }

    /// Waits until every writer inside the sealed `buffer` has inserted and its last
    /// sequence is visible (invariant 1), so its contents are final and readers at the
    /// visible sequence never need a version the flush would drop. A writer holds a sequence
    /// <= `last_sequence` from its reservation until `finish_write`, so the inserted
    /// watermark reaching `last_sequence` is exactly "no writer is inside".
    fn wait_quiet(&self, buffer: &WriteBuffer) -> Result<()> {
        let Some(last) = buffer.last_sequence() else {
            return Err(Error::Internal(
                "flush of a memtable that was never sealed".into(),
            ));
        };
        self.wait_visible(last)?;
        debug_assert!(self.visible() >= last, "invariant 1");
        Ok(())
    }

    /// Writes the oldest sealed buffer to a level-0 table and drops it from memory.
    fn flush_oldest(&self) -> Result<()> {
        let Some(oldest) = self.super_version.load().memory.oldest_sealed().cloned() else {
            return Ok(());
        };
        debug_assert!(
            oldest.last_sequence().is_some(),
            "a sealed buffer without a last sequence"
        );
        self.wait_quiet(&oldest)?;
        #[cfg(feature = "bench-variants")]
        if self.options.drop_sealed_memtables {
            return self.drop_sealed(&oldest);
        }
        let snapshots = self.snapshots.sequences();
        let mut filter = VersionFilter::new(&snapshots, None);
        let mut input = oldest.gather_for_flush();
        let outputs = self.write_outputs(&mut input, &mut filter, None, 0)?;
        check_flush_outputs(&oldest, &outputs);
        let written: u64 = outputs.iter().map(|file| file.size_bytes).sum();
        let edit = VersionEdit {
            // WALs are numbered in switch order, so every buffer still unflushed has a WAL
            // numbered above this one's.
            log_number: Some(oldest.wal_number() + 1),
            // The buffer's own last sequence, not the visible one: later writes are in later
            // buffers and WALs (replayed at open, which takes the larger), and a checkpoint
            // reports this as the sequence its copy holds exactly.
            last_sequence: oldest.last_sequence(),
            added_files: outputs.into_iter().map(|file| (0, file)).collect(),
            ..VersionEdit::default()
        };
        // Counted before the install: `Db::flush` returns once the buffer has left the super
        // version, and its caller should find the flush in the statistics (a failed install
        // stops the database, so nothing is counted that a caller could rely on).
        Counters::add(&self.counters.flushes, 1);
        Counters::add(&self.counters.flush_bytes, written);
        self.counters.add_level_write(0, written);
        self.apply_and_install(edit, Some(&oldest))?;
        debug_assert!(self
            .super_version
            .load()
            .memory
            .sealed()
            .iter()
            .all(|sealed| !Arc::ptr_eq(sealed, &oldest)));
        // The table and the MANIFEST edit are synced: the WAL is never needed again, so a
        // later sync in a newer log does not wait for it (wal_writer invariant 4).
        oldest.log().retire();
        self.delete_obsolete_files();
        Ok(())
    }

    /// Benchmark variant: removes the sealed `buffer` from memory without writing it (its
    /// writes are lost), counting the versions its Membuffer still held.
    #[cfg(feature = "bench-variants")]
    fn drop_sealed(&self, buffer: &Arc<WriteBuffer>) -> Result<()> {
        Counters::add(
            &self.counters.membuffer.undrained_at_drop,
            buffer.undrained() as u64,
        );
        let edit = VersionEdit {
            log_number: Some(buffer.wal_number() + 1),
            last_sequence: Some(self.visible()),
            ..VersionEdit::default()
        };
        self.apply_and_install(edit, Some(buffer))?;
        buffer.log().retire();
        Ok(())
    }

    /// Runs `compaction::write_tables` with `level`'s table settings, registering each output as pending so the obsolete
    /// file sweep leaves it alone until it is installed (or, on failure, forgotten — its
    /// partial file is then swept; invariant 3).
    pub(super) fn write_outputs(
        &self,
        input: &mut dyn InternalIterator,
        filter: &mut VersionFilter<'_>,
        target_file_size_bytes: Option<u64>,
        level: usize,
    ) -> Result<Vec<AddedFile>> {
        let version = &self.super_version.load().version;
        let deepest = version.deepest_nonempty_level();
        let settings = OutputSettings {
            file_system: self.file_system.as_ref(),
            directory: &self.directory,
            table_options: compaction::table_options_for(&self.options, level, deepest),
            target_file_size_bytes,
        };
        let mut allocated = Vec::new();
        let mut allocate = || {
            let number = self.file_numbers.fetch_add(1, Ordering::SeqCst);
            lock(&self.pending_outputs).insert(number);
            allocated.push(number);
            number
        };
        let result = compaction::write_tables(input, filter, &settings, &mut allocate);
        if result.is_err() {
            let mut pending = lock(&self.pending_outputs);
            for number in &allocated {
                pending.remove(number);
            }
        }
        if let Ok(outputs) = &result {
            debug_assert!(outputs.iter().all(|file| allocated.contains(&file.number)));
            debug_assert!(
                outputs
                    .iter()
                    .all(|file| lock(&self.pending_outputs).contains(&file.number)),
                "invariant 3: an output is not pending until it is installed"
            );
        }
        result
    }

    /// Logs `edit` to the MANIFEST, then installs the new version (and, for a flush, removes
    /// the flushed buffer) in one super-version swap (invariant 2).
    pub(super) fn apply_and_install(
        &self,
        edit: VersionEdit,
        flushed: Option<&Arc<WriteBuffer>>,
    ) -> Result<()> {
        debug_assert!(
            flushed.is_none_or(|flushed| self
                .super_version
                .load()
                .memory
                .sealed()
                .iter()
                .any(|sealed| Arc::ptr_eq(sealed, flushed))),
            "the flushed buffer is not sealed in the super version"
        );
        let added: Vec<u64> = edit
            .added_files
            .iter()
            .map(|(_, file)| file.number)
            .collect();
        let mut versions = lock(&self.versions);
        // On error the edit may still be in the MANIFEST (a failed sync does not mean the
        // record is absent), so the next open may list its new files: they stay pending
        // (never swept) for the rest of this process, which is stopped by the sticky error.
        let version = versions.log_and_apply(edit)?;
        debug_assert!(added
            .iter()
            .all(|number| version.file_numbers().any(|live| live == *number)));
        self.install_version(version, flushed);
        drop(versions);
        let mut pending = lock(&self.pending_outputs);
        for number in &added {
            pending.remove(number);
        }
        drop(pending);
        self.background_changed.notify_all();
        Ok(())
    }
}

/// Invariant 2, checked with the `invariants` feature: the flushed tables hold only keys of
/// the buffer, and together cover its smallest and largest keys.
fn check_flush_outputs(buffer: &WriteBuffer, outputs: &[AddedFile]) {
    if !cfg!(feature = "invariants") {
        return;
    }
    let mut input = buffer.gather_for_flush();
    input.seek_to_first();
    let Some(smallest) = input.valid().then(|| input.key().to_vec()) else {
        return;
    };
    input.seek_to_last();
    let largest = input.key().to_vec();
    let smallest_user = crate::key::user_key(&smallest);
    let largest_user = crate::key::user_key(&largest);
    let low = outputs
        .iter()
        .map(|file| crate::key::user_key(&file.smallest))
        .min();
    let high = outputs
        .iter()
        .map(|file| crate::key::user_key(&file.largest))
        .max();
    // The filter may drop shadowed versions but never a key's newest one, so the user-key
    // range of the outputs is exactly the buffer's.
    assert_eq!(
        low,
        Some(smallest_user),
        "flush output starts past its input"
    );
    assert_eq!(
        high,
        Some(largest_user),
        "flush output ends before its input"
    );
}
