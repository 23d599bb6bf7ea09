//! Two in-memory baselines for MemStore: a sharded `RwLock<HashMap>` written here, and the
//! `dashmap` crate.
//!
//! Both are used the way a program would naturally use them: `insert` of owned copies of the
//! key and value, and `get` copies the value into a fresh `Vec` (as `MemStore::get` does), so
//! every engine pays one value copy and one allocation per read. Neither keeps anything
//! durable nor ordered: scans are unsupported.

use super::{unsupported_scan, Engine};
use crate::error::Result;
use dashmap::DashMap;
use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Shards of [`ShardedMap`]: enough that 16 threads rarely meet on one lock.
const SHARDS: usize = 64;

type Map = HashMap<Vec<u8>, Vec<u8>>;

/// `SHARDS` `RwLock<HashMap>`s; a key's shard is chosen by a hash of its bytes.
#[derive(Debug)]
pub struct ShardedMap {
    shards: Box<[RwLock<Map>]>,
}

/// Picks the shard of `key`: FNV-1a then the murmur3 finalizer. A hash of its own rather than
/// the maps' SipHash, so it is cheap, and so the keys of one shard are not correlated with
/// the bucket bits the shard's map uses.
fn shard_of(key: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in key {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    (hash % SHARDS as u64) as usize
}

/// The option mapping of `rwlock-hashmap`, printed at startup.
pub fn sharded_mapping() -> Vec<String> {
    vec![
        format!(
            "{SHARDS} shards of std::sync::RwLock<std::collections::HashMap<Vec<u8>, Vec<u8>>> \
             (SipHash inside each shard; shard by FNV-1a + fmix64)"
        ),
        "put = insert(key.to_vec(), value.to_vec()); get clones the value out (a fresh Vec \
         per get, as MemStore::get)"
            .to_string(),
        "read-modify-write under the shard's write lock (atomic); no durability; scans \
         unsupported"
            .to_string(),
    ]
}

impl ShardedMap {
    /// An empty map.
    pub fn new() -> Self {
        ShardedMap {
            shards: (0..SHARDS).map(|_| RwLock::new(Map::new())).collect(),
        }
    }

    // A panic while a shard is locked can only come from an allocation failure inside the
    // map; the benchmark stops on the panic anyway, so a poisoned lock is used as it is.
    fn read(&self, key: &[u8]) -> RwLockReadGuard<'_, Map> {
        self.shards[shard_of(key)]
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self, key: &[u8]) -> RwLockWriteGuard<'_, Map> {
        self.shards[shard_of(key)]
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for ShardedMap {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine for ShardedMap {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(key).insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        match self.read(key).get(key) {
            Some(found) => {
                *value = found.clone();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.write(key).remove(key);
        Ok(())
    }

    fn scan(
        &self,
        _start: &[u8],
        _count: usize,
        _visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        Err(unsupported_scan("rwlock-hashmap"))
    }

    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut shard = self.write(key);
        let current = shard.get(key);
        let found = current.is_some();
        let derived = super::derive_value(current.map(Vec::as_slice), value);
        shard.insert(key.to_vec(), derived);
        Ok(found)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// `dashmap::DashMap` with its defaults (shard count 4 × CPUs rounded up to a power of two,
/// SipHash).
#[derive(Debug)]
pub struct DashMapEngine {
    map: DashMap<Vec<u8>, Vec<u8>>,
}

/// The option mapping of `dashmap`, printed at startup.
pub fn dashmap_mapping() -> Vec<String> {
    // dashmap does not expose its shard count without its raw API; this is its default's
    // formula (dashmap 6 `default_shard_amount`).
    let shards =
        (std::thread::available_parallelism().map_or(1, usize::from) * 4).next_power_of_two();
    vec![
        format!(
            "dashmap 6 DashMap<Vec<u8>, Vec<u8>> with defaults: {shards} shards (4 x CPUs, \
             next power of two), SipHash"
        ),
        "put = insert(key.to_vec(), value.to_vec()); get clones the value out (a fresh Vec \
         per get, as MemStore::get)"
            .to_string(),
        "read-modify-write through entry() (atomic); no durability; scans unsupported".to_string(),
    ]
}

impl DashMapEngine {
    /// An empty map.
    pub fn new() -> Self {
        DashMapEngine {
            map: DashMap::new(),
        }
    }
}

impl Default for DashMapEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine for DashMapEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        match self.map.get(key) {
            Some(found) => {
                *value = found.value().clone();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.map.remove(key);
        Ok(())
    }

    fn scan(
        &self,
        _start: &[u8],
        _count: usize,
        _visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        Err(unsupported_scan("dashmap"))
    }

    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut found = false;
        self.map
            .entry(key.to_vec())
            .and_modify(|current| {
                found = true;
                *current = super::derive_value(Some(current), value);
            })
            .or_insert_with(|| super::derive_value(None, value));
        Ok(found)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(engine: &dyn Engine) {
        let mut value = Vec::new();
        assert!(!engine.get(b"k", &mut value).unwrap());
        engine.put(b"k", b"abc").unwrap();
        assert!(engine.get(b"k", &mut value).unwrap());
        assert_eq!(value, b"abc");
        assert!(engine.read_modify_write(b"k", b"xyz").unwrap());
        assert!(engine.get(b"k", &mut value).unwrap());
        assert_eq!(value, [b'x' ^ b'a', b'y', b'z']);
        engine.delete(b"k").unwrap();
        assert!(!engine.get(b"k", &mut value).unwrap());
        assert!(engine.scan(b"", 10, &mut |_, _| {}).is_err());
    }

    #[test]
    fn both_maps_behave_like_maps() {
        exercise(&ShardedMap::new());
        exercise(&DashMapEngine::new());
    }

    #[test]
    fn shards_are_all_used() {
        let mut used = [false; SHARDS];
        for n in 0u64..10_000 {
            let mut key = n.to_be_bytes().to_vec();
            key.resize(16, b'0');
            used[shard_of(&key)] = true;
        }
        assert!(used.iter().all(|&hit| hit));
    }
}
