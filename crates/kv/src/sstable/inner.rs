//! What an open table keeps in memory, shared by its lookups and its iterators: the
//! file it reads data blocks through, the properties, the index, and the filters with
//! the reason each one is or is not consulted.
//!
//! A [`Table`](super::Table) is a cheap handle on one `Arc<TableInner>`; the iterators
//! hold a clone of the same `Arc`, so a scan keeps reading a table its store has let go
//! of. It sits below both the reader (`reader.rs`), which builds it when a table opens,
//! and the iterators (`iter.rs`), which walk its blocks.

use bloomkv_filter::{FilterReader, RangeFilterReader};

use super::file::TableFile;
use super::footer::BlockHandle;
use super::index::IndexBlock;
use super::partition::{Memo, Partitions};
use super::properties::TableProperties;
use crate::error::Result;

/// Whether a table's lookups consult a filter, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterState {
    /// The filter block is loaded and consulted.
    Loaded,
    /// The table was written without a filter policy.
    NotWritten,
    /// The filter block failed to validate; lookups read data blocks instead.
    Corrupt(String),
    /// The table's filter was written by a policy not among those the store was given.
    UnknownPolicy(String),
    /// The filter was let go of to keep `Options::filter_memory_budget` (a store's
    /// decision, kept across reopens); lookups read data blocks instead.
    Released,
}

/// Whether a table's scans consult a range filter, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeFilterState {
    /// The range filter block is loaded and consulted by scans with both bounds set.
    Loaded,
    /// The table was written without a range filter (or before they existed).
    NotWritten,
    /// The range filter block failed to validate; scans read the table.
    Corrupt(String),
}

/// The loaded state of one open table.
pub(crate) struct TableInner {
    pub(crate) file: TableFile,
    pub(crate) file_size: u64,
    pub(crate) properties: TableProperties,
    pub(crate) index: std::sync::Arc<IndexBlock>,
    pub(crate) filter: Option<Box<dyn FilterReader>>,
    pub(crate) filter_state: FilterState,
    pub(crate) range_filter: Option<std::sync::Arc<RangeFilterReader>>,
    pub(crate) range_filter_state: RangeFilterState,
    /// The range tombstones (format version 7), loaded and checked at open.
    pub(crate) range_dels: Option<crate::range_del::Fragments>,
    /// A partitioned table's top level (format version 8); `index` is then empty and
    /// `filter` `None`, and lookups go through it (`partition.rs`).
    pub(crate) parts: Option<std::sync::Arc<Partitions>>,
    /// The table's id among learned negatives (`learned.rs`); never reused.
    pub(crate) learned_id: Option<u32>,
}

impl TableInner {
    /// Number of data blocks.
    pub(crate) fn num_blocks(&self) -> usize {
        match &self.parts {
            Some(parts) => parts.num_blocks(),
            None => self.index.len(),
        }
    }

    /// The first data block whose separator is `>= key` (`num_blocks()` if none).
    pub(crate) fn find_block(&self, key: &[u8], memo: &mut Memo) -> Result<usize> {
        match &self.parts {
            Some(parts) => parts.find(&self.file, key, memo),
            None => Ok(self.index.find(key)),
        }
    }

    /// The first data block whose separator is `> key` (`num_blocks()` if none).
    pub(crate) fn upper_block(&self, key: &[u8], memo: &mut Memo) -> Result<usize> {
        match &self.parts {
            Some(parts) => parts.upper(&self.file, key, memo),
            None => Ok(self.index.upper(key)),
        }
    }

    /// The handle of data block `i` (`None` past the last).
    pub(crate) fn block_handle(&self, i: usize, memo: &mut Memo) -> Result<Option<BlockHandle>> {
        match &self.parts {
            Some(parts) => parts.handle(&self.file, i, memo),
            None => Ok(self.index.handle(i)),
        }
    }

    /// Whether lookups consult a filter (whole, or partitioned).
    pub(crate) fn consults_filter(&self) -> bool {
        self.filter.is_some() || self.parts.as_ref().is_some_and(|p| p.has_filter())
    }
}
