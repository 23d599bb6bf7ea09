//! The power-loss model and fault bookkeeping behind [`super::FaultFs`]: a shadow of every
//! file the wrapped file system holds, recording what is durable and what is not, and the
//! counters that decide which operation fails.
//!
//! Model (what a crash may keep):
//! 1. Files are inodes. An inode has `data` (every byte appended: what the page cache holds),
//!    `synced_bytes` (the prefix made durable by `sync`), `allocated` (the live on-disk length:
//!    `data` plus any zeros reserved ahead, e.g. by the memory-mapped log's `fallocate`) and
//!    `durable_length` (the length as of the last `sync`). A `trim` or a close that cuts the
//!    reserved zeros changes `allocated` only: the old length stays durable until a `sync`.
//! 2. Names live in two directory tables: the *live* one and the *durable* one. `create`,
//!    `rename` and `remove` change the live table at once and append to a log of pending
//!    metadata operations; `sync_dir` applies that directory's pending operations to the
//!    durable table.
//! 3. A crash image keeps every durable name, applies a random prefix of the pending metadata
//!    operations (journaling file systems commit metadata in order; with probability 1/2
//!    none), and gives each file its synced bytes plus a seeded choice of the rest: a file
//!    that never reserved space keeps a random prefix of its unsynced appends, the last
//!    sector sometimes torn; a file that did (or every file, with holes on) gets a length
//!    between its durable and its live length, and its unsynced pages survive as a prefix —
//!    or, with holes on, each page independently, so a later page can be present while an
//!    earlier one reads as zeros. Directories themselves are always durable.
//!
//! Thread-safety contract: [`State`] is plain data; its owner keeps it behind one mutex.
//!
//! Invariants (checked by [`State::check_invariants`] under the `invariants` feature):
//! 1. For every inode, `synced_bytes <= data.len() <= allocated` and
//!    `synced_bytes <= durable_length`: nothing is durable that was not written.
//! 2. Every name in the live and durable tables and in a pending operation names an inode.
//! 3. An operation that fails by injection changes no inode and no table, except the short
//!    write of an injected ENOSPC on an append.

use super::{FaultKind, FaultPlan, InjectedFault};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A small deterministic generator (`SplitMix64`), so the library needs no `rand`.
#[derive(Debug, Clone)]
pub(super) struct SplitMix64(pub(super) u64);

impl SplitMix64 {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    pub(super) fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            self.next()
        } else {
            self.next() % (max + 1)
        }
    }
}

/// One file's shadow (model item 1).
#[derive(Debug, Default, Clone)]
pub(super) struct Inode {
    pub(super) data: Vec<u8>,
    pub(super) synced_bytes: usize,
    pub(super) allocated: u64,
    pub(super) durable_length: u64,
    /// Ever had space reserved past its data (a memory-mapped log).
    pub(super) reserved: bool,
}

impl Inode {
    /// A fully durable inode holding `data`.
    pub(super) fn durable(data: Vec<u8>) -> Self {
        let length = data.len() as u64;
        Inode {
            synced_bytes: data.len(),
            data,
            allocated: length,
            durable_length: length,
            reserved: false,
        }
    }

    /// Records the wrapped file's on-disk length after an operation that may reserve space.
    pub(super) fn set_allocated(&mut self, allocated: u64) {
        let data_length = self.data.len() as u64;
        if allocated > data_length {
            self.reserved = true;
        }
        self.allocated = allocated.max(data_length);
    }

    /// A `sync` returned: data and length are durable.
    pub(super) fn synced(&mut self) {
        self.synced_bytes = self.data.len();
        self.durable_length = self.allocated;
    }

