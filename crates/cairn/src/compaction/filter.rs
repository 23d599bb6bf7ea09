//! Which entries a flush or compaction keeps: the version-dropping rules, and the
//! user-facing compaction-filter hook.
//!
//! Version-dropping rules (per user key, entries seen newest first). Snapshots split sequence
//! space into stripes; stripe(s) = number of live snapshots below s.
//! 1. Only the newest entry of each stripe is kept: older ones in the same stripe are visible
//!    to no snapshot and not to the latest state.
//! 2. A tombstone in the lowest stripe (seq <= oldest snapshot) is dropped if no deeper level
//!    can hold the key (`is_base_level_for_key`), nor any file of the output level that is not
//!    an input (other runs of a tiered level; `excluding`): every older entry of the key is
//!    then in this job, in this stripe, hence dropped by rule 1, so nothing remains for the
//!    tombstone to hide.
//!
//! The compaction filter (a [`CompactionFilter`] set in `Options::compaction_filter`) is then
//! asked about each kept `Put` in the top stripe — the newest entry of its key, seen by no
//! snapshot — and only there, so a snapshot never sees a value change under it. `Remove`
//! turns the entry into a tombstone with the same sequence number (a plain drop would let an
//! older value in a deeper level reappear), which rule 2 then drops where it can; `Change`
//! rewrites the value and keeps the sequence number.
//!
//! Expired values (entries of kind `PutWithExpiry` whose time has passed when the job starts)
//! are the engine's own filter: they read as absent to every reader, snapshots included, so
//! in any stripe they are turned into a tombstone with the same sequence number — never
//! simply dropped, which would let an older version below resurface — and rule 2 then drops
//! that tombstone where nothing older can exist.
//!
//! Invariants (asserted in debug builds):
//! 1. Entries arrive in internal-key order: user keys ascending, and within one user key
//!    sequence numbers strictly descending.
//! 2. Within one user key, each kept entry lies in a strictly lower stripe than the previous
//!    kept one: kept sequence numbers decrease, at most one per stripe.
//!
//! Thread-safety contract: a `VersionFilter` belongs to one job (one thread); a
//! `CompactionFilter` is shared (`Send + Sync`) and may be called from any job's thread.

use crate::key::{SequenceNumber, ValueKind};
use crate::version::Version;

/// A user's decision about one entry (see [`CompactionFilter`] for an example).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Remove the key (as if deleted at the entry's sequence number).
    Remove,
    /// Keep the key with this value instead.
    Change(Vec<u8>),
}

/// A user hook deciding, during compaction, what happens to the newest value of a key (for
/// instance dropping expired keys). It sees only values no snapshot registered when the
/// compaction started can read, so its decisions never change what those snapshots (and
/// iterators) show. A snapshot taken *while* a compaction runs reads the values as they were
/// until the compaction installs, and the filter's decisions after: take the
/// snapshot before relying on a value the filter may change. It must be deterministic
/// enough that applying it twice (a key compacted again later) is harmless. It runs only when
/// compaction rewrites a file: flushes and trivial moves (a file moved down a level unread)
/// do not call it, so an expired key disappears at the next merge that reads it
/// (`Db::compact_range(None, None)` rewrites every file).
///
/// ```
/// use cairn::{CompactionFilter, FilterDecision};
/// use std::sync::Arc;
///
/// /// Drops every key starting with `tmp:` when compaction rewrites it.
/// #[derive(Debug)]
/// struct DropTemporary;
///
/// impl CompactionFilter for DropTemporary {
///     fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> FilterDecision {
///         if key.starts_with(b"tmp:") {
///             FilterDecision::Remove
///         } else {
///             FilterDecision::Keep
///         }
///     }
/// }
///
/// let mut options = cairn::Options::in_memory();
/// options.compaction_filter = Some(Arc::new(DropTemporary));
/// let db = cairn::Db::open("/db", options)?;
/// db.put("tmp:1", "x")?;
/// db.put("keep", "y")?;
/// db.compact_range(None, None)?;
/// db.put("other", "z")?;
/// db.compact_range(None, None)?;
/// assert_eq!(db.get("keep")?, Some(b"y".to_vec()));
/// # Ok::<(), cairn::Error>(())
/// ```
pub trait CompactionFilter: Send + Sync + std::fmt::Debug {
    /// Decides about the newest `Put` of `user_key`, being written to `output_level`. A value
    /// written with an expiry is shown without it, and a `Change` keeps that expiry.
    fn filter(&self, output_level: usize, user_key: &[u8], value: &[u8]) -> FilterDecision;
}

/// What to write for one input entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write nothing.
    Drop,
    /// Write the entry unchanged.
    Keep,
    /// Write the entry's key with this kind and value (same user key and sequence).
    Rewrite(ValueKind, Vec<u8>),
}

