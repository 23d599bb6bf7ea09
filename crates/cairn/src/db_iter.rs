//! The user-facing iterator: collapses versions, hides tombstones, applies bounds.
//!
//! It wraps a merging iterator over every component (memtables, level-0 tables, levels) and
//! shows, for each user key in `[lower, upper)`, the newest version with sequence <= the read
//! sequence — nothing if that version is a tombstone. It owns an `Arc` of the super version it
//! reads, so the files and memtables under it stay alive however the database changes.
//!
//! Invariants (as `LevelDB`'s DBIter):
//! 1. Forward direction: the inner iterator is positioned at the entry that yields the current
//!    key and value.
//! 2. Reverse direction: the inner iterator is positioned just before every entry of the
//!    current user key, whose key and value are held in `saved_key`/`saved_value`.
//!
//! Thread-safety contract: owned by one thread.

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    append_internal_key, internal_key, parse_internal_key, SequenceNumber, ValueKind, SEQUENCE_MAX,
};
use std::any::Any;
use std::ops::Bound;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the user-visible contents of the database at one sequence number: the
/// seekable, low-level form of [`crate::RangeIter`] (see [`crate::Db::cursor`]).
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// for key in ["a", "b", "c"] {
///     db.put(key, key)?;
/// }
/// let mut cursor = db.cursor(&cairn::ReadOptions::default(), None, None)?;
/// cursor.seek_for_prev(b"bb");
/// assert_eq!(cursor.key(), b"b");
/// cursor.next();
/// assert_eq!(cursor.value(), b"c");
/// cursor.next();
/// assert!(!cursor.valid());
/// cursor.status()?;
/// # Ok::<(), cairn::Error>(())
/// ```
pub struct DbIterator {
    inner: Box<dyn InternalIterator>,
    sequence: SequenceNumber,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// Forward direction: the entry under the inner iterator carries an expiry prefix,
    /// which `value` strips.
    current_has_expiry: bool,
    /// Wall-clock milliseconds at creation: values expiring at or before it are hidden, as
    /// tombstones (one instant for the whole scan, so it is consistent).
    now_millis: u64,
    error: Option<Error>,
    /// Keeps the components the inner iterator reads alive.
    _pin: Box<dyn Any + Send>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DbIterator")
            .field("sequence", &self.sequence)
            .field("valid", &self.valid)
            .finish()
    }
}

