//! Key-range partitioning of the Membuffer: the boundaries between partitions are quantiles of
//! a sample of the keys actually written, so they split the keys in use whatever prefix they
//! share (`FloDB` partitions by the key's leading bits, which puts every key with a common
//! prefix — big-endian numbers, keys sharing a first byte — into one partition).
//!
//! Thread-safety contract: `Sampler::offer` may be called from many threads (a mutex guards
//! the sample, taken only until the boundaries exist); `Boundaries` is immutable once built
//! and shared read-only.
//!
//! Invariants:
//! 1. Boundaries are strictly increasing; partition `i` holds the keys in
//!    `[boundaries[i - 1], boundaries[i])` (open at both ends), so a key has one partition.
//! 2. There are fewer boundaries than partitions requested.
//! 3. `prefixes[i]` is `prefix(keys[i])`: the first 8 bytes as a big-endian number, zero
//!    padded. Zero-padded prefixes order like the keys (a smaller prefix means a smaller
//!    key; equal prefixes decide nothing), so `partition_of` compares integers and falls back
//!    to bytes only among boundaries sharing the key's prefix — measured, the byte compares
//!    (a `memcmp` call and a pointer chase per step) were a read's largest cost added by the
//!    Membuffer.

use std::sync::Mutex;

/// Up to this many boundaries `partition_of` counts the prefixes instead of searching them
/// (`Boundaries::prefix_counts`).
const LINEAR_BOUNDARIES_MAX: usize = 64;

/// The partition boundaries (invariant 1) and their prefixes (invariant 3).
#[derive(Debug)]
pub(super) struct Boundaries {
    keys: Vec<Vec<u8>>,
    prefixes: Vec<u64>,
}

/// The first 8 bytes of `key` as a big-endian number, zero padded (invariant 3): a smaller
/// prefix means a smaller key.
pub(crate) fn prefix(key: &[u8]) -> u64 {
    if let Some(head) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    let mut bytes = [0u8; 8];
    for (to, from) in bytes.iter_mut().zip(key) {
        *to = *from;
    }
    u64::from_be_bytes(bytes)
}

impl Boundaries {
    /// Boundaries splitting `sample` into at most `partitions` ranges of about equal count.
    pub(super) fn from_sample(mut sample: Vec<Vec<u8>>, partitions: usize) -> Boundaries {
        sample.sort_unstable();
        sample.dedup();
        let wanted = partitions.max(1);
        let mut boundaries: Vec<Vec<u8>> = (1..wanted)
            .filter_map(|part| sample.get(part * sample.len() / wanted).cloned())
            .collect();
        boundaries.dedup();
        if cfg!(feature = "invariants") {
            assert!(
                boundaries.windows(2).all(|pair| pair.first() < pair.get(1)),
                "partition boundaries not strictly increasing (invariant 1)"
            );
            assert!(boundaries.len() < wanted, "invariant 2");
        }
        Boundaries {
            prefixes: boundaries.iter().map(|key| prefix(key)).collect(),
            keys: boundaries,
        }
    }

    /// The partition of `key` (invariant 1): the number of boundaries at or below it.
    pub(super) fn partition_of(&self, key: &[u8]) -> usize {
        let wanted = prefix(key);
        // Invariant 3: a smaller prefix is a smaller boundary, a larger one a larger; only
        // boundaries with the key's own prefix need their bytes compared.
        let (below, through) = self.prefix_counts(wanted);
        let tied = self.keys.get(below..through).unwrap_or_default();
        below + tied.partition_point(|boundary| boundary.as_slice() <= key)
    }

    /// How many boundary prefixes are below `wanted`, and how many at or below it.
    ///
    /// Why two ways: every write and every scan's seek asks for a partition. The standard
    /// binary search is branch-free but serial: over the default 15 boundaries it is two
    /// chains of four loads, each waiting for the compare before it. A count over all 15
    /// issues its loads and compares independently. Measured in YCSB E profiles at 2
    /// threads: `partition_of`'s own share of the CPU went from 0.40 % to 0.26 %. Past
    /// `LINEAR_BOUNDARIES_MAX` (up to 1,023 boundaries are allowed) a count would touch
    /// every one of them, so the search stays.
    ///
    /// Only the prefixes below are counted; those equal to `wanted` follow them (the
    /// prefixes are sorted, invariant 3), and are usually none. Under callgrind, counting
    /// both in one pass cost 185 instructions per scan's seek, this 127.
    #[inline]
    fn prefix_counts(&self, wanted: u64) -> (usize, usize) {
        let below = if self.prefixes.len() > LINEAR_BOUNDARIES_MAX {
            self.prefixes.partition_point(|&other| other < wanted)
        } else {
            self.prefixes
                .iter()
                .map(|&other| usize::from(other < wanted))
                .sum()
        };
        let tied = self
            .prefixes
            .get(below..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&other| other == wanted)
            .count();
        (below, below + tied)
    }

    /// The smallest key of partition `partition`: None for the first (it is open below) and
    /// past the last.
    pub(super) fn start_of(&self, partition: usize) -> Option<&[u8]> {
        self.keys.get(partition.checked_sub(1)?).map(Vec::as_slice)
    }

