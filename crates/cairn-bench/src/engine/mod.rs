//! The one trait every engine under test implements, and opening engines by name.
//!
//! One file per engine (the two hash-map baselines share one). The LSM peers are compiled
//! only with their cargo feature (`rocksdb`, `leveldb`), so the default build never touches
//! their C++ sources; the in-memory engines (`memstore`, `rwlock-hashmap`, `dashmap`) are pure
//! Rust and always built.

use crate::error::{BenchError, Result};
use std::path::Path;

pub mod cairn;
pub mod hashmaps;
#[cfg(feature = "leveldb")]
pub mod leveldb;
pub mod memstore;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;

/// Engines kept wholly in memory, with no ordered iteration.
const IN_MEMORY: [&str; 3] = ["memstore", "rwlock-hashmap", "dashmap"];

/// The options shared by every engine, mapped onto each as closely as it allows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineConfig {
    /// Memtable (memory component) size.
    pub write_buffer_size: usize,
    /// Block cache capacity.
    pub block_cache_size: usize,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits: usize,
    /// Data block size.
    pub block_size: usize,
    /// Write-ahead log on.
    pub wal: bool,
    /// fdatasync every write.
    pub sync: bool,
    /// Target SSTable size.
    pub target_file_size: u64,
    /// Level-1 size limit.
    pub level1_size: u64,
    /// Level-0 file counts: compaction trigger, slowdown, stop.
    pub level0_triggers: (usize, usize, usize),
    /// Sealed memtables that may wait for flush.
    pub max_immutable_memtables: usize,
    /// Log capacity of `memstore` (MemStore's index is extra).
    pub memstore_capacity: usize,
    /// cairn's block compression (`--compression_type`); the other engines ignore it.
    #[serde(serialize_with = "serialize_compression")]
    pub compression: ::cairn::Compression,
    /// cairn's tree shape (fanout also maps onto RocksDB/LevelDB where they have it).
    pub shape: ShapeConfig,
    /// cairn only, feature `flodb-variants`: drop sealed memtables instead of flushing them
    /// (FloDB Fig. 17: the memory component alone).
    pub drop_sealed: bool,
    /// Read tables through memory mappings (`true`) or `pread` (`false`): cairn's
    /// `TableReadMode`, RocksDB's `allow_mmap_reads`. `None`: each engine's own default
    /// (cairn: mapped; RocksDB: pread).
    pub mmap_reads: Option<bool>,
    /// cairn only: the WAL through a shared mapping (`true`) or `write(2)` (`false`); `None`:
    /// the engine's default.
    pub wal_mmap: Option<bool>,
    /// cairn: threads probing sorted runs concurrently (0: off).
    pub lookup_threads: usize,
    /// cairn: Membuffer partitions (0: the engine's default).
    pub membuffer_partitions: usize,
    /// cairn: Membuffer drainer threads (`None`: the engine's default).
    pub membuffer_drainers: Option<usize>,
    /// cairn: the Membuffer's share of the write buffer in percent (`None`: the default).
    pub membuffer_percent: Option<usize>,
}

/// Reports carry the compression by name (`Compression` has no serde support).
fn serialize_compression<S: serde::Serializer>(
    compression: &::cairn::Compression,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{compression:?}").to_lowercase())
}

/// cairn's shape knobs (`--compaction_style`, `--fanout`, ...; docs/tuning.md).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShapeConfig {
    /// Leveling, tiering or lazy leveling.
    #[serde(serialize_with = "debug_string")]
    pub style: ::cairn::CompactionStyle,
    /// Size ratio T.
    pub fanout: u64,
    /// Runs per level D (tiered styles).
    pub runs_per_level: usize,
    /// Merge fraction m (tiered styles).
    pub merge_fraction: f64,
    /// Uniform or Monkey Bloom bits.
    #[serde(serialize_with = "debug_string")]
    pub bloom_allocation: ::cairn::BloomAllocation,
    /// Data block size per level from level 0 (empty: `block_size` everywhere).
    pub level_block_sizes: Vec<usize>,
    /// Compression per level from level 0 (empty: `compression` everywhere).
    #[serde(serialize_with = "compression_list")]
    pub level_compression: Vec<::cairn::Compression>,
    /// Number of levels.
    pub levels: usize,
    /// Background compaction threads.
    pub compaction_threads: usize,
}

impl Default for ShapeConfig {
    fn default() -> Self {
        let options = ::cairn::Options::default();
        ShapeConfig {
            style: options.compaction_style,
            fanout: options.level_size_ratio,
            runs_per_level: options.runs_per_level,
            merge_fraction: options.merge_fraction,
            bloom_allocation: options.bloom_allocation,
            level_block_sizes: Vec::new(),
            level_compression: Vec::new(),
            levels: options.level_count,
            compaction_threads: options.compaction_threads,
        }
    }
}

fn compression_list<S: serde::Serializer>(
    list: &[::cairn::Compression],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    let names: Vec<String> = list
        .iter()
        .map(|compression| format!("{compression:?}").to_lowercase())
        .collect();
    serde::Serialize::serialize(&names, serializer)
}

