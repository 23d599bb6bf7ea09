//! Keys, values and the key distributions every engine shares.
//!
//! A key is the big-endian 8-byte key number followed by `'0'` padding up to `--key_size`
//! (as db_bench does), so byte order equals numeric order and `fillseq` writes in key order.
//! Values are slices of one buffer of seeded random bytes, identical for every engine.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Smallest accepted key size: the 8-byte key number.
pub const MIN_KEY_SIZE: usize = 8;

/// Writes key number `n` into `buf` (resized to `key_size`).
pub fn make_key(n: u64, key_size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&n.to_be_bytes());
    buf.resize(key_size.max(MIN_KEY_SIZE), b'0');
}

/// Writes a key that no workload ever writes, near key number `n`: with padding (`key_size`
/// over 8) the last byte becomes `'1'`, so the key sorts just after key `n` and before key
/// `n + 1` (inside the key range of the tables that hold its neighbours); with 8-byte keys it
/// is key number `num + n`, past every written key (only `Append` inserts go there).
pub fn make_missing_key(n: u64, num: u64, key_size: usize, buf: &mut Vec<u8>) {
    if key_size > MIN_KEY_SIZE {
        make_key(n, key_size, buf);
        if let Some(last) = buf.last_mut() {
            *last = b'1';
        }
    } else {
        make_key(num.saturating_add(n), key_size, buf);
    }
}

/// A shared pool of value bytes; `next` hands out `value_size` bytes at a rolling offset.
#[derive(Debug, Clone)]
pub struct ValuePool {
    data: Vec<u8>,
    position: usize,
    value_size: usize,
}

impl ValuePool {
    /// One MiB (or more, for large values) of seeded random bytes.
    #[cfg(test)]
    pub fn new(seed: u64, value_size: usize) -> Self {
        Self::with_ratio(seed, value_size, 1.0)
    }

    /// One MiB (or more) of seeded bytes that compress to about `ratio` of their size, as
    /// db_bench's `--compression_ratio` makes them: each 100-byte piece is `100 * ratio`
    /// random bytes repeated.
    pub fn with_ratio(seed: u64, value_size: usize, ratio: f64) -> Self {
        const PIECE: usize = 100;
        let length = (1 << 20).max(value_size * 2);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_da7a);
        let mut data = vec![0u8; length];
        rng.fill(&mut data[..]);
        // The fraction is a small positive number of bytes, well inside usize.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let random = ((PIECE as f64 * ratio).ceil() as usize).clamp(1, PIECE);
        if random < PIECE {
            for piece in data.chunks_mut(PIECE) {
                for index in random..piece.len() {
                    piece[index] = piece[index % random];
                }
            }
        }
        ValuePool {
            data,
            position: 0,
            value_size,
        }
    }

    /// The next value.
    pub fn next(&mut self) -> &[u8] {
        if self.position + self.value_size > self.data.len() {
            self.position = 0;
        }
        let start = self.position;
        self.position += self.value_size;
        &self.data[start..start + self.value_size]
    }
}

/// FNV-1a 64 over the 8 bytes of `value` (YCSB's scrambling hash).
pub fn fnv1a64(value: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// YCSB's Zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"): item 0 is the most popular; constant 0.99 by default.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `0..items` (items ≥ 1).
    pub fn new(items: u64, theta: f64) -> Self {
        let items = items.max(1);
        let zetan = zeta(items, theta);
        let zeta2 = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian {
            items,
            theta,
            alpha,
            zetan,
            eta,
        }
    }

    /// The next item.
    pub fn sample(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.items - 1);
        }
        let item = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        item.min(self.items - 1)
    }
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// How an operation picks its key number.
#[derive(Debug, Clone)]
pub enum KeyDist {
    /// Uniform over `0..n`.
    Uniform { n: u64 },
    /// YCSB scrambled Zipfian over `0..n`: popular items spread over the key space.
    ScrambledZipfian { zipf: Zipfian, n: u64 },
    /// YCSB "latest": the most recently inserted keys are the most popular.
    Latest { zipf: Zipfian },
    /// `hot_fraction` of the keys (in blocks of 100 consecutive keys spread over the key
    /// space) receive `hot_probability` of the accesses; the rest are uniform over all keys.
    /// cLSM §5.1: 90 % of accesses to a popular 10 %; FloDB §5.4: 98 % to 2 %.
    HotBlocks {
        n: u64,
        hot_fraction: f64,
        hot_probability: f64,
    },
}

/// Keys per block in `KeyDist::HotBlocks`.
const HOT_BLOCK: u64 = 100;

