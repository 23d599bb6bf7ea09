//! State shared by every connection: the store, the key locks, runtime configuration, SCAN
//! cursors and counters; and the per-connection `Session`.
//!
//! Thread-safety contract: `Context` is `Send + Sync` and shared through an `Arc`; its
//! configuration is atomics, its locks are striped mutexes held only inside one command
//! (never across an `.await`). `Session` belongs to one connection.
//!
//! Invariants:
//! 1. Every command that writes holds the stripe lock of every key it writes, taken in
//!    ascending stripe order (no deadlock), for the whole read-decide-write; readers take
//!    none. So a multi-key write (MSETNX, RENAME, a hash write that changes the field count)
//!    sees and writes a state no other writer changes under it.
//! 2. The cursor table holds at most `MAX_CURSORS` entries and `MAX_CURSOR_BYTES` bytes of
//!    positions; the oldest are forgotten first (and SCAN refuses a forgotten cursor).
//! 3. Every key whose record is a hash has its bit set in the hash marks: the bits of the
//!    hashes already stored are set when the context is made, and every command that writes
//!    a hash record sets its key's bit first, under the key's lock. Bits are never cleared. So
//!    a writer holding a key's lock that finds its bit clear knows the key holds no hash, and
//!    a plain SET may overwrite it without reading it first (a hash's fields would need
//!    deleting).

use crate::layout;
use crate::store::SharedStore;
use std::collections::{BTreeMap, VecDeque};
use std::hash::Hasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Key lock stripes.
const STRIPES: usize = 1024;
/// Stripes of the command counter (each on its own cache line).
const COMMAND_COUNT_STRIPES: usize = 8;
/// Remembered SCAN/HSCAN cursors.
const MAX_CURSORS: usize = 16 * 1024;
/// Bytes of remembered cursor positions (engine keys, up to 64 KiB each: the count alone
/// would let 16,384 cursors hold a gigabyte).
const MAX_CURSOR_BYTES: usize = 16 * 1024 * 1024;
/// Bits of the hash marks (128 KiB): with a few thousand hashes nearly every other key's bit
/// is still clear.
const HASH_MARK_BITS: usize = 1 << 20;
/// Stored hashes whose bits the context sets one by one when it is made; beyond that many,
/// it sets every bit (every SET then reads first, as without the marks).
const HASH_MARK_SCAN_MAX: usize = 100_000;

/// FNV-1a over `key`: a few nanoseconds for the short keys commands carry. The stripes and
/// marks it picks are fixed arrays, so a client choosing colliding keys only shares locks or
/// loses the no-read SET, never grows a table.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    let mut hasher = Fnv::default();
    hasher.write(key);
    hasher.finish()
}

/// The FNV-1a hasher (also the command table's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One stripe of the command counter, alone on its cache line (128 bytes: adjacent-line
/// prefetchers pair lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct CommandCount(AtomicU64);

/// Settings that CONFIG SET may change while the server runs.
#[derive(Debug)]
pub struct RuntimeConfig {
    /// Largest bulk string a request may carry (`proto-max-bulk-len`).
    pub proto_max_bulk_len: AtomicU64,
    /// Most bytes buffered for one client's unfinished requests (`client-query-buffer-limit`).
    pub query_buffer_limit: AtomicUsize,
    /// Most connected clients (`maxclients`).
    pub max_clients: AtomicUsize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            proto_max_bulk_len: AtomicU64::new(512 * 1024 * 1024),
            query_buffer_limit: AtomicUsize::new(1024 * 1024 * 1024),
            max_clients: AtomicUsize::new(10_000),
        }
    }
}

/// Everything the commands share.
#[derive(Debug)]
pub struct Context {
    /// The engine.
    pub store: SharedStore,
    /// Runtime configuration.
    pub config: RuntimeConfig,
    stripes: Box<[Mutex<()>]>,
    hash_marks: Box<[AtomicU64]>,
    cursors: Mutex<Cursors>,
    /// The engine key of the last record the expiry sampler read (`None`: start over).
    sampler_position: Mutex<Option<Vec<u8>>>,
    /// Connected clients.
    pub clients: AtomicUsize,
    /// Next client id.
    pub next_client_id: AtomicU64,
    /// Commands run since start, striped by connection (see `count_commands`).
    commands: Box<[CommandCount]>,
    /// Set by SHUTDOWN (and SIGTERM): the server stops.
    pub shutting_down: AtomicBool,
    /// When the server started.
    pub started: Instant,
    /// The port the server listens on (for INFO).
    pub port: u16,
}

#[derive(Debug, Default)]
struct Cursors {
    next: u64,
    positions: BTreeMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    /// Bytes of `positions`' values.
    bytes: usize,
}

impl Context {
    /// A context around `store`; sets the hash marks of the hashes it holds (invariant 3).
    pub fn new(store: SharedStore, port: u16) -> Self {
        let context = Context {
            store,
            config: RuntimeConfig::default(),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hash_marks: (0..HASH_MARK_BITS / 64)
                .map(|_| AtomicU64::new(0))
                .collect(),
            cursors: Mutex::new(Cursors::default()),
            sampler_position: Mutex::new(None),
            clients: AtomicUsize::new(0),
            next_client_id: AtomicU64::new(1),
            commands: (0..COMMAND_COUNT_STRIPES)
                .map(|_| CommandCount::default())
                .collect(),
            shutting_down: AtomicBool::new(false),
            started: Instant::now(),
            port,
        };
        context.mark_stored_hashes();
        context
    }

