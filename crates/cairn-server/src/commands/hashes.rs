//! Hash commands: HSET HMSET HGET HMGET HGETALL HDEL HLEN HEXISTS HINCRBY HKEYS HVALS HSCAN.
//!
//! A hash is a record (type hash, field count, expiry) under the key, and one engine key per
//! field under a prefix that sorts the hash's fields together (see `layout`), as Kvrocks
//! stores them; HGETALL, HKEYS, HVALS and HSCAN are range scans of that prefix.
//!
//! Thread-safety contract: as every handler (see `commands`); writers hold the hash key's
//! lock, so the field count they read and rewrite cannot change under them. Readers take no
//! lock: an HGETALL racing an HSET sees the fields as of its scan.
//!
//! Invariants:
//! 1. The record's field count equals the number of field keys under the hash's prefix
//!    once every writer has returned; a write that changes the count writes the fields and
//!    the new count in one batch.
//! 2. A hash with no fields does not exist: the last HDEL deletes the record.

use super::keys::{glob_match, page, ScanOptions};
use super::{
    arg, check_field, check_key, is, load, load_locked, parse_i64, Args, Failure, Outcome, Spec,
};
use crate::context::{Context, Session};
use crate::layout::{self, Kind, Record};
use crate::resp::Reply;
use crate::store::{Op, Pairs};
use std::ops::Bound;

/// The hash commands.
pub const SPECS: &[Spec] = &[
    super::spec("hset", -4, true, (1, 1, 1), hset),
    super::spec("hmset", -4, true, (1, 1, 1), hset),
    super::spec("hget", 3, false, (1, 1, 1), hget),
    super::spec("hmget", -3, false, (1, 1, 1), hmget),
    super::spec("hgetall", 2, false, (1, 1, 1), hgetall),
    super::spec("hkeys", 2, false, (1, 1, 1), hgetall),
    super::spec("hvals", 2, false, (1, 1, 1), hgetall),
    super::spec("hdel", -3, true, (1, 1, 1), hdel),
    super::spec("hlen", 2, false, (1, 1, 1), hlen),
    super::spec("hexists", 3, false, (1, 1, 1), hexists),
    super::spec("hincrby", 4, true, (1, 1, 1), hincrby),
    super::spec("hscan", -3, false, (1, 1, 1), hscan),
];

/// The hash record at `key` (WRONGTYPE for other types); `locked`: the caller holds the lock.
fn load_hash(context: &Context, key: &[u8], locked: bool) -> Result<Option<Record>, Failure> {
    let record = if locked {
        load_locked(context, key)?
    } else {
        load(context, key)?
    };
    match record {
        Some(record) if record.kind != Kind::Hash => Err(Failure::wrong_type()),
        other => Ok(other),
    }
}

/// Hashes with more fields than this are not re-counted after each write: the check reads
/// every field, and a load that grows one large hash (redis-benchmark's HSET) would turn
/// quadratic. Tests use far smaller hashes.
#[cfg(feature = "invariants")]
const CHECKED_FIELDS_MAX: u64 = 4096;

