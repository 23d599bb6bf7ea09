//! History-checked stress test of the cLSM layer.
//!
//! Four threads (on two cores) run a mixed workload against a `Db` whose memtable is tiny, so
//! memtable switches, flushes and compactions happen constantly: puts, deletes and batches
//! (some with `sync: true`), gets, `put_if_absent`s (a read-modify-write that may keep the
//! value: a read of the newest version, which must be visible before it is reported),
//! increments, `compare_and_swap`s, wide batches (72 distinct keys each, from a space of
//! 256: more than the 64-slot key index of a 4 KiB memtable holds, so lookups must fall back
//! from a saturated index to the skiplist), a few values of 1–3 MiB (WAL records larger than
//! a WAL segment, so the log rolls over to a bigger successor), `get_at` a snapshot, snapshot
//! scans (some read forward and backward at one snapshot), and latest-state range scans,
//! forward and reverse, with random bounds. Every operation is recorded with invocation and
//! response times from one logical clock, and every write with the sequence number the engine
//! gave it (`write_with_sequence`, `read_modify_write`). The checker then verifies:
//!
//! 1. **Write order respects real time**: a write that responded before another was invoked
//!    has the smaller sequence number (the sequence order is the engine's claimed
//!    linearization of writes).
//! 2. **Per-key linearizability, searched** (`common/linearizability.rs`, Wing & Gong's search
//!    with Lowe's memoization, as in Porcupine): for every key, the operations on it — puts,
//!    deletes, gets, increments, compare-and-swaps, each batch's write of the key, each
//!    `get_at` and each scan's read of the key (its value, or its absence inside the scan's
//!    bounds) — must have a sequential order, consistent with real time, under a register,
//!    counter and compare-and-swap model. This check uses only times, inputs and outputs,
//!    never the engine's sequence numbers, so a bug that corrupts the sequence numbers cannot
//!    hide from it. Projecting a multi-key operation onto each key is sound because
//!    linearizability is local: a linearization of the whole history restricts to one of
//!    every key. A snapshot read counts as a read inside its interval because the snapshot
//!    was taken there; a latest-state scan promises no single snapshot, but each key it
//!    returns was read inside its interval.
//! 3. **Latest-state reads against the engine's order** (a witness check, with the order
//!    supplied by the sequence numbers instead of searched; linear-time): a get, or a
//!    latest-state scan's entry for a key, returns the value of a write w (or nothing: a
//!    delete or the initial state) such that w was invoked before the read responded, no
//!    later write of the key had responded before the read was invoked, and reads that follow
//!    each other in real time never go back in the write order.
//! 4. **Increments are counted exactly once**: per counter, the returned values are exactly
//!    1..=n in sequence order and the final value is n.
//! 5. **Snapshot scans and `get_at`s equal the state at their timestamp**, reconstructed from
//!    the write history (every write with sequence <= S, newest per key), and the timestamp
//!    is at or above every write that responded before `snapshot()` was called.
//! 6. **Batches are all-or-nothing**: in every snapshot scan the batch keys hold one value.
//! 7. **Scans are well formed**: keys strictly ascending (descending for a reverse scan) and
//!    inside the bounds, and a reverse scan at a snapshot is the forward scan reversed.
//!
//! Compare-and-swap keys are checked by check 2 alone (`compare_and_swap` reports no sequence
//! number). Large values are recorded as a short token after their whole content is verified
//! (`decode_value`), so the history stays small.
//!
//! Duration: `CAIRN_HISTORY_SECONDS` (default 3 in CI; run with 10 or more for the soak).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "history/checks.rs"]
mod checks;
mod common;
// Included here only, so its own unit tests run in this binary and not in every test file.
#[path = "common/linearizability.rs"]
mod linearizability;

