//! Plain SETs (`SET key value`, no option): one alone, or a run of them from one pipeline
//! written as one engine batch (one WAL group, one fsync under `--sync always`).
//!
//! A plain SET needs the old record only when it is a hash, whose fields must be deleted with
//! it; the context's hash marks say when a key certainly holds none (context invariant 3), so
//! most plain SETs write without reading. A run of consecutive plain SETs from one
//! connection is the same as running them one by one: no other command of that connection
//! runs in between, the engine applies a batch's operations in order (the last SET of a key
//! wins), and every key of the run is locked for the whole read-decide-write.
//!
//! Thread-safety contract: as every handler (see `commands`); the run takes the locks of all
//! its keys at once, in ascending stripe order like every other writer, and holds them until
//! the batch is written.
//!
//! Invariants:
//! 1. Each SET of a run gets its own reply, in order: `+OK`, or its own error (a key or value
//!    over the limits, which writes nothing, or — shared by every SET the batch held — the
//!    engine's error when the batch fails; then none of it was applied).
//! 2. A key whose hash mark is set is read under its lock, and a hash found there has its
//!    fields deleted in the same batch (strings invariant 2).

use super::{check_key, check_value, delete_ops, load_locked, Failure};
use crate::context::Context;
use crate::layout::{self, Kind};
use crate::resp::writer::OK;
use crate::resp::Reply;
use crate::store::Op;

/// Most SETs one batch takes (a longer pipeline is written as several batches).
pub const RUN_MAX: usize = 256;

/// True for `SET key value` (any case), the command [`set_run`] takes.
pub fn is_plain_set(args: &[&[u8]]) -> bool {
    matches!(args, [name, _, _] if name.eq_ignore_ascii_case(b"set"))
}

/// Runs the plain SETs `pairs` (key, value) in order as one batch and appends one reply per
/// pair to `output` (a run of one goes through [`set_one`]).
pub fn set_run(context: &Context, pairs: &[(&[u8], &[u8])], output: &mut Vec<u8>) {
    if let [(key, value)] = pairs {
        match set_one(context, key, value) {
            Ok(()) => output.extend_from_slice(OK),
            Err(Failure(reply)) => reply.encode(output),
        }
        return;
    }
    // `None`: batched (its reply is the batch's outcome); `Some`: its own error.
    let mut refused: Vec<Option<Reply>> = pairs
        .iter()
        .map(|(key, value)| {
            check_key(key)
                .and_then(|()| check_value(value.len()))
                .err()
                .map(|Failure(reply)| reply)
        })
        .collect();
    let keys: Vec<&[u8]> = pairs
        .iter()
        .zip(&refused)
        .filter(|(_, reply)| reply.is_none())
        .map(|((key, _), _)| *key)
        .collect();
    let outcome = if keys.is_empty() {
        Ok(())
    } else {
        let _locks = context.lock_keys(&keys);
        let mut ops = Vec::with_capacity(pairs.len());
        for ((key, value), slot) in pairs.iter().zip(refused.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            match hash_deletes(context, key) {
                Ok(deletes) => ops.extend(deletes),
                Err(Failure(reply)) => {
                    *slot = Some(reply);
                    continue;
                }
            }
            ops.push(Op::Put(
                layout::meta_key(key),
                layout::string_envelope(value),
            ));
        }
        if ops.is_empty() {
            Ok(())
        } else {
            context
                .store
                .write(ops)
                .map_err(|error| Failure::from(error).0)
        }
    };
    for slot in refused {
        match (&slot, &outcome) {
            (Some(reply), _) | (None, Err(reply)) => reply.encode(output),
            (None, Ok(())) => output.extend_from_slice(OK),
        }
    }
}

/// One plain SET (`set_run` of one pair), without the run's vectors: with its hash mark
/// clear (almost always) it is one engine put of borrowed bytes.
pub fn set_one(context: &Context, key: &[u8], value: &[u8]) -> Result<(), Failure> {
    check_key(key)?;
    check_value(value.len())?;
    let _locks = context.lock_keys(&[key]);
    let deletes = hash_deletes(context, key)?;
    let engine_key = layout::meta_key(key);
    let envelope = layout::string_envelope(value);
    if deletes.is_empty() {
        context.store.put(&engine_key, &envelope)?;
    } else {
        let mut ops = deletes;
        ops.push(Op::Put(engine_key, envelope));
        context.store.write(ops)?;
    }
    Ok(())
}

/// The deletes of `key`'s hash fields if it holds a hash (none when its mark is clear); the
/// caller holds its lock. An expired record is deleted here (`load_locked`). MSET and MSETNX
/// use it too.
pub fn hash_deletes(context: &Context, key: &[u8]) -> Result<Vec<Op>, Failure> {
    if !context.may_hold_hash(key) {
        #[cfg(feature = "invariants")]
        assert!(
            !matches!(super::raw_record(context, key), Ok(Some(record)) if record.kind == Kind::Hash),
            "context invariant 3: a key with a clear hash mark holds no hash"
        );
        return Ok(Vec::new());
    }
    match load_locked(context, key)? {
        Some(old) if old.kind == Kind::Hash => delete_ops(context, key, &old),
        _ => Ok(Vec::new()),
    }
}
