//! String commands: GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX MGET MSET MSETNX APPEND
//! STRLEN GETRANGE SETRANGE.
//!
//! Thread-safety contract: as every handler (see `commands`); writers hold the locks of all
//! the keys they write. MSET is one engine batch (atomic for every reader on the `db` engine);
//! MSETNX checks and writes under the locks of all its keys.
//!
//! Invariants:
//! 1. SET (and SETEX, GETSET, MSET, ...) drop the key's expiry unless KEEPTTL; APPEND and
//!    SETRANGE keep it.
//! 2. Overwriting a hash with a string deletes the hash's fields in the same batch.

use super::expire::{deadline, Unit};
use super::{
    arg, check_key, check_value, delete_ops, is, load_locked, load_string, load_string_locked,
    parse_i64, Args, Failure, Outcome, Spec,
};
use crate::context::{Context, Session};
use crate::layout::{self, Kind, Record};
use crate::resp::Reply;
use crate::store::Op;
use cairn::Update;

/// The string commands.
pub const SPECS: &[Spec] = &[
    super::spec("get", 2, false, (1, 1, 1), get),
    super::spec("set", -3, true, (1, 1, 1), set),
    super::spec("setnx", 3, true, (1, 1, 1), setnx),
    super::spec("setex", 4, true, (1, 1, 1), setex),
    super::spec("psetex", 4, true, (1, 1, 1), setex),
    super::spec("getset", 3, true, (1, 1, 1), getset),
    super::spec("getdel", 2, true, (1, 1, 1), getdel),
    super::spec("getex", -2, true, (1, 1, 1), getex),
    super::spec("mget", -2, false, (1, -1, 1), mget),
    super::spec("mset", -3, true, (1, -1, 2), mset),
    super::spec("msetnx", -3, true, (1, -1, 2), msetnx),
    super::spec("append", 3, true, (1, 1, 1), append),
    super::spec("strlen", 2, false, (1, 1, 1), strlen),
    super::spec("getrange", 4, false, (1, 1, 1), getrange),
    super::spec("substr", 4, false, (1, 1, 1), getrange),
    super::spec("setrange", 4, true, (1, 1, 1), setrange),
];

/// Writes `record` at `key` replacing `old` (deleting a hash's fields).
fn replace(
    context: &Context,
    key: &[u8],
    old: Option<&Record>,
    record: &Record,
) -> Result<(), Failure> {
    let mut ops = match old {
        Some(old) if old.kind == Kind::Hash => delete_ops(context, key, old)?,
        _ => Vec::new(),
    };
    ops.push(Op::Put(layout::meta_key(key), record.encode()));
    context.store.write(ops)?;
    Ok(())
}

fn get(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    Ok(Reply::optional(
        load_string(context, arg(args, 1))?.map(|record| record.payload),
    ))
}

/// SET's options.
#[derive(Debug, Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    expires_at: Option<u64>,
}

fn parse_set_options(args: &Args<'_>) -> Result<SetOptions, Failure> {
    let mut options = SetOptions::default();
    let mut index = 3;
    while index < args.len() {
        let option = arg(args, index);
        let unit = [
            ("EX", Unit::Seconds),
            ("PX", Unit::Millis),
            ("EXAT", Unit::UnixSeconds),
            ("PXAT", Unit::UnixMillis),
        ]
        .into_iter()
        .find(|(name, _)| is(option, name));
        if is(option, "NX") && !options.xx {
            options.nx = true;
        } else if is(option, "XX") && !options.nx {
            options.xx = true;
        } else if is(option, "GET") {
            options.get = true;
        } else if is(option, "KEEPTTL") && options.expires_at.is_none() {
            options.keep_ttl = true;
        } else if let (Some((_, unit)), false, None, true) = (
            unit,
            options.keep_ttl,
            options.expires_at,
            index + 1 < args.len(),
        ) {
            index += 1;
            options.expires_at = Some(deadline(unit, arg(args, index), "set", false)?);
        } else {
            return Err(Failure::syntax());
        }
        index += 1;
    }
    Ok(options)
}

