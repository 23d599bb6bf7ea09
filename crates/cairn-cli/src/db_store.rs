//! The shell's [`Store`] on top of a real [`cairn::Db`].
//!
//! Integer keys and values arrive already encoded (8 bytes, [`crate::cs265::encode_i64`]),
//! text ones as they are, so byte order is the order scans return.

use crate::levels::{format_stats, LevelDump};
use crate::shell::{Store, Visit};
use cairn::{Db, WriteBatch, WriteOptions};
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

    /// Every write is a one-entry batch written with `options` (used for `--sync`).
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
        self.db.increment(key, by).map_err(|error| match error {
            cairn::Error::InvalidArgument(message) => message,
            other => other.to_string(),
        })
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