impl DbIterator {
    /// Wraps `inner`, reading at `sequence`, within `[lower, upper)`.
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        sequence: SequenceNumber,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        pin: Box<dyn Any + Send>,
    ) -> Self {
        DbIterator {
            inner,
            sequence,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            current_has_expiry: false,
            now_millis: crate::expiry::now_millis(),
            error: None,
            _pin: pin,
        }
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key (empty if not valid).
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward => crate::key::user_key(self.inner.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value (empty if not valid).
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward if self.current_has_expiry => self
                .inner
                .value()
                .get(crate::expiry::EXPIRY_BYTES..)
                .unwrap_or_default(),
            Direction::Forward => self.inner.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met, if any (an iterator that failed is not valid).
    pub fn status(&self) -> Result<()> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        self.inner.status()
    }

    fn above_upper(&self, user_key: &[u8]) -> bool {
        self.upper.as_deref().is_some_and(|upper| user_key >= upper)
    }

    fn below_lower(&self, user_key: &[u8]) -> bool {
        self.lower.as_deref().is_some_and(|lower| user_key < lower)
    }

    /// The entry's kind as this iterator treats it: an expired value is a tombstone
    /// (`expiry` invariant 1).
    fn effective_kind(&self, kind: ValueKind) -> ValueKind {
        if kind == ValueKind::PutWithExpiry
            && crate::expiry::is_expired(kind, self.inner.value(), self.now_millis)
        {
            ValueKind::Delete
        } else {
            kind
        }
    }

    fn corrupt(&mut self) {
        self.valid = false;
        if self.error.is_none() {
            self.error = Some(Error::Internal(
                "iterator met a malformed internal key".into(),
            ));
        }
    }

    /// Moves forward from the inner position to the first visible entry; with `skipping`,
    /// entries of user keys <= `self.saved_key` are passed over.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        debug_assert_eq!(self.direction, Direction::Forward);
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.corrupt();
                return;
            };
            if self.above_upper(parsed.user_key) {
                break;
            }
            if parsed.sequence <= self.sequence {
                let hidden = skipping && parsed.user_key <= self.saved_key.as_slice();
                match self.effective_kind(parsed.kind) {
                    ValueKind::Delete => {
                        if !hidden {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            skipping = true;
                        }
                    }
                    ValueKind::Put | ValueKind::PutWithExpiry => {
                        if !hidden {
                            self.valid = true;
                            self.current_has_expiry = parsed.kind == ValueKind::PutWithExpiry;
                            self.saved_key.clear();
                            return;
                        }
                    }
                }
            }
            self.inner.next();
        }
        self.valid = false;
        self.saved_key.clear();
    }

    /// Moves backward from the inner position, leaving the newest visible version of the
    /// previous user key in `saved_key`/`saved_value`.
    fn find_prev_user_entry(&mut self) {
        debug_assert_eq!(self.direction, Direction::Reverse);
        let mut kind = ValueKind::Delete;
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.corrupt();
                return;
            };
            if parsed.sequence <= self.sequence {
                if kind != ValueKind::Delete && parsed.user_key < self.saved_key.as_slice() {
                    break; // every entry of saved_key has been seen
                }
                if self.below_lower(parsed.user_key) {
                    break;
                }
                kind = self.effective_kind(parsed.kind);
                self.saved_key.clear();
                self.saved_value.clear();
                if kind != ValueKind::Delete {
                    self.saved_key.extend_from_slice(parsed.user_key);
                    let value = self.inner.value();
                    let value = if parsed.kind == ValueKind::PutWithExpiry {
                        value.get(crate::expiry::EXPIRY_BYTES..).unwrap_or_default()
                    } else {
                        value
                    };
                    self.saved_value.extend_from_slice(value);
                }
            }
            self.inner.prev();
        }
        // A read error may have hidden a newer version (or a tombstone) of `saved_key`.
        if kind == ValueKind::Delete || (!self.inner.valid() && self.inner.status().is_err()) {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
    }

    /// Positions at the first key `>= target` (clamped to the bounds).
    pub fn seek(&mut self, target: &[u8]) {
        self.error = None;
        self.direction = Direction::Forward;
        self.saved_value.clear();
        let target = match self.lower.as_deref() {
            Some(lower) if target < lower => lower,
            _ => target,
        };
        // The seek key is built in `saved_key`'s buffer (cleared before use below): a seek
        // allocates nothing here once the buffer has grown.
        self.saved_key.clear();
        append_internal_key(&mut self.saved_key, target, self.sequence, ValueKind::SEEK);
        self.inner.seek(&self.saved_key);
        self.saved_key.clear();
        self.find_next_user_entry(false);
    }

    /// Positions at the first key.
    pub fn seek_to_first(&mut self) {
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => {
                self.error = None;
                self.direction = Direction::Forward;
                self.saved_key.clear();
                self.saved_value.clear();
                self.inner.seek_to_first();
                self.find_next_user_entry(false);
            }
        }
    }

    /// Positions at the last key.
    pub fn seek_to_last(&mut self) {
        self.error = None;
        self.direction = Direction::Reverse;
        self.saved_key.clear();
        self.saved_value.clear();
        match self.upper.clone() {
            Some(upper) => {
                // The first entry at or after `upper`, then one step back.
                self.inner
                    .seek(&internal_key(&upper, SEQUENCE_MAX, ValueKind::SEEK));
                self.step_back_or_to_last();
            }
            None => self.inner.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// After a seek to just past where a reverse scan starts: one step back, or, when the
    /// seek found nothing after that point, the last entry. A seek that failed is not
    /// "nothing after": the inner iterator stays failed, never re-seeked past the bound.
    fn step_back_or_to_last(&mut self) {
        if self.inner.valid() {
            self.inner.prev();
        } else if self.inner.status().is_ok() {
            self.inner.seek_to_last();
        }
    }

    /// Positions at the last key `<= target` (clamped to the bounds).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        if self.above_upper(target) {
            self.seek_to_last();
            return;
        }
        self.error = None;
        self.direction = Direction::Reverse;
        self.saved_key.clear();
        self.saved_value.clear();
        // (target, 0, Delete) sorts after every real version of target (sequences start at 1).
        self.inner.seek(&internal_key(target, 0, ValueKind::Delete));
        self.step_back_or_to_last();
        self.find_prev_user_entry();
    }

    /// Moves to the next key. Precondition: `valid()`.
    pub fn next(&mut self) {
        debug_assert!(self.valid);
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator sits before the current key's entries: step into them, then
            // skip them as usual.
            if self.inner.valid() {
                self.inner.next();
            } else if self.inner.status().is_ok() {
                // Nothing before the current key's entries: they start the inner order.
                self.inner.seek_to_first();
            }
            if !self.inner.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        } else {
            // Reuses `saved_key`'s buffer: a scan allocates nothing per entry here.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(crate::key::user_key(self.inner.key()));
            self.inner.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key. Precondition: `valid()`.
    pub fn prev(&mut self) {
        debug_assert!(self.valid);
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // Step back past every entry of the current key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(crate::key::user_key(self.inner.key()));
            loop {
                self.inner.prev();
                if !self.inner.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    return;
                }
                if crate::key::user_key(self.inner.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }
}

/// The successor of every key starting with `prefix`: the exclusive upper bound of a prefix
/// scan (`None` when every byte is 0xff: nothing follows, the scan is unbounded above).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&byte| byte != 0xff)?;
    let mut upper = prefix.get(..=last)?.to_vec();
    if let Some(byte) = upper.last_mut() {
        *byte += 1;
    }
    Some(upper)
}

