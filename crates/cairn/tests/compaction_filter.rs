//! The user compaction filter, end to end: expired keys vanish and changed values appear
//! once compaction rewrites them, and a key a snapshot can read is never touched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{CompactionFilter, Db, FilterDecision, Options};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Removes keys starting with "expired:", upper-cases values of keys starting with "shout".
#[derive(Debug, Default)]
struct Expiry {
    calls: AtomicUsize,
}

impl CompactionFilter for Expiry {
    fn filter(&self, _output_level: usize, user_key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if user_key.starts_with(b"expired:") {
            FilterDecision::Remove
        } else if user_key.starts_with(b"shout") {
            FilterDecision::Change(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

fn open(filter: Arc<Expiry>) -> Db {
    let mut options = Options::in_memory();
    options.compaction_filter = Some(filter);
    options.level_count = 4;
    Db::open("/db", options).unwrap()
}

#[test]
fn compaction_applies_the_filter_to_rewritten_keys() {
    let expiry = Arc::new(Expiry::default());
    let db = open(Arc::clone(&expiry));
    // A base file spanning a..z at the bottom, so later writes merge with it (a file moved
    // down without being read is not filtered).
    db.put(b"a", b"base").unwrap();
    db.put(b"z", b"base").unwrap();
    db.compact_range(None, None).unwrap();

    db.put(b"expired:1", b"v").unwrap();
    db.put(b"plain", b"v").unwrap();
    db.put(b"shout", b"hi").unwrap();
    db.compact_range(None, None).unwrap();
    assert!(
        expiry.calls.load(Ordering::Relaxed) > 0,
        "the filter was never asked"
    );
    assert_eq!(db.get(b"expired:1").unwrap(), None);
    assert_eq!(db.get(b"plain").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(db.get(b"shout").unwrap().as_deref(), Some(&b"HI"[..]));
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"base"[..]));
}

#[test]
fn a_key_a_snapshot_reads_is_not_filtered_until_the_snapshot_goes() {
    let expiry = Arc::new(Expiry::default());
    let db = open(Arc::clone(&expiry));
    db.put(b"a", b"base").unwrap();
    db.put(b"z", b"base").unwrap();
    db.compact_range(None, None).unwrap();

    db.put(b"expired:2", b"v").unwrap();
    let snapshot = db.snapshot();
    db.put(b"m", b"v").unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get_at(&snapshot, b"expired:2").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(db.get(b"expired:2").unwrap().as_deref(), Some(&b"v"[..]));

    drop(snapshot);
    db.put(b"n", b"v").unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"expired:2").unwrap(), None);
    assert_eq!(db.get(b"m").unwrap().as_deref(), Some(&b"v"[..]));
}
