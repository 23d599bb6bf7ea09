//! How many levels the CLI opens an existing database with: never more than the database
//! already uses (so an application that created it with a small `level_count` can still
//! open it after `cairn compact`), never fewer (so tables at deep levels stay readable),
//! and `--levels N` to choose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/run.rs"]
mod run;

use run::{cairn, no_spawns, ok, TempDir};
use std::path::Path;

fn options(level_count: usize) -> cairn::Options {
    let mut options = cairn::Options::default();
    options.level_count = level_count;
    options
}

/// A database an application made with `level_count` levels: `key` -> `value`, flushed, and
/// compacted down to its last level when `compact` is set.
fn application_database(path: &Path, level_count: usize, compact: bool) {
    let _no_spawns = no_spawns();
    let db = cairn::Db::open(path, options(level_count)).unwrap();
    db.put("key", "value").unwrap();
    db.flush().unwrap();
    if compact {
        db.compact_range(None, None).unwrap();
    }
    db.close().unwrap();
}

/// The deepest level holding a table, by the MANIFEST.
fn deepest_level(path: &Path) -> Option<usize> {
    cairn::inspect::manifest::live_tables(path)
        .unwrap()
        .iter()
        .map(|live| live.table.level)
        .max()
}

#[test]
fn compact_keeps_a_database_openable_with_the_applications_level_count() {
    let dir = TempDir::new("levels-compact");
    let db = dir.path().join("db");
    application_database(&db, 3, false);
    ok(dir.path(), &["compact", "--db", "db"]);
    let reopened = cairn::Db::open(&db, options(3))
        .expect("the application reopens its database after `cairn compact`");
    assert_eq!(reopened.get("key").unwrap(), Some(b"value".to_vec()));
}

#[test]
fn read_and_write_commands_open_a_database_with_tables_past_level_six() {
    let dir = TempDir::new("levels-deep");
    let db = dir.path().join("db");
    application_database(&db, 12, true);
    let deepest = deepest_level(&db).unwrap();
    assert!(
        deepest >= 7,
        "the setup wants a table past the default's levels: {deepest}"
    );
    assert_eq!(ok(dir.path(), &["get", "--db", "db", "key"]), "value\n");
    assert_eq!(ok(dir.path(), &["scan", "--db", "db"]), "key\tvalue\n");
    ok(dir.path(), &["put", "--db", "db", "other", "v"]);
    ok(dir.path(), &["compact", "--db", "db"]);
    assert!(deepest_level(&db).unwrap() <= deepest);
    let reopened = cairn::Db::open(&db, options(deepest + 1)).unwrap();
    assert_eq!(reopened.get("other").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn levels_flag_chooses_more_and_refuses_too_few() {
    let dir = TempDir::new("levels-flag");
    let db = dir.path().join("db");
    application_database(&db, 3, true);
    assert_eq!(deepest_level(&db), Some(2));
    let run = cairn(dir.path(), &["compact", "--db", "db", "--levels", "2"], "");
    assert_eq!(run.code, Some(2));
    assert_eq!(
        run.stderr,
        "error: --levels 2 is too few for db: it holds tables at level 2, so it needs at least \
         3 levels\n"
    );
    ok(
        dir.path(),
        &["put", "--db", "db", "--levels", "5", "k2", "v2"],
    );
    ok(dir.path(), &["compact", "--db", "db", "--levels", "5"]);
    let deepest = deepest_level(&db).unwrap();
    assert!((2..5).contains(&deepest), "{deepest}");
    assert_eq!(ok(dir.path(), &["get", "--db", "db", "k2"]), "v2\n");
}

#[test]
fn a_new_database_gets_the_default_levels_unless_told() {
    let dir = TempDir::new("levels-new");
    ok(dir.path(), &["put", "--db", "db", "--create", "k", "v"]);
    ok(dir.path(), &["compact", "--db", "db", "--levels", "7"]);
    let run = cairn(
        dir.path(),
        &["shell", "--db", "fresh", "--levels", "4"],
        "put k v\n",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    cairn::Db::open(dir.path().join("fresh"), options(4)).unwrap();
    let run = cairn(
        dir.path(),
        &["get", "--db", "db", "--levels", "33", "k"],
        "",
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}
