//! The memtable's key index: an insert-only open-addressing hash table from a user key to its
//! *key node* (the skiplist node that heads the key's version chain), so a point lookup or a
//! read-modify-write of a key already in the memtable costs a probe and a chain walk instead of
//! a skiplist search (`FloDB`'s observation: point operations need no order, only a hash).
//!
//! Layout: a power-of-two array of 64-bit slots; a slot is 0 (empty) or `tag << 48 | address`,
//! where the tag is the top 16 bits of the key's hash and the address is the key node's (48
//! bits: user-space addresses on `x86_64` and aarch64 with 4-level tables). Probing is linear
//! from `hash & mask`, eight slots per cache line, at most `PROBE_LIMIT` slots.
//!
//! Thread-safety contract: `find` and `publish` may run on any number of threads at once and
//! never block. `find` writes no shared memory.
//!
//! Invariants:
//! 1. A slot goes from empty to full once and never changes again (no deletes, no moves), so a
//!    probe that meets an empty slot has seen every entry that was in its probe window when
//!    the slot was read.
//! 2. A node is published at most once: every publisher of a node walks the same probe
//!    sequence, and at each slot exactly one compare-and-swap from empty wins, so the first
//!    slot holding the node is where every later publisher of it stops.
//! 3. When a node cannot be published (no empty slot within `PROBE_LIMIT`, or an address
//!    wider than 48 bits) the index is marked `saturated` before the publisher returns, and a
//!    saturated index answers `Unknown` instead of `Absent`: a miss is authoritative only while
//!    every node that was ever meant to be published is.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Slots examined before a probe gives up (16 cache lines).
const PROBE_LIMIT: usize = 128;

// The slot array is allocated as zeroed `u64`s and then viewed as atomics.
const _: () = assert!(std::mem::align_of::<u64>() == std::mem::align_of::<AtomicU64>());
const _: () = assert!(std::mem::size_of::<u64>() == std::mem::size_of::<AtomicU64>());

/// The hash both `find` and `publish` take: the `MemStore` index's key hash (xxh3, the same on
/// every run and machine).
pub use crate::hashindex::hash_key as hash;

/// What a lookup learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The address of the node the caller's `matches` accepted.
    Found(usize),
    /// No node of the key has been published (authoritative: the index is not saturated).
    Absent,
    /// The index is saturated: the caller must search the skiplist.
    Unknown,
}

/// See the module documentation.
pub struct KeyIndex {
    slots: Box<[AtomicU64]>,
    mask: usize,
    saturated: AtomicBool,
}

impl std::fmt::Debug for KeyIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeyIndex")
            .field("slots", &self.slots.len())
            .field("saturated", &self.is_saturated())
            .finish()
    }
}

