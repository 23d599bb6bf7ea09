//! The memtable: a concurrent skiplist of internal keys (sLSM §2.2, cLSM §3.1).
//!
//! Each node holds one internal key (user key ++ 8-byte trailer), its value and a vertical
//! array ("tower") of next pointers, one per level it occupies, all carved from an
//! [`arena::Arena`] in one allocation. A node's height comes from one random word: two bits
//! per level (branching factor 4, as LevelDB), i.e. `1 + trailing_zeros(word) / 2`, capped at
//! `MAX_HEIGHT` — O(1) instead of a coin-flipping loop.
//!
//! Thread-safety contract: `insert` may run on many threads at once and never blocks; `get`
//! and iterators never block and never write shared memory. Nodes are never removed (a delete
//! is a typed record); all memory is freed when the memtable drops, which the engine arranges
//! only after no reader can hold a reference (readers hold an `Arc<Memtable>`).
//!
//! Invariants:
//! 1. At every level, the list is sorted by `compare_internal_keys` and holds no duplicates.
//! 2. A node is fully initialised (key, value, height) before it is published; publication is
//!    a release compare-and-swap, every traversal an acquire load, so a reader that reaches
//!    a node sees its bytes.
//! 3. A node is linked bottom-up: once it is reachable at level `l` it is reachable at every
//!    level below, so a search that descends never misses it.
//! 4. `max_height` only grows; levels above it hold only null pointers in the head.

pub mod arena;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, trailer, user_key, SequenceNumber, ValueKind, TRAILER_BYTES};
use arena::Arena;
use std::cell::Cell;
use std::cmp::Ordering;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// A version found in a memtable: its sequence, kind and value.
pub type Entry<'a> = (SequenceNumber, ValueKind, &'a [u8]);

/// Highest tower (4^12 ≈ 16.7 M entries before the top level stops thinning out).
pub const MAX_HEIGHT: usize = 12;

/// Bytes of the fixed node header: key length, value length, height, padding (u32 each).
const NODE_HEADER_BYTES: usize = 16;

/// Default arena chunk size.
const CHUNK_BYTES_DEFAULT: usize = 1 << 20;

#[repr(C)]
struct Node {
    key_length: u32,
    value_length: u32,
    height: u32,
    _padding: u32,
    // followed by `height` AtomicPtr<Node>, then key bytes, then value bytes
}

impl Node {
    /// The tower slot for `level`.
    ///
    /// # Safety
    /// `node` must point to a live, initialised node and `level < height`.
    #[inline]
    unsafe fn next(node: *const Node, level: usize) -> &'static AtomicPtr<Node> {
        // SAFETY: the tower starts right after the 16-byte header, 8-aligned (arena
        // alignment), and has `height` slots; the caller guarantees `level < height`. The
        // 'static lifetime is a lie the callers keep honest: they never outlive the memtable.
        unsafe {
            let tower = (node as *const u8).add(NODE_HEADER_BYTES) as *const AtomicPtr<Node>;
            &*tower.add(level)
        }
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the key follows the tower; its length was written before publication.
        unsafe {
            let header = &*node;
            let start = (node as *const u8)
                .add(NODE_HEADER_BYTES + header.height as usize * std::mem::size_of::<usize>());
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
    entry_count: crate::sync::StripedCounter,
}

impl std::fmt::Debug for Memtable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Memtable")
            .field("entries", &self.len())
            .field("bytes", &self.approximate_memory_bytes())
            .finish()
    }
}

// SAFETY: all shared mutable state is reached through atomics (towers, counters) and the
// arena, which is Send + Sync; node bytes are immutable after publication (invariant 2).
unsafe impl Send for Memtable {}
// SAFETY: as above.
unsafe impl Sync for Memtable {}

impl Default for Memtable {
    fn default() -> Self {
        Self::new()
    }
}

/// How a search compares a node with its target.
trait Target {
    /// Ordering of `node_key` relative to the target.
    fn compare(&self, node_key: &[u8]) -> Ordering;
}

