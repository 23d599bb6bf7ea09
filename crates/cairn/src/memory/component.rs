//! `MemComponent`: the memory part of one super version — the active write buffer and the
//! sealed ones waiting for their flush, newest first.
//!
//! Thread-safety contract: a `MemComponent` is an immutable value inside an RCU-published
//! super version. Its methods read concurrently-readable buffers and never lock; the changes
//! (`sealed_into`, `without`) build a new value that the caller publishes under its own
//! update lock.
//!
//! Invariants:
//! 1. `sealed` is ordered newest first and every buffer in it is sealed; sequence ranges are
//!    disjoint and increasing toward the active buffer (a seal hands the next log the next
//!    sequence).
//! 2. The active buffer is never sealed while it is the active buffer of a published
//!    component, except during the switch that replaces it (`sealed_into`).

use crate::batch::WriteBatch;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, SEQUENCE_MAX};
use crate::membuffer::DetachedHold;
use crate::memory::buffer::{Inserted, MemoryEntry, WriteBuffer, WriteHint};
use std::sync::Arc;

/// The active write buffer and the sealed ones (see the module documentation).
#[derive(Debug)]
pub struct MemComponent {
    active: Arc<WriteBuffer>,
    sealed: Vec<Arc<WriteBuffer>>,
}

impl MemComponent {
    /// A component with `active` and nothing sealed.
    pub fn new(active: WriteBuffer) -> Self {
        MemComponent {
            active: Arc::new(active),
            sealed: Vec::new(),
        }
    }

    /// The buffer writers reserve in.
    pub fn active(&self) -> &Arc<WriteBuffer> {
        &self.active
    }

    /// The sealed buffers, newest first.
    pub fn sealed(&self) -> &[Arc<WriteBuffer>] {
        &self.sealed
    }

    /// The oldest sealed buffer: the next one to flush.
    pub fn oldest_sealed(&self) -> Option<&Arc<WriteBuffer>> {
        self.sealed.last()
    }

    /// Inserts `batch` at sequences `first..` into the active buffer; returns the numbers of
    /// puts and deletes and the drains left to run once the write is published
    /// (`WriteBuffer::insert_batch`). Precondition: `first..first + batch.len()` was reserved
    /// in the active buffer's log.
    pub fn insert(
        &self,
        batch: &WriteBatch,
        first: SequenceNumber,
    ) -> std::result::Result<Inserted<'_>, String> {
        debug_assert!(first >= self.active.log().first_sequence());
        self.active.insert_batch(batch, first)
    }

    /// The newest version of `key` at or below `sequence`: the active buffer, then the
    /// sealed ones newest first (invariant 1 makes the first hit the newest).
    pub fn get(&self, key: &[u8], sequence: SequenceNumber) -> Option<MemoryEntry<'_>> {
        self.active.get(key, sequence).or_else(|| {
            self.sealed
                .iter()
                .find_map(|sealed| sealed.get(key, sequence))
        })
    }

    /// The newest version of `key` (any sequence, in-flight writes included) and a hint for
    /// inserting the next version into the active buffer (read-modify-write).
    pub fn get_hinted<'a>(&'a self, key: &'a [u8]) -> (Option<MemoryEntry<'a>>, WriteHint<'a>) {
        let (active, hint) = self.active.get_hinted(key);
        let found = active.or_else(|| {
            self.sealed
                .iter()
                .find_map(|sealed| sealed.get(key, SEQUENCE_MAX))
        });
        (found, hint)
    }

    /// One cursor per buffer, active first.
    pub fn iterators(&self) -> Vec<Box<dyn InternalIterator>> {
        std::iter::once(&self.active)
            .chain(&self.sealed)
            .map(|buffer| Box::new(buffer.iter()) as Box<dyn InternalIterator>)
            .collect()
    }

    /// A scan's cursors (sealed buffers drained now, the active one as the cursor moves:
    /// `WriteBuffer::scan_iter`, which takes `hold` when it has partitions to drain; else the
    /// hold ends here, after the sealed buffers' drains). Precondition: the scan's read point
    /// was taken after `hold` began.
    pub fn scan_iterators(
        &self,
        upper: Option<&[u8]>,
        hold: Option<DetachedHold>,
    ) -> Vec<Box<dyn InternalIterator>> {
        // The sealed buffers first: their drains must finish while the hold is still held.
        let sealed: Vec<Box<dyn InternalIterator>> = self
            .sealed
            .iter()
            .map(|buffer| Box::new(buffer.iter()) as Box<dyn InternalIterator>)
            .collect();
        std::iter::once(self.active.scan_iter(upper, hold))
            .chain(sealed)
            .collect()
    }

    /// The component after a switch: `fresh` active, the current active buffer sealed in
    /// front of the others. Precondition: the active buffer was sealed (`WriteBuffer::seal`)
    /// and `fresh`'s log starts where it stopped.
    pub fn sealed_into(&self, fresh: Arc<WriteBuffer>) -> MemComponent {
        debug_assert!(self.active.last_sequence().is_some());
        debug_assert_eq!(
            self.active.last_sequence().map(|last| last + 1),
            Some(fresh.log().first_sequence())
        );
        let mut sealed = Vec::with_capacity(self.sealed.len() + 1);
        sealed.push(Arc::clone(&self.active));
        sealed.extend(self.sealed.iter().cloned());
        let component = MemComponent {
            active: fresh,
            sealed,
        };
        component.check_invariants();
        component
    }

    /// The component without `flushed` (a sealed buffer now in a table), or unchanged.
    pub fn without(&self, flushed: Option<&Arc<WriteBuffer>>) -> MemComponent {
        MemComponent {
            active: Arc::clone(&self.active),
            sealed: self
                .sealed
                .iter()
                .filter(|sealed| flushed.is_none_or(|flushed| !Arc::ptr_eq(sealed, flushed)))
                .cloned()
                .collect(),
        }
    }

    /// Checks invariant 1 (with the `invariants` feature).
    fn check_invariants(&self) {
        if !cfg!(feature = "invariants") {
            return;
        }
        let mut newer_first = self.active.log().first_sequence();
        for sealed in &self.sealed {
            let last = sealed.last_sequence();
            assert!(last.is_some(), "a sealed buffer without a last sequence");
            assert!(
                last.is_some_and(|last| last < newer_first),
                "sealed buffers out of sequence order"
            );
            newer_first = sealed.log().first_sequence();
        }
    }
}
