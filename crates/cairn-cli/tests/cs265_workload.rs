//! End-to-end tests of `cairn shell`: a generated CS265 workload of 100,000 commands run by the
//! real binary must print exactly what an independent `BTreeMap` oracle predicts.
//!
//! Environment overrides for the main test: `CAIRN_CS265_SEED` (default 265) and
//! `CAIRN_CS265_COMMANDS` (default 100000). On a mismatch the workload directory is kept and its
//! path printed, together with the first differing output line and the command that printed it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/workload.rs"]
mod workload;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory under the system temp dir, removed by `remove` (kept on failure).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|time| time.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("cairn-cli-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Runs `cairn <args>` in `cwd` with `stdin` fed from a separate thread.
fn cairn(args: &[&str], cwd: &Path, stdin: Vec<u8>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cairn");
    let mut input = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        // The shell may exit early on a fatal error; a broken pipe is then expected.
        let _ = input.write_all(&stdin);
    });
    let output = child.wait_with_output().expect("wait for cairn");
    feeder.join().unwrap();
    output
}

fn write_workload(dir: &Path, workload: &workload::Workload) {
    std::fs::write(dir.join("workload.txt"), &workload.text).unwrap();
    for (name, bytes) in &workload.files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

fn expected_for(workload: &workload::Workload) -> workload::Expected {
    workload::oracle(&workload.text, &|name| {
        workload.file(name).map(<[u8]>::to_vec)
    })
    .expect("the oracle understands every generated line")
}

fn shorten(line: &str) -> String {
    if line.len() <= 300 {
        line.to_string()
    } else {
        let cut = (0..=300)
            .rev()
            .find(|&i| line.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}… ({} bytes)", &line[..cut], line.len())
    }
}

/// Panics with the first differing line unless `actual` equals `expected` byte for byte.
fn assert_same_output(
    actual: &[u8],
    expected: &workload::Expected,
    workload_text: &str,
    context: &str,
) {
    if actual == expected.stdout.as_bytes() {
        return;
    }
    let actual = String::from_utf8_lossy(actual);
    let workload_lines: Vec<&str> = workload_text.lines().collect();
    let mut actual_lines = actual.split('\n');
    for (index, expected_line) in expected.stdout.split('\n').enumerate() {
        let actual_line = actual_lines.next();
        if actual_line != Some(expected_line) {
            let source = expected.sources.get(index).copied();
            let command = source
                .and_then(|line| workload_lines.get(line - 1))
                .copied()
                .unwrap_or("<end of workload>");
            panic!(
                "{context}\nstdout differs from the oracle at output line {}, printed by \
                 workload line {} `{}`:\n  expected: {}\n  actual:   {}",
                index + 1,
                source.map_or("?".to_string(), |line| line.to_string()),
                command.trim(),
                shorten(expected_line),
                actual_line.map_or("<missing>".to_string(), shorten),
            );
        }
    }
    panic!(
        "{context}\nstdout has extra output after the expected {} lines",
        expected.sources.len()
    );
}

#[test]
fn generated_workload_matches_oracle() {
    let seed = env_or("CAIRN_CS265_SEED", 265u64);
    let commands = env_or("CAIRN_CS265_COMMANDS", 100_000usize);
    let workload = workload::generate(&workload::Config::new(seed, commands));
    let counts = workload::command_counts(&workload.text);
    assert!(counts.values().sum::<usize>() >= commands, "{counts:?}");
    assert!(workload.files.len() >= 3);
    let expected = expected_for(&workload);

    let dir = TempDir::new("cs265");
    write_workload(dir.path(), &workload);
    let db = dir.path().join("db");
    // Stdin input: relative `l` paths resolve against the working directory.
    let output = cairn(
        &["shell", "--db", db.to_str().unwrap(), "--memtable-kb", "32"],
        dir.path(),
        workload.text.clone().into_bytes(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = format!(
        "seed {seed}, {commands} commands {counts:?}; workload kept in {}\nstderr: {}",
        dir.path().display(),
        shorten(&stderr)
    );
    assert!(
        output.status.success(),
        "exit status {}\n{context}",
        output.status
    );
    assert!(!stderr.contains("error:"), "{context}");
    assert!(
        stderr.contains(&format!(
            "cairn shell: {} commands (0 failed)",
            counts.values().sum::<usize>()
        )),
        "{context}"
    );
    assert_same_output(&output.stdout, &expected, &workload.text, &context);
    // The small memtable must have pushed data through flushes into compacted levels, or
    // the run proved less than it claims.
    let stats = cairn(
        &["stats", "--db", db.to_str().unwrap()],
        dir.path(),
        Vec::new(),
    );
    let stats = String::from_utf8_lossy(&stats.stdout).to_string();
    let deeper_files: usize = stats
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                // level, files, bytes, score, runs, written bytes
                [level, files, _, _, _, _] if level.parse::<usize>().is_ok_and(|l| l >= 1) => {
                    files.parse::<usize>().ok()
                }
                _ => None,
            }
        })
        .sum();
    assert!(
        deeper_files > 0,
        "no compacted files after the workload:\n{stats}"
    );
    dir.remove();
}

