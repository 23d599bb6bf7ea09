//! cairn-server: a Redis-protocol (RESP2) server on the cairn engine.
//!
//! Layers, bottom up: [`layout`] maps Redis keys and types onto the engine's ordered byte
//! keyspace; [`store`] is the small engine interface the commands use (implemented for
//! `cairn::Db`, `cairn::MemStore` and an in-memory model); [`commands`] implements the
//! command families on it; [`resp`] parses requests and encodes replies; [`pipeline`] runs
//! one read buffer's requests (gathering plain SETs into one batch); [`server`] runs the
//! connections on tokio; [`expiry`] deletes expired keys nobody reads.
//!
//! Thread-safety contract: see each module; shared state lives in [`context::Context`].
//!
//! Invariants:
//! 1. Commands reach the engine only through [`store::Store`], so every command family is
//!    tested against the in-memory model and runs unchanged on both engines.

pub mod commands;
pub mod context;
pub mod expiry;
pub mod layout;
pub mod pipeline;
pub mod resp;
pub mod server;
pub mod store;
