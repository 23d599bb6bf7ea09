//! The store's one write path: put, delete and update as a [`Mutation`] applied under the
//! key's two index buckets, with the log append in between, and the wait for space when the
//! log is full.
//!
//! Thread-safety contract: a mutation holds one log head for its whole duration, and pins and
//! locks the key's buckets only within one attempt; it never waits (for space or compaction)
//! while pinned or holding bucket locks (the store's invariant 1).
//!
//! Invariants (the store's numbers):
//! 2. An object is appended completely before its location enters the index.
//! 4. An attempt either links its object (replace or insert under the bucket locks) or leaves
//!    the index unchanged and counts the object dead.
//! 5. At most `MAX_WRITE_ATTEMPTS` attempts; `make_space` gives up after `full_wait_limit`.

use super::{lock_ignoring_poison, Inner, LogKeys, MAX_WRITE_ATTEMPTS, PRESSURE_MAX_UTILIZATION};
use crate::epoch::EpochGuard;
use crate::error::{Error, Result};
use crate::hashindex::{hash_key, EntrySlot, LockedPair};
use crate::logmem::object::object_len;
use crate::logmem::Head;
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The closure of `MemStore::update`: current value in, new value (or `None` = delete) out.
pub(super) type UpdateFunction<'a> = &'a mut dyn FnMut(Option<&[u8]>) -> Option<Vec<u8>>;

