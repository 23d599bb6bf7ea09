//! RESP2 reply values and their encoding.
//!
//! Thread-safety contract: `Reply` is plain data (`Send`); encoding appends to a buffer the
//! caller owns.
//!
//! Invariants:
//! 1. `Reply::Simple` and `Reply::Error` never contain `\r` or `\n` (they are replaced by
//!    spaces when encoded), so a reply can never split into two.

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+text`
    Simple(String),
    /// `-text` (text starts with the error code: `ERR ...`, `WRONGTYPE ...`).
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$len\r\nbytes`
    Bulk(Vec<u8>),
    /// `$-1` (missing value).
    Nil,
    /// `*-1` (missing array, e.g. a `SET ... NX GET` that did nothing is `Nil` instead).
    NilArray,
    /// `*n` followed by the elements.
    Array(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".to_string())
    }

    /// An `-ERR message` reply.
    pub fn err(message: impl AsRef<str>) -> Reply {
        Reply::Error(format!("ERR {}", message.as_ref()))
    }

    /// A bulk reply from anything byte-like.
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(bytes.into())
    }

    /// A bulk reply, or `Nil` for `None`.
    pub fn optional(value: Option<Vec<u8>>) -> Reply {
        value.map_or(Reply::Nil, Reply::Bulk)
    }

    /// An array of bulk strings.
    pub fn bulks<I: IntoIterator<Item = Vec<u8>>>(items: I) -> Reply {
        Reply::Array(items.into_iter().map(Reply::Bulk).collect())
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the RESP2 encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(text) => line(out, b'+', text),
            Reply::Error(text) => line(out, b'-', text),
            Reply::Integer(value) => header(out, b':', *value),
            Reply::Bulk(bytes) => {
                header(out, b'$', bytes.len() as i64);
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                header(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, text: &str) {
    out.push(kind);
    out.extend(text.bytes().map(|byte| match byte {
        b'\r' | b'\n' => b' ',
        other => other,
    }));
    out.extend_from_slice(b"\r\n");
}

/// `kind`, `value` in decimal, CRLF: formatted on the stack (a bulk header per GET reply
/// would otherwise allocate a `String`).
fn header(out: &mut Vec<u8>, kind: u8, value: i64) {
    out.push(kind);
    if value < 0 {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut rest = value.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        if let Some(digit) = digits.get_mut(start) {
            *digit = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 || start == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
    out.extend_from_slice(b"\r\n");
}

/// The encoding of [`Reply::ok`], for paths that append it without building the reply.
pub const OK: &[u8] = b"+OK\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: Reply) -> Vec<u8> {
        let mut out = Vec::new();
        reply.encode(&mut out);
        out
    }

    #[test]
    fn encodes_every_kind() {
        assert_eq!(encoded(Reply::ok()), b"+OK\r\n");
        assert_eq!(encoded(Reply::err("x\r\ny")), b"-ERR x  y\r\n");
        assert_eq!(encoded(Reply::Integer(-3)), b":-3\r\n");
        assert_eq!(encoded(Reply::bulk(&b"a\0"[..])), b"$2\r\na\0\r\n");
        assert_eq!(encoded(Reply::Nil), b"$-1\r\n");
        assert_eq!(encoded(Reply::NilArray), b"*-1\r\n");
        let array = Reply::Array(vec![Reply::Integer(1), Reply::Nil]);
        assert_eq!(encoded(array), b"*2\r\n:1\r\n$-1\r\n");
        assert_eq!(encoded(Reply::ok()), OK);
    }

    #[test]
    fn integers_encode_as_their_decimal_text() {
        for value in [
            0,
            7,
            -7,
            10,
            99,
            100,
            -100,
            123_456_789,
            i64::MAX,
            i64::MIN,
            -1,
        ] {
            assert_eq!(
                encoded(Reply::Integer(value)),
                format!(":{value}\r\n").into_bytes(),
                "{value}"
            );
        }
    }
}
