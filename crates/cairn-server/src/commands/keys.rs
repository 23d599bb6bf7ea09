//! Keyspace commands: DEL UNLINK EXISTS TYPE RENAME SCAN KEYS DBSIZE FLUSHDB FLUSHALL RANGE,
//! and the cursor paging and glob matching SCAN and HSCAN share.
//!
//! Thread-safety contract: as every handler (see `commands`). DEL and RENAME hold the locks
//! of all their keys and write one batch (atomic on the `db` engine). FLUSHDB deletes the
//! keyspace chunk by chunk, holding the locks of each chunk's keys while it deletes them, so
//! a write racing it may survive it (written after its chunk) but never in part. SCAN, KEYS,
//! DBSIZE and RANGE read without locks, each engine scan chunk at its own moment.
//!
//! Invariants:
//! 1. SCAN's cursor is a number naming the last engine key returned (kept in the context's
//!    cursor table); 0 starts and ends an iteration. Keys are visited in byte order, so a key
//!    present for a whole iteration is returned exactly once, as Redis promises (and never
//!    twice, which Redis does not promise). A cursor the table no longer holds (it keeps the
//!    latest 16,384, within 16 MiB of positions) gets `-ERR invalid cursor`, never a reply
//!    that would end the iteration early.
//! 2. Expired records are never listed or counted.
//! 3. FLUSHDB deletes a key only under its lock and with everything it owns (`delete_ops`;
//!    a key whose hash mark is clear owns nothing and goes unread, context invariant 3), and
//!    a hash's field only under its hash's lock: it never leaves a field without its hash's
//!    record, nor a key the memstore's key index misses (store invariant 1).

use super::{arg, delete_ops, is, load, load_locked, parse_i64, Args, Failure, Outcome, Spec};
use crate::context::{Context, Session};
use crate::expiry::now_ms;
use crate::layout::{self, Kind, Record, META};
use crate::resp::Reply;
use crate::store::{Op, Pairs};
use std::ops::Bound;

/// The keyspace commands.
pub const SPECS: &[Spec] = &[
    super::spec("del", -2, true, (1, -1, 1), del),
    super::spec("unlink", -2, true, (1, -1, 1), del),
    super::spec("exists", -2, false, (1, -1, 1), exists),
    super::spec("type", 2, false, (1, 1, 1), key_type),
    super::spec("rename", 3, true, (1, 2, 1), rename),
    super::spec("scan", -2, false, (0, 0, 0), scan),
    super::spec("keys", 2, false, (0, 0, 0), keys),
    super::spec("dbsize", 1, false, (0, 0, 0), dbsize),
    super::spec("flushdb", -1, true, (0, 0, 0), flush),
    super::spec("flushall", -1, true, (0, 0, 0), flush),
    super::spec("range", -3, false, (0, 0, 0), range),
];

/// Engine keys read per chunk by whole-keyspace walks.
const CHUNK: usize = 1024;

fn del(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let keys: Vec<&[u8]> = args.iter().skip(1).copied().collect();
    let _locks = context.lock_keys(&keys);
    let mut ops = Vec::new();
    let mut deleted = 0;
    let mut seen = std::collections::HashSet::new();
    for key in keys {
        if !seen.insert(key) {
            continue;
        }
        if let Some(record) = load_locked(context, key)? {
            ops.extend(delete_ops(context, key, &record)?);
            deleted += 1;
        }
    }
    if !ops.is_empty() {
        context.store.write(ops)?;
    }
    Ok(Reply::Integer(deleted))
}

fn exists(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let mut count = 0;
    for key in args.iter().skip(1) {
        count += i64::from(load(context, key)?.is_some());
    }
    Ok(Reply::Integer(count))
}

fn key_type(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let name = load(context, arg(args, 1))?.map_or("none", |record| record.kind.name());
    Ok(Reply::Simple(name.to_string()))
}

fn rename(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (source, target) = (arg(args, 1), arg(args, 2));
    super::check_key(target)?;
    let _locks = context.lock_keys(&[source, target]);
    let Some(record) = load_locked(context, source)? else {
        return Err(Failure::err("no such key"));
    };
    if source == target {
        return Ok(Reply::ok());
    }
    let mut ops = match load_locked(context, target)? {
        Some(old) => delete_ops(context, target, &old)?,
        None => Vec::new(),
    };
    if record.kind == Kind::Hash {
        // The target now holds a hash (context invariant 3).
        context.mark_hash(target);
        let prefix = layout::field_prefix(source);
        let prefix_end = layout::prefix_end(&prefix);
        let upper = prefix_end
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        // Later operations of a batch win, so these puts override the target's deletes.
        for (engine_key, value) in
            context
                .store
                .scan(Bound::Included(&prefix), upper, usize::MAX, false)?
        {
            let field = engine_key.get(prefix.len()..).unwrap_or_default();
            super::check_field(target, field)?;
            ops.push(Op::Put(layout::field_key(target, field), value));
            ops.push(Op::Delete(engine_key));
        }
    }
    ops.push(Op::Delete(layout::meta_key(source)));
    ops.push(Op::Put(layout::meta_key(target), record.encode()));
    context.store.write(ops)?;
    Ok(Reply::ok())
}

