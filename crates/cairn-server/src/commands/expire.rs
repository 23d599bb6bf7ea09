//! Expiry commands: EXPIRE PEXPIRE EXPIREAT PEXPIREAT TTL PTTL PERSIST, and the expiry
//! option parsing SET, SETEX and GETEX share.
//!
//! Thread-safety contract: as every handler (see `commands`); writers hold the key's lock.
//!
//! Invariants:
//! 1. An expiry at or before now deletes the key at once (as Redis does), never stores an
//!    already-expired record.
//! 2. Expiry arithmetic never overflows: out-of-range times are Redis's "invalid expire time".

use super::{
    arg, delete_ops, load, load_locked, parse_i64, put_record, Args, Failure, Outcome, Spec,
};
use crate::context::{Context, Session};
use crate::expiry::now_ms;
use crate::resp::Reply;

/// The expiry commands.
pub const SPECS: &[Spec] = &[
    super::spec("expire", -3, true, (1, 1, 1), expire),
    super::spec("pexpire", -3, true, (1, 1, 1), expire),
    super::spec("expireat", -3, true, (1, 1, 1), expire),
    super::spec("pexpireat", -3, true, (1, 1, 1), expire),
    super::spec("ttl", 2, false, (1, 1, 1), ttl),
    super::spec("pttl", 2, false, (1, 1, 1), ttl),
    super::spec("persist", 2, true, (1, 1, 1), persist),
];

/// How an expiry argument is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds from now (EX).
    Seconds,
    /// Milliseconds from now (PX).
    Millis,
    /// Unix seconds (EXAT).
    UnixSeconds,
    /// Unix milliseconds (PXAT).
    UnixMillis,
}

/// The absolute expiry in Unix milliseconds; `command` names the command in the error.
/// `allow_past` admits non-positive values (EXPIRE does; SET's options do not).
pub fn deadline(unit: Unit, value: &[u8], command: &str, allow_past: bool) -> Result<u64, Failure> {
    let value = parse_i64(value)?;
    let invalid = || Failure::err(format!("invalid expire time in '{command}' command"));
    if value <= 0 && !allow_past {
        return Err(invalid());
    }
    let now = now_ms() as i64;
    let millis = match unit {
        Unit::Seconds => value.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
        Unit::Millis => value.checked_add(now),
        Unit::UnixSeconds => value.checked_mul(1000),
        Unit::UnixMillis => Some(value),
    }
    .ok_or_else(invalid)?;
    Ok(millis.max(0) as u64)
}

fn expire(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let name = String::from_utf8_lossy(arg(args, 0)).to_lowercase();
    let unit = match name.as_str() {
        "expire" => Unit::Seconds,
        "pexpire" => Unit::Millis,
        "expireat" => Unit::UnixSeconds,
        _ => Unit::UnixMillis,
    };
    let key = arg(args, 1);
    let at = deadline(unit, arg(args, 2), &name, true)?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in args.iter().skip(3) {
        match String::from_utf8_lossy(option)
            .to_ascii_uppercase()
            .as_str()
        {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            other => return Err(Failure::err(format!("Unsupported option {other}"))),
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Failure::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Failure::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let _locks = context.lock_keys(&[key]);
    let Some(mut record) = load_locked(context, key)? else {
        return Ok(Reply::Integer(0));
    };
    let current = record.expires_at;
    // Redis treats "no expiry" as an infinite TTL for GT and LT.
    let skip = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|old| at <= old))
        || (lt && current.is_some_and(|old| at >= old));
    if skip {
        return Ok(Reply::Integer(0));
    }
    if at <= now_ms() {
        let ops = delete_ops(context, key, &record)?;
        context.store.write(ops)?;
    } else {
        record.expires_at = Some(at);
        put_record(context, key, &record)?;
    }
    Ok(Reply::Integer(1))
}

fn ttl(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let millis = arg(args, 0).eq_ignore_ascii_case(b"pttl");
    Ok(Reply::Integer(match load(context, arg(args, 1))? {
        None => -2,
        Some(record) => match record.expires_at {
            None => -1,
            Some(at) => {
                let left = at.saturating_sub(now_ms()) as i64;
                // Redis rounds TTL to the nearest second.
                if millis {
                    left
                } else {
                    (left + 500) / 1000
                }
            }
        },
    }))
}

fn persist(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let key = arg(args, 1);
    let _locks = context.lock_keys(&[key]);
    match load_locked(context, key)? {
        Some(mut record) if record.expires_at.is_some() => {
            record.expires_at = None;
            put_record(context, key, &record)?;
            Ok(Reply::Integer(1))
        }
        _ => Ok(Reply::Integer(0)),
    }
}
