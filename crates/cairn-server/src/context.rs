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
//! 2. The cursor table holds at most `MAX_CURSORS` entries; the oldest are forgotten first.

use crate::store::SharedStore;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Key lock stripes.
const STRIPES: usize = 1024;
/// Remembered SCAN/HSCAN cursors.
const MAX_CURSORS: usize = 16 * 1024;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
    cursors: Mutex<Cursors>,
    /// Connected clients.
    pub clients: AtomicUsize,
    /// Next client id.
    pub next_client_id: AtomicU64,
    /// Commands run since start.
    pub commands: AtomicU64,
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
}

impl Context {
    /// A context around `store`.
    pub fn new(store: SharedStore, port: u16) -> Self {
        Context {
            store,
            config: RuntimeConfig::default(),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            cursors: Mutex::new(Cursors::default()),
            clients: AtomicUsize::new(0),
            next_client_id: AtomicU64::new(1),
            commands: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            started: Instant::now(),
            port,
        }
    }

    /// Locks the stripes of `keys` (in ascending stripe order); released when dropped.
    pub fn lock_keys(&self, keys: &[&[u8]]) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = keys
            .iter()
            .map(|key| {
                let mut hasher = DefaultHasher::new();
                key.hash(&mut hasher);
                (hasher.finish() % STRIPES as u64) as usize
            })
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            .filter_map(|stripe| self.stripes.get(stripe).map(lock))
            .collect()
    }

    /// Remembers where a SCAN stopped; returns the cursor number to hand out (never 0).
    pub fn save_cursor(&self, position: Vec<u8>) -> u64 {
        let mut cursors = lock(&self.cursors);
        cursors.next += 1;
        let id = cursors.next;
        cursors.positions.insert(id, position);
        cursors.order.push_back(id);
        while cursors.order.len() > MAX_CURSORS {
            if let Some(oldest) = cursors.order.pop_front() {
                cursors.positions.remove(&oldest);
            }
        }
        #[cfg(feature = "invariants")]
        assert!(
            cursors.positions.len() <= MAX_CURSORS
                && cursors.order.len() == cursors.positions.len(),
            "invariant 2: the cursor table is bounded and its order list matches it"
        );
        id
    }

    /// Where cursor `id` stopped (`None`: unknown or forgotten).
    pub fn cursor(&self, id: u64) -> Option<Vec<u8>> {
        lock(&self.cursors).positions.get(&id).cloned()
    }

    /// Counts one command.
    pub fn count_command(&self) {
        self.commands.fetch_add(1, Ordering::Relaxed);
    }
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
