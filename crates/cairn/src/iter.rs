//! Iterators over internal keys, and the merging of many of them.
//!
//! Every sorted source (memtable, `SSTable` block, `SSTable`, level) exposes the same cursor
//! interface, [`InternalIterator`], over internal keys in the order of
//! [`crate::key::compare_internal_keys`]. The merging iterator combines them; the database
//! iterator (in `db_iter`) collapses versions and hides tombstones.
//!
//! Thread-safety contract: an iterator is owned by one thread (`Send`, not `Sync`); it keeps
//! every structure it reads alive (by `Arc`), so it stays valid while the database changes.

use crate::error::Result;

/// A cursor over internal keys in ascending internal-key order.
///
/// Contract: `key`/`value` may be called only while `valid()`; moving an invalid iterator with
/// `next`/`prev` is a caller bug (debug-asserted). An iterator that meets an error becomes
/// invalid and reports the error from `status` until it is repositioned.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry.
    fn next(&mut self);
    /// Moves to the previous entry.
    fn prev(&mut self);
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
    /// The first error met since the last repositioning, if any.
    fn status(&self) -> Result<()>;
    /// What `seek` to an internal key of `user_key` would land on, told without reading any
    /// data block (see [`SeekBound`]). A merge defers the seek of a child that gives a bound
    /// until the bound could be the smallest key, which a short scan may never reach.
    /// The default, [`SeekBound::Unknown`], makes the merge seek at once.
    fn seek_bound(&self, _user_key: &[u8]) -> SeekBound {
        SeekBound::Unknown
    }
}

/// What a child of a merge can promise about a seek it has not done yet (its target's user
/// key is `u`, its target's sequence `s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekBound {
    /// Nothing: seek now.
    Unknown,
    /// The child holds no version of `u` (a Bloom negative, or no file covering `u`): the
    /// seek lands on a later user key, or nowhere.
    LaterUserKey,
    /// Every version of `u` the child holds has a sequence at most this (its file's largest
    /// sequence): the seek lands on such a version, a later user key, or nowhere.
    AtMostSequence(SequenceNumber),
}

use crate::key::{compare_internal_keys, parse_internal_key, user_key, SequenceNumber};
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges sorted children into one sorted stream with a binary heap of child indices
/// (the k-way merge of sLSM §2.5): `next`/`prev` cost O(log k) comparisons.
///
/// Seeks are lazy: a child that can bound where its seek would land without reading data
/// ([`InternalIterator::seek_bound`]: a run whose Bloom filter rules the target's user key
/// out, or whose versions of it are all older than a version another child found) is left
/// unsought, standing in the heap as its bound, and is sought only when that bound reaches
/// the root. A seek that finds its key in the newest run holding it reads one data block,
/// not one per run.
///
/// Invariants: 1. `heap` holds exactly the valid and the pending (unsought) children; pending
/// children exist only in forward direction, and each stands for its bound relative to
/// `target`. 2. In forward direction the root is the child with the smallest key, in reverse
/// the largest; outside `seek` and `next`'s own steps the root is never pending, so its key is
/// a real key no smaller than any pending child's real position. 3. When the direction
/// changes, every non-current child is repositioned around the current key (as `LevelDB`
/// does), so the merged order stays total even though children only support one cursor each.
/// 4. A child that fails (invalid with an error) ends the merge: it is invalid and reports
/// that error until repositioned, since the failed child may hold what would have hidden the
/// other children's next entries (a newer version, a tombstone).
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    heap: Vec<usize>,
    direction: Direction,
    /// Per child: the bound it stands for while its seek to `target` is deferred.
    pending: Vec<Option<SeekBound>>,
    /// The target of the last seek (reused buffer).
    target: Vec<u8>,
}

impl std::fmt::Debug for MergingIterator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MergingIterator")
            .field("children", &self.children.len())
            .field("direction", &self.direction)
            .finish()
    }
}

