//! The memtable's write path: adding a version to a key's chain, or linking a new key node
//! into the skiplist and publishing it in the key index, optionally starting from what a
//! read-modify-write's lookup found (an [`InsertHint`]).
//!
//! Thread-safety contract: any number of inserts run at once and never block; each link is a
//! release compare-and-swap that retries from the node it had (nodes are never removed, so a
//! node that preceded the key still does). Readers run concurrently and see a node only once it
//! is fully initialised.
//!
//! Invariants (numbered as the memtable's, which they maintain):
//! 2. `link_version` puts a version after every newer one and before every older one, so a
//!    chain stays sorted by trailer descending.
//! 4. `link_key_node` links level 0 first and each higher level after the one below.
//! 5. Every path through `insert_hinted` publishes the key node it used in the index before it
//!    returns, unless that key node came from the index itself.

use super::index::{self, Lookup};
use super::node::{random_height, Node};
use super::search::Search;
use super::{Memtable, MAX_HEIGHT};
use crate::key::{SequenceNumber, ValueKind, TRAILER_BYTES};
use std::ptr;
use std::sync::atomic::Ordering as AtomicOrdering;

impl Memtable {
    /// Inserts one version. Precondition: `(user_key, sequence)` was never inserted before.
    /// Safe to call from many threads at once; never blocks.
    pub fn insert(&self, user_key: &[u8], sequence: SequenceNumber, kind: ValueKind, value: &[u8]) {
        self.insert_hinted(None, user_key, sequence, kind, value);
    }

    /// `insert`, using what [`Memtable::get_entry_hinted`] on this memtable found for the same
    /// user key: the key node (the version joins its chain, no search at all) or, when the
    /// index could not answer, the search path (the skiplist search starts there). A hint from
    /// another memtable or for another key is ignored, never trusted.
    ///
    /// # Panics
    ///
    /// Only with the `invariants` feature, when the insert left the structure broken.
    pub fn insert_hinted(
        &self,
        hint: Option<&InsertHint<'_>>,
        user_key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) {
        self.check_not_gathered();
        debug_assert!(user_key.len() <= crate::key::KEY_BYTES_MAX);
        debug_assert!(value.len() <= crate::expiry::STORED_VALUE_BYTES_MAX);
        let trailer_bytes: [u8; TRAILER_BYTES] =
            crate::key::pack_trailer(sequence, kind).to_le_bytes();
        let key_parts = [user_key, &trailer_bytes[..]];
        let hint = hint.filter(|hint| ptr::eq(hint.memtable, self) && hint.user_key == user_key);
        let hash = hint.map_or_else(|| index::hash(user_key), |hint| hint.hash);
        let key_node = match self.known_key_node(hint, user_key, hash) {
            Some((key_node, indexed)) => {
                let version = Node::allocate(&self.arena, 0, key_parts, value);
                self.link_version(key_node, version);
                if !indexed {
                    // Found by search: its creator may not have published it yet, and our
                    // write completes now (invariant 5).
                    self.index.publish(hash, key_node as usize);
                }
                key_node
            }
            None => {
                let key_node = self.insert_key_node(hint, key_parts, value);
                self.index.publish(hash, key_node as usize);
                key_node
            }
        };
        self.entry_count.add(1);
        #[cfg(not(feature = "invariants"))]
        let _ = key_node;
        #[cfg(feature = "invariants")]
        // A bounded prefix: a version lands near the head, and hot keys have long chains.
        if let Err(broken) = self.check_key_node(key_node, 64) {
            panic!("memtable insert broke an invariant: {broken}");
        }
    }

    /// The key node the hint names, or else the index's: with true if it came from the
    /// index (so it needs no publishing), false if a search found it.
    fn known_key_node(
        &self,
        hint: Option<&InsertHint<'_>>,
        user_key: &[u8],
        hash: u64,
    ) -> Option<(*const Node, bool)> {
        match hint {
            Some(hint) if !hint.key_node.is_null() => Some((hint.key_node, hint.indexed)),
            _ => match self.lookup(user_key, hash) {
                Lookup::Found(address) => Some((address as *const Node, true)),
                Lookup::Absent | Lookup::Unknown => None,
            },
        }
    }

    /// Inserts a version as a new key node (from the hint's search path if any) and returns
    /// the key node the version ended up on: ours, or the one another insert linked first.
    /// The caller publishes it.
    fn insert_key_node(
        &self,
        hint: Option<&InsertHint<'_>>,
        key_parts: [&[u8]; 2],
        value: &[u8],
    ) -> *const Node {
        let height = random_height();
        let node = Node::allocate(&self.arena, height, key_parts, value);
        let path = hint.and_then(|hint| hint.path.as_ref());
        let [user_key, _] = key_parts;
        match self.link_key_node(node, user_key, height, path) {
            None => {
                #[cfg(test)]
                if self.delay_publish.load(AtomicOrdering::Relaxed) {
                    for _ in 0..20 {
                        std::thread::yield_now();
                    }
                }
                node.cast_const()
            }
            Some(existing) => {
                // Another insert created the key first: ours is just a version (its tower
                // stays unused) and the key node may not be in the index yet — its creator
                // can still be on its way there, while our write completes now (invariant 5).
                self.link_version(existing, node);
                existing
            }
        }
    }

