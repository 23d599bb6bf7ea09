//! Atomics used by the lock-free fast paths, switchable to loom's model-checked versions;
//! `prefetch`, the cache-line hint the memtable and the Membuffer issue ahead of a miss;
//! `spin_wait`, the back-off of a thread waiting for another thread's progress; and
//! [`Parker`], which lets such a waiter sleep once spinning and yielding did not help.
//!
//! Build with `RUSTFLAGS="--cfg loom"` (and a separate `CARGO_TARGET_DIR`) to run the loom
//! tests of `sequence`, `wal_writer`, `epoch` and `hashindex`; every other build uses `std`.
//!
//! Thread-safety contract: everything here may be used from any thread. A `Parker` is shared
//! by the waiters of one structure and the threads that make progress on it.
//!
//! Invariants:
//! 1. A parked waiter is counted in `Parker::parked` from before it checks its condition the
//!    last time until after it wakes, and both that check and the notifier's load of the
//!    count come after a sequentially consistent fence or operation (see `Parker::park`), so
//!    a notifier that sees no parked waiter made its change visible to every waiter's check.
//! 2. No park lasts longer than `PARK_TIMEOUT`: a missed wake-up costs at most that.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Hints the processor to fetch the cache line holding `address` (a no-op on a null pointer
/// and on architectures without a stable prefetch instruction). Lets a caller overlap several
/// independent cache misses instead of paying them one after another. The one prefetch of the
/// crate: the memtable, the Membuffer, the `SSTable` Bloom filter and the log memory use it.
// Always inlined: a prefetch behind a call would arrive too late to hide the miss.
#[allow(clippy::inline_always)]
#[inline(always)]
pub fn prefetch<T>(address: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is only a hint: it never faults, even on an invalid address, and
    // changes no program state.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = address;
}

/// Rounds of `spin_wait` that only spin (the usual wait: another writer's memcpy and insert).
const SPIN_ROUNDS: u32 = 64;
/// Rounds of `Parker::wait` (spins, then yields) before the waiter parks.
pub const PARK_AFTER_ROUNDS: u32 = SPIN_ROUNDS + 16;
/// The longest park (invariant 2): a safety net against a missed wake-up, long next to a
/// running writer's work and short next to a descheduled one's time slice.
pub const PARK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1);

