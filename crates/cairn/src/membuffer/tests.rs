//! The Membuffer's unit tests: versions read back exactly through every stage (current table,
//! draining, memtable) while writers, drains and readers run at once.

use super::{Membuffer, MembufferConfig};
use crate::key::{ValueKind, SEQUENCE_MAX};
use crate::memtable::Memtable;
use crate::stats::MembufferCounters;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

thread_local! {
    /// This thread's swap hook: run by a drain on this thread just after it installed the
    /// partition's fresh table (`swap_locked`), so a test can act inside that window.
    static SWAP_HOOK: RefCell<Option<Box<dyn FnMut()>>> = const { RefCell::new(None) };
}

/// Runs this thread's swap hook, if any (taken out while it runs: a drain inside the hook
/// does not run it again).
pub(super) fn run_swap_hook() {
    let hook = SWAP_HOOK.with(|cell| cell.borrow_mut().take());
    if let Some(mut hook) = hook {
        hook();
        SWAP_HOOK.with(|cell| *cell.borrow_mut() = Some(hook));
    }
}

fn config(budget_bytes: usize, multi_insert: bool, drainers: usize) -> MembufferConfig {
    MembufferConfig {
        budget_bytes,
        partitions: 4,
        sample_keys: 16,
        multi_insert,
        drainers,
        counters: Arc::new(MembufferCounters::default()),
        gate: None,
        scans_always_copy: false,
        bypass_scans_per_write: 0,
        bypass_at_once: false,
    }
}

/// Puts version `sequence` of big-endian key `key` (value `v`) into the Membuffer, or into the
/// memtable if the Membuffer does not take it (the sample, before the partitions exist), as
/// the write buffer does.
fn put_either(membuffer: &Membuffer, memtable: &Memtable, key: u64, sequence: u64) {
    let key = key.to_be_bytes();
    if !membuffer.insert(memtable, &key, sequence, ValueKind::Put, b"v") {
        memtable.insert(&key, sequence, ValueKind::Put, b"v");
    }
}

/// The newest version at or below `sequence`, from the Membuffer then the memtable, as the
/// write buffer reads it.
fn read(
    membuffer: &Membuffer,
    memtable: &Memtable,
    key: &[u8],
    sequence: u64,
) -> Option<(u64, Vec<u8>)> {
    let upper = membuffer.get(key, sequence);
    let lower = memtable
        .get_entry(key, sequence)
        .map(|(sequence, kind, value)| (sequence, kind, value.to_vec()));
    super::newer(upper, lower).map(|(sequence, _, value)| (sequence, value))
}