impl KeyIndex {
    /// An empty index of `slot_count` slots rounded up to a power of two (at least 8). The
    /// memory is zeroed by the allocator, so the operating system supplies it lazily.
    pub fn new(slot_count: usize) -> KeyIndex {
        let slot_count = slot_count.max(8).next_power_of_two();
        let zeroed: Box<[u64]> = vec![0u64; slot_count].into_boxed_slice();
        // SAFETY: `AtomicU64` has the size and alignment of `u64` (asserted above) and every
        // bit pattern, zero included, is a valid value of both; the box is reinterpreted with
        // the same length, so it is freed with the layout it was allocated with.
        let slots = unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [AtomicU64]) };
        KeyIndex {
            slots,
            mask: slot_count - 1,
            saturated: AtomicBool::new(false),
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes of the slot array.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<AtomicU64>()
    }

    /// True once some node could not be published (invariant 3).
    pub fn is_saturated(&self) -> bool {
        self.saturated.load(Ordering::Acquire)
    }

    // The hash is folded to `usize` on purpose: the mask keeps only its low bits anyway.
    #[allow(clippy::cast_possible_truncation)]
    #[inline]
    fn slot(&self, hash: u64, probe: usize) -> Option<&AtomicU64> {
        self.slots
            .get((hash as usize).wrapping_add(probe) & self.mask)
    }

    /// Hints the processor to fetch the first slot `find` or `publish` of `hash` reads.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if let Some(slot) = self.slot(hash, 0) {
            crate::sync::prefetch(slot.as_ptr());
        }
    }

    /// Looks `hash` up; `matches(address)` confirms a candidate whose tag matches (by comparing
    /// the key stored at that address).
    #[inline]
    pub fn find(&self, hash: u64, mut matches: impl FnMut(usize) -> bool) -> Lookup {
        if self.is_saturated() {
            return Lookup::Unknown;
        }
        for probe in 0..PROBE_LIMIT {
            let Some(slot) = self.slot(hash, probe) else {
                break;
            };
            let entry = slot.load(Ordering::Acquire);
            if entry == 0 {
                return Lookup::Absent;
            }
            if crate::tagged::matches(entry, hash) {
                // Addresses were packed from a `usize` (`publish`): the fold loses nothing.
                #[allow(clippy::cast_possible_truncation)]
                let address = crate::tagged::address(entry) as usize;
                if matches(address) {
                    return Lookup::Found(address);
                }
            }
        }
        // Every slot of the window is full: a publisher that found none empty would have
        // saturated the index before its write completed (invariant 3).
        if self.is_saturated() {
            Lookup::Unknown
        } else {
            Lookup::Absent
        }
    }

    /// Publishes `address` (nonzero) under `hash`; idempotent for the same pair (invariant 2).
    /// Returns false, after saturating the index, if it could not.
    pub fn publish(&self, hash: u64, address: usize) -> bool {
        let packed = crate::tagged::pack(address as u64, hash).filter(|_| address != 0);
        let Some(entry) = packed else {
            self.saturate();
            return false;
        };
        for probe in 0..PROBE_LIMIT {
            let Some(slot) = self.slot(hash, probe) else {
                break;
            };
            let mut current = slot.load(Ordering::Acquire);
            if current == 0 {
                match slot.compare_exchange(0, entry, Ordering::Release, Ordering::Acquire) {
                    Ok(_) => return true,
                    Err(actual) => current = actual,
                }
            }
            if current == entry {
                return true;
            }
        }
        self.saturate();
        false
    }

    fn saturate(&self) {
        self.saturated.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn used_slots(index: &KeyIndex) -> usize {
        index
            .slots
            .iter()
            .filter(|slot| slot.load(Ordering::Relaxed) != 0)
            .count()
    }

    #[test]
    fn finds_what_it_published_and_misses_the_rest() {
        let index = KeyIndex::new(64);
        let addresses: Vec<usize> = (1..=40).map(|n| n * 64).collect();
        for (key, &address) in addresses.iter().enumerate() {
            assert!(index.publish(hash(&key.to_le_bytes()), address));
        }
        for (key, &address) in addresses.iter().enumerate() {
            let found = index.find(hash(&key.to_le_bytes()), |candidate| candidate == address);
            assert_eq!(found, Lookup::Found(address));
        }
        assert_eq!(
            index.find(hash(&1000usize.to_le_bytes()), |_| false),
            Lookup::Absent
        );
        assert!(!index.is_saturated());
    }

    #[test]
    fn publishing_twice_uses_one_slot() {
        let index = KeyIndex::new(8);
        let key_hash = hash(b"k");
        assert!(index.publish(key_hash, 4096));
        assert!(index.publish(key_hash, 4096));
        let used = used_slots(&index);
        assert_eq!(used, 1);
    }

    #[test]
    fn a_full_index_saturates_and_stops_answering_absent() {
        let index = KeyIndex::new(8);
        for address in 1..=8usize {
            assert!(index.publish(hash(&address.to_le_bytes()), address * 8));
        }
        assert!(!index.is_saturated());
        // Every slot is full: a miss is still authoritative, nobody failed to publish.
        assert_eq!(index.find(hash(b"other"), |_| false), Lookup::Absent);
        assert!(!index.publish(hash(b"ninth"), 9 * 8));
        assert!(index.is_saturated());
        assert_eq!(index.find(hash(b"other"), |_| false), Lookup::Unknown);
    }

    #[test]
    fn an_address_wider_than_48_bits_saturates() {
        let index = KeyIndex::new(8);
        assert!(!index.publish(hash(b"k"), 1usize << 50));
        assert!(index.is_saturated());
    }

    #[test]
    fn concurrent_publishers_of_the_same_nodes_leave_each_once() {
        let index = Arc::new(KeyIndex::new(1 << 12));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let index = Arc::clone(&index);
                std::thread::spawn(move || {
                    for key in 0..1500usize {
                        assert!(index.publish(hash(&key.to_le_bytes()), (key + 1) * 8));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread
                .join()
                .unwrap_or_else(|_| panic!("publisher panicked"));
        }
        let used = used_slots(&index);
        assert_eq!(used, 1500);
        for key in 0..1500usize {
            let address = (key + 1) * 8;
            assert_eq!(
                index.find(hash(&key.to_le_bytes()), |candidate| candidate == address),
                Lookup::Found(address)
            );
        }
    }
}