/// An internal key given as its parts, so lookups need not build it.
struct Parts<'a> {
    user_key: &'a [u8],
    trailer: u64,
}

impl Target for Parts<'_> {
    #[inline]
    fn compare(&self, node_key: &[u8]) -> Ordering {
        match crate::key::compare_user_keys(user_key(node_key), self.user_key) {
            Ordering::Equal => self.trailer.cmp(&trailer(node_key)),
            other => other,
        }
    }
}

/// An encoded internal key.
struct Encoded<'a>(&'a [u8]);

impl Target for Encoded<'_> {
    #[inline]
    fn compare(&self, node_key: &[u8]) -> Ordering {
        crate::key::compare_internal_keys(node_key, self.0)
    }
}

impl Memtable {
    /// An empty memtable with the default arena chunk size.
    pub fn new() -> Memtable {
        Self::with_chunk_bytes(CHUNK_BYTES_DEFAULT)
    }

    /// An empty memtable whose arena carves chunks of `chunk_bytes` (small memtables use
    /// small chunks so they do not hold a megabyte each).
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Memtable {
        let arena = Arena::new(chunk_bytes);
        let head = Self::allocate_node(&arena, MAX_HEIGHT, [&[], &[]], &[]);
        Memtable {
            arena,
            head,
            max_height: AtomicUsize::new(1),
            entry_count: crate::sync::StripedCounter::default(),
        }
    }

