//! `DrainingIterator`: a scan's cursor over a write buffer with a Membuffer, which drains
//! each Membuffer partition into the memtable just before the cursor enters its key range,
//! instead of draining every partition when the cursor is made. A short scan (YCSB E, a
//! `flodb_scan_write` scan of 100 keys) then drains one partition of sixteen.
//!
//! Forward moves (`seek`, `seek_to_first`, `next`) drain the partition they land in; when the
//! memtable cursor leaves the current partition's range (or runs off the end), the next
//! partition is drained, and the cursor re-seeks to that partition's first key if any drain
//! ran since it last positioned itself (a `DrainStamp` taken just before): the versions a
//! drain moved may lie between the old position and the new one. Without one, everything
//! drained was in the memtable before the cursor positioned itself, so it keeps its place.
//! That matters when the memtable holds few keys in the partitions after the scan's start
//! (YCSB E's inserts all land above the loaded keys): each crossing would otherwise cost a
//! memtable seek. A partition that
//! starts at or past the scan's upper bound is never drained. Backward moves drain every
//! partition first, then re-seek to the current key (drained versions may now precede it),
//! or, from a position at or past the upper bound, to the bound (invariant 5).
//!
//! A forward move that finds a partition's drain lock held by another thread (past a short
//! spin) copies the partition instead of waiting (`Membuffer::enter_for_scan`), and the cursor
//! merges that copy (`copied::Copied`) with the memtable from then on: the smaller internal
//! key first, an internal key both hold once. A backward move first drains every partition
//! it copied, waiting if it must, and drops the copies: reverse iteration reads the memtable
//! alone, as before.
//!
//! Thread-safety contract: one cursor is used by one thread at a time (`Send`); its drains
//! serialise with every other drain of the same partition (`membuffer::scan`); a forward move
//! never waits on another thread's drain beyond a short spin.
//!
//! Invariants:
//! 1. When the cursor is valid, the memtable and `copies` together hold every version of
//!    every partition from the cursor's partition down to the one its last seek landed in, at
//!    or below the scan's read point (`membuffer::scan` invariants 1 and 3), and the cursor
//!    lies in the current partition's range or past the upper bound; backward moves happen
//!    only after every partition is drained and `copies` is None. The memtable cursor
//!    positioned itself after the last copy was taken.
//! 2. The overwrite-gate hold (taken around the read point of a latest-state scan, or while
//!    a snapshot scan's snapshot still stood) is kept until every partition is drained and
//!    none is only copied (then released), or the cursor is dropped.
//! 3. `stamp` was taken before the memtable cursor's last seek; a crossing keeps the cursor's
//!    position only if no drain ran since (`Membuffer::quiet_since`).
//! 4. `next_prefix` is the prefix of partition `partition + 1`'s first key (`u64::MAX` if
//!    there is none), updated whenever `partition` changes (`enter`).
//! 5. A backward move never lands at or past the upper bound. The database iterator's
//!    reverse positioning seeks to the bound and steps back (or, finding nothing, positions
//!    at the last entry), trusting the entry it steps back to to be below the bound; that
//!    holds for a static iterator, but a seek here leaves the partitions at or past the bound
//!    undrained, and the backward move drains them, which may put entries between the bound
//!    and the cursor (a newer version of the key the cursor sits on). So `seek_to_last` lands
//!    on the last entry below the bound, and `prev` from past the bound steps back from the
//!    bound rather than from the cursor.
//! 6. `from_copied` says which source holds the merged cursor's entry: the copy's entry when
//!    it is smaller than the memtable cursor's (or the memtable cursor is exhausted); an
//!    entry equal to the memtable cursor's is skipped in the copy (`pick`).

use super::copied::Copied;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_internal_keys, internal_key, user_key, ValueKind, SEQUENCE_MAX};
use crate::membuffer::{key_prefix, DetachedHold, DrainStamp, Membuffer, ScanMarks};
use crate::memtable::{Memtable, MemtableIterator, MemtableOwner};
use std::cmp::Ordering;
use std::sync::Arc;

