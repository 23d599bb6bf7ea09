//! Compaction: the policy (a pure decision) and the job (the merge that executes it).
//!
//! Policy: [`choose`] looks at a [`Version`] and the shape options and returns a [`Choice`];
//! it reads nothing else and changes nothing, so it is unit-tested on hand-built versions.
//! Leveling as in LevelDB: level 0 is scored by file count against
//! `level0_compaction_trigger`, level `i >= 1` by bytes against
//! `level1_size_bytes_max * level_size_ratio^(i-1)`; the highest score >= 1 wins. A level-0
//! compaction takes every level-0 file (they overlap); a deeper one takes the next file after
//! the level's round-robin compact pointer. Inputs from the next level are the files that
//! overlap the chosen range. A single input with nothing to merge under it is moved, not
//! rewritten.
//!
//! Job: [`write_tables`] merges sorted input with a heap (`MergingIterator`) and drops what no
//! reader can see (the [`VersionFilter`] rules below), writing SSTables of about
//! `target_file_size_bytes`, never splitting one user key across two files.
//!
//! Version-dropping rules (per user key, entries seen newest first). Snapshots split sequence
//! space into stripes; stripe(s) = number of live snapshots below s.
//! 1. Only the newest entry of each stripe is kept: older ones in the same stripe are visible
//!    to no snapshot and not to the latest state.
//! 2. A tombstone in the lowest stripe (seq <= oldest snapshot) is dropped if no deeper level
//!    can hold the key (`is_base_level_for_key`): every older entry of the key is in this
//!    stripe too, hence dropped by rule 1, so nothing remains for the tombstone to hide.
//!
//! Thread-safety contract: policy functions are pure; a job owns its inputs and outputs. The
//! database runs one compaction job at a time (background thread or `compact_range`).

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, SequenceNumber, ValueKind};
use crate::sstable::{TableBuilder, TableOptions};
use crate::version::{AddedFile, FileMeta, Version};
use std::path::Path;
use std::sync::Arc;

/// The options that shape the tree.
#[derive(Debug, Clone)]
pub struct ShapeOptions {
    /// Level-0 file count that triggers a compaction.
    pub level0_compaction_trigger: usize,
    /// Maximum bytes of level 1.
    pub level1_size_bytes_max: u64,
    /// Growth factor between levels.
    pub level_size_ratio: u64,
}

impl From<&crate::Options> for ShapeOptions {
    fn from(options: &crate::Options) -> Self {
        ShapeOptions {
            level0_compaction_trigger: options.level0_compaction_trigger,
            level1_size_bytes_max: options.level1_size_bytes_max,
            level_size_ratio: options.level_size_ratio,
        }
    }
}

/// What to compact.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The level being compacted.
    pub level: usize,
    /// Where the output goes (`level + 1`).
    pub output_level: usize,
    /// Chosen files of `level`.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Files of `output_level` overlapping the inputs.
    pub output_level_inputs: Vec<Arc<FileMeta>>,
    /// Why (for stats and logs).
    pub reason: String,
}

impl Plan {
    /// Every input file.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.output_level_inputs.iter())
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|file| file.size_bytes).sum()
    }

    /// True if the plan can be done by moving a file down without rewriting it.
    pub fn is_trivial_move(&self) -> bool {
        self.inputs.len() == 1 && self.output_level_inputs.is_empty()
    }

    /// The largest user key among the level's inputs (the next compact pointer).
    pub fn largest_input_key(&self) -> Option<&[u8]> {
        self.inputs
            .iter()
            .map(|file| file.largest.as_slice())
            .max_by(|a, b| crate::key::compare_internal_keys(a, b))
    }
}

/// The policy's decision.
#[derive(Debug, Clone)]
pub enum Choice {
    /// The tree is in shape.
    Nothing,
    /// Run this compaction.
    Compact(Plan),
}

/// Maximum bytes of `level` (>= 1).
pub fn level_size_bytes_max(shape: &ShapeOptions, level: usize) -> u64 {
    let mut size = shape.level1_size_bytes_max;
    for _ in 1..level {
        size = size.saturating_mul(shape.level_size_ratio);
    }
    size
}