    /// Adds `version` to `key_node`'s chain at its place by trailer (invariant 2).
    pub(super) fn link_version(&self, key_node: *const Node, version: *mut Node) {
        // SAFETY: `version` is ours and initialised; `key_node` is a published key node (it
        // has a chain head) and every node reached is published and alive as long as `self`.
        unsafe {
            let ours = Node::trailer(version);
            debug_assert_eq!(Node::user_key(version), Node::user_key(key_node));
            let mut link = Node::versions(key_node);
            let mut current = link.load(AtomicOrdering::Acquire);
            loop {
                while !current.is_null() && Node::trailer(current) > ours {
                    link = Node::older(current);
                    current = link.load(AtomicOrdering::Acquire);
                }
                debug_assert!(
                    current.is_null() || Node::trailer(current) < ours,
                    "duplicate internal key inserted"
                );
                Node::older(version).store(current, AtomicOrdering::Relaxed);
                match link.compare_exchange(
                    current,
                    version,
                    AtomicOrdering::Release,
                    AtomicOrdering::Acquire,
                ) {
                    Ok(_) => return,
                    // A newer version was linked here meanwhile: continue from this link, which
                    // still precedes ours (nothing is ever unlinked).
                    Err(actual) => current = actual,
                }
            }
        }
    }

    /// Links the fresh key node `node` (of `height` levels) into the skiplist, starting the
    /// search from `path` if given. Returns the existing key node instead if the user key
    /// already has one (then `node` is not linked anywhere).
    pub(super) fn link_key_node(
        &self,
        node: *mut Node,
        user_key: &[u8],
        height: usize,
        path: Option<&[*const Node; MAX_HEIGHT]>,
    ) -> Option<*const Node> {
        let max_height = self.raise_max_height(height);
        let splice = match path {
            Some(path) => self.splice_from_path(user_key, height, path),
            None => self.search(user_key, max_height.max(height)),
        };
        match splice {
            Search::Found(existing) => Some(existing),
            Search::Absent { before, after } => {
                self.link_levels(node, user_key, height, before, after)
            }
        }
    }

    /// Raises `max_height` to at least `height` (invariant 6: it only grows); returns the
    /// value it had.
    pub(super) fn raise_max_height(&self, height: usize) -> usize {
        let mut max_height = self.max_height.load(AtomicOrdering::Relaxed);
        while height > max_height {
            match self.max_height.compare_exchange_weak(
                max_height,
                height,
                AtomicOrdering::Relaxed,
                AtomicOrdering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => max_height = actual,
            }
        }
        max_height
    }

    /// The splice for a key of `height` levels, searching each level from the hint's path.
    fn splice_from_path(
        &self,
        user_key: &[u8],
        height: usize,
        path: &[*const Node; MAX_HEIGHT],
    ) -> Search {
        // Each path node precedes the key (nodes are never removed, so it stays before it),
        // so it is a valid start at its level; only nodes inserted since the read lie between
        // it and the splice.
        let mut before = [self.head.cast_const(); MAX_HEIGHT];
        let mut after = [ptr::null::<Node>(); MAX_HEIGHT];
        for level in (0..height).rev() {
            let start = path.get(level).copied().unwrap_or(self.head);
            let (found_before, found_after, equal) =
                self.find_splice(user_key, start, level, ptr::null());
            if equal {
                return Search::Found(found_after);
            }
            if let (Some(before), Some(after)) = (before.get_mut(level), after.get_mut(level)) {
                *before = found_before;
                *after = found_after;
            }
        }
        Search::Absent { before, after }
    }

    /// Links `node` at each of its levels between `before` and `after`, bottom-up (invariant
    /// 4), re-searching a level whose compare-and-swap lost. Level 0 decides: once linked
    /// there the key is ours; before that, a key node of the same key found there is returned.
    pub(super) fn link_levels(
        &self,
        node: *mut Node,
        user_key: &[u8],
        height: usize,
        mut before: [*const Node; MAX_HEIGHT],
        mut after: [*const Node; MAX_HEIGHT],
    ) -> Option<*const Node> {
        for (level, (before, after)) in before.iter_mut().zip(after.iter_mut()).enumerate() {
            if level >= height {
                break;
            }
            loop {
                // SAFETY: `node` is ours and has `height` levels; `before` is the head or a
                // published node whose height exceeds `level` (it was found at `level`).
                unsafe {
                    Node::next(node, level).store((*after).cast_mut(), AtomicOrdering::Relaxed);
                    if Node::next(*before, level)
                        .compare_exchange(
                            (*after).cast_mut(),
                            node,
                            AtomicOrdering::Release,
                            AtomicOrdering::Relaxed,
                        )
                        .is_ok()
                    {
                        break;
                    }
                }
                // Another insert changed this level between the search and the CAS: search
                // again from the node we had, which still precedes the key.
                let (found_before, found_after, equal) =
                    self.find_splice(user_key, *before, level, ptr::null());
                if equal {
                    // Only possible before our level-0 link: above it the key is ours.
                    debug_assert_eq!(level, 0);
                    return Some(found_after);
                }
                *before = found_before;
                *after = found_after;
            }
        }
        None
    }
}

/// What [`Memtable::get_entry_hinted`] found for a key, for the insert of its next version:
/// the key node or, when the key has none, at each level the last node before the key.
/// Borrowing the memtable keeps those nodes alive; an insert checks that the hint is its own
/// memtable's and for its key before using it.
pub struct InsertHint<'a> {
    pub(super) memtable: &'a Memtable,
    pub(super) user_key: &'a [u8],
    /// The key node, or null.
    pub(super) key_node: *const Node,
    /// True if `key_node` came from the index; one found by search may not be published yet,
    /// so the insert that uses it publishes it.
    pub(super) indexed: bool,
    pub(super) path: Option<[*const Node; MAX_HEIGHT]>,
    /// `index::hash(user_key)`, so the insert does not hash the key again.
    pub(super) hash: u64,
}

impl std::fmt::Debug for InsertHint<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("InsertHint")
            .field("user_key_bytes", &self.user_key.len())
            .field("found", &!self.key_node.is_null())
            .field("path", &self.path.is_some())
            .finish()
    }
}
