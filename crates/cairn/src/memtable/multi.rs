//! Multi-insert (`FloDB` §4.2, Algorithm 1): inserting a batch of versions sorted by user key,
//! each skiplist search starting from the previous insert's predecessors instead of the head.
//!
//! Why: a drained Membuffer partition is a batch of keys from one key range. Searched one by
//! one, every key pays a full top-down search (a chain of dependent cache misses that grows
//! with the memtable); searched in order from the previous key's splice, a key pays only the
//! nodes between it and its predecessor in the batch, at every level. At each level the search
//! starts from whichever is further along: the previous insert's predecessor at that level or
//! the node the level above ended on, so a sparse batch never walks more than a head search.
//!
//! Thread-safety contract: as `insert` — any number of multi-inserts and inserts run at once,
//! never block, and readers run concurrently. The remembered predecessors stay valid starts
//! because nodes are never removed: a node that preceded the previous (smaller) key precedes
//! the current one too.
//!
//! Invariants (numbered as the memtable's, which they maintain):
//! 1. A batch not sorted by user key is still inserted correctly (the finger is reset to the
//!    head when a key is smaller than the previous one), only more slowly.
//! 4. New key nodes are linked bottom-up by `link_levels`, as single inserts.
//! 5. Every key node a batch entry ended up on is published in the index before the call
//!    returns.

use super::index::{self, Lookup};
use super::node::{random_height, Node};
use super::search::Search;
use super::{Memtable, MAX_HEIGHT};
use crate::key::{SequenceNumber, ValueKind, TRAILER_BYTES};
use std::cmp::Ordering;
use std::ptr;

/// One version of a multi-insert batch: user key, sequence, kind, value.
pub type BatchEntry<'a> = (&'a [u8], SequenceNumber, ValueKind, &'a [u8]);

