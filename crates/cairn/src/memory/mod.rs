//! The memory component: the write buffers (memtables with their WALs) a database holds in
//! memory, active and sealed. Everything outside this module and `memtable` reaches the
//! skiplist only through these types: inserts of a batch at a sequence, reads at a sequence,
//! the hinted read and insert of read-modify-write, iterators, the seal, and the gathering a
//! flush writes.
//!
//! Thread-safety contract: see `buffer` (a shared, concurrently written buffer) and
//! `component` (an immutable value published through the super version).
//!
//! Invariants: stated in the submodules; in short, sealed buffers are ordered newest first
//! with increasing disjoint sequence ranges, and a buffer's gathering and filter are built
//! only once it is quiet.

mod buffer;
mod component;

pub use buffer::{MemoryEntry, ReplayBuffer, WriteBuffer, WriteHint};
pub use component::MemComponent;