/// SCAN/HSCAN options: MATCH, COUNT, TYPE.
#[derive(Debug)]
pub struct ScanOptions {
    /// Glob the keys (fields) must match.
    pub pattern: Option<Vec<u8>>,
    /// Engine keys to visit per call.
    pub count: usize,
    /// Only keys of this type (SCAN).
    pub kind: Option<Vec<u8>>,
}

impl ScanOptions {
    /// Parses the options starting at argument `from`.
    pub fn parse(args: &Args<'_>, from: usize) -> Result<ScanOptions, Failure> {
        let mut options = ScanOptions {
            pattern: None,
            count: 10,
            kind: None,
        };
        let mut index = from;
        while index < args.len() {
            let (option, value) = (arg(args, index), args.get(index + 1));
            match value {
                Some(value) if is(option, "MATCH") => options.pattern = Some(value.to_vec()),
                Some(value) if is(option, "TYPE") => {
                    options.kind = Some(value.to_ascii_lowercase())
                }
                Some(value) if is(option, "COUNT") => {
                    let count = parse_i64(value)?;
                    if count < 1 {
                        return Err(Failure::syntax());
                    }
                    options.count = count.min(1 << 20) as usize;
                }
                _ => return Err(Failure::syntax()),
            }
            index += 2;
        }
        Ok(options)
    }
}

/// One page of up to `count` engine pairs under `prefix`, after the position `cursor` names
/// (with whole values if `values`, else only their headers: `Store::scan_keys`); returns the
/// next cursor (0: done) and the pairs.
pub fn page(
    context: &Context,
    cursor: &[u8],
    prefix: &[u8],
    count: usize,
    values: bool,
) -> Result<(u64, Pairs), Failure> {
    let cursor = std::str::from_utf8(cursor)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .ok_or_else(|| Failure::err("invalid cursor"))?;
    // A cursor the table forgot (or never handed out), or one of another iteration (an
    // HSCAN cursor given to SCAN), is refused: taken as the end, it would make a partial
    // iteration look complete (invariant 1).
    let position = match cursor {
        0 => None,
        id => Some(
            context
                .cursor(id)
                .filter(|position| position.starts_with(prefix))
                .ok_or_else(|| Failure::err("invalid cursor"))?,
        ),
    };
    let lower = position
        .as_deref()
        .map_or(Bound::Included(prefix), Bound::Excluded);
    let end = layout::prefix_end(prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let pairs = if values {
        context.store.scan(lower, upper, count, false)?
    } else {
        context.store.scan_keys(lower, upper, count, false)?
    };
    let next = match pairs.last() {
        Some((last, _)) if pairs.len() >= count => context.save_cursor(last.clone()),
        _ => 0,
    };
    Ok((next, pairs))
}

/// The user key and live record of a record pair.
fn live(pair: (Vec<u8>, Vec<u8>), now: u64) -> Option<(Vec<u8>, Record)> {
    let record = Record::decode(&pair.1).filter(|record| !record.is_expired(now))?;
    Some((pair.0.get(1..)?.to_vec(), record))
}

fn scan(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let options = ScanOptions::parse(args, 2)?;
    let (next, pairs) = page(context, arg(args, 1), &[META], options.count, false)?;
    let now = now_ms();
    let keys = pairs
        .into_iter()
        .filter_map(|pair| live(pair, now))
        .filter(|(key, record)| {
            options
                .pattern
                .as_deref()
                .is_none_or(|pattern| glob_match(pattern, key))
                && options
                    .kind
                    .as_deref()
                    .is_none_or(|kind| kind == record.kind.name().as_bytes())
        });
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::bulks(keys.map(|(key, _)| key)),
    ]))
}

/// What `walk` reads of each record.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Its type and expiry only (`Store::scan_keys`): no value is loaded.
    Headers,
    /// Whole values, at most this many per chunk (a RANGE's LIMIT: no more are loaded).
    Values(usize),
}

