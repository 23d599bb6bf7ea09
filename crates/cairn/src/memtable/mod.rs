//! The memtable: a concurrent skiplist of user keys, each heading a chain of its versions, with
//! a hash index over the keys (sLSM §2.2, cLSM §3.1, FloDB §3).
//!
//! Each user key has one *key node* in the skiplist; its versions form a singly linked chain,
//! newest first, hanging off the key node. The key node is itself one of the versions (the one
//! whose insert created the key), so a key written once costs one node. A node holds its
//! internal key (user key ++ 8-byte trailer), its value, the link to the next older version
//! and, for a node allocated as a key node, the chain's head and a vertical array ("tower") of
//! next pointers, one per level, all carved from an [`arena::Arena`] in one allocation. A
//! node's height comes from one random word: two bits per level (branching factor 4, as
//! LevelDB), i.e. `1 + trailing_zeros(word) / 2`, capped at `MAX_HEIGHT`.
//!
//! Why chains: a read-modify-write of a key already in the memtable reads the newest version
//! and adds a newer one. With one skiplist node per version that is a skiplist search (a chain
//! of dependent cache misses, the largest item in RMW profiles); with chains and the
//! [`index::KeyIndex`] it is a hash probe, one key comparison and a compare-and-swap on the
//! chain head.
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

pub mod arena;
pub mod index;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, trailer, user_key, SequenceNumber, ValueKind, TRAILER_BYTES};
use arena::Arena;
use index::{KeyIndex, Lookup};
use std::cell::Cell;
use std::cmp::Ordering;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// A version found in a memtable: its sequence, kind and value.
pub type Entry<'a> = (SequenceNumber, ValueKind, &'a [u8]);

/// Highest tower (4^12 ≈ 16.7 M keys before the top level stops thinning out).
pub const MAX_HEIGHT: usize = 12;

/// Bytes of the fixed node header: key length, value length, height, padding (u32 each), then
/// the link to the next older version.
const NODE_HEADER_BYTES: usize = 24;

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

#[repr(C)]
struct Node {
    key_length: u32,
    value_length: u32,
    /// Tower levels; 0 for a node allocated only as a version.
    height: u32,
    _padding: u32,
    /// The next older version of the same user key (invariant 2).
    older: AtomicPtr<Node>,
    // if height > 0: the chain head (AtomicPtr<Node>), then `height` tower slots;
    // then key bytes, then value bytes
}

/// Words of links after the header: the chain head and the tower, for a key node.
#[inline]
fn link_words(height: usize) -> usize {
    if height == 0 {
        0
    } else {
        height + 1
    }
}

impl Node {
    /// The tower slot for `level`.
    ///
    /// # Safety
    /// `node` must point to a live, initialised node and `level < height`.
    #[inline]
    unsafe fn next(node: *const Node, level: usize) -> &'static AtomicPtr<Node> {
        // SAFETY: the tower starts one word after the header (after the chain head), 8-aligned
        // (arena alignment), and has `height` slots; the caller guarantees `level < height`.
        // The 'static lifetime is a lie the callers keep honest: they never outlive the
        // memtable.
        unsafe {
            let tower = (node as *const u8).add(NODE_HEADER_BYTES + 8) as *const AtomicPtr<Node>;
            &*tower.add(level)
        }
    }

    /// The head of the version chain of a key node.
    ///
    /// # Safety
    /// `node` must point to a live, initialised node with `height > 0`.
    #[inline]
    unsafe fn versions(node: *const Node) -> &'static AtomicPtr<Node> {
        // SAFETY: a node with a tower has the chain head right after the header.
        unsafe { &*((node as *const u8).add(NODE_HEADER_BYTES) as *const AtomicPtr<Node>) }
    }

    /// The link to the next older version.
    ///
    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    unsafe fn older(node: *const Node) -> &'static AtomicPtr<Node> {
        // SAFETY: a field of the header, which every node has.
        unsafe { &(*node).older }
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the key follows the links; its length was written before publication.
        unsafe {
            let header = &*node;
            let start = (node as *const u8).add(
                NODE_HEADER_BYTES
                    + link_words(header.height as usize) * std::mem::size_of::<usize>(),
            );
            std::slice::from_raw_parts(start, header.key_length as usize)
        }
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the value follows the key inside the same allocation.
        unsafe {
            let header = &*node;
            let key = Node::key(node);
            std::slice::from_raw_parts(key.as_ptr().add(key.len()), header.value_length as usize)
        }
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    unsafe fn user_key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: as `key`.
        user_key(unsafe { Node::key(node) })
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    unsafe fn trailer(node: *const Node) -> u64 {
        // SAFETY: as `key`.
        trailer(unsafe { Node::key(node) })
    }

    /// The last (oldest) version of a chain starting at `version`.
    ///
    /// # Safety
    /// `version` must point to a live, initialised node.
    unsafe fn oldest(mut version: *const Node) -> *const Node {
        loop {
            // SAFETY: the caller's node, then nodes reached through acquire loads of links.
            let older = unsafe { Node::older(version).load(AtomicOrdering::Acquire) };
            if older.is_null() {
                return version;
            }
            version = older;
        }
    }
}

thread_local! {
    static RANDOM_STATE: Cell<u64> = Cell::new({
        // Seed per thread from std's randomly keyed hasher; only the distribution matters.
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(&hasher as *const _ as usize);
        hasher.finish() | 1
    });
}

