//! The `Store` trait the commands are written against, and its three implementations:
//! [`DbStore`] (the LSM engine, `cairn::Db`), [`MemStoreStore`] (`cairn::MemStore`) and
//! [`ModelStore`] (a `BTreeMap` the unit tests use).
//!
//! Thread-safety contract: every store is `Send + Sync` and every method takes `&self`.
//! Single-key operations (`get`, `update`) are atomic per key in every store. `write` is
//! atomic (all or nothing, for every reader) in `DbStore` and `ModelStore`; `MemStore` has no
//! batches, so `MemStoreStore` checks every put's size first, then applies the last operation
//! of each key one by one (puts, then deletes), and puts back what it replaced if one fails:
//! a concurrent reader may see part of a batch (the server's key locks still keep writers of
//! the same keys out), but a failed batch leaves its keys as they were, unless putting an old
//! value back itself finds no space (the store is full; the batch's error is returned).
//!
//! Invariants:
//! 1. `MemStoreStore`'s ordered key index holds exactly the keys the `MemStore` holds once
//!    every write in progress has returned: each write updates the index after the engine,
//!    and writers of one key are serialized by the server's key locks.
//! 2. `update`'s decision function may run several times (the engine retries it); only its
//!    last run takes effect, so callers keep their outcome in variables each run overwrites.
//! 3. Under `--sync always` every write is durable before it returns, read-modify-writes
//!    included (`DbStore` passes its write options to `Db::update_with`).
//! 4. `DbStore` keeps a string record's expiry in the engine, not in the stored envelope
//!    (`layout::split_string_expiry`), and every value it returns from `get` or `update`
//!    carries it again (`layout::join_expiry`): callers see the same envelopes from every
//!    store. Values returned by `scan` lack it (the engine's iterators do not expose expiry);
//!    they are never expired, since the engine hides expired entries.
//! 5. `scan_keys` returns the pairs `scan` would, each value cut to its first
//!    `ENVELOPE_HEADER_MAX` bytes (copied alone: a pair never holds a whole value's
//!    allocation). `DbStore` and `ModelStore` copy nothing more; `MemStoreStore` reads each
//!    value whole inside the engine (a `MemStore` has no partial read), one at a time.

use crate::layout::{self, ENVELOPE_HEADER_MAX, META};
use cairn::{Db, MemStore, Update, WriteBatch, WriteOptions};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set a key.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key.
    Delete(Vec<u8>),
}

/// The decision function of [`Store::update`].
pub type Decide<'a> = &'a mut dyn FnMut(Option<&[u8]>) -> Update;

