//! Command dispatch: the command table (name, arity, key positions, handler), argument
//! helpers shared by the families, and the record access every family goes through.
//!
//! Thread-safety contract: handlers are synchronous functions of `(&Context, &mut Session,
//! arguments)`; they run on the connection's task and may run concurrently with any other
//! handler. Writers serialize per key through `Context::lock_keys`.
//!
//! Invariants:
//! 1. A handler runs only with an argument count its arity allows (positive: exact,
//!    negative: at least), so handlers index arguments below the arity freely through `arg`.
//! 2. An expired record is never returned by `load`/`load_locked`: reads treat it as absent
//!    and delete it (with its hash fields) under the key's lock, re-checking it first.
//! 3. Every engine key a command writes fits the engine's limits: user keys and hash fields
//!    are checked by `check_key`/`check_field` before any write, values by `check_value`.

pub mod admin;
pub mod counters;
pub mod expire;
pub mod hashes;
pub mod keys;
pub mod plain_set;
pub mod strings;

#[cfg(test)]
mod tests;

use crate::context::{Context, Session};
use crate::expiry::now_ms;
use crate::layout::{self, Kind, Record, ENVELOPE_HEADER_MAX, MAX_ENGINE_KEY, MAX_ENGINE_VALUE};
use crate::resp::Reply;
use crate::store::Op;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::Bound;
use std::sync::OnceLock;

/// Arguments of a command, the name first (slices of the connection's read buffer).
pub type Args<'a> = [&'a [u8]];

/// An error reply that stops a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub Reply);

impl From<cairn::Error> for Failure {
    fn from(error: cairn::Error) -> Self {
        Failure(Reply::err(format!("engine: {error}")))
    }
}

impl Failure {
    /// `-ERR message`.
    pub fn err(message: impl AsRef<str>) -> Failure {
        Failure(Reply::err(message))
    }

    /// Redis's WRONGTYPE error.
    pub fn wrong_type() -> Failure {
        Failure(Reply::Error(
            "WRONGTYPE Operation against a key holding the wrong kind of value".to_string(),
        ))
    }

    /// Redis's syntax error.
    pub fn syntax() -> Failure {
        Failure::err("syntax error")
    }

    /// Redis's integer parse error.
    pub fn not_integer() -> Failure {
        Failure::err("value is not an integer or out of range")
    }
}

/// What a handler returns.
pub type Outcome = Result<Reply, Failure>;

type Handler = fn(&Context, &mut Session, &Args<'_>) -> Outcome;

/// One command's table entry.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: positive exact, negative minimum (the name counts).
    pub arity: i32,
    /// Whether it writes (for COMMAND's flags).
    pub write: bool,
    /// First key position, last key position (-1: last argument), step (COMMAND's key specs).
    pub keys: (i32, i32, i32),
    handler: Handler,
}

const fn spec(
    name: &'static str,
    arity: i32,
    write: bool,
    keys: (i32, i32, i32),
    handler: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        write,
        keys,
        handler,
    }
}

/// Every command the server knows.
pub fn table() -> Vec<Spec> {
    let mut all = Vec::new();
    all.extend_from_slice(strings::SPECS);
    all.extend_from_slice(counters::SPECS);
    all.extend_from_slice(expire::SPECS);
    all.extend_from_slice(hashes::SPECS);
    all.extend_from_slice(keys::SPECS);
    all.extend_from_slice(admin::SPECS);
    all
}

/// Longest command name (the index is never asked about longer ones).
const NAME_MAX: usize = 32;

/// Looks a command up by (case-insensitive) name, without allocating.
pub fn find(name: &[u8]) -> Option<Spec> {
    static INDEX: OnceLock<HashMap<&'static [u8], Spec, BuildHasherDefault<crate::context::Fnv>>> =
        OnceLock::new();
    let index = INDEX.get_or_init(|| {
        table()
            .into_iter()
            .map(|spec| (spec.name.as_bytes(), spec))
            .collect()
    });
    let mut lower = [0u8; NAME_MAX];
    let lower = lower.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    index.get(&*lower).copied()
}

