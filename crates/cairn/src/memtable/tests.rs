//! The memtable's unit tests: oracles, concurrency, hinted inserts, gathering for flush.

use super::node::{random_height, Node};
use super::*;
use crate::iter::test_support::{collect_backward, collect_forward};
use crate::iter::InternalIterator;
use crate::key::{compare_internal_keys, internal_key};
use crate::key::{parse_internal_key, trailer};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

/// A memtable constructor taking the arena chunk size.
type MakeMemtable = fn(usize) -> Memtable;

/// Memtables whose key index answers throughout, saturates part-way, or saturates at
/// once (lookups then search the skiplist): every behaviour must be the same.
const INDEX_MODES: [(&str, MakeMemtable); 3] = [
    ("roomy index", |chunk_bytes| {
        Memtable::with_chunk_bytes(chunk_bytes)
    }),
    ("small index", |chunk_bytes| {
        Memtable::with_sizes(chunk_bytes, 256)
    }),
    ("tiny index", |chunk_bytes| {
        Memtable::with_sizes(chunk_bytes, 8)
    }),
];

/// Oracle keyed so `BTreeMap` order equals internal-key order.
fn oracle_key(user: &[u8], sequence: u64) -> (Vec<u8>, std::cmp::Reverse<u64>) {
    (user.to_vec(), std::cmp::Reverse(sequence))
}

#[test]
fn heights_follow_a_geometric_distribution() {
    let mut counts = [0usize; MAX_HEIGHT + 1];
    for _ in 0..100_000 {
        counts[random_height()] += 1;
    }
    assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
    assert!((16_000..21_000).contains(&counts[2]), "{counts:?}");
}

#[test]
fn matches_an_oracle_in_order_get_seek_and_prev() {
    for (mode, make) in INDEX_MODES {
        eprintln!("{mode}");
        matches_an_oracle_in_order_get_seek_and_prev_with(make(4096));
    }
}

