//! The benchmark's error: a message naming what failed.

use std::fmt;

/// An error with a human-readable message.
#[derive(Debug)]
pub struct BenchError(String);

/// Result with `BenchError`.
pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        BenchError(message.into())
    }

    /// Prefixes the message with `context`.
    pub fn context(self, context: impl fmt::Display) -> Self {
        BenchError(format!("{context}: {}", self.0))
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl From<cairn::Error> for BenchError {
    fn from(error: cairn::Error) -> Self {
        BenchError(format!("cairn: {error}"))
    }
}

impl From<std::io::Error> for BenchError {
    fn from(error: std::io::Error) -> Self {
        BenchError(format!("I/O: {error}"))
    }
}

impl From<serde_json::Error> for BenchError {
    fn from(error: serde_json::Error) -> Self {
        BenchError(format!("JSON: {error}"))
    }
}

#[cfg(feature = "rocksdb")]
impl From<rocksdb::Error> for BenchError {
    fn from(error: rocksdb::Error) -> Self {
        BenchError(format!("rocksdb: {error}"))
    }
}

/// Adds context to a result's error.
pub trait Context<T> {
    /// Prefixes the error message with `context`.
    fn context(self, context: impl fmt::Display) -> Result<T>;
}

impl<T, E: Into<BenchError>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|error| error.into().context(context))
    }
}