/// How far over its limit each level is (>= 1 means it needs compaction). The last level has
/// no limit.
pub fn level_scores(version: &Version, shape: &ShapeOptions) -> Vec<f64> {
    let last = version.level_count() - 1;
    (0..version.level_count())
        .map(|level| {
            if level == last {
                0.0
            } else if level == 0 {
                version.files(0).len() as f64 / shape.level0_compaction_trigger as f64
            } else {
                version.level_bytes(level) as f64 / level_size_bytes_max(shape, level) as f64
            }
        })
        .collect()
}

/// Chooses the next compaction (pure: depends only on its arguments).
pub fn choose(
    version: &Version,
    shape: &ShapeOptions,
    compact_pointers: &[Option<Vec<u8>>],
) -> Choice {
    let scores = level_scores(version, shape);
    let best = scores
        .iter()
        .enumerate()
        .filter(|(_, score)| **score >= 1.0)
        .max_by(|a, b| a.1.total_cmp(b.1));
    let Some((level, score)) = best else {
        return Choice::Nothing;
    };
    let inputs: Vec<Arc<FileMeta>> = if level == 0 {
        version.files(0).to_vec()
    } else {
        let files = version.files(level);
        let pointer = compact_pointers.get(level).and_then(Option::as_deref);
        let start = pointer
            .map(|key| {
                files.partition_point(|file| {
                    crate::key::compare_internal_keys(&file.largest, key)
                        != std::cmp::Ordering::Greater
                })
            })
            .filter(|&index| index < files.len())
            .unwrap_or(0);
        files.get(start).cloned().into_iter().collect()
    };
    match plan_for_inputs(version, level, inputs) {
        Some(mut plan) => {
            plan.reason = format!("level {level} score {score:.2}");
            Choice::Compact(plan)
        }
        None => Choice::Nothing,
    }
}

/// Builds a plan compacting `inputs` of `level` into `level + 1`.
pub fn plan_for_inputs(
    version: &Version,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
) -> Option<Plan> {
    if inputs.is_empty() || level + 1 >= version.level_count() {
        return None;
    }
    let lower = inputs.iter().map(|file| file.smallest_user_key()).min()?;
    let upper = inputs.iter().map(|file| file.largest_user_key()).max()?;
    let output_level_inputs = version.overlapping_files(level + 1, Some(lower), Some(upper));
    Some(Plan {
        level,
        output_level: level + 1,
        inputs,
        output_level_inputs,
        reason: String::new(),
    })
}