fn set(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (key, value) = (arg(args, 1), arg(args, 2));
    if args.len() == 3 {
        // No option: the old record matters only if it is a hash (`plain_set`).
        super::plain_set::set_one(context, key, value)?;
        return Ok(Reply::ok());
    }
    let options = parse_set_options(args)?;
    check_key(key)?;
    check_value(value.len())?;
    let _locks = context.lock_keys(&[key]);
    let old = if options.get {
        load_string_locked(context, key)?
    } else {
        load_locked(context, key)?
    };
    let old_value = || Reply::optional(old.as_ref().map(|record| record.payload.clone()));
    if (options.nx && old.is_some()) || (options.xx && old.is_none()) {
        return Ok(if options.get { old_value() } else { Reply::Nil });
    }
    let expires_at = match (options.keep_ttl, &old) {
        (true, Some(old)) => old.expires_at,
        _ => options.expires_at,
    };
    replace(
        context,
        key,
        old.as_ref(),
        &Record::string(value.to_vec(), expires_at),
    )?;
    Ok(if options.get {
        old_value()
    } else {
        Reply::ok()
    })
}

fn setnx(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (key, value) = (arg(args, 1), arg(args, 2));
    check_key(key)?;
    check_value(value.len())?;
    let _locks = context.lock_keys(&[key]);
    if load_locked(context, key)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    replace(context, key, None, &Record::string(value.to_vec(), None))?;
    Ok(Reply::Integer(1))
}

fn setex(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let name = String::from_utf8_lossy(arg(args, 0)).to_lowercase();
    let unit = if name == "psetex" {
        Unit::Millis
    } else {
        Unit::Seconds
    };
    let (key, value) = (arg(args, 1), arg(args, 3));
    let expires_at = deadline(unit, arg(args, 2), &name, false)?;
    check_key(key)?;
    check_value(value.len())?;
    let _locks = context.lock_keys(&[key]);
    let old = load_locked(context, key)?;
    replace(
        context,
        key,
        old.as_ref(),
        &Record::string(value.to_vec(), Some(expires_at)),
    )?;
    Ok(Reply::ok())
}

fn getset(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (key, value) = (arg(args, 1), arg(args, 2));
    check_key(key)?;
    check_value(value.len())?;
    let _locks = context.lock_keys(&[key]);
    let old = load_string_locked(context, key)?;
    replace(
        context,
        key,
        old.as_ref(),
        &Record::string(value.to_vec(), None),
    )?;
    Ok(Reply::optional(old.map(|record| record.payload)))
}

fn getdel(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    let _locks = context.lock_keys(&[key]);
    let old = load_string_locked(context, key)?;
    if old.is_some() {
        context
            .store
            .write(vec![Op::Delete(layout::meta_key(key))])?;
    }
    Ok(Reply::optional(old.map(|record| record.payload)))
}

fn getex(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    // None: leave the expiry; Some(None): PERSIST; Some(Some(at)): new expiry.
    let change = match args.len() {
        2 => None,
        3 if is(arg(args, 2), "PERSIST") => Some(None),
        4 => {
            let option = arg(args, 2);
            let unit = [
                ("EX", Unit::Seconds),
                ("PX", Unit::Millis),
                ("EXAT", Unit::UnixSeconds),
                ("PXAT", Unit::UnixMillis),
            ]
            .into_iter()
            .find(|(name, _)| is(option, name))
            .ok_or_else(Failure::syntax)?
            .1;
            Some(Some(deadline(unit, arg(args, 3), "getex", false)?))
        }
        _ => return Err(Failure::syntax()),
    };
    let _locks = context.lock_keys(&[key]);
    let Some(mut record) = load_string_locked(context, key)? else {
        return Ok(Reply::Nil);
    };
    if let Some(expires_at) = change {
        record.expires_at = expires_at;
        super::put_record(context, key, &record)?;
    }
    Ok(Reply::Bulk(record.payload))
}

fn mget(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let mut values = Vec::with_capacity(args.len());
    for key in args.iter().skip(1) {
        // Keys of other types read as missing, as in Redis.
        values.push(match super::load(context, key)? {
            Some(record) if record.kind == Kind::String => Reply::Bulk(record.payload),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(values))
}

/// A key and its value.
type Pair<'a> = (&'a [u8], &'a [u8]);

/// The key-value pairs of MSET/MSETNX, checked.
fn pairs<'a>(args: &Args<'a>) -> Result<Vec<Pair<'a>>, Failure> {
    if args.len().is_multiple_of(2) {
        return Err(Failure::err(format!(
            "wrong number of arguments for '{}' command",
            String::from_utf8_lossy(arg(args, 0)).to_lowercase()
        )));
    }
    let pairs: Vec<(&[u8], &[u8])> = args
        .get(1..)
        .unwrap_or_default()
        .chunks_exact(2)
        .filter_map(|pair| match pair {
            [key, value] => Some((*key, *value)),
            _ => None,
        })
        .collect();
    for (key, value) in &pairs {
        check_key(key)?;
        check_value(value.len())?;
    }
    Ok(pairs)
}

