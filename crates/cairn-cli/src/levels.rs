//! The CS265 `s` statistics: `Logical Pairs: N`, the per-level counts of stored pairs
//! (`LVL1: 3, LVL3: 9`, non-empty levels only), then one line per non-empty level with its
//! pairs as `key:value:Lk`.
//!
//! Levels count from 1 as in CS265: `L1` is the write buffers in memory and `L(k+2)` is
//! cairn's on-disk level `k` (so `L2` is level 0). Stored pairs include overwritten versions
//! not yet compacted away (the difference between the counts and `Logical Pairs` is the space
//! amplification), not deletions. A key or value of 8 bytes prints as the integer the shell
//! stored; anything else prints as escaped text.

use crate::cs265::decode_i64_slice;
use crate::text::render;

/// One level of the `s` output: its number (from 1), how many pairs it stores, and the
/// pairs to dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelDump {
    /// `k` of `LVLk` / `:Lk`.
    pub level: usize,
    /// Pairs stored in the level (all of them, not only the dumped ones).
    pub count: usize,
    /// Pairs to print, in the level's order.
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A stored key or value as the shell wrote it: an integer for 8 bytes, else text.
fn show(bytes: &[u8]) -> String {
    decode_i64_slice(bytes).map_or_else(|| render(bytes), |number| number.to_string())
}

/// The `s` text: `Logical Pairs: N`, the counts of non-empty levels, one dump line per
/// non-empty level.
pub fn format_stats(logical_pairs: usize, levels: &[LevelDump]) -> String {
    let levels: Vec<&LevelDump> = levels.iter().filter(|level| level.count > 0).collect();
    let mut text = format!("Logical Pairs: {logical_pairs}\n");
    let counts: Vec<String> = levels
        .iter()
        .map(|level| format!("LVL{}: {}", level.level, level.count))
        .collect();
    text.push_str(&counts.join(", "));
    for level in levels {
        let pairs: Vec<String> = level
            .pairs
            .iter()
            .map(|(key, value)| format!("{}:{}:L{}", show(key), show(value), level.level))
            .collect();
        text.push('\n');
        text.push_str(&pairs.join(" "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cs265::encode_i64;

    #[test]
    fn empty_levels_are_left_out_and_integers_print_as_numbers() {
        let levels = [
            LevelDump {
                level: 1,
                count: 2,
                pairs: vec![(encode_i64(3).to_vec(), encode_i64(-4).to_vec())],
            },
            LevelDump {
                level: 2,
                count: 0,
                pairs: Vec::new(),
            },
            LevelDump {
                level: 3,
                count: 1,
                pairs: vec![(b"text".to_vec(), b"v".to_vec())],
            },
        ];
        assert_eq!(
            format_stats(2, &levels),
            "Logical Pairs: 2\nLVL1: 2, LVL3: 1\n3:-4:L1\ntext:v:L3"
        );
    }
}