/// Runs one command and returns its reply. The caller counts it (`Context::count_commands`).
pub fn dispatch(context: &Context, session: &mut Session, args: &Args<'_>) -> Reply {
    let Some(name) = args.first() else {
        return Reply::err("empty command");
    };
    let Some(spec) = find(name) else {
        return unknown_command(args);
    };
    let count = args.len() as i64;
    let arity = i64::from(spec.arity);
    if (arity > 0 && count != arity) || (arity < 0 && count < -arity) {
        return Reply::err(format!(
            "wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name).to_lowercase()
        ));
    }
    match (spec.handler)(context, session, args) {
        Ok(reply) => reply,
        Err(Failure(reply)) => reply,
    }
}

/// Redis's exact unknown-command error (each argument quoted, cut to 128 bytes in all).
fn unknown_command(args: &Args<'_>) -> Reply {
    let text = |bytes: &[u8]| String::from_utf8_lossy(&bytes[..bytes.len().min(128)]).into_owned();
    let mut listed = String::new();
    for argument in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        listed.push_str(&format!("'{}' ", text(argument)));
    }
    Reply::err(format!(
        "unknown command '{}', with args beginning with: {listed}",
        text(args.first().copied().unwrap_or_default())
    ))
}

/// Argument `index` (empty if missing; arity checks make that unreachable).
pub fn arg<'a>(args: &Args<'a>, index: usize) -> &'a [u8] {
    args.get(index).copied().unwrap_or_default()
}

/// Parses a Redis integer argument.
pub fn parse_i64(bytes: &[u8]) -> Result<i64, Failure> {
    // Redis's `string2ll`: "0", or an optional `-` and digits without a leading zero.
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let canonical = bytes == b"0"
        || digits
            .first()
            .is_some_and(|first| (b'1'..=b'9').contains(first));
    std::str::from_utf8(bytes)
        .ok()
        .filter(|_| canonical && digits.iter().all(u8::is_ascii_digit))
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or_else(Failure::not_integer)
}

/// Case-insensitive option match.
pub fn is(argument: &[u8], option: &str) -> bool {
    argument.eq_ignore_ascii_case(option.as_bytes())
}

/// Refuses user keys whose record key would exceed the engine's key limit.
pub fn check_key(key: &[u8]) -> Result<(), Failure> {
    if key.len() + 1 > MAX_ENGINE_KEY {
        return Err(Failure::err(format!(
            "key too large: {} bytes (the limit is {} bytes)",
            key.len(),
            MAX_ENGINE_KEY - 1
        )));
    }
    Ok(())
}

/// Refuses hash fields whose field key would exceed the engine's key limit.
pub fn check_field(key: &[u8], field: &[u8]) -> Result<(), Failure> {
    let length = 5 + key.len() + field.len();
    if length > MAX_ENGINE_KEY {
        return Err(Failure::err(format!(
            "key too large: hash key plus field take {length} bytes encoded (the limit is {MAX_ENGINE_KEY})"
        )));
    }
    Ok(())
}

/// The largest string value.
pub const MAX_VALUE: usize = MAX_ENGINE_VALUE - ENVELOPE_HEADER_MAX;

/// Refuses values over the limit.
pub fn check_value(length: usize) -> Result<(), Failure> {
    if length > MAX_VALUE {
        return Err(Failure::err(format!(
            "value too large: {length} bytes (the limit is {MAX_VALUE} bytes)"
        )));
    }
    Ok(())
}

/// The live record of `key`, reading without locks; an expired record found here is deleted
/// under the key's lock.
pub fn load(context: &Context, key: &[u8]) -> Result<Option<Record>, Failure> {
    match raw_record(context, key)? {
        Some(record) if record.is_expired(now_ms()) => {
            let _locks = context.lock_keys(&[key]);
            load_locked(context, key)?;
            Ok(None)
        }
        other => Ok(other),
    }
}