/// A write buffer's two levels, kept alive together behind one `Arc`: a cursor then bumps
/// one reference count per scan, as a scan with the Membuffer off does, instead of one per
/// level (each is a cache line that concurrent scans pass between cores).
#[derive(Debug)]
pub(crate) struct Levels {
    memtable: Arc<Memtable>,
    membuffer: Arc<Membuffer>,
}

impl Levels {
    /// Both levels, for every cursor of one write buffer to share.
    pub(crate) fn new(memtable: &Arc<Memtable>, membuffer: &Arc<Membuffer>) -> Arc<Levels> {
        Arc::new(Levels {
            memtable: Arc::clone(memtable),
            membuffer: Arc::clone(membuffer),
        })
    }

    /// The Membuffer.
    #[inline]
    pub(crate) fn membuffer(&self) -> &Membuffer {
        &self.membuffer
    }
}

// SAFETY: `Levels` holds its memtable's `Arc` in a field no method replaces, so the memtable
// is the same one, alive, for as long as the `Levels` is.
unsafe impl MemtableOwner for Arc<Levels> {
    #[inline]
    fn memtable(&self) -> &Memtable {
        &self.memtable
    }
}

/// The partitions a cursor copied instead of draining, and their versions.
#[derive(Debug, Default)]
struct Copies {
    versions: Copied,
    /// The partitions `versions` holds, drained before a backward move (invariant 2).
    partitions: Vec<usize>,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct DrainingIterator {
    /// The memtable cursor; its owner keeps the Membuffer alive too.
    inner: MemtableIterator<Arc<Levels>>,
    marks: ScanMarks,
    /// The scan's exclusive upper bound (a user key), if any.
    upper: Option<Vec<u8>>,
    /// The partition whose range the cursor is in (invariant 1).
    partition: usize,
    /// The 8-byte prefix of the next partition's first key (`u64::MAX` past the last): a key
    /// with a smaller prefix is still in the current partition, which `next` tells by one
    /// integer compare (invariant 4).
    next_prefix: u64,
    /// Released (on the Membuffer's gate) when every partition is drained (invariant 2).
    hold: Option<DetachedHold>,
    /// Taken just before the memtable cursor last positioned itself (invariant 3).
    stamp: DrainStamp,
    /// Partitions copied instead of drained, merged with the memtable (invariant 1); None
    /// until a forward move copies one (boxed: most scans never copy, and every scan pays
    /// for the cursor's size when it is made and moved into its box).
    copies: Option<Box<Copies>>,
    /// Whether the merged entry is the copy's (invariant 6).
    from_copied: bool,
}

impl DrainingIterator {
    /// A cursor over `memtable` that drains `membuffer` as it goes. Precondition: `marks` were
    /// taken after the scan's read point, and `hold` (if the database has an overwrite gate)
    /// keeps every version that read point sees (`membuffer::gate`, step 2).
    pub(crate) fn new(
        levels: Arc<Levels>,
        marks: ScanMarks,
        upper: Option<&[u8]>,
        hold: Option<DetachedHold>,
    ) -> DrainingIterator {
        DrainingIterator {
            inner: MemtableIterator::with_owner(levels),
            // Replaced by the first seek's (invariant 3); loading the drain counts here would
            // cost every scan two more shared loads.
            stamp: Membuffer::unpositioned_stamp(),
            marks,
            upper: upper.map(<[u8]>::to_vec),
            partition: 0,
            next_prefix: 0,
            hold,
            copies: None,
            from_copied: false,
        }
    }

    /// The Membuffer this cursor drains. (Calls that also borrow `marks` mutably reach it
    /// through `inner` instead: a borrow of that field alone.)
    #[inline]
    fn membuffer(&self) -> &Membuffer {
        self.inner.owner().membuffer()
    }

    /// Drains `partition` (waiting for a drain in progress), for a backward move.
    fn drain(&mut self, partition: usize) {
        self.inner.owner().membuffer().drain_for_scan(
            &mut self.marks,
            partition,
            self.inner.memtable(),
        );
        self.release_hold_if_done();
    }

