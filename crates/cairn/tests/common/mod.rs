//! Code shared by integration tests. It lives in a directory so that cargo does not build it
//! as a test target of its own; a test includes it with `mod common;`. The linearizability
//! checker (`linearizability.rs`) is included by `history.rs` alone, with `#[path]`, so that its
//! unit tests run once rather than in every test binary; likewise the seeded operation
//! sequences (`ops.rs`: generator, executor, `BTreeMap` oracle, delta debugging) are included
//! by `model.rs` and `metamorphic.rs` alone.
//!
//! Thread-safety contract: the helpers are free functions over their arguments (plus
//! `TempDir`, owned by one test); any test thread may call them.
//!
//! Invariants:
//! 1. A helper here is the one copy of what several test files need (keys, options, a full
//!    scan, environment knobs, a scratch directory); a test file tweaks a returned `Options`
//!    by assigning its fields instead of keeping its own copy.
//! 2. `key(index, width)` is `"key"` followed by `index` zero-padded to `width` digits, so keys
//!    sort in index order; tests choose the width they always used, which keeps their
//!    workloads (and the file sizes they were tuned on) unchanged.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod golden;

use cairn::{CompactionStyle, Db, Error, FileSystem, Options};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `"key"` followed by `index` zero-padded to `width` digits.
pub fn key(index: u64, width: usize) -> Vec<u8> {
    format!("key{index:0width$}").into_bytes()
}

/// The pairs in `(lower, upper)` as of `snapshot` (None: the latest state), ascending or
/// descending: the shape the engine's API had before `range` took a `RangeBounds`, which
/// the seeded operation sequences and history checks are written against.
pub type Pairs = Box<dyn Iterator<Item = cairn::Result<(Vec<u8>, Vec<u8>)>>>;

/// See [`Pairs`]: the pairs in `(lower, upper)` as of `snapshot` (None: latest).
pub fn range_at(
    db: &Db,
    snapshot: Option<&cairn::Snapshot>,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    reverse: bool,
) -> cairn::Result<Pairs> {
    let iterator = match snapshot {
        Some(snapshot) => db.range_at::<[u8], _>(snapshot, (lower, upper))?,
        None => db.range::<[u8], _>((lower, upper))?,
    };
    Ok(if reverse {
        Box::new(iterator.rev())
    } else {
        Box::new(iterator)
    })
}

/// Every live key and value, in key order (panics on a read error).
pub fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    try_scan(db).unwrap()
}

/// Every live key and value, in key order, or the first read error.
pub fn try_scan(db: &Db) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    db.iter()?.collect::<Result<_, _>>()
}

/// Every live key and value as a list, in key order (panics on a read error).
pub fn scan_pairs(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan(db).into_iter().collect()
}

/// The environment variable `name` parsed as `T`, or `default` when it is unset or malformed
/// (test knobs such as iteration counts and durations).
pub fn env_or<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// The policy matrix. `CAIRN_COMPACTION_STYLE` = `leveling`, `tiering` or `lazy` puts every
/// database the model, metamorphic, history and crash suites open (through `shaped` or
/// `small_lsm_options`) under that style; unset, they keep their own (leveling, plus the
/// explicit tiered cases each suite runs: the CI slice). The full matrix is the suites run
/// once per value:
/// `for s in leveling tiering lazy; do CAIRN_COMPACTION_STYLE=$s cargo test -p cairn
/// --features invariants --test model --test metamorphic --test history --test crash; done`.
pub fn env_style() -> Option<CompactionStyle> {
    let value = std::env::var("CAIRN_COMPACTION_STYLE").ok()?;
    Some(match value.as_str() {
        "leveling" => CompactionStyle::Leveling,
        "tiering" => CompactionStyle::Tiering,
        "lazy" => CompactionStyle::LazyLeveling,
        other => panic!("CAIRN_COMPACTION_STYLE={other}: expected leveling, tiering or lazy"),
    })
}

/// `options` under `style`; a tiered style gets few runs per level and two compaction threads
/// so that short workloads reach merges, level rewrites and parallel compactions.
pub fn with_style(mut options: Options, style: CompactionStyle) -> Options {
    options.compaction_style = style;
    if style != CompactionStyle::Leveling {
        options.runs_per_level = 3;
        options.compaction_threads = 2;
    }
    options
}

/// `options` under `CAIRN_COMPACTION_STYLE` if it is set (see `env_style`).
pub fn shaped(options: Options) -> Options {
    match env_style() {
        Some(style) => with_style(options, style),
        None => options,
    }
}

/// A small LSM shape that flushes, compacts and rolls the MANIFEST over after a few KiB of
/// writes, so short workloads reach every code path.
pub fn small_lsm_options(file_system: Arc<dyn FileSystem>) -> Options {
    let mut options = Options::default();
    options.file_system = file_system;
    options.write_buffer_size_bytes = 2048;
    options.max_immutable_memtables = 2;
    options.block_size_bytes = 256;
    options.target_file_size_bytes = 4096;
    options.level1_size_bytes_max = 8192;
    options.level0_compaction_trigger = 2;
    options.manifest_size_bytes_max = 1024;
    // A tiny Membuffer over the tiny memtable: it fills and drains constantly.
    options.membuffer_enabled = true;
    shaped(options)
}

/// A fresh directory under the system temporary directory, removed (best effort) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/cairn-<label>-<pid>-<n>`, emptying it first if a crashed run left it.
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("cairn-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies every file of `from` (not recursing) into `to`, which must exist.
pub fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
