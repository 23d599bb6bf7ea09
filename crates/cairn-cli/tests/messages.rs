//! Every bad-input case of the CLI, with the exact message it prints.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/run.rs"]
mod run;

use run::{cairn, cairn_with_closed_stdout, names, ok, TempDir};

#[test]
fn read_commands_on_a_missing_or_empty_directory_leave_nothing_behind() {
    let dir = TempDir::new("msg-missing");
    let run = cairn(dir.path(), &["get", "--db", "nope", "k"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr,
        "error: no database at nope (the directory does not exist)\n"
    );
    assert!(!dir.path().join("nope").exists());

    std::fs::create_dir(dir.path().join("empty")).unwrap();
    for args in [
        &["get", "--db", "empty", "k"][..],
        &["scan", "--db", "empty"],
        &["stats", "--db", "empty"],
        &["delete", "--db", "empty", "k"],
        &["compact", "--db", "empty"],
        &["verify", "empty"],
        &["dump-manifest", "empty"],
        &["sizes", "empty"],
    ] {
        let run = cairn(dir.path(), args, "");
        assert_eq!(run.code, Some(2), "{args:?}");
        assert_eq!(
            run.stderr, "error: no database at empty (the directory is empty)\n",
            "{args:?}"
        );
        // No stray LOCK (or anything else) in the directory.
        assert!(names(&dir.path().join("empty")).is_empty(), "{args:?}");
    }
}

#[test]
fn put_needs_create_for_a_new_database() {
    let dir = TempDir::new("msg-create");
    let run = cairn(dir.path(), &["put", "--db", "typo", "k", "v"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr,
        "error: no database at typo (the directory does not exist); pass --create to create one\n"
    );
    assert!(!dir.path().join("typo").exists());
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let run = cairn(dir.path(), &["put", "--db", "empty", "k", "v"], "");
    assert_eq!(
        run.stderr,
        "error: no database at empty (the directory is empty); pass --create to create one\n"
    );
    assert!(names(&dir.path().join("empty")).is_empty());
    ok(dir.path(), &["put", "--db", "db", "--create", "k", "v"]);
    // Once it exists, --create is not needed.
    ok(dir.path(), &["put", "--db", "db", "k2", "v2"]);
    assert_eq!(ok(dir.path(), &["get", "--db", "db", "k2"]), "v2\n");
}

#[test]
fn a_foreign_directory_is_not_a_cairn_database() {
    let dir = TempDir::new("msg-foreign");
    let foreign = dir.path().join("photos");
    std::fs::create_dir(&foreign).unwrap();
    for name in ["a.jpg", "b.jpg", "c.jpg", "d.jpg"] {
        std::fs::write(foreign.join(name), b"jpeg").unwrap();
    }
    let expected =
        "error: photos is not a cairn database (no CURRENT file; it holds a.jpg, b.jpg, c.jpg, …)\n";
    for args in [
        &["get", "--db", "photos", "k"][..],
        &["put", "--db", "photos", "--create", "k", "v"],
        &["shell", "--db", "photos"],
    ] {
        let run = cairn(dir.path(), args, "g 1\n");
        assert_eq!(run.code, Some(2), "{args:?}");
        assert_eq!(run.stderr, expected, "{args:?}");
    }
    // `verify` also takes a lone MANIFEST (a lost CURRENT is damage it reports).
    let run = cairn(dir.path(), &["verify", "photos"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr,
        "error: photos is not a cairn database (no CURRENT file or MANIFEST; it holds a.jpg, \
         b.jpg, c.jpg, …)\n"
    );
    assert_eq!(names(&foreign).len(), 4, "nothing was written");

    // A LevelDB-style directory: CURRENT names a MANIFEST that holds no cairn record.
    let other = dir.path().join("leveldb");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("CURRENT"), "MANIFEST-000002\n").unwrap();
    std::fs::write(other.join("MANIFEST-000002"), [0x5a_u8; 100]).unwrap();
    let run = cairn(dir.path(), &["get", "--db", "leveldb", "k"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr,
        "error: leveldb is not a cairn database (leveldb/MANIFEST-000002 holds no cairn \
         MANIFEST record)\n"
    );
    std::fs::write(other.join("CURRENT"), "garbage").unwrap();
    let run = cairn(dir.path(), &["get", "--db", "leveldb", "k"], "");
    assert_eq!(
        run.stderr,
        "error: leveldb is not a cairn database (its CURRENT file does not name a cairn \
         MANIFEST)\n"
    );
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let run = cairn(dir.path(), &["get", "--db", "file", "k"], "");
    assert_eq!(
        run.stderr,
        "error: file is not a cairn database (it is a file, not a directory)\n"
    );
}

#[test]
fn the_shell_creates_a_database_in_a_missing_or_empty_directory() {
    let dir = TempDir::new("msg-shell");
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    for db in ["new", "empty"] {
        let run = cairn(dir.path(), &["shell", "--db", db], "p 1 2\ng 1\n");
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert_eq!(run.stdout, "2\n");
    }
}

#[test]
fn load_file_hints_and_trailing_bytes() {
    let dir = TempDir::new("msg-load");
    std::fs::write(
        dir.path().join("w.txt"),
        "l missing.bin\nl odd.bin\nr -5 5\n",
    )
    .unwrap();
    let mut odd = Vec::new();
    odd.extend_from_slice(&1i32.to_ne_bytes());
    odd.extend_from_slice(&10i32.to_ne_bytes());
    odd.extend_from_slice(&[7, 7, 7]);
    std::fs::write(dir.path().join("odd.bin"), odd).unwrap();
    let run = cairn(dir.path(), &["shell", "--db", "db", "--file", "w.txt"], "");
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stdout, "1:10\n");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines[0],
        "error: line 1: cannot open load file missing.bin: No such file or directory (os error \
         2) (relative paths resolve against the current directory, which holds the workload \
         file)"
    );
    assert_eq!(
        lines[1],
        "warning: line 2: load file odd.bin is 11 bytes, not a multiple of 8 (pairs of 32-bit \
         integers): loaded 1 pairs and ignored the last 3 bytes"
    );
    assert!(lines[2].starts_with("cairn shell: 3 commands (1 failed) in "));
}

#[test]
fn text_output_escapes_backslashes_and_round_trips() {
    let dir = TempDir::new("msg-text");
    // Two keys that printed alike before backslashes were escaped.
    ok(
        dir.path(),
        &["put", "--db", "db", "--create", "a\\\\x41", "one"],
    );
    ok(dir.path(), &["put", "--db", "db", "aA", "two\\ttab"]);
    let scan = ok(dir.path(), &["scan", "--db", "db"]);
    assert_eq!(scan, "aA\ttwo\\ttab\na\\\\x41\tone\n");
    // Each printed key, given back as an argument, names the same key.
    for line in scan.lines() {
        let (key, value) = line.split_once('\t').unwrap();
        assert_eq!(
            ok(dir.path(), &["get", "--db", "db", key]),
            format!("{value}\n")
        );
    }
    let run = cairn(dir.path(), &["get", "--db", "db", "bad\\q"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr,
        "error: unknown escape \\q (expected \\\\, \\\", \\t, \\n, \\r, \\0 or \\xHH) in: bad\\q\n"
    );
    // The shell prints the same escapes.
    let run = cairn(
        dir.path(),
        &["shell", "--db", "db"],
        "get a\\\\x41\nscan aA b\n",
    );
    assert_eq!(run.stdout, "one\naA two\\ttab\na\\\\x41 one\n\n");
}

/// `cairn shell --db D < w.txt | head -1`: once the reader of the output is gone, the lines
/// left (writes among them) are not run, and the shell says so and fails rather than exit 0.
#[test]
fn a_closed_output_stops_the_shell_with_an_error() {
    let dir = TempDir::new("msg-closed-output");
    // Enough output (2 bytes a `get`) to fill the shell's 64 KiB output buffer, then a write.
    let mut input = String::from("put k v\n");
    input.push_str(&"get k\n".repeat(40_000));
    input.push_str("put last v\n");
    let run = cairn_with_closed_stdout(dir.path(), &["shell", "--db", "db"], &input);
    assert!(
        run.stderr.starts_with("error: output closed at line ")
            && run.stderr.ends_with("; the remaining lines were not run\n"),
        "{}",
        run.stderr
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    // The write after the failure was indeed not run.
    assert_eq!(
        cairn(dir.path(), &["get", "--db", "db", "last"], "").code,
        Some(1)
    );
}

/// A read-only one-shot command whose reader went away (`cairn scan … | head -0`) stops
/// quietly with exit status 0: it skipped no work.
#[test]
fn a_closed_output_ends_a_read_command_quietly() {
    let dir = TempDir::new("msg-closed-read");
    let mut input = String::new();
    for index in 0..5_000 {
        input.push_str(&format!("put key{index:05} {}\n", "v".repeat(20)));
    }
    let run = cairn(dir.path(), &["shell", "--db", "db"], &input);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let run = cairn_with_closed_stdout(dir.path(), &["scan", "--db", "db"], "");
    assert_eq!((run.code, run.stderr.as_str()), (Some(0), ""));
}