/// Two writers put versions of overlapping keys with increasing sequences (tiny tables: many
/// drains) while a reader checks that a completed version is never lost; then everything is
/// drained and every version is in the memtable.
#[test]
fn versions_survive_drains_under_concurrent_writes() {
    for (multi_insert, drainers) in [(true, 0), (false, 0), (true, 1), (true, 2)] {
        let memtable = Arc::new(Memtable::with_capacity(1 << 20));
        let membuffer = Membuffer::start(config(16 << 10, multi_insert, drainers), &memtable);
        let clock = Arc::new(AtomicU64::new(1));
        // Per key (0..64), the last sequence whose insert completed.
        let completed: Arc<Vec<AtomicU64>> = Arc::new((0..64).map(|_| AtomicU64::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u64)
            .map(|writer| {
                let (membuffer, memtable, clock, completed) = (
                    Arc::clone(&membuffer),
                    Arc::clone(&memtable),
                    Arc::clone(&clock),
                    Arc::clone(&completed),
                );
                std::thread::spawn(move || {
                    for round in 0..3000u64 {
                        let key_index = (round * 7 + writer * 3) % 64;
                        let key = key_index.to_be_bytes();
                        let sequence = clock.fetch_add(1, Ordering::SeqCst);
                        let value = sequence.to_le_bytes();
                        if !membuffer.insert(&memtable, &key, sequence, ValueKind::Put, &value) {
                            memtable.insert(&key, sequence, ValueKind::Put, &value);
                        }
                        completed[key_index as usize].fetch_max(sequence, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let reader = {
            let (membuffer, memtable, completed, stop) = (
                Arc::clone(&membuffer),
                Arc::clone(&memtable),
                Arc::clone(&completed),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    for key_index in 0..64u64 {
                        let floor = completed[key_index as usize].load(Ordering::SeqCst);
                        let found = read(
                            &membuffer,
                            &memtable,
                            &key_index.to_be_bytes(),
                            u64::MAX >> 8,
                        );
                        let found = found.map_or(0, |(sequence, _)| sequence);
                        assert!(
                            found >= floor,
                            "key {key_index}: read {found}, completed {floor}"
                        );
                    }
                }
            })
        };
        for writer in writers {
            writer.join().expect("writer");
        }
        stop.store(true, Ordering::SeqCst);
        reader.join().expect("reader");
        membuffer.stop();
        membuffer.drain_all(&memtable);
        assert_eq!(membuffer.undrained(), 0);
        assert_eq!(memtable.len(), 6000);
        memtable.check_invariants().expect("memtable invariants");
        let last = clock.load(Ordering::SeqCst);
        for sequence in 1..last {
            // Every version is readable at its own sequence, from the memtable alone now.
            let found = (0..64u64).find_map(|key| {
                memtable
                    .get_entry(&key.to_be_bytes(), sequence)
                    .filter(|(found, _, _)| *found == sequence)
            });
            assert!(found.is_some(), "version {sequence} lost");
        }
        assert!(membuffer.config.counters.drains.get() > 0);
    }
}

/// Updates of a few hot keys are overwritten in place: the old version moves to the memtable,
/// the table takes no new memory (no drain at all with a budget far below the bytes written),
/// and every version stays readable at its own sequence — a snapshot's view is kept.
#[test]
fn hot_keys_are_updated_in_place_and_old_versions_stay_readable() {
    let memtable = Memtable::with_capacity(1 << 20);
    let membuffer = Membuffer::new(config(16 << 10, true, 0));
    let mut sequence = 1;
    // The sample: 16 distinct keys set the boundaries (these go to the memtable).
    for key in 0..16u64 {
        assert!(!membuffer.insert(
            &memtable,
            &key.to_be_bytes(),
            sequence,
            ValueKind::Put,
            b"s"
        ));
        memtable.insert(&key.to_be_bytes(), sequence, ValueKind::Put, b"s");
        sequence += 1;
    }
    let first = sequence;
    for round in 0..2000u64 {
        let key = (round % 4).to_be_bytes();
        let value = format!("value {round} {}", "x".repeat((round % 24) as usize));
        if !membuffer.insert(&memtable, &key, sequence, ValueKind::Put, value.as_bytes()) {
            memtable.insert(&key, sequence, ValueKind::Put, value.as_bytes());
        }
        sequence += 1;
    }
    let counters = &membuffer.config.counters;
    assert_eq!(counters.drains.get(), 0, "hot keys filled the Membuffer");
    assert!(counters.moved_versions.get() >= 2000 - 4 - counters.direct_writes.get());
    for (round, at) in (first..sequence).enumerate() {
        let key = ((round as u64) % 4).to_be_bytes();
        let expected = format!("value {round} {}", "x".repeat(round % 24));
        let found = read(&membuffer, &memtable, &key, at);
        assert_eq!(found, Some((at, expected.into_bytes())), "at sequence {at}");
    }
}

/// A drained table is freed once no reader is pinned: nothing stays counted against the write
/// buffer after the drains.
#[test]
fn drained_tables_are_freed() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 22));
    let membuffer = Membuffer::new(config(16 << 10, true, 0));
    for sequence in 1..20_000u64 {
        let key = (sequence * 2_654_435_761 % 1_000_003).to_be_bytes();
        if !membuffer.insert(&memtable, &key, sequence, ValueKind::Put, b"value") {
            memtable.insert(&key, sequence, ValueKind::Put, b"value");
        }
    }
    membuffer.drain_all(&memtable);
    assert!(membuffer.config.counters.drains.get() > 1);
    // Left: the current tables' slot arrays and what their (empty) arenas accounted.
    let layout = membuffer.layout.get().unwrap();
    let live: usize = layout
        .partitions
        .iter()
        .map(|partition| {
            let table = Membuffer::table(&partition.current).unwrap();
            table.slot_bytes() + table.accounted_bytes()
        })
        .sum();
    assert!(membuffer.retired.lock().unwrap().is_empty());
    assert_eq!(membuffer.memory_bytes(), live);
    assert!(live < membuffer.config.budget_bytes, "{live}");
    assert_eq!(membuffer.undrained(), 0);
}

/// Table sizing (`sizing`): scans that drain partitions holding a few versions shrink their
/// next tables to the floor; a record a full-size table takes is still taken by a shrunk one
/// (the one that overflows it makes its drain grow the next); writers that fill the tables
/// grow them back to the partition's share; every version reads back through it all.
#[test]
fn tables_shrink_under_scan_drains_and_grow_back_under_writes() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 24));
    let membuffer = Membuffer::new(config(4 << 20, true, 0));
    let share = membuffer.table_bytes_max(4);
    let key = |index: u64| (index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8).to_be_bytes();
    let mut sequence = 0u64;
    // Puts one version; true if the Membuffer took it.
    let mut put = |index: u64, value: &[u8]| {
        sequence += 1;
        let taken = membuffer.insert(&memtable, &key(index), sequence, ValueKind::Put, value);
        if !taken {
            memtable.insert(&key(index), sequence, ValueKind::Put, value);
        }
        taken
    };
    let table_bytes = |membuffer: &Membuffer| -> Vec<usize> {
        let layout = membuffer.layout.get().unwrap();
        layout
            .partitions
            .iter()
            .map(|partition| partition.table_bytes.load(Ordering::Relaxed))
            .collect()
    };
    // The sample, then scans: a few versions per partition, drained each time.
    for index in 0..64 {
        put(index, &index.to_le_bytes());
    }
    assert_eq!(table_bytes(&membuffer), vec![share; 4]);
    for round in 0..8u64 {
        for index in 0..32 {
            let index = 1_000 + round * 32 + index;
            put(index, &index.to_le_bytes());
        }
        membuffer.drain_all(&memtable);
    }
    let floor = super::sizing::table_bytes_min(share);
    assert!(floor < share);
    assert_eq!(table_bytes(&membuffer), vec![floor; 4]);
    // A 40 KiB record in a 16 KiB table: its writer drains the partition; the next table
    // (32 KiB) is still too small, so the record goes to the memtable; the next put of it
    // drains again into a 64 KiB table and goes in.
    let huge = vec![9u8; 40 << 10];
    assert!(!put(3_000, &huge), "a 40 KiB value fit a 32 KiB table");
    assert!(
        put(3_000, &huge),
        "the partition's tables did not grow for a 40 KiB value"
    );
    // 10 KiB records: over a quarter of a shrunk table (16 KiB), under a quarter of the share.
    let big = vec![7u8; 10 << 10];
    for index in 2_000..2_006 {
        assert!(put(index, &big), "a 10 KiB value went around the Membuffer");
    }
    // Writers fill the small tables; each full drain doubles the next one.
    for index in 100_000..400_000 {
        put(index, &index.to_le_bytes());
    }
    assert_eq!(table_bytes(&membuffer), vec![share; 4]);
    membuffer.drain_all(&memtable);
    for index in 2_000..2_006 {
        let (_, value) = read(&membuffer, &memtable, &key(index), u64::MAX >> 8).unwrap();
        assert_eq!(value, big, "key {index}");
    }
    let (_, value) = read(&membuffer, &memtable, &key(3_000), u64::MAX >> 8).unwrap();
    assert_eq!(value, huge);
    for index in (0..64)
        .chain(1_000..1_256)
        .chain((100_000..400_000).step_by(997))
    {
        let (_, value) = read(&membuffer, &memtable, &key(index), u64::MAX >> 8).unwrap();
        assert_eq!(value, index.to_le_bytes(), "key {index}");
    }
}