    /// Drains `partition`, or copies it if another thread's drain holds it (forward moves);
    /// true if it copied, and then both sources must position themselves again
    /// (invariant 1).
    fn drain_or_copy(&mut self, partition: usize) -> bool {
        let copy = self.inner.owner().membuffer().enter_for_scan(
            &mut self.marks,
            partition,
            self.inner.memtable(),
        );
        let took_copy = copy.is_some();
        if let Some(copy) = copy {
            let held = self.copies.get_or_insert_with(Box::default);
            held.versions.add(copy);
            held.partitions.push(partition);
        }
        self.release_hold_if_done();
        took_copy
    }

    /// Invariant 2: the hold ends once nothing is left to drain and nothing is only copied.
    fn release_hold_if_done(&mut self) {
        if self.ready_for_reverse() {
            self.release_hold();
        }
    }

    /// Whether a backward move may read the memtable alone: every partition drained, none
    /// only copied (invariant 1).
    fn ready_for_reverse(&self) -> bool {
        self.marks.all_drained() && self.copies.is_none()
    }

    /// Before a backward move: drains every partition not drained yet, the copied ones
    /// included, and drops the copies (invariant 1).
    fn drain_for_reverse(&mut self) {
        if self.ready_for_reverse() {
            return;
        }
        for partition in 0..self.marks.partitions() {
            self.drain(partition);
        }
        for partition in self
            .copies
            .take()
            .map(|copies| copies.partitions)
            .unwrap_or_default()
        {
            self.inner
                .owner()
                .membuffer()
                .drain_again_for_scan(partition, self.inner.memtable());
        }
        self.from_copied = false;
        self.release_hold_if_done();
    }

    /// Sets `from_copied` for the two sources' positions, skipping copied entries the
    /// memtable cursor also holds (invariant 6).
    fn pick(&mut self) {
        let Some(held) = self.copies.as_mut() else {
            self.from_copied = false;
            return;
        };
        self.from_copied = loop {
            let Some((copied, _)) = held.versions.current() else {
                break false;
            };
            if !self.inner.valid() {
                break true;
            }
            match compare_internal_keys(copied, self.inner.key()) {
                Ordering::Less => break true,
                Ordering::Greater => break false,
                Ordering::Equal => held.versions.advance(),
            }
        };
    }

    /// The copied entry at the copy's position, if there is one.
    #[inline]
    fn copied_current(&self) -> Option<(&[u8], &[u8])> {
        self.copies
            .as_ref()
            .and_then(|copies| copies.versions.current())
    }

    /// Positions the copy (if any) at the first version at or after `target`.
    fn seek_copies(&mut self, target: &[u8]) {
        if let Some(copies) = self.copies.as_mut() {
            copies.versions.seek(target);
        }
    }

    /// The merged entry's internal key, if the cursor is valid.
    fn merged_key(&self) -> Option<&[u8]> {
        if self.from_copied {
            self.copied_current().map(|(key, _)| key)
        } else {
            self.inner.valid().then(|| self.inner.key())
        }
    }

    /// Makes `partition` the cursor's current partition (invariant 4).
    fn enter(&mut self, partition: usize) {
        self.partition = partition;
        self.next_prefix = self.membuffer().partition_start_prefix(partition + 1);
    }

    /// Positions the memtable cursor on its last entry below the upper bound (its last entry
    /// if there is none): the first entry at or after the bound, then one step back
    /// (invariant 5). Precondition: every partition is drained.
    fn last_below_upper(&mut self) {
        let Some(upper) = self.upper.as_deref() else {
            self.inner.seek_to_last();
            return;
        };
        self.inner
            .seek(&internal_key(upper, SEQUENCE_MAX, ValueKind::SEEK));
        if self.inner.valid() {
            self.inner.prev();
        } else {
            self.inner.seek_to_last();
        }
    }

    /// Seeks the memtable cursor, stamping the drains first (invariant 3).
    fn position(&mut self, target: &[u8]) {
        self.stamp = self.membuffer().drain_stamp();
        self.inner.seek(target);
    }