/// Invariant 1 for hash `key`; the caller holds its lock and its write has returned.
#[cfg(feature = "invariants")]
fn check_field_count(context: &Context, key: &[u8]) {
    let recorded = match super::raw_record(context, key) {
        Ok(record) => record.map_or(0, |record| record.field_count()),
        Err(failure) => panic!("invariant 1: unreadable record of {key:?}: {failure:?}"),
    };
    if recorded > CHECKED_FIELDS_MAX {
        return;
    }
    let prefix = layout::field_prefix(key);
    let end = layout::prefix_end(&prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let stored = context
        .store
        .scan_keys(Bound::Included(&prefix), upper, usize::MAX, false)
        .map_or(0, |fields| fields.len() as u64);
    assert_eq!(
        recorded, stored,
        "invariant 1: the field count of {key:?} matches its fields"
    );
}

fn field_value(context: &Context, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>, Failure> {
    Ok(context.store.get(&layout::field_key(key, field))?)
}

fn hset(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    let fields = args.get(2..).unwrap_or_default();
    if fields.len() % 2 != 0 {
        return Err(Failure::err(format!(
            "wrong number of arguments for '{}' command",
            String::from_utf8_lossy(arg(args, 0)).to_lowercase()
        )));
    }
    check_key(key)?;
    for pair in fields.chunks_exact(2) {
        if let [field, value] = pair {
            check_field(key, field)?;
            super::check_value(value.len())?;
        }
    }
    let _locks = context.lock_keys(&[key]);
    // Before any field or record of the hash is written (context invariant 3).
    context.mark_hash(key);
    let record = load_hash(context, key, true)?;
    let mut count = record.as_ref().map_or(0, Record::field_count);
    let mut added = 0;
    let mut ops = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for pair in fields.chunks_exact(2) {
        if let [field, value] = pair {
            if seen.insert(field) && field_value(context, key, field)?.is_none() {
                added += 1;
            }
            ops.push(Op::Put(layout::field_key(key, field), value.to_vec()));
        }
    }
    if added > 0 || record.is_none() {
        count += added;
        let expires_at = record.and_then(|record| record.expires_at);
        ops.push(Op::Put(
            layout::meta_key(key),
            Record::hash(count, expires_at).encode(),
        ));
    }
    context.store.write(ops)?;
    #[cfg(feature = "invariants")]
    check_field_count(context, key);
    if is(arg(args, 0), "hmset") {
        Ok(Reply::ok())
    } else {
        Ok(Reply::Integer(added as i64))
    }
}

fn hget(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    if load_hash(context, key, false)?.is_none() {
        return Ok(Reply::Nil);
    }
    Ok(Reply::optional(field_value(context, key, arg(args, 2))?))
}

fn hmget(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    let exists = load_hash(context, key, false)?.is_some();
    let mut values = Vec::new();
    for field in args.iter().skip(2) {
        values.push(if exists {
            Reply::optional(field_value(context, key, field)?)
        } else {
            Reply::Nil
        });
    }
    Ok(Reply::Array(values))
}

/// Every (field, value) of hash `key`, in field order.
fn all_fields(context: &Context, key: &[u8]) -> Result<Pairs, Failure> {
    let prefix = layout::field_prefix(key);
    let end = layout::prefix_end(&prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let pairs = context
        .store
        .scan(Bound::Included(&prefix), upper, usize::MAX, false)?;
    Ok(pairs
        .into_iter()
        .map(|(engine_key, value)| {
            (
                engine_key.get(prefix.len()..).unwrap_or_default().to_vec(),
                value,
            )
        })
        .collect())
}

fn hgetall(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    if load_hash(context, key, false)?.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    let pairs = all_fields(context, key)?;
    let name = arg(args, 0).to_ascii_lowercase();
    Ok(match name.as_slice() {
        b"hkeys" => Reply::bulks(pairs.into_iter().map(|(field, _)| field)),
        b"hvals" => Reply::bulks(pairs.into_iter().map(|(_, value)| value)),
        _ => Reply::bulks(pairs.into_iter().flat_map(|(field, value)| [field, value])),
    })
}

fn hdel(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    let _locks = context.lock_keys(&[key]);
    let Some(record) = load_hash(context, key, true)? else {
        return Ok(Reply::Integer(0));
    };
    let mut removed = 0u64;
    let mut ops = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for field in args.iter().skip(2) {
        if seen.insert(field) && field_value(context, key, field)?.is_some() {
            removed += 1;
            ops.push(Op::Delete(layout::field_key(key, field)));
        }
    }
    let left = record.field_count().saturating_sub(removed);
    if left == 0 {
        ops.push(Op::Delete(layout::meta_key(key)));
    } else if removed > 0 {
        ops.push(Op::Put(
            layout::meta_key(key),
            Record::hash(left, record.expires_at).encode(),
        ));
    }
    if !ops.is_empty() {
        context.store.write(ops)?;
    }
    #[cfg(feature = "invariants")]
    check_field_count(context, key);
    Ok(Reply::Integer(removed as i64))
}

fn hlen(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let count = load_hash(context, arg(args, 1), false)?.map_or(0, |record| record.field_count());
    Ok(Reply::Integer(count as i64))
}

fn hexists(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    if load_hash(context, key, false)?.is_none() {
        return Ok(Reply::Integer(0));
    }
    Ok(Reply::Integer(i64::from(
        field_value(context, key, arg(args, 2))?.is_some(),
    )))
}

fn hincrby(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (key, field) = (arg(args, 1), arg(args, 2));
    let delta = parse_i64(arg(args, 3))?;
    check_key(key)?;
    check_field(key, field)?;
    let _locks = context.lock_keys(&[key]);
    // Before the field or the record is written (context invariant 3).
    context.mark_hash(key);
    let record = load_hash(context, key, true)?;
    // The key's lock keeps every other writer of the hash out, so a plain read and one batch
    // are as atomic as a read-modify-write, and a new field goes with its count (invariant 1).
    let current = field_value(context, key, field)?;
    let value = match &current {
        None => 0,
        Some(bytes) => {
            parse_i64(bytes).map_err(|_| Failure::err("hash value is not an integer"))?
        }
    };
    let sum = value
        .checked_add(delta)
        .ok_or_else(|| Failure::err("increment or decrement would overflow"))?;
    let mut ops = vec![Op::Put(
        layout::field_key(key, field),
        sum.to_string().into_bytes(),
    )];
    if current.is_none() {
        let count = record.as_ref().map_or(0, Record::field_count) + 1;
        let expires_at = record.and_then(|record| record.expires_at);
        ops.push(Op::Put(
            layout::meta_key(key),
            Record::hash(count, expires_at).encode(),
        ));
    }
    context.store.write(ops)?;
    #[cfg(feature = "invariants")]
    check_field_count(context, key);
    Ok(Reply::Integer(sum))
}

fn hscan(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    let options = ScanOptions::parse(args, 3)?;
    if load_hash(context, key, false)?.is_none() {
        return Ok(Reply::Array(vec![
            Reply::bulk("0"),
            Reply::Array(Vec::new()),
        ]));
    }
    let prefix = layout::field_prefix(key);
    let (next, pairs) = page(context, arg(args, 2), &prefix, options.count, true)?;
    let mut items = Vec::new();
    for (engine_key, value) in pairs {
        let field = engine_key.get(prefix.len()..).unwrap_or_default().to_vec();
        if options
            .pattern
            .as_deref()
            .is_none_or(|pattern| glob_match(pattern, &field))
        {
            items.push(field);
            items.push(value);
        }
    }
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::bulks(items),
    ]))
}
