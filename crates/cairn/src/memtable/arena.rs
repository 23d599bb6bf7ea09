//! A concurrent bump allocator for memtable nodes.
//!
//! Memory comes in chunks; a node is carved from a chunk by one atomic `fetch_add` on the
//! chunk's cursor. The arena keeps `LANES` current chunks, each on its own cache line, and a
//! thread allocates from the lane of its `thread_stripe`: concurrent writers then bump
//! different cursors and write their nodes into different chunks instead of fighting over
//! one cache line per insert (and false-sharing node bytes). When a lane's chunk is
//! exhausted, the thread that notices allocates a fresh chunk and installs it with a
//! compare-and-swap; a thread that loses the race frees its chunk and retries in the
//! winner's. Nodes larger than a quarter chunk get a dedicated chunk so they do not waste the
//! rest of a shared one. Nothing is freed until the arena drops, which is what a memtable
//! needs: nodes live exactly as long as the memtable.
//!
//! Accounting: each lane counts the bytes it handed out and moves them to the shared
//! `published_bytes` once they exceed `publish_threshold_bytes`, so the per-write "is the
//! memtable full?" check reads one rarely written word instead of every lane's hot line.
//!
//! Thread-safety contract: `allocate` may be called from many threads at once; returned
//! regions never overlap and stay valid until the arena is dropped.
//!
//! Invariants:
//! 1. Every returned pointer is `ALIGNMENT`-aligned and points to `size` bytes inside one
//!    chunk that no other allocation overlaps.
//! 2. Every chunk ever allocated is reachable from exactly one lane's `current` (through
//!    `previous`) or from `dedicated`, so `Drop` frees each exactly once.
//! 3. `published_bytes` plus every lane's `unpublished_bytes` equals the bytes handed out
//!    (between a lane's swap and the matching add, the sum is briefly low, never high).

use crate::sync::{thread_stripe, CachePadded};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Alignment of every allocation (enough for the `AtomicPtr` towers in nodes).
pub const ALIGNMENT: usize = 8;

#[repr(C)]
struct ChunkHeader {
    /// The chunk that was current before this one (or the next dedicated chunk).
    previous: *mut ChunkHeader,
    capacity_bytes: usize,
    used_bytes: AtomicUsize,
}

const HEADER_BYTES: usize = std::mem::size_of::<ChunkHeader>().next_multiple_of(ALIGNMENT);

fn chunk_layout(capacity_bytes: usize) -> Option<Layout> {
    Layout::from_size_align(HEADER_BYTES.checked_add(capacity_bytes)?, ALIGNMENT).ok()
}

/// Allocates a chunk whose first `claimed` bytes are already taken by the caller.
fn new_chunk(
    capacity_bytes: usize,
    claimed: usize,
    previous: *mut ChunkHeader,
) -> *mut ChunkHeader {
    let Some(layout) = chunk_layout(capacity_bytes) else {
        handle_alloc_error(Layout::new::<ChunkHeader>());
    };
    // SAFETY: the layout has non-zero size (it includes the header).
    let chunk = unsafe { alloc(layout) }.cast::<ChunkHeader>();
    if chunk.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `chunk` is freshly allocated, aligned for `ChunkHeader` and large enough.
    unsafe {
        chunk.write(ChunkHeader {
            previous,
            capacity_bytes,
            used_bytes: AtomicUsize::new(claimed),
        });
    }
    chunk
}

/// Start of a chunk's data area.
///
/// # Safety
/// `chunk` must point to a live chunk.
unsafe fn chunk_data(chunk: *mut ChunkHeader) -> *mut u8 {
    // SAFETY: the data area starts HEADER_BYTES after the header, inside the allocation.
    unsafe { chunk.cast::<u8>().add(HEADER_BYTES) }
}

/// Frees a chunk.
///
/// # Safety
/// `chunk` must come from `new_chunk`, not be freed yet, and not be used afterwards.
unsafe fn free_chunk(chunk: *mut ChunkHeader) {
    // SAFETY: the caller guarantees the chunk is live; its capacity came from `new_chunk`,
    // whose layout computation succeeded for it.
    unsafe {
        let capacity = (*chunk).capacity_bytes;
        if let Some(layout) = chunk_layout(capacity) {
            dealloc(chunk.cast::<u8>(), layout);
        }
    }
}

/// Lanes (current chunks) per arena: a power of two, at least the cores that usually write.
const LANES: usize = 4;

#[derive(Debug, Default)]
struct Lane {
    current: AtomicPtr<ChunkHeader>,
    unpublished_bytes: AtomicUsize,
}

/// The allocator. See the module documentation.
pub struct Arena {
    chunk_bytes: usize,
    publish_threshold_bytes: usize,
    lanes: [CachePadded<Lane>; LANES],
    dedicated: AtomicPtr<ChunkHeader>,
    published_bytes: AtomicUsize,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Arena")
            .field("chunk_bytes", &self.chunk_bytes)
            .field("allocated_bytes", &self.allocated_bytes())
            .finish()
    }
}

