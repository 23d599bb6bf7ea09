//! The CS265 [`Store`] on top of a real [`cairn::Db`].
//!
//! Keys and values are stored as 4-byte [`encode_i32`] encodings, so byte order is numeric
//! order and a range scan over encoded bounds returns keys in numeric order.

use crate::cs265::{decode_i32_slice, encode_i32, format_stats, LevelDump, Store, ENCODED_BYTES};
use cairn::{Db, WriteBatch, WriteOptions};

/// A [`Db`] seen as a store of `i32 → i32`.
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

fn decode_value(key: i32, bytes: &[u8]) -> Result<i32, String> {
    decode_i32_slice(bytes).ok_or_else(|| {
        format!(
            "key {key} holds a {}-byte value, not a {ENCODED_BYTES}-byte CS265 integer",
            bytes.len()
        )
    })
}

impl Store for DbStore<'_> {
    fn put(&mut self, key: i32, value: i32) -> Result<(), String> {
        let (key, value) = (encode_i32(key), encode_i32(value));
        let result = match &self.write_options {
            None => self.db.put(&key, &value),
            Some(options) => {
                let mut batch = WriteBatch::new();
                batch.put(&key, &value);
                self.db.write(options, batch)
            }
        };
        result.map_err(|error| error.to_string())
    }

    fn get(&mut self, key: i32) -> Result<Option<i32>, String> {
        match self.db.get(&encode_i32(key)) {
            Ok(Some(bytes)) => decode_value(key, &bytes).map(Some),
            Ok(None) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    fn delete(&mut self, key: i32) -> Result<(), String> {
        let key = encode_i32(key);
        let result = match &self.write_options {
            None => self.db.delete(&key),
            Some(options) => {
                let mut batch = WriteBatch::new();
                batch.delete(&key);
                self.db.write(options, batch)
            }
        };
        result.map_err(|error| error.to_string())
    }

    fn range(&mut self, lower: i32, upper: i32, out: &mut Vec<(i32, i32)>) -> Result<(), String> {
        let (lower, upper) = (encode_i32(lower), encode_i32(upper));
        let entries = self
            .db
            .range(&lower[..]..&upper[..])
            .map_err(|error| error.to_string())?;
        for entry in entries {
            let (key, value) = entry.map_err(|error| error.to_string())?;
            // Keys that are not 4 bytes long were not written by this language (e.g. by
            // `cairn put`); they cannot be named by it either, so they are skipped.
            if let Some(key) = decode_i32_slice(&key) {
                out.push((key, decode_value(key, &value)?));
            }
        }
        Ok(())
    }

    /// `L1` is the write buffers, `L(k+2)` on-disk level `k` (see `cs265`'s module doc).
    fn stats(&mut self, limit: Option<usize>) -> Result<String, String> {
        let text = |error: cairn::Error| error.to_string();
        let mut logical_pairs = 0;
        for entry in self.db.range::<[u8], _>(..).map_err(text)? {
            let (key, _) = entry.map_err(text)?;
            logical_pairs += usize::from(decode_i32_slice(&key).is_some());
        }
        let places = std::iter::once(None).chain((0..self.db.level_stats().len()).map(Some));
        let mut levels = Vec::new();
        for (index, place) in places.enumerate() {
            let entries = self.db.level_entries(place, usize::MAX).map_err(text)?;
            let pairs: Vec<(i32, i32)> = entries
                .iter()
                .filter_map(|(key, value)| Some((decode_i32_slice(key)?, decode_i32_slice(value)?)))
                .collect();
            levels.push(LevelDump {
                level: index + 1,
                count: pairs.len(),
                pairs: pairs
                    .into_iter()
                    .take(limit.unwrap_or(usize::MAX))
                    .collect(),
            });
        }
        Ok(format_stats(logical_pairs, &levels))
    }
}