/// Which end of a [`RangeIter`] its cursor last served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Neither,
    Front,
    Back,
}

/// A double-ended Rust iterator over the `(key, value)` pairs of a range, in key order, at
/// the one sequence number its cursor reads.
///
/// One cursor serves both ends. While it serves one end it sits on that end's last key; on a
/// switch the key of the end it leaves is saved, so the other end can re-seek to its own
/// saved key, and each end stops at the other's saved key (they never yield a key twice).
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// for key in ["a", "b", "c"] {
///     db.put(key, "")?;
/// }
/// let mut pairs = db.iter()?;
/// assert_eq!(pairs.next().transpose()?.map(|(key, _)| key), Some(b"a".to_vec()));
/// assert_eq!(pairs.next_back().transpose()?.map(|(key, _)| key), Some(b"c".to_vec()));
/// assert_eq!(pairs.next().transpose()?.map(|(key, _)| key), Some(b"b".to_vec()));
/// assert!(pairs.next_back().is_none());
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug)]
pub struct RangeIter {
    cursor: DbIterator,
    /// The end the cursor sits on (at that end's last key).
    at: End,
    /// The last key the front yielded, saved when the cursor left the front.
    front: Option<Vec<u8>>,
    /// The last key the back yielded, saved when the cursor left the back.
    back: Option<Vec<u8>>,
    finished: bool,
}

impl RangeIter {
    pub(crate) fn new(cursor: DbIterator) -> Self {
        RangeIter {
            cursor,
            at: End::Neither,
            front: None,
            back: None,
            finished: false,
        }
    }

    /// Maps any pair of range bounds onto the cursor's inclusive lower and exclusive upper
    /// bound, by appending a zero byte (the next key in byte order) where needed.
    pub(crate) fn cursor_bounds(
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let lower = match lower {
            Bound::Included(key) => Some(key.to_vec()),
            Bound::Excluded(key) => Some([key, &[0u8]].concat()),
            Bound::Unbounded => None,
        };
        let upper = match upper {
            Bound::Included(key) => Some([key, &[0u8]].concat()),
            Bound::Excluded(key) => Some(key.to_vec()),
            Bound::Unbounded => None,
        };
        (lower, upper)
    }

    /// Saves the key of the end the cursor is leaving (it sits on it).
    fn leave(&mut self, to: End) {
        if self.at == to || !self.cursor.valid() {
            return;
        }
        let key = Some(self.cursor.key().to_vec());
        match self.at {
            End::Front => self.front = key,
            End::Back => self.back = key,
            End::Neither => {}
        }
    }

    /// True (and the iterator finished) unless the cursor holds a pair for end `end` that
    /// does not reach the other end's key.
    fn stop(&mut self, end: End) -> bool {
        self.at = end;
        if self.cursor.valid() {
            let key = self.cursor.key();
            let crossed = match end {
                End::Front => self.back.as_deref().is_some_and(|back| key >= back),
                _ => self.front.as_deref().is_some_and(|front| key <= front),
            };
            if !crossed {
                return false;
            }
        }
        self.finished = true;
        true
    }

    /// The pair under the cursor, borrowed, or the cursor's error at the end.
    fn current(&self) -> Option<Result<(&[u8], &[u8])>> {
        if self.cursor.valid() {
            return Some(Ok((self.cursor.key(), self.cursor.value())));
        }
        self.cursor.status().err().map(Err)
    }

    /// Moves the front one pair on; false when finished.
    fn advance_front(&mut self) -> bool {
        if self.finished {
            return false;
        }
        self.leave(End::Front);
        if self.at == End::Front {
            self.cursor.next();
        } else if let Some(front) = self.front.take() {
            self.cursor.seek(&front);
            if self.cursor.valid() && self.cursor.key() == front.as_slice() {
                self.cursor.next();
            }
        } else {
            self.cursor.seek_to_first();
        }
        !self.stop(End::Front) || !self.cursor.valid()
    }

    /// Moves the back one pair on; false when finished.
    fn advance_back(&mut self) -> bool {
        if self.finished {
            return false;
        }
        self.leave(End::Back);
        if self.at == End::Back {
            self.cursor.prev();
        } else if let Some(back) = self.back.take() {
            self.cursor.seek_for_prev(&back);
            if self.cursor.valid() && self.cursor.key() == back.as_slice() {
                self.cursor.prev();
            }
        } else {
            self.cursor.seek_to_last();
        }
        !self.stop(End::Back) || !self.cursor.valid()
    }

