//! Walks a table's entries in key order, for scans and compaction.
//!
//! The iterator reads each data block once (one counted read), when it first needs it,
//! and yields the block's entries; values share the block's buffer. It may start at a
//! key: the index picks the first block that can hold it and the block's restart points
//! the place inside it. After an error it yields that error and then ends.

use std::ops::Bound;
use std::sync::Arc;

use super::block::BlockIter;
use super::reader::TableInner;
use super::BlockKind;
use crate::error::Result;
use crate::types::Entry;

/// An iterator over a table's entries in key order.
pub struct TableIter {
    table: Arc<TableInner>,
    /// The next data block to read.
    next_block: usize,
    /// The block being walked, with its offset for error messages.
    block: Option<(BlockIter, u64)>,
    /// Where the first block's walk starts: (key, inclusive).
    start: Option<(Vec<u8>, bool)>,
    done: bool,
}

impl std::fmt::Debug for TableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableIter")
            .field("path", &self.table.file.path())
            .field("next_block", &self.next_block)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl TableIter {
    pub(crate) fn new(table: Arc<TableInner>, start: Bound<&[u8]>) -> TableIter {
        let (next_block, start) = match start {
            Bound::Unbounded => (0, None),
            // Later blocks hold only keys above this block's separator, itself >= the
            // start key, so only the first block needs a seek.
            Bound::Included(k) => (table.index.find(k), Some((k.to_vec(), true))),
            Bound::Excluded(k) => (table.index.find(k), Some((k.to_vec(), false))),
        };
        TableIter {
            table,
            next_block,
            block: None,
            start,
            done: false,
        }
    }

    /// Reads the next block and positions it; `None` at the end of the table.
    fn open_next_block(&mut self) -> Option<Result<()>> {
        let handle = self.table.index.handle(self.next_block)?;
        self.next_block += 1;
        let file = &self.table.file;
        let result = file.read_data_block(handle).and_then(|block| {
            let mut it = block.into_iter();
            if let Some((key, inclusive)) = self.start.take() {
                it.seek(&key, inclusive)
                    .map_err(|m| file.corruption(BlockKind::Data, handle.offset, m))?;
            }
            self.block = Some((it, handle.offset));
            Ok(())
        });
        Some(result)
    }
}

impl Iterator for TableIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        while !self.done {
            if let Some((block, offset)) = &mut self.block {
                match block.next() {
                    Some(Ok(entry)) => return Some(Ok(entry)),
                    Some(Err(m)) => {
                        self.done = true;
                        let offset = *offset;
                        return Some(Err(self.table.file.corruption(BlockKind::Data, offset, m)));
                    }
                    None => self.block = None,
                }
            }
            match self.open_next_block() {
                None => self.done = true,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}