    /// A sync that started when the file held `bytes` bytes and was `length` long returned.
    /// A sync that covers less than one already returned changes nothing.
    pub(super) fn synced_to(&mut self, bytes: usize, length: u64) {
        if bytes >= self.synced_bytes {
            self.synced_bytes = bytes;
            self.durable_length = length.max(bytes as u64);
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum MetadataOp {
    Create { path: PathBuf, inode: u64 },
    Rename { from: PathBuf, to: PathBuf },
    Remove { path: PathBuf },
}

impl MetadataOp {
    pub(super) fn directory(&self) -> Option<&Path> {
        match self {
            MetadataOp::Create { path, .. } | MetadataOp::Remove { path } => path.parent(),
            // A rename across directories is durable only when both are synced; cairn never
            // does one, so the destination's directory decides.
            MetadataOp::Rename { to, .. } => to.parent(),
        }
    }

    pub(super) fn apply(&self, table: &mut BTreeMap<PathBuf, u64>) {
        match self {
            MetadataOp::Create { path, inode } => {
                table.insert(path.clone(), *inode);
            }
            MetadataOp::Rename { from, to } => {
                if let Some(inode) = table.remove(from) {
                    table.insert(to.clone(), inode);
                }
            }
            MetadataOp::Remove { path } => {
                table.remove(path);
            }
        }
    }
}

/// A delay injected before matching operations.
#[derive(Debug, Clone)]
pub(super) struct LatencyRule {
    pub(super) operation: &'static str,
    pub(super) path_contains: &'static str,
    pub(super) delay: Duration,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) matched: u64,
    pub(super) inodes: HashMap<u64, Inode>,
    pub(super) next_inode: u64,
    pub(super) live: BTreeMap<PathBuf, u64>,
    pub(super) durable: BTreeMap<PathBuf, u64>,
    pub(super) pending: Vec<MetadataOp>,
    pub(super) directories: HashSet<PathBuf>,
    pub(super) operations: u64,
    pub(super) write_points: u64,
    pub(super) plan: FaultPlan,
    pub(super) random: Option<SplitMix64>,
    pub(super) crashed: bool,
    pub(super) injected: Vec<InjectedFault>,
    pub(super) latency: Vec<LatencyRule>,
    /// Gates armed by `FaultFs::set_gate`, first match wins.
    pub(super) gates: Vec<std::sync::Arc<super::FaultGate>>,
    pub(super) holes: bool,
}

impl State {
    /// Counts one operation and decides whether it fails.
    pub(super) fn check(
        &mut self,
        operation: &'static str,
        path: &Path,
        mutating: bool,
    ) -> Option<FaultKind> {
        let index = self.operations;
        self.operations += 1;
        let write_point = self.write_points;
        if mutating {
            self.write_points += 1;
        }
        let fault = match self.plan {
            FaultPlan::None => None,
            FaultPlan::Once { index: at, kind } => (index == at).then_some(kind),
            FaultPlan::CrashAtWritePoint { index: at } => {
                if mutating && write_point == at {
                    self.crashed = true;
                }
                self.crashed.then_some(FaultKind::Eio)
            }
            FaultPlan::Matching {
                operation: name,
                path_contains,
                skip,
                kind,
                crash,
            } => {
                let matches = operation == name
                    && path
                        .to_str()
                        .is_some_and(|path| path.contains(path_contains));
                let fire = matches && self.matched == skip && !self.crashed;
                if matches {
                    self.matched += 1;
                }
                if fire && crash {
                    self.crashed = true;
                }
                if self.crashed {
                    Some(FaultKind::Eio)
                } else {
                    fire.then_some(kind)
                }
            }
            FaultPlan::Random { one_in, kind, .. } => {
                let generator = self.random.get_or_insert(SplitMix64(0));
                (one_in <= 1 || generator.next().is_multiple_of(one_in)).then_some(kind)
            }
        };
        if let Some(kind) = fault {
            self.injected.push(InjectedFault {
                operation_index: index,
                operation,
                is_sync: matches!(operation, "sync" | "sync_dir"),
                path: path.to_path_buf(),
                kind,
            });
        }
        fault
    }

    /// The delay the first matching latency rule asks for, if any.
    pub(super) fn delay_for(&self, operation: &str, path: &Path) -> Option<Duration> {
        let path = path.to_str().unwrap_or_default();
        self.latency
            .iter()
            .find(|rule| rule.operation == operation && path.contains(rule.path_contains))
            .map(|rule| rule.delay)
    }

    /// The first armed gate matching `operation` on `path`, if any.
    pub(super) fn gate_for(
        &self,
        operation: &str,
        path: &Path,
    ) -> Option<std::sync::Arc<super::FaultGate>> {
        let path = path.to_str().unwrap_or_default();
        self.gates
            .iter()
            .find(|gate| gate.matches(operation, path))
            .cloned()
    }

    pub(super) fn add_inode(&mut self, inode: Inode) -> u64 {
        let number = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(number, inode);
        number
    }

    pub(super) fn inode_mut(&mut self, number: u64) -> Option<&mut Inode> {
        self.inodes.get_mut(&number)
    }

    /// The files of a power-loss image now: `(path, bytes)` per durable name (model item 3).
    pub(super) fn crash_files(&self, seed: u64) -> Vec<(PathBuf, Vec<u8>)> {
        let mut random = SplitMix64(seed ^ 0x5eed_c0de_0bad_f00d);
        let mut names = self.durable.clone();
        if !self.pending.is_empty() && random.next() % 2 == 1 {
            // `up_to` stays below its bound, a `usize` length: exact.
            #[allow(clippy::cast_possible_truncation)]
            let kept = random.up_to(self.pending.len() as u64) as usize;
            for operation in self.pending.iter().take(kept) {
                operation.apply(&mut names);
            }
        }
        let mut chosen: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut files = Vec::new();
        for (path, number) in names {
            let Some(inode) = self.inodes.get(&number) else {
                continue;
            };
            let bytes = chosen
                .entry(number)
                .or_insert_with(|| surviving_bytes(inode, self.holes, &mut random))
                .clone();
            files.push((path, bytes));
        }
        files
    }

    /// Model invariants 1 and 2; panics on a violation (a bug in this module).
    #[cfg(feature = "invariants")]
    pub(super) fn check_invariants(&self) {
        for (number, inode) in &self.inodes {
            assert!(
                inode.synced_bytes <= inode.data.len()
                    && inode.data.len() as u64 <= inode.allocated
                    && inode.synced_bytes as u64 <= inode.durable_length,
                "fault model: inode {number} durable past written: {} synced, {} written, {} allocated, {} durable length",
                inode.synced_bytes,
                inode.data.len(),
                inode.allocated,
                inode.durable_length
            );
        }
        let pending = self.pending.iter().filter_map(|operation| match operation {
            MetadataOp::Create { inode, .. } => Some(inode),
            _ => None,
        });
        for number in self
            .live
            .values()
            .chain(self.durable.values())
            .chain(pending)
        {
            assert!(
                self.inodes.contains_key(number),
                "fault model: a name points at missing inode {number}"
            );
        }
    }

    /// No-op without the `invariants` feature.
    #[cfg(not(feature = "invariants"))]
    pub(super) fn check_invariants(&self) {}
}

/// Bytes a file keeps across a power loss (model item 3).
// Test-support model, not a data path: every range is clamped to the image and the data
// lengths just before it is used, and `up_to` stays below its bound, so the casts of those
// bounded `u64`s back to `usize` are exact.
#[allow(clippy::indexing_slicing, clippy::cast_possible_truncation)]
fn surviving_bytes(inode: &Inode, holes: bool, random: &mut SplitMix64) -> Vec<u8> {
    const PAGE: usize = 4096;
    if !inode.reserved && !holes {
        return surviving_prefix(inode, random);
    }
    let synced = inode.synced_bytes.min(inode.data.len());
    let live = inode.allocated.max(inode.data.len() as u64);
    let low = inode.durable_length.min(live).max(synced as u64);
    let high = inode.durable_length.max(live);
    // Journaled metadata commits whole: usually one of the two lengths, rarely in between.
    let length = match random.next() % 4 {
        0 | 1 => low,
        2 => high,
        _ => low + random.up_to(high - low),
    };
    let length = usize::try_from(length).unwrap_or(usize::MAX);
    let mut image = vec![0u8; length];
    let data_end = inode.data.len().min(length);
    let synced_end = synced.min(data_end);
    image[..synced_end].copy_from_slice(&inode.data[..synced_end]);
    if holes {
        let mut page_start = synced_end;
        while page_start < data_end {
            let page_end = ((page_start / PAGE + 1) * PAGE).min(data_end);
            if random.next() & 1 == 0 {
                image[page_start..page_end].copy_from_slice(&inode.data[page_start..page_end]);
            }
            page_start = page_end;
        }
    } else {
        let kept = synced_end + random.up_to((data_end - synced_end) as u64) as usize;
        image[synced_end..kept].copy_from_slice(&inode.data[synced_end..kept]);
    }
    image
}

/// Synced bytes plus a random prefix of the unsynced ones, the last sector sometimes torn.
// Test-support model, not a data path: every range is clamped to the image and the data
// lengths just before it is used, and `up_to` stays below its bound, so the casts of those
// bounded `u64`s back to `usize` are exact.
#[allow(clippy::indexing_slicing, clippy::cast_possible_truncation)]
fn surviving_prefix(inode: &Inode, random: &mut SplitMix64) -> Vec<u8> {
    const SECTOR: usize = 512;
    let synced = inode.synced_bytes.min(inode.data.len());
    let unsynced = inode.data.len() - synced;
    let kept = random.up_to(unsynced as u64) as usize;
    let mut data = inode.data[..synced + kept].to_vec();
    if kept < unsynced {
        // The sector being written when power failed may hold anything up to its end.
        let sector_end = (data.len() / SECTOR + 1) * SECTOR;
        let torn_end = sector_end.min(inode.data.len());
        match random.next() % 4 {
            0 => {
                while data.len() < torn_end {
                    data.push(random.next() as u8);
                }
            }
            1 => data.resize(torn_end, 0),
            _ => {}
        }
    }
    data
}
