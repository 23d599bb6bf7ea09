//! Checks of the memtable's numbered invariants (see the module documentation of
//! [`crate::memtable`]): a full walk for tests and quiet memtables, and a per-key check cheap
//! enough to run after every insert under the `invariants` feature.
//!
//! Thread-safety contract: the checks only load (acquire), so they may run concurrently with
//! inserts; `check_invariants` then reports only what is inconsistent in any state (order,
//! chains, index), while its entry count is exact only on a quiet memtable.
//!
//! Invariants checked (the memtable's numbers):
//! 1. Every level is sorted strictly by user key; every version is on its key's chain.
//! 2. Every chain is non-empty, holds its key node, has one user key, and its trailers are
//!    strictly descending.
//! 4. Every node linked at level `l > 0` is also linked at level `l - 1`.
//! 5. Unless the index is saturated, the index finds every key node.
//! 6. The head's levels at and above `max_height` are null.

use super::index::{self, Lookup};
use super::node::Node;
use super::Memtable;
#[cfg(test)]
use super::MAX_HEIGHT;
#[cfg(test)]
use std::collections::HashSet;
use std::ptr;
use std::sync::atomic::Ordering as AtomicOrdering;

impl Memtable {
    /// Checks invariants 1, 2, 4, 5 and 6 over the whole memtable, and that the chains hold
    /// `len()` versions (exact on a quiet memtable). Costs a walk of every level and chain.
    #[cfg(test)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let max_height = self.max_height.load(AtomicOrdering::Acquire);
        if !(1..=MAX_HEIGHT).contains(&max_height) {
            return Err(format!("invariant 6: max_height {max_height} out of range"));
        }
        for level in max_height..MAX_HEIGHT {
            // SAFETY: the head has MAX_HEIGHT levels.
            if !unsafe { Node::next(self.head, level).load(AtomicOrdering::Acquire) }.is_null() {
                return Err(format!(
                    "invariant 6: head level {level} >= max_height is linked"
                ));
            }
        }
        let mut below: Option<HashSet<*const Node>> = None;
        let mut level_zero = Vec::new();
        for level in 0..max_height {
            let nodes = self.level_nodes(level)?;
            if let Some(below) = &below {
                if let Some(missing) = nodes.iter().find(|node| !below.contains(*node)) {
                    // SAFETY: a published node of this memtable.
                    let key = unsafe { Node::user_key(*missing) };
                    return Err(format!(
                        "invariant 4: key {key:?} at level {level} is not linked below it"
                    ));
                }
            }
            if level == 0 {
                level_zero.clone_from(&nodes);
            }
            below = Some(nodes.into_iter().collect());
        }
        let mut versions = 0usize;
        for &key_node in &level_zero {
            versions += self.check_key_node(key_node, usize::MAX)?;
        }
        if versions != self.len() {
            return Err(format!(
                "invariant 1: chains hold {versions} versions, the memtable counted {}",
                self.len()
            ));
        }
        Ok(())
    }

    /// The nodes linked at `level`, in order, after checking they are sorted strictly by user
    /// key and tall enough to be there (invariant 1).
    #[cfg(test)]
    fn level_nodes(&self, level: usize) -> Result<Vec<*const Node>, String> {
        let mut nodes: Vec<*const Node> = Vec::new();
        // SAFETY: the head has MAX_HEIGHT levels; nodes reached at `level` are published and
        // have a tower slot for it.
        let mut node = unsafe { Node::next(self.head, level).load(AtomicOrdering::Acquire) };
        while !node.is_null() {
            // SAFETY: as above.
            let (height, key) = unsafe { ((*node).height as usize, Node::user_key(node)) };
            if height <= level {
                return Err(format!(
                    "invariant 1: key {key:?} of height {height} at {level}"
                ));
            }
            if let Some(&last) = nodes.last() {
                // SAFETY: as above.
                let last_key = unsafe { Node::user_key(last) };
                if crate::key::compare_user_keys(last_key, key) != std::cmp::Ordering::Less {
                    return Err(format!(
                        "invariant 1: level {level} has {last_key:?} before {key:?}"
                    ));
                }
            }
            nodes.push(node);
            // SAFETY: as above.
            node = unsafe { Node::next(node, level).load(AtomicOrdering::Acquire) };
        }
        Ok(nodes)
    }

    /// Checks the first `limit` versions of `key_node`'s chain (invariant 2; whether it holds
    /// its key node only when walked to the end) and its index entry (invariant 5); returns
    /// the versions walked. With a small limit, cheap enough to run after each insert.
    pub(super) fn check_key_node(
        &self,
        key_node: *const Node,
        limit: usize,
    ) -> Result<usize, String> {
        // SAFETY: a published key node of this memtable; chain nodes are published.
        let user_key = unsafe { Node::user_key(key_node) };
        // SAFETY: as above.
        let mut version = unsafe { Node::versions(key_node).load(AtomicOrdering::Acquire) };
        if version.is_null() {
            return Err(format!("invariant 2: the chain of {user_key:?} is empty"));
        }
        let (mut length, mut holds_key_node, mut previous) = (0usize, false, u64::MAX);
        while !version.is_null() && length < limit {
            // SAFETY: as above.
            let (key, trailer) = unsafe { (Node::user_key(version), Node::trailer(version)) };
            if key != user_key {
                return Err(format!("invariant 2: {key:?} on the chain of {user_key:?}"));
            }
            if length > 0 && trailer >= previous {
                return Err(format!(
                    "invariant 2: the chain of {user_key:?} has trailer {trailer:#x} after \
                     {previous:#x} (not strictly descending)"
                ));
            }
            holds_key_node |= ptr::eq(version, key_node);
            previous = trailer;
            length += 1;
            // SAFETY: as above.
            version = unsafe { Node::older(version).load(AtomicOrdering::Acquire) };
        }
        if version.is_null() && !holds_key_node {
            return Err(format!(
                "invariant 2: the chain of {user_key:?} lost its key node"
            ));
        }
        match self.lookup(user_key, index::hash(user_key)) {
            Lookup::Found(address) if ptr::eq(address as *const Node, key_node) => Ok(length),
            Lookup::Unknown => Ok(length),
            other => Err(format!(
                "invariant 5: the index answers {other:?} for key node {user_key:?}"
            )),
        }
    }

    /// Test hook: puts a new version with `trailer` at the head of `user_key`'s chain without
    /// looking at the order, so a test can break invariant 2 and watch the check fire.
    #[cfg(test)]
    pub(super) fn push_version_unordered(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        let key_node = self.key_node(user_key);
        assert!(!key_node.is_null(), "the key must exist");
        let version = Node::allocate(&self.arena, 0, [user_key, &trailer.to_le_bytes()], value);
        // SAFETY: `version` is ours and initialised; `key_node` is a published key node.
        unsafe {
            let head = Node::versions(key_node).load(AtomicOrdering::Acquire);
            Node::older(version).store(head, AtomicOrdering::Relaxed);
            Node::versions(key_node).store(version, AtomicOrdering::Release);
        }
        self.entry_count.add(1);
    }
}
