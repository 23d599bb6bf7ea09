//! RESP2, the Redis serialization protocol: request parsing ([`parser`]) and reply encoding
//! ([`writer`]); [`fuzz`] is the parser's fuzz target body.
//!
//! Thread-safety contract: both halves are pure functions over byte buffers owned by one
//! connection; nothing here is shared between threads.
//!
//! Invariants:
//! 1. The parser never consumes a partial request: it returns how many bytes one complete
//!    request took, or asks for more bytes, or reports a protocol error after which the
//!    connection is closed (as Redis does).
//! 2. Every reply the writer emits is a complete RESP2 value.

pub mod fuzz;
pub mod parser;
pub mod writer;

pub use parser::{parse, parse_request, Limits, Parsed, ProtocolError, Request, Resume};
pub use writer::Reply;
