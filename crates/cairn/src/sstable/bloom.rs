//! A blocked Bloom filter over the user keys of one table.
//!
//! The filter is an array of 64-byte (512-bit, one cache line) blocks. A key's 64-bit xxh3 hash
//! picks exactly one block (multiply-shift of the high 32 bits), and `k` probes inside that block
//! are derived from the hash by double hashing: `bit_i = (h1 + i * h2) >> 23` over wrapping `u32`
//! arithmetic, with `h1` the low 32 bits of the hash and `h2` an odd remix of the whole hash. A
//! lookup therefore touches one cache line. At 10 bits per key the false-positive rate is about
//! 1 % (a little above a classic Bloom filter's 0.8 %, the price of locality).
//!
//! The byte layout and the exact hashing (which a reader must reproduce bit for bit, so it is
//! part of the format: on disk: never change) are in docs/format.md, "Filter block";
//! [`FILTER_BLOCK_BYTES`] and [`FILTER_TRAILER_BYTES`] mirror it.
//!
//! Thread-safety contract: a built [`BloomFilter`] is immutable and `Sync`; the builder is owned
//! by one table builder.
//!
//! Invariants: `1 <= k <= 30`, `block_count >= 1`, and the byte length is exactly
//! `64 * block_count + 5`; [`BloomFilter::decode`] rejects anything else. A filter never gives a
//! false negative for a key added to its builder.

// Hashes are folded to `u32` on purpose (the probe sequence uses 32-bit halves); probe
// counts are clamped to `1..=30` and block counts to `u32::MAX` before they are narrowed.
#![allow(clippy::cast_possible_truncation)]

use crate::coding;
use std::fmt;

/// Bytes per filter block (one cache line).
pub const FILTER_BLOCK_BYTES: usize = 64;

/// Bits per filter block.
const FILTER_BLOCK_BITS: u32 = (FILTER_BLOCK_BYTES * 8) as u32;

/// Bytes of the filter trailer: `block_count u32, k u8`.
pub const FILTER_TRAILER_BYTES: usize = 5;

/// Largest number of probes.
pub const PROBES_MAX: u32 = 30;

/// The hash every filter uses for a user key.
#[inline]
pub fn bloom_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

/// Number of probes for `bits_per_key`: `round(bits_per_key * ln 2)` clamped to `1..=30`.
// A float-to-integer `as` saturates (a negative or huge `k` becomes 0 or `u32::MAX`), and the
// clamp then bounds it; the `usize -> f64` side only loses precision past 2^52 bits per key.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn probe_count(bits_per_key: usize) -> u32 {
    let k = (bits_per_key as f64 * std::f64::consts::LN_2).round();
    (k as u32).clamp(1, PROBES_MAX)
}

/// The block a hash selects, among `block_count`.
#[inline]
fn block_index(hash: u64, block_count: u32) -> usize {
    (((hash >> 32) * u64::from(block_count)) >> 32) as usize
}

/// The two double-hashing components for the in-block probes.
#[inline]
fn probe_seeds(hash: u64) -> (u32, u32) {
    let h1 = hash as u32;
    let h2 = (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32 | 1;
    (h1, h2)
}

/// Collects key hashes and produces the encoded filter.
#[derive(Debug, Clone)]
pub struct BloomFilterBuilder {
    bits_per_key: usize,
    hashes: Vec<u64>,
}

impl BloomFilterBuilder {
    /// A builder targeting `bits_per_key` bits per added key (must be >= 1).
    pub fn new(bits_per_key: usize) -> Self {
        BloomFilterBuilder {
            bits_per_key: bits_per_key.max(1),
            hashes: Vec::new(),
        }
    }

    /// Adds a user key.
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(bloom_hash(user_key));
    }

    #[cfg(any(test, feature = "testing"))]
    /// Number of keys added.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    #[cfg(any(test, feature = "testing"))]
    /// True if no key was added.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The encoded filter for every key added so far.
    pub fn finish(&self) -> Vec<u8> {
        let bits = self.hashes.len().saturating_mul(self.bits_per_key);
        let block_count = bits
            .div_ceil(FILTER_BLOCK_BITS as usize)
            .clamp(1, u32::MAX as usize) as u32;
        let k = probe_count(self.bits_per_key);
        let filter_bytes = block_count as usize * FILTER_BLOCK_BYTES;
        let mut bytes = vec![0u8; filter_bytes + FILTER_TRAILER_BYTES];
        for &hash in &self.hashes {
            let base = block_index(hash, block_count) * FILTER_BLOCK_BYTES;
            let (h1, h2) = probe_seeds(hash);
            let mut probe = h1;
            for _ in 0..k {
                let bit = (probe >> 23) as usize;
                if let Some(byte) = bytes.get_mut(base + bit / 8) {
                    *byte |= 1 << (bit % 8);
                }
                probe = probe.wrapping_add(h2);
            }
        }
        bytes.truncate(filter_bytes);
        coding::put_u32(&mut bytes, block_count);
        bytes.push(k as u8);
        bytes
    }
}

/// A decoded, immutable blocked Bloom filter.
#[derive(Clone)]
pub struct BloomFilter {
    /// The filter bits (without the trailer).
    bits: Vec<u8>,
    block_count: u32,
    probes: u32,
}

impl fmt::Debug for BloomFilter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("BloomFilter")
            .field("block_count", &self.block_count)
            .field("probes", &self.probes)
            .finish()
    }
}