/// Writes every pair in one batch (the caller holds the keys' locks).
fn write_pairs(context: &Context, pairs: &[(&[u8], &[u8])]) -> Result<(), Failure> {
    let mut ops = Vec::new();
    for (key, value) in pairs {
        // Reads the old record only if the key may hold a hash (`plain_set`).
        ops.extend(super::plain_set::hash_deletes(context, key)?);
        ops.push(Op::Put(
            layout::meta_key(key),
            layout::string_envelope(value),
        ));
    }
    context.store.write(ops)?;
    Ok(())
}

fn mset(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let pairs = pairs(args)?;
    let keys: Vec<&[u8]> = pairs.iter().map(|(key, _)| *key).collect();
    let _locks = context.lock_keys(&keys);
    write_pairs(context, &pairs)?;
    Ok(Reply::ok())
}

fn msetnx(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let pairs = pairs(args)?;
    let keys: Vec<&[u8]> = pairs.iter().map(|(key, _)| *key).collect();
    let _locks = context.lock_keys(&keys);
    for key in &keys {
        if load_locked(context, key)?.is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    write_pairs(context, &pairs)?;
    Ok(Reply::Integer(1))
}

fn append(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (key, suffix) = (arg(args, 1), arg(args, 2));
    check_key(key)?;
    let _locks = context.lock_keys(&[key]);
    load_string_locked(context, key)?;
    // Through the engine's read-modify-write; the last run's outcome is the one stored.
    let mut outcome: Result<usize, Failure> = Ok(0);
    context
        .store
        .update(&layout::meta_key(key), &mut |current| {
            let record = current.and_then(Record::decode);
            let (mut payload, expires_at) =
                record.map_or((Vec::new(), None), |r| (r.payload, r.expires_at));
            outcome =
                check_value(payload.len() + suffix.len()).map(|_| payload.len() + suffix.len());
            if outcome.is_err() {
                return Update::Keep;
            }
            payload.extend_from_slice(suffix);
            Update::Put(Record::string(payload, expires_at).encode())
        })?;
    Ok(Reply::Integer(outcome? as i64))
}

fn strlen(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let length = load_string(context, arg(args, 1))?.map_or(0, |record| record.payload.len());
    Ok(Reply::Integer(length as i64))
}

fn getrange(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (start, end) = (parse_i64(arg(args, 2))?, parse_i64(arg(args, 3))?);
    let value = load_string(context, arg(args, 1))?.map_or(Vec::new(), |record| record.payload);
    let length = value.len() as i64;
    if length == 0 || (start < 0 && end < 0 && start > end) {
        return Ok(Reply::bulk(Vec::new()));
    }
    let clamp = |index: i64| {
        if index < 0 {
            (length + index).max(0)
        } else {
            index
        }
    };
    let (start, end) = (clamp(start), clamp(end).min(length - 1));
    if start > end {
        return Ok(Reply::bulk(Vec::new()));
    }
    Ok(Reply::bulk(
        value.get(start as usize..=end as usize).unwrap_or_default(),
    ))
}

fn setrange(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let (key, patch) = (arg(args, 1), arg(args, 3));
    let offset = parse_i64(arg(args, 2))?;
    let offset = usize::try_from(offset).map_err(|_| Failure::err("offset is out of range"))?;
    check_key(key)?;
    let _locks = context.lock_keys(&[key]);
    let old = load_string_locked(context, key)?;
    if patch.is_empty() {
        return Ok(Reply::Integer(
            old.map_or(0, |record| record.payload.len()) as i64
        ));
    }
    let end = offset
        .checked_add(patch.len())
        .ok_or_else(|| Failure::err("offset is out of range"))?;
    check_value(end)?;
    let (mut payload, expires_at) = old.map_or((Vec::new(), None), |record| {
        (record.payload, record.expires_at)
    });
    if payload.len() < end {
        payload.resize(end, 0);
    }
    if let Some(slot) = payload.get_mut(offset..end) {
        slot.copy_from_slice(patch);
    }
    let length = payload.len();
    super::put_record(context, key, &Record::string(payload, expires_at))?;
    Ok(Reply::Integer(length as i64))
}