use cairn::{
    Db, MemFs, Options, SequenceNumber, StdFs, TableReadMode, Update, WriteBatch, WriteOptions,
};
use linearizability::{KeyModel, KeyOperation, Timed, Verdict};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const REGISTERS: usize = 12;
const COUNTERS: usize = 3;
const BATCH_KEYS: usize = 4;
const CAS_KEYS: usize = 3;
/// Wide keys, and how many consecutive ones (wrapping) a wide batch writes: more than the 64
/// index slots of a 4 KiB memtable (one per 64 bytes of buffer), and a batch goes into one
/// memtable, so every memtable that takes a wide batch has a saturated key index.
const WIDE_KEYS: usize = 256;
const WIDE_BATCH: usize = 72;
/// The key large values go to, how many are written per run, and their size range.
const BIG_KEY: &str = "big";
const BIG_WRITES: usize = 4;
const BIG_BYTES_MIN: usize = 1 << 20;
const BIG_BYTES_MAX: usize = 3 << 20;
/// Values longer than this are large values and recorded as tokens.
const SMALL_VALUE_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone)]
enum Kind {
    Put {
        key: String,
        value: String,
        sequence: SequenceNumber,
        sync: bool,
    },
    Delete {
        key: String,
        sequence: SequenceNumber,
        sync: bool,
    },
    Get {
        key: String,
        value: Option<String>,
    },
    /// `put_if_absent` through `read_modify_write`: stored at `sequence`, or (None) found the
    /// key present and kept it — a read that must see every acknowledged write.
    PutIfAbsent {
        key: String,
        value: String,
        sequence: Option<SequenceNumber>,
    },
    Increment {
        key: String,
        value: i64,
        sequence: SequenceNumber,
    },
    Batch {
        value: String,
        last_sequence: SequenceNumber,
        sync: bool,
    },
    /// `WIDE_BATCH` consecutive wide keys from `start`, all put to `value` or all deleted.
    WideBatch {
        start: usize,
        value: Option<String>,
        last_sequence: SequenceNumber,
        sync: bool,
    },
    CompareAndSwap {
        key: String,
        expected: Option<String>,
        new: Option<String>,
        swapped: bool,
    },
    GetAt {
        key: String,
        sequence: SequenceNumber,
        value: Option<String>,
    },
    /// A full scan at a snapshot; `shape_error` describes a misordered scan or a reverse scan
    /// at the same snapshot that was not the forward one reversed.
    Scan {
        sequence: SequenceNumber,
        contents: BTreeMap<String, String>,
        shape_error: Option<String>,
    },
    /// A scan of the latest state over `[lower, upper)` (None: unbounded).
    LatestScan {
        lower: Option<String>,
        upper: Option<String>,
        reverse: bool,
        contents: BTreeMap<String, String>,
        shape_error: Option<String>,
    },
}

#[derive(Debug, Clone)]
struct Event {
    invoke: u64,
    response: u64,
    kind: Kind,
}

fn register(index: usize) -> String {
    format!("r{index:02}")
}
fn counter(index: usize) -> String {
    format!("c{index}")
}
fn batch_key(index: usize) -> String {
    format!("b{index}")
}
fn cas_key(index: usize) -> String {
    format!("x{index}")
}
fn wide_key(index: usize) -> String {
    format!("w{:03}", index % WIDE_KEYS)
}

/// Whether the sequence-based checks cover `key`: every write of it reports its sequence.
fn sequenced(key: &str) -> bool {
    !key.starts_with('x')
}

/// Every key the workload touches, in order; a scan's absence of a key is a read of "absent".
fn all_keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..REGISTERS)
        .map(register)
        .chain((0..COUNTERS).map(counter))
        .chain((0..BATCH_KEYS).map(batch_key))
        .chain((0..CAS_KEYS).map(cas_key))
        .chain((0..WIDE_KEYS).map(wide_key))
        .chain(std::iter::once(BIG_KEY.to_owned()))
        .collect();
    keys.sort();
    keys
}

/// The keys of `keys` inside `[lower, upper)` (None: unbounded).
fn keys_in<'a>(
    keys: &'a [String],
    lower: &'a Option<String>,
    upper: &'a Option<String>,
) -> impl Iterator<Item = &'a String> {
    keys.iter().filter(move |key| {
        lower.as_ref().is_none_or(|lower| *key >= lower)
            && upper.as_ref().is_none_or(|upper| *key < upper)
    })
}

/// Filler of large values: a position-dependent pattern, so a value built from the wrong
/// offsets or another value's bytes does not verify.
fn filler() -> &'static [u8] {
    static FILLER: OnceLock<Vec<u8>> = OnceLock::new();
    FILLER.get_or_init(|| {
        (0..BIG_BYTES_MAX)
            .map(|i| b'a' + (i % 23 + i / 4096 % 3) as u8)
            .collect()
    })
}