impl MergingIterator {
    /// Merges `children`; the result is unpositioned until a seek.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let capacity = children.len();
        MergingIterator {
            pending: vec![None; capacity],
            children,
            heap: Vec::with_capacity(capacity),
            direction: Direction::Forward,
            target: Vec::new(),
        }
    }

    fn pending_bound(&self, child: usize) -> Option<SeekBound> {
        self.pending.get(child).copied().flatten()
    }

    /// True if child `a` should sit above child `b` in the heap.
    fn before(&self, a: usize, b: usize) -> bool {
        let (Some(child_a), Some(child_b)) = (self.children.get(a), self.children.get(b)) else {
            return false;
        };
        let order = match (self.pending_bound(a), self.pending_bound(b)) {
            (None, None) => compare_internal_keys(child_a.key(), child_b.key()),
            (None, Some(bound)) => self.key_against_bound(child_a.key(), bound),
            (Some(bound), None) => self.key_against_bound(child_b.key(), bound).reverse(),
            // The bound that may stand for the smaller key first: a newer possible version.
            (Some(bound_a), Some(bound_b)) => bound_rank(bound_b).cmp(&bound_rank(bound_a)),
        }
        .then(a.cmp(&b));
        match self.direction {
            Direction::Forward => order == Ordering::Less,
            Direction::Reverse => order == Ordering::Greater,
        }
    }

    /// `Less` if `key` certainly sorts before wherever a pending child standing for `bound`
    /// will land (invariant 1); `Greater` if that child may land before it.
    fn key_against_bound(&self, key: &[u8], bound: SeekBound) -> Ordering {
        let Some(parsed) = parse_internal_key(key) else {
            return Ordering::Greater;
        };
        match parsed.user_key.cmp(user_key(&self.target)) {
            Ordering::Equal => match bound {
                SeekBound::LaterUserKey => Ordering::Less,
                SeekBound::AtMostSequence(sequence) if parsed.sequence > sequence => Ordering::Less,
                _ => Ordering::Greater,
            },
            order => order,
        }
    }

    /// Seeks the root child while it is pending, until the root is a real key (invariant 2).
    fn settle(&mut self) {
        while let Some(root) = self.current() {
            let Some(slot) = self.pending.get_mut(root) else {
                return;
            };
            if slot.take().is_none() {
                return;
            }
            if let Some(child) = self.children.get_mut(root) {
                child.seek(&self.target);
            }
            self.fix_root();
        }
    }

    /// Ends every deferred seek (the heap is rebuilt by the caller).
    fn clear_pending(&mut self) {
        self.pending.iter_mut().for_each(|slot| *slot = None);
    }

    // Every index is checked against `length` before use; this is the inner loop of every
    // merge, so it is not paid as checked `get`s.
    #[allow(clippy::indexing_slicing)]
    fn sift_down(&mut self, mut position: usize) {
        let length = self.heap.len();
        loop {
            let left = 2 * position + 1;
            if left >= length {
                return;
            }
            let right = left + 1;
            let mut best = left;
            if right < length && self.before(self.heap[right], self.heap[left]) {
                best = right;
            }
            if self.before(self.heap[best], self.heap[position]) {
                self.heap.swap(best, position);
                position = best;
            } else {
                return;
            }
        }
    }

    fn rebuild_heap(&mut self, direction: Direction) {
        self.direction = direction;
        self.heap.clear();
        for (index, child) in self.children.iter().enumerate() {
            if child.valid() || self.pending_bound(index).is_some() {
                self.heap.push(index);
            } else if child.status().is_err() {
                // Invariant 4: a failed child ends the merge.
                self.heap.clear();
                return;
            }
        }
        for position in (0..self.heap.len() / 2).rev() {
            self.sift_down(position);
        }
    }

    fn current(&self) -> Option<usize> {
        self.heap.first().copied()
    }

    /// After the root child moved: restore the heap.
    fn fix_root(&mut self) {
        let Some(root) = self.current() else {
            return;
        };
        let still_valid = self.pending_bound(root).is_some()
            || self.children.get(root).is_some_and(|child| child.valid());
        if still_valid {
            self.sift_down(0);
        } else if self
            .children
            .get(root)
            .is_some_and(|child| child.status().is_err())
        {
            // Invariant 4: a failed child ends the merge.
            self.heap.clear();
        } else {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
            self.sift_down(0);
        }
    }
}

