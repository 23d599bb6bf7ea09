//! Loom models of the hash index's bucket seqlock and of lookups racing writers.

use super::bucket::Bucket;
use super::*;
use crate::epoch::EpochTable;
use crate::sync::AtomicBool;
use loom::sync::Arc;
use std::cell::Cell;

std::thread_local! {
    /// Seqlock read retries seen on this OS thread (loom runs a model's threads on one).
    static RETRIES: Cell<u64> = const { Cell::new(0) };
}

pub(super) fn note_retry() {
    RETRIES.with(|retries| retries.set(retries.get() + 1));
}

const TAG: u64 = 0x1234;
/// Locations of 20 bits: the compact layout with 16-bit tags.
const LOCATION_BITS: u32 = 20;

fn layout() -> Layout {
    Layout::for_location_bits(LOCATION_BITS).unwrap_or_else(|error| panic!("{error}"))
}

fn tagged(location: u64) -> u64 {
    layout().make_entry(TAG << 48, location)
}

/// Bucket versions (seqlock): a writer locks, changes two packed entries (the first of which
/// shares its word with the version), unlocks; a concurrent optimistic reader sees both old
/// or both new entries, never a torn pair, and some interleavings must take the retry path.
///
/// The writer stores the new words it computed beforehand rather than calling `set_entry`
/// (which loads each word before storing it): loom's partial-order reduction compares an
/// access only with the *last* access to the same atomic, so a store right after the
/// writer's own load never registers as racing the reader and the model would explore one
/// execution. The stored words are exactly what `set_entry` would produce (checked below).
#[test]
fn bucket_reader_never_sees_a_torn_pair() {
    RETRIES.with(|retries| retries.set(0));
    let layout = layout();
    let old = layout.pack(&[tagged(1), tagged(2)]);
    let new = layout.pack(&[tagged(3), tagged(4)]);
    assert_ne!(
        old[0] & !VERSION_MASK,
        new[0] & !VERSION_MASK,
        "entry 0 is in word 0"
    );
    loom::model(move || {
        let bucket = Arc::new(Bucket::new());
        let replaced = Arc::new(AtomicBool::new(false));
        bucket.set_entry(&layout, 0, tagged(1));
        bucket.set_entry(&layout, 1, tagged(2));
        assert_eq!(bucket.load_words(), old);
        let writer = {
            let (bucket, replaced) = (bucket.clone(), replaced.clone());
            loom::thread::spawn(move || {
                assert!(bucket.lock(&replaced));
                let [first, second, ..] = &bucket.words;
                first.store((new[0] & !VERSION_MASK) | LOCKED, Ordering::Relaxed);
                second.store(new[1], Ordering::Relaxed);
                bucket.unlock();
            })
        };
        let read = bucket
            .read_matching(&layout, TAG, &replaced)
            .expect("never replaced");
        assert_eq!(read.count, 2);
        let pair = (read.candidates[0], read.candidates[1]);
        assert!(pair == (1, 2) || pair == (3, 4), "torn pair {pair:?}");
        writer.join().expect("writer");
        // What the writer stored is what `set_entry` produces.
        assert!(bucket.lock(&replaced));
        bucket.set_entry(&layout, 0, tagged(3));
        bucket.set_entry(&layout, 1, tagged(4));
        let mut words = bucket.load_words();
        words[0] &= !VERSION_MASK;
        assert_eq!(words, {
            let mut expected = new;
            expected[0] &= !VERSION_MASK;
            expected
        });
        bucket.unlock();
    });
    assert!(
        RETRIES.with(Cell::get) > 0,
        "no interleaving exercised the version-change retry"
    );
}

fn hash_of(location: u64) -> u64 {
    hash_key(&location.to_le_bytes())
}

// Note: loom's DPOR compares an operation only with the *last* access to the same atomic,
// so a writer that loads a bucket version and then CASes it shadows the reader's earlier
// load; the three API-level models below (replace, grow, make_room) therefore complete in
// one or very few executions and act as smoke tests of the flows under loom. The
// interleavings of the bucket protocol itself are explored by
// `bucket_reader_never_sees_a_torn_pair`.

/// Index entry update through the real API: a writer re-points a key (lock both buckets,
/// find, replace) while a reader looks it up; the reader finds the old or the new location,
/// never nothing.
#[test]
fn lookup_during_replace_sees_old_or_new() {
    loom::model(|| {
        let epochs = Arc::new(EpochTable::new());
        let index = Arc::new(HashIndex::new(1, 2, LOCATION_BITS).expect("index"));
        let key = 5u64;
        let hash = hash_of(key);
        {
            let guard = epochs.pin();
            let pair = index.lock(&guard, hash);
            assert!(pair.insert(key));
        }
        let writer = {
            let (epochs, index) = (epochs.clone(), index.clone());
            loom::thread::spawn(move || {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash);
                let (slot, _) = pair.find(|location| location & 0xff == key).expect("key");
                pair.replace(slot, key | (1 << 8));
            })
        };
        let found = {
            let guard = epochs.pin();
            index.lookup(&guard, hash, |location| location & 0xff == key)
        };
        assert!(
            found == Some(key) || found == Some(key | (1 << 8)),
            "lookup returned {found:?}"
        );
        writer.join().expect("writer");
    });
}

/// Fills a small index until an insert fails; returns the key that did not fit.
fn fill(epochs: &EpochTable, index: &HashIndex) -> u64 {
    for key in 0..1024u64 {
        let guard = epochs.pin();
        let pair = index.lock(&guard, hash_of(key));
        if !pair.insert(key) {
            return key;
        }
    }
    panic!("a small table fills");
}

