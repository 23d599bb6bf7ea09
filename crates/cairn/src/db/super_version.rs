//! `SuperVersion`: everything a read needs — the memory component (active and sealed write
//! buffers) and the version of on-disk tables — switched atomically (RCU) through an
//! `ArcSwap`; and the two ways a new one is installed (a buffer switch, a version edit).
//!
//! Thread-safety contract: a published `SuperVersion` is immutable; readers load it without
//! locks. Installs hold `super_version_update` only for the load-build-store of the pointer,
//! so two installs never lose each other's change.
//!
//! Invariants:
//! 1. `oldest_readable` never decreases from one super version to the next.
//! 2. A sealed buffer leaves only in the install of the version holding its flushed table
//!    (db invariant 3); a switch keeps the version and adds exactly one sealed buffer.

use super::inner::{lock, DbInner};
use crate::key::SequenceNumber;
use crate::memory::{MemComponent, WriteBuffer};
use crate::version::Version;
use std::sync::Arc;

/// Everything a read needs, switched atomically (RCU).
#[derive(Debug)]
pub struct SuperVersion {
    pub(super) memory: MemComponent,
    pub(super) version: Arc<Version>,
    /// Readers of the latest state must read at a sequence >= this (see `read_point`).
    pub(super) oldest_readable: SequenceNumber,
}

impl DbInner {
    /// The first sequence not yet handed out by the active buffer's log: every sequence below
    /// it is reserved (visible or on its way). It only grows.
    pub(super) fn next_unreserved_sequence(&self) -> SequenceNumber {
        self.super_version
            .load()
            .memory
            .active()
            .log()
            .next_sequence()
    }

    /// The sequence to read the latest state at, and a super version that still holds every
    /// version a reader at that sequence needs. A flush or compaction drops versions older
    /// than the newest one below its inputs' largest sequence; a reader that took its
    /// sequence before such an install but loaded the super version after it would miss
    /// them, so it retakes a later sequence (still inside its own call: linearizable).
    pub(super) fn read_point(&self) -> (SequenceNumber, arc_swap::Guard<Arc<SuperVersion>>) {
        loop {
            let sequence = self.read_sequence();
            let super_version = self.super_version.load();
            if sequence >= super_version.oldest_readable {
                return (sequence, super_version);
            }
        }
    }

    /// Installs the switch from the sealed active buffer `sealed` to `fresh`.
    pub(super) fn install_switch(&self, sealed: &Arc<WriteBuffer>, fresh: Arc<WriteBuffer>) {
        let _update = lock(&self.super_version_update);
        let current = self.super_version.load_full();
        debug_assert!(Arc::ptr_eq(current.memory.active(), sealed));
        let sealed_count = current.memory.sealed().len();
        let next = SuperVersion {
            memory: current.memory.sealed_into(fresh),
            version: Arc::clone(&current.version),
            oldest_readable: current.oldest_readable,
        };
        debug_assert_eq!(next.memory.sealed().len(), sealed_count + 1, "invariant 2");
        self.super_version.store(Arc::new(next));
        self.switch_parker.notify();
    }

    /// Installs `version` (just logged to the MANIFEST) and, for a flush, drops the flushed
    /// buffer, in one swap (invariant 2).
    pub(super) fn install_version(
        &self,
        version: Arc<Version>,
        flushed: Option<&Arc<WriteBuffer>>,
    ) {
        let _update = lock(&self.super_version_update);
        let current = self.super_version.load_full();
        // Every input of this flush or compaction is at or below the visible sequence
        // (flushes wait for it), so readers at or above it miss nothing dropped.
        let oldest_readable = self.visible().max(current.oldest_readable);
        debug_assert!(oldest_readable >= current.oldest_readable, "invariant 1");
        let memory = current.memory.without(flushed);
        debug_assert_eq!(
            memory.sealed().len() + usize::from(flushed.is_some()),
            current.memory.sealed().len(),
            "a flushed buffer was not in the super version"
        );
        self.super_version.store(Arc::new(SuperVersion {
            memory,
            version,
            oldest_readable,
        }));
    }
}