/// Decides, entry by entry, which versions a flush or compaction keeps (module doc rules).
#[derive(Debug)]
pub struct VersionFilter<'a> {
    /// Live snapshots, ascending.
    snapshots: &'a [SequenceNumber],
    /// Version used for the base-level test; `None` disables tombstone dropping (flush).
    base_level_version: Option<(&'a Version, usize)>,
    /// The user's hook and the output level it is told about.
    user_filter: Option<(&'a dyn CompactionFilter, usize)>,
    /// Wall-clock milliseconds when the job started: values expiring by then are dropped.
    now_millis: u64,
    /// The job's input files: the output level's other files are checked by rule 2.
    inputs: Option<&'a std::collections::HashSet<u64>>,
    current_user_key: Vec<u8>,
    has_current: bool,
    previous_stripe: usize,
    previous_sequence: SequenceNumber,
}

impl<'a> VersionFilter<'a> {
    /// A filter for output written to `output_level` of `version` (None: never drop
    /// tombstones, as in a flush to level 0).
    pub fn new(
        snapshots: &'a [SequenceNumber],
        base_level_version: Option<(&'a Version, usize)>,
    ) -> Self {
        debug_assert!(snapshots.is_sorted());
        VersionFilter {
            snapshots,
            base_level_version,
            user_filter: None,
            now_millis: crate::expiry::now_millis(),
            inputs: None,
            current_user_key: Vec::new(),
            has_current: false,
            previous_stripe: usize::MAX,
            previous_sequence: SequenceNumber::MAX,
        }
    }

    /// Adds the user's compaction filter (None: no hook), told `output_level`.
    pub fn with_compaction_filter(
        mut self,
        filter: Option<&'a dyn CompactionFilter>,
        output_level: usize,
    ) -> Self {
        self.user_filter = filter.map(|filter| (filter, output_level));
        self
    }

    /// Rule 2 also looks at the output level: any of its files not in `inputs` that may hold
    /// the key keeps the tombstone (a tiered level's older runs).
    pub fn excluding(mut self, inputs: &'a std::collections::HashSet<u64>) -> Self {
        self.inputs = Some(inputs);
        self
    }

    fn stripe(&self, sequence: SequenceNumber) -> usize {
        self.snapshots
            .partition_point(|&snapshot| snapshot < sequence)
    }

    /// Rule 1 (and the bookkeeping of invariants 1 and 2): the entry's stripe if it is the
    /// newest of its stripe, None if an entry of the same stripe was already seen.
    fn newest_of_stripe(&mut self, user_key: &[u8], sequence: SequenceNumber) -> Option<usize> {
        if !self.has_current || self.current_user_key != user_key {
            // Precondition (invariant 1): user keys ascend.
            debug_assert!(!self.has_current || self.current_user_key.as_slice() < user_key);
            self.current_user_key.clear();
            self.current_user_key.extend_from_slice(user_key);
            self.has_current = true;
            self.previous_stripe = usize::MAX;
        } else {
            // Precondition (invariant 1): sequences descend within a key.
            debug_assert!(sequence < self.previous_sequence);
        }
        self.previous_sequence = sequence;
        let stripe = self.stripe(sequence);
        if stripe == self.previous_stripe {
            return None;
        }
        // Postcondition (invariant 2): kept entries step down one stripe or more.
        debug_assert!(self.previous_stripe == usize::MAX || stripe < self.previous_stripe);
        self.previous_stripe = stripe;
        Some(stripe)
    }

    /// Rule 2: true if a tombstone in `stripe` may be dropped.
    fn tombstone_droppable(&self, user_key: &[u8], stripe: usize) -> bool {
        stripe == 0
            && self.base_level_version.is_some_and(|(version, level)| {
                version.is_base_level_for_key(level, user_key)
                    && self.inputs.is_none_or(|inputs| {
                        version
                            .find_files(level, user_key)
                            .all(|file| inputs.contains(&file.number))
                    })
            })
    }

    #[cfg(test)]
    /// True if the entry must be kept (the version rules only; no user hook). Entries must
    /// arrive in internal-key order.
    pub fn keep(&mut self, user_key: &[u8], sequence: SequenceNumber, kind: ValueKind) -> bool {
        match self.newest_of_stripe(user_key, sequence) {
            None => false, // rule 1
            Some(stripe) => {
                !(kind == ValueKind::Delete && self.tombstone_droppable(user_key, stripe))
            }
        }
    }

    /// What to write for the entry: the version rules, then the user's hook on the newest
    /// `Put` of a key that no snapshot sees (module doc). Entries must arrive in internal-key
    /// order.
    pub fn decide(
        &mut self,
        user_key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> Decision {
        let Some(stripe) = self.newest_of_stripe(user_key, sequence) else {
            return Decision::Drop; // rule 1
        };
        let verdict = if crate::expiry::is_expired(kind, value, self.now_millis) {
            FilterDecision::Remove
        } else {
            self.ask_user_filter(user_key, stripe, kind, value)
        };
        match verdict {
            FilterDecision::Keep if kind == ValueKind::Delete => {
                if self.tombstone_droppable(user_key, stripe) {
                    Decision::Drop // rule 2
                } else {
                    Decision::Keep
                }
            }
            FilterDecision::Keep => Decision::Keep,
            FilterDecision::Change(new_value) => match crate::expiry::visible(kind, value, 0) {
                Some((_, Some(expiry))) => Decision::Rewrite(
                    ValueKind::PutWithExpiry,
                    crate::expiry::encode(expiry, &new_value),
                ),
                _ => Decision::Rewrite(ValueKind::Put, new_value),
            },
            FilterDecision::Remove if self.tombstone_droppable(user_key, stripe) => Decision::Drop,
            FilterDecision::Remove => Decision::Rewrite(ValueKind::Delete, Vec::new()),
        }
    }

    /// The user's hook on a value no snapshot sees (module doc), shown the user's value
    /// without an expiry prefix; `Keep` for everything else.
    fn ask_user_filter(
        &self,
        user_key: &[u8],
        stripe: usize,
        kind: ValueKind,
        value: &[u8],
    ) -> FilterDecision {
        let Some((filter, level)) = self.user_filter else {
            return FilterDecision::Keep;
        };
        if stripe != self.snapshots.len() {
            return FilterDecision::Keep;
        }
        match crate::expiry::visible(kind, value, 0) {
            Some((user_value, _)) => filter.filter(level, user_key, user_value),
            None => FilterDecision::Keep,
        }
    }
}
