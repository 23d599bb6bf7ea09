//! The memtable: a concurrent skiplist of user keys, each heading a chain of its versions, with
//! a hash index over the keys (sLSM §2.2, cLSM §3.1, `FloDB` §3).
//!
//! Each user key has one *key node* in the skiplist; its versions form a singly linked chain,
//! newest first, hanging off the key node. The key node is itself one of the versions (the one
//! whose insert created the key), so a key written once costs one node. A node holds its
//! internal key (user key ++ 8-byte trailer), its value, the link to the next older version
//! and, for a node allocated as a key node, the chain's head and a vertical array ("tower") of
//! next pointers, one per level, all carved from an [`arena::Arena`] in one allocation. A
//! node's height comes from one random word: two bits per level (branching factor 4, as
//! `LevelDB`), i.e. `1 + trailing_zeros(word) / 2`, capped at `MAX_HEIGHT`.
//!
//! Why chains: a read-modify-write of a key already in the memtable reads the newest version
//! and adds a newer one. With one skiplist node per version that is a skiplist search (a chain
//! of dependent cache misses, the largest item in RMW profiles); with chains and the
//! [`index::KeyIndex`] it is a hash probe, one key comparison and a compare-and-swap on the
//! chain head.
//!
//! Where things are: `node` (layout, accessors, heights), `insert` (write path, hints),
//! `search` (index lookups, skiplist searches, point reads), `iter` (the live cursor),
//! `sorted` (gathering for flush), `invariants` (the checks below, under the `invariants`
//! feature: `check_invariants` walks everything; each insert checks its key's chain prefix and
//! index entry).
//!
//! Thread-safety contract: `insert` may run on many threads at once and never blocks; `get`
//! and iterators never block and never write shared memory. Nodes are never removed (a delete
//! is a typed record); all memory is freed when the memtable drops, which the engine arranges
//! only after no reader can hold a reference (readers hold an `Arc<Memtable>`).
//!
//! Invariants:
//! 1. At every level, the skiplist is sorted by user key and holds at most one node per user
//!    key (the key node); every version of a user key is on its key node's chain.
//! 2. A chain is sorted by trailer, descending (newest sequence first), without duplicates, and
//!    never empty: a key node is published with its chain already holding itself.
//! 3. A node is fully initialised (key, value, height, links) before it is published;
//!    publication (skiplist link, chain link, index slot) is a release compare-and-swap, every
//!    traversal an acquire load, so a reader that reaches a node sees its bytes.
//! 4. A key node is linked bottom-up: once it is reachable at level `l` it is reachable at
//!    every level below, so a search that descends never misses it.
//! 5. Before an insert returns, its key node is in the index (or the index is saturated), so
//!    a lookup for a key with a completed version finds its key node or is told to search.
//! 6. `max_height` only grows; levels above it hold only null pointers in the head.
//! 7. Nothing is inserted after `sorted_nodes` gathered the memtable for its flush: a version
//!    inserted later would be missing from the flushed table. Checked (`gathered`, set by
//!    `sorted_nodes`, asserted by every insert) under the `invariants` feature.

pub mod arena;
pub mod index;

mod insert;
#[cfg(any(test, feature = "invariants"))]
mod invariants;
mod iter;
mod multi;
mod node;
mod search;
mod sorted;
#[cfg(test)]
mod tests;

pub use insert::InsertHint;
pub use iter::MemtableIterator;
pub use iter::MemtableOwner;
pub(crate) use multi::BatchEntry;
pub use sorted::SortedNodes;

use crate::key::{SequenceNumber, ValueKind};
use arena::Arena;
use index::KeyIndex;
use node::Node;
use std::sync::atomic::AtomicUsize;

/// A version found in a memtable: its sequence, kind and value.
pub type Entry<'a> = (SequenceNumber, ValueKind, &'a [u8]);

/// Highest tower (4^12 ≈ 16.7 M keys before the top level stops thinning out).
pub const MAX_HEIGHT: usize = 12;

/// Default arena chunk size.
const CHUNK_BYTES_DEFAULT: usize = 1 << 20;

/// Capacity a memtable is sized for when the caller does not say (the default write buffer).
const CAPACITY_BYTES_DEFAULT: usize = 64 << 20;

/// Index slots per byte of capacity: one per 64 bytes keeps the index under half full for
/// nodes of ~130 bytes and more (16-byte keys, 100-byte values), and costs 1/8 of the capacity
/// in (lazily supplied) memory. Smaller entries fill it sooner; past its probe limit the index
/// saturates and lookups fall back to the skiplist.
const CAPACITY_BYTES_PER_INDEX_SLOT: usize = 64;

/// Index slots at most (128 MiB of slots).
const INDEX_SLOTS_MAX: usize = 1 << 24;

