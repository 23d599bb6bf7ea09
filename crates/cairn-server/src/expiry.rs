//! Key expiry. The commands see an expiry time in the value envelope ([`crate::layout`]).
//! On the `db` engine a string's expiry is the engine's own (`cairn::Db::put_with_expiry`):
//! the engine hides an expired string from every read at once and compaction drops it, with
//! nothing for the server to do. Everywhere else — hashes on `db` (whose fields must go with
//! them) and every key on `memstore` — the expiry lives in the envelope: reads treat an
//! expired record as absent at once and delete it (`commands::load`), and a background
//! sampler deletes expired keys nobody reads.
//!
//! Thread-safety contract: `now_ms` is a pure clock read; `run_sampler` is one task that
//! takes the key locks like any writer (through `commands::load`). Where the sampler stopped
//! is kept in the `Context` (`Context::sampler_position`); a round run beside the task (a
//! test) only moves that position.
//!
//! Invariants:
//! 1. The sampler deletes a key only after re-reading it under the key's lock and finding it
//!    still expired, so it never deletes a key a concurrent SET just rewrote.
//! 2. One sampler round reads at most `SAMPLE` records, and one cycle runs rounds for at
//!    most `CYCLE_BUDGET` (and one round more) every `PERIOD`, so it never stalls the server
//!    on a large keyspace.
//! 3. A round resumes after the last record the previous round read and wraps at the end of
//!    the keyspace, so every record is read once every ⌈records / `SAMPLE`⌉ rounds, whatever
//!    prefix the keys share.
//! 4. A cycle runs another round only while more than a quarter of the last round's records
//!    were expired (Redis's active expire cycle), so a keyspace of many expired keys is
//!    cleared at up to `CYCLE_BUDGET` per `PERIOD` while a clean one costs one round.

use crate::commands;
use crate::context::Context;
use crate::layout::{self, META};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Records examined per sampler round.
const SAMPLE: usize = 20;
/// Pause between sampler cycles.
const PERIOD: Duration = Duration::from_millis(100);
/// Most time one cycle spends in rounds: a quarter of the period, as Redis's slow cycle.
pub const CYCLE_BUDGET: Duration = Duration::from_millis(25);

/// The first and the past-the-end engine keys of the records.
const RECORDS_START: &[u8] = &[META];
const RECORDS_END: &[u8] = &[META + 1];

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// What one sampler round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Records read.
    pub examined: usize,
    /// Expired keys among them, deleted.
    pub deleted: usize,
}

/// Deletes expired keys among up to `SAMPLE` records after where the last round stopped
/// (invariant 3).
pub fn sample_once(context: &Context) -> Result<Round, commands::Failure> {
    let position = context.sampler_position();
    let lower = position
        .as_deref()
        .map_or(Bound::Included(RECORDS_START), Bound::Excluded);
    let end = Bound::Excluded(RECORDS_END);
    // Headers only: a record's type and expiry are all a round looks at.
    let mut records = context.store.scan_keys(lower, end, SAMPLE, false)?;
    if let (true, Some(stopped)) = (records.len() < SAMPLE, position.as_deref()) {
        // Wrap around to the start of the keyspace, up to where this round began (included:
        // a keyspace of one key is still read every round).
        let start = Bound::Included(RECORDS_START);
        let more = context.store.scan_keys(
            start,
            Bound::Included(stopped),
            SAMPLE - records.len(),
            false,
        )?;
        records.extend(more);
    }
    context.set_sampler_position(records.last().map(|(key, _)| key.clone()));
    let now = now_ms();
    let mut deleted = 0;
    for (engine_key, value) in &records {
        let expired = layout::Record::decode(value).is_some_and(|record| record.is_expired(now));
        if let (true, Some(key)) = (expired, engine_key.get(1..)) {
            // `load` re-checks under the key's lock before deleting.
            commands::load(context, key)?;
            deleted += 1;
        }
    }
    Ok(Round {
        examined: records.len(),
        deleted,
    })
}

/// Runs rounds while more than a quarter of a round's records were expired, for at most
/// `budget` (invariant 4); returns how many keys it deleted.
pub fn run_cycle(context: &Context, budget: Duration) -> Result<usize, commands::Failure> {
    let started = Instant::now();
    let mut deleted = 0;
    loop {
        let round = sample_once(context)?;
        deleted += round.deleted;
        if round.deleted * 4 <= round.examined || started.elapsed() >= budget {
            return Ok(deleted);
        }
    }
}

/// Runs sampler cycles until the server shuts down.
pub async fn run_sampler(context: Arc<Context>) {
    let mut ticker = tokio::time::interval(PERIOD);
    while !context.shutting_down.load(Ordering::Acquire) {
        ticker.tick().await;
        // Engine errors are reported to clients on their own commands; here a failed cycle
        // is simply retried on the next tick.
        let _ = run_cycle(&context, CYCLE_BUDGET);
    }
}
