//! Forced interleavings of a Membuffer in-place update with the reads that may want the
//! version it replaces (`membuffer::gate`): a read holding a read point between the old and
//! the new version's sequence, a read that starts while the update is not yet visible, a
//! snapshot and an iterator. An update that dropped the old version unsafely makes the read
//! return the version below it (`v0`).

use super::RACE_HOOK;
use crate::db::Db;
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

const KEY: &[u8] = b"key";

/// A database whose Membuffer takes writes after a 16-key sample, with no drainer (nothing
/// moves a record to the memtable behind the test's back), holding `KEY` = `v0` in the
/// memtable and `v1` in a Membuffer record: the next put of `KEY` updates that record in
/// place.
fn db_with_a_record() -> Arc<Db> {
    let db = super::small_membuffer_db();
    db.put(KEY, b"v0").unwrap();
    for index in 0..32u32 {
        db.put(format!("sample{index:04}"), b"x").unwrap();
    }
    let writes_before = membuffer_writes(&db);
    db.put(KEY, b"v1").unwrap();
    assert_eq!(
        membuffer_writes(&db),
        writes_before + 1,
        "v1 did not go to the Membuffer"
    );
    Arc::new(db)
}

fn counter(db: &Db, name: &str) -> u64 {
    db.stats()
        .counters
        .iter()
        .find(|(counter, _)| *counter == name)
        .map_or(0, |(_, value)| *value)
}

fn membuffer_writes(db: &Db) -> u64 {
    counter(db, "membuffer_writes")
}