// SAFETY: the raw chunk pointers are owned by the arena; concurrent access to chunk headers
// goes through atomics, and data regions handed out never overlap (invariant 1).
unsafe impl Send for Arena {}
// SAFETY: as above; `allocate` is the only shared-mutation entry point and is thread-safe.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena carving chunks of `chunk_bytes` (at least 4 KiB).
    pub fn new(chunk_bytes: usize) -> Self {
        let chunk_bytes = chunk_bytes.max(4096).next_multiple_of(ALIGNMENT);
        Arena {
            chunk_bytes,
            // Small enough that the published count lags by well under a chunk per lane.
            publish_threshold_bytes: (chunk_bytes / 16).max(256),
            lanes: Default::default(),
            dedicated: AtomicPtr::new(ptr::null_mut()),
            published_bytes: AtomicUsize::new(0),
        }
    }

    /// Bytes handed out so far, exactly (reads every lane: for reports, not per write).
    pub fn allocated_bytes(&self) -> usize {
        self.lanes.iter().fold(self.published_bytes(), |sum, lane| {
            sum.saturating_add(lane.unpublished_bytes.load(Ordering::Relaxed))
        })
    }

    /// Bytes handed out, lagging `allocated_bytes` by less than `LANES` times the publish
    /// threshold; one load of a rarely written word, cheap enough for every write.
    pub fn published_bytes(&self) -> usize {
        self.published_bytes.load(Ordering::Relaxed)
    }

    fn account(&self, lane: &Lane, size: usize) {
        let pending = lane
            .unpublished_bytes
            .fetch_add(size, Ordering::Relaxed)
            .saturating_add(size);
        if pending >= self.publish_threshold_bytes {
            // `swap` (not a subtract of `pending`) so two threads of one lane that both see
            // the threshold never move the same bytes twice (invariant 3).
            let taken = lane.unpublished_bytes.swap(0, Ordering::Relaxed);
            self.published_bytes.fetch_add(taken, Ordering::Relaxed);
        }
    }

    /// Returns `size` bytes aligned to `ALIGNMENT`, valid until the arena drops.
    pub fn allocate(&self, size: usize) -> *mut u8 {
        let size = size.max(1).next_multiple_of(ALIGNMENT);
        // The mask keeps the index in range (`LANES` is a power of two), so this indexing
        // cannot panic.
        #[allow(clippy::indexing_slicing)]
        let lane = &self.lanes[thread_stripe() & (LANES - 1)].0;
        self.account(lane, size);
        if size > self.chunk_bytes / 4 {
            return self.allocate_dedicated(size);
        }
        loop {
            let chunk = lane.current.load(Ordering::Acquire);
            if !chunk.is_null() {
                // SAFETY: chunks stay alive until the arena drops (invariant 2).
                let header = unsafe { &*chunk };
                let offset = header.used_bytes.fetch_add(size, Ordering::Relaxed);
                if offset.saturating_add(size) <= header.capacity_bytes {
                    // SAFETY: [offset, offset + size) lies inside this chunk's data area and
                    // the fetch_add gave it to this caller alone.
                    return unsafe { chunk_data(chunk).add(offset) };
                }
            }
            // The chunk is exhausted: offer a new one that already holds this allocation.
            let fresh = new_chunk(self.chunk_bytes, size, chunk);
            match lane
                .current
                .compare_exchange(chunk, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: the first `size` bytes of `fresh` were claimed at creation.
                Ok(_) => return unsafe { chunk_data(fresh) },
                // SAFETY: `fresh` was never published; this thread still owns it.
                Err(_) => unsafe { free_chunk(fresh) },
            }
        }
    }

    fn allocate_dedicated(&self, size: usize) -> *mut u8 {
        let chunk = new_chunk(size, size, ptr::null_mut());
        let mut head = self.dedicated.load(Ordering::Acquire);
        loop {
            // SAFETY: `chunk` is not published yet; this thread owns it.
            unsafe { (*chunk).previous = head };
            match self
                .dedicated
                .compare_exchange(head, chunk, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => head = actual,
            }
        }
        // SAFETY: the whole data area of a dedicated chunk belongs to this allocation.
        unsafe { chunk_data(chunk) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let lanes = self.lanes.iter_mut().map(|lane| *lane.0.current.get_mut());
        for list in lanes.chain(std::iter::once(*self.dedicated.get_mut())) {
            let mut chunk = list;
            while !chunk.is_null() {
                // SAFETY: `&mut self` means no other thread uses the arena; every chunk is
                // reachable exactly once (invariant 2).
                let previous = unsafe { (*chunk).previous };
                // SAFETY: as above.
                unsafe { free_chunk(chunk) };
                chunk = previous;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn allocations_are_aligned_and_disjoint_across_threads() {
        let arena = Arc::new(Arena::new(4096));
        let handles: Vec<_> = (0..4)
            .map(|thread| {
                let arena = Arc::clone(&arena);
                std::thread::spawn(move || {
                    let mut regions = Vec::new();
                    for index in 0..5000usize {
                        let size = 1 + (index * 7 + thread) % 900;
                        let pointer = arena.allocate(size);
                        assert_eq!(pointer as usize % ALIGNMENT, 0);
                        // SAFETY: the region is ours; fill it to catch overlaps below.
                        unsafe { std::ptr::write_bytes(pointer, thread as u8, size) };
                        regions.push((pointer as usize, size, thread as u8));
                    }
                    regions
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            all.extend(handle.join().unwrap());
        }
        all.sort_unstable();
        let handed_out: usize = all
            .iter()
            .map(|region| region.1.next_multiple_of(ALIGNMENT))
            .sum();
        assert_eq!(arena.allocated_bytes(), handed_out);
        assert!(arena.published_bytes() <= handed_out);
        assert!(arena.published_bytes() + LANES * arena.publish_threshold_bytes >= handed_out);
        for pair in all.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "regions overlap");
        }
        for (pointer, size, thread) in all {
            // SAFETY: regions stay valid until the arena drops.
            let bytes = unsafe { std::slice::from_raw_parts(pointer as *const u8, size) };
            assert!(
                bytes.iter().all(|&byte| byte == thread),
                "region overwritten"
            );
        }
    }
}
