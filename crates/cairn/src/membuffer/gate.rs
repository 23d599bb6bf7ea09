//! `OverwriteGate`: decides whether an in-place update of a Membuffer record may *drop* the
//! version it replaces instead of moving it into the memtable, and lets readers detect the
//! one case where a drop could have hidden the version they wanted.
//!
//! Why a drop needs care: an update of key `k` from version `o` to `n` runs while `n` is not
//! yet visible, so every read point handed out until `n` becomes visible is below `n`. A read
//! of `k` at a point `r` with `o <= r < n` wants `o`: not only reads in flight when the update
//! runs, but also reads that start after it and before `n` is visible, and reads that reach
//! the memtable after a drain moved `n` there. So registering in-flight read points is not
//! enough (reads that start later are not registered yet). Instead:
//!
//! 1. **Latest-state reads validate afterwards.** A drop first raises the *drop mark* of the
//!    key's hash bucket to `n` (`marks`, `fetch_max`), then the record is rewritten. A read
//!    at `r` that could have missed `o` observed the rewrite (the record, the drained
//!    memtable or the flushed table holding `n`), so a load of the mark after its lookup
//!    sees `n > r` (`stale`); it then re-reads in a *hold* (below), at a point at or above
//!    `n`. A read of the latest state may take a later point: it started before `n` was
//!    acknowledged. False alarms (another key in the bucket) cost one retry.
//! 2. **Snapshots and latest-state iterators hold the gate** while they pick their sequence
//!    (and, for an iterator — a snapshot's too, which takes its hold without the wait below —
//!    until the Membuffer is drained into the memtable it iterates):
//!    `hold` counts them in `pending`, and the caller then waits until every sequence
//!    reserved so far is visible before it takes its read point. An update that loaded
//!    `pending` as zero before the hold began had already reserved its sequence, so the read
//!    point is at or above it; every later update sees the hold and moves.
//!
//!    A latest-state iterator may skip that wait: it takes its read point `r` first, then
//!    the hold, then checks `announced_at_most(r)` (`hold_at`). Every update announces its
//!    new sequence on its thread's stripe of `announced` *before* it looks for holds (all
//!    four steps are `SeqCst`), so an update that did not see the hold is one whose
//!    announcement the check sees; if every announcement is at or below `r`, no drop can
//!    hide a version `r` sees (a drop replaces its version with one at or below `r`, which
//!    `r` prefers). Otherwise the iterator waits as above and takes a new read point.
//!    Read-mostly phases then pay one load per stripe instead of the wait (YCSB E's scans
//!    with inserts only never wait).
//! 3. **Registered snapshots block drops below them**: an update drops `o` only if no live
//!    snapshot is at or above `o` (`SnapshotList::newest`). A snapshot iterator takes a
//!    hold before its snapshot may be released, and an update loads the holds both before
//!    and after the snapshot, so a version passed from the snapshot to the hold is never
//!    seen unprotected.
//!
//! Reads at an explicit snapshot never validate: by 2 and 3 no version they can see is
//! dropped. Read-modify-write validation reads below its own reserved point and then
//! checks the key's mark as in step 1: a drop of a version written after its read (which
//! would leave the lookup finding the version it read) makes it report a conflict and
//! retry.
//!
//! Thread-safety contract: every method takes `&self` from any thread. Updates (`may_drop`)
//! raise their stripe of `announced`, then, after a `SeqCst` fence, load every stripe of
//! `pending`, the newest snapshot and `pending` again, and write one mark; readers load one
//! mark; holds increment and decrement their thread's stripe of `pending`
//! (`crate::sync::thread_stripe`), so two threads scanning at once usually write different
//! cache lines: a hold is a reader's, and readers should not contend.
//!
//! Invariants:
//! 1. A version is dropped only when `may_drop` returned true, after it raised its bucket's
//!    mark to the new version's sequence; marks only grow.
//! 2. `may_drop` returns false while any hold is active or while a snapshot at or above the
//!    old version is registered.
//! 3. Every hold is released exactly once, on the stripe it was taken on: a `GateHold` by its
//!    drop; a `DetachedHold` (a hold kept by a scan cursor that reaches the gate through its
//!    Membuffer) by `OverwriteGate::release`.
//! 4. An update's new sequence is in `announced` (its stripe holds it or a larger one) before
//!    the update loads `pending`; announcements only grow.

use crate::key::SequenceNumber;
use crate::snapshot::SnapshotList;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Drop-mark buckets (a power of two): 32 KiB of marks, few enough to stay cached, many
/// enough that a read rarely shares a bucket with an in-flight drop.
const MARK_BUCKETS: usize = 4096;

