//! The read path: point reads (the memory component, then level 0 newest first, then one
//! file per deeper level) and iterators merging every component of a super version.
//!
//! Thread-safety contract: reads run on client threads concurrently with writers, flushes
//! and compactions, without locks: they hold a super version (guard or `Arc`) for their
//! duration, so every buffer and table they touch stays alive and immutable or
//! concurrently readable.
//!
//! Invariants:
//! 1. A read at sequence `s` returns the newest version with sequence <= `s`: the memory
//!    component holds newer versions than any table, and level 0 files are searched before
//!    deeper levels.
//! 2. A read of the latest state uses a sequence >= its super version's `oldest_readable`
//!    (`read_point`), so nothing it needs was dropped by a flush or compaction.
//! 3. With the Membuffer on, a read of the latest state is validated after its lookup
//!    against the drop marks of its keys' buckets (`membuffer::gate`); one that an in-place
//!    update may have robbed of its version is redone in a hold of the gate, at a later read
//!    point (the read started before that update was acknowledged, so the later point is
//!    linearizable). A latest-state iterator holds the gate from just after its read point
//!    (checking that no update announced a sequence above it, or else waiting and taking a
//!    new read point inside the hold: `iterator_read_point`), a snapshot iterator from its
//!    creation (its snapshot may be released before it ends), until its cursor has drained
//!    every Membuffer partition (it drains each as it enters its key range, `memory::scan`)
//!    or is dropped.

use super::inner::DbInner;
use super::super_version::SuperVersion;
use crate::db_iter::DbIterator;
use crate::error::Result;
use crate::iter::MergingIterator;
use crate::key::{check_key, internal_key, SequenceNumber, ValueKind};
use crate::membuffer::GateHold;
use crate::memory::WriteHint;
use crate::options::ReadOptions;
use crate::snapshot::Snapshot;
use crate::sstable::bloom::bloom_hash;
use crate::sstable::pinned::PinnedValue;
use crate::sstable::reader::TableFound;
use crate::sstable::Table;
use crate::stats::Counters;
use crate::table_cache::{LevelIterator, ScanSource};
use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// Candidate tables a point lookup gathers (and prefetches the filter lines of) before it
/// probes them (`probe_tables`): more than level 0's runs plus one run per deeper level under
/// the default shapes, and few enough that a deep tiered tree, where the lookup may stop at
/// the first hit, does not load lines it never reads.
const PROBE_BATCH: usize = 8;

/// A version as the read paths return it: its sequence, value (`None`: a tombstone or an
/// expired value) and expiry in milliseconds since the Unix epoch (`None`: none).
pub(super) type OwnedVersion = (SequenceNumber, Option<Vec<u8>>, Option<u64>);

/// A version as the read paths return it, from a borrowed one. An expired value reads as a
/// tombstone, so it hides older versions (`expiry` invariant 1).
pub(super) fn owned_version(
    version: SequenceNumber,
    kind: ValueKind,
    value: &[u8],
) -> OwnedVersion {
    match kind {
        ValueKind::Put => (version, Some(value.to_vec()), None),
        ValueKind::Delete => (version, None, None),
        // The clock is read only for expiring entries: plain reads stay free of it.
        ValueKind::PutWithExpiry => {
            match crate::expiry::visible(kind, value, crate::expiry::now_millis()) {
                Some((value, expiry)) => (version, Some(value.to_vec()), expiry),
                None => (version, None, None),
            }
        }
    }
}

/// [`owned_version`] from a value already copied out of its table: a plain value is moved,
/// not copied a second time.
pub(super) fn moved_version(
    version: SequenceNumber,
    kind: ValueKind,
    value: Vec<u8>,
) -> OwnedVersion {
    match kind {
        ValueKind::Put => (version, Some(value), None),
        _ => owned_version(version, kind, &value),
    }
}

/// A memory-component version as an [`OwnedVersion`]: a value the Membuffer already copied
/// out (`Cow::Owned`) is moved, a value borrowed from the memtable is copied once.
pub(super) fn memory_version(
    version: SequenceNumber,
    kind: ValueKind,
    value: std::borrow::Cow<'_, [u8]>,
) -> OwnedVersion {
    match value {
        std::borrow::Cow::Owned(value) => moved_version(version, kind, value),
        std::borrow::Cow::Borrowed(value) => owned_version(version, kind, value),
    }
}