    fn release_hold(&mut self) {
        if let Some(hold) = self.hold.take() {
            release(self.inner.owner().membuffer(), hold);
        }
    }

    /// After a forward move: while the cursor has left its partition's range, makes the next
    /// partition current, draining it and re-seeking to its start if it was not drained yet
    /// (invariant 1).
    #[inline]
    fn settle_forward(&mut self) {
        // Invariant 4: a smaller prefix than the next partition's start is a smaller key, so
        // most moves stop here, on one integer compare.
        if self
            .merged_key()
            .is_some_and(|key| key_prefix(user_key(key)) < self.next_prefix)
        {
            return;
        }
        self.cross_partitions();
    }

    /// `settle_forward` past its fast check: makes each partition the cursor has reached
    /// current in turn.
    #[inline(never)]
    fn cross_partitions(&mut self) {
        while !self.marks.all_drained() {
            let next = self.partition + 1;
            let Some(start) = self.membuffer().partition_start(next) else {
                return;
            };
            let crossed = self.merged_key().is_none_or(|key| user_key(key) >= start);
            let past_upper = self.upper.as_deref().is_some_and(|upper| start >= upper);
            if !crossed || past_upper {
                return;
            }
            let target = internal_key(start, SEQUENCE_MAX, ValueKind::SEEK);
            self.enter(next);
            if !self.marks.is_drained(next) {
                let copied = self.drain_or_copy(next);
                if copied || !self.membuffer().quiet_since(self.stamp) {
                    self.position(&target);
                    self.seek_copies(&target);
                    self.pick();
                }
            }
        }
    }
}

/// Ends `hold` on `membuffer`'s overwrite gate, the gate it was taken on (every write buffer
/// of a database shares the database's gate).
pub(crate) fn release(membuffer: &Membuffer, hold: DetachedHold) {
    match membuffer.gate() {
        Some(gate) => gate.release(hold),
        None => debug_assert!(false, "a hold was taken without an overwrite gate"),
    }
}

impl Drop for DrainingIterator {
    fn drop(&mut self) {
        self.release_hold();
    }
}

impl InternalIterator for DrainingIterator {
    #[inline]
    fn valid(&self) -> bool {
        if self.from_copied {
            self.copied_current().is_some()
        } else {
            self.inner.valid()
        }
    }

    fn seek_to_first(&mut self) {
        self.drain_or_copy(0);
        self.enter(0);
        self.stamp = self.membuffer().drain_stamp();
        self.inner.seek_to_first();
        if let Some(copies) = self.copies.as_mut() {
            copies.versions.seek_to_first();
        }
        self.pick();
        self.settle_forward();
    }

    /// The last entry below the upper bound (invariant 5).
    fn seek_to_last(&mut self) {
        self.drain_for_reverse();
        self.enter(self.marks.partitions().saturating_sub(1));
        self.last_below_upper();
    }

    fn seek(&mut self, target: &[u8]) {
        let partition = self.membuffer().partition_of(user_key(target));
        self.drain_or_copy(partition);
        self.enter(partition);
        self.position(target);
        self.seek_copies(target);
        self.pick();
        self.settle_forward();
    }

    fn next(&mut self) {
        if self.from_copied {
            if let Some(copies) = self.copies.as_mut() {
                copies.versions.advance();
            }
        } else {
            self.inner.next();
        }
        self.pick();
        self.settle_forward();
    }

    fn prev(&mut self) {
        if !self.ready_for_reverse() {
            let current = self.merged_key().map(<[u8]>::to_vec);
            self.drain_for_reverse();
            if let Some(current) = current {
                let past_upper = self
                    .upper
                    .as_deref()
                    .is_some_and(|upper| user_key(&current) >= upper);
                if past_upper {
                    // Invariant 5: the cursor sat past the bound, in a partition its seek
                    // left undrained; what was just drained there may precede the current
                    // entry (a newer version of its key), so step back from the bound.
                    self.last_below_upper();
                    return;
                }
                self.inner.seek(&current);
            }
        }
        self.inner.prev();
    }

