//! [`FaultGate`]: holds matching file operations of a [`super::FaultFs`] before they run,
//! until the test releases the gate or its timeout passes — so a test can keep a thread
//! inside a chosen operation (a WAL's create, a directory fsync) for exactly as long as it
//! checks what other threads do meanwhile, with no sleep deciding the verdict.
//!
//! Thread-safety contract: a gate is shared (`Arc`) between the file system's state, which
//! finds it for a matching operation, the threads it holds and the test that releases it. Its
//! state sits behind one mutex; held threads sleep on a condition variable, never holding the
//! file system's state lock.
//!
//! Invariants:
//! 1. Once open (released by the test or timed out), a gate stays open: it holds every
//!    matching operation from its arming until then, and none after.
//! 2. `arrivals` counts every matching operation that reached the gate, held or not; a
//!    held operation runs only after the gate opened.
//! 3. `timed_out` is true only if the timeout, not the test, opened the gate: a test reads
//!    it to tell "released because I checked" from "released because nobody came".

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    timed_out: bool,
    arrivals: u64,
    /// Names of the threads that arrived, in order (`None`: unnamed).
    arrived_from: Vec<Option<String>>,
    /// Threads inside `hold` right now.
    holding: u64,
}

/// A gate on matching operations (see the module doc); made by [`super::FaultFs::set_gate`].
#[derive(Debug)]
pub struct FaultGate {
    pub(super) operation: &'static str,
    pub(super) path_contains: &'static str,
    timeout: Duration,
    state: Mutex<GateState>,
    changed: Condvar,
}

impl FaultGate {
    pub(super) fn new(
        operation: &'static str,
        path_contains: &'static str,
        timeout: Duration,
    ) -> Self {
        FaultGate {
            operation,
            path_contains,
            timeout,
            state: Mutex::new(GateState::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // Nothing here panics while holding the lock; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an operation named `operation` on `path` is held by this gate.
    pub(super) fn matches(&self, operation: &str, path: &str) -> bool {
        self.operation == operation && path.contains(self.path_contains)
    }

    /// Holds the calling thread until the gate opens (invariant 2).
    pub(super) fn hold(&self) {
        let deadline = Instant::now() + self.timeout;
        let mut state = self.lock();
        state.arrivals += 1;
        state
            .arrived_from
            .push(std::thread::current().name().map(str::to_owned));
        state.holding += 1;
        self.changed.notify_all();
        while !state.open {
            let now = Instant::now();
            if now >= deadline {
                // Invariant 3: nobody released it in time.
                state.open = true;
                state.timed_out = true;
                break;
            }
            state = match self.changed.wait_timeout(state, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        state.holding -= 1;
        drop(state);
        self.changed.notify_all();
    }

    /// Waits until a matching operation of the thread named `thread_name` reached the gate,
    /// or `timeout`; whether one did. (Other threads may reach the gate too — a background
    /// flush fsyncing the directory — so a test names the thread it means.)
    pub fn wait_for_arrival(&self, thread_name: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        while !state
            .arrived_from
            .iter()
            .any(|name| name.as_deref() == Some(thread_name))
        {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = match self.changed.wait_timeout(state, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    /// Matching operations that reached the gate so far (invariant 2).
    pub fn arrivals(&self) -> u64 {
        self.lock().arrivals
    }

    /// True while the gate is closed and holds at least one operation.
    pub fn is_holding(&self) -> bool {
        let state = self.lock();
        !state.open && state.holding > 0
    }

    /// True if the timeout opened the gate before the test released it (invariant 3).
    pub fn timed_out(&self) -> bool {
        self.lock().timed_out
    }

    /// Opens the gate for good: held operations run, later ones pass (invariant 1).
    pub fn release(&self) {
        self.lock().open = true;
        self.changed.notify_all();
    }
}