/// Stripes of `pending` (a power of two): more than the threads that usually scan at once.
const HOLD_STRIPES: usize = 8;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct OverwriteGate {
    /// Snapshots and iterators choosing their read points (invariant 2), counted on the
    /// holding thread's stripe; a drop needs every stripe at zero.
    pending: [crate::sync::CachePadded<AtomicUsize>; HOLD_STRIPES],
    /// Per hash bucket: the highest sequence whose update dropped a version (invariant 1).
    marks: Box<[AtomicU64]>,
    /// Per stripe of updating threads: the highest new sequence of an update that asked to
    /// drop, announced before it looked for holds (invariant 4; module documentation,
    /// step 2). Separate from `pending`: writers write these, readers those.
    announced: [crate::sync::CachePadded<AtomicU64>; HOLD_STRIPES],
    snapshots: Arc<SnapshotList>,
}

/// An active hold (module documentation, step 2), released on drop.
#[derive(Debug)]
pub(crate) struct GateHold<'a> {
    gate: &'a OverwriteGate,
    stripe: usize,
}

impl Drop for GateHold<'_> {
    fn drop(&mut self) {
        self.gate.release_stripe(self.stripe);
    }
}

impl GateHold<'_> {
    /// The hold as a token that no longer borrows the gate, for a scan cursor that keeps it
    /// longer than the gate's borrow lasts; it must be given back to `OverwriteGate::release`
    /// of the same gate (invariant 3).
    pub(crate) fn detach(self) -> DetachedHold {
        let stripe = self.stripe;
        std::mem::forget(self);
        DetachedHold {
            stripe,
            released: false,
        }
    }
}

/// A hold detached from its gate's borrow (`GateHold::detach`); `OverwriteGate::release`
/// ends it.
#[derive(Debug)]
#[must_use = "a detached hold blocks every drop until it is released"]
pub(crate) struct DetachedHold {
    stripe: usize,
    released: bool,
}

impl Drop for DetachedHold {
    fn drop(&mut self) {
        // Invariant 3: a leaked hold would not lose data, but no update could drop a version
        // again — every one would move to the memtable.
        debug_assert!(self.released, "a detached hold was dropped without release");
    }
}

impl OverwriteGate {
    /// A gate whose updates respect the snapshots registered in `snapshots`.
    pub(crate) fn new(snapshots: Arc<SnapshotList>) -> OverwriteGate {
        OverwriteGate {
            pending: std::array::from_fn(|_| crate::sync::CachePadded(AtomicUsize::new(0))),
            marks: (0..MARK_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            announced: std::array::from_fn(|_| crate::sync::CachePadded(AtomicU64::new(0))),
            snapshots,
        }
    }

    fn mark(&self, hash: u64) -> Option<&AtomicU64> {
        // The hash is folded to `usize` on purpose: the mask keeps only its low bits.
        #[allow(clippy::cast_possible_truncation)]
        self.marks.get(hash as usize & (MARK_BUCKETS - 1))
    }

    /// Whether the update of a key (hash `hash`) from `old` to `new` may drop `old`; if so,
    /// the bucket's mark is raised first (invariant 1). Called with the record locked,
    /// before it is rewritten.
    pub(crate) fn may_drop(&self, hash: u64, old: SequenceNumber, new: SequenceNumber) -> bool {
        debug_assert!(old < new, "an update is newer than the version it replaces");
        // Invariant 4: announced before `pending` is loaded.
        let stripe = crate::sync::thread_stripe() & (HOLD_STRIPES - 1);
        if let Some(announced) = self.announced.get(stripe) {
            announced.fetch_max(new, Ordering::SeqCst);
        }
        // Pairs with the fence in `hold`: either this load sees the hold, or the holder's
        // later loads see our reservation and our announcement (module documentation,
        // step 2).
        fence(Ordering::SeqCst);
        if self.held() {
            return false;
        }
        #[cfg(test)]
        tests::run_drop_hook();
        // After `pending`, not before: a snapshot registers inside a hold, so an update that
        // reads `pending` after that hold ended sees the snapshot here. Loaded first, it
        // could miss a snapshot that registered (at a point above `old`, below `new`) and
        // released its hold between the two loads.
        if self.snapshots.newest().is_some_and(|newest| newest >= old) {
            return false;
        }
        // And `pending` once more, after the snapshot: a snapshot iterator takes its hold
        // while its snapshot stands, then the snapshot may be released (invariant 2 hands
        // the version from one to the other). The first load may precede that hold and the
        // snapshot load follow the release; the release's store is sequenced after the hold,
        // so a load after the snapshot load sees the hold.
        if self.held() {
            return false;
        }
        let Some(mark) = self.mark(hash) else {
            return false;
        };
        mark.fetch_max(new, Ordering::AcqRel);
        true
    }

    /// Whether any hold is active (invariant 2).
    fn held(&self) -> bool {
        self.pending
            .iter()
            .any(|stripe| stripe.load(Ordering::SeqCst) != 0)
    }

    /// Some(mark) if an update above `sequence` may have dropped a version of the key with
    /// hash `hash`: a read of it at `sequence` must be redone in a hold. Called after the
    /// read's lookup.
    pub(crate) fn stale(&self, hash: u64, sequence: SequenceNumber) -> Option<SequenceNumber> {
        let mark = self.mark(hash)?.load(Ordering::Acquire);
        (mark > sequence).then_some(mark)
    }

    /// Starts a hold: no version is dropped until it ends. The caller then waits until every
    /// sequence reserved so far is visible, and only then takes its read point.
    pub(crate) fn hold(&self) -> GateHold<'_> {
        let hold = self.hold_unfenced();
        fence(Ordering::SeqCst);
        hold
    }

