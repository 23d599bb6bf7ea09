//! The Membuffer's unit tests: versions read back exactly through every stage (current table,
//! draining, memtable) while writers, drains and readers run at once.

use super::{Membuffer, MembufferConfig};
use crate::key::ValueKind;
use crate::memtable::Memtable;
use crate::stats::MembufferCounters;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn config(budget_bytes: usize, multi_insert: bool, drainers: usize) -> MembufferConfig {
    MembufferConfig {
        budget_bytes,
        partitions: 4,
        sample_keys: 16,
        multi_insert,
        drainers,
        counters: Arc::new(MembufferCounters::default()),
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
    let lower = memtable.get_entry(key, sequence);
    super::newer(upper, lower).map(|(sequence, _, value)| (sequence, value.to_vec()))
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