/// A large value of `len` bytes: `header|`, filler, `header|`; recorded as `header~len`.
fn big_value(header: &str, len: usize) -> (Vec<u8>, String) {
    let framed = format!("{header}|");
    let mut value = framed.clone().into_bytes();
    value.extend_from_slice(&filler()[..len - 2 * framed.len()]);
    value.extend_from_slice(framed.as_bytes());
    (value, format!("{header}~{len}"))
}

/// The recorded form of a stored value: itself if small; for a large value, its token if
/// every byte is what `big_value` wrote, else a token no write has.
fn decode_value(bytes: Vec<u8>) -> String {
    if bytes.len() <= SMALL_VALUE_BYTES_MAX {
        return String::from_utf8(bytes).unwrap();
    }
    let len = bytes.len();
    let framed_len = bytes
        .iter()
        .take(64)
        .position(|&b| b == b'|')
        .map(|p| p + 1);
    let intact = framed_len.filter(|&framed| {
        2 * framed <= len
            && bytes[len - framed..] == bytes[..framed]
            && bytes[framed..len - framed] == filler()[..len - 2 * framed]
    });
    match intact {
        Some(framed) => format!("{}~{len}", String::from_utf8_lossy(&bytes[..framed - 1])),
        None => format!("corrupt~{len}"),
    }
}

/// Collects a scan, checking that its keys are strictly monotone in its direction and inside
/// `[lower, upper)`; returns the entries in ascending order and the first problem found.
fn collect_scan(
    entries: impl Iterator<Item = cairn::Result<(Vec<u8>, Vec<u8>)>>,
    reverse: bool,
    lower: Option<&str>,
    upper: Option<&str>,
) -> (Vec<(String, String)>, Option<String>) {
    let mut collected: Vec<(String, String)> = entries
        .map(|entry| {
            let (key, value) = entry.unwrap();
            (String::from_utf8(key).unwrap(), decode_value(value))
        })
        .collect();
    if reverse {
        collected.reverse();
    }
    let direction = if reverse { "descending" } else { "ascending" };
    let problem = if collected.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
        Some(format!("keys not strictly {direction}"))
    } else if collected.iter().any(|(key, _)| {
        lower.is_some_and(|lower| key.as_str() < lower)
            || upper.is_some_and(|upper| key.as_str() >= upper)
    }) {
        Some(format!("a key outside [{lower:?}, {upper:?})"))
    } else {
        None
    };
    (collected, problem)
}

fn bound(key: Option<&str>, included: bool) -> Bound<&[u8]> {
    match key {
        None => Bound::Unbounded,
        Some(key) if included => Bound::Included(key.as_bytes()),
        Some(key) => Bound::Excluded(key.as_bytes()),
    }
}

/// One client thread's state.
struct Worker<'a> {
    db: &'a Db,
    rng: SmallRng,
    thread: usize,
    /// Operations started by this thread; makes values unique.
    serial: u64,
    /// The last value this thread saw at each compare-and-swap key (its next `expected`).
    cas_seen: HashMap<String, Option<String>>,
    /// Large values still to write, shared by all threads.
    big_left: &'a AtomicUsize,
}