/// Orders pending bounds: the larger, the smaller the key it may stand for (a newer version
/// of the target's user key sorts first; a later user key after every version).
fn bound_rank(bound: SeekBound) -> u64 {
    match bound {
        SeekBound::AtMostSequence(sequence) => sequence.saturating_add(1),
        SeekBound::LaterUserKey | SeekBound::Unknown => 0,
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        self.clear_pending();
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.rebuild_heap(Direction::Forward);
    }

    fn seek_to_last(&mut self) {
        self.clear_pending();
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.rebuild_heap(Direction::Reverse);
    }

    fn seek(&mut self, target: &[u8]) {
        self.target.clear();
        self.target.extend_from_slice(target);
        let Some(parsed) = parse_internal_key(target) else {
            // Not an internal key: no bound can be stated about it; seek every child.
            self.clear_pending();
            for child in &mut self.children {
                child.seek(target);
            }
            self.rebuild_heap(Direction::Forward);
            return;
        };
        for (child, slot) in self.children.iter_mut().zip(self.pending.iter_mut()) {
            *slot = match child.seek_bound(parsed.user_key) {
                SeekBound::Unknown => {
                    child.seek(target);
                    None
                }
                SeekBound::AtMostSequence(sequence) => {
                    Some(SeekBound::AtMostSequence(sequence.min(parsed.sequence)))
                }
                SeekBound::LaterUserKey => Some(SeekBound::LaterUserKey),
            };
        }
        self.rebuild_heap(Direction::Forward);
        self.settle();
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        let Some(current) = self.current() else {
            return;
        };
        if self.direction == Direction::Reverse {
            let Some(child) = self.children.get(current) else {
                return;
            };
            let key = child.key().to_vec();
            for (index, child) in self.children.iter_mut().enumerate() {
                if index == current {
                    continue;
                }
                child.seek(&key);
                if child.valid() && compare_internal_keys(child.key(), &key) == Ordering::Equal {
                    child.next();
                }
            }
            if let Some(child) = self.children.get_mut(current) {
                child.next();
            }
            self.rebuild_heap(Direction::Forward);
            return;
        }
        if let Some(child) = self.children.get_mut(current) {
            child.next();
        }
        self.fix_root();
        self.settle();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        let Some(current) = self.current() else {
            return;
        };
        if self.direction == Direction::Forward {
            let Some(child) = self.children.get(current) else {
                return;
            };
            let key = child.key().to_vec();
            // Every child is repositioned around the current key below, deferred ones too.
            self.clear_pending();
            for (index, child) in self.children.iter_mut().enumerate() {
                if index == current {
                    continue;
                }
                child.seek(&key);
                if child.valid() {
                    child.prev();
                } else if child.status().is_ok() {
                    // Nothing at or after the key: this child's entries all sort before it.
                    child.seek_to_last();
                }
            }
            if let Some(child) = self.children.get_mut(current) {
                child.prev();
            }
            self.rebuild_heap(Direction::Reverse);
            return;
        }
        if let Some(child) = self.children.get_mut(current) {
            child.prev();
        }
        self.fix_root();
    }

    fn key(&self) -> &[u8] {
        match self.current().and_then(|index| self.children.get(index)) {
            Some(child) => child.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current().and_then(|index| self.children.get(index)) {
            Some(child) => child.value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        for child in &self.children {
            child.status()?;
        }
        Ok(())
    }
}

#[cfg(test)]
/// A sorted in-memory list of entries (tests, and small merges).
#[derive(Debug, Default)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    position: Option<usize>,
    /// Whether `seek_bound` states true bounds (as a run with a perfect filter would).
    bounded: bool,
}

#[cfg(test)]
impl VecIterator {
    /// Sorts `entries` by internal key and iterates them.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        VecIterator {
            entries,
            position: None,
            bounded: false,
        }
    }

    /// The same, stating true seek bounds (the largest sequence of the user key's versions).
    pub fn bounded(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        VecIterator {
            bounded: true,
            ..VecIterator::new(entries)
        }
    }
}