/// Entry moves (`make_room`): a writer frees a slot for a new key by moving another key's
/// entry from its second bucket to its first while a reader looks the moved key up. The
/// reader must find it (the miss re-validation of the first bucket's version catches it).
#[test]
fn lookup_during_make_room_finds_the_moved_key() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.max_branches = 100_000;
    builder.check(|| {
        // Dry run on identical indexes to learn a table size at which `make_room` succeeds
        // for the first key that does not fit, and which key it moves.
        let epochs = Arc::new(EpochTable::new());
        let (buckets, moved) = (3..64)
            .find_map(|buckets| {
                let index = HashIndex::new(1, buckets, LOCATION_BITS).expect("index");
                let full_key = fill(&epochs, &index);
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash_of(full_key));
                let mut last = None;
                let made = pair.make_room(|location| {
                    last = Some(location);
                    hash_of(location)
                });
                drop(pair);
                let moved = last.filter(|_| made)?;
                // Only a move from the key's second bucket to its first can hide it from
                // a reader that reads the first bucket before the second.
                let table = index.table(index.partition(hash_of(moved)), &guard);
                let layout = table.layout;
                let first = table.bucket(first_bucket(hash_of(moved), table.len));
                let now_in_first = (0..layout.entries).any(|slot| {
                    let entry = first.entry(&layout, slot);
                    entry != 0 && layout.entry_location(entry) == moved
                });
                now_in_first.then_some((buckets, moved))
            })
            .expect("some small table moves an entry to its first bucket");
        let index = Arc::new(HashIndex::new(1, buckets, LOCATION_BITS).expect("index"));
        let full_key = fill(&epochs, &index);
        let writer = {
            let (epochs, index) = (epochs.clone(), index.clone());
            loom::thread::spawn(move || {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash_of(full_key));
                assert!(pair.make_room(hash_of));
                assert!(pair.insert(full_key));
            })
        };
        let found = {
            let guard = epochs.pin();
            index.lookup(&guard, hash_of(moved), |location| location == moved)
        };
        assert_eq!(found, Some(moved), "lookup missed a key being moved");
        writer.join().expect("writer");
    });
}

/// Growth: a reader looks up a key while another thread grows the key's partition (locks
/// every bucket, rehashes, publishes the new table, flags the old one replaced, retires it
/// under the epoch). The reader always finds the key.
#[test]
fn lookup_during_grow_finds_the_key() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.max_branches = 100_000;
    builder.check(|| {
        let epochs = Arc::new(EpochTable::new());
        let index = Arc::new(HashIndex::new(1, 2, LOCATION_BITS).expect("index"));
        // Fill the two-bucket table until an insert fails.
        let mut full_key = None;
        for key in 0..64u64 {
            let guard = epochs.pin();
            let pair = index.lock(&guard, hash_of(key));
            if !pair.insert(key) {
                full_key = Some(key);
                break;
            }
        }
        let full_key = full_key.expect("a two-bucket table fills");
        find_key_zero_while(&epochs, &index, move |guard, epochs, index| {
            index
                .grow(guard, epochs, hash_of(full_key), hash_of)
                .expect("grow");
        });
    });
}

/// Runs `replace` (a table replacement of key 0's partition) on another thread while
/// this one looks up key 0, which must be found; then every retired table is freed.
#[allow(clippy::expect_used)]
fn find_key_zero_while(
    epochs: &Arc<EpochTable>,
    index: &Arc<HashIndex>,
    replace: impl FnOnce(&EpochGuard<'_>, &EpochTable, &HashIndex) + Send + 'static,
) {
    let replacer = {
        let (epochs, index) = (epochs.clone(), index.clone());
        loom::thread::spawn(move || {
            let guard = epochs.pin();
            replace(&guard, &epochs, &index);
        })
    };
    let found = {
        let guard = epochs.pin();
        index.lookup(&guard, hash_of(0), |location| location == 0)
    };
    assert_eq!(found, Some(0));
    replacer.join().expect("replacer");
    index.collect_retired(epochs);
    assert_eq!(index.retired_memory_bytes(), 0);
}

/// Shrinking: a reader looks up the one key left while another thread shrinks the
/// partition after deletes (the same replace-the-table path as growth, to a smaller table).
#[test]
fn lookup_during_shrink_finds_the_key() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.max_branches = 100_000;
    builder.check(|| {
        let epochs = Arc::new(EpochTable::new());
        let index = Arc::new(HashIndex::new(1, 2, LOCATION_BITS).expect("index"));
        for key in 0..40u64 {
            loop {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash_of(key));
                if pair.insert(key) {
                    break;
                }
                drop(pair);
                index
                    .grow(&guard, &epochs, hash_of(key), hash_of)
                    .expect("grow");
            }
        }
        for key in 1..40u64 {
            let guard = epochs.pin();
            let pair = index.lock(&guard, hash_of(key));
            let (slot, _) = pair.find(|location| location == key).expect("key");
            pair.remove(slot);
        }
        let grown = index.memory_bytes();
        assert!(grown > 2 * BUCKET_BYTES);
        find_key_zero_while(&epochs, &index, |guard, epochs, index| {
            index
                .shrink_if_sparse(guard, epochs, hash_of(1), hash_of)
                .expect("shrink");
        });
        assert!(index.memory_bytes() < grown);
    });
}
