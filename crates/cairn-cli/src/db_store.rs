//! The shell's [`Store`] on top of a real [`cairn::Db`].
//!
//! Integer keys and values arrive already encoded (8 bytes, [`crate::cs265::encode_i64`]),
//! text ones as they are, so byte order is the order scans return.

use crate::levels::{format_stats, LevelDump};
use crate::shell::{next_counter, Store, Visit};
use cairn::{Db, Update, WriteBatch, WriteOptions};
use std::ops::Bound;

/// A [`Db`] seen as a store of bytes.
#[derive(Debug)]
pub struct DbStore<'a> {
    db: &'a Db,
    /// `Some` when every write must go through `Db::write` with these options (e.g. `sync`).
    write_options: Option<WriteOptions>,
}

impl<'a> DbStore<'a> {
    /// Plain `put`/`delete` writes.
    pub fn new(db: &'a Db) -> Self {
        DbStore {
            db,
            write_options: None,
        }
    }

    /// Every write is a one-entry batch (an `incr`, a read-modify-write) written with
    /// `options` (used for `--sync`).
    pub fn with_write_options(db: &'a Db, options: WriteOptions) -> Self {
        DbStore {
            db,
            write_options: Some(options),
        }
    }
}

impl Store for DbStore<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let result = match &self.write_options {
            None => self.db.put(key, value),
            Some(options) => {
                let mut batch = WriteBatch::new();
                batch.put(key, value);
                self.db.write(options, batch)
            }
        };
        result.map_err(|error| error.to_string())
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db.get(key).map_err(|error| error.to_string())
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), String> {
        let result = match &self.write_options {
            None => self.db.delete(key),
            Some(options) => {
                let mut batch = WriteBatch::new();
                batch.delete(key);
                self.db.write(options, batch)
            }
        };
        result.map_err(|error| error.to_string())
    }

    fn scan(
        &mut self,
        lower: &[u8],
        upper: Option<&[u8]>,
        visit: &mut Visit,
    ) -> Result<(), String> {
        let upper = upper.map_or(Bound::Unbounded, Bound::Excluded);
        let entries = self
            .db
            .range::<[u8], _>((Bound::Included(lower), upper))
            .map_err(|error| error.to_string())?;
        for entry in entries {
            let (key, value) = entry.map_err(|error| error.to_string())?;
            if !visit(&key, &value)? {
                break;
            }
        }
        Ok(())
    }

    fn increment(&mut self, key: &[u8], by: i64) -> Result<i64, String> {
        let message = |error| match error {
            cairn::Error::InvalidArgument(message) => message,
            other => other.to_string(),
        };
        let Some(options) = &self.write_options else {
            return self.db.increment(key, by).map_err(message);
        };
        // `Db::increment` writes with the default options, which would leave `--sync` out:
        // the same decision (parse, checked add, keep the expiry) goes through `update_with`,
        // which takes them. It may run more than once; the last run's outcome took effect.
        let mut outcome = Ok(0);
        self.db
            .update_with(options, key, |current| {
                outcome = next_counter(current.map(|(value, _)| value), by);
                let expiry = current.and_then(|(_, expiry)| expiry);
                match (&outcome, expiry) {
                    (Ok(value), None) => Update::Put(value.to_string().into_bytes()),
                    (Ok(value), Some(expiry)) => {
                        Update::PutWithExpiry(value.to_string().into_bytes(), expiry)
                    }
                    (Err(_), _) => Update::Keep,
                }
            })
            .map_err(message)?;
        outcome
    }

    /// `L1` is the write buffers, `L(k+2)` on-disk level `k` ([`crate::levels`]).
    fn stats(&mut self, limit: Option<usize>) -> Result<String, String> {
        let text = |error: cairn::Error| error.to_string();
        let mut logical_pairs = 0;
        for entry in self.db.iter().map_err(text)? {
            entry.map_err(text)?;
            logical_pairs += 1;
        }
        let places = std::iter::once(None).chain((0..self.db.level_stats().len()).map(Some));
        let mut levels = Vec::new();
        for (index, place) in places.enumerate() {
            let dump = level_dump(self.db, place, limit.unwrap_or(usize::MAX));
            let mut dump = dump.map_err(text)?;
            dump.level = index + 1;
            levels.push(dump);
        }
        Ok(format_stats(logical_pairs, &levels))
    }
}