/// A drain stamp stays quiet until a drain starts, and a stamp taken while a drain runs is
/// never quiet, even once that drain finishes (`scan::DrainStamp`, invariant 5).
#[test]
fn drain_stamps_see_every_drain_started_or_running() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 20));
    let membuffer = Membuffer::new(config(1 << 20, true, 0));
    for index in 0..64u64 {
        put_either(&membuffer, &memtable, index * 16, index + 1);
    }
    let before = membuffer.drain_stamp();
    assert!(membuffer.quiet_since(before), "nothing drained yet");
    membuffer.drain_all(&memtable);
    assert!(!membuffer.quiet_since(before), "a drain ran since");
    let after = membuffer.drain_stamp();
    assert!(membuffer.quiet_since(after));
    // A drain in flight when the stamp is taken: started, not finished.
    membuffer.drains.started.fetch_add(1, Ordering::SeqCst);
    let during = membuffer.drain_stamp();
    assert!(!membuffer.quiet_since(during), "running at the stamp");
    membuffer.drains.finished.fetch_add(1, Ordering::SeqCst);
    assert!(
        !membuffer.quiet_since(during),
        "its versions may be behind the cursor"
    );
    assert!(membuffer.quiet_since(membuffer.drain_stamp()));
}

/// A partition's next table expects the drained one's mean record size: 112-byte values make
/// ~152-byte records, so after the first drains the slot arrays are less than half the size
/// sized for 64-byte records, and the tables still fill by bytes (every write is taken).
#[test]
fn slot_arrays_follow_the_record_size() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 26));
    let membuffer = Membuffer::new(config(4 << 20, true, 0));
    let key = |index: u64| (index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8).to_be_bytes();
    let value = [5u8; 112];
    let slot_bytes = |membuffer: &Membuffer| -> usize {
        let layout = membuffer.layout.get().unwrap();
        layout
            .partitions
            .iter()
            .map(|partition| {
                Membuffer::table(&partition.current).map_or(0, super::table::Table::slot_bytes)
            })
            .sum()
    };
    let mut sequence = 0u64;
    let mut put = |membuffer: &Membuffer, index: u64| {
        sequence += 1;
        let taken = membuffer.insert(&memtable, &key(index), sequence, ValueKind::Put, &value);
        if !taken {
            memtable.insert(&key(index), sequence, ValueKind::Put, &value);
        }
        taken
    };
    for index in 0..64 {
        put(&membuffer, index);
    }
    let before = slot_bytes(&membuffer);
    assert!(before > 0, "the layout is built");
    let mut taken = 0u64;
    for index in 64..200_000 {
        taken += u64::from(put(&membuffer, index));
    }
    let after = slot_bytes(&membuffer);
    assert!(
        after * 2 <= before,
        "slot arrays of {after} bytes after drains of 152-byte records, {before} before"
    );
    assert!(
        membuffer.config.counters.drains.get() >= 4,
        "every partition drained at least once"
    );
    // Only the writes that found their table full and its drain lock taken miss; with one
    // writer, none does.
    assert_eq!(taken, 200_000 - 64);
}