/// Key-value pairs returned by a scan.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The engine operations the commands need.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> cairn::Result<Option<Vec<u8>>>;
    /// Applies `ops` (atomically where the engine can; see the module doc).
    fn write(&self, ops: Vec<Op>) -> cairn::Result<()>;
    /// Sets one key: `write` of one `Op::Put`, for a caller that holds the key and value as
    /// borrowed bytes (a lone plain SET), so a store can skip building the operation.
    fn put(&self, key: &[u8], value: &[u8]) -> cairn::Result<()> {
        self.write(vec![Op::Put(key.to_vec(), value.to_vec())])
    }
    /// Atomic read-modify-write of one key.
    fn update(&self, key: &[u8], decide: Decide<'_>) -> cairn::Result<()>;
    /// Up to `limit` pairs in `[lower, upper)`, ascending (or descending with `reverse`).
    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs>;
    /// Like `scan`, but each value cut to its first `ENVELOPE_HEADER_MAX` bytes (a record's
    /// type and expiry; invariant 5): for walks that list keys, which must not load values.
    fn scan_keys(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs>;
    /// `name:value` lines for INFO's engine section.
    fn info(&self) -> Vec<(String, String)>;
    /// `db` or `memstore` (or `model`).
    fn engine_name(&self) -> &'static str;
    /// Flushes what the engine buffers; called at shutdown.
    fn close(&self) -> cairn::Result<()>;
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The LSM engine.
#[derive(Debug)]
pub struct DbStore {
    db: Db,
    sync: bool,
}

impl DbStore {
    /// Wraps an open database; `sync` makes every write durable before it returns.
    pub fn new(db: Db, sync: bool) -> Self {
        DbStore { db, sync }
    }

    // Built field by field: `WriteOptions` is (becoming) `#[non_exhaustive]`.
    #[allow(clippy::field_reassign_with_default)]
    fn options(&self) -> WriteOptions {
        WriteOptions::with_sync(self.sync)
    }
}

/// The first `ENVELOPE_HEADER_MAX` bytes of `value` (invariant 5).
fn header(value: &[u8]) -> Vec<u8> {
    value.get(..ENVELOPE_HEADER_MAX).unwrap_or(value).to_vec()
}

/// The engine's expiry of a string record's envelope, if it has one (invariant 4); `None`
/// for every other key.
fn engine_expiry(key: &[u8], value: &[u8]) -> Option<(Vec<u8>, SystemTime)> {
    if key.first() != Some(&META) {
        return None;
    }
    let (plain, at) = layout::split_string_expiry(value)?;
    #[cfg(feature = "invariants")]
    assert_eq!(
        layout::join_expiry(&plain, at),
        value,
        "invariant 4: the envelope read back equals the one written"
    );
    Some((plain, UNIX_EPOCH + Duration::from_millis(at)))
}

/// The envelope as callers see it: the engine's expiry folded back in (invariant 4).
fn with_engine_expiry(value: &[u8], expiry: Option<SystemTime>) -> Cow<'_, [u8]> {
    match expiry {
        Some(time) => {
            let at = time.duration_since(UNIX_EPOCH).map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            });
            Cow::Owned(layout::join_expiry(value, at))
        }
        None => Cow::Borrowed(value),
    }
}

impl Store for DbStore {
    fn get(&self, key: &[u8]) -> cairn::Result<Option<Vec<u8>>> {
        // Without an expiry the engine's value is the envelope: returned as is, not copied.
        Ok(self
            .db
            .get_with_expiry(key)?
            .map(|(value, expiry)| match expiry {
                None => value,
                Some(_) => with_engine_expiry(&value, expiry).into_owned(),
            }))
    }