impl Worker<'_> {
    fn write_options(&mut self, sync_percent: u32) -> WriteOptions {
        WriteOptions::with_sync(self.rng.gen_ratio(sync_percent, 100))
    }

    fn write(&mut self, batch: WriteBatch, options: &WriteOptions) -> SequenceNumber {
        self.db.write_with_sequence(options, batch).unwrap()
    }

    fn put(&mut self, key: String, value: &[u8], token: String) -> Kind {
        let options = self.write_options(25);
        let mut batch = WriteBatch::new();
        batch.put(key.as_bytes(), value);
        let sequence = self.write(batch, &options);
        Kind::Put {
            key,
            value: token,
            sequence,
            sync: options.sync,
        }
    }

    fn delete(&mut self, key: String) -> Kind {
        let options = self.write_options(25);
        let mut batch = WriteBatch::new();
        batch.delete(key.as_bytes());
        let sequence = self.write(batch, &options);
        Kind::Delete {
            key,
            sequence,
            sync: options.sync,
        }
    }

    /// A key for a point read: mostly registers, also the other families.
    fn read_key(&mut self) -> String {
        match self.rng.gen_range(0..20) {
            0..=11 => register(self.rng.gen_range(0..REGISTERS)),
            12..=14 => cas_key(self.rng.gen_range(0..CAS_KEYS)),
            15..=17 => wide_key(self.rng.gen_range(0..WIDE_KEYS)),
            18 => batch_key(self.rng.gen_range(0..BATCH_KEYS)),
            _ => BIG_KEY.to_owned(),
        }
    }

    fn get(&mut self) -> Kind {
        let key = self.read_key();
        let value = self.db.get(key.as_bytes()).unwrap().map(decode_value);
        if !sequenced(&key) {
            self.cas_seen.insert(key.clone(), value.clone());
        }
        Kind::Get { key, value }
    }

    fn put_if_absent(&mut self) -> Kind {
        let key = register(self.rng.gen_range(0..REGISTERS));
        let value = format!("a{}-{}", self.thread, self.serial);
        let (_, sequence) = self
            .db
            .read_modify_write(key.as_bytes(), |current| match current {
                None => Update::Put(value.clone().into_bytes()),
                Some(_) => Update::Keep,
            })
            .unwrap();
        Kind::PutIfAbsent {
            key,
            value,
            sequence,
        }
    }

    fn increment(&mut self) -> Kind {
        let key = counter(self.rng.gen_range(0..COUNTERS));
        let (value, sequence) = self
            .db
            .read_modify_write(key.as_bytes(), |current| {
                let now: i64 = current
                    .map(|bytes| std::str::from_utf8(bytes).unwrap().parse().unwrap())
                    .unwrap_or(0);
                Update::Put((now + 1).to_string().into_bytes())
            })
            .unwrap();
        Kind::Increment {
            key,
            value: String::from_utf8(value.unwrap()).unwrap().parse().unwrap(),
            sequence: sequence.unwrap(),
        }
    }

    fn batch(&mut self) -> Kind {
        let options = self.write_options(25);
        let value = format!("batch-{}-{}", self.thread, self.serial);
        let mut batch = WriteBatch::new();
        for index in 0..BATCH_KEYS {
            batch.put(batch_key(index).as_bytes(), value.as_bytes());
        }
        let last_sequence = self.write(batch, &options);
        Kind::Batch {
            value,
            last_sequence,
            sync: options.sync,
        }
    }

    /// Short values, so a 4 KiB memtable holds more distinct keys than its index has slots.
    fn wide_batch(&mut self) -> Kind {
        let options = self.write_options(10);
        let start = self.rng.gen_range(0..WIDE_KEYS);
        let value = (!self.rng.gen_ratio(1, 5)).then(|| format!("{}.{}", self.thread, self.serial));
        let mut batch = WriteBatch::new();
        for offset in 0..WIDE_BATCH {
            let key = wide_key(start + offset);
            match &value {
                Some(value) => batch.put(key.as_bytes(), value.as_bytes()),
                None => batch.delete(key.as_bytes()),
            };
        }
        let last_sequence = self.write(batch, &options);
        Kind::WideBatch {
            start,
            value,
            last_sequence,
            sync: options.sync,
        }
    }

    fn compare_and_swap(&mut self) -> Kind {
        let key = cas_key(self.rng.gen_range(0..CAS_KEYS));
        let expected = self.cas_seen.get(&key).cloned().flatten();
        let new = (!self.rng.gen_ratio(1, 5)).then(|| format!("x{}-{}", self.thread, self.serial));
        let swapped = self
            .db
            .compare_and_swap(
                key.as_bytes(),
                expected.as_deref().map(str::as_bytes),
                new.as_deref().map(str::as_bytes),
            )
            .unwrap()
            .is_written();
        if swapped {
            self.cas_seen.insert(key.clone(), new.clone());
        } else {
            // Unknown now; absent is as good a guess as any.
            self.cas_seen.remove(&key);
        }
        Kind::CompareAndSwap {
            key,
            expected,
            new,
            swapped,
        }
    }

    /// The large-value key: a 1–3 MiB value while any are left to write, else a small value
    /// or a delete (which lets compaction drop the large one).
    fn big(&mut self) -> Kind {
        let take = self.rng.gen_ratio(1, 4)
            && self
                .big_left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(1)
                })
                .is_ok();
        if take {
            let len = self.rng.gen_range(BIG_BYTES_MIN..=BIG_BYTES_MAX);
            let (value, token) = big_value(&format!("big{}-{}", self.thread, self.serial), len);
            self.put(BIG_KEY.to_owned(), &value, token)
        } else if self.rng.gen_bool(0.5) {
            let value = format!("small{}-{}", self.thread, self.serial);
            self.put(BIG_KEY.to_owned(), value.as_bytes(), value.clone())
        } else {
            self.delete(BIG_KEY.to_owned())
        }
    }

    fn get_at(&mut self) -> Kind {
        let key = self.read_key();
        let snapshot = self.db.snapshot();
        let value = self
            .db
            .get_at(&snapshot, key.as_bytes())
            .unwrap()
            .map(decode_value);
        Kind::GetAt {
            key,
            sequence: snapshot.sequence(),
            value,
        }
    }

    fn scan(&mut self) -> Kind {
        let db = self.db;
        let snapshot = db.snapshot();
        let range = |reverse| {
            common::range_at(
                db,
                Some(&snapshot),
                Bound::Unbounded,
                Bound::Unbounded,
                reverse,
            )
            .unwrap()
        };
        let (forward, mut shape_error) = collect_scan(range(false), false, None, None);
        if self.rng.gen_bool(0.5) {
            // collect_scan returns ascending order, so equal means "the forward one reversed".
            let (backward, problem) = collect_scan(range(true), true, None, None);
            shape_error = shape_error.or(problem);
            if shape_error.is_none() && backward != forward {
                shape_error = Some("the reverse scan is not the forward one reversed".into());
            }
        }
        Kind::Scan {
            sequence: snapshot.sequence(),
            contents: forward.into_iter().collect(),
            shape_error,
        }
    }

    fn latest_scan(&mut self) -> Kind {
        let keys = all_keys();
        let pick = |rng: &mut SmallRng| {
            rng.gen_bool(0.7)
                .then(|| keys[rng.gen_range(0..keys.len())].clone())
        };
        let (mut lower, mut upper) = (pick(&mut self.rng), pick(&mut self.rng));
        if lower > upper && upper.is_some() {
            std::mem::swap(&mut lower, &mut upper);
        }
        let reverse = self.rng.gen_bool(0.5);
        let (lower_ref, upper_ref) = (lower.as_deref(), upper.as_deref());
        let iterator = common::range_at(
            self.db,
            None,
            bound(lower_ref, true),
            bound(upper_ref, false),
            reverse,
        )
        .unwrap();
        let (entries, shape_error) = collect_scan(iterator, reverse, lower_ref, upper_ref);
        Kind::LatestScan {
            lower,
            upper,
            reverse,
            contents: entries.into_iter().collect(),
            shape_error,
        }
    }

    fn operation(&mut self) -> Kind {
        self.serial += 1;
        match self.rng.gen_range(0..100) {
            0..=21 => {
                let key = register(self.rng.gen_range(0..REGISTERS));
                let value = format!("t{}-{}", self.thread, self.serial);
                self.put(key, value.as_bytes(), value.clone())
            }
            22..=29 => {
                let key = register(self.rng.gen_range(0..REGISTERS));
                self.delete(key)
            }
            30..=47 => self.get(),
            48..=51 => self.put_if_absent(),
            52..=61 => self.increment(),
            62..=67 => self.batch(),
            68..=74 => self.compare_and_swap(),
            75..=78 => self.wide_batch(),
            79..=80 => self.big(),
            81..=85 => self.get_at(),
            86..=91 => self.latest_scan(),
            _ => self.scan(),
        }
    }
}