/// A drained table's versions leave the Membuffer's count when they reach the memtable, not
/// when the table is freed: a pinned thread (a writer, always, under load) keeps retired
/// tables alive, and counting their versions twice sealed write buffers ~3 % early.
#[test]
fn drained_versions_are_counted_once_while_their_table_waits_to_be_freed() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 24));
    let membuffer = Membuffer::new(config(1 << 20, true, 0));
    let value = [3u8; 100];
    for sequence in 1..5_000u64 {
        let key = (sequence * 2_654_435_761 % 1_000_003).to_be_bytes();
        if !membuffer.insert(&memtable, &key, sequence, ValueKind::Put, &value) {
            memtable.insert(&key, sequence, ValueKind::Put, &value);
        }
    }
    let before = membuffer.memory_bytes();
    let pin = membuffer.epoch.pin();
    membuffer.drain_all(&memtable);
    let retired = membuffer.retired.lock().unwrap().len();
    assert!(retired >= 4, "the pin keeps every drained table: {retired}");
    let layout = membuffer.layout.get().unwrap();
    let slots: usize = layout
        .partitions
        .iter()
        .map(|partition| Membuffer::table(&partition.current).unwrap().slot_bytes())
        .sum();
    let retired_slots: usize = membuffer
        .retired
        .lock()
        .unwrap()
        .iter()
        // SAFETY: retired tables stay alive while `pin` is held.
        .map(|&(_, table)| unsafe { (*table).slot_bytes() })
        .sum();
    assert_eq!(
        membuffer.memory_bytes(),
        slots + retired_slots,
        "drained from {before} bytes: only slot arrays stay counted"
    );
    assert_eq!(
        membuffer.version_bytes(),
        0,
        "every version is in the memtable"
    );
    drop(pin);
}