#[cfg(test)]
impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.position.is_some()
    }
    fn seek_to_first(&mut self) {
        self.position = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.position = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let index = self
            .entries
            .partition_point(|(key, _)| compare_internal_keys(key, target) == Ordering::Less);
        self.position = (index < self.entries.len()).then_some(index);
    }
    fn next(&mut self) {
        self.position = self
            .position
            .map(|index| index + 1)
            .filter(|&index| index < self.entries.len());
    }
    fn prev(&mut self) {
        self.position = self.position.and_then(|index| index.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.position
            .and_then(|index| self.entries.get(index))
            .map_or(&[][..], |entry| entry.0.as_slice())
    }
    fn value(&self) -> &[u8] {
        self.position
            .and_then(|index| self.entries.get(index))
            .map_or(&[][..], |entry| entry.1.as_slice())
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
    fn seek_bound(&self, user: &[u8]) -> SeekBound {
        if !self.bounded {
            return SeekBound::Unknown;
        }
        self.entries
            .iter()
            .filter_map(|(key, _)| parse_internal_key(key))
            .filter(|parsed| parsed.user_key == user)
            .map(|parsed| parsed.sequence)
            .max()
            .map_or(SeekBound::LaterUserKey, SeekBound::AtMostSequence)
    }
}

/// Test helpers shared by the iterator tests of every module.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{InternalIterator, VecIterator};
    use crate::error::{Error, Result};
    use crate::key::user_key;

    /// A child whose entries with a user key in `bad` cannot be read (as if their block
    /// failed its checksum): landing on one leaves it invalid with an error, until the next
    /// repositioning, which clears the error as every child's does.
    #[derive(Debug)]
    pub(crate) struct PoisonedIterator {
        inner: VecIterator,
        bad: std::ops::Range<Vec<u8>>,
        error: Option<Error>,
    }

    impl PoisonedIterator {
        pub(crate) fn new(entries: Entries, bad: std::ops::Range<&[u8]>) -> Self {
            PoisonedIterator {
                inner: VecIterator::new(entries),
                bad: bad.start.to_vec()..bad.end.to_vec(),
                error: None,
            }
        }

        fn check(&mut self) {
            if self.inner.valid() && self.bad.contains(&user_key(self.inner.key()).to_vec()) {
                self.error = Some(Error::corruption("/db/000009.sst", 0, "poisoned block"));
            }
        }

        fn reposition(&mut self, step: impl FnOnce(&mut VecIterator)) {
            self.error = None;
            step(&mut self.inner);
            self.check();
        }
    }

    impl InternalIterator for PoisonedIterator {
        fn valid(&self) -> bool {
            self.error.is_none() && self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.reposition(VecIterator::seek_to_first);
        }
        fn seek_to_last(&mut self) {
            self.reposition(VecIterator::seek_to_last);
        }
        fn seek(&mut self, target: &[u8]) {
            self.reposition(|inner| inner.seek(target));
        }
        fn next(&mut self) {
            self.inner.next();
            self.check();
        }
        fn prev(&mut self) {
            self.inner.prev();
            self.check();
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            self.error.clone().map_or(Ok(()), Err)
        }
    }

    /// Owned (key, value) pairs in iteration order.
    pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// Every entry from the first, then the iterator's status.
    pub(crate) fn collect_forward(iterator: &mut dyn InternalIterator) -> crate::Result<Entries> {
        let mut entries = Vec::new();
        iterator.seek_to_first();
        while iterator.valid() {
            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.next();
        }
        iterator.status().map(|()| entries)
    }

    /// Every entry from the last, reversed into ascending order, then the status.
    pub(crate) fn collect_backward(iterator: &mut dyn InternalIterator) -> crate::Result<Entries> {
        let mut entries = Vec::new();
        iterator.seek_to_last();
        while iterator.valid() {
            entries.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.prev();
        }
        entries.reverse();
        iterator.status().map(|()| entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use rand::{rngs::SmallRng, Rng, SeedableRng};

    fn put(user: &[u8], sequence: u64) -> (Vec<u8>, Vec<u8>) {
        (internal_key(user, sequence, ValueKind::Put), b"v".to_vec())
    }

    /// A merge whose child fails stops there with the child's error: carrying on with the
    /// other children would hand out versions the failed child may hide (a newer value, a
    /// tombstone) as if nothing had happened.
    #[test]
    fn a_merge_stops_at_a_failed_child_in_both_directions() {
        use test_support::PoisonedIterator;
        let older: Vec<_> = [b"a", b"b", b"c", b"d", b"e"]
            .iter()
            .map(|user| put(*user, 1))
            .collect();
        let newer = vec![
            put(b"a", 5),
            (internal_key(b"c", 5, ValueKind::Delete), vec![]),
            put(b"e", 5),
        ];
        let merge = || {
            MergingIterator::new(vec![
                Box::new(VecIterator::new(older.clone())),
                Box::new(PoisonedIterator::new(newer.clone(), &b"c"[..]..&b"d"[..])),
            ])
        };
        let mut forward = merge();
        let mut seen = Vec::new();
        forward.seek_to_first();
        while forward.valid() {
            seen.push(user_key(forward.key()).to_vec());
            forward.next();
        }
        assert!(forward.status().is_err());
        assert!(seen.iter().all(|user| user.as_slice() < b"c"), "{seen:?}");
        let mut backward = merge();
        seen.clear();
        backward.seek_to_last();
        while backward.valid() {
            seen.push(user_key(backward.key()).to_vec());
            backward.prev();
        }
        assert!(backward.status().is_err());
        assert!(seen.iter().all(|user| user.as_slice() > b"c"), "{seen:?}");
        // Turning from forward to reverse re-seeks the children around the current key.
        let mut turning = merge();
        turning.seek(&internal_key(b"e", 9, ValueKind::SEEK));
        assert!(turning.valid());
        turning.prev();
        while turning.valid() {
            assert!(user_key(turning.key()) > &b"c"[..], "past the failed child");
            turning.prev();
        }
        assert!(turning.status().is_err());
    }

    #[test]
    fn merging_matches_sorted_union_in_both_directions() {
        merging_matches_sorted_union(false);
    }

    #[test]
    fn merging_with_deferred_seeks_matches_sorted_union() {
        merging_matches_sorted_union(true);
    }

    fn merging_matches_sorted_union(bounded: bool) {
        let mut rng = SmallRng::seed_from_u64(7);
        for round in 0..200 {
            let child_count = rng.gen_range(0..6);
            let mut all = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            let mut sequence = 0u64;
            for _ in 0..child_count {
                let mut entries = Vec::new();
                for _ in 0..rng.gen_range(0..30) {
                    sequence += 1;
                    let user = vec![rng.gen_range(b'a'..b'f'); rng.gen_range(0..3)];
                    let key = internal_key(&user, sequence, ValueKind::Put);
                    entries.push((key, sequence.to_le_bytes().to_vec()));
                }
                all.extend(entries.clone());
                children.push(Box::new(if bounded && rng.gen_bool(0.8) {
                    VecIterator::bounded(entries)
                } else {
                    VecIterator::new(entries)
                }));
            }
            all.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
            let mut merged = MergingIterator::new(children);
            let forward = test_support::collect_forward(&mut merged).unwrap();
            assert_eq!(forward, all, "round {round}");
            let backward = test_support::collect_backward(&mut merged).unwrap();
            assert_eq!(backward, all, "round {round}");
            // Random walks that switch direction agree with the sorted vector.
            if all.is_empty() {
                continue;
            }
            // Seeks to present user keys at random sequences (snapshots), and walks from there.
            for _ in 0..10 {
                let user = vec![rng.gen_range(b'a'..b'f'); rng.gen_range(0..3)];
                let target = internal_key(&user, rng.gen_range(0..=sequence + 1), ValueKind::SEEK);
                merged.seek(&target);
                let start = all.partition_point(|(key, _)| {
                    compare_internal_keys(key, &target) == Ordering::Less
                });
                for expected in all.iter().skip(start).take(rng.gen_range(0..8)) {
                    assert!(merged.valid(), "round {round}");
                    assert_eq!(merged.key(), expected.0.as_slice(), "round {round}");
                    merged.next();
                }
            }
            let mut position = rng.gen_range(0..all.len());
            merged.seek(&all[position].0);
            for _ in 0..100 {
                assert!(merged.valid());
                assert_eq!(merged.key(), all[position].0.as_slice());
                if rng.gen_bool(0.5) {
                    if position + 1 == all.len() {
                        continue;
                    }
                    merged.next();
                    position += 1;
                } else {
                    if position == 0 {
                        continue;
                    }
                    merged.prev();
                    position -= 1;
                }
            }
        }
    }
}