    // `key` and `value` run on every comparison of the merge: the memtable's entry, the
    // usual case, is one flag test away (invariant 6: `from_copied` implies a copied entry).
    #[inline]
    fn key(&self) -> &[u8] {
        if !self.from_copied {
            return self.inner.key();
        }
        self.copied_current().map_or(&[], |(key, _)| key)
    }

    #[inline]
    fn value(&self) -> &[u8] {
        if !self.from_copied {
            return self.inner.value();
        }
        self.copied_current().map_or(&[], |(_, value)| value)
    }

    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::membuffer::MembufferConfig;
    use crate::stats::MembufferCounters;
    use std::collections::BTreeMap;

    struct Fixture {
        memtable: Arc<Memtable>,
        membuffer: Arc<Membuffer>,
        counters: Arc<MembufferCounters>,
        /// Every key written, with its value (one version each).
        model: BTreeMap<Vec<u8>, Vec<u8>>,
    }

    /// 4 partitions over keys `index * 16` (big-endian) for `index` in `0..count`, written in
    /// a scrambled order (so the sample, the first 16, spans the key space); the sample goes
    /// to the memtable directly.
    fn fixture(count: u64) -> Fixture {
        fixture_with(count, true)
    }

    /// As `fixture`; with `keep_sample` false the sampled writes are left out of the memtable
    /// (and the model), so until a drain the memtable holds nothing at the partitions'
    /// boundaries and a seek lands past them.
    fn fixture_with(count: u64, keep_sample: bool) -> Fixture {
        fixture_copying(count, keep_sample, false)
    }

    /// As `fixture_with`; with `scans_always_copy` every scan copies instead of draining.
    fn fixture_copying(count: u64, keep_sample: bool, scans_always_copy: bool) -> Fixture {
        let counters = Arc::new(MembufferCounters::default());
        let memtable = Arc::new(Memtable::with_capacity(1 << 24));
        let membuffer = Arc::new(Membuffer::new(MembufferConfig {
            budget_bytes: 8 << 20,
            partitions: 4,
            sample_keys: 16,
            multi_insert: true,
            drainers: 0,
            counters: Arc::clone(&counters),
            gate: None,
            scans_always_copy,
            bypass_scans_per_write: 0,
            bypass_at_once: false,
        }));
        let mut model = BTreeMap::new();
        for (sequence, index) in (1..).zip((0..count).map(|i| (i * 1597) % count)) {
            let key = (index * 16).to_be_bytes().to_vec();
            let value = index.to_le_bytes().to_vec();
            if !membuffer.insert(&memtable, &key, sequence, ValueKind::Put, &value) {
                if !keep_sample {
                    continue;
                }
                memtable.insert(&key, sequence, ValueKind::Put, &value);
            }
            model.insert(key, value);
        }
        Fixture {
            memtable,
            membuffer,
            counters,
            model,
        }
    }

    fn cursor(fixture: &Fixture, upper: Option<&[u8]>) -> DrainingIterator {
        let marks = fixture
            .membuffer
            .scan_marks()
            .expect("partitions are built");
        DrainingIterator::new(
            Levels::new(&fixture.memtable, &fixture.membuffer),
            marks,
            upper,
            None,
        )
    }

    fn seek_key(index: u64) -> Vec<u8> {
        internal_key(&(index * 16).to_be_bytes(), SEQUENCE_MAX, ValueKind::SEEK)
    }

    #[test]
    fn a_seek_drains_one_partition_and_next_drains_each_one_it_enters() {
        let fixture = fixture(4000);
        let below = fixture
            .membuffer
            .partition_of(&(2000u64 * 16).to_be_bytes());
        assert!(below >= 1, "the seek lands past the first partition");
        let mut cursor = cursor(&fixture, None);
        cursor.seek(&seek_key(2000));
        assert_eq!(
            fixture.counters.scan_drains.get(),
            1,
            "only the seek's partition"
        );
        let seen = rest(&mut cursor);
        let wanted: Vec<Vec<u8>> = fixture
            .model
            .range((2000u64 * 16).to_be_bytes().to_vec()..)
            .map(|(key, _)| key.clone())
            .collect();
        assert_eq!(seen, wanted, "every key from the seek on, in order, once");
        assert!(fixture.counters.scan_drains.get() <= 4);
        assert!(
            fixture.membuffer.undrained() > 0,
            "partitions below the seek stay undrained"
        );
    }