/// A writer that finds its partition full swaps in a fresh table and its version goes there
/// at once; the full table's move into the memtable waits until the writer drops the token
/// (the write path drops it after publishing the write, so later writers never wait for a
/// whole drain). Meanwhile every version stays readable (from the draining table), the
/// partition takes more writes without anyone draining it, and its drain lock stays taken, so
/// nobody else drains it; dropping the token moves everything.
#[test]
fn a_deferred_drain_keeps_the_partition_writable_and_moves_everything_when_dropped() {
    let memtable = Memtable::with_capacity(1 << 22);
    let membuffer = Membuffer::new(config(16 << 10, true, 0));
    let counters = Arc::clone(&membuffer.config.counters);
    let mut written = Vec::new();
    let mut held = None;
    for sequence in 1..20_000u64 {
        let key = (sequence * 2_654_435_761 % 1_000_003).to_be_bytes();
        let mut deferred = None;
        let taken = membuffer.insert_deferring(
            &memtable,
            &key,
            sequence,
            ValueKind::Put,
            &sequence.to_le_bytes(),
            &mut deferred,
        );
        if !taken {
            memtable.insert(&key, sequence, ValueKind::Put, &sequence.to_le_bytes());
        }
        written.push((key, sequence));
        if let Some(deferred) = deferred {
            assert!(
                taken,
                "a fresh table takes the version of the writer that swapped"
            );
            held = Some(deferred);
            break;
        }
    }
    let Some(deferred) = held else {
        panic!("no partition filled");
    };
    assert_eq!(counters.drains.get(), 0, "the move waits for the token");
    let Some(&(key, sequence)) = written.last() else {
        panic!("nothing written");
    };
    let layout = membuffer.layout.get().unwrap();
    let partition = &layout.partitions[layout.boundaries.partition_of(&key)];
    assert!(
        partition.drain_lock.try_lock().is_err(),
        "the drain lock stays taken"
    );
    assert!(!partition.draining.load(Ordering::SeqCst).is_null());
    for &(key, sequence) in &written {
        let found = read(&membuffer, &memtable, &key, SEQUENCE_MAX);
        assert_eq!(found, Some((sequence, sequence.to_le_bytes().to_vec())));
    }
    // The partition takes another write while its drain is pending, without draining.
    let next = sequence + 1;
    let mut again = None;
    let taken =
        membuffer.insert_deferring(&memtable, &key, next, ValueKind::Put, b"newer", &mut again);
    assert!(taken && again.is_none());
    assert_eq!(counters.drains.get(), 0);
    drop(deferred);
    assert_eq!(
        (counters.drains.get(), counters.writer_drains.get()),
        (1, 1)
    );
    assert!(partition.draining.load(Ordering::SeqCst).is_null());
    assert!(
        partition.drain_lock.try_lock().is_ok(),
        "released with the token"
    );
    for &(key, sequence) in &written[..written.len() - 1] {
        let found = read(&membuffer, &memtable, &key, SEQUENCE_MAX);
        assert_eq!(found, Some((sequence, sequence.to_le_bytes().to_vec())));
    }
    assert_eq!(
        read(&membuffer, &memtable, &key, SEQUENCE_MAX),
        Some((next, b"newer".to_vec()))
    );
    assert_eq!(
        read(&membuffer, &memtable, &key, sequence),
        Some((sequence, sequence.to_le_bytes().to_vec()))
    );
}

