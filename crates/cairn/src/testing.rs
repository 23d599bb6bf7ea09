//! Internals exposed to integration tests (only with the `testing` feature, which the crate's
//! own dev-dependency turns on): what the golden-byte format tests need to drive each encoder
//! directly instead of going through a whole database.
//!
//! Thread-safety contract: these are plain functions over owned values; each is as thread-safe
//! as the encoder it wraps.
//!
//! Invariants:
//! 1. Nothing here has behaviour of its own: every function forwards to the encoder the engine
//!    itself uses, so a golden file compared against its output pins the real on-disk bytes.

use crate::batch::WriteBatch;
use crate::key::SequenceNumber;

/// The WAL record payload `batch` is logged as when its first entry gets `first_sequence`
/// (what `Db::write` hands the WAL writer).
pub fn encode_batch(batch: &mut WriteBatch, first_sequence: SequenceNumber) -> Vec<u8> {
    batch.encode(first_sequence).to_vec()
}