fn debug_string<T: std::fmt::Debug, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{value:?}"))
}

/// The error of a scan on an engine without ordered iteration. The runner skips workloads
/// that scan on such engines before they start (see [`supports_scan`]); this is the backstop.
pub fn unsupported_scan(engine: &str) -> BenchError {
    BenchError::new(format!(
        "{engine} has no ordered iteration: scans are unsupported"
    ))
}

/// The value a read-modify-write stores: `value` with its first byte XORed with the current
/// value's first byte.
pub fn derive_value(current: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
    let mut derived = value.to_vec();
    if let (Some(first), Some(current_first)) = (
        derived.first_mut(),
        current.and_then(|current| current.first()),
    ) {
        *first ^= current_first;
    }
    derived
}

/// Lock stripes of the baseline read-modify-write. One table for the process: engines run
/// one at a time, and the stripes only need to serialise read-modify-writes of one key.
const RMW_STRIPES: usize = 1024;

static RMW_LOCKS: [std::sync::Mutex<()>; RMW_STRIPES] =
    [const { std::sync::Mutex::new(()) }; RMW_STRIPES];

/// The lock-striped read-modify-write (cLSM §5.1's baseline): a mutex chosen by the key's
/// hash is held across get + put, which makes the pair atomic against other
/// read-modify-writes of the key. The paper's baseline also takes the stripe for plain
/// writes; here they do not, which only matters for workloads that mix puts and
/// read-modify-writes of one key — the ones that use read-modify-write (`clsm_rmw`,
/// `ycsb_f`) mix them with reads only.
pub fn striped_read_modify_write<E: Engine + ?Sized>(
    engine: &E,
    key: &[u8],
    value: &[u8],
) -> Result<bool> {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
    // The modulo keeps the index in range, so the lookup cannot fail.
    let stripe = RMW_LOCKS.get((hash % RMW_STRIPES as u64) as usize);
    // A panic while holding a stripe cannot leave `()` inconsistent: ignore poisoning.
    let _held = stripe.map(|mutex| {
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    });
    let mut current = Vec::new();
    let found = engine.get(key, &mut current)?;
    engine.put(
        key,
        &derive_value(found.then_some(current.as_slice()), value),
    )?;
    Ok(found)
}

/// A key-value engine as the benchmark sees it. Every method may be called from many threads.
pub trait Engine: Send + Sync {
    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Sets `key` to `value` and fdatasyncs its log record before returning, whatever the
    /// engine's sync setting (`--sync_every`).
    fn put_synced(&self, _key: &[u8], _value: &[u8]) -> Result<()> {
        Err(BenchError::new(
            "this engine does not support per-write sync (--sync_every)",
        ))
    }
    /// Copies the value of `key` into `value`; false if absent.
    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool>;
    /// Point reads of all `keys` as one batch; returns how many were found. The default
    /// reads them one by one (engines with a batch read override it).
    fn multi_get(&self, keys: &[&[u8]]) -> Result<usize> {
        let mut value = Vec::new();
        let mut found = 0;
        for key in keys {
            if self.get(key, &mut value)? {
                found += 1;
            }
        }
        Ok(found)
    }
    /// Removes `key`.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Visits up to `count` entries with key ≥ `start`, ascending; returns how many.
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize>;
    /// Replaces the value of `key` by `value` as one read-modify-write: `value` is stored
    /// with its first byte XORed with the current value's first byte (so the result depends
    /// on the read). Returns whether the key existed. Engines without an atomic
    /// read-modify-write use the default: get + put under a lock stripe of the key
    /// (`striped_read_modify_write`), the textbook baseline cLSM §5.1 adds to LevelDB.
    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        striped_read_modify_write(self, key, value)
    }
    /// Writes the memtable to disk and waits for it, where the engine allows.
    fn flush(&self) -> Result<()>;
    /// Engine-internal counters worth reporting (name, value).
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Compacts the whole key space and waits for it (the `compact` workload).
    fn compact(&self) -> Result<()> {
        Err(BenchError::new(
            "this engine has no whole-range compaction in cairn-bench (`compact`)",
        ))
    }
    /// Waits until background flushes and compactions have stopped (the `settle` workload);
    /// engines that expose no such state return at once.
    fn settle(&self) -> Result<()> {
        Ok(())
    }
    /// The tree's shape now, one short line (None where the engine does not report it).
    fn shape(&self) -> Option<String> {
        None
    }
    /// Closes the engine, reporting errors from the shutdown.
    fn close(self: Box<Self>) -> Result<()>;
}

/// Engines this binary was built with.
pub fn available() -> Vec<&'static str> {
    let mut names = vec![
        "cairn",
        "cairn-striped",
        "cairn-membuffer",
        "cairn-nomembuffer",
        "cairn-membuffer-writerdrain",
        "cairn-membuffer-drainer",
        "cairn-membuffer-nobypass",
        "cairn-leveling",
        "cairn-tiering",
        "cairn-lazy",
    ];
    if cfg!(feature = "flodb-variants") {
        names.push("cairn-simpleinsert");
        names.push("cairn-membuffer-move");
    }
    names.extend(IN_MEMORY);
    if cfg!(feature = "rocksdb") {
        names.push("rocksdb");
    }
    if cfg!(feature = "leveldb") {
        names.push("leveldb");
    }
    names
}