    /// Reads `cursor` to the end, as user keys.
    fn rest(cursor: &mut DrainingIterator) -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        while cursor.valid() {
            seen.push(user_key(cursor.key()).to_vec());
            cursor.next();
        }
        seen
    }

    /// Reads `cursor` from its first entry to the end, as (internal key, value) pairs.
    fn all_entries(cursor: &mut DrainingIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        cursor.seek_to_first();
        let mut entries = Vec::new();
        while cursor.valid() {
            entries.push((cursor.key().to_vec(), cursor.value().to_vec()));
            cursor.next();
        }
        entries
    }

    /// The first key of `partition`, as the number the fixture's keys encode.
    fn start_index(fixture: &Fixture, partition: usize) -> u64 {
        let start = fixture
            .membuffer
            .partition_start(partition)
            .expect("four partitions");
        u64::from_be_bytes(start.try_into().expect("8-byte keys"))
    }

    /// The user keys of `model` from `start` on.
    fn from(model: &BTreeMap<Vec<u8>, Vec<u8>>, start: u64) -> Vec<Vec<u8>> {
        model
            .range(start.to_be_bytes().to_vec()..)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// A seek that lands past the next partition's start drains that partition and re-seeks
    /// (its versions now lie behind the position); once nothing is left to drain, the cursor
    /// keeps its place.
    #[test]
    fn a_crossing_re_seeks_only_after_a_drain() {
        let fixture = fixture_with(4000, false);
        let start = start_index(&fixture, 1);
        let below = internal_key(&(start - 1).to_be_bytes(), SEQUENCE_MAX, ValueKind::SEEK);

        let mut cursor = cursor(&fixture, None);
        cursor.seek(&below);
        assert_eq!(rest(&mut cursor), from(&fixture.model, start - 1));
        assert!(
            fixture.counters.scan_reseeks.get() >= 1,
            "the cursor landed past partition 1, then drained it"
        );

        let reseeks = fixture.counters.scan_reseeks.get();
        let mut cursor = self::cursor(&fixture, None);
        cursor.seek(&below);
        assert_eq!(rest(&mut cursor), from(&fixture.model, start - 1));
        assert_eq!(
            fixture.counters.scan_reseeks.get(),
            reseeks,
            "nothing drained since: every crossing keeps its place"
        );
    }

    /// Invariant 5, as the database iterator's reverse positioning uses it: a seek to the
    /// upper bound that finds nothing, then positioning at the last entry, lands below the
    /// bound although positioning drains the partitions past it.
    #[test]
    fn positioning_at_the_last_entry_stays_below_the_upper_bound() {
        let fixture = fixture_with(4000, false);
        let start = start_index(&fixture, 2);
        let upper = (start - 1).to_be_bytes();
        let mut cursor = cursor(&fixture, Some(&upper));
        cursor.seek(&internal_key(&upper, SEQUENCE_MAX, ValueKind::SEEK));
        assert!(
            !cursor.valid(),
            "nothing at or after the bound was drained yet"
        );
        cursor.seek_to_last();
        let last_below = fixture
            .model
            .range(..upper.to_vec())
            .next_back()
            .map(|(key, _)| key.clone());
        assert_eq!(
            cursor.valid().then(|| user_key(cursor.key()).to_vec()),
            last_below
        );
    }

    /// Seeks `cursor` to key `index`, then reads backward to the start: the keys seen (in
    /// key order) and the model's keys up to `index`.
    fn backward_from(
        fixture: &Fixture,
        cursor: &mut DrainingIterator,
        index: u64,
    ) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        cursor.seek(&seek_key(index));
        let mut seen = Vec::new();
        while cursor.valid() {
            seen.push(user_key(cursor.key()).to_vec());
            cursor.prev();
        }
        seen.reverse();
        let wanted: Vec<Vec<u8>> = fixture
            .model
            .range(..=(index * 16).to_be_bytes().to_vec())
            .map(|(key, _)| key.clone())
            .collect();
        (seen, wanted)
    }

