//! [`TableIterator`]: the two-level iterator over one table — the index block's cursor picks
//! a data block, a block cursor walks it.
//!
//! Thread-safety contract: a `TableIterator` is owned by one thread; it holds its table by
//! `Arc` and its current data block by `Arc<Block>` (the block outlives each call), so both
//! stay valid while the table is dropped from the version or deleted.
//!
//! Invariants:
//! 1. `data` iterates the block named by `data_handle`, and that block is the one the index
//!    cursor points at whenever both are valid.
//! 2. Any error (a corrupt index entry or block) ends iteration and is reported by `status`.

use super::Table;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::sstable::block::BlockIterator;
use crate::sstable::format::BlockHandle;
use std::sync::Arc;

/// A two-level iterator: the index iterator picks a data block, a block iterator walks it.
#[derive(Debug)]
pub struct TableIterator {
    pub(super) table: Arc<Table>,
    pub(super) index: BlockIterator,
    pub(super) data: Option<BlockIterator>,
    /// Handle of the block `data` iterates (to avoid re-reading it).
    pub(super) data_handle: Option<BlockHandle>,
    pub(super) error: Option<Error>,
    pub(super) fill_cache: bool,
}

impl TableIterator {
    /// Points `data` at the block of the current index entry; false if there is none or on error.
    fn init_data_block(&mut self) -> bool {
        if !self.index.valid() {
            self.data = None;
            self.data_handle = None;
            if let Err(error) = self.index.status() {
                self.error = Some(error);
            }
            return false;
        }
        let handle = match self.table.decode_index_value(self.index.value()) {
            Ok(handle) => handle,
            Err(error) => {
                self.error = Some(error);
                self.data = None;
                return false;
            }
        };
        if self.data.is_some() && self.data_handle == Some(handle) {
            return true;
        }
        match self.table.read_data_block(handle, self.fill_cache) {
            Ok(block) => {
                self.data = Some(block.iter());
                self.data_handle = Some(handle);
                true
            }
            Err(error) => {
                self.error = Some(error);
                self.data = None;
                self.data_handle = None;
                false
            }
        }
    }

    /// Moves forward past exhausted (or empty) data blocks.
    fn skip_forward(&mut self) {
        self.skip(true);
    }

    /// Moves backward past exhausted (or empty) data blocks.
    fn skip_backward(&mut self) {
        self.skip(false);
    }

    fn skip(&mut self, forward: bool) {
        loop {
            if self.error.is_some() {
                self.data = None;
                return;
            }
            if let Some(data) = &self.data {
                if data.valid() {
                    return;
                }
                if let Err(error) = data.status() {
                    self.error = Some(error);
                    continue;
                }
            }
            if !self.index.valid() {
                self.data = None;
                if let Err(error) = self.index.status() {
                    self.error = Some(error);
                }
                return;
            }
            if forward {
                self.index.next();
            } else {
                self.index.prev();
            }
            if self.init_data_block() {
                if let Some(data) = &mut self.data {
                    if forward {
                        data.seek_to_first();
                    } else {
                        data.seek_to_last();
                    }
                }
            }
        }
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(BlockIterator::valid)
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        self.index.seek_to_first();
        if self.init_data_block() {
            if let Some(data) = &mut self.data {
                data.seek_to_first();
            }
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        self.index.seek_to_last();
        if self.init_data_block() {
            if let Some(data) = &mut self.data {
                data.seek_to_last();
            }
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        // The fence pointers find the block as a point lookup does (a search over a dense
        // array of key prefixes) instead of a binary search over the index block's entries,
        // each a cache miss and a key decode.
        match &self.table.fences {
            Some(fences) => self
                .index
                .seek_to_restart_entry(fences.seek(&self.table.index, target)),
            None => self.index.seek(target),
        }
        if self.init_data_block() {
            if let Some(data) = &mut self.data {
                data.seek(target);
            }
        }
        self.skip_forward();
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next on an invalid table iterator");
        if let Some(data) = &mut self.data {
            data.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev on an invalid table iterator");
        if let Some(data) = &mut self.data {
            data.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |data| data.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |data| data.value())
    }

    fn status(&self) -> Result<()> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        self.index.status()?;
        match &self.data {
            Some(data) => data.status(),
            None => Ok(()),
        }
    }
}
