//! Bypassing a write buffer's Membuffer when its workload reads far more by scans than it
//! writes: the policy (`choose`, a pure decision over a window of counts) and the job
//! (`Membuffer::bypass`, which empties it and keeps it empty).
//!
//! Why: the Membuffer makes writes cheaper (a hash probe instead of a skiplist search) and
//! scans dearer — each scan holds the overwrite gate, finds its partition, asks whether it
//! holds versions, and reads the memtable through a draining cursor. Measured on this
//! project's 2-vCPU machine (`bench/results/2026-11-29-s30`): a scan paid about 790
//! instructions more (of about 59,000), and YCSB E (95 % scans, 5 % inserts) ran 1–2 %
//! slower with the Membuffer than without. Where scans outnumber writes by `scans_per_write` or more over a
//! window, the buffer is better off with the memtable alone, as with the Membuffer off. A
//! bypassed Membuffer stays bypassed; the next write buffer starts with a fresh one, so a
//! workload that turns to writes gets it back at the next switch.
//!
//! The job: under each partition's drain lock, the current table is swapped for none and
//! moved into the memtable as a drain moves it (sealed first, so a writer still inside is
//! waited for and a later one finds no table and writes to the memtable directly); then
//! `bypassed` is set. From then on writers skip the Membuffer on one load, lookups skip it,
//! and a scan that sees `bypassed` (after its read point and its hold of the gate) reads the
//! memtable with a plain cursor and releases its hold at once.
//!
//! Thread-safety contract: `bypass` runs on one thread at a time per Membuffer (the drainer
//! that chose it, or a test); it takes each partition's drain lock in turn, waiting for a
//! drain in progress. Every other method stays callable from any thread throughout.
//!
//! Invariants:
//! 1. Once `bypassed` is set, no partition has a table: every version inserted into the
//!    Membuffer is in the memtable (or was dropped by an in-place update the gate allowed
//!    before the bypass), and no insert or in-place update will reach a table again.
//! 2. A scan may skip the draining cursor only after it loaded `bypassed` as set, and it
//!    releases its gate hold only then: an in-place update that ran before the bypass either
//!    saw the hold (and moved its old version) or announced its sequence before the scan's
//!    check of the announcements (`gate` step 2); none runs after the bypass (1).

use super::{Membuffer, Partition};
use crate::memtable::Memtable;
use std::ptr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The shortest window the policy judges: shorter ones are too few operations to tell a
/// mix from a burst.
pub(super) const WINDOW_MIN: Duration = Duration::from_millis(100);

/// The fewest scans in a window for it to bypass the Membuffer: a few scans among no writes
/// (an idle database, a test) say nothing about the workload. A window stays open until it
/// holds this many, so a slow scan-heavy workload is judged too, only later.
pub(super) const WINDOW_SCANS_MIN: u64 = 1024;

/// The longest a window stays open waiting for `WINDOW_SCANS_MIN` scans: past it the window
/// is judged (and kept) and a new one starts, so old writes do not dilute a later mix.
pub(super) const WINDOW_MAX: Duration = Duration::from_secs(1);

/// What happened in one window of a write buffer's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Window {
    /// Scans made over the buffer.
    pub scans: u64,
    /// Versions written into the buffer (into the Membuffer, or past it to the memtable).
    pub writes: u64,
}

/// The policy's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    /// Keep the Membuffer.
    Keep,
    /// Bypass it: scans outnumbered writes by the configured factor.
    Bypass,
}

/// Bypass when the window's scans reach `scans_per_write` times its writes, and at least
/// `WINDOW_SCANS_MIN`; `scans_per_write` 0 never bypasses.
pub(super) fn choose(window: Window, scans_per_write: u32) -> Choice {
    if scans_per_write == 0 || window.scans < WINDOW_SCANS_MIN {
        return Choice::Keep;
    }
    let writes_weighted = window.writes.saturating_mul(u64::from(scans_per_write));
    if window.scans >= writes_weighted {
        Choice::Bypass
    } else {
        Choice::Keep
    }
}

/// The counts at the start of the current window, kept by the thread that judges.
#[derive(Debug)]
pub(super) struct WindowStart {
    at: Instant,
    counts: Window,
}

impl WindowStart {
    /// A window starting now, at `counts`.
    pub(super) fn new(counts: Window) -> WindowStart {
        WindowStart {
            at: Instant::now(),
            counts,
        }
    }

    /// The window from this start to `now`'s `counts`, once it is ready to judge: at least
    /// `WINDOW_MIN` long, and holding `WINDOW_SCANS_MIN` scans or `WINDOW_MAX` old. The caller
    /// then starts the next one.
    pub(super) fn finish(&self, counts: Window, now: Instant) -> Option<Window> {
        let age = now.duration_since(self.at);
        let window = Window {
            scans: counts.scans.saturating_sub(self.counts.scans),
            writes: counts.writes.saturating_sub(self.counts.writes),
        };
        let ready = age >= WINDOW_MIN && (window.scans >= WINDOW_SCANS_MIN || age >= WINDOW_MAX);
        ready.then_some(window)
    }
}

impl Membuffer {
    /// Whether the Membuffer was bypassed (invariant 1): it holds nothing and takes nothing.
    #[inline]
    pub(crate) fn is_bypassed(&self) -> bool {
        self.bypassed.load(Ordering::SeqCst)
    }

