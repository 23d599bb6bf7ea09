//! Gathering a memtable for flush: [`Memtable::sorted_nodes`] collects every version in
//! internal-key order with many level-0 walks in flight, and [`SortedNodesIterator`] replays
//! them as the flush's input.
//!
//! Thread-safety contract: `sorted_nodes` may run concurrently with inserts but then returns a
//! snapshot that may miss them (the flush gathers only sealed memtables and checks the count);
//! a `SortedNodes` is immutable and shareable; each cursor belongs to one thread at a time.
//!
//! Invariants:
//! 1. Segment `i` of the gather ends where segment `i + 1` begins (the upper level's nodes are
//!    on level 0 in the same order, memtable invariant 4), so every key node is visited once.
//! 2. `SortedNodes::nodes` is in internal-key order: segments in order, key nodes in order
//!    within a segment, each chain newest first.

use super::node::Node;
use super::Memtable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::sync::prefetch;
use std::cmp::Ordering;
use std::ptr;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

impl Memtable {
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
        // Invariant 7: set before the walk, so an insert racing with it is caught too.
        #[cfg(any(test, feature = "invariants"))]
        self.gathered
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let (first, starts) = self.segment_starts();
        // Segment `i` runs from its begin (the first node, or `starts[i - 1]`) up to, not
        // including, `starts[i]` (null for the last). Invariant 1: every start is on level
        // 0 after the previous one, so each walk ends at its end.
        let segment_count = starts.len() + 1;
        let begin = |segment: usize| -> *const Node {
            match segment.checked_sub(1) {
                None => first,
                Some(index) => starts.get(index).copied().unwrap_or(ptr::null()),
            }
        };
        let end = |segment: usize| starts.get(segment).copied().unwrap_or(ptr::null());
        let segment_capacity = (self.len() / segment_count).saturating_mul(2).max(4);
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
            step_walks(&mut walks, &mut outputs, segment_capacity);
        }
        let total = outputs.iter().map(Vec::len).sum();
        let mut nodes = Vec::with_capacity(total);
        for output in outputs {
            nodes.extend_from_slice(&output);
        }
        SortedNodes {
            _memtable: Arc::clone(self),
            nodes,
        }
    }

    /// The first key node on level 0 and the nodes of the gather level, which cut level 0
    /// into segments (none when the skiplist is too low to have that level).
    fn segment_starts(&self) -> (*const Node, Vec<*const Node>) {
        let level = self
            .max_height
            .load(AtomicOrdering::Acquire)
            .min(GATHER_LEVEL + 1)
            - 1;
        // SAFETY: the head has MAX_HEIGHT levels; every node reached is published
        // (memtable invariant 3) and lives as long as `self`.
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
        (first, starts)
    }
}

/// Advances every walk by one key node, appending its chain to its segment's output, and
/// drops the walks that reached their segment's end.
fn step_walks(walks: &mut Vec<Walk>, outputs: &mut [Vec<*const Node>], segment_capacity: usize) {
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
            // SAFETY: a published key node of the memtable; its chain's nodes are published
            // (memtable invariant 3).
            unsafe {
                let mut version = Node::versions(walk.node).load(AtomicOrdering::Acquire);
                while !version.is_null() {
                    output.push(version);
                    version = Node::older(version).load(AtomicOrdering::Acquire);
                }
            }
        }
        // SAFETY: a published node of the memtable with at least one level.
        let next = unsafe { Node::next(walk.node, 0).load(AtomicOrdering::Acquire) };
        prefetch(next);
        walk.node = next;
        index += 1;
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
    /// Never read: holding it keeps the nodes' arena alive (the pointers below point into it).
    _memtable: Arc<Memtable>,
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
// Always inlined, for the same reason as `prefetch`.
#[allow(clippy::inline_always)]
#[inline(always)]
fn prefetch_entry(node: Option<&*const Node>) {
    if let Some(&node) = node {
        prefetch(node);
        prefetch(node.cast::<u8>().wrapping_add(64).cast::<Node>());
        prefetch(node.cast::<u8>().wrapping_add(128).cast::<Node>());
    }
}

impl SortedNodes {
    /// Number of entries gathered.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if nothing was gathered.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
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