/// The live record of `key`; the caller holds the key's lock. Deletes an expired record.
pub fn load_locked(context: &Context, key: &[u8]) -> Result<Option<Record>, Failure> {
    match raw_record(context, key)? {
        Some(record) if record.is_expired(now_ms()) => {
            let ops = delete_ops(context, key, &record)?;
            context.store.write(ops)?;
            Ok(None)
        }
        other => Ok(other),
    }
}

/// The record of `key`, expired or not.
pub fn raw_record(context: &Context, key: &[u8]) -> Result<Option<Record>, Failure> {
    match context.store.get(&layout::meta_key(key))? {
        None => Ok(None),
        Some(bytes) => Record::decode_owned(bytes)
            .map(Some)
            .ok_or_else(|| Failure::err("corrupt record (not a cairn-server value envelope)")),
    }
}

/// The live string at `key` (WRONGTYPE for other types).
pub fn load_string(context: &Context, key: &[u8]) -> Result<Option<Record>, Failure> {
    match load(context, key)? {
        Some(record) if record.kind != Kind::String => Err(Failure::wrong_type()),
        other => Ok(other),
    }
}

/// Like `load_string` with the key's lock held.
pub fn load_string_locked(context: &Context, key: &[u8]) -> Result<Option<Record>, Failure> {
    match load_locked(context, key)? {
        Some(record) if record.kind != Kind::String => Err(Failure::wrong_type()),
        other => Ok(other),
    }
}

/// Field deletes one key's delete may put into its caller's batch. A larger hash is hidden
/// and its other fields deleted beforehand in batches of this many, so deleting any one key
/// stays far inside the engine's batch limits (`BATCH_ENTRIES_MAX` entries; with keys of at
/// most `MAX_ENGINE_KEY` bytes, 64 MiB of `BATCH_BYTES_MAX`'s 1 GiB).
pub const DELETE_FIELDS_MAX: usize = 1024;

/// The operations that delete `key` with everything it owns (a hash's fields); the caller
/// holds the key's lock and writes them as one batch.
///
/// A hash of more than [`DELETE_FIELDS_MAX`] fields is first hidden (its record written as
/// expired, so every reader and writer treats the key as gone and deletes what is left),
/// then all but its last fields are deleted in batches here. A crash part-way leaves the key
/// hidden, and its next access finishes the delete: no field outlives its hash.
pub fn delete_ops(context: &Context, key: &[u8], record: &Record) -> Result<Vec<Op>, Failure> {
    let mut ops = Vec::new();
    if record.kind == Kind::Hash {
        let prefix = layout::field_prefix(key);
        let end = layout::prefix_end(&prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut lower = prefix;
        let mut inclusive = true;
        let mut hidden = record.is_expired(now_ms());
        loop {
            let from = if inclusive {
                Bound::Included(lower.as_slice())
            } else {
                Bound::Excluded(lower.as_slice())
            };
            let mut fields = context
                .store
                .scan_keys(from, upper, DELETE_FIELDS_MAX + 1, false)?;
            if fields.len() <= DELETE_FIELDS_MAX {
                ops.extend(fields.into_iter().map(|(field, _)| Op::Delete(field)));
                break;
            }
            if !hidden {
                put_record(context, key, &Record::hash(record.field_count(), Some(0)))?;
                hidden = true;
            }
            fields.truncate(DELETE_FIELDS_MAX);
            let Some((last, _)) = fields.last() else {
                break;
            };
            lower = last.clone();
            inclusive = false;
            context.store.write(
                fields
                    .into_iter()
                    .map(|(field, _)| Op::Delete(field))
                    .collect(),
            )?;
        }
    }
    ops.push(Op::Delete(layout::meta_key(key)));
    Ok(ops)
}

/// Writes a string record.
pub fn put_record(context: &Context, key: &[u8], record: &Record) -> Result<(), Failure> {
    context
        .store
        .write(vec![Op::Put(layout::meta_key(key), record.encode())])?;
    Ok(())
}
