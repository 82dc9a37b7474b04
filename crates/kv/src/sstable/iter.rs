//! Walks a table's entries in key order, forward for scans and compaction, backward for
//! reverse scans.
//!
//! [`TableIter`] reads each data block once (one counted read), when it first needs it,
//! and yields the block's entries; values share the block's buffer. It may start at a
//! key: the index picks the first block that can hold it and the block's restart points
//! the place inside it. Every version of each key is yielded, newest first.
//!
//! [`TableRevIter`] starts at the last block that can hold a key within its end bound
//! and walks blocks towards the first; a block is decoded whole (its entries can only
//! be decoded forwards, prefix by prefix) and handed out from its end, so each key's
//! versions come oldest first. Both read each block once and, after an error, yield
//! that error and then end.

use std::ops::Bound;
use std::sync::Arc;

use super::block::BlockIter;
use super::inner::TableInner;
use super::partition::Memo;
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
    /// An excluded start key whose versions may continue past the first block.
    skip: Option<Vec<u8>>,
    /// A partitioned table's index partition in use (`partition.rs`).
    memo: Memo,
    /// An error finding the first block, yielded first.
    failed: Option<crate::Error>,
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
        let mut memo = None;
        let mut failed = None;
        let mut find = |k: &[u8]| {
            table.find_block(k, &mut memo).unwrap_or_else(|e| {
                failed = Some(e);
                0
            })
        };
        let (next_block, start) = match start {
            Bound::Unbounded => (0, None),
            // Later blocks hold only keys above this block's separator, itself >= the
            // start key, so only the first block needs a seek.
            Bound::Included(k) => (find(k), Some((k.to_vec(), true))),
            Bound::Excluded(k) => (find(k), Some((k.to_vec(), false))),
        };
        let skip = match &start {
            Some((k, false)) => Some(k.clone()),
            _ => None,
        };
        TableIter {
            table,
            next_block,
            block: None,
            start,
            skip,
            memo,
            failed,
            done: false,
        }
    }

    /// Reads the next block and positions it; `None` at the end of the table.
    fn open_next_block(&mut self) -> Option<Result<()>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        let handle = match self.table.block_handle(self.next_block, &mut self.memo) {
            Ok(handle) => handle?,
            Err(e) => return Some(Err(e)),
        };
        self.next_block += 1;
        let file = &self.table.file;
        // The block a bounded start seeks into is read as a point lookup reads one:
        // through the block cache, and kept there, so short scans from hot keys find
        // it again. The blocks after it, and every block of a walk from a table's first
        // key (compaction, full scans), are not kept: one pass over a table does not
        // push the hot blocks out.
        let seek = self.start.take();
        let block = match seek {
            Some(_) => file.read_data_block(handle),
            None => file.scan_data_block(handle),
        };
        let result = block.and_then(|block| {
            let mut it = block.into_iter();
            if let Some((key, inclusive)) = seek {
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
                    Some(Ok(entry)) => {
                        if let Some(skip) = &self.skip {
                            // Older versions of an excluded start key in later blocks.
                            if entry.key[..] == skip[..] {
                                continue;
                            }
                            self.skip = None;
                        }
                        return Some(Ok(entry));
                    }
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

/// An iterator over a table's entries in descending key order, within bounds.
pub struct TableRevIter {
    table: Arc<TableInner>,
    /// The next block to read, counting down; `None` once block 0 is read.
    next_block: Option<usize>,
    /// The block being handed out, last entry at the end, with its offset.
    entries: Vec<Entry>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// A partitioned table's index partition in use (`partition.rs`).
    memo: Memo,
    /// An error finding the last block, yielded first.
    failed: Option<crate::Error>,
    done: bool,
}

impl std::fmt::Debug for TableRevIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableRevIter")
            .field("path", &self.table.file.path())
            .field("next_block", &self.next_block)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl TableRevIter {
    pub(crate) fn new(table: Arc<TableInner>, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Self {
        let blocks = table.num_blocks();
        let mut memo = None;
        // Blocks after the first one whose separator is above the end key hold only
        // keys above it; an excluded end needs no block after the first one reaching it.
        let last = match end {
            Bound::Unbounded => Ok(blocks),
            Bound::Included(k) => table.upper_block(k, &mut memo),
            Bound::Excluded(k) => table.find_block(k, &mut memo),
        }
        .map(|b| {
            b.saturating_add(usize::from(!matches!(end, Bound::Unbounded)))
                .min(blocks)
        });
        let (last, failed) = match last {
            Ok(last) => (last, None),
            Err(e) => (0, Some(e)),
        };
        TableRevIter {
            table,
            next_block: last.checked_sub(1),
            entries: Vec::new(),
            start: start.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
            memo,
            failed,
            done: false,
        }
    }

    fn below_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Included(e) => key <= &e[..],
            Bound::Excluded(e) => key < &e[..],
            Bound::Unbounded => true,
        }
    }

    fn above_start(&self, key: &[u8]) -> bool {
        match &self.start {
            Bound::Included(s) => key >= &s[..],
            Bound::Excluded(s) => key > &s[..],
            Bound::Unbounded => true,
        }
    }

    /// Reads and decodes the next block down; `None` when there is none.
    fn open_previous_block(&mut self) -> Option<Result<()>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        let i = self.next_block?;
        self.next_block = i.checked_sub(1);
        let handle = match self.table.block_handle(i, &mut self.memo) {
            Ok(handle) => handle?,
            Err(e) => return Some(Err(e)),
        };
        let file = &self.table.file;
        let result = file.scan_data_block(handle).and_then(|block| {
            self.entries = block
                .into_iter()
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|m| file.corruption(BlockKind::Data, handle.offset, m))?;
            Ok(())
        });
        Some(result)
    }
}

impl Iterator for TableRevIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        while !self.done {
            if let Some(entry) = self.entries.pop() {
                if !self.below_end(&entry.key) {
                    continue;
                }
                if !self.above_start(&entry.key) {
                    self.done = true;
                    return None;
                }
                return Some(Ok(entry));
            }
            match self.open_previous_block() {
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
