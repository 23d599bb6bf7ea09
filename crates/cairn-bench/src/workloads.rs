//! The catalogue of workloads: db_bench's benchmarks, YCSB A–F and the papers' workloads.
//!
//! A workload is data: which operations in which proportions, how keys are chosen, how many
//! operations, and what the database must hold first. `runner.rs` executes them.

use crate::error::{BenchError, Result};

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Point read of a key from the distribution.
    Read,
    /// Put of a key from the distribution (insert or update: an LSM does not distinguish).
    Put,
    /// Put of a new key past every key written so far (YCSB insert).
    Append,
    /// Delete of a key from the distribution.
    Delete,
    /// Seek to a key from the distribution and read the following entries.
    Scan,
    /// Read-modify-write of one key, atomic on every engine: cairn's `Db::update`, the
    /// in-memory engines' own RMW, and get + put under a lock stripe for RocksDB, LevelDB
    /// and `cairn-striped` (the baseline of cLSM §5.1).
    Rmw,
    /// Batched point reads (`multi_get`) of `--multiget_batch` uniform random keys.
    MultiRead,
    /// Point read of a key that was never written: key number `n` from the distribution with
    /// its last padding byte changed (`keys::make_missing_key`), so it sorts between keys `n`
    /// and `n + 1`, inside every table's key range, and only the Bloom filters (or a data
    /// block read, on a false positive) can answer it.
    ReadMissing,
    /// Compact the whole key space into its final shape (cairn: `compact_range(None, None)`)
    /// and wait for it: the steady-state space after a fill.
    Compact,
    /// Wait until background flushes and compactions have stopped (cairn: no sealed memtable,
    /// no level over its limit, no compaction finished for a second), without changing the
    /// shape the policy chose: later read phases then measure the tree, not the merges.
    Settle,
}

/// How keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Each thread walks its own contiguous slice of `0..num` in order.
    Sequential,
    /// Uniform over `0..num`, with replacement.
    Uniform,
    /// YCSB scrambled Zipfian, constant 0.99.
    Zipfian,
    /// YCSB latest: Zipfian over the distance from the newest key.
    Latest,
    /// `fraction` of the keys (blocks of 100) receive `probability` of the accesses.
    Hot { fraction: f64, probability: f64 },
}

/// What the database must hold before the measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preload {
    /// Start from a fresh, empty database (db_bench's fill benchmarks).
    Fresh,
    /// Use the database as the previous benchmark left it; if nothing was loaded yet, load
    /// every key of `0..num` once in a scattered order (unmeasured).
    Existing,
    /// Fresh database, then every key of `0..num` in key order (FloDB's read-only setup).
    Sequential,
    /// Fresh database, then half of the keys (the even ones) in scattered order (FloDB's
    /// mixed-workload setup: about half of the reads find their key).
    Half,
}

/// How many operations the measured phase runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// `--num` operations in total, split over the threads.
    Num,
    /// `--reads` operations (default `--num`) in total, split over the threads.
    Reads,
    /// A fixed time in seconds (`--duration` overrides every budget).
    Seconds(f64),
    /// One operation, by the first thread (maintenance steps: `compact`, `settle`).
    Once,
    /// `--reads` entries' worth of operations that each read this many entries: `--reads`
    /// divided by it, at least 1,000 (`seekrandom:N`, so every range size reads about the
    /// same number of entries).
    Entries(usize),
}

/// How threads are assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every thread runs the mix.
    Mixed,
    /// `--threads` readers plus one extra writer thread that puts uniform random keys until
    /// the readers finish; only the readers are measured (db_bench's readwhilewriting).
    ReadersPlusWriter,
    /// One of the `--threads` threads writes, the others read; every operation is counted
    /// (FloDB §5.1 "one writer, many readers").
    OneWriterManyReaders,
    /// Each thread iterates over its slice of the key space (db_bench's readseq).
    SequentialScan,
}

/// One named workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name used on the command line and in results.
    pub name: &'static str,
    /// Where it comes from and what it does.
    pub description: &'static str,
    /// Operation mix (weights need not sum to 1).
    pub mix: &'static [(Op, f64)],
    /// Key distribution.
    pub dist: Dist,
    /// State before the measured phase.
    pub preload: Preload,
    /// Measured-phase length.
    pub budget: Budget,
    /// Thread assignment.
    pub shape: Shape,
    /// Scan length range (inclusive) for `Op::Scan`; `None` uses `--seek_nexts` + 1.
    pub scan_length: Option<(usize, usize)>,
    /// A caveat printed with the results.
    pub note: Option<&'static str>,
}

