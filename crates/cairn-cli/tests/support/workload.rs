//! A seeded CS265 workload generator and an independent oracle for it.
//!
//! Shared by the integration tests (`tests/cs265_workload.rs`) and the `cs265_gen` example via
//! `#[path]`. The oracle deliberately shares no code with the shell in `src/cs265.rs`: it has its
//! own line parsing and its own `BTreeMap<i32, i32>` interpreter, so the test is an independent
//! check of the binary (parser, executor, key encoding and the engine underneath).
//!
//! The generator uses its own SplitMix64 so that a seed gives the same workload on every
//! platform and every version of every crate.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Keys and values at the edges of the 32-bit range, used on purpose.
pub const EXTREMES: [i32; 7] = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];

/// SplitMix64: tiny, fast, fully specified.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x6a09_e667_f3bc_c908)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound > 0`; the tiny modulo bias does not matter here).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: i32, high: i32) -> i32 {
        let span = (i64::from(high) - i64::from(low) + 1) as u64;
        (i64::from(low) + self.below(span) as i64) as i32
    }

    /// Any `i32`.
    pub fn any_i32(&mut self) -> i32 {
        self.next_u64() as u32 as i32
    }

    /// An element of a non-empty slice.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            items.get(self.below(items.len() as u64) as usize).copied()
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Config {
    /// The seed; the same seed gives the same workload.
    pub seed: u64,
    /// Commands (non-blank lines), `l` lines included.
    pub commands: usize,
    /// Number of `l` commands (each loads its own file).
    pub loads: usize,
    /// Pairs per load file.
    pub load_pairs: usize,
    /// Prefix of the load file names (`{prefix}load_00.bin`, ...).
    pub file_prefix: String,
    /// Written before the file name in `l` lines (e.g. a directory relative to where the
    /// workload will be run); empty for bare names.
    pub path_prefix: String,
    /// Per-mille of range commands that are large (thousands of pairs).
    pub large_range_per_mille: u64,
}

impl Config {
    /// The default mix for `commands` commands.
    pub fn new(seed: u64, commands: usize) -> Self {
        Config {
            seed,
            commands,
            loads: (commands / 20_000).clamp(3, 12),
            load_pairs: (commands / 30).clamp(64, 50_000),
            file_prefix: String::new(),
            path_prefix: String::new(),
            large_range_per_mille: 2,
        }
    }
}

/// A generated workload: the text and the binary files its `l` lines name.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The workload, one command per line.
    pub text: String,
    /// `(file name, contents)` of every load file, in the order they are loaded.
    pub files: Vec<(String, Vec<u8>)>,
    /// The prefix `l` lines put before each file name.
    pub path_prefix: String,
}

impl Workload {
    /// The contents of the load file that an `l` line names as `path`.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        let name = path.strip_prefix(self.path_prefix.as_str())?;
        self.files
            .iter()
            .find(|(file, _)| file == name)
            .map(|(_, bytes)| bytes.as_slice())
    }
}

struct Generator {
    rng: Rng,
    /// Keys are mostly drawn from `-half_width..=half_width`.
    half_width: i32,
    /// Every key ever written (some since deleted): the source of overwrites and hits.
    written: Vec<i32>,
    text: String,
}

impl Generator {
    fn fresh_key(&mut self) -> i32 {
        let half_width = self.half_width;
        self.rng.between(-half_width, half_width)
    }

    fn written_key(&mut self) -> i32 {
        match self.rng.pick(&self.written) {
            Some(key) => key,
            None => self.fresh_key(),
        }
    }

    /// A key outside the usual key space (almost surely absent).
    fn far_key(&mut self) -> i32 {
        let offset = self.rng.between(1, 1 << 30);
        if self.rng.chance(500) {
            self.half_width.saturating_add(offset)
        } else {
            (-self.half_width).saturating_sub(offset)
        }
    }

    fn extreme(&mut self) -> i32 {
        self.rng.pick(&EXTREMES).unwrap_or(0)
    }

    fn value(&mut self) -> i32 {
        if self.rng.chance(30) {
            self.extreme()
        } else {
            self.rng.any_i32()
        }
    }

