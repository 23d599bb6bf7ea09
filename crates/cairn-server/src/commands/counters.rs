//! Counter commands: INCR INCRBY DECR DECRBY INCRBYFLOAT, each one engine read-modify-write
//! (`Store::update`) of the key's record.
//!
//! Thread-safety contract: as every handler (see `commands`); each holds its key's lock, and
//! the engine's read-modify-write makes the read and the write one atomic step as well.
//!
//! Invariants:
//! 1. A counter keeps its expiry (Redis: INCR does not touch the TTL).
//! 2. A failed increment (not a number, overflow, WRONGTYPE) writes nothing.

use super::{arg, check_key, load_string_locked, parse_i64, Args, Failure, Outcome, Spec};
use crate::context::{Context, Session};
use crate::layout::{self, Record};
use crate::resp::Reply;
use cairn::Update;

/// The counter commands.
pub const SPECS: &[Spec] = &[
    super::spec("incr", 2, true, (1, 1, 1), incr),
    super::spec("decr", 2, true, (1, 1, 1), incr),
    super::spec("incrby", 3, true, (1, 1, 1), incr),
    super::spec("decrby", 3, true, (1, 1, 1), incr),
    super::spec("incrbyfloat", 3, true, (1, 1, 1), incrbyfloat),
];

/// Computes a counter's new text from its current string (None: absent).
type Step<'a> = dyn Fn(Option<&[u8]>) -> Result<Vec<u8>, Failure> + 'a;

/// Runs `step` on the key's current string (None: absent) through the engine's
/// read-modify-write, storing its result with the old expiry; returns the new text.
fn modify(context: &Context, key: &[u8], step: &Step) -> Result<Vec<u8>, Failure> {
    check_key(key)?;
    let _locks = context.lock_keys(&[key]);
    // Purges an expired record and rejects other types before the engine call.
    load_string_locked(context, key)?;
    let mut outcome: Result<Vec<u8>, Failure> = Err(Failure::err("not run"));
    context
        .store
        .update(&layout::meta_key(key), &mut |current| {
            let record = current.and_then(Record::decode);
            let expires_at = record.as_ref().and_then(|record| record.expires_at);
            outcome = step(record.as_ref().map(|record| record.payload.as_slice()));
            match &outcome {
                Ok(text) => Update::Put(Record::string(text.clone(), expires_at).encode()),
                Err(_) => Update::Keep,
            }
        })?;
    outcome
}

fn incr(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let name = arg(args, 0).to_ascii_lowercase();
    let delta = match name.as_slice() {
        b"incr" => 1,
        b"decr" => -1,
        b"incrby" => parse_i64(arg(args, 2))?,
        _ => parse_i64(arg(args, 2))?
            .checked_neg()
            .ok_or_else(|| Failure::err("decrement would overflow"))?,
    };
    let text = modify(context, arg(args, 1), &|current| {
        let value = match current {
            None => 0,
            Some(bytes) => parse_i64(bytes)?,
        };
        let sum = value
            .checked_add(delta)
            .ok_or_else(|| Failure::err("increment or decrement would overflow"))?;
        Ok(sum.to_string().into_bytes())
    })?;
    Ok(Reply::Integer(parse_i64(&text)?))
}

/// Parses a Redis float argument (finite only).
fn parse_float(bytes: &[u8]) -> Result<f64, Failure> {
    std::str::from_utf8(bytes)
        .ok()
        .filter(|text| !text.is_empty() && !text.starts_with(char::is_whitespace))
        .and_then(|text| text.parse::<f64>().ok())
        .filter(|value| !value.is_nan())
        .ok_or_else(|| Failure::err("value is not a valid float"))
}

/// Formats as Redis prints the result of its long-double arithmetic (`%.17Lf`, trailing
/// zeros trimmed): rounded to 15 significant digits, the most a double always carries, so
/// that 0.1 + 0.2 prints 0.3 as it does there, not 0.30000000000000004.
fn format_float(value: f64) -> String {
    // Redis adds in long double, so `0.1 + 0.2` prints `0.3` there. An f64
    // sum carries binary noise in its last bit instead: a fraction is rounded
    // to 15 significant digits, but only when that moves it by at most one
    // unit in the last place, so no digit the value really has is lost. An
    // integer is exact as it is.
    let shown = if value == value.trunc() {
        value
    } else {
        let rounded = format!("{value:.14e}").parse::<f64>().unwrap_or(value);
        if ulps_between(value, rounded) <= 1 {
            rounded
        } else {
            value
        }
    };
    if shown == shown.trunc() && shown.abs() < 1e17 {
        format!("{}", shown as i64)
    } else {
        format!("{shown}")
    }
}

/// Units in the last place between two finite floats of the same sign;
/// `u64::MAX` when the signs differ (other than at zero).
fn ulps_between(a: f64, b: f64) -> u64 {
    if a == b {
        return 0;
    }
    if a.is_sign_negative() != b.is_sign_negative() {
        return u64::MAX;
    }
    a.to_bits().abs_diff(b.to_bits())
}

fn incrbyfloat(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let delta = parse_float(arg(args, 2))?;
    if delta.is_infinite() {
        return Err(Failure::err("increment would produce NaN or Infinity"));
    }
    let text = modify(context, arg(args, 1), &|current| {
        let value = match current {
            None => 0.0,
            Some(bytes) => parse_float(bytes)?,
        };
        let sum = value + delta;
        if !sum.is_finite() {
            return Err(Failure::err("increment would produce NaN or Infinity"));
        }
        Ok(format_float(sum).into_bytes())
    })?;
    Ok(Reply::Bulk(text))
}