    /// The prefix of `start_of(partition)` (invariant 3), without reading the key's bytes (one
    /// more cache line); `u64::MAX` where `start_of` is None (the first partition, and past
    /// the last).
    pub(super) fn start_prefix_of(&self, partition: usize) -> u64 {
        partition
            .checked_sub(1)
            .and_then(|index| self.prefixes.get(index))
            .copied()
            .unwrap_or(u64::MAX)
    }

    /// Number of partitions these boundaries make.
    pub(super) fn partitions(&self) -> usize {
        self.keys.len() + 1
    }
}

/// Collects the first keys written until there are enough to place the boundaries.
#[derive(Debug)]
pub(super) struct Sampler {
    wanted: usize,
    sample: Mutex<Vec<Vec<u8>>>,
}

impl Sampler {
    /// A sampler that wants `wanted` keys.
    pub(super) fn new(wanted: usize) -> Sampler {
        Sampler {
            wanted: wanted.max(1),
            sample: Mutex::new(Vec::new()),
        }
    }

    /// Adds `key`; returns the whole sample once it has `wanted` keys (to exactly one caller).
    pub(super) fn offer(&self, key: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut sample = self
            .sample
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sample.len() >= self.wanted {
            return None;
        }
        sample.push(key.to_vec());
        (sample.len() == self.wanted).then(|| sample.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::Boundaries;

    /// A seeded pseudo-random sequence (xorshift64), the same on every run.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// `partition_of` counts the boundaries at or below a key exactly as a byte comparison
    /// does, for keys shorter and longer than the 8-byte prefix, sharing it, and with zero
    /// bytes where the padding goes (invariant 3); `start_prefix_of` is the prefix of
    /// `start_of`.
    #[test]
    fn prefix_compares_agree_with_byte_compares() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        let mut random_key = move || {
            let length = (next() % 12) as usize;
            (0..length)
                .map(|_| match next() % 4 {
                    0 => 0,
                    1 => b'k',
                    _ => (next() % 3) as u8,
                })
                .collect::<Vec<u8>>()
        };
        // 16 and 64 partitions count the prefixes; 200 search them (`LINEAR_BOUNDARIES_MAX`).
        let mut searched = 0;
        for (round, partitions) in (0..60).zip([16, 64, 200].into_iter().cycle()) {
            let sample: Vec<Vec<u8>> = (0..64 + round * 8).map(|_| random_key()).collect();
            let boundaries = Boundaries::from_sample(sample, partitions);
            searched += usize::from(boundaries.keys.len() > super::LINEAR_BOUNDARIES_MAX);
            for partition in 0..=boundaries.partitions() {
                assert_eq!(
                    boundaries.start_prefix_of(partition),
                    boundaries
                        .start_of(partition)
                        .map_or(u64::MAX, super::prefix),
                    "partition {partition}"
                );
            }
            for _ in 0..500 {
                let key = random_key();
                let by_bytes = boundaries
                    .keys
                    .iter()
                    .filter(|boundary| boundary.as_slice() <= key.as_slice())
                    .count();
                assert_eq!(boundaries.partition_of(&key), by_bytes, "{key:?}");
            }
        }
        assert!(
            searched >= 10,
            "only {searched} rounds took the binary search"
        );
    }

    fn spread(keys: impl Iterator<Item = Vec<u8>>, partitions: usize) -> Vec<usize> {
        let keys: Vec<Vec<u8>> = keys.collect();
        let boundaries = Boundaries::from_sample(keys.iter().take(1024).cloned().collect(), 16);
        let mut counts = vec![0; partitions];
        for key in &keys {
            counts[boundaries.partition_of(key)] += 1;
        }
        counts
    }

    /// Bench keys (big-endian numbers with ~40 leading zero bits), keys sharing a first byte,
    /// random bytes and CS265 keys all spread over every partition (no partition holds over
    /// twice its share).
    #[test]
    fn boundaries_split_keys_with_a_common_prefix() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        let bench: Vec<Vec<u8>> = (0..20_000)
            .map(|_| (next() % 5_000_000).to_be_bytes().to_vec())
            .collect();
        let shared: Vec<Vec<u8>> = (0..20_000)
            .map(|_| {
                let mut key = next().to_be_bytes().to_vec();
                key[0] = b'k';
                key
            })
            .collect();
        let random: Vec<Vec<u8>> = (0..20_000).map(|_| next().to_le_bytes().to_vec()).collect();
        // The CS265 shell's keys: 32-bit values as sign-flipped big-endian `i64`s, so the
        // first four bytes are `80 00 00 00` or `7f ff ff ff`.
        let cs265: Vec<Vec<u8>> = (0..20_000)
            .map(|_| {
                let value = i64::from(((next() >> 32) as u32).cast_signed());
                (value.cast_unsigned() ^ (1 << 63)).to_be_bytes().to_vec()
            })
            .collect();
        for keys in [bench, shared, random, cs265] {
            let counts = spread(keys.into_iter(), 16);
            assert!(
                counts.iter().all(|&count| count < 2 * 20_000 / 16),
                "{counts:?}"
            );
        }
    }
}
