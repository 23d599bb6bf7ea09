//! The published watermark: the largest sequence number S such that every write with a
//! sequence <= S has been inserted into its memtable.
//!
//! Writers finish out of order (cLSM §3.2): a writer that holds sequences `[first, last]`
//! records `last` in the ring slot of `first` once its inserts are done, then tries to advance
//! the watermark over every consecutive finished range. The watermark is what snapshots and
//! reads use (together with the WAL's written watermark): a snapshot at S is below every
//! in-flight write. It is also at or above every acknowledged one, because a read first waits
//! for the watermark to reach [`Acknowledged`] — the writes that returned while a lower write
//! was still in flight — so writers never wait for each other's inserts (only, rarely, for room
//! in the ring). This replaces cLSM's Active
//! set: instead of finding the minimum of in-flight timestamps, readers load two words.
//!
//! Thread-safety contract: `finish` and `watermark` may be called from any thread without
//! locks. A writer waits only for the ring to have room (at most `RING_SLOTS` sequences
//! between the watermark and its first sequence) — a short wait for in-flight lower writes.
//! Waiters (`wait_for`, the ring-room wait, `Acknowledged::read_sequence`) spin, yield, then
//! park on the watermark's `Parker`, so a waiter for a descheduled writer leaves it the core.
//!
//! Invariants:
//! 1. `watermark` only grows, and every sequence <= it has finished.
//! 2. `slots[first % RING_SLOTS]` holds `last` of the finished, not yet consumed range that
//!    starts at `first`, or 0. A range is stored only when `first < watermark + RING_SLOTS`,
//!    so two unconsumed ranges never share a slot.
//! 3. The consumer of a range clears its slot with a compare-and-swap on the exact value, so
//!    a newer range stored in the same slot is never erased.
//! 4. Progress without helpers: once every range up to S has finished, the watermark is at
//!    least S when the last of those `finish` calls returns. A finisher stores its slot and
//!    then, after a full fence, tries to advance; of two finishers of neighbouring ranges,
//!    at least one sees the other's slot.
//! 5. Every move of the watermark is a `SeqCst` compare-and-swap followed, in the same
//!    `advance`, by a `SeqCst` load of the parker's count and a wake-up if it is non-zero:
//!    a waiter parks only after checking the watermark once more (`sync::Parker`), so no
//!    waiter sleeps through the move that satisfies it (longer than `PARK_TIMEOUT`).

use crate::sync::{fence, AtomicU64, Ordering, Parker};

/// Ring size: how far sequence assignment may run ahead of the watermark.
pub const RING_SLOTS: usize = 1 << 14;