    /// Separator between tokens: usually one space, sometimes odd whitespace.
    fn gap(&mut self) -> &'static str {
        if self.rng.chance(5) {
            ["  ", "\t", " \t  "][self.rng.below(3) as usize]
        } else {
            " "
        }
    }

    fn line(&mut self, name: &str, args: &[i32]) {
        let leading = if self.rng.chance(3) { "  " } else { "" };
        let mut line = format!("{leading}{name}");
        for arg in args {
            let gap = self.gap();
            let _ = write!(line, "{gap}{arg}");
        }
        if self.rng.chance(3) {
            line.push_str(" \t");
        }
        self.text.push_str(&line);
        self.text.push('\n');
        if self.rng.chance(4) {
            self.text
                .push_str(if self.rng.chance(500) { "\n" } else { "   \n" });
        }
    }

    fn put(&mut self) {
        let roll = self.rng.below(100);
        let key = if roll < 35 {
            self.written_key()
        } else if roll < 96 {
            self.fresh_key()
        } else {
            self.extreme()
        };
        let value = self.value();
        self.written.push(key);
        self.line("p", &[key, value]);
    }

    fn get(&mut self) {
        let roll = self.rng.below(100);
        let key = if roll < 60 {
            self.written_key()
        } else if roll < 88 {
            self.fresh_key()
        } else if roll < 97 {
            self.far_key()
        } else {
            self.extreme()
        };
        self.line("g", &[key]);
    }

    fn delete(&mut self) {
        let roll = self.rng.below(100);
        let key = if roll < 60 {
            self.written_key()
        } else if roll < 85 {
            self.fresh_key()
        } else if roll < 98 {
            self.far_key()
        } else {
            self.extreme()
        };
        self.line("d", &[key]);
    }

    fn range(&mut self, large_per_mille: u64) {
        let roll = self.rng.below(1000);
        let (lower, upper) = if roll < large_per_mille {
            // Large: a sizeable part of the key space.
            let lower = self.fresh_key();
            let span = self.rng.between(self.half_width / 8, self.half_width / 2);
            (lower, lower.saturating_add(span))
        } else if roll < 30 {
            // Medium: up to a few hundred keys.
            let lower = self.fresh_key();
            (lower, lower.saturating_add(self.rng.between(64, 1000)))
        } else if roll < 50 {
            // Empty by construction: A >= B.
            let lower = self.fresh_key();
            (lower, lower.saturating_sub(self.rng.between(0, 100)))
        } else if roll < 60 {
            // At the ends of the 32-bit range.
            let width = self.rng.between(1, 1000);
            if self.rng.chance(500) {
                (i32::MIN, i32::MIN.saturating_add(width))
            } else {
                (i32::MAX.saturating_sub(width), i32::MAX)
            }
        } else {
            // Small, starting at a written key or anywhere.
            let lower = if self.rng.chance(500) {
                self.written_key()
            } else {
                self.fresh_key()
            };
            (lower, lower.saturating_add(self.rng.between(1, 32)))
        };
        self.line("r", &[lower, upper]);
    }

    fn load_file(&mut self, pairs: usize) -> Vec<u8> {
        let mut entries: Vec<(i32, i32)> = Vec::with_capacity(pairs + 4);
        entries.push((i32::MIN, self.value()));
        for _ in 0..pairs {
            let roll = self.rng.below(100);
            let key = if roll < 40 {
                self.written_key()
            } else if roll < 45 && !entries.is_empty() {
                // A key this same file already set: file order decides.
                self.rng.pick(&entries).map_or(0, |(key, _)| key)
            } else if roll < 98 {
                self.fresh_key()
            } else {
                self.extreme()
            };
            let value = self.value();
            entries.push((key, value));
        }
        entries.push((i32::MAX, i32::MIN));
        entries.push((i32::MIN, i32::MAX));
        entries.push((0, i32::MIN));
        let mut bytes = Vec::with_capacity(entries.len() * 8);
        for (key, value) in entries {
            self.written.push(key);
            bytes.extend_from_slice(&key.to_ne_bytes());
            bytes.extend_from_slice(&value.to_ne_bytes());
        }
        bytes
    }
}