/// The concurrent skiplist memtable. See the module documentation.
pub struct Memtable {
    arena: Arena,
    head: *mut Node,
    max_height: AtomicUsize,
    index: KeyIndex,
    entry_count: crate::sync::StripedCounter,
    /// Unit tests widen the window between linking a new key node and publishing it in the
    /// index (a race-widening hook).
    #[cfg(test)]
    delay_publish: std::sync::atomic::AtomicBool,
    /// Set once `sorted_nodes` gathered it (invariant 7).
    #[cfg(any(test, feature = "invariants"))]
    gathered: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Memtable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Memtable")
            .field("entries", &self.len())
            .field("bytes", &self.approximate_memory_bytes())
            .field("index", &self.index)
            .finish()
    }
}

// SAFETY: all shared mutable state is reached through atomics (links, index slots, counters)
// and the arena, which is Send + Sync; node bytes are immutable after publication (invariant 3).
unsafe impl Send for Memtable {}
// SAFETY: as above.
unsafe impl Sync for Memtable {}

impl Default for Memtable {
    fn default() -> Self {
        Self::new()
    }
}

impl Memtable {
    /// An empty memtable sized for the default write buffer (64 MiB).
    pub fn new() -> Memtable {
        Self::with_chunk_bytes(CHUNK_BYTES_DEFAULT)
    }

    /// An empty memtable whose arena carves chunks of `chunk_bytes`, with an index sized for
    /// the default write buffer.
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Memtable {
        Self::with_sizes(
            chunk_bytes,
            CAPACITY_BYTES_DEFAULT / CAPACITY_BYTES_PER_INDEX_SLOT,
        )
    }

    /// An empty memtable meant to hold about `capacity_bytes` of nodes: arena chunks of an
    /// eighth of it (4 KiB to 1 MiB, so small memtables do not hold a megabyte each) and an
    /// index of one slot per `CAPACITY_BYTES_PER_INDEX_SLOT` bytes.
    pub fn with_capacity(capacity_bytes: usize) -> Memtable {
        Self::with_sizes(
            (capacity_bytes / 8).clamp(4096, CHUNK_BYTES_DEFAULT),
            (capacity_bytes / CAPACITY_BYTES_PER_INDEX_SLOT).min(INDEX_SLOTS_MAX),
        )
    }

    /// An empty memtable with explicit arena chunk size and index slot count (rounded up to a
    /// power of two, at least 8).
    pub fn with_sizes(chunk_bytes: usize, index_slots: usize) -> Memtable {
        let arena = Arena::new(chunk_bytes);
        let head = Node::allocate(&arena, MAX_HEIGHT, [&[], &[]], &[]);
        Memtable {
            arena,
            head,
            max_height: AtomicUsize::new(1),
            index: KeyIndex::new(index_slots.min(INDEX_SLOTS_MAX)),
            entry_count: crate::sync::StripedCounter::default(),
            #[cfg(test)]
            delay_publish: std::sync::atomic::AtomicBool::new(false),
            #[cfg(any(test, feature = "invariants"))]
            gathered: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Race-widening hook: while on, an insert that links a new key node yields for a while
    /// before publishing it in the key index, so tests hit the window in which the node is
    /// findable by search but not yet through the index (invariant 5's hard case).
    #[cfg(test)]
    pub fn widen_publish_window(&self, on: bool) {
        self.delay_publish
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes allocated for nodes, lagging the exact figure by a few KiB per arena lane
    /// (decides when the memtable is full). One load of a rarely written word.
    pub fn approximate_memory_bytes(&self) -> usize {
        self.arena.published_bytes()
    }

    /// Exact arena bytes (reads every arena lane; for reports and tests). The index's slots
    /// are not included: see [`Memtable::index_memory_bytes`].
    pub fn memory_bytes(&self) -> usize {
        self.arena.allocated_bytes()
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes of the key index (allocated up front, supplied by the system as touched).
    pub fn index_memory_bytes(&self) -> usize {
        self.index.memory_bytes()
    }

    #[cfg(any(test, feature = "testing"))]
    /// True if the key index overflowed and lookups search the skiplist (see [`index`]).
    pub fn index_saturated(&self) -> bool {
        self.index.is_saturated()
    }

    /// Invariant 7: panics if the memtable was already gathered for its flush (only with the
    /// `invariants` feature; the caller is about to insert).
    #[inline]
    fn check_not_gathered(&self) {
        #[cfg(any(test, feature = "invariants"))]
        assert!(
            !self.gathered.load(std::sync::atomic::Ordering::SeqCst),
            "invariant 7: an insert into a memtable its flush already gathered (a lost write)"
        );
    }

    /// Number of entries (versions).
    pub fn len(&self) -> usize {
        usize::try_from(self.entry_count.get()).unwrap_or(usize::MAX)
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
