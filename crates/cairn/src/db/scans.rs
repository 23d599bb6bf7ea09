//! The public scans of [`Db`]: ranges, prefixes and the seekable cursor, over the latest
//! state or a snapshot.
//!
//! Thread-safety contract: as every `Db` method, callable from any thread; an iterator holds
//! the super version it started on, so it sees one consistent state however long it lives.
//!
//! Invariants:
//! 1. A snapshot from another database is refused before any iterator is built
//!    (`Db::snapshot_sequence`).

use super::{bound_bytes, Db};
use crate::db_iter::{DbIterator, RangeIter};
use crate::error::Result;
use crate::key::check_key;
use crate::options::ReadOptions;
use crate::snapshot::Snapshot;
use std::ops::{Bound, RangeBounds};

impl Db {
    /// A seekable cursor (the low-level form of [`Db::range`]) over the latest state, or
    /// `options.snapshot`, bounded to `[lower, upper)`.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("a", "1")?;
    /// db.put("c", "3")?;
    /// let mut cursor = db.cursor(&cairn::ReadOptions::default(), None, None)?;
    /// cursor.seek(b"b");
    /// assert_eq!((cursor.valid(), cursor.key()), (true, &b"c"[..]));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn cursor(
        &self,
        options: &ReadOptions,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<DbIterator> {
        if let Some(snapshot) = &options.snapshot {
            self.snapshot_sequence(snapshot)?;
        }
        self.inner
            .iterator(options, options.snapshot.as_ref(), lower, upper)
    }

    /// Every key-value pair, ascending (`.rev()` for descending).
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// let keys: Vec<Vec<u8>> = db.iter()?.map(|pair| pair.map(|(key, _)| key)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn iter(&self) -> Result<RangeIter> {
        self.range_with::<[u8], _>(&ReadOptions::default(), ..)
    }

    /// The key-value pairs in `range`, in key order; the iterator is double-ended, so
    /// `.rev()` scans descending and both ends may be consumed alternately.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// for key in ["a", "b", "c", "d"] {
    ///     db.put(key, "v")?;
    /// }
    /// let keys: Vec<Vec<u8>> = db.range("b".."d")?.map(|pair| pair.map(|(key, _)| key)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// let last = db.range("b"..)?.rev().next().transpose()?;
    /// assert_eq!(last.map(|(key, _)| key), Some(b"d".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn range<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Result<RangeIter> {
        self.range_with(&ReadOptions::default(), range)
    }

    /// [`Db::range`] with read options (a snapshot, cache use).
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("a", "1")?;
    /// let mut options = cairn::ReadOptions::default();
    /// options.fill_cache = false;
    /// assert_eq!(db.range_with(&options, "a"..="a")?.count(), 1);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn range_with<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(
        &self,
        options: &ReadOptions,
        range: R,
    ) -> Result<RangeIter> {
        let (start, end) = (
            bound_bytes(range.start_bound()),
            bound_bytes(range.end_bound()),
        );
        // The caller's bounds are keys; the cursor's may be one byte longer (`check_bound`).
        for bound in [start, end] {
            if let Bound::Included(key) | Bound::Excluded(key) = bound {
                check_key(key)?;
            }
        }
        let (lower, upper) = RangeIter::cursor_bounds(start, end);
        let cursor = self.cursor(options, lower.as_deref(), upper.as_deref())?;
        Ok(RangeIter::new(cursor))
    }

    /// [`Db::range`] as of `snapshot`.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("a", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("b", "2")?;
    /// assert_eq!(db.range_at(&snapshot, "a"..)?.count(), 1);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn range_at<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(
        &self,
        snapshot: &Snapshot,
        range: R,
    ) -> Result<RangeIter> {
        let options = ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..ReadOptions::default()
        };
        self.range_with(&options, range)
    }

    /// The key-value pairs whose key starts with `prefix`, in key order (double-ended).
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// for key in ["user:1", "user:2", "users", "video:1"] {
    ///     db.put(key, "")?;
    /// }
    /// assert_eq!(db.prefix("user:")?.count(), 2);
    /// assert_eq!(db.prefix("user")?.rev().next().transpose()?.map(|(key, _)| key), Some(b"users".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<RangeIter> {
        self.prefix_with(&ReadOptions::default(), prefix)
    }

    /// [`Db::prefix`] with read options (a snapshot, cache use).
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("p1", "")?;
    /// assert_eq!(db.prefix_with(&cairn::ReadOptions::default(), "p")?.count(), 1);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn prefix_with(
        &self,
        options: &ReadOptions,
        prefix: impl AsRef<[u8]>,
    ) -> Result<RangeIter> {
        let prefix = prefix.as_ref();
        let upper = crate::db_iter::prefix_successor(prefix);
        let cursor = self.cursor(options, Some(prefix), upper.as_deref())?;
        Ok(RangeIter::new(cursor))
    }

    /// [`Db::prefix`] as of `snapshot`.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// let snapshot = db.snapshot();
    /// db.put("p1", "")?;
    /// assert_eq!(db.prefix_at(&snapshot, "p")?.count(), 0);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn prefix_at(&self, snapshot: &Snapshot, prefix: impl AsRef<[u8]>) -> Result<RangeIter> {
        let options = ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..ReadOptions::default()
        };
        self.prefix_with(&options, prefix)
    }
}