impl Workload {
    /// Whether it needs ordered iteration (scans or a sequential read), which the in-memory
    /// engines do not have.
    pub fn needs_scan(&self) -> bool {
        self.shape == Shape::SequentialScan || self.mix.iter().any(|(op, _)| *op == Op::Scan)
    }
}

const WRITE: &[(Op, f64)] = &[(Op::Put, 1.0)];
const READ: &[(Op, f64)] = &[(Op::Read, 1.0)];
const DELETE: &[(Op, f64)] = &[(Op::Delete, 1.0)];
const SEEK: &[(Op, f64)] = &[(Op::Scan, 1.0)];

/// Every workload, in the order `--benchmarks list` prints them.
pub fn catalogue() -> Vec<Workload> {
    let base = Workload {
        name: "",
        description: "",
        mix: WRITE,
        dist: Dist::Uniform,
        preload: Preload::Existing,
        budget: Budget::Num,
        shape: Shape::Mixed,
        scan_length: None,
        note: None,
    };
    let hot90 = Dist::Hot {
        fraction: 0.10,
        probability: 0.90,
    };
    vec![
        // ---- db_bench ----
        Workload {
            name: "fillseq",
            description: "db_bench: write --num keys in key order into a fresh database",
            dist: Dist::Sequential,
            preload: Preload::Fresh,
            ..base.clone()
        },
        Workload {
            name: "fillrandom",
            description: "db_bench: write --num uniform random keys into a fresh database",
            preload: Preload::Fresh,
            ..base.clone()
        },
        Workload {
            name: "overwrite",
            description: "db_bench: write --num uniform random keys into the existing database",
            ..base.clone()
        },
        Workload {
            name: "readrandom",
            description: "db_bench: --reads point reads of uniform random keys",
            mix: READ,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "readmissing",
            description: "--reads point reads of keys that were never written (between loaded keys, uniform): zero-result lookups; blk/rd counts false positives",
            mix: &[(Op::ReadMissing, 1.0)],
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "compact",
            description: "maintenance: compact the whole key space (cairn: compact_range) and wait; its row's space is the steady-state size",
            mix: &[(Op::Compact, 1.0)],
            budget: Budget::Once,
            ..base.clone()
        },
        Workload {
            name: "settle",
            description: "maintenance: wait until background flushes and compactions stop (the shape is left as the policy made it); w-amp of a fill = (fill + settle bytes) / fill bytes",
            mix: &[(Op::Settle, 1.0)],
            budget: Budget::Once,
            ..base.clone()
        },
        Workload {
            name: "multireadrandom",
            description: "db_bench: --reads point reads of uniform random keys in batches of --multiget_batch (cairn: Db::multi_get)",
            mix: &[(Op::MultiRead, 1.0)],
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "readseq",
            description: "db_bench: iterate over --reads entries in key order",
            mix: READ,
            budget: Budget::Reads,
            shape: Shape::SequentialScan,
            ..base.clone()
        },
        Workload {
            name: "readwhilewriting",
            description: "db_bench: --threads readers of uniform random keys plus one writer; readers measured",
            mix: READ,
            budget: Budget::Reads,
            shape: Shape::ReadersPlusWriter,
            ..base.clone()
        },
        Workload {
            name: "seekrandom",
            description: "db_bench: --reads seeks to uniform random keys, reading --seek_nexts entries after each",
            mix: SEEK,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "deleterandom",
            description: "db_bench: delete --num uniform random keys from the existing database",
            mix: DELETE,
            ..base.clone()
        },
        // ---- YCSB core workloads (record count --num, operation count --reads) ----
        Workload {
            name: "ycsb_a",
            description: "YCSB A: 50% read, 50% update, zipfian 0.99",
            mix: &[(Op::Read, 0.5), (Op::Put, 0.5)],
            dist: Dist::Zipfian,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_b",
            description: "YCSB B: 95% read, 5% update, zipfian 0.99",
            mix: &[(Op::Read, 0.95), (Op::Put, 0.05)],
            dist: Dist::Zipfian,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_c",
            description: "YCSB C: 100% read, zipfian 0.99",
            mix: READ,
            dist: Dist::Zipfian,
            budget: Budget::Reads,
            ..base.clone()
        },
        // The same mixes with uniform keys, and an all-update mix, so that skew can be told
        // apart from the mix (the MemStore comparison runs A, B, C and put both ways).
        Workload {
            name: "ycsb_a_uniform",
            description: "YCSB A with uniform keys: 50% read, 50% update",
            mix: &[(Op::Read, 0.5), (Op::Put, 0.5)],
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_b_uniform",
            description: "YCSB B with uniform keys: 95% read, 5% update",
            mix: &[(Op::Read, 0.95), (Op::Put, 0.05)],
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_c_uniform",
            description: "YCSB C with uniform keys: 100% read",
            mix: READ,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_put",
            description: "YCSB-style all-update: 100% update of loaded records, zipfian 0.99",
            dist: Dist::Zipfian,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_put_uniform",
            description: "YCSB-style all-update: 100% update of loaded records, uniform",
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_d",
            description: "YCSB D: 95% read, 5% insert, latest",
            mix: &[(Op::Read, 0.95), (Op::Append, 0.05)],
            dist: Dist::Latest,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "ycsb_e",
            description: "YCSB E: 95% scan (1-100 entries), 5% insert, zipfian 0.99",
            mix: &[(Op::Scan, 0.95), (Op::Append, 0.05)],
            dist: Dist::Zipfian,
            budget: Budget::Reads,
            scan_length: Some((1, 100)),
            ..base.clone()
        },
        Workload {
            name: "ycsb_f",
            description: "YCSB F: 50% read, 50% read-modify-write, zipfian 0.99",
            mix: &[(Op::Read, 0.5), (Op::Rmw, 0.5)],
            dist: Dist::Zipfian,
            budget: Budget::Reads,
            note: Some("cairn: optimistic RMW (Db::update); RocksDB, LevelDB, cairn-striped: get + put under a lock stripe"),
            ..base.clone()
        },
        // ---- cLSM (Golan-Gueta et al., EuroSys 2015) §5.1 ----
        Workload {
            name: "clsm_write",
            description: "cLSM §5.1 write-only: puts of uniform random keys into a fresh database",
            preload: Preload::Fresh,
            ..base.clone()
        },
        Workload {
            name: "clsm_read",
            description: "cLSM §5.1 read-only: 90% of reads go to a popular 10% of the keys",
            mix: READ,
            dist: hot90,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "clsm_mixed",
            description: "cLSM §5.1 mixed: 1:1 reads and writes, 90% to a popular 10%",
            mix: &[(Op::Read, 0.5), (Op::Put, 0.5)],
            dist: hot90,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "clsm_scan_write",
            description: "cLSM §5.1 writes mixed with scans of 10-20 keys (1 scan per 15 writes: as many keys scanned as written)",
            mix: &[(Op::Put, 15.0), (Op::Scan, 1.0)],
            dist: hot90,
            budget: Budget::Reads,
            scan_length: Some((10, 20)),
            ..base.clone()
        },
        Workload {
            name: "clsm_rmw",
            description: "cLSM §5.1 read-modify-write only, 90% to a popular 10%",
            mix: &[(Op::Rmw, 1.0)],
            dist: hot90,
            budget: Budget::Reads,
            note: Some("cairn: optimistic RMW (Db::update); RocksDB, LevelDB, cairn-striped: get + put under a lock stripe"),
            ..base.clone()
        },
        // ---- FloDB (Balmau et al., EuroSys 2017) §5 ----
        Workload {
            name: "flodb_write",
            description: "FloDB §5.1 write-only: 50% inserts, 50% deletes, uniform, fresh database",
            mix: &[(Op::Put, 0.5), (Op::Delete, 0.5)],
            preload: Preload::Fresh,
            ..base.clone()
        },
        Workload {
            name: "flodb_read",
            description: "FloDB §5.1 read-only: uniform reads after a sequential load",
            mix: READ,
            preload: Preload::Sequential,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "flodb_mixed",
            description: "FloDB §5.1 mixed: 50% reads, 25% inserts, 25% deletes, half the keys loaded",
            mix: &[(Op::Read, 0.5), (Op::Put, 0.25), (Op::Delete, 0.25)],
            preload: Preload::Half,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "flodb_one_writer",
            description: "FloDB §5.1 one writer thread, the other threads read; all operations counted",
            mix: READ,
            preload: Preload::Half,
            budget: Budget::Reads,
            shape: Shape::OneWriterManyReaders,
            ..base.clone()
        },
        Workload {
            name: "flodb_scan_write",
            description: "FloDB §5.1 95% updates, 5% scans of 100 keys, half the keys loaded",
            mix: &[(Op::Put, 0.95), (Op::Scan, 0.05)],
            preload: Preload::Half,
            budget: Budget::Reads,
            scan_length: Some((100, 100)),
            ..base.clone()
        },
        Workload {
            name: "flodb_skew",
            description: "FloDB §5.4 50% reads, 50% updates, 98% of operations on 2% of the keys",
            mix: &[(Op::Read, 0.5), (Op::Put, 0.5)],
            dist: Dist::Hot {
                fraction: 0.02,
                probability: 0.98,
            },
            preload: Preload::Half,
            budget: Budget::Reads,
            ..base.clone()
        },
        Workload {
            name: "flodb_burst",
            description: "FloDB §5.3 10-second write burst (uniform puts) at --write_buffer_size, fresh database",
            preload: Preload::Fresh,
            budget: Budget::Seconds(10.0),
            ..base.clone()
        },
    ]
}

