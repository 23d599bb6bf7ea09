//! Drainer threads: they move full-enough partitions of a write buffer's Membuffer into its
//! memtable in the background, so writers find room instead of draining themselves (`FloDB`
//! §4.2's draining threads).
//!
//! Thread-safety contract: a drainer holds only a `Weak` reference to the Membuffer between
//! rounds (so the write buffer is freed when the engine drops it) and a strong one to the
//! memtable; it drains a partition under that partition's drain lock, taken with `try_lock`
//! (never waiting for a writer or another drainer, except to bypass the Membuffer). It parks
//! when no partition wants a drain; a writer whose insert takes a table past three quarters
//! full unparks it. It exits once the Membuffer is stopped (its buffer sealed) or gone. Each
//! round it also judges the window of scans and writes since its last judgement (`bypass`),
//! and bypasses the Membuffer if scans dominate; a database without drainers never bypasses
//! one.
//!
//! Invariants:
//! 1. A drainer never holds a strong reference to the Membuffer while parked.
//! 2. Every drainer exits within one park timeout of `Membuffer::stop` or the Membuffer's drop.

use super::bypass::WindowStart;
use super::Membuffer;
use crate::memtable::Memtable;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long an idle drainer parks before checking whether its Membuffer is gone: a wake-up
/// ends the wait sooner whenever there is work.
const PARK_TIMEOUT: Duration = Duration::from_millis(50);

/// Starts `count` drainers for `membuffer` over `memtable`; returns false if the system
/// refused a thread (writers then drain themselves, as with no drainers).
pub(super) fn start(membuffer: &Arc<Membuffer>, memtable: &Arc<Memtable>, count: usize) -> bool {
    for index in 0..count {
        let weak = Arc::downgrade(membuffer);
        let memtable = Arc::clone(memtable);
        let spawned = std::thread::Builder::new()
            .name(format!("cairn-drain-{index}"))
            .spawn(move || run(&weak, &memtable));
        match spawned {
            Ok(handle) => membuffer.register_drainer(handle.thread().clone()),
            Err(_) => return false,
        }
    }
    true
}

/// A drainer's loop (see the module documentation).
fn run(membuffer: &Weak<Membuffer>, memtable: &Memtable) {
    let mut window: Option<WindowStart> = None;
    loop {
        let worked = {
            let Some(membuffer) = membuffer.upgrade() else {
                return;
            };
            if membuffer.is_stopped() {
                return;
            }
            let window = window.get_or_insert_with(|| WindowStart::new(membuffer.window_counts()));
            membuffer.judge(window, memtable) || membuffer.drain_wanted(memtable)
            // Invariant 1: the strong reference drops here, before any park.
        };
        if !worked {
            std::thread::park_timeout(PARK_TIMEOUT);
        }
    }
}