    /// Counts a hold on this thread's stripe (`SeqCst`), without the fence `hold` adds.
    fn hold_unfenced(&self) -> GateHold<'_> {
        let stripe = crate::sync::thread_stripe() & (HOLD_STRIPES - 1);
        if let Some(pending) = self.pending.get(stripe) {
            pending.fetch_add(1, Ordering::SeqCst);
        }
        GateHold { gate: self, stripe }
    }

    /// A hold for a latest-state iterator whose read point `sequence` was taken just before
    /// (module documentation, step 2), and whether every update announced so far is at or
    /// below that point (`announced_at_most`). If not, the caller waits as after `hold`, and
    /// takes a new read point.
    ///
    /// Why no fence when the answer is yes (one full barrier less per scan): the increment
    /// and the loads of `announced` are `SeqCst`, and so are an update's announcement and
    /// its loads of `pending`, so the single total order of `SeqCst` operations puts our
    /// increment before the update's load of our stripe (the update sees the hold) or its
    /// announcement before our load (we see it). `hold` fences for its callers' later loads
    /// that are not `SeqCst` (the reservation they wait for); here only the waiting path
    /// makes such loads, after the fence below.
    pub(crate) fn hold_at(&self, sequence: SequenceNumber) -> (GateHold<'_>, bool) {
        let hold = self.hold_unfenced();
        let quiet = self.announced_at_most(sequence);
        if !quiet {
            fence(Ordering::SeqCst);
        }
        (hold, quiet)
    }

    /// Whether every update announced so far replaces its version with one at or below
    /// `sequence` (invariant 4). Called inside a hold by a reader whose read point is
    /// `sequence`: if true, no version that read point sees was dropped, and none will be
    /// while the hold lasts (module documentation, step 2).
    fn announced_at_most(&self, sequence: SequenceNumber) -> bool {
        self.announced
            .iter()
            .all(|announced| announced.load(Ordering::SeqCst) <= sequence)
    }

    /// Ends a detached hold taken on this gate (invariant 3).
    pub(crate) fn release(&self, mut hold: DetachedHold) {
        hold.released = true;
        self.release_stripe(hold.stripe);
    }

    fn release_stripe(&self, stripe: usize) {
        if let Some(pending) = self.pending.get(stripe) {
            pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// This thread's drop hook: run by `may_drop` on this thread between its load of the
        /// holds and its load of the newest snapshot, so a test can act inside that window.
        static DROP_HOOK: RefCell<Option<Box<dyn FnMut()>>> = const { RefCell::new(None) };
    }

    /// Runs this thread's drop hook, if any, once (it is taken out).
    pub(super) fn run_drop_hook() {
        if let Some(mut hook) = DROP_HOOK.with(|cell| cell.borrow_mut().take()) {
            hook();
        }
    }

    /// Bug (found in review): a snapshot iterator takes its hold while its snapshot stands
    /// and may outlive the snapshot. An update that loaded the holds before that hold began
    /// and the newest snapshot after the snapshot was released saw neither, and dropped a
    /// version the iterator still needs.
    #[test]
    fn a_hold_taken_before_its_snapshot_is_released_blocks_drops() {
        let snapshots = Arc::new(SnapshotList::default());
        let gate = Arc::new(OverwriteGate::new(Arc::clone(&snapshots)));
        let snapshot = snapshots.acquire(|| 6);
        let hold = Arc::new(std::sync::Mutex::new(None));
        DROP_HOOK.with(|cell| {
            let (gate, hold) = (Arc::clone(&gate), Arc::clone(&hold));
            let mut snapshot = Some(snapshot);
            *cell.borrow_mut() = Some(Box::new(move || {
                // On another thread, as a reader's would be: the hold, then the release.
                let gate = Arc::clone(&gate);
                let snapshot = snapshot.take();
                let taken = std::thread::spawn(move || {
                    let taken = gate.hold().detach();
                    drop(snapshot);
                    taken
                })
                .join()
                .expect("the reader ran");
                *hold.lock().expect("not poisoned") = Some(taken);
            }));
        });
        assert!(
            !gate.may_drop(7, 5, 9),
            "version 5 was kept by a snapshot at 6, then by a hold, at every moment"
        );
        let taken = hold
            .lock()
            .expect("not poisoned")
            .take()
            .expect("the hook ran");
        gate.release(taken);
        assert!(gate.may_drop(7, 9, 12), "nothing keeps version 9");
    }

    #[test]
    fn holds_and_snapshots_block_drops_and_drops_raise_marks() {
        let snapshots = Arc::new(SnapshotList::default());
        let gate = Arc::new(OverwriteGate::new(Arc::clone(&snapshots)));
        assert_eq!(gate.stale(7, 1), None);
        {
            let _hold = gate.hold();
            assert!(!gate.may_drop(7, 5, 9));
        }
        assert_eq!(gate.stale(7, 1), None, "a refused drop raises no mark");
        let snapshot = snapshots.acquire(|| 6);
        assert!(!gate.may_drop(7, 5, 9), "snapshot 6 sees version 5");
        assert!(gate.may_drop(7, 7, 9), "no snapshot sees version 7");
        assert_eq!(gate.stale(7, 8), Some(9));
        assert_eq!(gate.stale(7, 9), None);
        assert_eq!(gate.stale(8, 1), None, "another bucket");
        drop(snapshot);
        assert!(gate.may_drop(7, 5, 12));
        assert_eq!(gate.stale(7 + MARK_BUCKETS as u64, 11), Some(12));
    }

    /// An update announces its new sequence before it looks for holds or snapshots, whether
    /// it then drops or not (invariant 4).
    #[test]
    fn updates_announce_their_sequence_before_looking_for_holds() {
        let snapshots = Arc::new(SnapshotList::default());
        let gate = OverwriteGate::new(Arc::clone(&snapshots));
        assert!(gate.announced_at_most(0));
        let snapshot = snapshots.acquire(|| 6);
        assert!(!gate.may_drop(1, 5, 7));
        assert!(
            !gate.announced_at_most(6),
            "refused by the snapshot, announced all the same"
        );
        drop(snapshot);
        {
            let _hold = gate.hold();
            assert!(!gate.may_drop(1, 5, 9));
        }
        assert!(
            !gate.announced_at_most(8),
            "refused by the hold, announced all the same"
        );
        assert!(gate.announced_at_most(9));
        assert!(gate.may_drop(1, 9, 12));
        assert!(!gate.announced_at_most(11));
        assert!(gate.may_drop(2, 3, 10), "a lower sequence later");
        assert!(gate.announced_at_most(12), "announcements only grow");
    }

    /// A latest-state iterator's hold blocks drops as `hold` does, and says whether an update
    /// announced a sequence above the iterator's read point (then the iterator waits).
    #[test]
    fn an_iterator_hold_blocks_drops_and_reports_announcements_above_its_point() {
        let gate = OverwriteGate::new(Arc::new(SnapshotList::default()));
        {
            let (_hold, quiet) = gate.hold_at(4);
            assert!(quiet, "nothing announced");
            assert!(!gate.may_drop(1, 5, 9), "held");
        }
        let (hold, quiet) = gate.hold_at(8);
        assert!(!quiet, "the refused update announced 9, above 8");
        drop(hold);
        let (_hold, quiet) = gate.hold_at(9);
        assert!(quiet, "9 is at or below 9");
    }

    /// Holds taken on other threads (so, usually, on other stripes) and detached block drops
    /// until each is released, from whichever thread releases it (invariant 3).
    #[test]
    fn detached_holds_from_other_threads_block_drops_until_released() {
        let gate = OverwriteGate::new(Arc::new(SnapshotList::default()));
        let holds: Vec<DetachedHold> = std::thread::scope(|scope| {
            let spawned: Vec<_> = (0..3)
                .map(|_| scope.spawn(|| gate.hold().detach()))
                .collect();
            spawned
                .into_iter()
                .map(|handle| handle.join().expect("the holding thread ran"))
                .collect()
        });
        let mut sequence = 1;
        for hold in holds {
            assert!(!gate.may_drop(3, sequence, sequence + 1));
            gate.release(hold);
            sequence += 2;
        }
        assert!(
            gate.may_drop(3, sequence, sequence + 1),
            "every hold released"
        );
        let scoped = gate.hold();
        assert!(!gate.may_drop(3, sequence + 2, sequence + 3));
        drop(scoped);
        assert!(gate.may_drop(3, sequence + 2, sequence + 3));
    }
}