/// The pairs stored in one place of the tree (`Db::level_entries`): all counted, the first
/// `limit` kept. Counted as they stream by, so a level of any size costs memory for `limit`
/// pairs only. `level` is left 0 for the caller.
fn level_dump(db: &Db, place: Option<usize>, limit: usize) -> Result<LevelDump, cairn::Error> {
    let mut dump = LevelDump {
        level: 0,
        count: 0,
        pairs: Vec::new(),
    };
    db.visit_level_entries(place, |key, value| {
        dump.count += 1;
        if dump.pairs.len() < limit {
            dump.pairs.push((key.to_vec(), value.to_vec()));
            #[cfg(test)]
            tests::held(dump.pairs.len());
        }
        true
    })?;
    Ok(dump)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// The most pairs `level_dump` held in memory at once on this thread.
        static PEAK_HELD: Cell<usize> = const { Cell::new(0) };
    }

    /// Records that `level_dump` holds `pairs` pairs.
    pub(super) fn held(pairs: usize) {
        PEAK_HELD.with(|peak| peak.set(peak.get().max(pairs)));
    }

    /// Runs `write` through a store with `sync` write options on a fresh database whose WAL
    /// syncs fail; returns whether it reached a WAL sync and what it returned.
    fn with_failing_wal_sync(
        write: fn(&mut DbStore<'_>) -> Result<(), String>,
    ) -> (bool, Result<(), String>) {
        use cairn::fs::fault::{FaultKind, FaultPlan};
        let file_system = cairn::FaultFs::new();
        let mut options = cairn::Options::default();
        options.file_system = std::sync::Arc::new(file_system.clone());
        let db = Db::open("/db", options).unwrap();
        let mut sync = WriteOptions::default();
        sync.sync = true;
        let mut store = DbStore::with_write_options(&db, sync);
        file_system.set_plan(FaultPlan::Matching {
            operation: "sync",
            path_contains: ".log",
            skip: 0,
            kind: FaultKind::Eio,
            crash: false,
        });
        let result = write(&mut store);
        let synced = file_system.injected().iter().any(|fault| fault.is_sync);
        (synced, result)
    }

    #[test]
    fn sync_write_options_cover_every_write_increment_included() {
        let (synced, result) = with_failing_wal_sync(|store| store.put(b"k", b"v"));
        assert!(synced && result.is_err(), "put: {result:?}");
        let (synced, result) = with_failing_wal_sync(|store| store.delete(b"k"));
        assert!(synced && result.is_err(), "delete: {result:?}");
        let (synced, result) = with_failing_wal_sync(|store| store.increment(b"n", 2).map(drop));
        assert!(
            synced,
            "the increment was acknowledged without a WAL sync: {result:?}"
        );
        assert!(result.is_err(), "{result:?}");
    }

    /// The synced `incr` does what `Db::increment` does: absent is 0, the expiry is kept,
    /// and the same messages for a value that is not a counter and for overflow.
    #[test]
    fn a_synced_increment_matches_db_increment() {
        let db = Db::open("/db", cairn::Options::in_memory()).unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        db.put_with_expiry("expiring", "5", later).unwrap();
        db.put("text", "x").unwrap();
        db.put("max", i64::MAX.to_string()).unwrap();
        let mut sync = WriteOptions::default();
        sync.sync = true;
        let mut store = DbStore::with_write_options(&db, sync);
        assert_eq!(store.increment(b"fresh", -3), Ok(-3));
        assert_eq!(store.increment(b"expiring", 2), Ok(7));
        let (value, expiry) = db.get_with_expiry("expiring").unwrap().unwrap();
        assert_eq!((value.as_slice(), expiry.is_some()), (&b"7"[..], true));
        let mut plain = DbStore::new(&db);
        for key in ["text", "max"] {
            let synced = store.increment(key.as_bytes(), 1);
            assert_eq!(synced, plain.increment(key.as_bytes(), 1), "{key}");
            assert!(synced.is_err(), "{key}");
        }
        assert_eq!(db.get("text").unwrap(), Some(b"x".to_vec()));
    }

    #[test]
    fn level_dump_counts_every_pair_and_holds_only_the_first_n() {
        let db = Db::open("/db", cairn::Options::in_memory()).unwrap();
        for key in 0..300u32 {
            db.put(key.to_be_bytes(), b"flushed").unwrap();
        }
        db.flush().unwrap();
        for key in 0..200u32 {
            db.put(key.to_be_bytes(), b"in memory").unwrap();
        }
        PEAK_HELD.with(|peak| peak.set(0));
        let on_disk = level_dump(&db, Some(0), 5).unwrap();
        assert_eq!((on_disk.count, on_disk.pairs.len()), (300, 5));
        assert_eq!(
            on_disk.pairs[0],
            (0u32.to_be_bytes().to_vec(), b"flushed".to_vec())
        );
        let in_memory = level_dump(&db, None, 5).unwrap();
        assert_eq!((in_memory.count, in_memory.pairs.len()), (200, 5));
        assert_eq!(level_dump(&db, Some(0), 0).unwrap().pairs, Vec::new());
        assert_eq!(level_dump(&db, Some(1), 5).unwrap().count, 0);
        assert!(
            PEAK_HELD.with(Cell::get) <= 5,
            "held {} pairs to dump 5",
            PEAK_HELD.with(Cell::get)
        );
    }
}
