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
            let entries = self.db.level_entries(place, usize::MAX).map_err(text)?;
            levels.push(LevelDump {
                level: index + 1,
                count: entries.len(),
                pairs: entries
                    .into_iter()
                    .take(limit.unwrap_or(usize::MAX))
                    .collect(),
            });
        }
        Ok(format_stats(logical_pairs, &levels))
    }
}