/// Starts a put of `KEY` = `v2` on another thread and returns once it has rewritten the
/// record in place, dropping v1, but is not yet visible: it stays there until counter
/// `released_by` grows (the reader noticed), or for 20 s.
fn update_paused_until(db: &Arc<Db>, released_by: &'static str) -> std::thread::JoinHandle<()> {
    let (inserted, inserted_here) = channel();
    let writer = {
        let db = Arc::clone(db);
        std::thread::spawn(move || {
            let watcher = Arc::clone(&db);
            RACE_HOOK.with(|cell| {
                *cell.borrow_mut() = Some(Box::new(move |at| {
                    if at == "write: inserted" {
                        let _ = inserted.send(());
                        let deadline = std::time::Instant::now() + Duration::from_secs(20);
                        while counter(&watcher, released_by) == 0
                            && std::time::Instant::now() < deadline
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }));
            });
            db.put(KEY, b"v2").unwrap();
            RACE_HOOK.with(|cell| cell.borrow_mut().take());
        })
    };
    inserted_here
        .recv_timeout(Duration::from_secs(20))
        .expect("the writer never inserted");
    assert_eq!(counter(db, "membuffer_dropped_versions"), 1);
    writer
}

/// Runs `read` on a thread that stops at race point `point` until the main thread has
/// written `KEY` = `v2`; returns what `read` returned.
fn read_across_an_update(
    db: &Arc<Db>,
    point: &'static str,
    read: impl FnOnce(&Db) -> Option<Vec<u8>> + Send + 'static,
) -> Option<Vec<u8>> {
    let (reached, reached_here) = channel();
    let (release, released) = channel::<()>();
    let reader = {
        let db = Arc::clone(db);
        std::thread::spawn(move || {
            RACE_HOOK.with(|cell| {
                *cell.borrow_mut() = Some(Box::new(move |at| {
                    if at == point {
                        let _ = reached.send(());
                        let _ = released.recv_timeout(Duration::from_secs(20));
                    }
                }));
            });
            let value = read(&db);
            RACE_HOOK.with(|cell| cell.borrow_mut().take());
            value
        })
    };
    reached_here
        .recv_timeout(Duration::from_secs(20))
        .expect("the reader never reached its race point");
    db.put(KEY, b"v2").unwrap();
    release.send(()).unwrap();
    reader.join().unwrap()
}

/// A `get` holding a read point between v1 and v2 must answer v1 (the state at its read
/// point) or v2 (a later point it may move to): never v0, which it would find in the
/// memtable if the update dropped v1 and the read did not notice.
#[test]
fn a_get_holding_a_read_point_across_an_in_place_update_never_reads_below_it() {
    let db = db_with_a_record();
    let value = read_across_an_update(&db, "get: read point", |db| db.get(KEY).unwrap());
    assert!(
        matches!(value.as_deref(), Some(b"v1" | b"v2")),
        "got {:?}",
        value.map(String::from_utf8)
    );
    assert_eq!(db.get(KEY).unwrap().as_deref(), Some(&b"v2"[..]));
}

/// The same for `get_pinned` (its own lookup path) and `multi_get`.
#[test]
fn pinned_and_multi_gets_across_an_in_place_update_never_read_below_it() {
    let db = db_with_a_record();
    let value = read_across_an_update(&db, "get: read point", |db| {
        db.get_pinned(KEY).unwrap().map(|value| value.to_vec())
    });
    assert!(
        matches!(value.as_deref(), Some(b"v1" | b"v2")),
        "got {:?}",
        value.map(String::from_utf8)
    );
    let db = db_with_a_record();
    let value = read_across_an_update(&db, "get: read point", |db| {
        db.multi_get(&[KEY]).unwrap().remove(0)
    });
    assert!(
        matches!(value.as_deref(), Some(b"v1" | b"v2")),
        "got {:?}",
        value.map(String::from_utf8)
    );
}

/// An iterator holding its read point between v1 and v2 (before it drains the Membuffer)
/// must see exactly v1: it cannot move its read point.
#[test]
fn an_iterator_opened_across_an_in_place_update_sees_the_old_version() {
    let db = db_with_a_record();
    let value = read_across_an_update(&db, "iterator: read point", |db| {
        let mut iterator = db
            .cursor(&crate::options::ReadOptions::default(), None, None)
            .unwrap();
        iterator.seek(KEY);
        assert!(iterator.valid(), "the key vanished");
        assert_eq!(iterator.key(), KEY);
        Some(iterator.value().to_vec())
    });
    assert_eq!(value.as_deref(), Some(&b"v1"[..]));
}

/// A snapshot taken at v1 reads v1 after the update: the update may not drop a version a
/// registered snapshot sees.
#[test]
fn a_snapshot_keeps_the_version_an_in_place_update_replaces() {
    let db = db_with_a_record();
    let snapshot = db.snapshot();
    let dropped_before = counter(&db, "membuffer_dropped_versions");
    db.put(KEY, b"v2").unwrap();
    assert_eq!(
        db.get_at(&snapshot, KEY).unwrap().as_deref(),
        Some(&b"v1"[..])
    );
    assert_eq!(counter(&db, "membuffer_dropped_versions"), dropped_before);
    drop(snapshot);
    // With no snapshot left the next update drops the version it replaces.
    db.put(KEY, b"v3").unwrap();
    assert_eq!(
        counter(&db, "membuffer_dropped_versions"),
        dropped_before + 1
    );
    assert_eq!(db.get(KEY).unwrap().as_deref(), Some(&b"v3"[..]));
}

/// A `get` that starts after the update rewrote the record but before the update is
/// visible takes a read point below v2 and wants v1: it must not get v0. (It waits for the
/// update instead; the writer is released once the read has noticed, or after 20 s.)
#[test]
fn a_get_starting_before_an_in_place_update_is_visible_never_reads_below_it() {
    let db = db_with_a_record();
    let writer = update_paused_until(&db, "membuffer_read_retries");
    let value = db.get(KEY).unwrap();
    writer.join().unwrap();
    assert!(
        matches!(value.as_deref(), Some(b"v1" | b"v2")),
        "got {:?}",
        value.map(String::from_utf8)
    );
}

/// An iterator that starts after an update dropped v1 but before v2 is visible takes a read
/// point below v2 and would find v0 below it: the update's announcement makes the iterator
/// wait for v2 and read there instead (`membuffer::gate`, step 2). The writer is released
/// once the iterator waits (counted), or after 20 s — and then the iterator would read v0.
#[test]
fn an_iterator_starting_before_an_in_place_update_is_visible_never_reads_below_it() {
    let db = db_with_a_record();
    let writer = update_paused_until(&db, "membuffer_scan_waits");
    let mut iterator = db
        .cursor(&crate::options::ReadOptions::default(), None, None)
        .unwrap();
    iterator.seek(KEY);
    let value = iterator.valid().then(|| iterator.value().to_vec());
    drop(iterator);
    writer.join().unwrap();
    assert_eq!(value.as_deref(), Some(&b"v2"[..]), "never v0 (or v1)");
    assert_eq!(counter(&db, "membuffer_scan_waits"), 1);
}

/// With no update announced above its read point, an iterator keeps the read point it took
/// first and never waits.
#[test]
fn an_iterator_with_no_update_in_flight_never_waits() {
    let db = db_with_a_record();
    db.put(KEY, b"v2").unwrap();
    let mut iterator = db
        .cursor(&crate::options::ReadOptions::default(), None, None)
        .unwrap();
    iterator.seek(KEY);
    assert_eq!(iterator.value(), b"v2");
    drop(iterator);
    assert_eq!(counter(&db, "membuffer_scan_waits"), 0);
}
