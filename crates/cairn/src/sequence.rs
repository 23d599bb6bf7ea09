//! The published watermark: the largest sequence number S such that every write with a
//! sequence <= S has been inserted into its memtable.
//!
//! Writers finish out of order (cLSM §3.2): a writer that holds sequences `[first, last]`
//! records `last` in the ring slot of `first` once its inserts are done, then tries to advance
//! the watermark over every consecutive finished range. The watermark is what snapshots and
//! reads use (together with the WAL's written watermark): a snapshot at S is below every
//! in-flight write and at or above every acknowledged one, because a writer returns only
//! after the watermark covers its sequences. This replaces cLSM's Active set: instead of
//! finding the minimum of in-flight timestamps, readers load one word.
//!
//! Thread-safety contract: `finish` and `watermark` may be called from any thread without
//! locks. A writer waits only for the ring to have room (at most `RING_SLOTS` sequences
//! between the watermark and its first sequence) — a short wait for in-flight lower writes.
//!
//! Invariants:
//! 1. `watermark` only grows, and every sequence <= it has finished.
//! 2. `slots[first % RING_SLOTS]` holds `last` of the finished, not yet consumed range that
//!    starts at `first`, or 0. A range is stored only when `first < watermark + RING_SLOTS`,
//!    so two unconsumed ranges never share a slot.
//! 3. The consumer of a range clears its slot with a compare-and-swap on the exact value, so
//!    a newer range stored in the same slot is never erased.

use crate::sync::{spin_wait, AtomicU64, Ordering};

/// Ring size: how far sequence assignment may run ahead of the watermark.
pub const RING_SLOTS: usize = 1 << 14;

/// See the module documentation.
pub struct Watermark {
    watermark: AtomicU64,
    slots: Box<[AtomicU64]>,
}

impl std::fmt::Debug for Watermark {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Watermark")
            .field("watermark", &self.get())
            .finish()
    }
}

impl Watermark {
    /// A watermark at `start` (every sequence <= start is already finished).
    pub fn new(start: u64) -> Self {
        Self::with_slots(start, RING_SLOTS)
    }

