//! A small JSON value for the tools' `--json` output (no dependency needed for writing).

use std::fmt::{self, Write as _};

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An unsigned integer.
    Number(u64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, keys in the given order.
    Object(Vec<(&'static str, Json)>),
}

impl From<u64> for Json {
    fn from(value: u64) -> Self {
        Json::Number(value)
    }
}

impl From<usize> for Json {
    fn from(value: usize) -> Self {
        Json::Number(value as u64)
    }
}

impl From<u32> for Json {
    fn from(value: u32) -> Self {
        Json::Number(u64::from(value))
    }
}

impl From<bool> for Json {
    fn from(value: bool) -> Self {
        Json::Bool(value)
    }
}

impl From<String> for Json {
    fn from(value: String) -> Self {
        Json::String(value)
    }
}

impl From<&str> for Json {
    fn from(value: &str) -> Self {
        Json::String(value.to_string())
    }
}

impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(value: Option<T>) -> Self {
        value.map_or(Json::Null, Into::into)
    }
}

fn write_string(formatter: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    formatter.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => formatter.write_str("\\\"")?,
            '\\' => formatter.write_str("\\\\")?,
            '\n' => formatter.write_str("\\n")?,
            '\r' => formatter.write_str("\\r")?,
            '\t' => formatter.write_str("\\t")?,
            c if u32::from(c) < 0x20 => write!(formatter, "\\u{:04x}", u32::from(c))?,
            c => formatter.write_char(c)?,
        }
    }
    formatter.write_char('"')
}

impl fmt::Display for Json {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => formatter.write_str("null"),
            Json::Bool(value) => write!(formatter, "{value}"),
            Json::Number(value) => write!(formatter, "{value}"),
            Json::String(text) => write_string(formatter, text),
            Json::Array(items) => {
                formatter.write_char('[')?;
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        formatter.write_char(',')?;
                    }
                    write!(formatter, "{item}")?;
                }
                formatter.write_char(']')
            }
            Json::Object(fields) => {
                formatter.write_char('{')?;
                for (index, (key, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        formatter.write_char(',')?;
                    }
                    write_string(formatter, key)?;
                    write!(formatter, ":{value}")?;
                }
                formatter.write_char('}')
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_valid_json() {
        let value = Json::Object(vec![
            ("key", "a\"b\\c\u{1}".into()),
            ("n", 7u64.into()),
            ("none", Option::<u64>::None.into()),
            ("list", Json::Array(vec![true.into(), Json::Null])),
        ]);
        assert_eq!(
            value.to_string(),
            r#"{"key":"a\"b\\c\u0001","n":7,"none":null,"list":[true,null]}"#
        );
    }
}
