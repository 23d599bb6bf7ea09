//! Per-level table settings: which Bloom bits per key and block size a table written to a
//! level gets (`Options::level_options`, `Options::bloom_allocation`).
//!
//! Monkey's allocation (SIGMOD'17) gives level `i` a false-positive rate proportional to its
//! size `n_i`, which at a fixed total of filter bits minimises the sum of the rates (the
//! expected wasted reads of a lookup that finds nothing). With `b_i = -ln(p_i) / ln(2)^2`
//! bits per key that is `b_i = C - ln(n_i) / ln(2)^2`, with `C` chosen so that the
//! size-weighted mean of the `b_i` is `bloom_bits_per_key`. Sizes are the levels' capacities
//! (`T^(i-1)`; level 0 counts as level 1) down to the deepest level that holds data or is
//! being written, so an empty deep level does not take the budget.
//!
//! Invariants:
//! 1. A level's explicit override wins over the allocation; with `Uniform` and no override a
//!    level gets exactly the database-wide settings (today's tables, byte for byte).
//! 2. Monkey's bits are within `[0, 64]` and never increase with depth.
//!
//! Thread-safety contract: pure functions.

use crate::sstable::TableOptions;
use crate::{BloomAllocation, Options};

/// The table settings for a table written to `level`, when the deepest level holding data
/// is `deepest`.
pub fn table_options_for(options: &Options, level: usize, deepest: usize) -> TableOptions {
    let mut table = TableOptions::from(options);
    let overrides = options
        .level_options
        .get(level)
        .copied()
        .unwrap_or_default();
    if let Some(size) = overrides.block_size_bytes {
        table.block_size_bytes = size;
    }
    if let Some(compression) = overrides.compression {
        table.compression = compression;
    }
    table.bloom_bits_per_key = match (overrides.bloom_bits_per_key, options.bloom_allocation) {
        (Some(bits), _) => bits,
        (None, BloomAllocation::Uniform) => options.bloom_bits_per_key,
        (None, BloomAllocation::Monkey) => monkey_bits_per_key(
            options.bloom_bits_per_key,
            options.level_size_ratio,
            deepest.max(level),
            level,
        ),
    };
    table
}

/// Monkey's bits per key for `level` of a tree whose deepest level is `deepest`, at
/// `average` bits per key over all entries (module doc).
pub fn monkey_bits_per_key(average: usize, ratio: u64, deepest: usize, level: usize) -> usize {
    if average == 0 {
        return 0;
    }
    let ln2_squared = std::f64::consts::LN_2 * std::f64::consts::LN_2;
    let ln_ratio = (ratio.max(2) as f64).ln();
    // ln(n_i) up to a constant: level 0 is sized like level 1.
    let log_size = |level: usize| level.saturating_sub(1) as f64 * ln_ratio;
    let deepest = deepest.max(1);
    let weights: Vec<f64> = (1..=deepest).map(|l| log_size(l).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mean_log: f64 = (1..=deepest)
        .zip(&weights)
        .map(|(l, w)| w * log_size(l))
        .sum::<f64>()
        / total;
    let bits = average as f64 + (mean_log - log_size(level)) / ln2_squared;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped to [0, 64]
    let bits = bits.round().clamp(0.0, 64.0) as usize;
    bits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LevelOptions;

    #[test]
    fn uniform_is_the_database_setting() {
        let options = Options::default();
        for level in 0..7 {
            let table = table_options_for(&options, level, 3);
            assert_eq!(table.bloom_bits_per_key, options.bloom_bits_per_key);
            assert_eq!(table.block_size_bytes, options.block_size_bytes);
        }
    }

    #[test]
    fn monkey_spends_fewer_bits_on_the_largest_level_at_the_same_memory() {
        let bits: Vec<usize> = (1..=4).map(|l| monkey_bits_per_key(10, 10, 4, l)).collect();
        assert!(bits.windows(2).all(|pair| pair[0] >= pair[1]), "{bits:?}");
        assert!(bits[3] < 10, "{bits:?}");
        // Same memory: the size-weighted mean is within rounding of the average.
        let sizes = [1.0, 10.0, 100.0, 1000.0];
        let mean: f64 = bits
            .iter()
            .zip(sizes)
            .map(|(&b, n)| b as f64 * n)
            .sum::<f64>()
            / sizes.iter().sum::<f64>();
        assert!((mean - 10.0).abs() < 0.6, "{bits:?} mean {mean}");
        assert_eq!(monkey_bits_per_key(0, 10, 4, 1), 0);
    }

    #[test]
    fn an_override_wins() {
        let level2 = LevelOptions {
            bloom_bits_per_key: Some(3),
            block_size_bytes: Some(512),
            compression: Some(crate::Compression::Zstd),
        };
        let options = Options {
            bloom_allocation: BloomAllocation::Monkey,
            level_options: vec![LevelOptions::default(), LevelOptions::default(), level2],
            ..Options::default()
        };
        let table = table_options_for(&options, 2, 4);
        assert_eq!((table.bloom_bits_per_key, table.block_size_bytes), (3, 512));
        assert_eq!(table.compression, crate::Compression::Zstd);
        // Levels without an override keep the database-wide setting.
        assert_eq!(
            table_options_for(&options, 1, 4).compression,
            options.compression
        );
    }
}