    /// Allocates and initialises an unpublished node holding `key_parts` concatenated (the
    /// user key and the trailer, written in place so an insert allocates nothing else).
    fn allocate_node(
        arena: &Arena,
        height: usize,
        key_parts: [&[u8]; 2],
        value: &[u8],
    ) -> *mut Node {
        debug_assert!((1..=MAX_HEIGHT).contains(&height));
        let key_length = key_parts[0].len() + key_parts[1].len();
        let tower_bytes = height * std::mem::size_of::<usize>();
        let size = NODE_HEADER_BYTES + tower_bytes + key_length + value.len();
        let node = arena.allocate(size) as *mut Node;
        // SAFETY: `node` points to `size` fresh bytes, 8-aligned (arena invariant 1): room
        // for the header, the tower and both byte strings. Nothing else sees it yet.
        unsafe {
            node.write(Node {
                key_length: key_length as u32,
                value_length: value.len() as u32,
                height: height as u32,
                _padding: 0,
            });
            for level in 0..height {
                let slot = (node as *mut u8).add(NODE_HEADER_BYTES) as *mut AtomicPtr<Node>;
                slot.add(level).write(AtomicPtr::new(ptr::null_mut()));
            }
            let mut cursor = (node as *mut u8).add(NODE_HEADER_BYTES + tower_bytes);
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

    /// `insert`, starting each level's search at `hint` (from [`Memtable::get_entry_hinted`]
    /// on this memtable for the same user key) instead of at the head: a read-modify-write
    /// then walks the skiplist once instead of twice. A hint from another memtable or for
    /// another key is ignored (the search starts at the head), never trusted.
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
        let height = random_height();
        let trailer = crate::key::pack_trailer(sequence, kind);
        let trailer_bytes: [u8; TRAILER_BYTES] = trailer.to_le_bytes();
        let node = Self::allocate_node(&self.arena, height, [user_key, &trailer_bytes], value);

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
        let target = Parts { user_key, trailer };
        // The splice: for each level, the last node before the key and the first after it.
        let mut before = [self.head as *const Node; MAX_HEIGHT];
        let mut after = [ptr::null::<Node>(); MAX_HEIGHT];
        let hint = hint.filter(|hint| ptr::eq(hint.memtable, self) && hint.user_key == user_key);
        match hint {
            Some(hint) => {
                // Each hinted node precedes every version of the key (it was before the
                // smallest possible internal key of it) and stays before it forever (nodes
                // are never removed), so it is a valid start at its level; only nodes
                // inserted since the read lie between it and the splice.
                for level in (0..height).rev() {
                    let (found_before, found_after) =
                        self.find_splice(&target, hint.before[level], level, ptr::null());
                    before[level] = found_before;
                    after[level] = found_after;
                }
            }
            None => {
                let mut start = self.head as *const Node;
                let mut known_not_before = ptr::null::<Node>();
                for level in (0..max_height.max(height)).rev() {
                    let (found_before, found_after) =
                        self.find_splice(&target, start, level, known_not_before);
                    before[level] = found_before;
                    after[level] = found_after;
                    start = found_before;
                    known_not_before = found_after;
                }
            }
        }
        // Link bottom-up (invariant 3).
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
                let (found_before, found_after) =
                    self.find_splice(&target, before[level], level, ptr::null());
                before[level] = found_before;
                after[level] = found_after;
            }
        }
        self.entry_count.add(1);
    }

    /// At `level`, starting from `start` (which precedes the target), the last node before
    /// the target and the first node at or after it (null at the end). `known_not_before` is
    /// a node already known to be at or after the target (the level above's answer, or
    /// null): reaching it ends the walk without comparing keys again.
    #[inline]
    fn find_splice<T: Target>(
        &self,
        target: &T,
        start: *const Node,
        level: usize,
        known_not_before: *const Node,
    ) -> (*const Node, *const Node) {
        let mut current = start;
        loop {
            // SAFETY: `current` is the head or a node reached at this level, so its tower has
            // a slot for `level`; published nodes stay alive as long as `self`.
            let next = unsafe { Node::next(current, level).load(AtomicOrdering::Acquire) };
            if next.is_null()
                || ptr::eq(next, known_not_before)
                // SAFETY: non-null `next` is a published node (invariant 2).
                || target.compare(unsafe { Node::key(next) }) != Ordering::Less
            {
                debug_assert!(
                    next.is_null()
                        // SAFETY: as above.
                        || target.compare(unsafe { Node::key(next) }) == Ordering::Greater,
                    "duplicate internal key inserted, or a stale known_not_before"
                );
                return (current, next);
            }
            current = next;
        }
    }

    /// The first node whose key is `>= target`, or null. If `path` is given, it receives at
    /// each level the last node before the target (the head above the search's height).
    #[inline]
    fn find_greater_or_equal<T: Target>(
        &self,
        target: &T,
        mut path: Option<&mut [*const Node; MAX_HEIGHT]>,
    ) -> *const Node {
        let mut current = self.head as *const Node;
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        // The node that ended the walk on the level above: at or after the target, so when
        // the lower level leads to it again (the common case) no key comparison is needed.
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
                && target.compare(unsafe { Node::key(next) }) == Ordering::Less;
            if advance {
                current = next;
                continue;
            }
            if let Some(path) = path.as_deref_mut() {
                if let Some(slot) = path.get_mut(level) {
                    *slot = current;
                }
            }
            if level == 0 {
                return next;
            }
            known_not_before = next;
            level -= 1;
        }
    }

    /// The last node whose key is `< target` (or, with no target, the last node), or null if
    /// that would be the head.
    fn find_less_than(&self, target: Option<&dyn Target>) -> *const Node {
        let mut current = self.head as *const Node;
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `find_splice`.
            let next = unsafe { Node::next(current, level).load(AtomicOrdering::Acquire) };
            let advance = !next.is_null()
                && target.is_none_or(|target| {
                    // SAFETY: non-null `next` is a published node.
                    target.compare(unsafe { Node::key(next) }) == Ordering::Less
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

    /// The newest version of `user_key` with sequence `<= snapshot`: `Some((kind, value))`,
    /// or `None` if there is none. Never allocates, never blocks.
    pub fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<(ValueKind, &[u8])> {
        self.get_entry(user_key, snapshot)
            .map(|(_, kind, value)| (kind, value))
    }

    /// Like `get`, also returning the version's sequence number (read-modify-write compares
    /// versions to detect conflicts).
    pub fn get_entry(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<Entry<'_>> {
        let target = Parts {
            user_key,
            trailer: crate::key::pack_trailer(snapshot, ValueKind::SEEK),
        };
        let node = self.find_greater_or_equal(&target, None);
        self.entry_for(node, user_key)
    }

    /// The newest version of `user_key` (any sequence), and a hint that lets
    /// [`Memtable::insert_hinted`] add a newer version of the same key without searching
    /// from the head again.
    pub fn get_entry_hinted<'a>(
        &'a self,
        user_key: &'a [u8],
    ) -> (Option<Entry<'a>>, InsertHint<'a>) {
        // The smallest internal key of `user_key`: every node before it precedes every
        // version of the key, whatever its sequence.
        let target = Parts {
            user_key,
            trailer: crate::key::pack_trailer(crate::key::SEQUENCE_MAX, ValueKind::SEEK),
        };
        let mut before = [self.head as *const Node; MAX_HEIGHT];
        let node = self.find_greater_or_equal(&target, Some(&mut before));
        let hint = InsertHint {
            memtable: self,
            user_key,
            before,
        };
        (self.entry_for(node, user_key), hint)
    }

    /// The entry at `node` if it is a version of `user_key`.
    #[inline]
    fn entry_for<'a>(&'a self, node: *const Node, user_key: &[u8]) -> Option<Entry<'a>> {
        if node.is_null() {
            return None;
        }
        // SAFETY: a published node, alive as long as `self` (the returned borrow).
        let key = unsafe { Node::key(node) };
        let parsed = parse_internal_key(key)?;
        if parsed.user_key != user_key {
            return None;
        }
        // SAFETY: as above.
        Some((parsed.sequence, parsed.kind, unsafe { Node::value(node) }))
    }

    /// Bytes allocated for nodes, lagging the exact figure by a few KiB per arena lane
    /// (decides when the memtable is full). One load of a rarely written word.
    pub fn approximate_memory_bytes(&self) -> usize {
        self.arena.published_bytes()
    }

    /// Exact arena bytes (reads every arena lane; for reports and tests).
    pub fn memory_bytes(&self) -> usize {
        self.arena.allocated_bytes()
    }

    /// Number of entries.
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
            node: ptr::null(),
        }
    }

    /// Every node in key order, gathered with `GATHER_CHAINS` independent walks in flight.
    ///
    /// Walking level 0 is a chain of dependent cache misses (nodes sit in the arena in
    /// allocation order, not key order): one miss per entry, twice per flush (the Bloom
    /// filter, then the table). Here the nodes of one upper level cut level 0 into segments
    /// of about `4^GATHER_LEVEL` nodes, and the walks of many segments are interleaved, so
    /// their misses overlap. The result is a snapshot: meant for a sealed, quiet memtable
    /// (the flush checks `len` against the memtable's before it trusts one).
    pub fn sorted_nodes(self: &Arc<Self>) -> SortedNodes {
        let expected = self.len();
        let level = self
            .max_height
            .load(AtomicOrdering::Acquire)
            .min(GATHER_LEVEL + 1)
            - 1;
        // SAFETY: the head has MAX_HEIGHT levels; every node reached is published
        // (invariant 2) and lives as long as `self`.
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
        // including, `starts[i]` (null for the last). Invariant 3: every start is on level
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
        let mut chains: Vec<Chain> = Vec::with_capacity(GATHER_CHAINS);
        let mut next_segment = 0;
        loop {
            while chains.len() < GATHER_CHAINS && next_segment < segment_count {
                chains.push(Chain {
                    segment: next_segment,
                    node: begin(next_segment),
                    end: end(next_segment),
                });
                next_segment += 1;
            }
            if chains.is_empty() {
                break;
            }
            let mut index = 0;
            while let Some(chain) = chains.get_mut(index) {
                if chain.node.is_null() || chain.node == chain.end {
                    chains.swap_remove(index);
                    continue;
                }
                if let Some(output) = outputs.get_mut(chain.segment) {
                    if output.capacity() == 0 {
                        output.reserve(segment_capacity);
                    }
                    output.push(chain.node);
                }
                // SAFETY: a published node of this memtable with at least one level.
                let next = unsafe { Node::next(chain.node, 0).load(AtomicOrdering::Acquire) };
                prefetch(next);
                chain.node = next;
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
const GATHER_CHAINS: usize = 16;

/// How far ahead of a cursor over `SortedNodes` nodes are prefetched.
const PREFETCH_DISTANCE: usize = 8;

/// One interleaved walk of `sorted_nodes`.
struct Chain {
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
// bytes are immutable after publication (invariant 2), so sharing or moving them is sound.
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

/// Where a key's next version goes, found by [`Memtable::get_entry_hinted`]: at each level,
/// the last node before every version of the key. Borrowing the memtable keeps those nodes
/// alive; an insert checks that the hint is its own memtable's and for its key before using it.
pub struct InsertHint<'a> {
    memtable: &'a Memtable,
    user_key: &'a [u8],
    before: [*const Node; MAX_HEIGHT],
}

impl std::fmt::Debug for InsertHint<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("InsertHint")
            .field("user_key_bytes", &self.user_key.len())
            .finish()
    }
}

/// A cursor over a memtable; sees entries inserted after it was created too (the skiplist is
/// concurrent), which the database iterator filters by sequence number.
pub struct MemtableIterator {
    memtable: Arc<Memtable>,
    node: *const Node,
}

impl std::fmt::Debug for MemtableIterator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemtableIterator")
            .field("valid", &!self.node.is_null())
            .finish()
    }
}