    /// Sets the mark of every hash the store holds: one seek per hash, past its fields.
    fn mark_stored_hashes(&self) {
        let mut lower = vec![layout::FIELD];
        let upper = [layout::FIELD + 1];
        for _ in 0..HASH_MARK_SCAN_MAX {
            let found =
                self.store
                    .scan_keys(Bound::Included(&lower), Bound::Excluded(&upper), 1, false);
            let Ok(found) = found else { break };
            let Some((field_key, _)) = found.first() else {
                return;
            };
            let Some(key) = layout::hash_of_field_key(field_key) else {
                break;
            };
            self.mark_hash(key);
            match layout::prefix_end(&layout::field_prefix(key)) {
                Some(next) => lower = next,
                None => return,
            }
        }
        // Too many hashes, an unreadable store or a malformed field key: mark everything.
        for word in &self.hash_marks {
            word.store(u64::MAX, Ordering::Relaxed);
        }
    }

    /// The word and bit of `key`'s hash mark (the modulo keeps the word in range).
    fn hash_mark(&self, key: &[u8]) -> Option<(&AtomicU64, u64)> {
        let bit = (key_hash(key) as usize) % HASH_MARK_BITS;
        Some((self.hash_marks.get(bit / 64)?, 1 << (bit % 64)))
    }

    /// Records that `key` may hold a hash (invariant 3); the caller holds its lock and has
    /// not yet written the hash record.
    pub fn mark_hash(&self, key: &[u8]) {
        if let Some((word, bit)) = self.hash_mark(key) {
            word.fetch_or(bit, Ordering::AcqRel);
        }
    }

    /// False when `key` certainly holds no hash (invariant 3); meaningful under its lock.
    pub fn may_hold_hash(&self, key: &[u8]) -> bool {
        self.hash_mark(key)
            .is_none_or(|(word, bit)| word.load(Ordering::Acquire) & bit != 0)
    }

    /// Locks the stripes of `keys` (in ascending stripe order); released when dropped. One
    /// key (most commands) takes its stripe without allocating.
    pub fn lock_keys(&self, keys: &[&[u8]]) -> KeyLocks<'_> {
        let stripe_of = |key: &[u8]| (key_hash(key) % STRIPES as u64) as usize;
        if let [key] = keys {
            return KeyLocks::One(self.stripes.get(stripe_of(key)).map(lock));
        }
        let mut stripes: Vec<usize> = keys.iter().map(|key| stripe_of(key)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        KeyLocks::Many(
            stripes
                .into_iter()
                .filter_map(|stripe| self.stripes.get(stripe).map(lock))
                .collect(),
        )
    }

    /// Remembers where a SCAN stopped; returns the cursor number to hand out (never 0).
    pub fn save_cursor(&self, position: Vec<u8>) -> u64 {
        let mut cursors = lock(&self.cursors);
        cursors.next += 1;
        let id = cursors.next;
        cursors.bytes += position.len();
        cursors.positions.insert(id, position);
        cursors.order.push_back(id);
        while cursors.order.len() > MAX_CURSORS || cursors.bytes > MAX_CURSOR_BYTES {
            let Some(oldest) = cursors.order.pop_front() else {
                break;
            };
            if let Some(forgotten) = cursors.positions.remove(&oldest) {
                cursors.bytes -= forgotten.len();
            }
        }
        #[cfg(feature = "invariants")]
        assert!(
            cursors.positions.len() <= MAX_CURSORS
                && cursors.bytes <= MAX_CURSOR_BYTES
                && cursors.order.len() == cursors.positions.len()
                && cursors.bytes == cursors.positions.values().map(Vec::len).sum::<usize>(),
            "invariant 2: the cursor table is bounded and its order list matches it"
        );
        id
    }

    /// Where cursor `id` stopped (`None`: unknown or forgotten).
    pub fn cursor(&self, id: u64) -> Option<Vec<u8>> {
        lock(&self.cursors).positions.get(&id).cloned()
    }

    /// Where the expiry sampler's last round stopped (`crate::expiry`, invariant 3).
    pub fn sampler_position(&self) -> Option<Vec<u8>> {
        lock(&self.sampler_position).clone()
    }

    /// Records where the expiry sampler's round stopped.
    pub fn set_sampler_position(&self, position: Option<Vec<u8>>) {
        *lock(&self.sampler_position) = position;
    }

    /// Counts `count` commands run by connection `client` (a connection counts a read
    /// buffer's worth at once). Connections add to different stripes: one shared counter
    /// bumped per unpipelined request would bounce its cache line between the cores.
    pub fn count_commands(&self, client: u64, count: u64) {
        if count > 0 {
            let stripe = (client % COMMAND_COUNT_STRIPES as u64) as usize;
            if let Some(counter) = self.commands.get(stripe) {
                counter.0.fetch_add(count, Ordering::Relaxed);
            }
        }
    }

    /// Commands run since start (INFO's `total_commands_processed`).
    pub fn commands_processed(&self) -> u64 {
        self.commands
            .iter()
            .map(|counter| counter.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// The stripe locks a writer holds (`Context::lock_keys`); released when dropped.
#[derive(Debug)]
#[must_use = "the locks are released when this is dropped"]
pub enum KeyLocks<'a> {
    /// The one key's stripe (`None` only if the stripe index were out of range, which the
    /// modulo rules out).
    One(Option<MutexGuard<'a, ()>>),
    /// Several keys' stripes, in ascending order.
    Many(Vec<MutexGuard<'a, ()>>),
}

/// One connection's state.
#[derive(Debug, Default)]
pub struct Session {
    /// CLIENT ID.
    pub id: u64,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// Close the connection after this reply (QUIT).
    pub close: bool,
    /// Shut the server down (SHUTDOWN): close without a reply.
    pub shutdown: bool,
}