    fn write(&self, ops: Vec<Op>) -> cairn::Result<()> {
        let mut batch = WriteBatch::new();
        for op in &ops {
            match op {
                Op::Put(key, value) => match engine_expiry(key, value) {
                    Some((plain, expiry)) => batch.put_with_expiry(key, &plain, expiry),
                    None => batch.put(key, value),
                },
                Op::Delete(key) => batch.delete(key),
            };
        }
        self.db.write(&self.options(), batch)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> cairn::Result<()> {
        match engine_expiry(key, value) {
            Some((plain, expiry)) => {
                let mut batch = WriteBatch::new();
                batch.put_with_expiry(key, &plain, expiry);
                self.db.write(&self.options(), batch)
            }
            None => self.db.put_with(&self.options(), key, value),
        }
    }

    fn update(&self, key: &[u8], decide: Decide<'_>) -> cairn::Result<()> {
        self.db.update_with(&self.options(), key, |current| {
            let current = current.map(|(value, expiry)| with_engine_expiry(value, expiry));
            match decide(current.as_deref()) {
                Update::Put(value) => match engine_expiry(key, &value) {
                    Some((plain, expiry)) => Update::PutWithExpiry(plain, expiry),
                    None => Update::Put(value),
                },
                other => other,
            }
        })?;
        Ok(())
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs> {
        let iterator = self.db.range::<[u8], _>((lower, upper))?;
        if reverse {
            iterator.rev().take(limit).collect()
        } else {
            iterator.take(limit).collect()
        }
    }

    fn scan_keys(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs> {
        let mut iterator = self.db.range::<[u8], _>((lower, upper))?;
        let mut pairs = Vec::new();
        while pairs.len() < limit {
            // Borrowed pairs: only the key and the header are copied.
            let next = if reverse {
                iterator.next_back_ref()
            } else {
                iterator.next_ref()
            };
            let Some(pair) = next else { break };
            let (key, value) = pair?;
            pairs.push((key.to_vec(), header(value)));
        }
        Ok(pairs)
    }

    fn info(&self) -> Vec<(String, String)> {
        let stats = self.db.stats();
        let mut lines: Vec<(String, String)> = [
            ("last_sequence", stats.last_sequence.to_string()),
            ("memtable_bytes", stats.memtable_bytes.to_string()),
            ("memtable_entries", stats.memtable_entries.to_string()),
            ("immutable_memtables", stats.immutable_memtables.to_string()),
            ("snapshots", stats.snapshots.to_string()),
            ("block_cache_bytes", stats.block_cache_bytes.to_string()),
            ("block_cache_hits", stats.block_cache_hits.to_string()),
            ("block_cache_misses", stats.block_cache_misses.to_string()),
            ("block_mapped_reads", stats.block_mapped_reads.to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        lines.extend(
            stats
                .counters
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string())),
        );
        lines
    }

    fn engine_name(&self) -> &'static str {
        "db"
    }

    fn close(&self) -> cairn::Result<()> {
        // With the WAL on, every acknowledged write is already in the log; flushing makes the
        // next start skip replaying it. `Db`'s drop stops the background threads.
        self.db.flush()
    }
}

/// The in-memory log-structured store, plus an ordered index of its keys (a `MemStore` is a
/// hash table and has no order) so that scans work on it too.
#[derive(Debug)]
pub struct MemStoreStore {
    store: MemStore,
    keys: Mutex<BTreeSet<Vec<u8>>>,
}

impl MemStoreStore {
    /// Invariant 1 for `key` (the caller's write to it has returned; the server holds its lock).
    #[cfg(feature = "invariants")]
    fn check_indexed(&self, key: &[u8]) {
        let stored = matches!(self.store.get(key), Ok(Some(_)));
        let indexed = lock(&self.keys).contains(key);
        assert_eq!(
            stored, indexed,
            "invariant 1: the key index matches the MemStore for {key:?}"
        );
    }

    /// Wraps a store.
    pub fn new(store: MemStore) -> Self {
        MemStoreStore {
            store,
            keys: Mutex::new(BTreeSet::new()),
        }
    }

    /// One operation, on the engine and then on the key index.
    fn apply(&self, op: Op) -> cairn::Result<()> {
        match op {
            Op::Put(key, value) => {
                self.store.put(&key, &value)?;
                lock(&self.keys).insert(key.clone());
                #[cfg(feature = "invariants")]
                self.check_indexed(&key);
            }
            Op::Delete(key) => {
                self.store.delete(&key)?;
                lock(&self.keys).remove(&key);
                #[cfg(feature = "invariants")]
                self.check_indexed(&key);
            }
        }
        Ok(())
    }

    /// Puts back what a failed batch's applied operations replaced, newest first. A put of
    /// an old value can itself find no space; it is retried no further (the batch's error is
    /// what the caller reports), which the module doc states.
    fn undo(&self, applied: Vec<(Vec<u8>, Option<Vec<u8>>)>) {
        for (key, before) in applied.into_iter().rev() {
            let _ = match before {
                Some(value) => self.apply(Op::Put(key, value)),
                None => self.apply(Op::Delete(key)),
            };
        }
    }
}

/// `ops` with only the last operation of each key, puts before deletes. Once one operation
/// per key remains their order no longer matters, and deletes, which take no space, then
/// cannot fail for want of it after a put has.
fn last_op_per_key(ops: Vec<Op>) -> Vec<Op> {
    let mut last = std::collections::HashMap::with_capacity(ops.len());
    for (position, op) in ops.iter().enumerate() {
        let (Op::Put(key, _) | Op::Delete(key)) = op;
        last.insert(key.clone(), position);
    }
    let mut kept: Vec<Op> = ops
        .into_iter()
        .enumerate()
        .filter(|(position, op)| {
            let (Op::Put(key, _) | Op::Delete(key)) = op;
            last.get(key) == Some(position)
        })
        .map(|(_, op)| op)
        .collect();
    kept.sort_by_key(|op| matches!(op, Op::Delete(_)));
    kept
}

impl Store for MemStoreStore {
    fn get(&self, key: &[u8]) -> cairn::Result<Option<Vec<u8>>> {
        self.store.get(key)
    }

    fn write(&self, ops: Vec<Op>) -> cairn::Result<()> {
        let ops = last_op_per_key(ops);
        for op in &ops {
            if let Op::Put(key, value) = op {
                self.store.check_put(key, value.len())?;
            }
        }
        let mut applied = Vec::with_capacity(ops.len());
        for op in ops {
            let key = match &op {
                Op::Put(key, _) | Op::Delete(key) => key.clone(),
            };
            match self.store.get(&key).and_then(|before| {
                self.apply(op)?;
                Ok(before)
            }) {
                Ok(before) => applied.push((key, before)),
                Err(error) => {
                    self.undo(applied);
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    fn update(&self, key: &[u8], decide: Decide<'_>) -> cairn::Result<()> {
        let mut exists = false;
        self.store.update(key, |current| {
            let next = match decide(current) {
                Update::Keep => current.map(<[u8]>::to_vec),
                // The envelope carries the expiry here; the commands never ask the engine.
                Update::Put(value) | Update::PutWithExpiry(value, _) => Some(value),
                Update::Delete => None,
            };
            exists = next.is_some();
            next
        })?;
        let mut keys = lock(&self.keys);
        if exists {
            keys.insert(key.to_vec());
        } else {
            keys.remove(key);
        }
        drop(keys);
        #[cfg(feature = "invariants")]
        self.check_indexed(key);
        Ok(())
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs> {
        self.scan_with((lower, upper), limit, reverse, usize::MAX)
    }

    fn scan_keys(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs> {
        self.scan_with((lower, upper), limit, reverse, ENVELOPE_HEADER_MAX)
    }

    fn info(&self) -> Vec<(String, String)> {
        let stats = self.store.stats();
        vec![
            (
                "capacity_bytes".to_string(),
                stats.capacity_bytes.to_string(),
            ),
            ("live_bytes".to_string(), stats.live_bytes.to_string()),
            ("used_bytes".to_string(), stats.used_bytes.to_string()),
            ("index_entries".to_string(), stats.index_entries.to_string()),
            ("compactions".to_string(), stats.compactions.to_string()),
            ("full_errors".to_string(), stats.full_errors.to_string()),
        ]
    }

    fn engine_name(&self) -> &'static str {
        "memstore"
    }

    fn close(&self) -> cairn::Result<()> {
        Ok(())
    }
}

impl MemStoreStore {
    /// `scan` with each value cut to its first `value_bytes_max` bytes (the rest unread).
    fn scan_with(
        &self,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        limit: usize,
        reverse: bool,
        value_bytes_max: usize,
    ) -> cairn::Result<Pairs> {
        let mut pairs = Vec::new();
        // Keys are collected in chunks so the index lock is not held across engine reads.
        let mut cursor: Bound<Vec<u8>> = if reverse {
            upper.map(<[u8]>::to_vec)
        } else {
            lower.map(<[u8]>::to_vec)
        };
        while pairs.len() < limit {
            let chunk = self.index_chunk(&cursor, lower, upper, reverse, 256);
            let Some(last) = chunk.last() else { break };
            cursor = Bound::Excluded(last.clone());
            for key in chunk {
                if pairs.len() >= limit {
                    break;
                }
                // A key deleted since the index was read is skipped.
                if let Some(value) = self.store.get_head(&key, value_bytes_max)? {
                    pairs.push((key, value));
                }
            }
        }
        Ok(pairs)
    }

    /// Up to `count` index keys after `cursor` (in scan direction) within the bounds.
    fn index_chunk(
        &self,
        cursor: &Bound<Vec<u8>>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        count: usize,
    ) -> Vec<Vec<u8>> {
        let keys = lock(&self.keys);
        let cursor = cursor.as_ref().map(Vec::as_slice);
        let (from, to) = if reverse {
            (lower, cursor)
        } else {
            (cursor, upper)
        };
        if !bounds_ordered(from, to) {
            return Vec::new();
        }
        let range = keys.range::<[u8], _>((from, to));
        if reverse {
            range.rev().take(count).cloned().collect()
        } else {
            range.take(count).cloned().collect()
        }
    }
}

/// False when `BTreeMap::range` would panic (start after end, or equal and excluded).
fn bounds_ordered(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (lower, upper) {
        (Bound::Included(low), Bound::Included(high)) => low <= high,
        (Bound::Included(low) | Bound::Excluded(low), Bound::Excluded(high))
        | (Bound::Excluded(low), Bound::Included(high)) => low < high,
        _ => true,
    }
}

/// The in-memory model the command unit tests run against.
#[derive(Debug, Default)]
pub struct ModelStore {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Store for ModelStore {
    fn get(&self, key: &[u8]) -> cairn::Result<Option<Vec<u8>>> {
        Ok(lock(&self.map).get(key).cloned())
    }

    fn write(&self, ops: Vec<Op>) -> cairn::Result<()> {
        let mut map = lock(&self.map);
        for op in ops {
            match op {
                Op::Put(key, value) => map.insert(key, value),
                Op::Delete(key) => map.remove(&key),
            };
        }
        Ok(())
    }

    fn update(&self, key: &[u8], decide: Decide<'_>) -> cairn::Result<()> {
        let mut map = lock(&self.map);
        match decide(map.get(key).map(Vec::as_slice)) {
            Update::Keep => {}
            Update::Put(value) | Update::PutWithExpiry(value, _) => {
                map.insert(key.to_vec(), value);
            }
            Update::Delete => {
                map.remove(key);
            }
        }
        Ok(())
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs> {
        let map = lock(&self.map);
        if !bounds_ordered(lower, upper) {
            return Ok(Vec::new());
        }
        let range = map.range::<[u8], _>((lower, upper));
        let clone = |(key, value): (&Vec<u8>, &Vec<u8>)| (key.clone(), value.clone());
        Ok(if reverse {
            range.rev().take(limit).map(clone).collect()
        } else {
            range.take(limit).map(clone).collect()
        })
    }

    fn scan_keys(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> cairn::Result<Pairs> {
        let map = lock(&self.map);
        if !bounds_ordered(lower, upper) {
            return Ok(Vec::new());
        }
        let range = map.range::<[u8], _>((lower, upper));
        let cut = |(key, value): (&Vec<u8>, &Vec<u8>)| (key.clone(), header(value));
        Ok(if reverse {
            range.rev().take(limit).map(cut).collect()
        } else {
            range.take(limit).map(cut).collect()
        })
    }

    fn info(&self) -> Vec<(String, String)> {
        vec![("keys".to_string(), lock(&self.map).len().to_string())]
    }

    fn engine_name(&self) -> &'static str {
        "model"
    }

    fn close(&self) -> cairn::Result<()> {
        Ok(())
    }
}

/// A shared store handle.
pub type SharedStore = Arc<dyn Store>;

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(store: &dyn Store) {
        store
            .write(vec![
                Op::Put(b"a".to_vec(), b"1".to_vec()),
                Op::Put(b"b".to_vec(), b"2".to_vec()),
                Op::Put(b"c".to_vec(), b"3".to_vec()),
            ])
            .unwrap();
        store
            .update(b"b", &mut |current| {
                assert_eq!(current, Some(&b"2"[..]));
                Update::Delete
            })
            .unwrap();
        let all = store
            .scan(Bound::Unbounded, Bound::Unbounded, 10, false)
            .unwrap();
        assert_eq!(all.len(), 2);
        let reversed = store
            .scan(Bound::Unbounded, Bound::Excluded(b"c"), 10, true)
            .unwrap();
        assert_eq!(reversed, vec![(b"a".to_vec(), b"1".to_vec())]);
        let empty = store
            .scan(Bound::Included(b"z"), Bound::Excluded(b"a"), 10, false)
            .unwrap();
        assert!(empty.is_empty());
        // `put`, with and without an expiry in the envelope, reads back as written.
        let key = layout::meta_key(b"s");
        let plain = layout::string_envelope(b"v");
        let in_an_hour = crate::expiry::now_ms() + 3_600_000;
        for envelope in [
            plain.clone(),
            layout::join_expiry(&plain, in_an_hour),
            plain,
        ] {
            store.put(&key, &envelope).unwrap();
            assert_eq!(store.get(&key).unwrap(), Some(envelope));
        }
        // `scan_keys`: the pairs of `scan`, values cut to their header (invariant 5).
        let long = Op::Put(b"l".to_vec(), b"0123456789abcdef".to_vec());
        store.write(vec![long]).unwrap();
        for reverse in [false, true] {
            let whole = store
                .scan(Bound::Unbounded, Bound::Excluded(b"m"), 10, reverse)
                .unwrap();
            let headers = store
                .scan_keys(Bound::Unbounded, Bound::Excluded(b"m"), 10, reverse)
                .unwrap();
            let cut: Pairs = whole
                .into_iter()
                .map(|(key, value)| (key, value[..value.len().min(9)].to_vec()))
                .collect();
            assert_eq!(headers, cut);
            assert!(headers.contains(&(b"l".to_vec(), b"012345678".to_vec())));
            let one = store
                .scan_keys(Bound::Unbounded, Bound::Unbounded, 1, reverse)
                .unwrap();
            assert_eq!(one.len(), 1);
        }
    }

    #[test]
    fn every_store_behaves_alike() {
        exercise(&ModelStore::default());
        let memstore = MemStore::new(cairn::MemStoreOptions {
            capacity_bytes: 64 << 20,
            heads: 1,
            segment_bytes: 1 << 20,
            ..cairn::MemStoreOptions::default()
        })
        .unwrap();
        exercise(&MemStoreStore::new(memstore));
        let db = Db::open("/db", cairn::Options::in_memory()).unwrap();
        exercise(&DbStore::new(db, false));
    }

    /// A `MemStoreStore` batch is all or nothing for what stays stored: a put refused for its
    /// size, or for want of space part way, leaves every key of the batch as it was (a SET
    /// over a hash once deleted the hash and then failed to write the string).
    #[test]
    fn a_memstore_batch_that_fails_changes_nothing() {
        let memstore = MemStore::new(cairn::MemStoreOptions {
            capacity_bytes: 8 << 20,
            heads: 1,
            segment_bytes: 1 << 20,
            full_wait_limit: Duration::from_millis(50),
            ..cairn::MemStoreOptions::default()
        })
        .unwrap();
        let store = MemStoreStore::new(memstore);
        let put = |key: &str, value: Vec<u8>| Op::Put(key.as_bytes().to_vec(), value);
        store
            .write(vec![put("a", b"1".to_vec()), put("h", b"old".to_vec())])
            .unwrap();
        let unchanged = |store: &MemStoreStore| {
            assert_eq!(store.get(b"a").unwrap(), Some(b"1".to_vec()));
            assert_eq!(store.get(b"h").unwrap(), Some(b"old".to_vec()));
            let all = store
                .scan(Bound::Unbounded, Bound::Unbounded, usize::MAX, false)
                .unwrap();
            let keys: Vec<&[u8]> = all.iter().map(|(key, _)| key.as_slice()).collect();
            assert_eq!(keys, [&b"a"[..], b"h"]);
        };
        let too_large = vec![
            Op::Delete(b"h".to_vec()),
            put("a", b"2".to_vec()),
            put("b", vec![0; 2 << 20]),
        ];
        assert!(store.write(too_large).is_err());
        unchanged(&store);
        // 16 MiB into 8: out of space part way.
        let mut too_many = vec![Op::Delete(b"h".to_vec()), put("a", b"2".to_vec())];
        too_many.extend((0..64).map(|number| put(&format!("k{number}"), vec![7; 256 << 10])));
        let error = store.write(too_many).unwrap_err();
        assert!(matches!(error, cairn::Error::Full { .. }), "{error:?}");
        unchanged(&store);
    }
}
