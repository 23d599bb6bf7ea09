//! The public API's shapes: `AsRef<[u8]>` keys, `RangeBounds` ranges that are double-ended,
//! prefix scans, snapshots tied to their database, conditional-write outcomes, and the same
//! return shapes from `Db` and `MemStore`.

#![allow(clippy::unwrap_used)]

use cairn::{Db, MemStore, MemStoreOptions, Options, ReadOptions, WriteOutcome};
use std::ops::Bound;

fn keys(iter: impl Iterator<Item = cairn::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
    iter.map(|pair| String::from_utf8(pair.unwrap().0).unwrap())
        .collect()
}

fn filled() -> Db {
    let db = Db::open("/db", Options::in_memory()).unwrap();
    for key in ["a", "b", "c", "d", "e"] {
        db.put(key, key.to_uppercase()).unwrap();
    }
    db
}

#[test]
fn ranges_take_any_range_bounds() {
    let db = filled();
    assert_eq!(keys(db.range("b".."d").unwrap()), ["b", "c"]);
    assert_eq!(keys(db.range("b"..="d").unwrap()), ["b", "c", "d"]);
    assert_eq!(keys(db.range(.."c").unwrap()), ["a", "b"]);
    assert_eq!(keys(db.range(String::from("d")..).unwrap()), ["d", "e"]);
    let excluded = (Bound::Excluded(&b"a"[..]), Bound::Included(&b"c"[..]));
    assert_eq!(keys(db.range::<[u8], _>(excluded).unwrap()), ["b", "c"]);
    assert_eq!(keys(db.iter().unwrap()).len(), 5);
}

#[test]
fn ranges_are_double_ended_and_both_ends_meet_once() {
    let db = filled();
    assert_eq!(keys(db.range("b"..).unwrap().rev()), ["e", "d", "c", "b"]);
    let mut iter = db.iter().unwrap();
    let mut seen = Vec::new();
    // Alternate ends: every key exactly once, front keys ascending, back keys descending.
    for round in 0.. {
        let next = if round % 2 == 0 {
            iter.next()
        } else {
            iter.next_back()
        };
        match next {
            Some(pair) => seen.push(String::from_utf8(pair.unwrap().0).unwrap()),
            None => break,
        }
    }
    assert_eq!(seen, ["a", "e", "b", "d", "c"]);
    assert!(iter.next().is_none() && iter.next_back().is_none());
    // Two from the back, then the front runs into them.
    let mut iter = db.range("b"..="d").unwrap();
    assert_eq!(iter.next_back().unwrap().unwrap().0, b"d");
    assert_eq!(iter.next_back().unwrap().unwrap().0, b"c");
    assert_eq!(keys(iter), ["b"]);
}

#[test]
fn prefix_scans_stop_at_the_prefix_end() {
    let db = Db::open("/db", Options::in_memory()).unwrap();
    for key in [
        &b"ab"[..],
        b"ab\xff",
        b"ab\xff\xff",
        b"ac",
        b"a",
        b"\xff\xff",
        b"\xff\xff\x01",
    ] {
        db.put(key, b"").unwrap();
    }
    assert_eq!(db.prefix("ab").unwrap().count(), 3);
    assert_eq!(db.prefix(b"ab\xff").unwrap().rev().count(), 2);
    assert_eq!(db.prefix(b"\xff\xff").unwrap().count(), 2);
    assert_eq!(db.prefix("").unwrap().count(), 7);
    let snapshot = db.snapshot();
    db.put("abc", "").unwrap();
    assert_eq!(db.prefix_at(&snapshot, "ab").unwrap().count(), 3);
    assert_eq!(db.prefix("ab").unwrap().count(), 4);
}

#[test]
fn a_snapshot_of_another_database_is_refused() {
    let first = filled();
    let second = filled();
    let snapshot = first.snapshot();
    let error = second.get_at(&snapshot, "a").unwrap_err();
    assert!(
        error
            .to_string()
            .contains("snapshot was taken from another database"),
        "{error}"
    );
    assert!(second.range_at(&snapshot, "a"..).is_err());
    assert!(second.prefix_at(&snapshot, "a").is_err());
    let mut options = ReadOptions::default();
    options.snapshot = Some(snapshot.clone());
    assert!(second.get_with(&options, "a").is_err());
    assert!(second.cursor(&options, None, None).is_err());
    // Its own database still accepts it.
    assert_eq!(first.get_with(&options, "a").unwrap(), Some(b"A".to_vec()));
}

#[test]
fn db_and_memstore_share_shapes() {
    let db = Db::open("/db", Options::in_memory()).unwrap();
    let store = MemStore::new(MemStoreOptions::default()).unwrap();
    let bump = |current: Option<&[u8]>| Some([current.unwrap_or_default(), b"+"].concat());
    let () = db.delete("k").unwrap();
    let () = store.delete("k").unwrap();
    assert_eq!(
        db.update("k", bump).unwrap(),
        store.update("k", bump).unwrap()
    );
    assert_eq!(db.update("k", bump).unwrap(), Some(b"++".to_vec()));
    assert_eq!(store.update("k", bump).unwrap(), Some(b"++".to_vec()));
    assert_eq!(db.update("k", |_| None).unwrap(), None);
    assert_eq!(store.update("k", |_| None).unwrap(), None);
    assert_eq!(db.put_if_absent("k", "1").unwrap(), WriteOutcome::Written);
    assert_eq!(db.put_if_absent("k", "2").unwrap(), WriteOutcome::Unchanged);
}

/// Bug (found in review): an inclusive upper bound or an exclusive lower bound becomes the
/// next key (a zero byte appended), and that derived bound was checked against the key
/// limit, so a range over a key of the largest allowed length was refused. A bound longer
/// than any key is still refused.
#[test]
fn ranges_bounded_by_a_key_of_the_largest_length_are_accepted() {
    let db = Db::open("/db", Options::in_memory()).unwrap();
    let longest = vec![b'k'; cairn::KEY_BYTES_MAX];
    db.put(&longest, "v").unwrap();
    db.put("z", "v").unwrap();
    let at_most = db.range(longest.as_slice()..=longest.as_slice()).unwrap();
    assert_eq!(at_most.count(), 1);
    let after = db
        .range::<[u8], _>((Bound::Excluded(longest.as_slice()), Bound::Unbounded))
        .unwrap();
    assert_eq!(keys(after), ["z"]);
    let too_long = vec![b'k'; cairn::KEY_BYTES_MAX + 1];
    assert!(db.range(too_long.as_slice()..).is_err());
    assert!(db
        .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(too_long.as_slice())))
        .is_err());
}