impl KeyDist {
    /// The next key number; `latest` is the newest inserted key number (for `Latest`).
    pub fn sample(&self, rng: &mut SmallRng, latest: u64) -> u64 {
        match self {
            KeyDist::Uniform { n } => rng.gen_range(0..(*n).max(1)),
            KeyDist::ScrambledZipfian { zipf, n } => fnv1a64(zipf.sample(rng)) % (*n).max(1),
            KeyDist::Latest { zipf } => latest.saturating_sub(zipf.sample(rng)),
            KeyDist::HotBlocks {
                n,
                hot_fraction,
                hot_probability,
            } => {
                let n = (*n).max(1);
                let blocks = n.div_ceil(HOT_BLOCK);
                // Every `stride`-th block is hot.
                let stride = ((1.0 / hot_fraction).round() as u64).max(1);
                let hot_blocks = blocks.div_ceil(stride);
                if rng.gen::<f64>() < *hot_probability {
                    let block = rng.gen_range(0..hot_blocks) * stride;
                    (block * HOT_BLOCK + rng.gen_range(0..HOT_BLOCK)).min(n - 1)
                } else {
                    rng.gen_range(0..n)
                }
            }
        }
    }
}

/// A bijection on `0..n` that visits keys in a scattered order (for random-order loads that
/// write every key exactly once): `i -> (i * step + offset) mod n` with `step` coprime to `n`.
#[derive(Debug, Clone, Copy)]
pub struct Permutation {
    n: u64,
    step: u64,
    offset: u64,
}

impl Permutation {
    /// A permutation of `0..n` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let n = n.max(1);
        let mut step = (0x9e37_79b9_7f4a_7c15u64 ^ seed) % n;
        step = step.max(1);
        while gcd(step, n) != 1 {
            step += 1;
        }
        Permutation {
            n,
            step,
            offset: fnv1a64(seed) % n,
        }
    }

    /// The `i`-th key number of the order.
    pub fn at(&self, i: u64) -> u64 {
        ((u128::from(i % self.n) * u128::from(self.step) + u128::from(self.offset))
            % u128::from(self.n)) as u64
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn missing_keys_sit_between_written_keys_and_are_never_written() {
        let (mut key, mut next, mut missing) = (Vec::new(), Vec::new(), Vec::new());
        for n in [0u64, 1, 255, 1 << 40] {
            make_key(n, 16, &mut key);
            make_key(n + 1, 16, &mut next);
            make_missing_key(n, 1000, 16, &mut missing);
            assert_eq!(missing.len(), 16);
            assert!(key < missing && missing < next, "{n}");
        }
        // 8-byte keys have no padding to change: past the key space instead.
        make_missing_key(5, 1000, 8, &mut missing);
        make_key(1005, 8, &mut key);
        assert_eq!(missing, key);
    }

    #[test]
    fn keys_sort_like_their_numbers() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        make_key(255, 16, &mut a);
        make_key(256, 16, &mut b);
        assert_eq!(a.len(), 16);
        assert!(a < b);
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 10, 97, 1000, 1024] {
            let permutation = Permutation::new(n, 42);
            let seen: HashSet<u64> = (0..n).map(|i| permutation.at(i)).collect();
            assert_eq!(seen.len() as u64, n);
            assert!(seen.iter().all(|&k| k < n));
        }
    }

    #[test]
    fn zipfian_favours_small_items() {
        let zipf = Zipfian::new(1000, 0.99);
        let mut rng = SmallRng::seed_from_u64(1);
        let samples: Vec<u64> = (0..10_000).map(|_| zipf.sample(&mut rng)).collect();
        assert!(samples.iter().all(|&s| s < 1000));
        let zeros = samples.iter().filter(|&&s| s == 0).count();
        let tail = samples.iter().filter(|&&s| s >= 500).count();
        assert!(zeros > tail / 2, "zeros {zeros}, tail {tail}");
    }

    #[test]
    fn hot_blocks_concentrate_accesses() {
        let dist = KeyDist::HotBlocks {
            n: 100_000,
            hot_fraction: 0.1,
            hot_probability: 0.9,
        };
        let mut rng = SmallRng::seed_from_u64(7);
        let hot = (0..10_000)
            .map(|_| dist.sample(&mut rng, 0))
            .filter(|k| (k / HOT_BLOCK).is_multiple_of(10))
            .count();
        // 90 % directly plus 10 % of the uniform tenth.
        assert!((9_000..9_300).contains(&hot), "hot {hot}");
    }

    #[test]
    fn values_of_a_compression_ratio_repeat_within_each_piece() {
        let mut pool = ValuePool::with_ratio(3, 200, 0.5);
        let value = pool.next().to_vec();
        for piece in value.chunks(100) {
            assert_eq!(piece[..50], piece[50..]);
        }
        assert_ne!(
            value[..50],
            value[100..150],
            "pieces differ from each other"
        );
    }

    #[test]
    fn values_have_the_requested_size_and_repeat_per_seed() {
        let mut a = ValuePool::new(3, 100);
        let mut b = ValuePool::new(3, 100);
        for _ in 0..20_000 {
            let va = a.next().to_vec();
            assert_eq!(va.len(), 100);
            assert_eq!(va, b.next());
        }
    }
}
