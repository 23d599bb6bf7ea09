//! Atomics used by the lock-free fast paths, switchable to loom's model-checked versions,
//! and `spin_wait`, the back-off of a thread waiting for another thread's progress.
//!
//! Build with `RUSTFLAGS="--cfg loom"` (and a separate `CARGO_TARGET_DIR`) to run the loom
//! tests of `sequence`, `wal_writer`, `epoch` and `hashindex`; every other build uses `std`.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

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
        if *round < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
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
        // The mask keeps the index in range without a bounds check that could panic.
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