/// Runs the workload for `seconds` on `MemFs`, or (`on_disk`) on `StdFs` in a temporary
/// directory, where tables are read in place from their mappings (`TableReadMode::Mmap`).
/// With `scans_copy`, every scan copies the Membuffer partitions it enters instead of
/// draining them (the fallback a scan otherwise takes only behind a busy drain lock). With
/// `bypass`, a drainer bypasses each write buffer's Membuffer as soon as its partitions exist
/// (`Options::membuffer_bypass_scans_per_write`, at once), racing every operation.
fn run_history(
    seconds: u64,
    on_disk: bool,
    scans_copy: bool,
    bypass: bool,
) -> (Vec<Event>, BTreeMap<String, String>) {
    let scratch = on_disk.then(|| common::TempDir::new("history"));
    let mut options = Options::default();
    let path = match &scratch {
        Some(directory) => {
            options.file_system = Arc::new(StdFs);
            options.table_read_mode = TableReadMode::Mmap;
            directory.path().join("db")
        }
        None => {
            options.file_system = Arc::new(MemFs::new());
            std::path::PathBuf::from("/history")
        }
    };
    options.write_buffer_size_bytes = 4096;
    options.max_immutable_memtables = 2;
    options.block_size_bytes = 256;
    options.target_file_size_bytes = 8192;
    options.level1_size_bytes_max = 16 * 1024;
    options.level0_compaction_trigger = 2;
    options.level0_slowdown_trigger = 6;
    options.level0_stop_trigger = 12;
    options.level_count = 4;
    // A tiny Membuffer (1 KiB) over the tiny memtable: it fills and drains constantly.
    options.membuffer_enabled = true;
    options.membuffer_scans_always_copy = scans_copy;
    options.membuffer_bypass_at_once = bypass;
    if bypass {
        // The drainers decide the bypass; a one-core machine would otherwise have none.
        options.membuffer_drainers = 1;
    }
    let options = common::shaped(options);
    let db = Db::open(&path, options).unwrap();
    let clock = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let big_left = AtomicUsize::new(BIG_WRITES);
    let events = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (db, clock, stop, events, big_left) = (&db, &clock, &stop, &events, &big_left);
            scope.spawn(move || {
                let mut worker = Worker {
                    db,
                    rng: SmallRng::seed_from_u64(thread as u64 + 1),
                    thread,
                    serial: 0,
                    cas_seen: HashMap::new(),
                    big_left,
                };
                let mut local = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let invoke = clock.fetch_add(1, Ordering::SeqCst);
                    let kind = worker.operation();
                    let response = clock.fetch_add(1, Ordering::SeqCst);
                    local.push(Event {
                        invoke,
                        response,
                        kind,
                    });
                }
                events.lock().unwrap().extend(local);
            });
        }
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let stats = db.stats();
    eprintln!(
        "history: flushes {}, compactions {}, switches {}, rmw conflicts {}, rmw busy {}, \
         membuffer writes {}, moved {}, dropped {}, read retries {}",
        stats.counter("flushes"),
        stats.counter("compactions"),
        stats.counter("memtable_switches"),
        stats.counter("read_modify_write_conflicts"),
        stats.counter("read_modify_write_busy"),
        stats.counter("membuffer_writes"),
        stats.counter("membuffer_moved_versions"),
        stats.counter("membuffer_dropped_versions"),
        stats.counter("membuffer_read_retries")
    );
    assert!(
        stats.counter("flushes") > 0,
        "the tiny memtable never flushed"
    );
    let fallbacks = stats.counter("membuffer_scan_fallbacks");
    eprintln!(
        "history: membuffer scan drains {}, piggybacks {}, copies (fallbacks) {fallbacks}",
        stats.counter("membuffer_scan_drains"),
        stats.counter("membuffer_scan_piggybacks"),
    );
    if scans_copy {
        assert!(fallbacks > 0, "scans were set to copy, yet none did");
    }
    let bypasses = stats.counter("membuffer_bypasses");
    eprintln!("history: membuffers bypassed {bypasses}");
    if bypass {
        assert!(bypasses > 0, "drainers were set to bypass, yet none did");
    }
    eprintln!(
        "history: blocks read in place {}, block cache hits {} misses {}",
        stats.block_mapped_reads, stats.block_cache_hits, stats.block_cache_misses
    );
    assert_eq!(
        on_disk,
        stats.block_mapped_reads > 0,
        "on disk, reads take blocks from the mappings; in memory there are none"
    );
    let (final_state, _) = collect_scan(db.iter().unwrap(), false, None, None);
    let events = std::mem::take(&mut *events.lock().unwrap());
    (events, final_state.into_iter().collect())
}