    /// A watermark with a custom ring size (tests use tiny rings).
    pub fn with_slots(start: u64, slots: usize) -> Self {
        Watermark {
            watermark: AtomicU64::new(start),
            slots: (0..slots.max(2)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The largest S such that every sequence <= S has finished.
    #[inline]
    pub fn get(&self) -> u64 {
        self.watermark.load(Ordering::Acquire)
    }

    fn slot(&self, sequence: u64) -> Option<&AtomicU64> {
        let length = self.slots.len() as u64;
        let mut index = sequence % length;
        if length.is_power_of_two() && length >= 64 {
            // Rotate the index left by 3 bits inside its width: consecutive sequences (which
            // concurrent writers finish at the same moment) land 8 slots = one cache line
            // apart instead of sharing a line. A rotation is a bijection, so invariant 2
            // (distinct unconsumed ranges never share a slot) is untouched.
            let bits = length.trailing_zeros();
            index = ((index << 3) | (index >> (bits - 3))) & (length - 1);
        }
        // Always in range; `get` keeps the no-panic rule.
        self.slots.get(index as usize)
    }

    /// Records that `[first, last]` finished, advances the watermark as far as possible, and
    /// returns without waiting for lower sequences (see `wait_for`).
    pub fn finish(&self, first: u64, last: u64) {
        debug_assert!(first >= 1 && first <= last);
        let mut round = 0;
        // Invariant 2: wait for room in the ring.
        while first >= self.get() + self.slots.len() as u64 {
            spin_wait(&mut round);
        }
        if let Some(slot) = self.slot(first) {
            slot.store(last, Ordering::Release);
        }
        self.advance();
    }

    /// Moves the watermark over consecutive finished ranges.
    pub fn advance(&self) {
        loop {
            let current = self.get();
            let next = current + 1;
            let Some(slot) = self.slot(next) else {
                return;
            };
            let last = slot.load(Ordering::Acquire);
            // A stale value (a consumed range not yet cleared) is < next; a value for a
            // different range cannot be here (invariant 2) — only `last >= next` counts.
            if last < next {
                return;
            }
            if self
                .watermark
                .compare_exchange(current, last, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Invariant 3.
                let _ = slot.compare_exchange(last, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    /// Like `wait_for` but never yields and gives up after `rounds` spins: for a caller that
    /// must not sleep while it holds a sequence of its own (others may be waiting for it).
    /// Returns whether the watermark reached `sequence`.
    pub fn wait_for_spinning(&self, sequence: u64, rounds: u32) -> bool {
        for _ in 0..rounds {
            if self.get() >= sequence {
                return true;
            }
            self.advance();
            std::hint::spin_loop();
        }
        self.get() >= sequence
    }

    /// Waits until the watermark reaches `sequence`, helping to advance it.
    pub fn wait_for(&self, sequence: u64) {
        let mut round = 0;
        while self.get() < sequence {
            self.advance();
            if self.get() >= sequence {
                return;
            }
            spin_wait(&mut round);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn advances_only_over_consecutive_finished_ranges() {
        let watermark = Watermark::with_slots(0, 8);
        watermark.finish(3, 4);
        assert_eq!(watermark.get(), 0);
        watermark.finish(1, 2);
        assert_eq!(watermark.get(), 4);
        watermark.finish(6, 6);
        assert_eq!(watermark.get(), 4);
        watermark.finish(5, 5);
        assert_eq!(watermark.get(), 6);
        // Wrap around the ring many times.
        for first in 7..200u64 {
            watermark.finish(first, first);
        }
        assert_eq!(watermark.get(), 199);
    }

    #[test]
    fn slot_mapping_is_a_bijection_that_spreads_neighbours() {
        for length in [64usize, 1024, RING_SLOTS] {
            let watermark = Watermark::with_slots(0, length);
            let base = watermark.slots.as_ptr() as usize;
            let index = |sequence: u64| {
                let slot = watermark.slot(sequence).unwrap() as *const AtomicU64 as usize;
                (slot - base) / std::mem::size_of::<AtomicU64>()
            };
            let mut seen = vec![false; length];
            for sequence in 1000..1000 + length as u64 {
                let slot = index(sequence);
                assert!(!seen[slot], "slot {slot} used twice in one ring turn");
                seen[slot] = true;
                if sequence % 8 != 7 {
                    // Neighbours inside one aligned group of eight are a cache line apart.
                    assert!(index(sequence + 1).abs_diff(slot) >= 8);
                }
            }
        }
    }

    #[test]
    fn concurrent_finishers_never_expose_an_unfinished_sequence() {
        use std::sync::atomic::AtomicU64 as StdAtomic;
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 20_000;
        let watermark = Arc::new(Watermark::with_slots(0, 64));
        let next = Arc::new(StdAtomic::new(1));
        let finished: Arc<Vec<StdAtomic>> = Arc::new(
            (0..=THREADS * PER_THREAD * 3)
                .map(|_| StdAtomic::new(0))
                .collect(),
        );
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (watermark, next, finished) = (
                    Arc::clone(&watermark),
                    Arc::clone(&next),
                    Arc::clone(&finished),
                );
                std::thread::spawn(move || {
                    for round in 0..PER_THREAD {
                        let count = 1 + round % 3;
                        let first = next.fetch_add(count, std::sync::atomic::Ordering::SeqCst);
                        let last = first + count - 1;
                        for sequence in first..=last {
                            finished[sequence as usize]
                                .store(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        watermark.finish(first, last);
                        let seen = watermark.get();
                        assert!(seen >= 1 || first > 1);
                        for sequence in (seen.saturating_sub(5)).max(1)..=seen {
                            assert_eq!(
                                finished[sequence as usize]
                                    .load(std::sync::atomic::Ordering::SeqCst),
                                1,
                                "watermark {seen} covers unfinished {sequence}"
                            );
                        }
                        watermark.wait_for(last);
                        assert!(watermark.get() >= last);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(
            watermark.get(),
            next.load(std::sync::atomic::Ordering::SeqCst) - 1
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two writers finish out of order while a reader watches: the watermark never covers a
    /// range that has not finished, and ends at the last sequence.
    #[test]
    fn watermark_never_passes_an_unfinished_write() {
        loom::model(|| {
            let watermark = Arc::new(Watermark::with_slots(0, 4));
            let done_a = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let (w1, d1) = (Arc::clone(&watermark), Arc::clone(&done_a));
            let a = loom::thread::spawn(move || {
                d1.store(true, Ordering::SeqCst);
                w1.finish(1, 1);
            });
            let w2 = Arc::clone(&watermark);
            let b = loom::thread::spawn(move || {
                w2.finish(2, 3);
            });
            let seen = watermark.get();
            if seen >= 1 {
                assert!(done_a.load(Ordering::SeqCst));
            }
            a.join().unwrap();
            b.join().unwrap();
            watermark.advance();
            assert_eq!(watermark.get(), 3);
        });
    }
}