/// Bug (found in review): a drain installed the fresh table before it counted the swap, so
/// a scan (or the flush's `drain_all`) that loaded the swap count in between piggybacked on
/// that drain and skipped the fresh table, though a version written there before the scan's
/// read point belongs to it: the flush then left an acknowledged write out of its table.
/// Here a version lands in the fresh table inside that window, a second thread's
/// `drain_all` loads the count and waits for the lock, and the version must reach the
/// memtable.
#[test]
fn a_drain_racing_a_swap_moves_what_the_fresh_table_took_before_it() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 20));
    let membuffer = Arc::new(Membuffer::new(config(64 << 10, true, 0)));
    let mut sequence = 1;
    // The sample (16 keys, to the memtable), then a version of each in the Membuffer: every
    // partition holds some.
    for key in (0..16u64).chain(0..16) {
        put_either(&membuffer, &memtable, key, sequence);
        sequence += 1;
    }
    let key = 1u64.to_be_bytes();
    let partition = membuffer.partition_of(&key);
    let late = sequence;
    let racer = Arc::new(std::sync::Mutex::new(None));
    SWAP_HOOK.with(|cell| {
        let (membuffer, memtable, racer) = (
            Arc::clone(&membuffer),
            Arc::clone(&memtable),
            Arc::clone(&racer),
        );
        *cell.borrow_mut() = Some(Box::new(move || {
            // Lands in the fresh table: writers never wait for the drain lock.
            assert!(membuffer.insert(&memtable, &key, late, ValueKind::Put, b"late"));
            let (membuffer, memtable) = (Arc::clone(&membuffer), Arc::clone(&memtable));
            let handle = std::thread::spawn(move || membuffer.drain_all(&memtable));
            // Long enough for `drain_all` to load the swap count and block on the lock.
            std::thread::sleep(std::time::Duration::from_millis(100));
            *racer.lock().unwrap() = Some(handle);
        }));
    });
    membuffer.drain_again_for_scan(partition, &memtable);
    SWAP_HOOK.with(|cell| cell.borrow_mut().take());
    let handle = racer.lock().unwrap().take().expect("the hook ran");
    handle.join().expect("drain_all finished");
    assert_eq!(
        memtable.get_entry(&key, SEQUENCE_MAX).map(|entry| entry.0),
        Some(late),
        "the version the fresh table took before drain_all began is in the memtable"
    );
}

/// Invariant 6: a scan tells from the swap count, `occupied` and `draining` alone whether a
/// partition holds versions to move — true from the first version put into its table, true
/// throughout a drain (inside the swap, the old table is draining and the count has grown),
/// false once the drain moved them, and true again once the fresh table takes a version.
#[test]
fn a_partition_is_pending_from_its_first_version_until_a_drain_moved_it() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 20));
    let membuffer = Arc::new(Membuffer::new(config(64 << 10, true, 0)));
    let put = |key: u64, sequence: u64| put_either(&membuffer, &memtable, key, sequence);
    // The sample goes to the memtable; the partitions exist from then on, empty.
    for key in 0..16u64 {
        put(key * 16, key + 1);
    }
    let pending = |partition: usize| {
        let layout = membuffer.layout.get().expect("the sample is complete");
        let state = layout.partitions.get(partition).expect("a partition");
        state.pending_since(state.swaps.load(Ordering::SeqCst))
    };
    let key = 5u64 * 16 + 1;
    let partition = membuffer.partition_of(&key.to_be_bytes());
    assert!(!pending(partition), "nothing was put in it yet");
    put(key, 100);
    assert!(pending(partition), "its table holds a version");
    let seen_inside = Arc::new(AtomicBool::new(false));
    SWAP_HOOK.with(|cell| {
        let (membuffer, seen_inside) = (Arc::clone(&membuffer), Arc::clone(&seen_inside));
        *cell.borrow_mut() = Some(Box::new(move || {
            let layout = membuffer.layout.get().expect("built");
            let state = layout.partitions.get(partition).expect("a partition");
            let swaps = state.swaps.load(Ordering::SeqCst);
            seen_inside.store(state.pending_since(swaps), Ordering::SeqCst);
        }));
    });
    membuffer.drain_again_for_scan(partition, &memtable);
    SWAP_HOOK.with(|cell| cell.borrow_mut().take());
    assert!(
        seen_inside.load(Ordering::SeqCst),
        "inside the swap the old table is draining"
    );
    assert!(!pending(partition), "the drain moved it");
    assert_eq!(
        memtable
            .get_entry(&key.to_be_bytes(), SEQUENCE_MAX)
            .map(|e| e.0),
        Some(100)
    );
    put(key + 1, 101);
    assert!(pending(partition), "the fresh table took a version");
    for other in (0..4).filter(|&other| other != partition) {
        assert!(!pending(other), "partition {other} took nothing");
    }
}

