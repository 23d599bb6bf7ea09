//! The point reads of [`Db`] that hand out a [`PinnedValue`] instead of a copy.
//!
//! Thread-safety contract: as every `Db` method, callable from any thread; a `PinnedValue`
//! holds the immutable block it reads from, so it stays valid however the database changes.
//!
//! Invariants:
//! 1. `get_pinned*` answer exactly what `get*` answer for the same key and state (a model
//!    test compares them); only where the bytes live differs.

use super::Db;
use crate::error::Result;
use crate::options::ReadOptions;
use crate::sstable::pinned::PinnedValue;

impl Db {
    /// The value of `key` in the latest state, without copying it when it comes from a table:
    /// the value holds the data block it was found in (see [`PinnedValue`]). A value still in
    /// a write buffer is copied, as [`Db::get`] does.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// let value = db.get_pinned("k")?;
    /// assert_eq!(value.as_deref(), Some(&b"v"[..]));
    /// assert_eq!(db.get_pinned("missing")?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<PinnedValue>> {
        self.inner.get_pinned(key.as_ref(), None)
    }

    /// [`Db::get_pinned`] as `options` say: at `options.snapshot` if set, else the latest.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "old")?;
    /// db.flush()?;
    /// let mut options = cairn::ReadOptions::default();
    /// options.snapshot = Some(db.snapshot());
    /// db.put("k", "new")?;
    /// assert_eq!(db.get_pinned_with(&options, "k")?.as_deref(), Some(&b"old"[..]));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get_pinned_with(
        &self,
        options: &ReadOptions,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<PinnedValue>> {
        let sequence = match &options.snapshot {
            Some(snapshot) => Some(self.snapshot_sequence(snapshot)?),
            None => None,
        };
        self.inner.get_pinned(key.as_ref(), sequence)
    }
}