/// A plan for `compact_range`: the files of `level` overlapping `[lower, upper]`. Level 0
/// takes every overlapping file; deeper levels take the overlapping run.
pub fn plan_for_range(
    version: &Version,
    level: usize,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Option<Plan> {
    let inputs = version.overlapping_files(level, lower, upper);
    let mut plan = plan_for_inputs(version, level, inputs)?;
    plan.reason = format!("manual compaction of level {level}");
    Some(plan)
}

/// Decides, entry by entry, which versions a flush or compaction keeps (module doc rules).
#[derive(Debug)]
pub struct VersionFilter<'a> {
    /// Live snapshots, ascending.
    snapshots: &'a [SequenceNumber],
    /// Version used for the base-level test; `None` disables tombstone dropping (flush).
    base_level_version: Option<(&'a Version, usize)>,
    current_user_key: Vec<u8>,
    has_current: bool,
    previous_stripe: usize,
}

impl<'a> VersionFilter<'a> {
    /// A filter for output written to `output_level` of `version` (None: never drop
    /// tombstones, as in a flush to level 0).
    pub fn new(
        snapshots: &'a [SequenceNumber],
        base_level_version: Option<(&'a Version, usize)>,
    ) -> Self {
        debug_assert!(snapshots.windows(2).all(|pair| pair[0] <= pair[1]));
        VersionFilter {
            snapshots,
            base_level_version,
            current_user_key: Vec::new(),
            has_current: false,
            previous_stripe: usize::MAX,
        }
    }

    fn stripe(&self, sequence: SequenceNumber) -> usize {
        self.snapshots
            .partition_point(|&snapshot| snapshot < sequence)
    }

    /// True if the entry must be kept. Entries must arrive in internal-key order.
    pub fn keep(&mut self, user_key: &[u8], sequence: SequenceNumber, kind: ValueKind) -> bool {
        if !self.has_current || self.current_user_key != user_key {
            self.current_user_key.clear();
            self.current_user_key.extend_from_slice(user_key);
            self.has_current = true;
            self.previous_stripe = usize::MAX;
        }
        let stripe = self.stripe(sequence);
        if stripe == self.previous_stripe {
            return false; // rule 1
        }
        self.previous_stripe = stripe;
        if kind == ValueKind::Delete && stripe == 0 {
            if let Some((version, output_level)) = self.base_level_version {
                if version.is_base_level_for_key(output_level, user_key) {
                    return false; // rule 2
                }
            }
        }
        true
    }
}

/// Where a job writes and how.
#[derive(Debug)]
pub struct OutputSettings<'a> {
    /// File system.
    pub file_system: &'a dyn FileSystem,
    /// Database directory.
    pub directory: &'a Path,
    /// SSTable format options.
    pub table_options: TableOptions,
    /// Cut a new file once one reaches this size (None: one file).
    pub target_file_size_bytes: Option<u64>,
}

/// Writes the entries of `input` that `filter` keeps into new SSTables. `new_file_number`
/// allocates a number (and registers it as a pending output) for each file started. Output
/// files are synced and their directory entry is synced before this returns.
pub fn write_tables(
    input: &mut dyn InternalIterator,
    filter: &mut VersionFilter<'_>,
    settings: &OutputSettings<'_>,
    new_file_number: &mut dyn FnMut() -> u64,
) -> Result<Vec<AddedFile>> {
    struct Open {
        builder: TableBuilder,
        file: AddedFile,
    }
    let mut outputs = Vec::new();
    let mut open: Option<Open> = None;
    let mut last_user_key: Vec<u8> = Vec::new();
    input.seek_to_first();
    while input.valid() {
        let key = input.key();
        let Some(parsed) = parse_internal_key(key) else {
            input.status()?;
            return Err(Error::Internal(
                "compaction input holds a malformed internal key".into(),
            ));
        };
        if filter.keep(parsed.user_key, parsed.sequence, parsed.kind) {
            let new_user_key = parsed.user_key != last_user_key.as_slice();
            let full = open.as_ref().is_some_and(|current| {
                settings
                    .target_file_size_bytes
                    .is_some_and(|target| current.builder.file_size() >= target)
            });
            if full && new_user_key {
                if let Some(finished) = open.take() {
                    outputs.push(finish_table(finished.builder, finished.file)?);
                }
            }
            if open.is_none() {
                let number = new_file_number();
                let path = filename::table_path(settings.directory, number);
                let file = settings.file_system.create(&path)?;
                open = Some(Open {
                    builder: TableBuilder::new(file, path, settings.table_options),
                    file: AddedFile {
                        number,
                        size_bytes: 0,
                        smallest: key.to_vec(),
                        largest: Vec::new(),
                        smallest_sequence: SequenceNumber::MAX,
                        largest_sequence: 0,
                    },
                });
            }
            if let Some(current) = open.as_mut() {
                current.builder.add(key, input.value())?;
                current.file.largest.clear();
                current.file.largest.extend_from_slice(key);
                current.file.smallest_sequence =
                    current.file.smallest_sequence.min(parsed.sequence);
                current.file.largest_sequence = current.file.largest_sequence.max(parsed.sequence);
            }
            if new_user_key {
                last_user_key.clear();
                last_user_key.extend_from_slice(parsed.user_key);
            }
        }
        input.next();
    }
    input.status()?;
    if let Some(finished) = open.take() {
        outputs.push(finish_table(finished.builder, finished.file)?);
    }
    // Postcondition (version invariant 2): no user key spans two outputs.
    debug_assert!(outputs.windows(2).all(
        |pair| crate::key::user_key(&pair[0].largest) < crate::key::user_key(&pair[1].smallest)
    ));
    if !outputs.is_empty() {
        settings.file_system.sync_dir(settings.directory)?;
    }
    Ok(outputs)
}

fn finish_table(builder: TableBuilder, mut file: AddedFile) -> Result<AddedFile> {
    let (properties, size_bytes) = builder.finish_with_size()?;
    debug_assert_eq!(properties.smallest_key, file.smallest);
    debug_assert_eq!(properties.largest_key, file.largest);
    file.size_bytes = size_bytes;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;
    use crate::version::{apply_edit, VersionEdit};

    fn shape() -> ShapeOptions {
        ShapeOptions {
            level0_compaction_trigger: 4,
            level1_size_bytes_max: 1000,
            level_size_ratio: 10,
        }
    }

    fn file(number: u64, low: &str, high: &str, size: u64) -> AddedFile {
        AddedFile {
            number,
            size_bytes: size,
            smallest: internal_key(low.as_bytes(), 9, ValueKind::Put),
            largest: internal_key(high.as_bytes(), 1, ValueKind::Put),
            smallest_sequence: 1,
            largest_sequence: 9,
        }
    }

    fn version(files: Vec<(usize, AddedFile)>) -> Version {
        let edit = VersionEdit {
            added_files: files,
            ..VersionEdit::default()
        };
        apply_edit(&Version::empty(4), &edit).unwrap()
    }

    #[test]
    fn nothing_to_do_in_a_small_tree() {
        let version = version(vec![
            (0, file(1, "a", "b", 10)),
            (1, file(2, "a", "z", 500)),
        ]);
        assert!(matches!(choose(&version, &shape(), &[]), Choice::Nothing));
    }

    #[test]
    fn level0_trigger_takes_all_level0_files_and_overlaps() {
        let version = version(vec![
            (0, file(10, "c", "d", 10)),
            (0, file(11, "a", "b", 10)),
            (0, file(12, "e", "f", 10)),
            (0, file(13, "c", "c", 10)),
            (1, file(2, "a", "b", 500)),
            (1, file(3, "g", "z", 100)),
        ]);
        let Choice::Compact(plan) = choose(&version, &shape(), &[]) else {
            panic!("expected a compaction");
        };
        assert_eq!(plan.level, 0);
        assert_eq!(plan.inputs.len(), 4);
        let numbers: Vec<u64> = plan.output_level_inputs.iter().map(|f| f.number).collect();
        assert_eq!(numbers, vec![2]);
    }

    #[test]
    fn oversized_level_round_robins_from_the_pointer() {
        let version = version(vec![
            (1, file(2, "a", "b", 600)),
            (1, file(3, "c", "d", 600)),
            (2, file(4, "c", "c", 600)),
        ]);
        let Choice::Compact(plan) = choose(&version, &shape(), &[]) else {
            panic!("expected a compaction");
        };
        assert_eq!(plan.inputs[0].number, 2);
        assert!(plan.is_trivial_move());
        let pointers = vec![None, Some(internal_key(b"b", 1, ValueKind::Put))];
        let Choice::Compact(plan) = choose(&version, &shape(), &pointers) else {
            panic!("expected a compaction");
        };
        assert_eq!(plan.inputs[0].number, 3);
        assert_eq!(plan.output_level_inputs[0].number, 4);
    }

    #[test]
    fn filter_keeps_one_version_per_snapshot_stripe() {
        let empty = Version::empty(3);
        let snapshots = [5u64, 10];
        let mut filter = VersionFilter::new(&snapshots, Some((&empty, 2)));
        // key "a": versions 12, 11 (stripe 2), 9, 7 (stripe 1), 4 (stripe 0, delete)
        let kept: Vec<bool> = [
            (12, ValueKind::Put),
            (11, ValueKind::Put),
            (9, ValueKind::Put),
            (7, ValueKind::Put),
            (4, ValueKind::Delete),
            (2, ValueKind::Put),
        ]
        .iter()
        .map(|&(sequence, kind)| filter.keep(b"a", sequence, kind))
        .collect();
        assert_eq!(kept, vec![true, false, true, false, false, false]);
        // A tombstone above the oldest snapshot must stay.
        assert!(filter.keep(b"b", 7, ValueKind::Delete));
        // Without snapshots only the newest survives, and a newest tombstone vanishes.
        let mut filter = VersionFilter::new(&[], Some((&empty, 2)));
        assert!(!filter.keep(b"c", 3, ValueKind::Delete));
        assert!(!filter.keep(b"c", 2, ValueKind::Put));
        // A flush (no base-level version) keeps tombstones.
        let mut filter = VersionFilter::new(&[], None);
        assert!(filter.keep(b"c", 3, ValueKind::Delete));
    }
}