/// A bypass racing two writers (`bypass`): every completed version ends in the memtable,
/// nothing stays in (or later enters) the Membuffer, and its partitions have nothing to drain.
#[test]
fn a_bypass_moves_every_version_and_keeps_the_membuffer_empty() {
    let memtable = Arc::new(Memtable::with_capacity(1 << 24));
    let membuffer = Arc::new(Membuffer::new(config(64 << 10, true, 0)));
    let clock = Arc::new(AtomicU64::new(1));
    let completed: Arc<Vec<AtomicU64>> = Arc::new((0..512).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|writer| {
            let (membuffer, memtable, clock, completed, stop) = (
                Arc::clone(&membuffer),
                Arc::clone(&memtable),
                Arc::clone(&clock),
                Arc::clone(&completed),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let key = (round * 13 + writer * 5) % 512;
                    let sequence = clock.fetch_add(1, Ordering::SeqCst);
                    put_either(&membuffer, &memtable, key, sequence);
                    completed[key as usize].fetch_max(sequence, Ordering::SeqCst);
                    round += 1;
                }
            })
        })
        .collect();
    let counters = Arc::clone(&membuffer.config.counters);
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let started = std::time::Instant::now();
        while !done() {
            assert!(started.elapsed().as_secs() < 30, "{what}");
            std::thread::yield_now();
        }
    };
    wait_for("the Membuffer takes writes", &|| {
        counters.writes.get() >= 2_000
    });
    membuffer.bypass(&memtable);
    assert!(membuffer.is_bypassed());
    let taken = counters.writes.get();
    let direct = counters.direct_writes.get();
    wait_for("writes continue past the bypass", &|| {
        counters.direct_writes.get() >= direct + 2_000
    });
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().unwrap();
    }
    // A writer counts its insert after it left the table, so each may count one that the
    // bypass moved after `taken` was read; none can count one made later.
    assert!(
        counters.writes.get() <= taken + 2,
        "nothing enters after the bypass"
    );
    assert_eq!(membuffer.undrained(), 0, "invariant 1: nothing stays");
    assert_eq!(counters.bypasses.get(), 1);
    for (key, completed) in completed.iter().enumerate() {
        let wanted = completed.load(Ordering::SeqCst);
        let key = (key as u64).to_be_bytes();
        assert!(membuffer.get(&key, SEQUENCE_MAX).is_none());
        let found = memtable.get_entry(&key, SEQUENCE_MAX).map(|entry| entry.0);
        assert_eq!(found, (wanted > 0).then_some(wanted), "key {key:?}");
    }
    let mut marks = membuffer.scan_marks().expect("partitions exist");
    for partition in 0..marks.partitions() {
        assert!(membuffer
            .enter_for_scan(&mut marks, partition, &memtable)
            .is_none());
    }
    assert_eq!(counters.scan_drains.get(), 0, "nothing left to drain");
}