impl Memtable {
    /// Inserts `entries` (sorted by user key for speed; any order is correct), each search
    /// starting from the previous one's predecessors. Precondition: as `insert`, no
    /// `(user_key, sequence)` was inserted before.
    ///
    /// # Panics
    ///
    /// Only with the `invariants` feature, when an insert left the structure broken.
    pub fn insert_sorted<'a>(&self, entries: impl IntoIterator<Item = BatchEntry<'a>>) {
        let mut finger = [self.head.cast_const(); MAX_HEIGHT];
        let mut previous: Option<&[u8]> = None;
        for (user_key, sequence, kind, value) in entries {
            if previous.is_some_and(|previous| {
                crate::key::compare_user_keys(previous, user_key) == Ordering::Greater
            }) {
                // Invariant 1: the finger only helps keys after it.
                finger = [self.head.cast_const(); MAX_HEIGHT];
            }
            previous = Some(user_key);
            let key_node = self.insert_from_finger(&mut finger, user_key, sequence, kind, value);
            self.entry_count.add(1);
            #[cfg(not(feature = "invariants"))]
            let _ = key_node;
            #[cfg(feature = "invariants")]
            if let Err(broken) = self.check_key_node(key_node, 64) {
                panic!("memtable multi-insert broke an invariant: {broken}");
            }
        }
    }

    /// Hints the processor to fetch the index slot an insert or lookup of `user_key` reads
    /// first: a multi-insert's caller calls it a few entries ahead (its key already fetched),
    /// a write buffer's lookup before it asks the Membuffer, so the miss overlaps the work in
    /// between.
    #[inline]
    pub(crate) fn prefetch_key(&self, user_key: &[u8]) {
        self.index.prefetch(index::hash(user_key));
    }

    /// One insert of a multi-insert: the version joins its key node found through the index,
    /// or is linked as a new key node from the splice the finger leads to (and the finger moves
    /// there). Returns the key node the version is on, published (invariant 5).
    fn insert_from_finger(
        &self,
        finger: &mut [*const Node; MAX_HEIGHT],
        user_key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> *const Node {
        self.check_not_gathered();
        let trailer_bytes: [u8; TRAILER_BYTES] =
            crate::key::pack_trailer(sequence, kind).to_le_bytes();
        let key_parts = [user_key, &trailer_bytes[..]];
        let hash = index::hash(user_key);
        if let Lookup::Found(address) = self.lookup(user_key, hash) {
            let version = Node::allocate(&self.arena, 0, key_parts, value);
            self.link_version(address as *const Node, version);
            return address as *const Node;
        }
        let height = random_height();
        let searched = self.raise_max_height(height).max(height);
        let key_node = match self.splice_from_finger(user_key, searched, finger) {
            Search::Found(existing) => {
                let version = Node::allocate(&self.arena, 0, key_parts, value);
                self.link_version(existing, version);
                existing
            }
            Search::Absent { before, after } => {
                let node = Node::allocate(&self.arena, height, key_parts, value);
                match self.link_levels(node, user_key, height, before, after) {
                    None => node.cast_const(),
                    Some(existing) => {
                        self.link_version(existing, node);
                        existing
                    }
                }
            }
        };
        // Found by search or linked by us: our write completes now (invariant 5).
        self.index.publish(hash, key_node as usize);
        key_node
    }

    /// The splice of `user_key` over `height` levels, each level's walk starting from the
    /// further along of the finger's node and the level above's predecessor; the finger is
    /// moved to the predecessors found.
    fn splice_from_finger(
        &self,
        user_key: &[u8],
        height: usize,
        finger: &mut [*const Node; MAX_HEIGHT],
    ) -> Search {
        let mut before = [self.head.cast_const(); MAX_HEIGHT];
        let mut after = [ptr::null::<Node>(); MAX_HEIGHT];
        let mut down = self.head.cast_const();
        for level in (0..height.min(MAX_HEIGHT)).rev() {
            let remembered = finger.get(level).copied().unwrap_or(self.head);
            let start = self.further_along(remembered, down);
            let (found_before, found_after, equal) =
                self.find_splice(user_key, start, level, ptr::null());
            if equal {
                return Search::Found(found_after);
            }
            if let (Some(before), Some(after), Some(finger)) = (
                before.get_mut(level),
                after.get_mut(level),
                finger.get_mut(level),
            ) {
                *before = found_before;
                *after = found_after;
                *finger = found_before;
            }
            down = found_before;
        }
        Search::Absent { before, after }
    }

    /// Of two nodes that both precede the key being searched (or are the head), the one with
    /// the larger user key: the search from it walks less.
    fn further_along(&self, first: *const Node, second: *const Node) -> *const Node {
        if ptr::eq(first, self.head) {
            return second;
        }
        if ptr::eq(second, self.head) {
            return first;
        }
        // SAFETY: both are published key nodes of this memtable (reached by searches).
        let order =
            unsafe { crate::key::compare_user_keys(Node::user_key(first), Node::user_key(second)) };
        if order == Ordering::Less {
            second
        } else {
            first
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Memtable;
    use crate::key::ValueKind;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// Sorted batches (with keys already present, repeated keys and one unsorted batch),
    /// interleaved with single inserts on other threads, read back exactly.
    #[test]
    fn sorted_batches_read_back_exactly_beside_concurrent_inserts() {
        for slots in [1 << 16, 8] {
            let memtable = Arc::new(Memtable::with_sizes(4096, slots));
            let single = {
                let memtable = Arc::clone(&memtable);
                std::thread::spawn(move || {
                    for index in 0..2000u64 {
                        let key = (index * 7 % 3001).to_be_bytes();
                        memtable.insert(&key, 1_000_000 + index, ValueKind::Put, b"single");
                    }
                })
            };
            let mut expected = BTreeMap::new();
            let mut sequence = 1u64;
            for round in 0..20u64 {
                let mut keys: Vec<u64> = (0..200).map(|i| (i * 13 + round * 31) % 3001).collect();
                if round % 7 != 3 {
                    keys.sort_unstable();
                }
                let owned: Vec<([u8; 8], u64, Vec<u8>)> = keys
                    .iter()
                    .map(|key| {
                        sequence += 1;
                        (key.to_be_bytes(), sequence, sequence.to_le_bytes().to_vec())
                    })
                    .collect();
                memtable.insert_sorted(owned.iter().map(|(key, sequence, value)| {
                    (&key[..], *sequence, ValueKind::Put, value.as_slice())
                }));
                for (key, sequence, value) in owned {
                    expected.insert((key, sequence), value);
                }
            }
            single.join().expect("inserting thread");
            for ((key, sequence), value) in &expected {
                let found = memtable.get_entry(key, *sequence);
                assert_eq!(
                    found.map(|(s, _, v)| (s, v.to_vec())),
                    Some((*sequence, value.clone()))
                );
            }
            assert_eq!(memtable.len(), expected.len() + 2000);
            memtable
                .check_invariants()
                .expect("invariants after multi-inserts");
        }
    }
}