/// Calls `visit` on every live record from `start` (an engine key) to the end of the record
/// range, in chunks, until it returns false.
fn walk(
    context: &Context,
    (start, upper): (Bound<&[u8]>, Bound<&[u8]>),
    reverse: bool,
    read: Read,
    visit: &mut dyn FnMut(Vec<u8>, Record) -> bool,
) -> Result<(), Failure> {
    let mut position: Bound<Vec<u8>> = if reverse { upper } else { start }.map(<[u8]>::to_vec);
    let chunk = match read {
        Read::Headers => CHUNK,
        Read::Values(most) => most.clamp(1, CHUNK),
    };
    loop {
        let (lower, upper_now) = if reverse {
            (start, position.as_ref().map(Vec::as_slice))
        } else {
            (position.as_ref().map(Vec::as_slice), upper)
        };
        let pairs = match read {
            Read::Headers => context.store.scan_keys(lower, upper_now, chunk, reverse)?,
            Read::Values(_) => context.store.scan(lower, upper_now, chunk, reverse)?,
        };
        let done = pairs.len() < chunk;
        let Some((last, _)) = pairs.last() else {
            return Ok(());
        };
        position = Bound::Excluded(last.clone());
        let now = now_ms();
        for (key, record) in pairs.into_iter().filter_map(|pair| live(pair, now)) {
            if !visit(key, record) {
                return Ok(());
            }
        }
        if done {
            return Ok(());
        }
    }
}

const RECORDS_START: &[u8] = &[META];
const RECORDS_END: &[u8] = &[META + 1];

fn keys(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let pattern = arg(args, 1);
    let mut found = Vec::new();
    walk(
        context,
        (Bound::Included(RECORDS_START), Bound::Excluded(RECORDS_END)),
        false,
        Read::Headers,
        &mut |key, _| {
            if glob_match(pattern, &key) {
                found.push(key);
            }
            true
        },
    )?;
    Ok(Reply::bulks(found))
}

fn dbsize(context: &Context, _: &mut Session, _: &Args<'_>) -> Outcome {
    let mut count = 0;
    walk(
        context,
        (Bound::Included(RECORDS_START), Bound::Excluded(RECORDS_END)),
        false,
        Read::Headers,
        &mut |_, _| {
            count += 1;
            true
        },
    )?;
    Ok(Reply::Integer(count))
}

fn flush(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    match args.get(1) {
        None => {}
        Some(mode) if is(mode, "ASYNC") || is(mode, "SYNC") => {}
        Some(_) => return Err(Failure::syntax()),
    }
    // Each chunk resumes after the last key scanned, so no scan re-walks earlier tombstones.
    let mut position: Option<Vec<u8>> = None;
    loop {
        let lower = position
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let pairs = context
            .store
            .scan_keys(lower, Bound::Unbounded, CHUNK, false)?;
        let Some((last, _)) = pairs.last() else {
            return Ok(Reply::ok());
        };
        position = Some(last.clone());
        flush_chunk(context, pairs.into_iter().map(|(key, _)| key).collect())?;
    }
}

/// Operations FLUSHDB gathers before writing them (one key's delete adds at most
/// `DELETE_FIELDS_MAX + 1`), far inside the engine's batch limits.
const FLUSH_BATCH: usize = 4 * super::DELETE_FIELDS_MAX;

/// The user key an engine key belongs to: a record's key, or a field's hash.
fn owner(engine_key: &[u8]) -> Option<&[u8]> {
    match engine_key.first() {
        Some(&META) => engine_key.get(1..),
        _ => layout::hash_of_field_key(engine_key),
    }
}

/// Deletes the engine keys `chunk` and everything their user keys own, holding those keys'
/// locks (invariant 3): a writer racing FLUSHDB leaves its key whole or has it deleted whole.
fn flush_chunk(context: &Context, chunk: Vec<Vec<u8>>) -> Result<(), Failure> {
    let owners: std::collections::BTreeSet<&[u8]> =
        chunk.iter().filter_map(|key| owner(key)).collect();
    let owners: Vec<&[u8]> = owners.into_iter().collect();
    let _locks = context.lock_keys(&owners);
    let mut ops = Vec::new();
    let mut deleted = std::collections::HashSet::new();
    for key in owners {
        if !context.may_hold_hash(key) {
            // No hash (context invariant 3): its record, if any, goes without being read.
            ops.push(Op::Delete(layout::meta_key(key)));
        } else if let Some(record) = load_locked(context, key)? {
            ops.extend(delete_ops(context, key, &record)?);
            deleted.insert(key);
        }
        if ops.len() >= FLUSH_BATCH {
            context.store.write(std::mem::take(&mut ops))?;
        }
    }
    // Left: fields of a hash without a record, and keys that are neither records nor fields;
    // nothing owns them, but their hash's lock is still held, so no HSET is recreating it.
    let leftovers = chunk.iter().filter(|key| {
        key.first() != Some(&META) && owner(key).is_none_or(|key| !deleted.contains(key))
    });
    ops.extend(leftovers.cloned().map(Op::Delete));
    if !ops.is_empty() {
        context.store.write(ops)?;
    }
    Ok(())
}

