//! A hash-tagged address: a published node's or record's address (the low 48 bits) and the
//! top 16 bits of its key's hash in one 64-bit word, so an index probe learns from the word
//! alone whether the entry may be its key's, without loading the entry. The memtable's key
//! index and the Membuffer's tables both store these.
//!
//! Thread-safety contract: pure functions of their arguments.
//!
//! Invariants:
//! 1. `pack` refuses an address wider than `ADDRESS_BITS` (user-space addresses on 64-bit
//!    Linux, macOS and Windows fit in 47), never truncating one: the caller then keeps the
//!    entry out of its index.
//! 2. `address(pack(a, h)) == a` and `matches(pack(a, h), h)` for every accepted `a`.

/// Bits of a word that hold the address; the tag sits above them.
pub(crate) const ADDRESS_BITS: u32 = 48;

const ADDRESS_MASK: u64 = (1 << ADDRESS_BITS) - 1;

/// `address` tagged with its key's `hash` (invariant 1: None if the address does not fit).
pub(crate) fn pack(address: u64, hash: u64) -> Option<u64> {
    (address & !ADDRESS_MASK == 0).then_some((hash >> ADDRESS_BITS) << ADDRESS_BITS | address)
}

/// The address a packed word holds.
pub(crate) fn address(word: u64) -> u64 {
    word & ADDRESS_MASK
}

/// Whether a packed word may hold an entry of a key with `hash` (its tag matches).
pub(crate) fn matches(word: u64, hash: u64) -> bool {
    word >> ADDRESS_BITS == hash >> ADDRESS_BITS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_keeps_address_and_tag_apart() {
        let hash = 0xABCD_0000_0000_0007;
        let Some(word) = pack(0x7FFF_1234_5678, hash) else {
            panic!("a 47-bit address fits");
        };
        assert_eq!(address(word), 0x7FFF_1234_5678);
        assert!(matches(word, hash));
        assert!(matches(word, hash ^ 0xFF), "the low bits are not the tag");
        assert!(!matches(word, hash ^ (1 << 63)));
        assert_eq!(pack(1 << ADDRESS_BITS, hash), None, "invariant 1");
    }
}