/// Search work allowed per key: list entries visited per operation on the key, plus a floor
/// for short histories. A linearizable history of this test, at most four operations wide,
/// needs a few steps per operation (most entries are visited once, on the way to being
/// linearized); the budget leaves room for backtracking without letting a pathological
/// search run for minutes. Running out is reported as inconclusive and fails the test.
const SEARCH_STEPS_PER_OPERATION: u64 = 100;
const SEARCH_STEPS_MINIMUM: u64 = 1_000_000;

/// What the search-based checker (check 2) found.
#[derive(Debug, Default)]
struct SearchReport {
    keys: usize,
    operations: usize,
    violations: Vec<String>,
    inconclusive: Vec<String>,
    /// The most search steps one key needed, with that key and its operation count.
    max_steps: u64,
    max_steps_key: String,
    max_steps_operations: usize,
    /// The largest memo (distinct linearized set and state pairs) of one key.
    max_cache_entries: usize,
    elapsed: Duration,
}

/// Splits the history per key: each operation, projected onto every key it touches.
fn per_key_histories(events: &[Event]) -> BTreeMap<String, Vec<Timed<KeyOperation>>> {
    let keys = all_keys();
    let mut histories: BTreeMap<String, Vec<Timed<KeyOperation>>> =
        keys.iter().map(|key| (key.clone(), Vec::new())).collect();
    for event in events {
        let mut record = |key: &str, operation: KeyOperation| {
            histories
                .get_mut(key)
                .unwrap_or_else(|| panic!("operation on unknown key {key}"))
                .push(Timed {
                    invoke: event.invoke,
                    response: event.response,
                    operation,
                });
        };
        match &event.kind {
            Kind::Put { key, value, .. } => record(key, KeyOperation::put(value)),
            Kind::Delete { key, .. } => record(key, KeyOperation::Delete),
            Kind::Get { key, value } | Kind::GetAt { key, value, .. } => {
                record(key, KeyOperation::get(value.as_deref()));
            }
            Kind::PutIfAbsent {
                key,
                value,
                sequence,
            } => record(
                key,
                KeyOperation::PutIfAbsent {
                    value: value.as_str().into(),
                    stored: sequence.is_some(),
                },
            ),
            Kind::Increment { key, value, .. } => record(key, KeyOperation::increment(*value)),
            Kind::Batch { .. } | Kind::WideBatch { .. } => {
                for write in checks::writes_of(std::slice::from_ref(event)) {
                    record(&write.key, KeyOperation::from_value(write.value.as_deref()));
                }
            }
            Kind::CompareAndSwap {
                key,
                expected,
                new,
                swapped,
            } => record(
                key,
                KeyOperation::CompareAndSwap {
                    expected: expected.as_deref().map(Arc::from),
                    new: new.as_deref().map(Arc::from),
                    swapped: *swapped,
                },
            ),
            Kind::Scan { contents, .. } => project_scan(&keys, &None, &None, contents, record),
            Kind::LatestScan {
                lower,
                upper,
                contents,
                ..
            } => project_scan(&keys, lower, upper, contents, record),
        }
    }
    histories
}