/// `RANGE start end [LIMIT n] [REV]`: string keys in `[start, end)` (an empty `end`: no upper
/// bound) with their values, as a flat key, value, ... array.
fn range(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (start, end) = (arg(args, 1), arg(args, 2));
    let (mut limit, mut reverse) = (usize::MAX, false);
    let mut index = 3;
    while index < args.len() {
        match (arg(args, index), args.get(index + 1)) {
            (option, Some(count)) if is(option, "LIMIT") => {
                limit = usize::try_from(parse_i64(count)?).map_err(|_| Failure::syntax())?;
                index += 2;
            }
            (option, _) if is(option, "REV") => {
                reverse = true;
                index += 1;
            }
            _ => return Err(Failure::syntax()),
        }
    }
    let lower = layout::meta_key(start);
    let upper = if end.is_empty() {
        RECORDS_END.to_vec()
    } else {
        layout::meta_key(end)
    };
    let mut items = Vec::new();
    let mut taken = 0;
    if limit > 0 {
        walk(
            context,
            (Bound::Included(&lower), Bound::Excluded(&upper)),
            reverse,
            Read::Values(limit),
            &mut |key, record| {
                if record.kind == Kind::String {
                    items.push(key);
                    items.push(record.payload);
                    taken += 1;
                }
                taken < limit
            },
        )?;
    }
    Ok(Reply::bulks(items))
}

/// Redis's glob (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`.
///
/// Iterative, in time proportional to the pattern times the text: a `*` remembers where it
/// stood, and a mismatch later resumes from there one byte further into the text (only the
/// last `*` needs resuming: it can absorb whatever an earlier one would have). A recursive
/// match took a stack frame per `*` and exponential time on patterns such as `*****…x`, so one
/// client could overflow the stack (aborting the server) or pin a thread.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut at, mut position) = (0, 0);
    // After the last `*` seen: the pattern index past it, and the text index it resumes from.
    let mut resume: Option<(usize, usize)> = None;
    while position < text.len() {
        let rest = pattern.get(at..).unwrap_or_default();
        if rest.first() == Some(&b'*') {
            at += 1;
            resume = Some((at, position));
            continue;
        }
        let byte = text.get(position).copied().unwrap_or_default();
        if let Some(consumed) = match_one(rest, byte) {
            at += consumed;
            position += 1;
            continue;
        }
        let Some((star_at, star_position)) = resume else {
            return false;
        };
        at = star_at;
        position = star_position + 1;
        resume = Some((star_at, position));
    }
    pattern
        .get(at..)
        .unwrap_or_default()
        .iter()
        .all(|&token| token == b'*')
}

/// Matches one text byte against the pattern's first token (not `*`): the pattern bytes the
/// token took if it matches, None if it does not (or the pattern is empty).
fn match_one(pattern: &[u8], byte: u8) -> Option<usize> {
    match pattern.split_first()? {
        (b'?', _) => Some(1),
        (b'[', rest) => {
            let (matched, after) = match_class(rest, byte);
            matched.then(|| pattern.len() - after.len())
        }
        (b'\\', rest) if !rest.is_empty() => (rest.first() == Some(&byte)).then_some(2),
        (&literal, _) => (literal == byte).then_some(1),
    }
}

/// Matches `byte` against the class after `[`; returns the result and the pattern after `]`.
fn match_class(class: &[u8], byte: u8) -> (bool, &[u8]) {
    let (negated, mut rest) = match class.split_first() {
        Some((b'^', rest)) => (true, rest),
        _ => (false, class),
    };
    let mut matched = false;
    loop {
        match rest {
            [] => break,
            [b']', tail @ ..] => {
                rest = tail;
                break;
            }
            [b'\\', escaped, tail @ ..] => {
                matched |= *escaped == byte;
                rest = tail;
            }
            [low, b'-', high, tail @ ..] if *high != b']' => {
                let (low, high) = if low <= high {
                    (*low, *high)
                } else {
                    (*high, *low)
                };
                matched |= (low..=high).contains(&byte);
                rest = tail;
            }
            [single, tail @ ..] => {
                matched |= *single == byte;
                rest = tail;
            }
        }
    }
    (matched != negated, rest)
}
