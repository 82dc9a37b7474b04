//! The sorted string table (SSTable): an immutable file of entries sorted by key.
//!
//! A table is written once by a [`TableBuilder`] (a flush or a compaction) and then only
//! read, by a [`Table`]. It holds entries in increasing user-key order, each with the
//! sequence number and kind (put or tombstone) of its version; a key's versions follow
//! one another newest first (format version 1 tables hold each key at most once).
//!
//! The file is a run of blocks followed by a fixed-size footer. Every block is followed
//! by a 5-byte trailer (compression type and CRC-32), so every byte of the file is
//! covered by a checksum except the footer's magic number (the footer has its own) and
//! the zero padding that may start an uncompressed data block on a 4 KiB page boundary
//! (format version 5): no read looks at the padding, and `verify` checks it is zeros.
//!
//! ```text
//!  offset 0
//!  +----------------------+---------+
//!  | data block 0         | trailer |   sorted entries, prefix-compressed keys
//!  +----------------------+---------+
//!  | data block 1         | trailer |
//!  |  ...                           |
//!  | data block N-1       | trailer |
//!  +----------------------+---------+ <- meta start
//!  | filter block         | trailer |   the FilterPolicy's bytes (absent without policy)
//!  +----------------------+---------+
//!  | index block          | trailer |   one separator key -> handle per data block
//!  +----------------------+---------+
//!  | range filter block   | trailer |   Grafite over the keys (version 4 on, optional)
//!  +----------------------+---------+
//!  | range tombstones     | trailer |   fragmented delete_range pieces (version 7)
//!  +----------------------+---------+
//!  | properties block     | trailer |   key range, counts, filter policy name
//!  +----------------------+---------+
//!  | footer (64 bytes)              |   handles of filter, index, properties; magic
//!  +--------------------------------+ <- file size
//!
//!  trailer = compression type (u8, 0 = none, 1 = LZ4) | CRC-32 of block + type (u32 LE)
//! ```
//!
//! Opening a table reads the footer and then filter, index and properties together
//! (two positioned reads), validates them, and keeps index and filter in memory. A
//! point lookup then costs no read at all when the filter says "absent", and exactly
//! one read (one data block with its trailer) otherwise. All reads go through
//! [`TableFile`], which counts them. A store's tables read through two caches it
//! shares among them: `table_cache.rs` bounds the open files and reopens a closed one
//! on demand, `block_cache.rs` keeps decoded data blocks.
//!
//! ```
//! use std::sync::Arc;
//! use bloomkv_filter::KeyHash;
//! use bloomkv_kv::fs::{FileSystem, OsFileSystem};
//! use bloomkv_kv::sstable::{Table, TableBuilder, TableOptions};
//! use bloomkv_kv::{Counters, ValueKind};
//!
//! # fn main() -> bloomkv_kv::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("000001.sst");
//! let fs = OsFileSystem;
//!
//! let mut builder = TableBuilder::new(fs.create(&path)?, path.clone(), TableOptions::default());
//! builder.add(b"apple", 1, ValueKind::Put, b"red")?;
//! builder.add(b"banana", 2, ValueKind::Put, b"yellow")?;
//! builder.add(b"cherry", 3, ValueKind::Delete, b"")?;
//! let summary = builder.finish()?;
//! assert_eq!(summary.entries, 3);
//!
//! let counters = Arc::new(Counters::default());
//! let table = Table::open(fs.open_random(&path)?, path, counters, &[])?;
//! let entry = table.get(b"banana", KeyHash::of(b"banana"))?.expect("present");
//! assert_eq!(&entry.value[..], b"yellow");
//! assert_eq!(table.get(b"blueberry", KeyHash::of(b"blueberry"))?, None);
//! let keys: Vec<_> = table.iter().map(|e| e.map(|e| e.key)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, [&b"apple"[..], b"banana", b"cherry"]);
//! # Ok(())
//! # }
//! ```
//!
//! The byte-level layout of every part is in the module that encodes it:
//! [`block`] (data blocks), `index` (index block), `properties`, `footer`, `trailer`.

mod batch;
pub mod block;
mod block_builder;
mod block_cache;
mod builder;
mod compression;
mod file;
mod footer;
mod format;
mod index;
mod inner;
mod iter;
mod lz4;
mod meta_cache;
mod partition;
mod properties;
mod reader;
mod table_cache;
mod trailer;
mod verify;

#[cfg(test)]
mod partition_tests;
#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;

use std::fmt;

pub(crate) use batch::{prefetch_fetched, BatchKey, BatchTally, PREFETCH_AHEAD};
pub use builder::{RangeFilterOptions, TableBuilder, TableOptions, TableSummary};
pub use compression::{Compression, ZSTD_LEVELS};
pub use file::TableFile;
pub use footer::{BlockHandle, FORMAT_VERSION, OLDEST_FORMAT_VERSION};
pub use format::{MAX_BLOCK_SIZE, MAX_ENTRY_BYTES, PAGE_SIZE};
pub use inner::{FilterState, RangeFilterState};
pub use iter::{TableIter, TableRevIter};
pub use partition::{COARSE_BITS_PER_KEY, DEFAULT_PARTITION_BYTES};
pub use properties::TableProperties;
pub use reader::{Table, PIN_MIN_VALUE};
pub(crate) use table_cache::TableCache;
// The store still names a get's hit here; it lives with the rest of the vocabulary.
pub use verify::{check_file, BlockProblem};

/// Which part of a table file a block (or an error) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// A block of sorted entries.
    Data,
    /// The filter block built by the table's filter policy.
    Filter,
    /// The index: one separator key and handle per data block.
    Index,
    /// The properties block.
    Properties,
    /// The fixed-size footer at the end of the file.
    Footer,
    /// The range tombstones (format version 7).
    RangeTombstones,
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BlockKind::Data => "data block",
            BlockKind::Filter => "filter block",
            BlockKind::Index => "index block",
            BlockKind::Properties => "properties block",
            BlockKind::Footer => "footer",
            BlockKind::RangeTombstones => "range tombstone block",
        })
    }
}

/// Why some bytes failed to decode. Decoders return it without knowing which file they
/// read; the caller turns it into an [`Error::Corruption`](crate::Error::Corruption)
/// naming the file, the block kind and its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl From<&str> for Malformed {
    fn from(reason: &str) -> Malformed {
        Malformed(reason.to_owned())
    }
}

impl From<String> for Malformed {
    fn from(reason: String) -> Malformed {
        Malformed(reason)
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shows a key in messages: printable ASCII as is, other bytes escaped, long keys cut.
pub(crate) fn show_key(key: &[u8]) -> String {
    const MAX: usize = 64;
    let shown = &key[..key.len().min(MAX)];
    let mut s = format!("\"{}\"", shown.escape_ascii());
    if key.len() > MAX {
        s.push_str(&format!("... ({} bytes)", key.len()));
    }
    s
}
