//! Unit tests of the waits and races around `DbInner`: forced interleavings through the
//! thread-local race hook (`DbInner::race_point`).

use crate::db::Db;
use crate::filename::{self, FileKind};
use crate::fs::{FileSystem, MemFs};
use crate::options::Options;
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

/// A race hook: called with the name of each race point the thread passes.
type RaceHook = Box<dyn FnMut(&'static str)>;

std::thread_local! {
    /// The hook `race_point` runs on this thread (taken out while it runs, so a nested
    /// race point does not run it again).
    static RACE_HOOK: RefCell<Option<RaceHook>> = const { RefCell::new(None) };
}

/// Runs this thread's race hook, if any, at `point`.
pub(super) fn run_race_hook(point: &'static str) {
    let hook = RACE_HOOK.with(|cell| cell.borrow_mut().take());
    if let Some(mut hook) = hook {
        hook(point);
        RACE_HOOK.with(|cell| *cell.borrow_mut() = Some(hook));
    }
}

/// `(number, empty)` of every WAL in `/db`, by number.
fn wal_files(fs: &MemFs) -> Vec<(u64, bool)> {
    let mut wals: Vec<(u64, bool)> = fs
        .list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some(FileKind::Wal(number)) => Some(number),
            _ => None,
        })
        .map(|number| {
            let path = filename::wal_path(Path::new("/db"), number);
            (
                number,
                fs.file_contents(&path).unwrap_or_default().is_empty(),
            )
        })
        .collect();
    wals.sort_unstable();
    wals
}

/// Bug (fixed in `take_next_wal` by 4f893fc, untested until now): a switch that found no
/// prepared WAL created one without marking the creation as under way, so the previous
/// switch's `prepare_next_wal`, running in that window, took a file number of its own
/// first: the switch's log got the higher number and the prepared WAL lay empty below it.
/// Recovery stops at an empty WAL, so a crash then loses every write of the live log.
/// Deterministic: the hook runs the late preparation exactly in that window.
#[test]
fn a_late_preparation_cannot_slip_an_empty_wal_below_the_switch_s_own() {
    let fs = MemFs::new();
    let options = || Options {
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    };
    let db = Db::open("/db", options()).unwrap();
    db.put(b"a", b"1").unwrap();
    let inner = Arc::clone(&db.inner);
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let fired = Arc::clone(&fired);
        RACE_HOOK.with(|cell| {
            *cell.borrow_mut() = Some(Box::new(move |point| {
                if point == "take_next_wal: creating" {
                    fired.store(true, std::sync::atomic::Ordering::Relaxed);
                    inner.prepare_next_wal();
                }
            }));
        });
    }
    // The first switch finds nothing prepared, so it creates its WAL itself.
    let flushed = db.flush();
    RACE_HOOK.with(|cell| cell.borrow_mut().take());
    flushed.unwrap();
    assert!(
        fired.load(std::sync::atomic::Ordering::Relaxed),
        "race point not reached"
    );
    db.put(b"b", b"2").unwrap();
    let live = db.inner.super_version.load().memory.active().log().number();
    let wals = wal_files(&fs);
    for &(number, empty) in &wals {
        assert!(
            !(empty && number < live),
            "an empty WAL {number} lies below the live WAL {live}: {wals:?}"
        );
    }
    db.close().unwrap();
    let db = Db::open("/db", options()).unwrap();
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}