/// A scan's reads: a snapshot scan read a snapshot taken inside its interval, and a
/// latest-state scan read each key inside its interval; either way, its value of a key in
/// `[lower, upper)` (or the key's absence) is a read of that key in the interval.
fn project_scan(
    keys: &[String],
    lower: &Option<String>,
    upper: &Option<String>,
    contents: &BTreeMap<String, String>,
    mut record: impl FnMut(&str, KeyOperation),
) {
    for key in keys_in(keys, lower, upper) {
        record(
            key,
            KeyOperation::get(contents.get(key).map(String::as_str)),
        );
    }
}

/// Check 2: searches each key's history for a linearization (see the module doc).
fn search_check(events: &[Event]) -> SearchReport {
    let started = Instant::now();
    let mut report = SearchReport::default();
    for (key, history) in per_key_histories(events) {
        let budget = SEARCH_STEPS_MINIMUM.max(SEARCH_STEPS_PER_OPERATION * history.len() as u64);
        let outcome = linearizability::check(&KeyModel, &history, budget);
        report.keys += 1;
        report.operations += history.len();
        if outcome.steps > report.max_steps {
            report.max_steps = outcome.steps;
            report.max_steps_key = key.clone();
            report.max_steps_operations = history.len();
        }
        report.max_cache_entries = report.max_cache_entries.max(outcome.cache_entries);
        match outcome.verdict {
            Verdict::Linearizable => {}
            Verdict::Violation(explanation) => report.violations.push(format!(
                "key {key} ({} operations): {explanation}",
                history.len()
            )),
            Verdict::Inconclusive => report.inconclusive.push(format!(
                "key {key} ({} operations): search budget of {budget} steps exhausted",
                history.len()
            )),
        }
    }
    report.elapsed = started.elapsed();
    report
}

#[test]
fn concurrent_history_is_linearizable() {
    check_history(
        common::env_or("CAIRN_HISTORY_SECONDS", 3),
        false,
        false,
        false,
    );
}