/// Gives other threads a chance to run while waiting for them (loom needs to know).
#[inline]
pub fn spin_wait(round: &mut u32) {
    #[cfg(loom)]
    {
        let _ = round;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        // Spin briefly (the wait is usually a few hundred nanoseconds of another writer's
        // memcpy), then yield so an oversubscribed machine lets the awaited thread run.
        *round = round.saturating_add(1);
        if *round < SPIN_ROUNDS {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Where waiters for one structure sleep once spinning and yielding did not help: a
/// descheduled thread that they wait for then gets a core instead of sharing it with them.
///
/// The waiter calls `wait` in its loop; the thread that makes progress calls `notify` (or
/// `notify_after_seqcst` when its change was a `SeqCst` read-modify-write) after the change.
/// With nobody parked, `notify_after_seqcst` is one load and `notify` a fence and one load.
#[derive(Debug, Default)]
pub struct Parker {
    /// Waiters between registering and waking (invariant 1).
    parked: std::sync::atomic::AtomicUsize,
    lock: std::sync::Mutex<()>,
    wakeup: std::sync::Condvar,
}

impl Parker {
    /// One step of a wait: spin, then yield, and from `PARK_AFTER_ROUNDS` on park until
    /// notified or `PARK_TIMEOUT` unless `ready()` already holds. `ready` must only load
    /// (it runs under the parker's lock, so it must never call `notify`).
    pub fn wait(&self, round: &mut u32, ready: impl FnOnce() -> bool) {
        if cfg!(loom) || *round < PARK_AFTER_ROUNDS {
            spin_wait(round);
            return;
        }
        self.park(ready);
    }

    /// Registers, checks `ready` once more, and sleeps unless it holds.
    fn park(&self, ready: impl FnOnce() -> bool) {
        use std::sync::atomic::{fence as std_fence, Ordering as StdOrdering};
        let guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.parked.fetch_add(1, StdOrdering::SeqCst);
        // Invariant 1, the waiter's half of a Dekker handshake: the count is raised before
        // the condition is loaded. The notifier changes the condition, then (after a SeqCst
        // fence or SeqCst read-modify-write) loads the count. With SeqCst on both sides the
        // two cannot both read the old value (store buffering is ruled out): either this
        // check sees the change, or the notifier sees the count and notifies — and it takes
        // this lock first, which we hold until `wait_timeout` releases it atomically, so
        // the notification cannot fall between our check and our sleep.
        std_fence(StdOrdering::SeqCst);
        if !ready() {
            let _ = self.wakeup.wait_timeout(guard, PARK_TIMEOUT);
        }
        let before = self.parked.fetch_sub(1, StdOrdering::Relaxed);
        if cfg!(feature = "invariants") {
            // Invariant 1: this waiter was counted until now.
            assert!(before >= 1, "a parked waiter was not counted");
        }
    }

    /// Wakes every parked waiter, if any, after a change made with weaker orderings.
    #[inline]
    pub fn notify(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.notify_after_seqcst();
    }

    /// Wakes every parked waiter, if any. The caller's change must have been a `SeqCst`
    /// read-modify-write (then this load, `SeqCst` too, is ordered after it; on x86 and
    /// `AArch64` neither costs more than its acquire-release form).
    #[inline]
    pub fn notify_after_seqcst(&self) {
        if self.parked.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return;
        }
        // Taking the lock orders this after a waiter's check-then-sleep (see `park`).
        drop(
            self.lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        self.wakeup.notify_all();
    }
}

/// Keeps `T` on cache lines of its own, so two threads updating neighbouring values do not
/// invalidate each other's line (128 bytes: adjacent-line prefetchers pull lines in pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A small per-thread number, handed out round-robin the first time a thread asks. Striped
/// structures index their stripes with it so that concurrent threads usually write
/// different cache lines; two threads may share a number, so it is a hint, never an owner.
#[inline]
pub fn thread_stripe() -> usize {
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;
    static NEXT: StdAtomicUsize = StdAtomicUsize::new(0);
    std::thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    STRIPE.with(|stripe| *stripe)
}

/// Stripes of `StripedCounter` (a power of two; more than the threads that usually write).
pub const COUNTER_STRIPES: usize = 8;

/// A statistics counter split over cache lines: `add` touches the calling thread's stripe
/// only, `get` sums them. Relaxed throughout — it counts, it never orders anything.
#[derive(Debug, Default)]
pub struct StripedCounter {
    stripes: [CachePadded<std::sync::atomic::AtomicU64>; COUNTER_STRIPES],
}

impl StripedCounter {
    /// Adds `amount` (no memory traffic at all for zero).
    #[inline]
    pub fn add(&self, amount: u64) {
        if amount == 0 {
            return;
        }
        // The mask keeps the index in range (`COUNTER_STRIPES` is a power of two) without a
        // bounds check that could panic.
        #[allow(clippy::indexing_slicing)]
        let stripe = &self.stripes[thread_stripe() & (COUNTER_STRIPES - 1)];
        stripe
            .0
            .fetch_add(amount, std::sync::atomic::Ordering::Relaxed);
    }

    /// The sum over all stripes (not an atomic snapshot across stripes).
    pub fn get(&self) -> u64 {
        self.stripes.iter().fold(0u64, |sum, stripe| {
            sum.wrapping_add(stripe.0.load(std::sync::atomic::Ordering::Relaxed))
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_parked_waiter_wakes_on_notify_and_is_uncounted_after() {
        use std::sync::atomic::AtomicBool as StdBool;
        let parker = std::sync::Arc::new(Parker::default());
        let flag = std::sync::Arc::new(StdBool::new(false));
        let waiter = {
            let (parker, flag) = (std::sync::Arc::clone(&parker), std::sync::Arc::clone(&flag));
            std::thread::spawn(move || {
                let mut round = 0;
                while !flag.load(std::sync::atomic::Ordering::Acquire) {
                    parker.wait(&mut round, || {
                        flag.load(std::sync::atomic::Ordering::Acquire)
                    });
                }
                round
            })
        };
        // Wait until the waiter is really parked (a fixed sleep was flaky on a loaded
        // machine: the waiter had not spun and yielded its way to the park stage yet).
        let started = std::time::Instant::now();
        while parker.parked.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the waiter never parked"
            );
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        flag.store(true, std::sync::atomic::Ordering::Release);
        parker.notify();
        let rounds = waiter.join().unwrap();
        assert!(
            rounds >= PARK_AFTER_ROUNDS,
            "the waiter never reached the park stage"
        );
        assert_eq!(parker.parked.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn striped_counter_sums_every_thread() {
        let counter = std::sync::Arc::new(StripedCounter::default());
        let handles: Vec<_> = (0..12)
            .map(|_| {
                let counter = std::sync::Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        counter.add(3);
                    }
                    counter.add(0);
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(counter.get(), 36_000);
        assert_eq!(std::mem::align_of::<CachePadded<u8>>(), 128);
    }
}
