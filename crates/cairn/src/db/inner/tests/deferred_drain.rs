//! A writer that finds its Membuffer partition full publishes its write before it moves the
//! full table into the memtable (`membuffer::DeferredDrain`): every writer behind it in
//! sequence order waits for that publication, so the move must not come first. Checked at
//! the race point between the two ("write: published").

use super::RACE_HOOK;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

/// Writes distinct keys until a write's own drain runs after the write was published, and
/// checks that at that point (the move still to come) the write already reads back.
#[test]
fn a_writer_publishes_its_write_before_it_moves_a_full_partition() {
    // No drainer threads: every drain the counters show is a writer's.
    let db = Arc::new(super::small_membuffer_db());
    let key = |index: u32| format!("key{index:06}").into_bytes();
    // At the race point: the writer drains counted so far, and whether the key read back.
    let at_publish: Rc<Cell<Option<(u64, bool)>>> = Rc::new(Cell::new(None));
    let (mut deferred, mut written) = (0, 0);
    for index in 0..50_000u32 {
        let hook_db = Arc::clone(&db);
        let seen = Rc::clone(&at_publish);
        RACE_HOOK.with(|cell| {
            *cell.borrow_mut() = Some(Box::new(move |point| {
                if point == "write: published" {
                    let drains = hook_db.stats().counter("membuffer_writer_drains");
                    let visible = hook_db.get(key(index)).unwrap().as_deref() == Some(b"v");
                    seen.set(Some((drains, visible)));
                }
            }));
        });
        db.put(key(index), b"v").unwrap();
        written = index + 1;
        RACE_HOOK.with(|cell| cell.borrow_mut().take());
        let (drains, visible) = at_publish.take().expect("race point not reached");
        assert!(visible, "write {index} not readable once published");
        if db.stats().counter("membuffer_writer_drains") > drains {
            deferred += 1;
            if deferred == 3 {
                break;
            }
        }
    }
    assert_eq!(
        deferred, 3,
        "no write's own drain ran after the write was published (or fewer than 3 did)"
    );
    for index in 0..written {
        assert_eq!(
            db.get(key(index)).unwrap().as_deref(),
            Some(&b"v"[..]),
            "key {index}"
        );
    }
}
