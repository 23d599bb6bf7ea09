//! The memory component: the write buffers (each a Membuffer over a memtable, with its WAL)
//! a database holds in memory, active and sealed. Everything outside this module and `memtable` reaches the
//! skiplist only through these types: inserts of a batch at a sequence, reads at a sequence,
//! the hinted read and insert of read-modify-write, iterators, the seal, and the gathering a
//! flush writes.
//!
//! Thread-safety contract: see `buffer` (a shared, concurrently written buffer) and
//! `component` (an immutable value published through the super version).
//!
//! Invariants (each stated and checked in its submodule):
//! 1. Only this module, `membuffer` (which drains into it) and `memtable` name the
//!    skiplist's types; callers see `WriteBuffer`, `MemComponent`, `ReplayBuffer`,
//!    `WriteHint` and `MemoryEntry`.
//! 2. Sealed buffers are ordered newest first with disjoint sequence ranges increasing toward
//!    the active buffer (`component` invariant 1).
//! 3. A buffer's gathering and Bloom filter are built only once it is sealed and quiet, and
//!    every entry's sequence lies in its sealed log's range (`buffer` invariants 1 and 2).

mod buffer;
mod component;
mod copied;
mod scan;

pub use buffer::{ReplayBuffer, WriteBuffer, WriteHint};
pub use component::MemComponent;