#[test]
fn file_input_resolves_loads_against_the_workload_directory() {
    let mut config = workload::Config::new(7, 5_000);
    config.file_prefix = "small_".to_string();
    let workload = workload::generate(&config);
    let expected = expected_for(&workload);
    let dir = TempDir::new("cs265-file");
    let workload_dir = dir.path().join("w");
    std::fs::create_dir_all(&workload_dir).unwrap();
    write_workload(&workload_dir, &workload);
    // Run from `dir`: the load files are in `w/`, not in the working directory.
    let output = cairn(
        &[
            "shell",
            "--db",
            "db",
            "--memtable-mb",
            "1",
            "--file",
            "w/workload.txt",
        ],
        dir.path(),
        Vec::new(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    assert_same_output(&output.stdout, &expected, &workload.text, &stderr);
    dir.remove();
}

#[test]
fn malformed_lines_are_reported_and_skipped() {
    let dir = TempDir::new("cs265-bad");
    std::fs::write(dir.path().join("odd.bin"), [0u8; 12]).unwrap();
    let mut good = Vec::new();
    for (key, value) in [(5, 50), (i32::MIN, i32::MIN)] {
        good.extend_from_slice(&i32::to_ne_bytes(key));
        good.extend_from_slice(&i32::to_ne_bytes(value));
    }
    std::fs::write(dir.path().join("good file.bin"), good).unwrap();
    let input = "p 1 10\n\
                 p 2\n\
                 g 1\n\
                 x 5\n\
                 p 3 99999999999999999999\n\
                 l \"odd.bin\"\n\
                 r 0 10\n\
                 l \"missing.bin\"\n\
                 d\n\
                 g 3\n\
                 \x20 \t\n\
                 p 4 40\n\
                 l \"good file.bin\"\n\
                 r -2147483648 2147483647\n\
                 s extra\n";
    let output = cairn(
        &["shell", "--db", "db"],
        dir.path(),
        input.as_bytes().to_vec(),
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        stdout, "10\n0:0 1:10\n\n-2147483648:-2147483648 0:0 1:10 4:40 5:50\n",
        "stderr: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    let expected_starts = [
        "error: line 2: expected 2 integers after 'p', got 1 argument: \"2\"",
        "error: line 4: unknown command \"x\"",
        "error: line 5: expected 2 integers after 'p', got \"3 99999999999999999999\": \
         99999999999999999999 is outside the 64-bit range",
        "warning: line 6: load file odd.bin is 12 bytes, not a multiple of 8",
        "error: line 8: cannot open load file missing.bin",
        "error: line 9: expected 1 integer after 'd', got nothing",
        "error: line 15: expected a pair limit (a count) after 's', got \"extra\"",
        "cairn shell: 14 commands (6 failed) in ",
    ];
    assert_eq!(lines.len(), expected_starts.len(), "stderr: {stderr}");
    for (line, start) in lines.iter().zip(expected_starts) {
        assert!(line.starts_with(start), "expected `{start}…`, got `{line}`");
    }
    assert!(
        lines[3].ends_with("loaded 1 pairs and ignored the last 4 bytes"),
        "{}",
        lines[3]
    );
    assert!(lines[7].ends_with("commands/s"), "{}", lines[7]);
    dir.remove();
}

#[test]
fn fatal_errors_exit_with_status_2() {
    let dir = TempDir::new("cs265-fatal");
    let output = cairn(
        &["shell", "--db", "db", "--file", "no-such-workload.txt"],
        dir.path(),
        Vec::new(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: cannot open no-such-workload.txt"),
        "{stderr}"
    );

    let output = cairn(
        &["shell", "--db", "db", "--memtable-mb", "0"],
        dir.path(),
        Vec::new(),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("error:"));

    let output = cairn(&["get", "--db", "absent-db", "k"], dir.path(), Vec::new());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");

    let output = cairn(
        &["put", "--db", "db", "--hex", "zz", "00"],
        dir.path(),
        Vec::new(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: \"zz\" is not hex"), "{stderr}");
    dir.remove();
}

#[test]
fn get_of_an_absent_key_exits_with_status_1() {
    let dir = TempDir::new("cs265-absent");
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let output = cairn(
        &["put", "--db", "db", "--create", "other", "v"],
        dir.path(),
        Vec::new(),
    );
    assert!(output.status.success());
    let output = cairn(&["get", "--db", "db", "nope"], dir.path(), Vec::new());
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "key not found: nope\n"
    );
    dir.remove();
}

/// Needs a `Db` that persists between processes (the temporary in-memory stub forgets
/// everything on exit).
#[test]
fn one_off_commands_round_trip() {
    let dir = TempDir::new("cs265-oneoff");
    let run = |args: &[&str]| {
        let output = cairn(args, dir.path(), Vec::new());
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    run(&["put", "--db", "db", "--create", "b", "2"]);
    run(&["put", "--db", "db", "a", "1"]);
    run(&["put", "--db", "db", "c", "3"]);
    run(&["put", "--db", "db", "--hex", "ff00", "0a"]);
    assert_eq!(run(&["get", "--db", "db", "a"]), "1\n");
    run(&["delete", "--db", "db", "c"]);
    assert_eq!(
        run(&["scan", "--db", "db"]),
        "a\t1\nb\t2\n\\xff\\x00\t\\n\n"
    );
    assert_eq!(
        run(&[
            "scan",
            "--db",
            "db",
            "--from",
            "a",
            "--to",
            "c",
            "--reverse"
        ]),
        "b\t2\na\t1\n"
    );
    assert_eq!(run(&["scan", "--db", "db", "--limit", "1"]), "a\t1\n");
    assert_eq!(run(&["get", "--db", "db", "--hex", "ff00"]), "0a\n");
    run(&["compact", "--db", "db"]);
    assert!(!run(&["stats", "--db", "db"]).is_empty());
    dir.remove();
}

/// The bundled demo workload (whose `l` paths are relative to the repository root) still
/// matches its bundled expected output, and the oracle agrees; run from the repository root
/// both from stdin and with `--file`.
#[test]
fn bundled_demo_matches_its_expected_output() {
    if cfg!(target_endian = "big") {
        return; // the bundled .bin files are little-endian
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let demo = root.join("crates/cairn-cli/workloads/demo.txt");
    let text = std::fs::read_to_string(&demo).unwrap();
    let expected_stdout =
        std::fs::read_to_string(root.join("crates/cairn-cli/workloads/demo.expected.txt")).unwrap();
    let expected = workload::oracle(&text, &|path| std::fs::read(root.join(path)).ok())
        .expect("oracle runs the demo");
    assert!(
        expected.stdout == expected_stdout,
        "demo.expected.txt is stale"
    );
    let dir = TempDir::new("cs265-demo");
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let from_stdin = cairn(
        &["shell", "--db", db, "--memtable-mb", "1"],
        &root,
        text.clone().into_bytes(),
    );
    let stderr = String::from_utf8_lossy(&from_stdin.stderr).to_string();
    assert!(from_stdin.status.success(), "{stderr}");
    assert_same_output(&from_stdin.stdout, &expected, &text, &stderr);
    let db = dir.path().join("db2");
    let from_file = cairn(
        &[
            "shell",
            "--db",
            db.to_str().unwrap(),
            "--file",
            "crates/cairn-cli/workloads/demo.txt",
        ],
        &root,
        Vec::new(),
    );
    let stderr = String::from_utf8_lossy(&from_file.stderr).to_string();
    assert!(from_file.status.success(), "{stderr}");
    assert_same_output(&from_file.stdout, &expected, &text, &stderr);
    dir.remove();
}