/// One random word per call (xorshift64*), per thread: no shared RNG state.
fn random_word() -> u64 {
    RANDOM_STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// Hints the processor to fetch the first cache line of `node` (a no-op on a null pointer
/// and on architectures without a stable prefetch instruction).
#[inline(always)]
fn prefetch(node: *const Node) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, even on an invalid address, and
    // changes no program state.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(node as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

/// A random height: level `h` with probability (1/4)^(h-1) · 3/4, from one random word.
fn random_height() -> usize {
    let height = 1 + (random_word().trailing_zeros() as usize) / 2;
    height.min(MAX_HEIGHT)
}

/// The concurrent skiplist memtable. See the module documentation.
pub struct Memtable {
    arena: Arena,
    head: *mut Node,
    max_height: AtomicUsize,
    index: KeyIndex,
    entry_count: crate::sync::StripedCounter,
    /// Tests widen the window between linking a new key node and publishing it in the index.
    #[cfg(test)]
    delay_publish: std::sync::atomic::AtomicBool,
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

/// Where a search for a key node ended.
enum Search {
    /// The key node of the user key.
    Found(*const Node),
    /// No key node: at each level, the last node before the key and the first after it.
    Absent {
        before: [*const Node; MAX_HEIGHT],
        after: [*const Node; MAX_HEIGHT],
    },
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
        let head = Self::allocate_node(&arena, MAX_HEIGHT, [&[], &[]], &[]);
        Memtable {
            arena,
            head,
            max_height: AtomicUsize::new(1),
            index: KeyIndex::new(index_slots.min(INDEX_SLOTS_MAX)),
            entry_count: crate::sync::StripedCounter::default(),
            #[cfg(test)]
            delay_publish: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Allocates and initialises an unpublished node holding `key_parts` concatenated (the
    /// user key and the trailer, written in place so an insert allocates nothing else). A node
    /// with a tower starts as the only version of its own chain.
    fn allocate_node(
        arena: &Arena,
        height: usize,
        key_parts: [&[u8]; 2],
        value: &[u8],
    ) -> *mut Node {
        debug_assert!(height <= MAX_HEIGHT);
        let key_length = key_parts[0].len() + key_parts[1].len();
        let links_bytes = link_words(height) * std::mem::size_of::<usize>();
        let size = NODE_HEADER_BYTES + links_bytes + key_length + value.len();
        let node = arena.allocate(size) as *mut Node;
        // SAFETY: `node` points to `size` fresh bytes, 8-aligned (arena invariant 1): room
        // for the header, the links and both byte strings. Nothing else sees it yet.
        unsafe {
            node.write(Node {
                key_length: key_length as u32,
                value_length: value.len() as u32,
                height: height as u32,
                _padding: 0,
                older: AtomicPtr::new(ptr::null_mut()),
            });
            let links = (node as *mut u8).add(NODE_HEADER_BYTES) as *mut AtomicPtr<Node>;
            if height > 0 {
                links.write(AtomicPtr::new(node));
            }
            for level in 0..height {
                links.add(1 + level).write(AtomicPtr::new(ptr::null_mut()));
            }
            let mut cursor = (node as *mut u8).add(NODE_HEADER_BYTES + links_bytes);
            for part in key_parts.iter().chain(std::iter::once(&value)) {
                ptr::copy_nonoverlapping(part.as_ptr(), cursor, part.len());
                cursor = cursor.add(part.len());
            }
        }
        node
    }

    /// Inserts one version. Precondition: `(user_key, sequence)` was never inserted before.
    /// Safe to call from many threads at once; never blocks.
    pub fn insert(&self, user_key: &[u8], sequence: SequenceNumber, kind: ValueKind, value: &[u8]) {
        self.insert_hinted(None, user_key, sequence, kind, value);
    }

    /// `insert`, using what [`Memtable::get_entry_hinted`] on this memtable found for the same
    /// user key: the key node (the version joins its chain, no search at all) or, when the
    /// index could not answer, the search path (the skiplist search starts there). A hint from
    /// another memtable or for another key is ignored, never trusted.
    pub fn insert_hinted(
        &self,
        hint: Option<&InsertHint<'_>>,
        user_key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) {
        debug_assert!(user_key.len() <= crate::key::KEY_BYTES_MAX);
        debug_assert!(value.len() <= crate::key::VALUE_BYTES_MAX);
        let trailer_bytes: [u8; TRAILER_BYTES] =
            crate::key::pack_trailer(sequence, kind).to_le_bytes();
        let hint = hint.filter(|hint| ptr::eq(hint.memtable, self) && hint.user_key == user_key);
        let hash = hint.map_or_else(|| index::hash(user_key), |hint| hint.hash);
        let known = match hint {
            Some(hint) if !hint.key_node.is_null() => Some((hint.key_node, hint.indexed)),
            _ => match self.lookup(user_key, hash) {
                Lookup::Found(address) => Some((address as *const Node, true)),
                Lookup::Absent | Lookup::Unknown => None,
            },
        };
        if let Some((key_node, indexed)) = known {
            let version = Self::allocate_node(&self.arena, 0, [user_key, &trailer_bytes], value);
            self.link_version(key_node, version);
            if !indexed {
                // Found by search: its creator may not have published it yet, and our write
                // completes now (invariant 5).
                self.index.publish(hash, key_node as usize);
            }
            self.entry_count.add(1);
            return;
        }
        let height = random_height();
        let node = Self::allocate_node(&self.arena, height, [user_key, &trailer_bytes], value);
        let path = hint.and_then(|hint| hint.path.as_ref());
        let key_node = match self.link_key_node(node, user_key, height, path) {
            None => {
                #[cfg(test)]
                if self.delay_publish.load(AtomicOrdering::Relaxed) {
                    for _ in 0..20 {
                        std::thread::yield_now();
                    }
                }
                node as *const Node
            }
            Some(existing) => {
                // Another insert created the key first: ours is just a version (its tower
                // stays unused) and the key node may not be in the index yet — its creator
                // can still be on its way there, while our write completes now (invariant 5).
                self.link_version(existing, node);
                existing
            }
        };
        self.index.publish(hash, key_node as usize);
        self.entry_count.add(1);
    }

    /// Looks the key node of `user_key` up in the index.
    #[inline]
    fn lookup(&self, user_key: &[u8], hash: u64) -> Lookup {
        self.index.find(hash, |address| {
            // SAFETY: the index holds only published key nodes of this memtable (invariant 3).
            unsafe { Node::user_key(address as *const Node) == user_key }
        })
    }

    /// Adds `version` to `key_node`'s chain at its place by trailer (invariant 2).
    fn link_version(&self, key_node: *const Node, version: *mut Node) {
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
    fn link_key_node(
        &self,
        node: *mut Node,
        user_key: &[u8],
        height: usize,
        path: Option<&[*const Node; MAX_HEIGHT]>,
    ) -> Option<*const Node> {
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
        let (mut before, mut after) = match path {
            Some(path) => {
                // Each path node precedes the key (nodes are never removed, so it stays
                // before it), so it is a valid start at its level; only nodes inserted since
                // the read lie between it and the splice.
                let mut before = [self.head as *const Node; MAX_HEIGHT];
                let mut after = [ptr::null::<Node>(); MAX_HEIGHT];
                for level in (0..height).rev() {
                    let start = path.get(level).copied().unwrap_or(self.head);
                    let (found_before, found_after, equal) =
                        self.find_splice(user_key, start, level, ptr::null());
                    if equal {
                        return Some(found_after);
                    }
                    before[level] = found_before;
                    after[level] = found_after;
                }
                (before, after)
            }
            None => match self.search(user_key, max_height.max(height)) {
                Search::Found(existing) => return Some(existing),
                Search::Absent { before, after } => (before, after),
            },
        };
        // Link bottom-up (invariant 4). Level 0 decides: once linked there the key is ours.
        for level in 0..height {
            loop {
                // SAFETY: `node` is ours and has `height` levels; `before[level]` is the head
                // or a published node whose height exceeds `level` (it was found at `level`).
                unsafe {
                    Node::next(node, level)
                        .store(after[level] as *mut Node, AtomicOrdering::Relaxed);
                    if Node::next(before[level], level)
                        .compare_exchange(
                            after[level] as *mut Node,
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
                    self.find_splice(user_key, before[level], level, ptr::null());
                if equal {
                    // Only possible before our level-0 link: above it the key is ours.
                    debug_assert_eq!(level, 0);
                    return Some(found_after);
                }
                before[level] = found_before;
                after[level] = found_after;
            }
        }
        None
    }

    /// Top-down search for the key node of `user_key` from `height` levels: the node, or the
    /// splice where it would go.
    fn search(&self, user_key: &[u8], height: usize) -> Search {
        let mut before = [self.head as *const Node; MAX_HEIGHT];
        let mut after = [ptr::null::<Node>(); MAX_HEIGHT];
        let mut start = self.head as *const Node;
        let mut known_not_before = ptr::null::<Node>();
        for level in (0..height.min(MAX_HEIGHT)).rev() {
            let (found_before, found_after, equal) =
                self.find_splice(user_key, start, level, known_not_before);
            if equal {
                return Search::Found(found_after);
            }
            before[level] = found_before;
            after[level] = found_after;
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
    fn find_splice(
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
    fn find_greater_or_equal(&self, user_key: &[u8]) -> *const Node {
        let mut current = self.head as *const Node;
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
    fn find_less_than(&self, user_key: Option<&[u8]>) -> *const Node {
        let mut current = self.head as *const Node;
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
    fn key_node(&self, user_key: &[u8]) -> *const Node {
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
    fn version_at_or_below(key_node: *const Node, trailer: u64) -> *const Node {
        // SAFETY: a published key node; chain nodes are published (invariant 3).
        unsafe {
            let mut version = Node::versions(key_node).load(AtomicOrdering::Acquire);
            while !version.is_null() && Node::trailer(version) > trailer {
                version = Node::older(version).load(AtomicOrdering::Acquire);
            }
            version
        }
    }

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
    fn entry(&self, version: *const Node) -> Option<Entry<'_>> {
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

    /// Bytes of the key index (allocated up front, supplied by the system as touched).
    pub fn index_memory_bytes(&self) -> usize {
        self.index.memory_bytes()
    }

    /// True if the key index overflowed and lookups search the skiplist (see [`index`]).
    pub fn index_saturated(&self) -> bool {
        self.index.is_saturated()
    }

    /// Number of entries (versions).
    pub fn len(&self) -> usize {
        self.entry_count.get() as usize
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A cursor that keeps the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemtableIterator {
        MemtableIterator {
            memtable: Arc::clone(self),
            key_node: ptr::null(),
            version: ptr::null(),
            newer: Vec::new(),
            newer_than: ptr::null(),
        }
    }

    /// Every version in internal-key order, gathered with `GATHER_WALKS` independent walks
    /// in flight.
    ///
    /// Walking level 0 is a chain of dependent cache misses (nodes sit in the arena in
    /// allocation order, not key order): one miss per key, twice per flush (the Bloom
    /// filter, then the table). Here the nodes of one upper level cut level 0 into segments
    /// of about `4^GATHER_LEVEL` key nodes, and the walks of many segments are interleaved, so
    /// their misses overlap; each key node's versions are appended as it is reached. The
    /// result is a snapshot: meant for a sealed, quiet memtable (the flush checks `len`
    /// against the memtable's before it trusts one).
    pub fn sorted_nodes(self: &Arc<Self>) -> SortedNodes {
        let expected = self.len();
        let level = self
            .max_height
            .load(AtomicOrdering::Acquire)
            .min(GATHER_LEVEL + 1)
            - 1;
        // SAFETY: the head has MAX_HEIGHT levels; every node reached is published
        // (invariant 3) and lives as long as `self`.
        let first = unsafe { Node::next(self.head, 0).load(AtomicOrdering::Acquire) };
        let mut starts: Vec<*const Node> = Vec::new();
        if level > 0 {
            // SAFETY: as above; a node linked at `level` has a tower slot for it.
            let mut node = unsafe { Node::next(self.head, level).load(AtomicOrdering::Acquire) };
            while !node.is_null() {
                starts.push(node);
                // SAFETY: as above.
                node = unsafe { Node::next(node, level).load(AtomicOrdering::Acquire) };
            }
        }
        // Segment `i` runs from its begin (the first node, or `starts[i - 1]`) up to, not
        // including, `starts[i]` (null for the last). Invariant 4: every start is on level
        // 0 after the previous one, so each walk ends at its end.
        let segment_count = starts.len() + 1;
        let begin = |segment: usize| -> *const Node {
            match segment.checked_sub(1) {
                None => first,
                Some(index) => starts.get(index).copied().unwrap_or(ptr::null()),
            }
        };
        let end = |segment: usize| starts.get(segment).copied().unwrap_or(ptr::null());
        let segment_capacity = (expected / segment_count).saturating_mul(2).max(4);
        let mut outputs: Vec<Vec<*const Node>> = Vec::with_capacity(segment_count);
        outputs.resize_with(segment_count, Vec::new);
        let mut walks: Vec<Walk> = Vec::with_capacity(GATHER_WALKS);
        let mut next_segment = 0;
        loop {
            while walks.len() < GATHER_WALKS && next_segment < segment_count {
                walks.push(Walk {
                    segment: next_segment,
                    node: begin(next_segment),
                    end: end(next_segment),
                });
                next_segment += 1;
            }
            if walks.is_empty() {
                break;
            }
            let mut index = 0;
            while let Some(walk) = walks.get_mut(index) {
                if walk.node.is_null() || walk.node == walk.end {
                    walks.swap_remove(index);
                    continue;
                }
                if let Some(output) = outputs.get_mut(walk.segment) {
                    if output.capacity() == 0 {
                        output.reserve(segment_capacity);
                    }
                    // SAFETY: a published key node of this memtable; its chain's nodes are
                    // published (invariant 3).
                    unsafe {
                        let mut version = Node::versions(walk.node).load(AtomicOrdering::Acquire);
                        while !version.is_null() {
                            output.push(version);
                            version = Node::older(version).load(AtomicOrdering::Acquire);
                        }
                    }
                }
                // SAFETY: a published node of this memtable with at least one level.
                let next = unsafe { Node::next(walk.node, 0).load(AtomicOrdering::Acquire) };
                prefetch(next);
                walk.node = next;
                index += 1;
            }
        }
        let total = outputs.iter().map(Vec::len).sum();
        let mut nodes = Vec::with_capacity(total);
        for output in outputs {
            nodes.extend_from_slice(&output);
        }
        SortedNodes {
            memtable: Arc::clone(self),
            nodes,
        }
    }
}

/// Upper level (0-based) whose nodes cut level 0 into segments for `sorted_nodes`: about
/// 4^3 = 64 nodes per segment, so reading the level costs 1/64 of the walk.
const GATHER_LEVEL: usize = 3;

/// Walks `sorted_nodes` keeps in flight (enough to cover a memory latency with the work of
/// the others, few enough to stay in the processor's load buffers).
const GATHER_WALKS: usize = 16;

/// How far ahead of a cursor over `SortedNodes` nodes are prefetched.
const PREFETCH_DISTANCE: usize = 8;

/// One interleaved walk of `sorted_nodes`.
struct Walk {
    segment: usize,
    node: *const Node,
    end: *const Node,
}

/// A memtable's nodes in key order (see [`Memtable::sorted_nodes`]); keeps the memtable alive.
pub struct SortedNodes {
    memtable: Arc<Memtable>,
    nodes: Vec<*const Node>,
}

impl std::fmt::Debug for SortedNodes {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SortedNodes")
            .field("entries", &self.nodes.len())
            .finish()
    }
}

// SAFETY: the pointers refer to published nodes of the memtable this value keeps alive; node
// bytes are immutable after publication (invariant 3), so sharing or moving them is sound.
unsafe impl Send for SortedNodes {}
// SAFETY: as above; nothing here is mutated after construction.
unsafe impl Sync for SortedNodes {}

/// Prefetches the cache lines a cursor reads of `node`: header and key, then the value.
#[inline(always)]
fn prefetch_entry(node: Option<&*const Node>) {
    if let Some(&node) = node {
        prefetch(node);
        prefetch((node as *const u8).wrapping_add(64) as *const Node);
        prefetch((node as *const u8).wrapping_add(128) as *const Node);
    }
}

impl SortedNodes {
    /// Number of entries gathered.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if nothing was gathered.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The memtable the nodes belong to.
    pub fn memtable(&self) -> &Arc<Memtable> {
        &self.memtable
    }

    /// Calls `visit` with every internal key in order, prefetching ahead.
    pub fn for_each_key(&self, mut visit: impl FnMut(&[u8])) {
        for (index, &node) in self.nodes.iter().enumerate() {
            if let Some(&ahead) = self.nodes.get(index + PREFETCH_DISTANCE) {
                prefetch(ahead);
            }
            // SAFETY: a published node of the memtable `self` keeps alive.
            visit(unsafe { Node::key(node) });
        }
    }

    /// A cursor over the gathered entries.
    pub fn iter(self: &Arc<Self>) -> SortedNodesIterator {
        SortedNodesIterator {
            sorted: Arc::clone(self),
            index: self.nodes.len(),
        }
    }
}

/// A cursor over [`SortedNodes`]: the flush's input. Unlike [`MemtableIterator`] it sees only
/// what was gathered, and its steps are independent loads the processor can overlap.
#[derive(Debug)]
pub struct SortedNodesIterator {
    sorted: Arc<SortedNodes>,
    /// `nodes.len()` when not valid.
    index: usize,
}

impl SortedNodesIterator {
    fn node(&self) -> Option<*const Node> {
        self.sorted.nodes.get(self.index).copied()
    }
}

impl InternalIterator for SortedNodesIterator {
    fn valid(&self) -> bool {
        self.index < self.sorted.nodes.len()
    }

    fn seek_to_first(&mut self) {
        self.index = 0;
        for ahead in 0..PREFETCH_DISTANCE {
            prefetch_entry(self.sorted.nodes.get(ahead));
        }
    }

    fn seek_to_last(&mut self) {
        let length = self.sorted.nodes.len();
        self.index = length.checked_sub(1).unwrap_or(length);
    }

    fn seek(&mut self, target: &[u8]) {
        self.index = self.sorted.nodes.partition_point(|&node| {
            // SAFETY: a published node of the memtable `sorted` keeps alive.
            let key = unsafe { Node::key(node) };
            crate::key::compare_internal_keys(key, target) == Ordering::Less
        });
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if self.valid() {
            self.index += 1;
            prefetch_entry(self.sorted.nodes.get(self.index + PREFETCH_DISTANCE));
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        self.index = match self.index.checked_sub(1) {
            Some(index) if self.valid() => index,
            _ => self.sorted.nodes.len(),
        };
    }

    fn key(&self) -> &[u8] {
        match self.node() {
            // SAFETY: a published node of the memtable `sorted` keeps alive.
            Some(node) => unsafe { Node::key(node) },
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.node() {
            // SAFETY: as above.
            Some(node) => unsafe { Node::value(node) },
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// What [`Memtable::get_entry_hinted`] found for a key, for the insert of its next version:
/// the key node or, when the key has none, at each level the last node before the key.
/// Borrowing the memtable keeps those nodes alive; an insert checks that the hint is its own
/// memtable's and for its key before using it.
pub struct InsertHint<'a> {
    memtable: &'a Memtable,
    user_key: &'a [u8],
    /// The key node, or null.
    key_node: *const Node,
    /// True if `key_node` came from the index; one found by search may not be published yet,
    /// so the insert that uses it publishes it.
    indexed: bool,
    path: Option<[*const Node; MAX_HEIGHT]>,
    /// `index::hash(user_key)`, so the insert does not hash the key again.
    hash: u64,
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

/// A cursor over a memtable's versions in internal-key order. It sees every entry inserted
/// before it was created, and may see later ones too (the skiplist and the chains are
/// concurrent), which the database iterator filters by sequence number.
pub struct MemtableIterator {
    memtable: Arc<Memtable>,
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

impl std::fmt::Debug for MemtableIterator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemtableIterator")
            .field("valid", &!self.version.is_null())
            .finish()
    }
}

// SAFETY: the node pointers refer into the memtable the iterator keeps alive through its
// `Arc`; node bytes are immutable and links are atomics, so moving the cursor to another
// thread is sound.
unsafe impl Send for MemtableIterator {}

impl MemtableIterator {
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

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        !self.version.is_null()
    }

    fn seek_to_first(&mut self) {
        // SAFETY: the head has MAX_HEIGHT levels.
        let first = unsafe { Node::next(self.memtable.head, 0).load(AtomicOrdering::Acquire) };
        self.at_newest(first);
    }

    fn seek_to_last(&mut self) {
        let last = self.memtable.find_less_than(None);
        self.at_oldest(last);
    }

    fn seek(&mut self, target: &[u8]) {
        let target_user_key = user_key(target);
        let key_node = self.memtable.find_greater_or_equal(target_user_key);
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
        let before = self.memtable.find_less_than(Some(current_user_key));
        self.at_oldest(before);
    }

    fn key(&self) -> &[u8] {
        if self.version.is_null() {
            return &[];
        }
        // SAFETY: a published node of the memtable this iterator keeps alive.
        unsafe { Node::key(self.version) }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::test_support::{collect_backward, collect_forward};
    use crate::key::{compare_internal_keys, internal_key};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// A memtable constructor taking the arena chunk size.
    type MakeMemtable = fn(usize) -> Memtable;

    /// Memtables whose key index answers throughout, saturates part-way, or saturates at
    /// once (lookups then search the skiplist): every behaviour must be the same.
    const INDEX_MODES: [(&str, MakeMemtable); 3] = [
        ("roomy index", |chunk_bytes| {
            Memtable::with_chunk_bytes(chunk_bytes)
        }),
        ("small index", |chunk_bytes| {
            Memtable::with_sizes(chunk_bytes, 256)
        }),
        ("tiny index", |chunk_bytes| {
            Memtable::with_sizes(chunk_bytes, 8)
        }),
    ];

    /// Oracle keyed so BTreeMap order equals internal-key order.
    fn oracle_key(user: &[u8], sequence: u64) -> (Vec<u8>, std::cmp::Reverse<u64>) {
        (user.to_vec(), std::cmp::Reverse(sequence))
    }

    #[test]
    fn heights_follow_a_geometric_distribution() {
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for _ in 0..100_000 {
            counts[random_height()] += 1;
        }
        assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
        assert!((16_000..21_000).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn matches_an_oracle_in_order_get_seek_and_prev() {
        for (mode, make) in INDEX_MODES {
            eprintln!("{mode}");
            matches_an_oracle_in_order_get_seek_and_prev_with(make(4096));
        }
    }

    fn matches_an_oracle_in_order_get_seek_and_prev_with(memtable: Memtable) {
        let memtable = Arc::new(memtable);
        let mut rng = SmallRng::seed_from_u64(11);
        let mut oracle = BTreeMap::new();
        for sequence in 1..=5000u64 {
            let user: Vec<u8> = match rng.gen_range(0..4) {
                0 => Vec::new(),
                1 => vec![b'a'; rng.gen_range(1..4)],
                _ => format!("k{}", rng.gen_range(0..300)).into_bytes(),
            };
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value: Vec<u8> = (0..rng.gen_range(0..50)).map(|_| rng.gen()).collect();
            memtable.insert(&user, sequence, kind, &value);
            oracle.insert(oracle_key(&user, sequence), (kind, value));
        }
        assert_eq!(memtable.len(), 5000);
        let expected: Vec<(Vec<u8>, Vec<u8>)> = oracle
            .iter()
            .map(|((user, sequence), (kind, value))| {
                (internal_key(user, sequence.0, *kind), value.clone())
            })
            .collect();
        let mut iterator = memtable.iter();
        assert_eq!(collect_forward(&mut iterator).unwrap(), expected);
        assert_eq!(collect_backward(&mut iterator).unwrap(), expected);
        for _ in 0..2000 {
            let user = format!("k{}", rng.gen_range(0..300)).into_bytes();
            let snapshot = rng.gen_range(0..5200);
            let want = oracle
                .range(oracle_key(&user, snapshot)..)
                .next()
                .filter(|((found, _), _)| *found == user)
                .map(|(_, (kind, value))| (*kind, value.as_slice()));
            assert_eq!(memtable.get(&user, snapshot), want);
            let target = internal_key(&user, snapshot, ValueKind::SEEK);
            iterator.seek(&target);
            let position = expected
                .partition_point(|(key, _)| compare_internal_keys(key, &target) == Ordering::Less);
            match expected.get(position) {
                Some((key, _)) => assert_eq!(iterator.key(), key.as_slice()),
                None => assert!(!iterator.valid()),
            }
        }
    }

    #[test]
    fn values_larger_than_a_chunk_work() {
        let memtable = Memtable::with_chunk_bytes(4096);
        let big = vec![9u8; 100_000];
        memtable.insert(b"big", 1, ValueKind::Put, &big);
        memtable.insert(b"small", 2, ValueKind::Put, b"x");
        assert_eq!(
            memtable.get(b"big", 5),
            Some((ValueKind::Put, big.as_slice()))
        );
        assert_eq!(memtable.get(b"small", 5), Some((ValueKind::Put, &b"x"[..])));
        assert!(memtable.memory_bytes() >= 100_000);
    }

    #[test]
    fn concurrent_inserts_with_concurrent_readers() {
        for (mode, make) in INDEX_MODES {
            for key_space in [20_000, 50] {
                eprintln!("{mode}, {key_space} keys");
                concurrent_inserts_with_concurrent_readers_with(make(64 * 1024), key_space);
            }
        }
    }

    fn concurrent_inserts_with_concurrent_readers_with(memtable: Memtable, key_space: u64) {
        const WRITERS: u64 = 4;
        const PER_WRITER: u64 = 25_000;
        let memtable = Arc::new(memtable);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let memtable = Arc::clone(&memtable);
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut passes = 0;
                    while !done.load(AtomicOrdering::Acquire) || passes == 0 {
                        let mut iterator = memtable.iter();
                        iterator.seek_to_first();
                        let mut previous: Option<Vec<u8>> = None;
                        while iterator.valid() {
                            let key = iterator.key().to_vec();
                            if let Some(previous) = &previous {
                                assert_eq!(compare_internal_keys(previous, &key), Ordering::Less);
                            }
                            let parsed = parse_internal_key(&key).unwrap();
                            // value = sequence, so every read is checkable
                            assert_eq!(iterator.value(), &parsed.sequence.to_le_bytes());
                            previous = Some(key);
                            iterator.next();
                        }
                        passes += 1;
                    }
                    passes
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let memtable = Arc::clone(&memtable);
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(writer);
                    for index in 0..PER_WRITER {
                        let sequence = writer * PER_WRITER + index + 1;
                        let user = format!("key{:05}", rng.gen_range(0..key_space)).into_bytes();
                        let value = sequence.to_le_bytes();
                        if index % 2 == 0 {
                            memtable.insert(&user, sequence, ValueKind::Put, &value);
                        } else {
                            // Hinted, as read-modify-write inserts: the hint goes stale while
                            // the other writers insert (possibly the same key) in between.
                            let (_, hint) = memtable.get_entry_hinted(&user);
                            memtable.insert_hinted(
                                Some(&hint),
                                &user,
                                sequence,
                                ValueKind::Put,
                                &value,
                            );
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, AtomicOrdering::Release);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
        let total = WRITERS * PER_WRITER;
        assert_eq!(memtable.len() as u64, total);
        let mut iterator = memtable.iter();
        iterator.seek_to_first();
        let mut seen = std::collections::HashSet::new();
        let mut previous: Option<Vec<u8>> = None;
        while iterator.valid() {
            let key = iterator.key().to_vec();
            if let Some(previous) = &previous {
                assert_eq!(compare_internal_keys(previous, &key), Ordering::Less);
            }
            assert!(seen.insert(parse_internal_key(&key).unwrap().sequence));
            previous = Some(key);
            iterator.next();
        }
        assert_eq!(seen.len() as u64, total);
    }

    #[test]
    fn a_completed_insert_is_found_by_every_later_get() {
        // Writers race to create the same fresh keys (each round's keys are new), so a key's
        // node is often linked by one writer while another completes a version on it first:
        // that version must be findable as soon as its insert returns (invariant 5).
        const WRITERS: u64 = 3;
        const ROUNDS: u64 = 2_000;
        const KEYS_PER_ROUND: u64 = 4;
        for (mode, make) in INDEX_MODES {
            eprintln!("{mode}");
            let memtable = Arc::new(make(64 * 1024));
            memtable.delay_publish.store(true, AtomicOrdering::Relaxed);
            let completed: Arc<Vec<std::sync::atomic::AtomicU64>> =
                Arc::new((0..WRITERS).map(|_| Default::default()).collect());
            let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let reader = {
                let (memtable, completed, done) = (
                    Arc::clone(&memtable),
                    Arc::clone(&completed),
                    Arc::clone(&done),
                );
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    while !done.load(AtomicOrdering::Acquire) {
                        for slot in completed.iter() {
                            // (round, key) of the writer's last completed insert, plus one.
                            let packed = slot.load(AtomicOrdering::Acquire);
                            let Some(last) = packed.checked_sub(1) else {
                                continue;
                            };
                            let user = (last / KEYS_PER_ROUND, last % KEYS_PER_ROUND);
                            let user = format!("{:08}-{}", user.0, user.1).into_bytes();
                            assert!(
                                memtable.get(&user, crate::key::SEQUENCE_MAX).is_some(),
                                "a completed insert of {user:?} is not found"
                            );
                            let (entry, _) = memtable.get_entry_hinted(&user);
                            assert!(entry.is_some());
                            checks += 1;
                        }
                    }
                    checks
                })
            };
            let writers: Vec<_> = (0..WRITERS)
                .map(|writer| {
                    let (memtable, completed) = (Arc::clone(&memtable), Arc::clone(&completed));
                    std::thread::spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(writer + 100);
                        for round in 0..ROUNDS {
                            let key = rng.gen_range(0..KEYS_PER_ROUND);
                            let user = format!("{round:08}-{key}").into_bytes();
                            let sequence = 1 + round * WRITERS + writer;
                            memtable.insert(&user, sequence, ValueKind::Put, b"v");
                            if let Some(slot) = completed.get(writer as usize) {
                                slot.store(
                                    round * KEYS_PER_ROUND + key + 1,
                                    AtomicOrdering::Release,
                                );
                            }
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            done.store(true, AtomicOrdering::Release);
            assert!(reader.join().unwrap() > 0);
            assert_eq!(memtable.len() as u64, WRITERS * ROUNDS);
            let entries = collect_forward(&mut memtable.iter()).unwrap();
            assert_eq!(entries.len() as u64, WRITERS * ROUNDS);
            assert!(entries
                .windows(2)
                .all(|pair| compare_internal_keys(&pair[0].0, &pair[1].0) == Ordering::Less));
        }
    }

    #[test]
    fn a_hinted_insert_on_a_key_node_not_yet_in_the_index_publishes_it() {
        // Bug E: a key node's creator has linked it into the skiplist but not yet published
        // it in the index. `get_entry_hinted` finds it by search after the index said
        // `Absent`; the hinted insert then joins the chain and must publish the node before it
        // returns (invariant 5), or a `get` right after misses the completed version.
        let memtable = Memtable::new();
        let height = 1;
        let node = Memtable::allocate_node(
            &memtable.arena,
            height,
            [
                b"k",
                &crate::key::pack_trailer(1, ValueKind::Put).to_le_bytes(),
            ],
            b"first",
        );
        // The creator, paused between linking and publishing.
        assert!(memtable.link_key_node(node, b"k", height, None).is_none());
        let (found, hint) = memtable.get_entry_hinted(b"k");
        assert_eq!(found, Some((1, ValueKind::Put, &b"first"[..])));
        memtable.insert_hinted(Some(&hint), b"k", 2, ValueKind::Put, b"second");
        assert_eq!(
            memtable.get(b"k", crate::key::SEQUENCE_MAX),
            Some((ValueKind::Put, &b"second"[..])),
            "a completed hinted insert is not found by get"
        );
    }

    #[test]
    fn long_chains_iterate_the_same_both_ways() {
        // A hot key with thousands of versions between cold keys: `prev` along its chain must
        // step through every version in order (it keeps a stack of the newer ones).
        let memtable = Arc::new(Memtable::new());
        let mut sequence = 0u64;
        for round in 0..3000u64 {
            sequence += 1;
            memtable.insert(b"hot", sequence, ValueKind::Put, &round.to_le_bytes());
            if round % 100 == 0 {
                sequence += 1;
                let cold = format!("cold{round:05}");
                memtable.insert(cold.as_bytes(), sequence, ValueKind::Put, b"c");
            }
        }
        let forward = collect_forward(&mut memtable.iter()).unwrap();
        // collect_backward walks with `prev` and returns the entries in forward order.
        let backward = collect_backward(&mut memtable.iter()).unwrap();
        assert_eq!(forward.len(), 3030);
        assert_eq!(forward, backward);
        // Direction changes in the middle of the chain.
        let mut iterator = memtable.iter();
        iterator.seek(&internal_key(b"hot", 1500, ValueKind::SEEK));
        assert_eq!(trailer(iterator.key()) >> 8, 1500);
        iterator.prev();
        iterator.prev();
        iterator.next();
        let at = trailer(iterator.key()) >> 8;
        iterator.prev();
        assert_eq!(trailer(iterator.key()) >> 8, at + 1);
    }

    #[test]
    fn hinted_inserts_match_an_oracle_with_stale_foreign_and_wrong_key_hints() {
        for (mode, make) in INDEX_MODES {
            eprintln!("{mode}");
            hinted_inserts_match_an_oracle_with(make(4096), make(4096));
        }
    }

    fn hinted_inserts_match_an_oracle_with(memtable: Memtable, other: Memtable) {
        let mut rng = SmallRng::seed_from_u64(23);
        other.insert(b"k1", 1, ValueKind::Put, b"elsewhere");
        let mut oracle: BTreeMap<_, (ValueKind, Vec<u8>)> = BTreeMap::new();
        let mut next_sequence = 1u64;
        for _ in 0..3000 {
            let user = format!("k{}", rng.gen_range(0..200)).into_bytes();
            // A block of sequences: ours is a random one of them, the others go to inserts
            // made between taking the hint and using it — some of the same key, below and
            // above ours — so the hint is stale as under concurrency.
            let block = rng.gen_range(1..6u64);
            let ours = next_sequence + rng.gen_range(0..block);
            // Each other sequence of the block is inserted before the hint is taken (so the
            // read may see a version newer than ours) or between taking and using it.
            let mut after_hint = Vec::new();
            for sequence in next_sequence..next_sequence + block {
                if sequence == ours {
                    continue;
                }
                let between = if rng.gen_bool(0.5) {
                    user.clone()
                } else {
                    format!("k{}", rng.gen_range(0..200)).into_bytes()
                };
                if rng.gen_bool(0.3) {
                    memtable.insert(&between, sequence, ValueKind::Put, &sequence.to_le_bytes());
                    oracle.insert(
                        oracle_key(&between, sequence),
                        (ValueKind::Put, sequence.to_le_bytes().to_vec()),
                    );
                } else {
                    after_hint.push((between, sequence));
                }
            }
            let (found, hint) = memtable.get_entry_hinted(&user);
            let newest = oracle
                .range(oracle_key(&user, crate::key::SEQUENCE_MAX)..)
                .next()
                .filter(|((found_user, _), _)| *found_user == user)
                .map(|((_, sequence), (kind, value))| (sequence.0, *kind, value.clone()));
            assert_eq!(
                found.map(|(sequence, kind, value)| (sequence, kind, value.to_vec())),
                newest
            );
            for (between, sequence) in after_hint {
                memtable.insert(&between, sequence, ValueKind::Put, &sequence.to_le_bytes());
                oracle.insert(
                    oracle_key(&between, sequence),
                    (ValueKind::Put, sequence.to_le_bytes().to_vec()),
                );
            }
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = ours.to_le_bytes();
            let (_, foreign) = other.get_entry_hinted(&user);
            let wrong_key = b"k1".to_vec();
            let (_, wrong) = memtable.get_entry_hinted(&wrong_key);
            let used = match rng.gen_range(0..4) {
                0 => Some(&foreign),
                1 => Some(&wrong),
                2 => None,
                _ => Some(&hint),
            };
            memtable.insert_hinted(used, &user, ours, kind, &value);
            oracle.insert(oracle_key(&user, ours), (kind, value.to_vec()));
            next_sequence += block;
        }
        let expected: Vec<(Vec<u8>, Vec<u8>)> = oracle
            .iter()
            .map(|((user, sequence), (kind, value))| {
                (internal_key(user, sequence.0, *kind), value.clone())
            })
            .collect();
        let mut iterator = Arc::new(memtable).iter();
        iterator.seek_to_first();
        let mut actual = Vec::new();
        while iterator.valid() {
            actual.push((iterator.key().to_vec(), iterator.value().to_vec()));
            iterator.next();
        }
        assert_eq!(actual, expected);
    }

    #[test]
    fn sorted_nodes_match_the_level_zero_walk_at_every_size() {
        let mut rng = SmallRng::seed_from_u64(17);
        // Sizes below, at and far above one gather segment (64 nodes), plus duplicates of a
        // user key (many versions) and empty keys.
        for size in [0usize, 1, 2, 63, 64, 65, 1000, 200_000] {
            let memtable = Arc::new(Memtable::with_chunk_bytes(1 << 16));
            for sequence in 1..=size as u64 {
                let user = match rng.gen_range(0..10) {
                    0 => Vec::new(),
                    1 => b"hot".to_vec(),
                    _ => rng.gen::<u64>().to_be_bytes().to_vec(),
                };
                memtable.insert(&user, sequence, ValueKind::Put, &sequence.to_le_bytes());
            }
            let expected = collect_forward(&mut memtable.iter()).unwrap();
            assert_eq!(expected.len(), size);
            let sorted = Arc::new(memtable.sorted_nodes());
            assert_eq!(sorted.len(), size);
            assert_eq!(sorted.is_empty(), size == 0);
            let mut iterator = sorted.iter();
            assert!(!iterator.valid(), "a new cursor is not positioned");
            assert_eq!(
                collect_forward(&mut iterator).unwrap(),
                expected,
                "size {size}"
            );
            let mut keys = Vec::new();
            sorted.for_each_key(|key| keys.push(key.to_vec()));
            let expected_keys: Vec<Vec<u8>> = expected.iter().map(|(key, _)| key.clone()).collect();
            assert_eq!(keys, expected_keys);
            assert_eq!(collect_backward(&mut iterator).unwrap(), expected);
            for _ in 0..200 {
                let target = internal_key(
                    &rng.gen::<u64>().to_be_bytes(),
                    rng.gen_range(0..=size as u64 + 1),
                    ValueKind::SEEK,
                );
                iterator.seek(&target);
                let mut reference = memtable.iter();
                reference.seek(&target);
                assert_eq!(iterator.valid(), reference.valid());
                if reference.valid() {
                    assert_eq!(iterator.key(), reference.key());
                    assert_eq!(iterator.value(), reference.value());
                }
            }
        }
    }

    #[test]
    fn sorted_nodes_after_concurrent_inserts_hold_every_entry_once() {
        let memtable = Arc::new(Memtable::with_chunk_bytes(1 << 16));
        let threads: Vec<_> = (0..4u64)
            .map(|thread| {
                let memtable = Arc::clone(&memtable);
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(thread);
                    for index in 0..20_000u64 {
                        let user = rng.gen::<u32>().to_be_bytes();
                        memtable.insert(&user, 1 + thread * 20_000 + index, ValueKind::Put, b"v");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let sorted = Arc::new(memtable.sorted_nodes());
        assert_eq!(sorted.len(), 80_000);
        assert_eq!(
            collect_forward(&mut sorted.iter()).unwrap(),
            collect_forward(&mut memtable.iter()).unwrap()
        );
    }
}