    /// Counts a scan through a draining cursor over this Membuffer (the policy's counts).
    #[inline]
    pub(crate) fn count_scan(&self) {
        self.scans.add(1);
    }

    /// This buffer's scans and writes so far (the policy's counts). The write counters are
    /// the database's, but only the active buffer takes writes, so a window's difference is
    /// this buffer's.
    pub(super) fn window_counts(&self) -> Window {
        let counters = &self.config.counters;
        Window {
            scans: self.scans.get(),
            writes: counters.writes.get() + counters.direct_writes.get(),
        }
    }

    /// Judges the window that `start` began, if it is over, and bypasses the Membuffer if
    /// the policy says so; returns true if it bypassed it.
    pub(super) fn judge(&self, start: &mut WindowStart, memtable: &Memtable) -> bool {
        // Without partitions every write goes to the memtable already, and a layout built
        // during the bypass would give writers tables again.
        if self.layout.get().is_none() || self.is_bypassed() {
            return false;
        }
        if !self.config.bypass_at_once {
            let counts = self.window_counts();
            let Some(window) = start.finish(counts, Instant::now()) else {
                return false;
            };
            *start = WindowStart::new(counts);
            if choose(window, self.config.bypass_scans_per_write) == Choice::Keep {
                return false;
            }
        }
        self.bypass(memtable);
        true
    }

    /// Empties the Membuffer into `memtable` for good (see the module documentation).
    /// Precondition: the partitions exist.
    pub(super) fn bypass(&self, memtable: &Memtable) {
        let Some(layout) = self.layout.get() else {
            debug_assert!(false, "bypass before the partitions exist");
            return;
        };
        for partition in &layout.partitions {
            let _guard = partition
                .drain_lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.bypass_locked(partition, memtable);
        }
        if cfg!(feature = "invariants") {
            // Invariant 1: writers find no table from now on (none installs one: only a drain
            // does, and a drain installs one only in place of a current table).
            assert!(
                layout
                    .partitions
                    .iter()
                    .all(|partition| partition.current.load(Ordering::SeqCst).is_null()),
                "a bypassed Membuffer still has a table (invariant 1)"
            );
        }
        // Invariant 1: after every partition lost its table.
        self.bypassed.store(true, Ordering::SeqCst);
        self.config.counters.bypasses.add(1);
    }

    /// Swaps `partition`'s current table for none and moves it into the memtable with a
    /// drain's own steps (`install_locked`, `move_locked`). Precondition:
    /// the caller holds the partition's drain lock.
    fn bypass_locked(&self, partition: &Partition, memtable: &Memtable) {
        let old = partition.current.load(Ordering::SeqCst);
        // SAFETY: `mod` invariant 3: the drain lock holder is the only thread that retires a
        // table, so the current one is alive.
        let Some(old_table) = (unsafe { old.as_ref() }) else {
            return;
        };
        // `mod` invariant 5: counted before any of its versions can reach the memtable.
        self.drains.started.fetch_add(1, Ordering::SeqCst);
        Self::install_locked(partition, old_table, ptr::null_mut());
        self.move_locked(partition, old, memtable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bypasses_only_when_scans_outnumber_writes_by_the_factor() {
        let window = |scans, writes| Window { scans, writes };
        assert_eq!(choose(window(19_000, 1_000), 8), Choice::Bypass, "YCSB E");
        assert_eq!(
            choose(window(8_000, 1_000), 8),
            Choice::Bypass,
            "at the factor"
        );
        assert_eq!(choose(window(7_999, 1_000), 8), Choice::Keep);
        assert_eq!(
            choose(window(5_000, 95_000), 8),
            Choice::Keep,
            "scans and writes"
        );
        assert_eq!(choose(window(50_000, 0), 8), Choice::Bypass, "scans only");
        assert_eq!(
            choose(window(WINDOW_SCANS_MIN - 1, 0), 8),
            Choice::Keep,
            "too few scans to tell"
        );
        assert_eq!(choose(window(u64::MAX, 0), 0), Choice::Keep, "0: never");
        assert_eq!(
            choose(window(u64::MAX / 2, u64::MAX / 4), u32::MAX),
            Choice::Keep,
            "no overflow"
        );
    }

    #[test]
    fn a_window_is_judged_once_long_enough_and_holding_enough_scans() {
        let start = WindowStart::new(Window {
            scans: 10,
            writes: 4,
        });
        let busy = Window {
            scans: 5_000,
            writes: 6,
        };
        assert_eq!(start.finish(busy, start.at), None, "too short");
        assert_eq!(
            start.finish(busy, start.at + WINDOW_MIN),
            Some(Window {
                scans: 4_990,
                writes: 2
            })
        );
        let slow = Window {
            scans: 500,
            writes: 6,
        };
        let middle = start.at + (WINDOW_MIN + WINDOW_MAX) / 2;
        assert_eq!(start.finish(slow, middle), None, "still gathering scans");
        assert_eq!(
            start.finish(slow, start.at + WINDOW_MAX),
            Some(Window {
                scans: 490,
                writes: 2
            }),
            "judged (and kept) at the longest"
        );
    }
}