    #[test]
    fn a_backward_move_drains_the_rest_and_sees_every_earlier_key() {
        let fixture = fixture(4000);
        let mut cursor = cursor(&fixture, None);
        let (seen, wanted) = backward_from(&fixture, &mut cursor, 2500);
        assert_eq!(seen, wanted);
        assert_eq!(fixture.membuffer.undrained(), 0);
    }

    #[test]
    fn partitions_past_the_upper_bound_are_never_drained() {
        let fixture = fixture(4000);
        let third = fixture
            .membuffer
            .partition_start(2)
            .expect("four partitions")
            .to_vec();
        let mut cursor = cursor(&fixture, Some(&third));
        cursor.seek_to_first();
        let mut count = 0;
        while cursor.valid() && user_key(cursor.key()) < third.as_slice() {
            count += 1;
            cursor.next();
        }
        let wanted = fixture.model.range(..third.clone()).count();
        assert_eq!(count, wanted);
        assert_eq!(
            fixture.counters.scan_drains.get(),
            2,
            "partitions 0 and 1 only"
        );
    }

    /// A scan that copies its partitions (the fallback) reads every key once, in order, from
    /// a seek or from the first key, drains nothing, and keeps the gate's rule for later:
    /// a backward move drains the copied partitions and sees every earlier key.
    #[test]
    fn a_copying_scan_reads_every_key_and_a_backward_move_drains_the_copies() {
        for keep_sample in [true, false] {
            let fixture = fixture_copying(4000, keep_sample, true);
            let mut cursor = cursor(&fixture, None);
            cursor.seek_to_first();
            assert_eq!(rest(&mut cursor), from(&fixture.model, 0));
            cursor.seek(&seek_key(2000));
            assert_eq!(rest(&mut cursor), from(&fixture.model, 2000 * 16));
            assert_eq!(fixture.counters.scan_drains.get(), 0, "copies only");
            assert_eq!(
                fixture.counters.scan_fallbacks.get(),
                4,
                "each partition once"
            );
            assert!(fixture.membuffer.undrained() > 0);

            let (seen, wanted) = backward_from(&fixture, &mut cursor, 2500);
            assert_eq!(seen, wanted, "keep_sample {keep_sample}");
            assert_eq!(fixture.membuffer.undrained(), 0, "the copies were drained");
        }
    }

    /// Values come from the copy too, and a version both the copy and the memtable hold
    /// (an in-place update moved it after the copy) is read once.
    #[test]
    fn a_copied_version_also_in_the_memtable_is_read_once() {
        let fixture = fixture_copying(400, true, true);
        let mut cursor = cursor(&fixture, None);
        // Every copied version, put in the memtable as well: the merge must not repeat it.
        let copies = all_entries(&mut cursor);
        let mut moved = 0;
        for (key, value) in &copies {
            let parsed = crate::key::parse_internal_key(key).expect("an internal key");
            let in_memtable = fixture
                .memtable
                .get_entry(parsed.user_key, parsed.sequence)
                .is_some_and(|entry| entry.0 == parsed.sequence);
            if !in_memtable {
                fixture
                    .memtable
                    .insert(parsed.user_key, parsed.sequence, parsed.kind, value);
                moved += 1;
            }
        }
        assert!(
            moved > 0,
            "the Membuffer held versions the memtable did not"
        );
        assert_eq!(all_entries(&mut cursor), copies);
        let values: Vec<Vec<u8>> = copies
            .iter()
            .map(|(key, _)| fixture.model[user_key(key)].clone())
            .collect();
        let read: Vec<Vec<u8>> = copies.into_iter().map(|(_, value)| value).collect();
        assert_eq!(read, values);
    }
}
