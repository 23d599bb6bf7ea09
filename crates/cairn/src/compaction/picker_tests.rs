//! The picker tests, written as data: every `testdata/*.txt` file holds cases, each a version
//! (levels, runs, files with key ranges and sizes), the shape options and running work, and
//! the expected choice of the policy the case names (leveling unless `style` says otherwise).
//! The format (one directive per line, `#` comments):
//!
//! ```text
//! case <name>                      starts a case
//! shape <levels> <l0 trigger> <l1 bytes> <ratio>
//! style leveling|tiering|lazy [<runs per level D> [<merge fraction m>]]
//! file L<level>[.<run>] <number> <smallest>-<largest> <bytes>
//! pointer L<level> <user key>      compact pointer (round robin) of a level
//! busy L<level>                    a running compaction holds the level
//! compacting <number>              a running compaction holds the file
//! expect nothing
//! expect L<from> -> L<to> run <index|new> inputs <n,...> overlaps <n,...|-> [trivial]
//! ```
//!
//! Level-0 files get a run each (newest first); deeper files join run 0 unless `.<run>` says
//! otherwise; each run is sorted by key, and run `r` of a level is older than run `r - 1`
//! (made-up ids, the oldest run 1: `Version::from_runs`). The built version must pass
//! `check_invariants`.

use super::plan::OutputRun;
use super::*;
use crate::key::{internal_key, ValueKind};
use std::collections::BTreeMap;
use std::path::Path;

/// One parsed case.
struct Case {
    name: String,
    level_count: usize,
    shape: ShapeOptions,
    style: crate::CompactionStyle,
    /// (level, run) -> files.
    runs: BTreeMap<(usize, usize), Vec<Arc<FileMeta>>>,
    state_pointers: Vec<(usize, Vec<u8>)>,
    busy_levels: Vec<usize>,
    compacting: Vec<u64>,
    expect: String,
}

fn parse_level(word: &str) -> (usize, usize) {
    let body = word
        .strip_prefix('L')
        .unwrap_or_else(|| panic!("level expected, got {word}"));
    let (level, run) = body.split_once('.').unwrap_or((body, "0"));
    (level.parse().unwrap(), run.parse().unwrap())
}

fn parse_file(words: &[&str]) -> ((usize, usize), Arc<FileMeta>) {
    let (level, run) = parse_level(words[0]);
    let number: u64 = words[1].parse().unwrap();
    let (low, high) = words[2].split_once('-').unwrap();
    let bytes: u64 = words[3].parse().unwrap();
    let meta = FileMeta::new(
        number,
        bytes,
        internal_key(low.as_bytes(), number * 10 + 9, ValueKind::Put),
        internal_key(high.as_bytes(), number * 10, ValueKind::Put),
        number * 10,
        number * 10 + 9,
    );
    // Level 0: one run per file, keyed so that newer (higher-numbered) files come first.
    let run = if level == 0 {
        usize::MAX - number as usize
    } else {
        run
    };
    ((level, run), Arc::new(meta))
}

fn parse_cases(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&directive, rest)) = words.split_first() else {
            continue;
        };
        if directive.starts_with('#') {
            continue;
        }
        if directive == "case" {
            cases.push(Case {
                name: rest.join(" "),
                level_count: 0,
                shape: ShapeOptions::leveled(4, 1000, 10),
                style: crate::CompactionStyle::Leveling,
                runs: BTreeMap::new(),
                state_pointers: Vec::new(),
                busy_levels: Vec::new(),
                compacting: Vec::new(),
                expect: String::new(),
            });
            continue;
        }
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("`{line}` before any case"));
        match directive {
            "shape" => {
                case.level_count = rest[0].parse().unwrap();
                case.shape.level0_compaction_trigger = rest[1].parse().unwrap();
                case.shape.level1_size_bytes_max = rest[2].parse().unwrap();
                case.shape.level_size_ratio = rest[3].parse().unwrap();
            }
            "style" => {
                case.style = match rest[0] {
                    "leveling" => crate::CompactionStyle::Leveling,
                    "tiering" => crate::CompactionStyle::Tiering,
                    "lazy" => crate::CompactionStyle::LazyLeveling,
                    other => panic!("unknown style {other}"),
                };
                if let Some(runs) = rest.get(1) {
                    case.shape.runs_per_level = runs.parse().unwrap();
                }
                if let Some(fraction) = rest.get(2) {
                    case.shape.merge_fraction = fraction.parse().unwrap();
                }
            }
            "file" => {
                let (slot, meta) = parse_file(rest);
                case.runs.entry(slot).or_default().push(meta);
            }
            "pointer" => {
                let level = parse_level(rest[0]).0;
                case.state_pointers.push((
                    level,
                    internal_key(rest[1].as_bytes(), 0, ValueKind::Delete),
                ));
            }
            "busy" => case.busy_levels.push(parse_level(rest[0]).0),
            "compacting" => case.compacting.push(rest[0].parse().unwrap()),
            "expect" => case.expect = rest.join(" "),
            other => panic!("unknown directive `{other}` in case {}", case.name),
        }
    }
    cases
}

fn build(case: &Case) -> (Version, CompactionState) {
    let mut levels: Vec<Vec<Vec<Arc<FileMeta>>>> = vec![Vec::new(); case.level_count];
    for (&(level, _), files) in &case.runs {
        let mut run = files.clone();
        run.sort_by(|a, b| crate::key::compare_internal_keys(&a.smallest, &b.smallest));
        levels[level].push(run);
    }
    let version = Version::from_runs(levels);
    if let Err(reason) = version.check_invariants() {
        panic!("case {}: the version is malformed: {reason}", case.name);
    }
    let mut state = CompactionState::new(case.shape.clone());
    state.compact_pointers = vec![None; case.level_count];
    for (level, key) in &case.state_pointers {
        state.compact_pointers[*level] = Some(key.clone());
    }
    state.busy_levels.extend(case.busy_levels.iter().copied());
    state
        .compacting_files
        .extend(case.compacting.iter().copied());
    (version, state)
}

fn numbers(files: &[Arc<FileMeta>]) -> String {
    if files.is_empty() {
        return "-".into();
    }
    files
        .iter()
        .map(|file| file.number.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The choice in the `expect` syntax.
fn describe(choice: &Choice) -> String {
    let Choice::Compact(plan) = choice else {
        return "nothing".into();
    };
    let run = match plan.output_run {
        OutputRun::Merge(run) => run.to_string(),
        OutputRun::New => "new".to_string(),
    };
    let mut text = format!(
        "L{} -> L{} run {run} inputs {} overlaps {}",
        plan.level,
        plan.output_level,
        numbers(&plan.inputs),
        numbers(&plan.output_level_inputs)
    );
    if plan.is_trivial_move() {
        text.push_str(" trivial");
    }
    text
}

#[test]
fn pickers_match_testdata() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/compaction/testdata");
    let mut paths: Vec<_> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    paths.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        for case in parse_cases(&text) {
            let (version, state) = build(&case);
            let actual = describe(&case.style.policy().choose(&version, &state));
            if actual != case.expect {
                failures.push(format!(
                    "{} / {}:\n  expected: {}\n  actual:   {actual}",
                    path.file_name().unwrap().to_string_lossy(),
                    case.name,
                    case.expect
                ));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 5,
        "only {checked} picker cases found in {}",
        directory.display()
    );
}
