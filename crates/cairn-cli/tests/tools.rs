//! The inspection tools on a small database: `dump-table`, `dump-wal`, `dump-manifest`,
//! `verify` (also on a damaged copy), `sizes` and `checkpoint`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/run.rs"]
mod run;

use run::{cairn, names, ok, TempDir};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// A database with several tables (a 4 KiB memtable) and a WAL holding the last writes.
fn small_database(dir: &Path) {
    let mut input = String::new();
    for index in 0..400 {
        writeln!(input, "put key{index:04} value-{index}-{}", "x".repeat(40)).unwrap();
    }
    input.push_str("del key0001\nput back\\\\slash v\n");
    let run = cairn(dir, &["shell", "--db", "db", "--memtable-kb", "4"], &input);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

fn files(dir: &Path, suffix: &str) -> Vec<String> {
    names(&dir.join("db"))
        .into_iter()
        .filter(|name| name.ends_with(suffix))
        .map(|name| format!("db/{name}"))
        .collect()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{error}: {text}"))
}

#[test]
fn dump_table_lists_blocks_and_entries() {
    let dir = TempDir::new("tools-table");
    small_database(dir.path());
    let tables = files(dir.path(), ".sst");
    assert!(!tables.is_empty());
    let mut entries = 0;
    for table in &tables {
        let text = ok(dir.path(), &["dump-table", table]);
        assert!(text.starts_with(&format!("table {table}: ")), "{text}");
        assert!(text.contains("\nblock 0: offset 0 size "), "{text}");
        let value = json(&ok(dir.path(), &["dump-table", table, "--json"]));
        let in_blocks: usize = value["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|block| block["entries"].as_array().unwrap().len())
            .sum();
        assert_eq!(in_blocks as u64, value["entry_count"].as_u64().unwrap());
        entries += in_blocks;
    }
    assert!(entries >= 100, "{entries}");
    let all: String = tables
        .iter()
        .map(|table| ok(dir.path(), &["dump-table", table]))
        .collect();
    assert!(all.contains("  key0002 @"), "{all}");
    assert!(all.contains(&format!(" put value-2-{}\n", "x".repeat(40))));
}

#[test]
fn dump_wal_and_dump_manifest() {
    let dir = TempDir::new("tools-wal");
    small_database(dir.path());
    // A second session with the default (large) memtable: its writes stay in its WAL, which
    // the shell leaves behind. The first session's last writes may sit in a WAL or in a
    // table, depending on where its 4 KiB memtable happened to switch, so the checks below
    // rest on these writes only.
    let run = cairn(
        dir.path(),
        &["shell", "--db", "db"],
        "del key0001\nput back\\\\slash v\n",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut wal_text = String::new();
    for wal in files(dir.path(), ".log") {
        wal_text.push_str(&ok(dir.path(), &["dump-wal", &wal]));
        let value = json(&ok(dir.path(), &["dump-wal", &wal, "--json"]));
        assert!(value["records"].is_array());
    }
    assert!(wal_text.contains("  back\\\\slash @"), "{wal_text}");
    assert!(wal_text.contains("  key0001 @"), "{wal_text}");
    assert!(wal_text.contains(" delete\n"), "{wal_text}");

    let text = ok(dir.path(), &["dump-manifest", "db"]);
    assert!(text.starts_with("manifest db/MANIFEST-"), "{text}");
    assert!(text.contains("format version "), "{text}");
    assert!(text.contains("\n  add L"), "{text}");
    let value = json(&ok(dir.path(), &["dump-manifest", "db", "--json"]));
    let edits = value["edits"].as_array().unwrap();
    assert!(edits[0]["format_version"].is_u64());
    let added: usize = edits
        .iter()
        .map(|edit| edit["added"].as_array().unwrap().len())
        .sum();
    assert!(added >= 1);
}

#[test]
fn verify_passes_and_then_names_the_damage() {
    let dir = TempDir::new("tools-verify");
    small_database(dir.path());
    let text = ok(dir.path(), &["verify", "db"]);
    assert!(
        text.contains("\nok db/") || text.starts_with("ok db/"),
        "{text}"
    );
    assert!(text.ends_with(": all ok\n"), "{text}");
    assert_eq!(
        json(&ok(dir.path(), &["verify", "db", "--json"]))["ok"],
        true
    );

    let table = files(dir.path(), ".sst").remove(0);
    let path = dir.path().join(&table);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let run = cairn(dir.path(), &["verify", "db"], "");
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "FAILED {table}: corruption in {table} at offset 0: block checksum mismatch"
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with(" files: 1 damaged\n"),
        "{}",
        run.stdout
    );
    let report = json(&cairn(dir.path(), &["verify", "db", "--json"], "").stdout);
    assert_eq!(report["ok"], false);
}

/// A damaged `CURRENT` is damage for `verify` to report (exit status 1, a FAILED line), not
/// a directory that is "not a cairn database"; so is a missing one beside a MANIFEST.
#[test]
fn verify_reports_a_damaged_or_missing_current() {
    let dir = TempDir::new("tools-verify-current");
    small_database(dir.path());
    std::fs::write(dir.path().join("db/CURRENT"), "xx").unwrap();
    let run = cairn(dir.path(), &["verify", "db"], "");
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("FAILED db/CURRENT: "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.ends_with(" damaged\n"), "{}", run.stdout);

    std::fs::remove_file(dir.path().join("db/CURRENT")).unwrap();
    let run = cairn(dir.path(), &["verify", "db"], "");
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("FAILED db/CURRENT: missing"),
        "{}",
        run.stdout
    );
    let report = json(&cairn(dir.path(), &["verify", "db", "--json"], "").stdout);
    assert_eq!(report["ok"], false);

    // Still refused: a directory with neither CURRENT nor a MANIFEST.
    std::fs::create_dir(dir.path().join("other")).unwrap();
    std::fs::write(dir.path().join("other/notes.txt"), "x").unwrap();
    let run = cairn(dir.path(), &["verify", "other"], "");
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .starts_with("error: other is not a cairn database"),
        "{}",
        run.stderr
    );
}

