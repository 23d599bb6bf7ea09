//! Memtable nodes: the byte layout of a version node and of a key node (header, chain head,
//! tower, key, value in one arena allocation), their accessors, and the random tower height.
//!
//! Thread-safety contract: a node is written only by the thread that allocates it, before it
//! is published; afterwards its bytes are immutable and only its atomic links change, by
//! compare-and-swap (see the insert module). The accessors are `unsafe` because they trust the
//! pointer; they never synchronise by themselves beyond the acquire/release of each link.
//!
//! Invariants:
//! 1. A node is one arena allocation of `NODE_HEADER_BYTES + link_words(height) * 8 + key +
//!    value` bytes, 8-aligned; `key_length`, `value_length` and `height` never change.
//! 2. A node with `height > 0` (a key node) has a chain head, initialised to the node itself,
//!    and `height` tower slots, initialised to null; a node with `height == 0` has neither.
//! 3. `1 <= height <= MAX_HEIGHT` for every key node `random_height` produces.

// A node's key and value lengths were checked against `KEY_BYTES_MAX` and
// `VALUE_BYTES_MAX` (both below 4 GiB) before the write reached the memtable, and its height
// is at most `MAX_HEIGHT`, so the `u32` header fields hold them exactly.
#![allow(clippy::cast_possible_truncation)]

use super::arena::Arena;
use super::MAX_HEIGHT;
use crate::key::{trailer, user_key};
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering as AtomicOrdering};

/// Bytes of the fixed node header: key length, value length, height, padding (u32 each), then
/// the link to the next older version.
pub(super) const NODE_HEADER_BYTES: usize = 24;

/// A memtable node; see the module documentation for its layout.
#[repr(C)]
pub(super) struct Node {
    key_length: u32,
    value_length: u32,
    /// Tower levels; 0 for a node allocated only as a version.
    pub(super) height: u32,
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
    pub(super) unsafe fn next(node: *const Node, level: usize) -> &'static AtomicPtr<Node> {
        // SAFETY: the tower starts one word after the header (after the chain head), 8-aligned
        // (arena alignment), and has `height` slots; the caller guarantees `level < height`.
        // The 'static lifetime is a lie the callers keep honest: they never outlive the
        // memtable.
        unsafe {
            let tower = node
                .cast::<u8>()
                .add(NODE_HEADER_BYTES + 8)
                .cast::<AtomicPtr<Node>>();
            &*tower.add(level)
        }
    }

    /// The head of the version chain of a key node.
    ///
    /// # Safety
    /// `node` must point to a live, initialised node with `height > 0`.
    #[inline]
    pub(super) unsafe fn versions(node: *const Node) -> &'static AtomicPtr<Node> {
        // SAFETY: a node with a tower has the chain head right after the header.
        unsafe {
            &*node
                .cast::<u8>()
                .add(NODE_HEADER_BYTES)
                .cast::<AtomicPtr<Node>>()
        }
    }

    /// The link to the next older version.
    ///
    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    pub(super) unsafe fn older(node: *const Node) -> &'static AtomicPtr<Node> {
        // SAFETY: a field of the header, which every node has.
        unsafe { &(*node).older }
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    pub(super) unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the key follows the links; its length was written before publication.
        unsafe {
            let header = &*node;
            let start = node.cast::<u8>().add(
                NODE_HEADER_BYTES
                    + link_words(header.height as usize) * std::mem::size_of::<usize>(),
            );
            std::slice::from_raw_parts(start, header.key_length as usize)
        }
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    pub(super) unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
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
    pub(super) unsafe fn user_key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: as `key`.
        user_key(unsafe { Node::key(node) })
    }

    /// # Safety
    /// `node` must point to a live, initialised node.
    #[inline]
    pub(super) unsafe fn trailer(node: *const Node) -> u64 {
        // SAFETY: as `key`.
        trailer(unsafe { Node::key(node) })
    }

    /// The last (oldest) version of a chain starting at `version`.
    ///
    /// # Safety
    /// `version` must point to a live, initialised node.
    pub(super) unsafe fn oldest(mut version: *const Node) -> *const Node {
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
        hasher.write_usize(&raw const hasher as usize);
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

/// A random height: level `h` with probability (1/4)^(h-1) · 3/4, from one random word.
pub(super) fn random_height() -> usize {
    let height = 1 + (random_word().trailing_zeros() as usize) / 2;
    height.min(MAX_HEIGHT)
}

impl Node {
    /// Allocates and initialises an unpublished node holding `key_parts` concatenated (the
    /// user key and the trailer, written in place so an insert allocates nothing else). A node
    /// with a tower starts as the only version of its own chain.
    pub(super) fn allocate(
        arena: &Arena,
        height: usize,
        key_parts: [&[u8]; 2],
        value: &[u8],
    ) -> *mut Node {
        debug_assert!(height <= MAX_HEIGHT);
        let key_length = key_parts.iter().map(|part| part.len()).sum::<usize>();
        let links_bytes = link_words(height) * std::mem::size_of::<usize>();
        let size = NODE_HEADER_BYTES + links_bytes + key_length + value.len();
        let node = arena.allocate(size).cast::<Node>();
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
            let links = node
                .cast::<u8>()
                .add(NODE_HEADER_BYTES)
                .cast::<AtomicPtr<Node>>();
            if height > 0 {
                links.write(AtomicPtr::new(node));
            }
            for level in 0..height {
                links.add(1 + level).write(AtomicPtr::new(ptr::null_mut()));
            }
            let mut cursor = node.cast::<u8>().add(NODE_HEADER_BYTES + links_bytes);
            for part in key_parts.iter().chain(std::iter::once(&value)) {
                ptr::copy_nonoverlapping(part.as_ptr(), cursor, part.len());
                cursor = cursor.add(part.len());
            }
        }
        node
    }
}
