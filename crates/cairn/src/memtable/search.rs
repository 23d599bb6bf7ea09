//! The memtable's read path: key-index lookups, top-down skiplist searches, and the point
//! reads (`get`, `get_entry`, `get_entry_hinted`) built on them.
//!
//! Thread-safety contract: every function here only loads (acquire) and never writes shared
//! memory, so any number run at once with each other and with inserts. A search sees every
//! key node whose level-0 link completed before it started, and maybe later ones.
//!
//! Invariants:
//! 1. `find_splice` returns `(before, after)` with `before`'s user key below the target (or
//!    `before` the head) and `after` null or at/after it, both adjacent at that level when read.
//! 2. A lookup trusts `Lookup::Absent` only from an unsaturated index (the memtable's
//!    invariant 5); `Unknown` always falls back to the skiplist.
//! 3. The hint `get_entry_hinted` returns marks a key node as `indexed` only when the index
//!    returned it, so the insert that uses a searched-for node publishes it.

use super::index::{self, Lookup};
use super::node::Node;
use super::{Entry, InsertHint, Memtable, MAX_HEIGHT};
use crate::key::{parse_internal_key, SequenceNumber, ValueKind};
use crate::sync::prefetch;
use std::cmp::Ordering;
use std::ptr;
use std::sync::atomic::Ordering as AtomicOrdering;

/// Where a search for a key node ended.
pub(super) enum Search {
    /// The key node of the user key.
    Found(*const Node),
    /// No key node: at each level, the last node before the key and the first after it.
    Absent {
        before: [*const Node; MAX_HEIGHT],
        after: [*const Node; MAX_HEIGHT],
    },
}

impl Memtable {
    /// Looks the key node of `user_key` up in the index.
    #[inline]
    pub(super) fn lookup(&self, user_key: &[u8], hash: u64) -> Lookup {
        self.index.find(hash, |address| {
            // SAFETY: the index holds only published key nodes of this memtable (invariant 3).
            unsafe { Node::user_key(address as *const Node) == user_key }
        })
    }
    /// Top-down search for the key node of `user_key` from `height` levels: the node, or the
    /// splice where it would go.
    pub(super) fn search(&self, user_key: &[u8], height: usize) -> Search {
        let mut before = [self.head.cast_const(); MAX_HEIGHT];
        let mut after = [ptr::null::<Node>(); MAX_HEIGHT];
        let mut start = self.head.cast_const();
        let mut known_not_before = ptr::null::<Node>();
        for level in (0..height.min(MAX_HEIGHT)).rev() {
            let (found_before, found_after, equal) =
                self.find_splice(user_key, start, level, known_not_before);
            if equal {
                return Search::Found(found_after);
            }
            if let (Some(before), Some(after)) = (before.get_mut(level), after.get_mut(level)) {
                *before = found_before;
                *after = found_after;
            }
            start = found_before;
            known_not_before = found_after;
        }
        Search::Absent { before, after }
    }

    /// At `level`, starting from `start` (which precedes the key), the last node before the
    /// key, the first node at or after it (null at the end), and whether that node is the
    /// key's. `known_not_before` is a node already known to be after the key (the level
    /// above's answer, or null): reaching it ends the walk without comparing keys again.
    #[inline]
    pub(super) fn find_splice(
        &self,
        user_key: &[u8],
        start: *const Node,
        level: usize,
        known_not_before: *const Node,
    ) -> (*const Node, *const Node, bool) {
        let mut current = start;
        loop {
            // SAFETY: `current` is the head or a node reached at this level, so its tower has
            // a slot for `level`; published nodes stay alive as long as `self`.
            let next = unsafe { Node::next(current, level).load(AtomicOrdering::Acquire) };
            if next.is_null() || ptr::eq(next, known_not_before) {
                return (current, next, false);
            }
            if level > 0 {
                // As in `find_greater_or_equal`: the walk goes on at `next` or one level down
                // from `current`; fetching the second while `next`'s key is compared overlaps
                // two cache misses. An insert's splice search is a chain of such misses (a
                // lone put's largest cost); this cut it by about a tenth.
                // SAFETY: `current`'s tower has a slot for `level - 1` (it has one for `level`).
                let down = unsafe { Node::next(current, level - 1).load(AtomicOrdering::Acquire) };
                if !ptr::eq(down, next) {
                    prefetch(down);
                }
            }
            // SAFETY: non-null `next` is a published node (invariant 3).
            match crate::key::compare_user_keys(unsafe { Node::user_key(next) }, user_key) {
                Ordering::Less => current = next,
                Ordering::Equal => return (current, next, true),
                Ordering::Greater => return (current, next, false),
            }
        }
    }

