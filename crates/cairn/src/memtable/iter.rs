//! [`MemtableIterator`]: a cursor over a live memtable's versions in internal-key order,
//! walking level 0 between key nodes and each key node's chain within a key.
//!
//! Thread-safety contract: a cursor is used by one thread at a time (it is `Send`, not
//! `Sync`); it keeps its memtable alive through its owner (the memtable's `Arc`, or a
//! structure holding that `Arc`: `MemtableOwner`) and reads while inserts continue, so it may
//! see versions inserted after it was created.
//!
//! Invariants:
//! 1. A valid cursor's `version` is on `key_node`'s chain; an invalid one has both null.
//! 2. `newer`, when `newer_than == version`, holds exactly the versions of the chain newer
//!    than `version`, oldest last popped first (so `prev` steps one version per call).

use super::node::Node;
use super::Memtable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{trailer, user_key};
use std::ptr;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

/// What keeps a cursor's memtable alive: the memtable's own `Arc`, or a structure that holds
/// it with something else the cursor's user needs (a scan over a Membuffer reaches both
/// through one reference count: every reference count a scan bumps is a cache line that
/// concurrent scans pass between cores).
///
/// # Safety
///
/// `memtable` returns the same memtable every time, and the owner keeps it alive for as long
/// as the owner lives: a cursor keeps raw pointers into it between calls.
pub unsafe trait MemtableOwner {
    /// The memtable this owner keeps alive.
    fn memtable(&self) -> &Memtable;
}

// SAFETY: the `Arc` keeps its one memtable alive.
unsafe impl MemtableOwner for Arc<Memtable> {
    #[inline]
    fn memtable(&self) -> &Memtable {
        self
    }
}

impl Memtable {
    /// A cursor that keeps the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemtableIterator {
        MemtableIterator::with_owner(Arc::clone(self))
    }
}

/// A cursor over a memtable's versions in internal-key order. It sees every entry inserted
/// before it was created, and may see later ones too (the skiplist and the chains are
/// concurrent), which the database iterator filters by sequence number.
pub struct MemtableIterator<O: MemtableOwner = Arc<Memtable>> {
    owner: O,
    /// The key node of the current position (null when not valid).
    key_node: *const Node,
    /// The current version, on `key_node`'s chain (null when not valid).
    version: *const Node,
    /// For `prev`, which the chain's links (towards older versions only) cannot serve in one
    /// step: the versions of `newer_than`'s chain that are newer than it, newest first.
    /// Built by one walk when `prev` finds it is not for the current version; each later
    /// `prev` on the same chain pops one, so a backward scan over a key with `n` versions
    /// costs `n` steps, not `n * n / 2`.
    newer: Vec<*const Node>,
    newer_than: *const Node,
}

impl<O: MemtableOwner> MemtableIterator<O> {
    /// An unpositioned cursor over `owner`'s memtable, keeping it alive.
    pub(crate) fn with_owner(owner: O) -> MemtableIterator<O> {
        MemtableIterator {
            owner,
            key_node: ptr::null(),
            version: ptr::null(),
            newer: Vec::new(),
            newer_than: ptr::null(),
        }
    }

    /// The memtable this cursor walks.
    #[inline]
    pub fn memtable(&self) -> &Memtable {
        self.owner.memtable()
    }

    /// What keeps the memtable alive.
    #[inline]
    pub(crate) fn owner(&self) -> &O {
        &self.owner
    }
}

impl<O: MemtableOwner> std::fmt::Debug for MemtableIterator<O> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemtableIterator")
            .field("valid", &!self.version.is_null())
            .finish()
    }
}

// SAFETY: the node pointers refer into the memtable the iterator keeps alive through its
// owner (which moves with it, being `Send`); node bytes are immutable and links are atomics,
// so moving the cursor to another thread is sound.
unsafe impl<O: MemtableOwner + Send> Send for MemtableIterator<O> {}