/// The same on disk: tables read in place from their memory mappings, the default read path.
#[test]
fn concurrent_history_on_disk_with_mapped_reads_is_linearizable() {
    check_history(
        common::env_or("CAIRN_HISTORY_SECONDS", 2),
        true,
        false,
        false,
    );
}

/// The same with scans that copy the Membuffer's partitions instead of draining them.
#[test]
fn concurrent_history_with_copying_scans_is_linearizable() {
    check_history(
        common::env_or("CAIRN_HISTORY_SECONDS", 2),
        false,
        true,
        false,
    );
}

/// The same with each write buffer's Membuffer bypassed by a drainer while the operations run.
#[test]
fn concurrent_history_with_bypassed_membuffers_is_linearizable() {
    check_history(
        common::env_or("CAIRN_HISTORY_SECONDS", 2),
        false,
        false,
        true,
    );
}

fn check_history(seconds: u64, on_disk: bool, scans_copy: bool, bypass: bool) {
    let started = Instant::now();
    let (events, final_state) = run_history(seconds, on_disk, scans_copy, bypass);
    let running = started.elapsed();
    let violations = checks::check(&events, &final_state);
    let search = search_check(&events);
    let count = |predicate: fn(&Kind) -> bool| events.iter().filter(|e| predicate(&e.kind)).count();
    let synced = count(|k| {
        matches!(
            k,
            Kind::Put { sync: true, .. }
                | Kind::Delete { sync: true, .. }
                | Kind::Batch { sync: true, .. }
                | Kind::WideBatch { sync: true, .. }
        )
    });
    let big = count(
        |k| matches!(k, Kind::Put { key, value, .. } if key == BIG_KEY && value.contains('~')),
    );
    eprintln!(
        "history: {} operations in {:.1} s of running, checked in {:.1} s ({} puts ({big} large), {} deletes, {synced} synced writes, {} gets, {} get_at, {} put-if-absent ({} stored), {} increments, {} batches, {} wide batches, {} compare-and-swaps ({} swapped), {} snapshot scans, {} latest scans ({} reverse)), {} violations in the sequence-based checks",
        events.len(),
        running.as_secs_f64(),
        (started.elapsed() - running).as_secs_f64(),
        count(|k| matches!(k, Kind::Put { .. })),
        count(|k| matches!(k, Kind::Delete { .. })),
        count(|k| matches!(k, Kind::Get { .. })),
        count(|k| matches!(k, Kind::GetAt { .. })),
        count(|k| matches!(k, Kind::PutIfAbsent { .. })),
        count(|k| matches!(k, Kind::PutIfAbsent { sequence: Some(_), .. })),
        count(|k| matches!(k, Kind::Increment { .. })),
        count(|k| matches!(k, Kind::Batch { .. })),
        count(|k| matches!(k, Kind::WideBatch { .. })),
        count(|k| matches!(k, Kind::CompareAndSwap { .. })),
        count(|k| matches!(k, Kind::CompareAndSwap { swapped: true, .. })),
        count(|k| matches!(k, Kind::Scan { .. })),
        count(|k| matches!(k, Kind::LatestScan { .. })),
        count(|k| matches!(k, Kind::LatestScan { reverse: true, .. })),
        violations.len()
    );
    eprintln!(
        "history: search checker: {} per-key operations on {} keys in {:.2} s, {} violations, {} inconclusive; max {} steps (key {}, {} operations), max memo {} entries",
        search.operations,
        search.keys,
        search.elapsed.as_secs_f64(),
        search.violations.len(),
        search.inconclusive.len(),
        search.max_steps,
        search.max_steps_key,
        search.max_steps_operations,
        search.max_cache_entries
    );
    // Print both checkers' findings before failing: when one fires, what the other saw (or
    // missed) tells whether the engine's sequence numbers or the values went wrong.
    for violation in violations.iter().take(10) {
        eprintln!("history: sequence-based check: {violation}");
    }
    for finding in search
        .violations
        .iter()
        .chain(&search.inconclusive)
        .take(10)
    {
        eprintln!("history: search checker: {finding}");
    }
    assert!(
        violations.is_empty() && search.violations.is_empty() && search.inconclusive.is_empty(),
        "{} violations in the sequence-based checks; search checker: {} violations, {} inconclusive (listed above)",
        violations.len(),
        search.violations.len(),
        search.inconclusive.len()
    );
}