    /// The first key node whose user key is `>= user_key`, or null.
    #[inline]
    pub(super) fn find_greater_or_equal(&self, user_key: &[u8]) -> *const Node {
        let mut current = self.head.cast_const();
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        // The node that ended the walk on the level above: at or after the key, so when the
        // lower level leads to it again (the common case) no key comparison is needed.
        let mut known_not_before = ptr::null::<Node>();
        loop {
            // SAFETY: as in `find_splice`.
            let next = unsafe { Node::next(current, level).load(AtomicOrdering::Acquire) };
            if level > 0 {
                // The search continues either at `next` (on this level) or at the node below
                // `current` (one level down); fetching the second while the first is compared
                // overlaps two cache misses that would otherwise come one after the other.
                // SAFETY: `current`'s tower has a slot for `level - 1` (it has one for `level`).
                let down = unsafe { Node::next(current, level - 1).load(AtomicOrdering::Acquire) };
                if !ptr::eq(down, next) {
                    prefetch(down);
                }
            }
            let advance = !next.is_null()
                && !ptr::eq(next, known_not_before)
                // SAFETY: non-null `next` is a published node.
                && crate::key::compare_user_keys(unsafe { Node::user_key(next) }, user_key)
                    == Ordering::Less;
            if advance {
                current = next;
                continue;
            }
            if level == 0 {
                return next;
            }
            known_not_before = next;
            level -= 1;
        }
    }

    /// The last key node whose user key is `< user_key` (or, with none, the last key node),
    /// or null if that would be the head.
    pub(super) fn find_less_than(&self, user_key: Option<&[u8]>) -> *const Node {
        let mut current = self.head.cast_const();
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `find_splice`.
            let next = unsafe { Node::next(current, level).load(AtomicOrdering::Acquire) };
            let advance = !next.is_null()
                && user_key.is_none_or(|user_key| {
                    // SAFETY: non-null `next` is a published node.
                    crate::key::compare_user_keys(unsafe { Node::user_key(next) }, user_key)
                        == Ordering::Less
                });
            if advance {
                current = next;
            } else if level == 0 {
                return if ptr::eq(current, self.head) {
                    ptr::null()
                } else {
                    current
                };
            } else {
                level -= 1;
            }
        }
    }

    /// The key node of `user_key`, or null: through the index, or the skiplist when the index
    /// cannot answer.
    #[inline]
    pub(super) fn key_node(&self, user_key: &[u8]) -> *const Node {
        match self.lookup(user_key, index::hash(user_key)) {
            Lookup::Found(address) => address as *const Node,
            Lookup::Absent => ptr::null(),
            Lookup::Unknown => {
                let node = self.find_greater_or_equal(user_key);
                // SAFETY: a non-null result is a published key node.
                if !node.is_null() && unsafe { Node::user_key(node) } == user_key {
                    node
                } else {
                    ptr::null()
                }
            }
        }
    }

    /// The newest version on `key_node`'s chain whose trailer is `<= trailer`, or null.
    #[inline]
    pub(super) fn version_at_or_below(key_node: *const Node, trailer: u64) -> *const Node {
        // SAFETY: a published key node; chain nodes are published (invariant 3).
        unsafe {
            let mut version = Node::versions(key_node).load(AtomicOrdering::Acquire);
            while !version.is_null() && Node::trailer(version) > trailer {
                version = Node::older(version).load(AtomicOrdering::Acquire);
            }
            version
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// The newest version of `user_key` with sequence `<= snapshot`: `Some((kind, value))`,
    /// or `None` if there is none. Never allocates, never blocks.
    pub fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<(ValueKind, &[u8])> {
        self.get_entry(user_key, snapshot)
            .map(|(_, kind, value)| (kind, value))
    }

    /// Like `get`, also returning the version's sequence number (read-modify-write compares
    /// versions to detect conflicts).
    pub fn get_entry(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Entry<'_>> {
        let key_node = self.key_node(user_key);
        if key_node.is_null() {
            return None;
        }
        let trailer = crate::key::pack_trailer(snapshot, ValueKind::SEEK);
        self.entry(Self::version_at_or_below(key_node, trailer))
    }

    /// The newest version of `user_key` (any sequence), and a hint that lets
    /// [`Memtable::insert_hinted`] add a newer version of the same key without looking it up
    /// again.
    pub fn get_entry_hinted<'a>(
        &'a self,
        user_key: &'a [u8],
    ) -> (Option<Entry<'a>>, InsertHint<'a>) {
        let hash = index::hash(user_key);
        let (key_node, indexed, path) = match self.lookup(user_key, hash) {
            Lookup::Found(address) => (address as *const Node, true, None),
            // An absent key still gets its search path: the read-modify-write that asks
            // searches here, before it reserves its sequence, so the insert after it (inside
            // the window other read-modify-writes wait on) only walks what was inserted since.
            Lookup::Absent | Lookup::Unknown => {
                let height = self.max_height.load(AtomicOrdering::Relaxed);
                match self.search(user_key, height) {
                    Search::Found(node) => (node, false, None),
                    Search::Absent { before, .. } => (ptr::null(), false, Some(before)),
                }
            }
        };
        let entry = if key_node.is_null() {
            None
        } else {
            // SAFETY: a published key node.
            self.entry(unsafe { Node::versions(key_node).load(AtomicOrdering::Acquire) })
        };
        let hint = InsertHint {
            memtable: self,
            user_key,
            key_node,
            indexed,
            path,
            hash,
        };
        (entry, hint)
    }

    /// The entry of a version node (null: none).
    #[inline]
    pub(super) fn entry(&self, version: *const Node) -> Option<Entry<'_>> {
        if version.is_null() {
            return None;
        }
        // SAFETY: a published node, alive as long as `self` (the returned borrow).
        let key = unsafe { Node::key(version) };
        let parsed = parse_internal_key(key)?;
        // SAFETY: as above.
        Some((parsed.sequence, parsed.kind, unsafe {
            Node::value(version)
        }))
    }
}