/// Checks that `name` is an engine this binary can open.
pub fn check_name(name: &str) -> Result<()> {
    match name {
        "cairn"
        | "cairn-striped"
        | "cairn-membuffer"
        | "cairn-nomembuffer"
        | "cairn-membuffer-writerdrain"
        | "cairn-membuffer-drainer"
        | "cairn-membuffer-nobypass"
        | "cairn-leveling"
        | "cairn-tiering"
        | "cairn-lazy" => Ok(()),
        "cairn-simpleinsert" | "cairn-membuffer-move" if cfg!(feature = "flodb-variants") => {
            Ok(())
        }
        "cairn-simpleinsert" | "cairn-membuffer-move" => Err(BenchError::new(format!(
            "engine `{name}` was not compiled in: rebuild with `--features flodb-variants`"
        ))),
        name if IN_MEMORY.contains(&name) => Ok(()),
        "rocksdb" if cfg!(feature = "rocksdb") => Ok(()),
        "leveldb" if cfg!(feature = "leveldb") => Ok(()),
        "rocksdb" | "leveldb" => Err(BenchError::new(format!(
            "engine `{name}` was not compiled in: rebuild with `--features {name}` (see bench/README.md)"
        ))),
        other => Err(BenchError::new(format!(
            "unknown engine `{other}` (known: cairn, cairn-striped, cairn-leveling, cairn-tiering, cairn-lazy, rocksdb, leveldb, {}; built: {})",
            IN_MEMORY.join(", "),
            available().join(", ")
        ))),
    }
}

/// How each option is mapped for engine `name`, one line per option.
pub fn mapping(name: &str, config: &EngineConfig) -> Vec<String> {
    match name {
        "cairn" => cairn::mapping(config),
        "cairn-leveling" | "cairn-tiering" | "cairn-lazy" => cairn::mapping_for(name, config),
        "cairn-striped" => {
            let mut lines = cairn::mapping(config);
            lines.push(
                "read-modify-write: get + put under a lock stripe (baseline), not Db::update"
                    .to_string(),
            );
            lines
        }
        "cairn-membuffer"
        | "cairn-nomembuffer"
        | "cairn-simpleinsert"
        | "cairn-membuffer-move"
        | "cairn-membuffer-writerdrain"
        | "cairn-membuffer-drainer"
        | "cairn-membuffer-nobypass" => {
            let mut lines = cairn::mapping_for(name, config);
            lines.push(
                match name {
                    "cairn-nomembuffer" => "memory component: memtable only (Membuffer off)",
                    "cairn-membuffer" => "memory component: Membuffer on, multi-insert drains",
                    "cairn-membuffer-move" => {
                        "memory component: Membuffer on, in-place updates always move the old version"
                    }
                    "cairn-membuffer-writerdrain" => {
                        "memory component: Membuffer on, no drainer threads (writers drain)"
                    }
                    "cairn-membuffer-drainer" => {
                        "memory component: Membuffer on, one drainer thread (writers help when full)"
                    }
                    "cairn-membuffer-nobypass" => {
                        "memory component: Membuffer on, never bypassed however scan-heavy the mix"
                    }
                    _ => "memory component: Membuffer drained by single inserts (no multi-insert)",
                }
                .to_string(),
            );
            lines
        }
        "memstore" => memstore::mapping(config),
        "rwlock-hashmap" => hashmaps::sharded_mapping(),
        "dashmap" => hashmaps::dashmap_mapping(),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => rocksdb::mapping(config),
        #[cfg(feature = "leveldb")]
        "leveldb" => leveldb::mapping(config),
        _ => vec!["(not compiled in)".to_string()],
    }
}

/// Whether engine `name` can run scans (the in-memory engines have no key order).
pub fn supports_scan(name: &str) -> bool {
    !IN_MEMORY.contains(&name)
}

/// Opens engine `name` on a fresh directory `dir` (the in-memory engines ignore it).
pub fn open(name: &str, dir: &Path, config: &EngineConfig) -> Result<Box<dyn Engine>> {
    check_name(name)?;
    match name {
        "memstore" => return Ok(Box::new(memstore::MemStoreEngine::open(config)?)),
        "rwlock-hashmap" => return Ok(Box::new(hashmaps::ShardedMap::new())),
        "dashmap" => return Ok(Box::new(hashmaps::DashMapEngine::new())),
        _ => {}
    }
    #[cfg(feature = "rocksdb")]
    if name == "rocksdb" {
        return Ok(Box::new(rocksdb::RocksEngine::open(dir, config)?));
    }
    #[cfg(feature = "leveldb")]
    if name == "leveldb" {
        return Ok(Box::new(leveldb::LevelEngine::open(dir, config)?));
    }
    let mut engine = cairn::CairnEngine::open(dir, config, name)?;
    if name == "cairn-striped" {
        engine.use_striped_read_modify_write();
    }
    Ok(Box::new(engine))
}