// SAFETY: the node pointer refers into the memtable the iterator keeps alive through its
// `Arc`; node bytes are immutable and towers are atomics, so moving the cursor to another
// thread is sound.
unsafe impl Send for MemtableIterator {}

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        !self.node.is_null()
    }

    fn seek_to_first(&mut self) {
        // SAFETY: the head has MAX_HEIGHT levels.
        self.node = unsafe { Node::next(self.memtable.head, 0).load(AtomicOrdering::Acquire) };
    }

    fn seek_to_last(&mut self) {
        self.node = self.memtable.find_less_than(None);
    }

    fn seek(&mut self, target: &[u8]) {
        self.node = self.memtable.find_greater_or_equal(&Encoded(target), None);
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if !self.node.is_null() {
            // SAFETY: a valid cursor points at a published node with at least one level.
            self.node = unsafe { Node::next(self.node, 0).load(AtomicOrdering::Acquire) };
        }
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if !self.node.is_null() {
            // SAFETY: as above; the key stays valid while the memtable lives.
            let key = unsafe { Node::key(self.node) };
            self.node = self.memtable.find_less_than(Some(&Encoded(key)));
        }
    }

    fn key(&self) -> &[u8] {
        if self.node.is_null() {
            return &[];
        }
        // SAFETY: a published node of the memtable this iterator keeps alive.
        unsafe { Node::key(self.node) }
    }

    fn value(&self) -> &[u8] {
        if self.node.is_null() {
            return &[];
        }
        // SAFETY: as above.
        unsafe { Node::value(self.node) }
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
        let mut rng = SmallRng::seed_from_u64(11);
        let memtable = Arc::new(Memtable::with_chunk_bytes(4096));
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
        const WRITERS: u64 = 4;
        const PER_WRITER: u64 = 25_000;
        let memtable = Arc::new(Memtable::with_chunk_bytes(64 * 1024));
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
                        let user = format!("key{:05}", rng.gen_range(0..20_000)).into_bytes();
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
    fn hinted_inserts_match_an_oracle_with_stale_foreign_and_wrong_key_hints() {
        let mut rng = SmallRng::seed_from_u64(23);
        let memtable = Memtable::with_chunk_bytes(4096);
        let other = Memtable::with_chunk_bytes(4096);
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