fn matches_an_oracle_in_order_get_seek_and_prev_with(memtable: Memtable) {
    let memtable = Arc::new(memtable);
    let mut rng = SmallRng::seed_from_u64(11);
    let mut oracle = BTreeMap::new();
    for sequence in 1..=5000u64 {
        let user: Vec<u8> = match rng.gen_range(0..4) {
            0 => Vec::new(),
            1 => vec![b'a'; rng.gen_range(1..4)],
            _ => format!("k{}", rng.gen_range(0..300)).into_bytes(),
        };
        let kind = if rng.gen_bool(0.2) {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value: Vec<u8> = (0..rng.gen_range(0..50)).map(|_| rng.gen()).collect();
        memtable.insert(&user, sequence, kind, &value);
        oracle.insert(oracle_key(&user, sequence), (kind, value));
    }
    assert_eq!(memtable.len(), 5000);
    memtable.check_invariants().unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = oracle
        .iter()
        .map(|((user, sequence), (kind, value))| {
            (internal_key(user, sequence.0, *kind), value.clone())
        })
        .collect();
    let mut iterator = memtable.iter();
    assert_eq!(collect_forward(&mut iterator).unwrap(), expected);
    assert_eq!(collect_backward(&mut iterator).unwrap(), expected);
    for _ in 0..2000 {
        let user = format!("k{}", rng.gen_range(0..300)).into_bytes();
        let snapshot = rng.gen_range(0..5200);
        let want = oracle
            .range(oracle_key(&user, snapshot)..)
            .next()
            .filter(|((found, _), _)| *found == user)
            .map(|(_, (kind, value))| (*kind, value.as_slice()));
        assert_eq!(memtable.get(&user, snapshot), want);
        let target = internal_key(&user, snapshot, ValueKind::SEEK);
        iterator.seek(&target);
        let position = expected
            .partition_point(|(key, _)| compare_internal_keys(key, &target) == Ordering::Less);
        match expected.get(position) {
            Some((key, _)) => assert_eq!(iterator.key(), key.as_slice()),
            None => assert!(!iterator.valid()),
        }
    }
}

#[test]
fn values_larger_than_a_chunk_work() {
    let memtable = Memtable::with_chunk_bytes(4096);
    let big = vec![9u8; 100_000];
    memtable.insert(b"big", 1, ValueKind::Put, &big);
    memtable.insert(b"small", 2, ValueKind::Put, b"x");
    assert_eq!(
        memtable.get(b"big", 5),
        Some((ValueKind::Put, big.as_slice()))
    );
    assert_eq!(memtable.get(b"small", 5), Some((ValueKind::Put, &b"x"[..])));
    assert!(memtable.memory_bytes() >= 100_000);
}

#[test]
fn concurrent_inserts_with_concurrent_readers() {
    for (mode, make) in INDEX_MODES {
        for key_space in [20_000, 50] {
            eprintln!("{mode}, {key_space} keys");
            concurrent_inserts_with_concurrent_readers_with(make(64 * 1024), key_space);
        }
    }
}

fn concurrent_inserts_with_concurrent_readers_with(memtable: Memtable, key_space: u64) {
    const WRITERS: u64 = 4;
    const PER_WRITER: u64 = 25_000;
    let memtable = Arc::new(memtable);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let memtable = Arc::clone(&memtable);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut passes = 0;
                while !done.load(AtomicOrdering::Acquire) || passes == 0 {
                    let mut iterator = memtable.iter();
                    iterator.seek_to_first();
                    let mut previous: Option<Vec<u8>> = None;
                    while iterator.valid() {
                        let key = iterator.key().to_vec();
                        if let Some(previous) = &previous {
                            assert_eq!(compare_internal_keys(previous, &key), Ordering::Less);
                        }
                        let parsed = parse_internal_key(&key).unwrap();
                        // value = sequence, so every read is checkable
                        assert_eq!(iterator.value(), &parsed.sequence.to_le_bytes());
                        previous = Some(key);
                        iterator.next();
                    }
                    passes += 1;
                }
                passes
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let memtable = Arc::clone(&memtable);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(writer);
                for index in 0..PER_WRITER {
                    let sequence = writer * PER_WRITER + index + 1;
                    let user = format!("key{:05}", rng.gen_range(0..key_space)).into_bytes();
                    let value = sequence.to_le_bytes();
                    if index % 2 == 0 {
                        memtable.insert(&user, sequence, ValueKind::Put, &value);
                    } else {
                        // Hinted, as read-modify-write inserts: the hint goes stale while
                        // the other writers insert (possibly the same key) in between.
                        let (_, hint) = memtable.get_entry_hinted(&user);
                        memtable.insert_hinted(
                            Some(&hint),
                            &user,
                            sequence,
                            ValueKind::Put,
                            &value,
                        );
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    done.store(true, AtomicOrdering::Release);
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    let total = WRITERS * PER_WRITER;
    assert_eq!(memtable.len() as u64, total);
    memtable.check_invariants().unwrap();
    let mut iterator = memtable.iter();
    iterator.seek_to_first();
    let mut seen = std::collections::HashSet::new();
    let mut previous: Option<Vec<u8>> = None;
    while iterator.valid() {
        let key = iterator.key().to_vec();
        if let Some(previous) = &previous {
            assert_eq!(compare_internal_keys(previous, &key), Ordering::Less);
        }
        assert!(seen.insert(parse_internal_key(&key).unwrap().sequence));
        previous = Some(key);
        iterator.next();
    }
    assert_eq!(seen.len() as u64, total);
}

#[test]
fn a_completed_insert_is_found_by_every_later_get() {
    // Writers race to create the same fresh keys (each round's keys are new), so a key's
    // node is often linked by one writer while another completes a version on it first:
    // that version must be findable as soon as its insert returns (invariant 5).
    const WRITERS: u64 = 3;
    const ROUNDS: u64 = 2_000;
    const KEYS_PER_ROUND: u64 = 4;
    for (mode, make) in INDEX_MODES {
        eprintln!("{mode}");
        let memtable = Arc::new(make(64 * 1024));
        memtable.widen_publish_window(true);
        let completed: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new(
            (0..WRITERS)
                .map(|_| std::sync::atomic::AtomicU64::default())
                .collect(),
        );
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (memtable, completed, done) = (
                Arc::clone(&memtable),
                Arc::clone(&completed),
                Arc::clone(&done),
            );
            std::thread::spawn(move || {
                let mut checks = 0u64;
                while !done.load(AtomicOrdering::Acquire) {
                    for slot in completed.iter() {
                        // (round, key) of the writer's last completed insert, plus one.
                        let packed = slot.load(AtomicOrdering::Acquire);
                        let Some(last) = packed.checked_sub(1) else {
                            continue;
                        };
                        let user = (last / KEYS_PER_ROUND, last % KEYS_PER_ROUND);
                        let user = format!("{:08}-{}", user.0, user.1).into_bytes();
                        assert!(
                            memtable.get(&user, crate::key::SEQUENCE_MAX).is_some(),
                            "a completed insert of {user:?} is not found"
                        );
                        let (entry, _) = memtable.get_entry_hinted(&user);
                        assert!(entry.is_some());
                        checks += 1;
                    }
                }
                checks
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (memtable, completed) = (Arc::clone(&memtable), Arc::clone(&completed));
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(writer + 100);
                    for round in 0..ROUNDS {
                        let key = rng.gen_range(0..KEYS_PER_ROUND);
                        let user = format!("{round:08}-{key}").into_bytes();
                        let sequence = 1 + round * WRITERS + writer;
                        memtable.insert(&user, sequence, ValueKind::Put, b"v");
                        if let Some(slot) = completed.get(writer as usize) {
                            slot.store(round * KEYS_PER_ROUND + key + 1, AtomicOrdering::Release);
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, AtomicOrdering::Release);
        assert!(reader.join().unwrap() > 0);
        assert_eq!(memtable.len() as u64, WRITERS * ROUNDS);
        memtable.check_invariants().unwrap();
        let entries = collect_forward(&mut memtable.iter()).unwrap();
        assert_eq!(entries.len() as u64, WRITERS * ROUNDS);
        assert!(entries
            .windows(2)
            .all(|pair| compare_internal_keys(&pair[0].0, &pair[1].0) == Ordering::Less));
    }
}

#[test]
fn a_hinted_insert_on_a_key_node_not_yet_in_the_index_publishes_it() {
    // Bug E: a key node's creator has linked it into the skiplist but not yet published
    // it in the index. `get_entry_hinted` finds it by search after the index said
    // `Absent`; the hinted insert then joins the chain and must publish the node before it
    // returns (invariant 5), or a `get` right after misses the completed version.
    let memtable = Memtable::new();
    let height = 1;
    let node = Node::allocate(
        &memtable.arena,
        height,
        [
            b"k",
            &crate::key::pack_trailer(1, ValueKind::Put).to_le_bytes(),
        ],
        b"first",
    );
    // The creator, paused between linking and publishing.
    assert!(memtable.link_key_node(node, b"k", height, None).is_none());
    let (found, hint) = memtable.get_entry_hinted(b"k");
    assert_eq!(found, Some((1, ValueKind::Put, &b"first"[..])));
    memtable.insert_hinted(Some(&hint), b"k", 2, ValueKind::Put, b"second");
    assert_eq!(
        memtable.get(b"k", crate::key::SEQUENCE_MAX),
        Some((ValueKind::Put, &b"second"[..])),
        "a completed hinted insert is not found by get"
    );
    // The creator resumes: publishing again is idempotent, then it counts its version.
    memtable.index.publish(index::hash(b"k"), node as usize);
    memtable.entry_count.add(1);
    memtable.check_invariants().unwrap();
}

#[test]
fn long_chains_iterate_the_same_both_ways() {
    // A hot key with thousands of versions between cold keys: `prev` along its chain must
    // step through every version in order (it keeps a stack of the newer ones).
    let memtable = Arc::new(Memtable::new());
    let mut sequence = 0u64;
    for round in 0..3000u64 {
        sequence += 1;
        memtable.insert(b"hot", sequence, ValueKind::Put, &round.to_le_bytes());
        if round % 100 == 0 {
            sequence += 1;
            let cold = format!("cold{round:05}");
            memtable.insert(cold.as_bytes(), sequence, ValueKind::Put, b"c");
        }
    }
    let forward = collect_forward(&mut memtable.iter()).unwrap();
    // collect_backward walks with `prev` and returns the entries in forward order.
    let backward = collect_backward(&mut memtable.iter()).unwrap();
    assert_eq!(forward.len(), 3030);
    memtable.check_invariants().unwrap();
    assert_eq!(forward, backward);
    // Direction changes in the middle of the chain.
    let mut iterator = memtable.iter();
    iterator.seek(&internal_key(b"hot", 1500, ValueKind::SEEK));
    assert_eq!(trailer(iterator.key()) >> 8, 1500);
    iterator.prev();
    iterator.prev();
    iterator.next();
    let at = trailer(iterator.key()) >> 8;
    iterator.prev();
    assert_eq!(trailer(iterator.key()) >> 8, at + 1);
}

#[test]
fn hinted_inserts_match_an_oracle_with_stale_foreign_and_wrong_key_hints() {
    for (mode, make) in INDEX_MODES {
        eprintln!("{mode}");
        hinted_inserts_match_an_oracle_with(make(4096), make(4096));
    }
}

// Takes the memtables by value: each oracle run owns the pair it was built for.
#[allow(clippy::needless_pass_by_value)]
fn hinted_inserts_match_an_oracle_with(memtable: Memtable, other: Memtable) {
    let mut rng = SmallRng::seed_from_u64(23);
    other.insert(b"k1", 1, ValueKind::Put, b"elsewhere");
    let mut oracle: BTreeMap<_, (ValueKind, Vec<u8>)> = BTreeMap::new();
    let mut next_sequence = 1u64;
    for _ in 0..3000 {
        let user = format!("k{}", rng.gen_range(0..200)).into_bytes();
        // A block of sequences: ours is a random one of them, the others go to inserts
        // made between taking the hint and using it — some of the same key, below and
        // above ours — so the hint is stale as under concurrency.
        let block = rng.gen_range(1..6u64);
        let ours = next_sequence + rng.gen_range(0..block);
        // Each other sequence of the block is inserted before the hint is taken (so the
        // read may see a version newer than ours) or between taking and using it.
        let mut after_hint = Vec::new();
        for sequence in next_sequence..next_sequence + block {
            if sequence == ours {
                continue;
            }
            let between = if rng.gen_bool(0.5) {
                user.clone()
            } else {
                format!("k{}", rng.gen_range(0..200)).into_bytes()
            };
            if rng.gen_bool(0.3) {
                memtable.insert(&between, sequence, ValueKind::Put, &sequence.to_le_bytes());
                oracle.insert(
                    oracle_key(&between, sequence),
                    (ValueKind::Put, sequence.to_le_bytes().to_vec()),
                );
            } else {
                after_hint.push((between, sequence));
            }
        }
        let (found, hint) = memtable.get_entry_hinted(&user);
        let newest = oracle
            .range(oracle_key(&user, crate::key::SEQUENCE_MAX)..)
            .next()
            .filter(|((found_user, _), _)| *found_user == user)
            .map(|((_, sequence), (kind, value))| (sequence.0, *kind, value.clone()));
        assert_eq!(
            found.map(|(sequence, kind, value)| (sequence, kind, value.to_vec())),
            newest
        );
        for (between, sequence) in after_hint {
            memtable.insert(&between, sequence, ValueKind::Put, &sequence.to_le_bytes());
            oracle.insert(
                oracle_key(&between, sequence),
                (ValueKind::Put, sequence.to_le_bytes().to_vec()),
            );
        }
        let kind = if rng.gen_bool(0.2) {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value = ours.to_le_bytes();
        let (_, foreign) = other.get_entry_hinted(&user);
        let key_k1 = b"k1".to_vec();
        let (_, wrong) = memtable.get_entry_hinted(&key_k1);
        let chosen_hint = match rng.gen_range(0..4) {
            0 => Some(&foreign),
            1 => Some(&wrong),
            2 => None,
            _ => Some(&hint),
        };
        memtable.insert_hinted(chosen_hint, &user, ours, kind, &value);
        oracle.insert(oracle_key(&user, ours), (kind, value.to_vec()));
        next_sequence += block;
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = oracle
        .iter()
        .map(|((user, sequence), (kind, value))| {
            (internal_key(user, sequence.0, *kind), value.clone())
        })
        .collect();
    memtable.check_invariants().unwrap();
    let mut iterator = Arc::new(memtable).iter();
    iterator.seek_to_first();
    let mut actual = Vec::new();
    while iterator.valid() {
        actual.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.next();
    }
    assert_eq!(actual, expected);
}

#[test]
fn sorted_nodes_match_the_level_zero_walk_at_every_size() {
    let mut rng = SmallRng::seed_from_u64(17);
    // Sizes below, at and far above one gather segment (64 nodes), plus duplicates of a
    // user key (many versions) and empty keys.
    for size in [0usize, 1, 2, 63, 64, 65, 1000, 200_000] {
        let memtable = Arc::new(Memtable::with_chunk_bytes(1 << 16));
        for sequence in 1..=size as u64 {
            let user = match rng.gen_range(0..10) {
                0 => Vec::new(),
                1 => b"hot".to_vec(),
                _ => rng.gen::<u64>().to_be_bytes().to_vec(),
            };
            memtable.insert(&user, sequence, ValueKind::Put, &sequence.to_le_bytes());
        }
        let expected = collect_forward(&mut memtable.iter()).unwrap();
        assert_eq!(expected.len(), size);
        let sorted = Arc::new(memtable.sorted_nodes());
        assert_eq!(sorted.len(), size);
        assert_eq!(sorted.is_empty(), size == 0);
        let mut iterator = sorted.iter();
        assert!(!iterator.valid(), "a new cursor is not positioned");
        assert_eq!(
            collect_forward(&mut iterator).unwrap(),
            expected,
            "size {size}"
        );
        let mut keys = Vec::new();
        sorted.for_each_key(|key| keys.push(key.to_vec()));
        let expected_keys: Vec<Vec<u8>> = expected.iter().map(|(key, _)| key.clone()).collect();
        assert_eq!(keys, expected_keys);
        assert_eq!(collect_backward(&mut iterator).unwrap(), expected);
        for _ in 0..200 {
            let target = internal_key(
                &rng.gen::<u64>().to_be_bytes(),
                rng.gen_range(0..=size as u64 + 1),
                ValueKind::SEEK,
            );
            iterator.seek(&target);
            let mut reference = memtable.iter();
            reference.seek(&target);
            assert_eq!(iterator.valid(), reference.valid());
            if reference.valid() {
                assert_eq!(iterator.key(), reference.key());
                assert_eq!(iterator.value(), reference.value());
            }
        }
    }
}

#[test]
fn sorted_nodes_after_concurrent_inserts_hold_every_entry_once() {
    let memtable = Arc::new(Memtable::with_chunk_bytes(1 << 16));
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let memtable = Arc::clone(&memtable);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread);
                for index in 0..20_000u64 {
                    let user = rng.gen::<u32>().to_be_bytes();
                    memtable.insert(&user, 1 + thread * 20_000 + index, ValueKind::Put, b"v");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let sorted = Arc::new(memtable.sorted_nodes());
    assert_eq!(sorted.len(), 80_000);
    memtable.check_invariants().unwrap();
    assert_eq!(
        collect_forward(&mut sorted.iter()).unwrap(),
        collect_forward(&mut memtable.iter()).unwrap()
    );
}

#[test]
fn the_check_catches_an_out_of_order_chain() {
    let memtable = Memtable::new();
    memtable.insert(b"a", 1, ValueKind::Put, b"1");
    memtable.insert(b"k", 5, ValueKind::Put, b"5");
    memtable.insert(b"z", 2, ValueKind::Put, b"2");
    memtable.check_invariants().unwrap();
    // Sequence 3 at the head, above sequence 5: newest-first order broken.
    memtable.push_version_unordered(b"k", crate::key::pack_trailer(3, ValueKind::Put), b"3");
    let broken = memtable.check_invariants().unwrap_err();
    assert!(broken.contains("invariant 2"), "{broken}");
    assert!(broken.contains("not strictly descending"), "{broken}");
}

#[test]
fn the_check_catches_a_key_node_missing_from_the_index() {
    let memtable = Memtable::new();
    memtable.insert(b"a", 1, ValueKind::Put, b"1");
    let trailer = crate::key::pack_trailer(2, ValueKind::Put).to_le_bytes();
    let node = Node::allocate(&memtable.arena, 1, [b"k", &trailer], b"2");
    // Linked but never published, as a creator stopped before its index step.
    assert!(memtable.link_key_node(node, b"k", 1, None).is_none());
    memtable.entry_count.add(1);
    let broken = memtable.check_invariants().unwrap_err();
    assert!(broken.contains("invariant 5"), "{broken}");
}

#[test]
fn the_check_catches_a_miscounted_memtable() {
    let memtable = Memtable::new();
    memtable.insert(b"a", 1, ValueKind::Put, b"1");
    memtable.entry_count.add(1);
    let broken = memtable.check_invariants().unwrap_err();
    assert!(broken.contains('2'), "{broken}");
}