/// Looks up workloads by comma-separated names.
pub fn parse_list(list: &str) -> Result<Vec<Workload>> {
    let catalogue = catalogue();
    let mut chosen = Vec::new();
    for name in list
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        if let Some((base, nexts)) = name.split_once(':') {
            chosen.push(sized_seek(name, base, nexts)?);
            continue;
        }
        let workload = catalogue
            .iter()
            .find(|workload| workload.name == name)
            .ok_or_else(|| {
                BenchError::new(format!(
                    "unknown benchmark `{name}`; `--benchmarks list` prints every name"
                ))
            })?;
        chosen.push(workload.clone());
    }
    if chosen.is_empty() {
        return Err(BenchError::new("--benchmarks names no benchmark"));
    }
    Ok(chosen)
}

/// `seekrandom:N`: seekrandom reading N entries after each seek (range size N + 1), with a
/// budget of `--reads` entries, so one command can sweep range sizes on one database.
fn sized_seek(name: &str, base: &str, nexts: &str) -> Result<Workload> {
    let nexts: usize = nexts
        .parse()
        .ok()
        .filter(|_| base == "seekrandom")
        .ok_or_else(|| {
            BenchError::new(format!(
                "unknown benchmark `{name}`; only seekrandom takes a size (`seekrandom:N`, N entries read after each seek)"
            ))
        })?;
    let mut workload = catalogue()
        .into_iter()
        .find(|workload| workload.name == base)
        .ok_or_else(|| BenchError::new(format!("unknown benchmark `{base}`")))?;
    // The name must live as long as the run's reports; a command line names a handful.
    workload.name = Box::leak(name.to_string().into_boxed_str());
    workload.scan_length = Some((nexts + 1, nexts + 1));
    workload.budget = Budget::Entries(nexts + 1);
    Ok(workload)
}