/// What a write does to its key.
pub(super) enum Mutation<'a> {
    Put(&'a [u8]),
    Delete,
    Update(UpdateFunction<'a>),
}

/// How one attempt of a write ended.
enum Attempt {
    /// The value is linked.
    Done,
    /// No room in the key's buckets: grow its index partition, then try again.
    Grow,
    /// The head could not take this many bytes: make space, then try again.
    Room(u64),
    /// Try again as is.
    Again,
}

impl Inner {
    /// The one write path: put, delete and update. Returns whether the key had a value.
    pub(super) fn mutate(&self, key: &[u8], mut mutation: Mutation<'_>) -> Result<bool> {
        let hash = hash_key(key);
        let mut head = self.lock_head();
        let mut room_needed = match mutation {
            Mutation::Put(value) => object_len(key.len(), value.len()),
            _ => 0,
        };
        for _ in 0..MAX_WRITE_ATTEMPTS {
            if room_needed > 0 && !self.log.reserve(&mut head, room_needed, false) {
                // Invariant 1: no pin and no bucket lock held while waiting for space.
                self.make_space(&mut head, room_needed)?;
            }
            let guard = self.epochs.pin();
            let pair = self.index.lock(&guard, hash);
            let found = pair.find(|location| self.log.key_equals(location, key));
            let Some(value) = self.new_value(&mut mutation, key, found)? else {
                self.delete_found(pair, found, &guard, hash);
                return Ok(found.is_some());
            };
            match self.link_value(&mut head, pair, found, key, &value) {
                Attempt::Done => return Ok(found.is_some()),
                Attempt::Grow => self.index.grow(&guard, &self.epochs, hash, LogKeys(self))?,
                Attempt::Room(size) => room_needed = size,
                Attempt::Again => {}
            }
        }
        Err(self.full())
    }

    /// The value the mutation writes given the key's current entry (`None`: delete), checked
    /// against the limits when an update produced it.
    fn new_value<'m>(
        &self,
        mutation: &mut Mutation<'m>,
        key: &[u8],
        found: Option<(EntrySlot, u64)>,
    ) -> Result<Option<Cow<'m, [u8]>>> {
        let function = match mutation {
            Mutation::Put(value) => return Ok(Some(Cow::Borrowed(*value))),
            Mutation::Delete => return Ok(None),
            Mutation::Update(function) => function,
        };
        let current = found.and_then(|(_, location)| {
            let mut value = Vec::new();
            self.log.read_value(location, &mut value).map(|_| value)
        });
        let Some(value) = function(current.as_deref()) else {
            return Ok(None);
        };
        if value.len() > self.options.max_value_bytes
            || object_len(key.len(), value.len()) > self.log.max_object_bytes()
        {
            return Err(Error::InvalidArgument(format!(
                "update produced a value of {} bytes, over the limit",
                value.len()
            )));
        }
        Ok(Some(Cow::Owned(value)))
    }

    /// Removes the key's entry, if any, and shrinks its index partition if that left it sparse.
    fn delete_found(
        &self,
        pair: LockedPair<'_>,
        found: Option<(EntrySlot, u64)>,
        guard: &EpochGuard<'_>,
        hash: u64,
    ) {
        let Some((slot, old)) = found else {
            return;
        };
        pair.remove(slot);
        self.log.mark_dead(old);
        drop(pair);
        // The delete is done; a failed shrink (no memory for the smaller table) only leaves
        // the partition larger than needed.
        let _ = self
            .index
            .shrink_if_sparse(guard, &self.epochs, hash, LogKeys(self));
    }

    /// One attempt to append `value` and link it in place of `found` (or as a new entry),
    /// under `pair`'s locks, which it releases (invariant 4).
    // `pair` is taken by value: owning the locks is what lets this function release them.
    #[allow(clippy::needless_pass_by_value)]
    fn link_value(
        &self,
        head: &mut Head,
        pair: LockedPair<'_>,
        found: Option<(EntrySlot, u64)>,
        key: &[u8],
        value: &[u8],
    ) -> Attempt {
        if found.is_none() && !pair.make_room(|location| self.hash_at(location)) {
            return Attempt::Grow;
        }
        let size = object_len(key.len(), value.len());
        // Non-blocking: may take free blocks, never waits (we hold bucket locks).
        if !self.log.reserve(head, size, false) {
            return Attempt::Room(size);
        }
        let Some(location) = self.log.append(head, key, value) else {
            return Attempt::Room(size);
        };
        match found {
            Some((slot, old)) => {
                pair.replace(slot, location);
                self.log.mark_dead(old);
            }
            // Cannot fail: `make_room` found room under the same locks.
            None if !pair.insert(location) => {
                self.log.mark_dead(location);
                return Attempt::Again;
            }
            None => {}
        }
        Attempt::Done
    }

    /// Waits (helping compaction) until the head can take `needed` bytes. Called with the head
    /// locked, not pinned, no bucket locks.
    pub(super) fn make_space(&self, head: &mut Head, needed: u64) -> Result<()> {
        let started = Instant::now();
        self.waiting_writers.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_all();
        let mut idle_checks = 0u32;
        let result = loop {
            self.reclaim();
            if self.log.reserve(head, needed, false) {
                break Ok(());
            }
            // Checked on every round, also after a compaction round that freed space: other
            // writers may take what each round frees, and the wait must still end.
            if self.log.live_bytes() + needed > self.log.usable_bytes()
                || started.elapsed() > self.options.full_wait_limit
            {
                break Err(self.full());
            }
            if self.log.head_has_garbage(head) {
                self.log.seal(head);
            }
            if self.compact_round(PRESSURE_MAX_UTILIZATION) {
                idle_checks = 0;
                continue;
            }
            // Nothing to compact, nothing waiting for the epoch and no compaction running: the
            // remaining space is all live data and slack, so waiting cannot help.
            let compaction_running = self
                .compaction_slots
                .iter()
                .any(|slot| slot.try_lock().is_err());
            if self.log.retired_count() == 0 && !compaction_running {
                idle_checks += 1;
                if idle_checks > 8 {
                    break Err(self.full());
                }
            } else {
                idle_checks = 0;
            }
            self.seal_idle_heads(false);
            let lock = lock_ignoring_poison(&self.wake_lock);
            let _ = self.wake.wait_timeout(lock, Duration::from_micros(500));
        };
        self.waiting_writers.fetch_sub(1, Ordering::SeqCst);
        self.counters.writer_wait_nanos.fetch_add(
            u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        result
    }
}
