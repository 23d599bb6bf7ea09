//! Text keys and values on a command line or in shell output: one escaping scheme that reads
//! back exactly what it printed.
//!
//! Rendering ([`render`]): printable characters other than whitespace, `\` and `"` are
//! written as they are; `\` is `\\`, `"` is `\"`, tab, newline and carriage return are `\t`,
//! `\n`, `\r`, and every other byte of a whitespace or control character, or of invalid
//! UTF-8, is `\xHH`. The empty string is `""`. A rendered token therefore never contains
//! whitespace and [`parse_token`] of it gives back the original bytes (the round trip is
//! tested).
//!
//! Parsing accepts the same escapes (plus `\0`), and double-quoted tokens, in which
//! whitespace may stand for itself (`"hello world"`).

use std::fmt::Write as _;

/// Writes `bytes` as one unambiguous token (see the module doc).
pub fn render(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "\"\"".to_string();
    }
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for character in chunk.valid().chars() {
            match character {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_whitespace() || c.is_control() => {
                    let mut buffer = [0u8; 4];
                    for byte in c.encode_utf8(&mut buffer).bytes() {
                        let _ = write!(out, "\\x{byte:02x}");
                    }
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// Parses one whole token (a command-line argument) into bytes.
pub fn parse_token(token: &str) -> Result<Vec<u8>, String> {
    let mut tokens = split_tokens(token)?;
    match (tokens.pop(), tokens.is_empty()) {
        (Some(bytes), true) => Ok(bytes),
        (None, _) => Ok(Vec::new()),
        (Some(_), false) => Err(format!(
            "\"{token}\" holds more than one key (write a space as \\x20 or quote it)"
        )),
    }
}

/// Splits `line` into tokens, decoding escapes and quotes.
pub fn split_tokens(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            return Ok(tokens);
        };
        let mut token = Vec::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated quote in: {line}")),
                    Some('"') => break,
                    Some('\\') => escape(&mut chars, &mut token, line)?,
                    Some(c) => push_char(&mut token, c),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err(format!("expected a space after a closing quote in: {line}"));
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                match c {
                    '\\' => escape(&mut chars, &mut token, line)?,
                    '"' => return Err(format!("stray quote (write it as \\\") in: {line}")),
                    c => push_char(&mut token, c),
                }
            }
        }
        tokens.push(token);
    }
}

fn push_char(token: &mut Vec<u8>, c: char) {
    let mut buffer = [0u8; 4];
    token.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
}

fn escape(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    token: &mut Vec<u8>,
    line: &str,
) -> Result<(), String> {
    let byte = match chars.next() {
        Some('\\') => b'\\',
        Some('"') => b'"',
        Some('t') => b'\t',
        Some('n') => b'\n',
        Some('r') => b'\r',
        Some('0') => 0,
        Some('x') => {
            let high = chars.next().and_then(|c| c.to_digit(16));
            let low = chars.next().and_then(|c| c.to_digit(16));
            match (high, low) {
                // Two hex digits are at most 0xff.
                (Some(high), Some(low)) => u8::try_from(high * 16 + low).unwrap_or(u8::MAX),
                _ => return Err(format!("\\x needs two hex digits in: {line}")),
            }
        }
        Some(other) => {
            return Err(format!(
                "unknown escape \\{other} (expected \\\\, \\\", \\t, \\n, \\r, \\0 or \\xHH) \
                 in: {line}"
            ))
        }
        None => {
            return Err(format!(
                "a lone \\ ends: {line} (write a backslash as \\\\)"
            ))
        }
    };
    token.push(byte);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_unambiguously() {
        assert_eq!(render(b"plain"), "plain");
        assert_eq!(render(b""), "\"\"");
        assert_eq!(render(b"a\\b"), "a\\\\b");
        assert_eq!(render(b"a\\x41"), "a\\\\x41");
        assert_eq!(render(b"A"), "A");
        assert_eq!(render(b"two words"), "two\\x20words");
        assert_eq!(render(b"tab\there\n"), "tab\\there\\n");
        assert_eq!(render(b"q\"uote"), "q\\\"uote");
        assert_eq!(render(b"caf\xc3\xa9\xff\x00"), "café\\xff\\x00");
        // The two keys that printed alike before backslashes were escaped.
        assert_ne!(render(b"a\\x41"), render(b"aA"));
    }

    #[test]
    fn round_trips_every_rendering() {
        let samples: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"\\".to_vec(),
            b"\\\\x41\"".to_vec(),
            b"a b\tc\nd\re".to_vec(),
            (0u8..=255).collect(),
            "ünï cödé \u{a0}\u{2028}".as_bytes().to_vec(),
        ];
        for bytes in samples {
            let token = render(&bytes);
            assert!(!token.contains(char::is_whitespace), "{token}");
            assert_eq!(parse_token(&token).unwrap(), bytes, "{token}");
        }
    }

    #[test]
    fn splits_quoted_and_escaped_tokens() {
        assert_eq!(
            split_tokens("  a \"b c\" d\\x20e \"\" ").unwrap(),
            vec![b"a".to_vec(), b"b c".to_vec(), b"d e".to_vec(), Vec::new()]
        );
        assert_eq!(
            split_tokens("\"unterminated").unwrap_err(),
            "unterminated quote in: \"unterminated"
        );
        assert_eq!(
            split_tokens("bad\\q").unwrap_err(),
            "unknown escape \\q (expected \\\\, \\\", \\t, \\n, \\r, \\0 or \\xHH) in: bad\\q"
        );
        assert_eq!(
            split_tokens("x\\").unwrap_err(),
            "a lone \\ ends: x\\ (write a backslash as \\\\)"
        );
        assert_eq!(
            split_tokens("\\x4").unwrap_err(),
            "\\x needs two hex digits in: \\x4"
        );
        assert_eq!(
            split_tokens("a\"b").unwrap_err(),
            "stray quote (write it as \\\") in: a\"b"
        );
        assert!(parse_token("a b").is_err());
    }
}