    /// The next pair from the front, borrowed from the iterator instead of copied into two
    /// `Vec`s: a scan that only looks at its pairs allocates nothing per pair. The borrow
    /// ends at the next call (a lending iterator, so it is a method, not `Iterator::next`).
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// for key in ["a", "b", "c"] {
    ///     db.put(key, "v")?;
    /// }
    /// let mut pairs = db.range("a".."c")?;
    /// let mut total = 0;
    /// while let Some(pair) = pairs.next_ref() {
    ///     let (key, value) = pair?;
    ///     total += key.len() + value.len();
    /// }
    /// assert_eq!(total, 4);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.advance_front() {
            self.current()
        } else {
            None
        }
    }

    /// The next pair from the back, borrowed (see [`RangeIter::next_ref`]).
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// for key in ["a", "b", "c"] {
    ///     db.put(key, "v")?;
    /// }
    /// let mut pairs = db.iter()?;
    /// assert_eq!(pairs.next_back_ref().transpose()?.map(|(key, _)| key), Some(&b"c"[..]));
    /// assert_eq!(pairs.next_ref().transpose()?.map(|(key, _)| key), Some(&b"a"[..]));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn next_back_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.advance_back() {
            self.current()
        } else {
            None
        }
    }
}

/// Copies a borrowed pair out (the owning `Iterator` forms).
fn owned_pair(pair: Result<(&[u8], &[u8])>) -> Result<(Vec<u8>, Vec<u8>)> {
    pair.map(|(key, value)| (key.to_vec(), value.to_vec()))
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_ref().map(owned_pair)
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_back_ref().map(owned_pair)
    }
}

impl std::iter::FusedIterator for RangeIter {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::test_support::PoisonedIterator;
    use crate::iter::{MergingIterator, VecIterator};

    fn put(user: &[u8], sequence: u64) -> (Vec<u8>, Vec<u8>) {
        (internal_key(user, sequence, ValueKind::Put), b"v".to_vec())
    }

    /// An iterator over a..z at sequence 1 and `newer` (failing on user keys in `bad`).
    fn over(
        newer: Vec<(Vec<u8>, Vec<u8>)>,
        bad: std::ops::Range<&[u8]>,
        upper: Option<&[u8]>,
    ) -> DbIterator {
        let older: Vec<_> = (b'a'..=b'z').map(|user| put(&[user], 1)).collect();
        let merge = MergingIterator::new(vec![
            Box::new(VecIterator::new(older)),
            Box::new(PoisonedIterator::new(newer, bad)),
        ]);
        DbIterator::new(
            Box::new(merge),
            10,
            None,
            upper.map(<[u8]>::to_vec),
            Box::new(()),
        )
    }

    /// A read error while positioning from the end stops the iterator with the error: it
    /// used to fall back to the last entry, past the upper bound.
    #[test]
    fn a_failed_seek_from_the_end_stays_failed() {
        let newer = || vec![put(b"m", 5), put(b"y", 5)];
        let mut iterator = over(newer(), &b"m"[..]..&b"n"[..], Some(b"m"));
        iterator.seek_to_last();
        assert!(
            !iterator.valid() || iterator.key() < &b"m"[..],
            "{:?} is past the upper bound",
            iterator.key()
        );
        assert!(iterator.valid() || iterator.status().is_err());
        let mut iterator = over(newer(), &b"m"[..]..&b"n"[..], None);
        iterator.seek_for_prev(b"m");
        assert!(
            !iterator.valid() || iterator.key() <= &b"m"[..],
            "{:?}",
            iterator.key()
        );
        assert!(iterator.valid() || iterator.status().is_err());
    }

    /// A deleted key is never yielded because the table holding its tombstone failed.
    #[test]
    fn a_tombstone_behind_a_read_error_does_not_resurrect_its_key() {
        let tombstone = (internal_key(b"c", 5, ValueKind::Delete), Vec::new());
        let mut iterator = over(vec![tombstone.clone()], &b"c"[..]..&b"d"[..], None);
        iterator.seek_to_first();
        let mut seen = Vec::new();
        while iterator.valid() {
            seen.push(iterator.key().to_vec());
            iterator.next();
        }
        assert!(!seen.contains(&b"c".to_vec()), "{seen:?}");
        assert!(iterator.status().is_err());
        let mut iterator = over(vec![tombstone], &b"c"[..]..&b"d"[..], None);
        iterator.seek_to_last();
        seen.clear();
        while iterator.valid() {
            seen.push(iterator.key().to_vec());
            iterator.prev();
        }
        assert!(!seen.contains(&b"c".to_vec()), "{seen:?}");
        assert!(iterator.status().is_err());
    }
}