#[test]
fn sizes_of_ranges() {
    let dir = TempDir::new("tools-sizes");
    small_database(dir.path());
    let all = json(&ok(dir.path(), &["sizes", "db", "--json"]));
    let total = all["total_bytes"].as_u64().unwrap();
    assert!(total > 0);
    let half = json(&ok(
        dir.path(),
        &["sizes", "db", "key0000", "key0200", "--json"],
    ));
    let part = half["total_bytes"].as_u64().unwrap();
    assert!(part > 0 && part < total, "{part} of {total}");
    let none = json(&ok(dir.path(), &["sizes", "db", "zzz", "--json"]));
    assert_eq!(none["total_bytes"], 0);
    let text = ok(dir.path(), &["sizes", "db"]);
    assert!(
        text.ends_with("(approximate; memtables and WALs not counted)\n"),
        "{text}"
    );
}

#[test]
fn checkpoint_opens_as_a_database() {
    let dir = TempDir::new("tools-checkpoint");
    small_database(dir.path());
    let text = ok(dir.path(), &["checkpoint", "db", "copy"]);
    assert!(
        text.starts_with("checkpoint of db written to copy ("),
        "{text}"
    );
    assert!(ok(dir.path(), &["verify", "copy"]).ends_with(": all ok\n"));
    assert_eq!(
        ok(dir.path(), &["get", "--db", "copy", "key0399"]),
        format!("value-399-{}\n", "x".repeat(40))
    );
    assert_eq!(
        ok(dir.path(), &["get", "--db", "copy", "back\\\\slash"]),
        "v\n"
    );
    assert_eq!(
        ok(dir.path(), &["scan", "--db", "copy"]),
        ok(dir.path(), &["scan", "--db", "db"])
    );
    let run = cairn(dir.path(), &["checkpoint", "db", "copy"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(run.stderr, "error: copy already exists and is not empty\n");
}

/// A checkpoint that fails part way leaves no CURRENT in the destination, so the partial copy
/// never opens as a database that lacks some of the source's files.
#[test]
fn a_checkpoint_that_fails_part_way_writes_no_current() {
    let dir = TempDir::new("tools-checkpoint-fails");
    small_database(dir.path());
    let db = dir.path().join("db");
    // Unreadable WALs: directories with WAL names (a mode of 000 would not stop root).
    let bad: Vec<String> = (990..1000)
        .map(|number| format!("000{number}.log"))
        .collect();
    for name in &bad {
        std::fs::create_dir(db.join(name)).unwrap();
    }
    // Rewritten last, so a directory listed newest first shows CURRENT first.
    std::fs::copy(db.join("CURRENT"), db.join("CURRENT.new")).unwrap();
    std::fs::rename(db.join("CURRENT.new"), db.join("CURRENT")).unwrap();
    // Keep only bad WALs listed after CURRENT, where a copy in listing order meets them
    // after it has copied CURRENT (if the listing puts any there).
    let listed: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let current_at = listed.iter().position(|name| name == "CURRENT").unwrap();
    let before: Vec<&String> = listed[..current_at]
        .iter()
        .filter(|name| bad.contains(name))
        .collect();
    if before.len() < bad.len() {
        for name in before {
            std::fs::remove_dir(db.join(name)).unwrap();
        }
    }
    let run = cairn(dir.path(), &["checkpoint", "db", "copy"], "");
    assert_eq!(run.code, Some(2), "{}", run.stdout);
    assert!(
        run.stderr.starts_with("error: cannot copy db/000"),
        "{}",
        run.stderr
    );
    assert!(
        !dir.path().join("copy/CURRENT").exists(),
        "a partial copy has a CURRENT: {:?}",
        names(&dir.path().join("copy"))
    );
    let run = cairn(dir.path(), &["get", "--db", "copy", "key0399"], "");
    assert_eq!(run.code, Some(2), "{}", run.stdout);
}

/// Names, sizes and modification times of every file in `dir`.
fn snapshot_of(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let metadata = entry.metadata().unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                metadata.len(),
                metadata.modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// `cairn get`, `scan` and `stats` read a database another process holds open (its LOCK
/// taken, writes still only in its WAL) and change no file.
#[test]
fn read_commands_work_beside_a_live_writer_and_change_no_file() {
    let dir = TempDir::new("tools-live-writer");
    small_database(dir.path());
    let db_path = dir.path().join("db");
    let writer = cairn::Db::open(&db_path, cairn::Options::default()).unwrap();
    // Settle the writer's own background work first, so only a reader could change files.
    writer.compact_range(None, None).unwrap();
    writer.put("live-key", "live-value").unwrap();
    let before = snapshot_of(&db_path);
    assert_eq!(
        ok(dir.path(), &["get", "--db", "db", "live-key"]).trim_end(),
        "live-value"
    );
    assert_eq!(
        ok(dir.path(), &["get", "--db", "db", "key0002"]).trim_end(),
        format!("value-2-{}", "x".repeat(40))
    );
    let scanned = ok(
        dir.path(),
        &["scan", "--db", "db", "--from", "live", "--limit", "1"],
    );
    assert_eq!(scanned.trim_end(), "live-key\tlive-value");
    ok(dir.path(), &["stats", "--db", "db"]);
    assert_eq!(
        snapshot_of(&db_path),
        before,
        "a read command changed the directory"
    );
    drop(writer);
}
