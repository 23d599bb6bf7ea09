//! The one error type of the engine.
//!
//! Contract: every fallible public function returns [`Result<T>`]. Corruption is kept distinct
//! from I/O failure and always names the file and byte offset where the damage was found, so an
//! operator can tell "the disk said no" from "the bytes are wrong". Errors are `Clone` so that a
//! sticky background error can be handed to every later caller.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in cairn.
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// let too_long = vec![b'k'; cairn::KEY_BYTES_MAX + 1];
/// match db.put(&too_long, "v") {
///     Err(cairn::Error::InvalidArgument(message)) => println!("refused: {message}"),
///     other => panic!("unexpected {other:?}"),
/// }
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The operating system reported a failure on `path` while doing `operation`.
    Io {
        /// What cairn was doing ("read", "append", "sync", "rename", ...).
        operation: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error (shared so the error stays `Clone`).
        source: Arc<std::io::Error>,
    },
    /// Bytes on disk do not match what was written: a checksum, magic number, length or
    /// structural check failed.
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset inside `file` where the damage was detected.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// The caller passed something cairn does not accept (a key too long, a bad option, ...).
    InvalidArgument(String),
    /// Another process (or another `Db` in this process) holds the directory lock.
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The database directory holds no database and `create_if_missing` is off.
    NotFound {
        /// The directory that was looked at.
        path: PathBuf,
    },
    /// A database exists where `error_if_exists` asked for a fresh one.
    AlreadyExists {
        /// The directory that was looked at.
        path: PathBuf,
    },
    /// An earlier failure (typically a failed fsync) left the database unable to guarantee
    /// durability; all further writes are refused until it is reopened.
    WritesStopped {
        /// The failure that stopped writes.
        cause: Box<Error>,
    },
    /// The database is shutting down.
    Closed,
    /// An internal invariant was violated (a bug in cairn); the message says which.
    Internal(String),
    /// An in-memory store has no room for the write: its live data plus the new object would
    /// exceed the capacity (after compaction), or compaction could not free space in time.
    Full {
        /// The store's configured capacity.
        capacity_bytes: u64,
    },
}

impl Error {
    /// Builds an I/O error.
    pub fn io(operation: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            operation,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Builds a corruption error.
    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`Error::Corruption`], including a corruption that stopped writes.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::WritesStopped { cause } => cause.is_corruption(),
            _ => false,
        }
    }

    /// True for [`Error::Io`], including an I/O error that stopped writes.
    pub fn is_io(&self) -> bool {
        match self {
            Error::Io { .. } => true,
            Error::WritesStopped { cause } => cause.is_io(),
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io {
                operation,
                path,
                source,
            } => write!(
                formatter,
                "I/O error during {operation} on {}: {source}",
                path.display()
            ),
            Error::Corruption {
                file,
                offset,
                reason,
            } => write!(
                formatter,
                "corruption in {} at offset {offset}: {reason}",
                file.display()
            ),
            Error::InvalidArgument(message) => write!(formatter, "invalid argument: {message}"),
            Error::Locked { path } => write!(
                formatter,
                "database is locked by another process or handle ({})",
                path.display()
            ),
            Error::NotFound { path } => write!(
                formatter,
                "no database at {} (set create_if_missing to create one)",
                path.display()
            ),
            Error::AlreadyExists { path } => {
                write!(formatter, "a database already exists at {}", path.display())
            }
            Error::WritesStopped { cause } => write!(
                formatter,
                "writes stopped after an earlier failure; reopen the database ({cause})"
            ),
            Error::Closed => write!(formatter, "database is closed"),
            Error::Internal(message) => {
                write!(formatter, "internal error (a bug in cairn): {message}")
            }
            Error::Full { capacity_bytes } => write!(
                formatter,
                "store is full (capacity {capacity_bytes} bytes); delete data or raise capacity_bytes"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source.as_ref()),
            Error::WritesStopped { cause } => Some(cause.as_ref()),
            _ => None,
        }
    }
}