/// The visible value of a pinned table entry (`None`: a tombstone or an expired value), as
/// [`owned_version`] decides, without copying it.
fn pinned_value(kind: ValueKind, value: PinnedValue) -> Option<PinnedValue> {
    match kind {
        ValueKind::Put => Some(value),
        ValueKind::Delete => None,
        ValueKind::PutWithExpiry => {
            crate::expiry::visible(kind, &value, crate::expiry::now_millis())?;
            value.skip_front(crate::expiry::EXPIRY_BYTES)
        }
    }
}

/// What the hinted read of read-modify-write found: the newest version, whether it came
/// from memory, and where to insert the next version.
pub(super) struct HintedRead<'a> {
    pub(super) found: Option<OwnedVersion>,
    pub(super) in_memory: bool,
    pub(super) hint: WriteHint<'a>,
}

impl DbInner {
    /// The value of `key` at `sequence` (None: the latest state).
    pub(super) fn get(
        &self,
        key: &[u8],
        sequence: Option<SequenceNumber>,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self
            .get_version(key, sequence)?
            .and_then(|(_, value, _)| value))
    }

    /// The value of `key` at `sequence` (None: the latest state) with its expiry in
    /// milliseconds since the Unix epoch.
    pub(super) fn get_with_expiry(
        &self,
        key: &[u8],
        sequence: Option<SequenceNumber>,
    ) -> Result<Option<(Vec<u8>, Option<u64>)>> {
        Ok(self
            .get_version(key, sequence)?
            .and_then(|(_, value, expiry)| value.map(|value| (value, expiry))))
    }

    /// The newest version of `key` with sequence <= `sequence`: its sequence and its value
    /// (`None` for a tombstone); `None` if the key was never written.
    pub(super) fn get_version(
        &self,
        key: &[u8],
        sequence: Option<SequenceNumber>,
    ) -> Result<Option<OwnedVersion>> {
        check_key(key)?;
        let Some(sequence) = sequence else {
            return self.latest_version(key);
        };
        // An explicit sequence is a registered snapshot (or, for read-modify-write, above
        // everything flushed), whose versions flush and compaction keep, and which no
        // Membuffer update drops (`membuffer::gate` invariant 2).
        self.version_at(&self.super_version.load(), key, sequence)
    }

    /// The newest version of `key` in the latest state (invariant 3: validated against the
    /// Membuffer's drop marks, redone in a hold if an update may have dropped it).
    fn latest_version(&self, key: &[u8]) -> Result<Option<OwnedVersion>> {
        self.latest(key, |super_version, sequence| {
            self.version_at(super_version, key, sequence)
        })
    }

    /// `lookup` of `key` in the latest state: at a fresh read point, redone in a hold at a
    /// later one if a Membuffer update may have dropped the version it wanted (invariant 3).
    fn latest<T>(
        &self,
        key: &[u8],
        lookup: impl Fn(&SuperVersion, SequenceNumber) -> Result<T>,
    ) -> Result<T> {
        let (sequence, super_version) = self.read_point();
        // Tests hold a reader here, between its read point and its lookup (`inner::tests`).
        self.race_point("get: read point");
        let found = lookup(&super_version, sequence)?;
        if !self.read_may_be_stale(key, sequence) {
            return Ok(found);
        }
        drop(super_version);
        let _hold = self.hold_for_retry();
        let (sequence, super_version) = self.read_point();
        lookup(&super_version, sequence)
    }

    /// Whether a Membuffer update above `sequence` may have dropped the version of `key` a
    /// latest-state read at `sequence` wanted (invariant 3; false with the Membuffer off).
    /// Called after the read's lookup.
    #[inline]
    pub(super) fn read_may_be_stale(&self, key: &[u8], sequence: SequenceNumber) -> bool {
        self.overwrite_gate.as_ref().is_some_and(|gate| {
            gate.stale(crate::hashindex::hash_key(key), sequence)
                .is_some()
        })
    }

    /// The hold a latest-state read that may be stale is redone in (counted).
    pub(super) fn hold_for_retry(&self) -> Option<GateHold<'_>> {
        Counters::add(&self.counters.membuffer.read_retries, 1);
        self.hold_overwrites()
    }

    /// The newest version of `key` at or below `sequence` in `super_version`.
    fn version_at(
        &self,
        super_version: &SuperVersion,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<Option<OwnedVersion>> {
        if let Some((version, kind, value)) = super_version.memory.get(key, sequence) {
            debug_assert!(version <= sequence, "invariant 1");
            return Ok(Some(memory_version(version, kind, value)));
        }
        self.tables_version(super_version, key, sequence)
    }

    /// With the Membuffer on, starts a hold on its overwrite gate and waits until every
    /// sequence reserved so far is visible: a read point taken next sees every version the
    /// Membuffer's in-place updates dropped before the hold began, and none is dropped until
    /// the hold ends (`membuffer::gate`, step 2). None (no wait) with the Membuffer off.
    pub(super) fn hold_overwrites(&self) -> Option<GateHold<'_>> {
        let gate = self.overwrite_gate.as_ref()?;
        let hold = gate.hold();
        self.wait_reserved_visible();
        Some(hold)
    }

    /// A latest-state iterator's read point, with the overwrite gate held (None with the
    /// Membuffer off): the read point first, then the hold, and the wait of
    /// `hold_overwrites` only if an update announced a sequence above the read point
    /// (`membuffer::gate`, step 2) — then a new read point is taken after it.
    fn iterator_read_point(&self) -> (SequenceNumber, Arc<SuperVersion>, Option<GateHold<'_>>) {
        let (mut sequence, mut super_version) = self.read_point();
        let Some(gate) = self.overwrite_gate.as_ref() else {
            return (sequence, arc_swap::Guard::into_inner(super_version), None);
        };
        let (hold, quiet) = gate.hold_at(sequence);
        if !quiet {
            // Not held across the wait: a guard pins the super version it loaded.
            drop(super_version);
            Counters::add(&self.counters.membuffer.scan_waits, 1);
            self.wait_reserved_visible();
            (sequence, super_version) = self.read_point();
        }
        (
            sequence,
            arc_swap::Guard::into_inner(super_version),
            Some(hold),
        )
    }

    /// Waits until every sequence reserved so far is visible (`hold_overwrites`).
    fn wait_reserved_visible(&self) {
        let reserved = self.next_unreserved_sequence().saturating_sub(1);
        // After a sticky error the wait gives up: the failed writes never become visible,
        // and no write is accepted after them.
        let _ = self.wait_visible(reserved);
    }

    /// The newest version of `key` (any sequence) in `super_version`, with an insert hint
    /// for the active buffer: read-modify-write inserts its new version where the read found
    /// the key, without a second search from the head.
    pub(super) fn latest_version_hinted<'a>(
        &self,
        super_version: &'a SuperVersion,
        key: &'a [u8],
    ) -> Result<HintedRead<'a>> {
        let (in_memory, hint) = super_version.memory.get_hinted(key);
        if let Some((version, kind, value)) = in_memory {
            return Ok(HintedRead {
                found: Some(memory_version(version, kind, value)),
                in_memory: true,
                hint,
            });
        }
        Ok(HintedRead {
            found: self.tables_version(super_version, key, crate::key::SEQUENCE_MAX)?,
            in_memory: false,
            hint,
        })
    }

    /// The value of `key` at `sequence` (None: the latest state), pinned in its table block
    /// instead of copied when it comes from a table.
    pub(super) fn get_pinned(
        &self,
        key: &[u8],
        sequence: Option<SequenceNumber>,
    ) -> Result<Option<PinnedValue>> {
        check_key(key)?;
        let Some(sequence) = sequence else {
            return self.latest_pinned(key);
        };
        self.pinned_at(&self.super_version.load(), key, sequence)
    }

    /// [`DbInner::get_pinned`] of the latest state, validated as `latest_version` is
    /// (invariant 3).
    fn latest_pinned(&self, key: &[u8]) -> Result<Option<PinnedValue>> {
        self.latest(key, |super_version, sequence| {
            self.pinned_at(super_version, key, sequence)
        })
    }

    /// The visible value of `key` at `sequence` in `super_version`, pinned if in a table.
    fn pinned_at(
        &self,
        super_version: &SuperVersion,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<Option<PinnedValue>> {
        if let Some((version, kind, value)) = super_version.memory.get(key, sequence) {
            debug_assert!(version <= sequence, "invariant 1");
            return Ok(memory_version(version, kind, value)
                .1
                .map(PinnedValue::owned));
        }
        let lookup = internal_key(key, sequence, ValueKind::SEEK);
        let found = self.probe_tables(&super_version.version, key, |table, hash| {
            table.get_pinned(&lookup, Some(hash))
        })?;
        Ok(found.and_then(|(_, kind, value)| pinned_value(kind, value)))
    }

    /// The newest version of `key` with sequence <= `sequence` in the on-disk tables of
    /// `super_version`.
    fn tables_version(
        &self,
        super_version: &SuperVersion,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<Option<OwnedVersion>> {
        let lookup = internal_key(key, sequence, ValueKind::SEEK);
        let version = &super_version.version;
        if let Some(pool) = self.table_cache.lookup_pool() {
            let candidates = Self::lookup_candidates(version, key);
            if candidates.len() >= 2 {
                return self.tables_version_parallel(pool, &candidates, &lookup);
            }
        }
        let found = self.probe_tables(version, key, |table, hash| {
            table.get_with_hash(&lookup, Some(hash), true)
        })?;
        Ok(found.map(|(sequence, kind, value)| moved_version(sequence, kind, value)))
    }

    /// The first table entry for `key` found by `probe`, trying the tables that may hold it
    /// newest first (level 0 newest file first, then one file per run of each deeper level):
    /// the first hit is the newest version (version invariant 3). `probe` gets the key's
    /// Bloom hash, computed once for every table.
    ///
    /// The candidates are taken `PROBE_BATCH` at a time, and the filter line of each one
    /// already open is prefetched before any is probed: with every block in memory, a probe
    /// of a run the key is not in costs mostly its filter miss, and a tiered level holds
    /// several runs, so the misses overlap instead of following one another.
    fn probe_tables<V>(
        &self,
        version: &Version,
        key: &[u8],
        probe: impl Fn(&Table, u64) -> Result<TableFound<V>>,
    ) -> Result<TableFound<V>> {
        let hash = bloom_hash(key);
        let mut files = Self::candidate_files(version, key);
        loop {
            let mut batch: [Option<&Arc<FileMeta>>; PROBE_BATCH] = [None; PROBE_BATCH];
            let mut gathered = 0;
            for (slot, file) in batch.iter_mut().zip(files.by_ref()) {
                if let Some(table) = file.table.get() {
                    table.prefetch_filter(hash);
                }
                *slot = Some(file);
                gathered += 1;
            }
            if gathered == 0 {
                return Ok(None);
            }
            for file in batch.iter().flatten() {
                if let Some(found) = probe(self.table_cache.table_ref(file)?, hash)? {
                    return Ok(Some(found));
                }
            }
        }
    }

    /// The files a point lookup of `key` may find it in, newest first: the level-0 files
    /// whose range holds it, then the one file per run of each deeper level that does.
    pub(super) fn candidate_files<'a>(
        version: &'a Version,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<FileMeta>> + 'a {
        let level0 = version
            .files(0)
            .iter()
            .filter(move |file| file.overlaps(Some(key), Some(key)));
        let deeper =
            (1..version.level_count()).flat_map(move |level| version.find_files(level, key));
        level0.chain(deeper)
    }

    /// A cursor over the latest state (or `snapshot`), bounded to `[lower, upper)`.
    pub(super) fn iterator(
        &self,
        options: &ReadOptions,
        snapshot: Option<&Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<DbIterator> {
        for bound in [lower, upper].into_iter().flatten() {
            crate::key::check_bound(bound)?;
        }
        // An iterator holds the overwrite gate until the Membuffer is drained into the
        // memtable it iterates (`membuffer::gate`, step 2): here for the sealed buffers, in
        // the active buffer's cursor for its partitions.
        let (sequence, super_version, hold) = match snapshot {
            // The snapshot keeps its versions only while it is registered, and the cursor may
            // outlive it (`range_at` drops its copy): a hold, taken while the snapshot still
            // stands, keeps them for the partitions the cursor has yet to drain (gate
            // invariant 2). No wait: every version the snapshot sees is already visible.
            Some(snapshot) => (
                snapshot.sequence(),
                self.super_version.load_full(),
                self.overwrite_gate
                    .as_ref()
                    .map(|gate| gate.hold().detach()),
            ),
            None => {
                let (sequence, super_version, hold) = self.iterator_read_point();
                (sequence, super_version, hold.map(GateHold::detach))
            }
        };
        // Tests hold an iterator here, between its read point and the drain.
        self.race_point("iterator: read point");
        // The active buffer's cursor drains the Membuffer partition by partition as it moves
        // and keeps the hold until it has drained them all (`memory::scan`).
        let mut children = super_version.memory.scan_iterators(upper, hold);
        // Every run (each level-0 file is one) becomes a lazy level iterator: nothing is
        // opened until the merge seeks, and a run costs one reference count, not one per file.
        let version = &super_version.version;
        let source = ScanSource::new(Arc::clone(version), Arc::clone(&self.table_cache));
        for level in 0..version.level_count() {
            for range in version.overlapping_run_ranges(level, lower, upper) {
                children.push(Box::new(LevelIterator::over_version(
                    Arc::clone(&source),
                    level,
                    range,
                    options.fill_cache,
                )));
            }
        }
        Ok(DbIterator::new(
            Box::new(MergingIterator::new(children)),
            sequence,
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            Box::new(super_version),
        ))
    }
}
