//! Atomics used by the lock-free protocols, switchable to loom's model-checked versions.
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
