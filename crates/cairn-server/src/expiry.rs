//! Key expiry. The commands see an expiry time in the value envelope ([`crate::layout`]).
//! On the `db` engine a string's expiry is the engine's own (`cairn::Db::put_with_expiry`):
//! the engine hides an expired string from every read at once and compaction drops it, with
//! nothing for the server to do. Everywhere else — hashes on `db` (whose fields must go with
//! them) and every key on `memstore` — the expiry lives in the envelope: reads treat an
//! expired record as absent at once and delete it (`commands::load`), and a background
//! sampler deletes expired keys nobody reads.
//!
//! Thread-safety contract: `now_ms` is a pure clock read; `run_sampler` is one task that
//! takes the key locks like any writer (through `commands::load`).
//!
//! Invariants:
//! 1. The sampler deletes a key only after re-reading it under the key's lock and finding it
//!    still expired, so it never deletes a key a concurrent SET just rewrote.
//! 2. One sampler round reads at most `SAMPLE` records, so it never stalls the server on a
//!    large keyspace.

use crate::commands;
use crate::context::Context;
use crate::layout::{self, META};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Records examined per sampler round.
const SAMPLE: usize = 20;
/// Pause between sampler rounds.
const PERIOD: Duration = Duration::from_millis(100);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Deletes expired keys among up to `SAMPLE` records from a random point of the keyspace;
/// returns how many it deleted.
pub fn sample_once(context: &Context, random: u64) -> Result<usize, commands::Failure> {
    let start = [META, (random >> 56) as u8, (random >> 48) as u8];
    let end = [META + 1];
    let mut records = context.store.scan(
        Bound::Included(&start[..]),
        Bound::Excluded(&end[..]),
        SAMPLE,
        false,
    )?;
    if records.len() < SAMPLE {
        // Wrap around to the start of the keyspace.
        let more = context.store.scan(
            Bound::Included(&[META][..]),
            Bound::Excluded(&start[..]),
            SAMPLE - records.len(),
            false,
        )?;
        records.extend(more);
    }
    let now = now_ms();
    let mut deleted = 0;
    for (engine_key, value) in records {
        let expired = layout::Record::decode(&value).is_some_and(|record| record.is_expired(now));
        if let (true, Some(key)) = (expired, engine_key.get(1..)) {
            // `load` re-checks under the key's lock before deleting.
            commands::load(context, key)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Runs sampler rounds until the server shuts down.
pub async fn run_sampler(context: Arc<Context>) {
    let mut state = now_ms() | 1;
    let mut ticker = tokio::time::interval(PERIOD);
    while !context.shutting_down.load(Ordering::Acquire) {
        ticker.tick().await;
        // xorshift64: the sample start needs no quality, only spread.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Engine errors are reported to clients on their own commands; here a failed round
        // is simply retried on the next tick.
        let _ = sample_once(&context, state);
    }
}