impl BloomFilter {
    /// Parses an encoded filter; `Err(reason)` if the trailer is inconsistent.
    pub fn decode(mut bytes: Vec<u8>) -> std::result::Result<BloomFilter, String> {
        let trailer_start = bytes
            .len()
            .checked_sub(FILTER_TRAILER_BYTES)
            .ok_or_else(|| {
                format!(
                    "filter of {} bytes is shorter than its trailer",
                    bytes.len()
                )
            })?;
        let block_count = coding::get_u32(&bytes, trailer_start).unwrap_or(0);
        let probes = u32::from(bytes.get(trailer_start + 4).copied().unwrap_or(0));
        if !(1..=PROBES_MAX).contains(&probes) {
            return Err(format!(
                "filter probe count {probes} is outside 1..={PROBES_MAX}"
            ));
        }
        if block_count == 0
            || (block_count as usize).checked_mul(FILTER_BLOCK_BYTES) != Some(trailer_start)
        {
            return Err(format!(
                "filter claims {block_count} blocks but holds {trailer_start} filter bytes"
            ));
        }
        bytes.truncate(trailer_start);
        Ok(BloomFilter {
            bits: bytes,
            block_count,
            probes,
        })
    }

    /// False only if `user_key` was certainly not added.
    #[inline]
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(bloom_hash(user_key))
    }

    /// Starts loading the one 64-byte block a probe for `hash` reads (a hint: see
    /// [`crate::sync::prefetch`]).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let base = block_index(hash, self.block_count) * FILTER_BLOCK_BYTES;
        if let Some(byte) = self.bits.get(base) {
            crate::sync::prefetch(byte);
        }
    }

    /// [`Self::may_contain`] for a precomputed [`bloom_hash`].
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        let base = block_index(hash, self.block_count) * FILTER_BLOCK_BYTES;
        let Some(block) = self.bits.get(base..base + FILTER_BLOCK_BYTES) else {
            return true;
        };
        let (h1, h2) = probe_seeds(hash);
        let mut probe = h1;
        for _ in 0..self.probes {
            let bit = (probe >> 23) as usize;
            match block.get(bit / 8) {
                Some(byte) if byte & (1 << (bit % 8)) == 0 => return false,
                _ => {}
            }
            probe = probe.wrapping_add(h2);
        }
        true
    }

    #[cfg(any(test, feature = "testing"))]
    /// Number of 64-byte blocks.
    pub fn block_count(&self) -> u32 {
        self.block_count
    }

    #[cfg(any(test, feature = "testing"))]
    /// Number of probes per key.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes of filter bits held in memory.
    pub fn size_bytes(&self) -> usize {
        self.bits.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> Vec<u8> {
        format!("user-key-{i:010}").into_bytes()
    }

    #[test]
    fn probe_count_rounds_and_clamps() {
        assert_eq!(probe_count(0), 1);
        assert_eq!(probe_count(1), 1);
        assert_eq!(probe_count(10), 7);
        assert_eq!(probe_count(20), 14);
        assert_eq!(probe_count(64), 30);
    }

    #[test]
    fn false_positive_rate_at_10_bits_per_key() {
        let mut builder = BloomFilterBuilder::new(10);
        let key_count = 100_000u64;
        for i in 0..key_count {
            builder.add_key(&key(i));
        }
        let filter = BloomFilter::decode(builder.finish()).unwrap();
        assert_eq!(filter.probes(), 7);
        for i in 0..key_count {
            assert!(filter.may_contain(&key(i)), "false negative for key {i}");
        }
        let probe_count = 200_000u64;
        let false_positives = (key_count..key_count + probe_count)
            .filter(|&i| filter.may_contain(&key(i)))
            .count();
        let rate = false_positives as f64 / probe_count as f64;
        println!(
            "blocked bloom: 10 bits/key, {key_count} keys, {} blocks: false-positive rate {:.3} %",
            filter.block_count(),
            rate * 100.0
        );
        assert!(rate < 0.015, "false-positive rate {rate} too high");
    }

    #[test]
    fn tiny_and_empty_filters() {
        let empty = BloomFilter::decode(BloomFilterBuilder::new(10).finish()).unwrap();
        assert_eq!(empty.block_count(), 1);
        assert!(!empty.may_contain(b"anything"));
        let mut builder = BloomFilterBuilder::new(10);
        builder.add_key(b"one");
        let one = BloomFilter::decode(builder.finish()).unwrap();
        assert!(one.may_contain(b"one"));
    }

    #[test]
    fn decode_rejects_bad_trailers() {
        let mut builder = BloomFilterBuilder::new(10);
        builder.add_key(b"a");
        let good = builder.finish();
        assert!(BloomFilter::decode(good[..good.len() - 1].to_vec()).is_err());
        assert!(BloomFilter::decode(Vec::new()).is_err());
        let mut bad_k = good.clone();
        *bad_k.last_mut().unwrap() = 0;
        assert!(BloomFilter::decode(bad_k).is_err());
        let mut bad_count = good.clone();
        let at = bad_count.len() - 5;
        bad_count[at] = 2;
        assert!(BloomFilter::decode(bad_count).is_err());
        let mut extra = good[..64].to_vec();
        extra.extend_from_slice(&good[..64]);
        extra.extend_from_slice(&good[64..]);
        assert!(BloomFilter::decode(extra).is_err());
    }
}