/// See the module documentation.
// The watermark word is the heart of the type; naming it anything else would obscure that.
#[allow(clippy::struct_field_names)]
pub struct Watermark {
    watermark: AtomicU64,
    /// Where waiters for the watermark sleep after a short spin (`wait_for`, the ring-room
    /// wait, `Acknowledged::read_sequence`); `advance` wakes them.
    parker: Parker,
    slots: Box<[AtomicU64]>,
    /// `slots.len() - 1` when the ring size is a power of two (always, outside tests): the
    /// slot index is then a mask instead of a 64-bit division on every `finish`.
    index_mask: Option<u64>,
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
        let length = slots.max(2);
        Watermark {
            watermark: AtomicU64::new(start),
            parker: Parker::default(),
            slots: (0..length).map(|_| AtomicU64::new(0)).collect(),
            index_mask: length.is_power_of_two().then_some(length as u64 - 1),
        }
    }

    /// The largest S such that every sequence <= S has finished.
    #[inline]
    pub fn get(&self) -> u64 {
        self.watermark.load(Ordering::Acquire)
    }

    /// Where waiters for this watermark park; `advance` notifies it.
    pub fn parker(&self) -> &Parker {
        &self.parker
    }

    fn slot(&self, sequence: u64) -> Option<&AtomicU64> {
        let length = self.slots.len() as u64;
        let mut index = match self.index_mask {
            Some(mask) => sequence & mask,
            None => sequence % length,
        };
        if self.index_mask.is_some() && length >= 64 {
            // Rotate the index left by 3 bits inside its width: consecutive sequences (which
            // concurrent writers finish at the same moment) land 8 slots = one cache line
            // apart instead of sharing a line. A rotation is a bijection, so invariant 2
            // (distinct unconsumed ranges never share a slot) is untouched.
            let bits = length.trailing_zeros();
            index = ((index << 3) | (index >> (bits - 3))) & (length - 1);
        }
        // Always in range; `get` keeps the no-panic rule.
        usize::try_from(index)
            .ok()
            .and_then(|index| self.slots.get(index))
    }

    /// Records that `[first, last]` finished, advances the watermark as far as possible, and
    /// returns without waiting for lower sequences (see `wait_for`).
    pub fn finish(&self, first: u64, last: u64) {
        debug_assert!(first >= 1 && first <= last);
        let mut round = 0;
        // Invariant 2: wait for room in the ring.
        let room = |watermark: u64| first < watermark + self.slots.len() as u64;
        while !room(self.get()) {
            self.parker.wait(&mut round, || room(self.get()));
        }
        if let Some(slot) = self.slot(first) {
            slot.store(last, Ordering::Release);
        }
        // Invariant 4. Two writers finishing neighbouring ranges each store their slot, then
        // look at the other's: without a full fence both loads may miss both stores (store
        // buffering), and neither advances. Nobody else would: writers do not wait for the
        // watermark, and readers only read it.
        fence(Ordering::SeqCst);
        self.advance();
    }

    /// Moves the watermark over consecutive finished ranges, and wakes parked waiters if it
    /// moved it.
    pub fn advance(&self) {
        let mut moved = false;
        loop {
            let current = self.get();
            let next = current + 1;
            let Some(slot) = self.slot(next) else {
                break;
            };
            let last = slot.load(Ordering::Acquire);
            // A stale value (a consumed range not yet cleared) is < next; a value for a
            // different range cannot be here (invariant 2) — only `last >= next` counts.
            if last < next {
                // The slot may read empty because another finisher consumed it and moved the
                // watermark after our first load: look again from the new watermark, or a
                // range stored behind it could be left for no one (invariant 4).
                if self.get() != current {
                    continue;
                }
                break;
            }
            if self
                .watermark
                // SeqCst: the Dekker handshake with a parking waiter (`Parker::park`) needs
                // this change and the load of the parked count below both to be SeqCst.
                .compare_exchange(current, last, Ordering::SeqCst, Ordering::Acquire)
                .is_ok()
            {
                moved = true;
                // Invariant 3.
                let _ = slot.compare_exchange(last, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
        if moved {
            self.parker.notify_after_seqcst();
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
            self.parker.wait(&mut round, || self.get() >= sequence);
        }
    }
}

/// The read side of linearizability (cLSM §3.2, the linearizable snapshot): the largest
/// sequence acknowledged to a writer while the visible sequence was still below it.
///
/// Writers finish out of order and do not wait for lower in-flight writes: a writer whose
/// own insert and log write are done returns at once, even when the visible sequence (the
/// inserted watermark, capped by the WAL's written one) is still below its sequence because a
/// lower write is mid-insert. A read that starts after that return must still see the write,
/// so it waits until the visible sequence reaches this value — the wait cLSM puts in
/// `getSnap`. It is paid by a reader only while some write acknowledged before it is above
/// the visible sequence, which lasts as long as the slowest lower write's insert.
///
/// Thread-safety contract: both methods may be called from any thread without locks.
///
/// Invariants:
/// 1. Every acknowledged sequence is `<=` the visible sequence at the moment of its
///    acknowledgment or `<=` this value, which only grows. A reader that starts after an
///    acknowledgment returned therefore sees it in one of the two loads.
/// 2. Only acknowledged sequences are recorded, and an acknowledged write has finished its
///    insert and its log write; the lower writes a reader waits for are running, so the wait
///    ends unless one of them fails (the caller's `give_up`).
#[derive(Debug)]
pub struct Acknowledged {
    // Its own cache lines: written by writers finishing out of order, read by every read.
    sequence: crate::sync::CachePadded<AtomicU64>,
}

impl Acknowledged {
    /// Nothing acknowledged above `start` yet.
    pub fn new(start: u64) -> Self {
        Acknowledged {
            sequence: crate::sync::CachePadded(AtomicU64::new(start)),
        }
    }

    /// The write ending at `sequence` (inserted and logged) is being acknowledged;
    /// `visible` is the visible sequence loaded after it finished. The shared word is written
    /// only when a lower write is still in flight.
    #[inline]
    pub fn acknowledge(&self, sequence: u64, visible: u64) {
        if visible < sequence {
            self.sequence.fetch_max(sequence, Ordering::AcqRel);
        }
    }

    /// The sequence a read that starts now uses: `visible()` once it has reached every
    /// acknowledged sequence, so it is at or above every write acknowledged before this call
    /// and covers only finished writes. Spins, then yields, then parks while a lower write
    /// finishes. Once `give_up()` holds (a sticky error) the wait is bounded by
    /// `GIVE_UP_AFTER`, then the visible sequence is returned as it is: a lower write always
    /// finishes its insert (its range is finished before its WAL wait, failed or not), so a
    /// sticky error alone is no reason to stop waiting — a writer would miss its own
    /// acknowledged write — but a writer whose thread died mid-insert never finishes.
    ///
    /// `parker` is the inserted watermark's: the wait is for lower writes' inserts (an
    /// acknowledged write was written to the OS, so the written watermark is already past
    /// it), and the watermark's `advance` wakes it.
    pub fn read_sequence(
        &self,
        visible: impl Fn() -> u64,
        give_up: impl Fn() -> bool,
        parker: &Parker,
    ) -> u64 {
        const GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
        let target = self.sequence.load(Ordering::Acquire);
        let mut current = visible();
        let mut round = 0;
        let mut deadline = None;
        while current < target {
            if give_up() {
                let deadline =
                    *deadline.get_or_insert_with(|| std::time::Instant::now() + GIVE_UP_AFTER);
                if std::time::Instant::now() >= deadline {
                    break;
                }
            }
            parker.wait(&mut round, || visible() >= target);
            current = visible();
        }
        current
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
        // 100: not a power of two, so the index is a plain remainder (bijective, not spread).
        for length in [64usize, 100, 1024, RING_SLOTS] {
            let watermark = Watermark::with_slots(0, length);
            let base = watermark.slots.as_ptr() as usize;
            let index = |sequence: u64| {
                let slot =
                    std::ptr::from_ref::<AtomicU64>(watermark.slot(sequence).unwrap()) as usize;
                (slot - base) / std::mem::size_of::<AtomicU64>()
            };
            let mut seen = vec![false; length];
            for sequence in 1000..1000 + length as u64 {
                let slot = index(sequence);
                assert!(!seen[slot], "slot {slot} used twice in one ring turn");
                seen[slot] = true;
                if sequence % 8 != 7 && length.is_power_of_two() {
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
            // No `advance` from a waiter here: writers no longer wait for the watermark, so
            // the finishers alone must carry it to the end.
            assert_eq!(watermark.get(), 3);
        });
    }

    /// A writer that finishes above an in-flight lower write is acknowledged without waiting
    /// for it; a read that starts after the acknowledgment still reads at or above the
    /// write's sequence, and never above an unfinished one.
    #[test]
    fn a_read_after_an_acknowledgment_sees_the_write() {
        // The reader's spin makes the full state space take many minutes; three preemptions
        // cover the orders that matter (the upper writer finishing and acknowledging between
        // any two steps of the lower one).
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let watermark = Arc::new(Watermark::with_slots(0, 4));
            let acknowledged = Arc::new(Acknowledged::new(0));
            let lower_done = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let returned = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let lower = {
                let (watermark, lower_done) = (Arc::clone(&watermark), Arc::clone(&lower_done));
                loom::thread::spawn(move || {
                    lower_done.store(true, Ordering::SeqCst);
                    watermark.finish(1, 1);
                })
            };
            let upper = {
                let (watermark, acknowledged, returned) = (
                    Arc::clone(&watermark),
                    Arc::clone(&acknowledged),
                    Arc::clone(&returned),
                );
                loom::thread::spawn(move || {
                    watermark.finish(2, 2);
                    acknowledged.acknowledge(2, watermark.get());
                    returned.store(true, Ordering::Release);
                })
            };
            // A read that starts after the upper write returned must read at or above it,
            // and (like every read) never above the unfinished lower write.
            if returned.load(Ordering::Acquire) {
                let read =
                    acknowledged.read_sequence(|| watermark.get(), || false, watermark.parker());
                assert!(
                    read >= 2,
                    "read at {read} after sequence 2 was acknowledged"
                );
                assert!(lower_done.load(Ordering::SeqCst));
            }
            lower.join().unwrap();
            upper.join().unwrap();
        });
    }
}
