//! The file handles [`super::FaultFs`] hands out: each wraps the inner file system's handle,
//! asks the shared fault state whether the operation fails (and how long it waits), forwards
//! it, and records its effect in the power-loss model.
//!
//! Thread-safety contract: a writable file is used through `&mut self`; readers and locks are
//! `Send + Sync`. Every mutating forward runs under the state mutex, so the model's order of
//! effects is the operation order; reads forward after releasing it.
//!
//! Invariants:
//! 1. A handle's model inode changes only after the inner operation succeeded (or, for an
//!    injected ENOSPC, after the inner file took the short write).
//! 2. Nothing reaches the inner file after an injected crash.

use super::model::State;
use super::{injected_error, FaultKind};
use crate::error::Result;
use crate::fs::{FileLock, RandomAccessFile, SyncHandle, WritableFile};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

pub(super) fn lock_state(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Every critical section completes its update before anything can panic; a poisoned
    // lock (a test assertion failed elsewhere) still guards consistent state.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits at a gate armed on `operation` at `path` until it opens, then sleeps for the
/// latency injected on it; both outside the state lock.
pub(super) fn wait_latency(state: &Mutex<State>, operation: &str, path: &Path) {
    let (delay, gate) = {
        let state = lock_state(state);
        (
            state.delay_for(operation, path),
            state.gate_for(operation, path),
        )
    };
    if let Some(gate) = gate {
        gate.hold();
    }
    if let Some(delay) = delay {
        std::thread::sleep(delay);
    }
}

#[derive(Debug)]
pub(super) struct FaultWritableFile {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) inner: Box<dyn WritableFile>,
    pub(super) path: PathBuf,
    pub(super) inode: u64,
}

/// Counts mutating `operation` after its latency; the fault to inject, if any. The guard
/// stays held for the forward (module invariant: model order is operation order).
fn begin<'a>(
    state: &'a Mutex<State>,
    path: &Path,
    operation: &'static str,
) -> (MutexGuard<'a, State>, Option<FaultKind>) {
    wait_latency(state, operation, path);
    let mut guard = lock_state(state);
    let fault = guard.check(operation, path, true);
    (guard, fault)
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        wait_latency(&self.state, "append", &self.path);
        let mut state = lock_state(&self.state);
        let fault = state.check("append", &self.path, true);
        let written = match fault {
            None => data.len(),
            // A full disk takes what fits: a short write, then the error.
            Some(FaultKind::Enospc) if !state.crashed => data.len() / 2,
            Some(_) => 0,
        };
        let taken = data.get(..written).unwrap_or_default();
        if !taken.is_empty() {
            self.inner.append(taken)?;
            let allocated = self.inner.allocated_bytes();
            if let Some(inode) = state.inode_mut(self.inode) {
                inode.data.extend_from_slice(taken);
                inode.set_allocated(allocated);
            }
            state.check_invariants();
        }
        match fault {
            None => Ok(()),
            Some(kind) => Err(injected_error("append", &self.path, kind)),
        }
    }

    fn flush(&mut self) -> Result<()> {
        let (state, fault) = begin(&self.state, &self.path, "flush");
        if let Some(kind) = fault {
            return Err(injected_error("write", &self.path, kind));
        }
        let result = self.inner.flush();
        drop(state);
        result
    }

    fn sync(&mut self) -> Result<()> {
        let (mut state, fault) = begin(&self.state, &self.path, "sync");
        if let Some(kind) = fault {
            return Err(injected_error("sync", &self.path, kind));
        }
        self.inner.sync()?;
        if let Some(inode) = state.inode_mut(self.inode) {
            inode.synced();
        }
        state.check_invariants();
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn trim(&mut self) -> Result<bool> {
        // Only a file with reserved space has a trim that touches the disk (and can fail);
        // counting the no-op ones would renumber every operation of a plain-file run.
        if self.inner.allocated_bytes() <= self.inner.size_bytes() {
            return self.inner.trim();
        }
        let (mut state, fault) = begin(&self.state, &self.path, "trim");
        if let Some(kind) = fault {
            return Err(injected_error("truncate", &self.path, kind));
        }
        let changed = self.inner.trim()?;
        let allocated = self.inner.allocated_bytes();
        if let Some(inode) = state.inode_mut(self.inode) {
            // The new length is live, not durable: the old one stays until a sync.
            inode.allocated = allocated.max(inode.data.len() as u64);
        }
        state.check_invariants();
        Ok(changed)
    }

    fn allocated_bytes(&self) -> u64 {
        self.inner.allocated_bytes()
    }

    fn appends_in_memory(&self) -> bool {
        self.inner.appends_in_memory()
    }

    fn sync_handle(&self) -> Option<Box<dyn SyncHandle>> {
        Some(Box::new(FaultSyncHandle {
            state: Arc::clone(&self.state),
            inner: self.inner.sync_handle()?,
            path: self.path.clone(),
            inode: self.inode,
        }))
    }
}

/// A [`SyncHandle`] of a [`FaultWritableFile`]: it runs while the writer appends, so the
/// model takes what the sync covers at its start and applies it when it returns.
#[derive(Debug)]
struct FaultSyncHandle {
    state: Arc<Mutex<State>>,
    inner: Box<dyn SyncHandle>,
    path: PathBuf,
    inode: u64,
}

impl SyncHandle for FaultSyncHandle {
    fn sync(&self) -> Result<()> {
        // Counted, checked and snapshotted at its start: bytes appended while the sync runs
        // (including an injected latency) are not made durable by it.
        let covered = {
            let mut state = lock_state(&self.state);
            if let Some(kind) = state.check("sync", &self.path, true) {
                return Err(injected_error("sync", &self.path, kind));
            }
            state
                .inode_mut(self.inode)
                .map(|inode| (inode.data.len(), inode.allocated))
        };
        wait_latency(&self.state, "sync", &self.path);
        self.inner.sync()?;
        let mut state = lock_state(&self.state);
        if state.crashed {
            // The machine went down before the sync returned: nothing may count on it.
            return Err(injected_error("sync", &self.path, FaultKind::Eio));
        }
        if let (Some((bytes, length)), Some(inode)) = (covered, state.inode_mut(self.inode)) {
            inode.synced_to(bytes, length);
        }
        state.check_invariants();
        Ok(())
    }
}

impl Drop for FaultWritableFile {
    fn drop(&mut self) {
        // Closing may cut reserved space (the mapped log does): a live change, not a durable
        // one. A crashed machine closes nothing.
        let mut state = lock_state(&self.state);
        if !state.crashed {
            if let Some(inode) = state.inode_mut(self.inode) {
                inode.allocated = inode.data.len() as u64;
            }
        }
    }
}

#[derive(Debug)]
pub(super) struct FaultRandomAccessFile {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) inner: Arc<dyn RandomAccessFile>,
    pub(super) path: PathBuf,
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        wait_latency(&self.state, "read", &self.path);
        if let Some(kind) = lock_state(&self.state).check("read", &self.path, false) {
            return Err(injected_error("read", &self.path, kind));
        }
        self.inner.read_exact_at(offset, buffer)
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug)]
pub(super) struct FaultFileLock {
    pub(super) _inner: Box<dyn FileLock>,
}

impl FileLock for FaultFileLock {}
