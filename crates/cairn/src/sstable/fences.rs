//! [`Fences`]: the index block's fence keys condensed for point lookups and iterator seeks — the first 8 bytes
//! of each fence's user key as one big-endian `u64`, in one dense array.
//!
//! A point lookup finds the one data block that may hold its key by a binary search over the
//! index block's fence keys. Searched in the block itself, each step reads a restart offset
//! and then an entry elsewhere in the block (two cache misses per step on a large index) and
//! parses the entry. Here the search runs over dense `u64`s (one load, one compare per step),
//! and only fences whose prefix equals the target's are compared in full, in the block.
//!
//! Why it is exact: the zero-padded 8-byte big-endian prefix is monotone in byte order
//! (`a < b` ⇒ `prefix(a) <= prefix(b)`), so every fence with a smaller prefix sorts before
//! the target and every fence with a larger one after it.
//!
//! Thread-safety contract: immutable after construction; shared with its table.
//!
//! Invariants:
//! 1. `prefixes[i]` is the prefix of the user key of the index block's entry `i`, and the
//!    index block has a restart point at every entry (otherwise no `Fences` is built).
//! 2. `prefixes` is non-decreasing (follows from 1, the index order and monotonicity).

use super::block::Block;
use crate::key::{compare_internal_keys, user_key};
use std::cmp::Ordering;

/// Fences with the target's prefix stepped over one by one before a binary search.
const SCAN_STEPS: usize = 8;

/// The fence prefixes of one index block (module doc).
#[derive(Debug)]
pub struct Fences {
    prefixes: Vec<u64>,
}

/// The zero-padded big-endian first 8 bytes of `key`.
fn prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    for (slot, byte) in bytes.iter_mut().zip(key) {
        *slot = *byte;
    }
    u64::from_be_bytes(bytes)
}

impl Fences {
    /// The fences of `index`, or `None` if its entries are not each a restart point (a
    /// builder with another restart interval) or one does not decode (the iterator then
    /// reports it).
    pub fn new(index: &Block, entry_count: usize) -> Option<Fences> {
        if index.restart_count() != entry_count || entry_count == 0 {
            return None;
        }
        let mut prefixes = Vec::with_capacity(entry_count);
        for position in 0..entry_count {
            let (key, _) = index.restart_entry(position)?;
            prefixes.push(prefix(user_key(key)));
        }
        // Invariant 2; a violation means the index is out of order, which the open check
        // reports: decline rather than search wrongly.
        prefixes
            .windows(2)
            .all(|pair| matches!(pair, [a, b] if a <= b))
            .then_some(Fences { prefixes })
    }

    /// The position of the first fence `>= target` (an internal key) in `index`, the block
    /// these fences were built from; `None` if every fence is smaller, or a fence compared in
    /// full does not decode.
    pub fn seek(&self, index: &Block, target: &[u8]) -> Option<usize> {
        let wanted = prefix(user_key(target));
        let low = self.prefixes.partition_point(|&fence| fence < wanted);
        let rest = self.prefixes.get(low..)?;
        // Fences sharing a prefix are few with distinct keys: step over them in place (one
        // cache line) and binary-search only a long run of them.
        let mut equal = rest
            .iter()
            .take(SCAN_STEPS)
            .take_while(|&&fence| fence == wanted)
            .count();
        if equal == SCAN_STEPS {
            equal = rest.partition_point(|&fence| fence == wanted);
        }
        // Only fences with the target's prefix need the full comparison.
        let mut left = low;
        let mut right = low + equal;
        while left < right {
            let middle = left + (right - left) / 2;
            let (key, _) = index.restart_entry(middle)?;
            if compare_internal_keys(key, target) == Ordering::Less {
                left = middle + 1;
            } else {
                right = middle;
            }
        }
        (left < self.prefixes.len()).then_some(left)
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes held.
    pub fn size_bytes(&self) -> usize {
        self.prefixes.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use crate::key::{internal_key, ValueKind};
    use crate::sstable::block::{BlockBuilder, BlockOrigin};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn seeks_agree_with_the_block_iterator() {
        let mut rng = SmallRng::seed_from_u64(5);
        for round in 0..100 {
            // Keys sharing long prefixes, short keys and 0xff bytes, so prefixes tie often.
            let mut users: Vec<Vec<u8>> = (0..rng.gen_range(1..200))
                .map(|_| {
                    let length = rng.gen_range(0..14);
                    (0..length)
                        .map(|_| [0u8, 1, b'a', 0xff][rng.gen_range(0..4)])
                        .collect()
                })
                .collect();
            users.sort();
            users.dedup();
            let mut builder = BlockBuilder::new(1);
            for (position, user) in users.iter().enumerate() {
                builder.add(
                    &internal_key(user, 100 - (position % 7) as u64, ValueKind::Put),
                    b"h",
                );
            }
            let block =
                std::sync::Arc::new(Block::new(builder.finish(), BlockOrigin::detached()).unwrap());
            let fences = Fences::new(&block, users.len()).expect("restart interval 1");
            for _ in 0..50 {
                let length = rng.gen_range(0..14);
                let user: Vec<u8> = (0..length)
                    .map(|_| [0u8, 1, b'a', 0xff][rng.gen_range(0..4)])
                    .collect();
                let target = internal_key(&user, rng.gen_range(90..110), ValueKind::SEEK);
                let mut iterator = block.iter();
                iterator.seek(&target);
                let expected = iterator.valid().then(|| iterator.key().to_vec());
                let found = fences
                    .seek(&block, &target)
                    .map(|position| block.restart_entry(position).unwrap().0.to_vec());
                assert_eq!(found, expected, "round {round}, target {target:?}");
            }
        }
    }

    #[test]
    fn an_index_without_a_restart_at_every_entry_gets_no_fences() {
        let mut builder = BlockBuilder::new(4);
        for user in [b"a", b"b", b"c"] {
            builder.add(&internal_key(user, 1, ValueKind::Put), b"h");
        }
        let block = Block::new(builder.finish(), BlockOrigin::detached()).unwrap();
        assert!(Fences::new(&block, 3).is_none());
    }
}