/// Generates the workload described by `config`.
pub fn generate(config: &Config) -> Workload {
    let commands = config.commands.max(1);
    let mut generator = Generator {
        rng: Rng::new(config.seed),
        half_width: i32::try_from(commands / 2)
            .unwrap_or(i32::MAX)
            .clamp(1000, 1 << 28),
        written: Vec::new(),
        text: String::with_capacity(commands * 16),
    };
    let loads = config.loads.min(commands);
    // Command indexes at which a load happens, and where a full-range scan happens.
    let load_at: Vec<usize> = (0..loads)
        .map(|index| (index * commands) / loads.max(1) + commands / (2 * loads.max(1)))
        .collect();
    let full_scan_at = [commands / 3, (2 * commands) / 3, commands.saturating_sub(1)];
    let mut files = Vec::new();
    for index in 0..commands {
        if load_at.contains(&index) {
            let name = format!("{}load_{:02}.bin", config.file_prefix, files.len());
            let bytes = generator.load_file(config.load_pairs);
            let gap = generator.gap();
            let _ = writeln!(generator.text, "l{gap}\"{}{name}\"", config.path_prefix);
            files.push((name, bytes));
        } else if full_scan_at.contains(&index) {
            generator.line("r", &[i32::MIN, i32::MAX]);
        } else {
            match generator.rng.below(100) {
                0..=41 => generator.put(),
                42..=71 => generator.get(),
                72..=81 => generator.delete(),
                _ => generator.range(config.large_range_per_mille),
            }
        }
    }
    Workload {
        text: generator.text,
        files,
        path_prefix: config.path_prefix.clone(),
    }
}

/// What the shell must print for a workload.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The exact stdout.
    pub stdout: String,
    /// For each stdout line, the 1-based workload line that printed it.
    pub sources: Vec<usize>,
}

/// Interprets `text` on a `BTreeMap<i32, i32>`, independently of the shell, and returns the
/// output the shell must produce. `file` gives the bytes of the load file named in an `l` line.
/// Fails on anything the generator never writes (including `s`, whose output is engine-specific).
pub fn oracle(text: &str, file: &dyn Fn(&str) -> Option<Vec<u8>>) -> Result<Expected, String> {
    let mut map: BTreeMap<i32, i32> = BTreeMap::new();
    let mut expected = Expected {
        stdout: String::new(),
        sources: Vec::new(),
    };
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&op, args)) = words.split_first() else {
            continue;
        };
        let ints = |count: usize| -> Result<Vec<i32>, String> {
            if args.len() != count {
                return Err(format!(
                    "oracle: line {number}: wrong argument count: {line}"
                ));
            }
            args.iter()
                .map(|arg| {
                    arg.parse::<i32>()
                        .map_err(|_| format!("oracle: line {number}: bad integer: {line}"))
                })
                .collect()
        };
        match (op, ints(if op == "p" || op == "r" { 2 } else { 1 })) {
            ("p", Ok(kv)) => {
                map.insert(kv[0], kv[1]);
            }
            ("d", Ok(k)) => {
                map.remove(&k[0]);
            }
            ("g", Ok(k)) => {
                if let Some(value) = map.get(&k[0]) {
                    let _ = write!(expected.stdout, "{value}");
                }
                expected.stdout.push('\n');
                expected.sources.push(number);
            }
            ("r", Ok(bounds)) => {
                let (lower, upper) = (bounds[0], bounds[1]);
                if lower < upper {
                    let pairs: Vec<String> = map
                        .range(lower..upper)
                        .map(|(key, value)| format!("{key}:{value}"))
                        .collect();
                    expected.stdout.push_str(&pairs.join(" "));
                }
                expected.stdout.push('\n');
                expected.sources.push(number);
            }
            ("l", _) => {
                let rest = line.trim_start().strip_prefix('l').unwrap_or_default();
                let name = rest.trim().trim_matches('"');
                let bytes = file(name)
                    .ok_or_else(|| format!("oracle: line {number}: no load file {name}"))?;
                if bytes.len() % 8 != 0 {
                    return Err(format!("oracle: line {number}: odd-sized load file {name}"));
                }
                for pair in bytes.chunks(8) {
                    let key = i32::from_ne_bytes([pair[0], pair[1], pair[2], pair[3]]);
                    let value = i32::from_ne_bytes([pair[4], pair[5], pair[6], pair[7]]);
                    map.insert(key, value);
                }
            }
            (_, Err(message)) => return Err(message),
            _ => {
                return Err(format!(
                    "oracle: line {number}: unsupported command: {line}"
                ))
            }
        }
    }
    Ok(expected)
}

/// Counts of each command in a workload text (for reporting).
pub fn command_counts(text: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        if let Some(op) = line.split_whitespace().next() {
            *counts.entry(op.to_string()).or_insert(0) += 1;
        }
    }
    counts
}