/// The catalogue as text, for `--benchmarks list`.
pub fn describe() -> String {
    let mut text = String::new();
    for workload in catalogue() {
        text.push_str(&format!("{:<18} {}\n", workload.name, workload.description));
        if let Some(note) = workload.note {
            text.push_str(&format!("{:<18} note: {note}\n", ""));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse() {
        let names: Vec<&str> = catalogue().iter().map(|workload| workload.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(
            parse_list(&names.join(",")).map(|list| list.len()).ok(),
            Some(names.len())
        );
        assert!(parse_list("fillrandom,nonsense").is_err());
        let sized = parse_list("seekrandom:99,seekrandom:0").unwrap();
        assert_eq!(sized[0].name, "seekrandom:99");
        assert_eq!(sized[0].scan_length, Some((100, 100)));
        assert_eq!(sized[0].budget, Budget::Entries(100));
        assert_eq!(sized[1].scan_length, Some((1, 1)));
        assert!(parse_list("readrandom:5").is_err());
        assert!(parse_list("seekrandom:x").is_err());
    }

    #[test]
    fn scanning_workloads_are_known() {
        let scanning: Vec<&str> = catalogue()
            .iter()
            .filter(|workload| workload.needs_scan())
            .map(|workload| workload.name)
            .collect();
        assert!(scanning.contains(&"readseq"));
        assert!(scanning.contains(&"ycsb_e"));
        assert!(!scanning.contains(&"ycsb_a"));
        assert!(!scanning.contains(&"ycsb_put_uniform"));
    }
}