impl<O: MemtableOwner> MemtableIterator<O> {
    /// Positions at the newest version of `key_node` (invalid if null).
    fn at_newest(&mut self, key_node: *const Node) {
        self.key_node = key_node;
        self.version = if key_node.is_null() {
            ptr::null()
        } else {
            // SAFETY: a published key node of the memtable this iterator keeps alive.
            unsafe { Node::versions(key_node).load(AtomicOrdering::Acquire) }
        };
    }

    /// Positions at the oldest version of `key_node` (invalid if null).
    fn at_oldest(&mut self, key_node: *const Node) {
        self.at_newest(key_node);
        if !self.version.is_null() {
            // SAFETY: a published node of the memtable this iterator keeps alive.
            self.version = unsafe { Node::oldest(self.version) };
        }
    }

    fn invalidate(&mut self) {
        self.key_node = ptr::null();
        self.version = ptr::null();
    }
}

impl<O: MemtableOwner + Send> InternalIterator for MemtableIterator<O> {
    #[inline]
    fn valid(&self) -> bool {
        !self.version.is_null()
    }

    fn seek_to_first(&mut self) {
        // SAFETY: the head has MAX_HEIGHT levels.
        let first = unsafe { Node::next(self.memtable().head, 0).load(AtomicOrdering::Acquire) };
        self.at_newest(first);
    }

    fn seek_to_last(&mut self) {
        let last = self.memtable().find_less_than(None);
        self.at_oldest(last);
    }

    fn seek(&mut self, target: &[u8]) {
        let target_user_key = user_key(target);
        let key_node = self.memtable().find_greater_or_equal(target_user_key);
        if key_node.is_null() {
            self.invalidate();
            return;
        }
        // SAFETY: a published key node of the memtable this iterator keeps alive.
        if unsafe { Node::user_key(key_node) } == target_user_key {
            let version = Memtable::version_at_or_below(key_node, trailer(target));
            if !version.is_null() {
                self.key_node = key_node;
                self.version = version;
                return;
            }
            // Every version of the target's key sorts before the target: the answer is the
            // next key's newest.
            // SAFETY: as above.
            let next = unsafe { Node::next(key_node, 0).load(AtomicOrdering::Acquire) };
            self.at_newest(next);
            return;
        }
        self.at_newest(key_node);
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if self.version.is_null() {
            return;
        }
        // SAFETY: a valid cursor points at a published version on a published key node's
        // chain.
        let older = unsafe { Node::older(self.version).load(AtomicOrdering::Acquire) };
        if !older.is_null() {
            self.version = older;
            return;
        }
        // SAFETY: as above.
        let next = unsafe { Node::next(self.key_node, 0).load(AtomicOrdering::Acquire) };
        self.at_newest(next);
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if self.version.is_null() {
            return;
        }
        if !ptr::eq(self.newer_than, self.version) {
            self.newer.clear();
            // SAFETY: as in `next`.
            let mut newer = unsafe { Node::versions(self.key_node).load(AtomicOrdering::Acquire) };
            while !newer.is_null() && !ptr::eq(newer, self.version) {
                self.newer.push(newer);
                // SAFETY: as above.
                newer = unsafe { Node::older(newer).load(AtomicOrdering::Acquire) };
            }
            debug_assert!(!newer.is_null(), "the current version is on its chain");
        }
        if let Some(previous) = self.newer.pop() {
            self.version = previous;
            self.newer_than = previous;
            return;
        }
        self.newer_than = ptr::null();
        // SAFETY: as above; the key stays valid while the memtable lives.
        let current_user_key = unsafe { Node::user_key(self.key_node) };
        let before = self.memtable().find_less_than(Some(current_user_key));
        self.at_oldest(before);
    }

    #[inline]
    fn key(&self) -> &[u8] {
        if self.version.is_null() {
            return &[];
        }
        // SAFETY: a published node of the memtable this iterator keeps alive.
        unsafe { Node::key(self.version) }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        if self.version.is_null() {
            return &[];
        }
        // SAFETY: as above.
        unsafe { Node::value(self.version) }
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}
