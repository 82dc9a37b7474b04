//! Writes a table file: entries in, blocks, index, filter, properties and footer out.
//!
//! Entries arrive ordered by key ascending and, for several versions of one key, by
//! sequence number descending (a flush walks a memtable's versions, a compaction a
//! merge). A key's versions may continue into the next data block; that block's index
//! separator then equals the key (format version 2). They fill a data block until it
//! reaches `block_size` — or, with aligned blocks (the default for uncompressed tables,
//! format version 5), until the next entry would take it past `block_size` with its
//! trailer — and the block is then sealed and appended in one write, behind the zero
//! padding that starts it on a page boundary if it would otherwise straddle one more.
//! Its index entry waits for the next key, so the separator can be shortened to fall
//! between the two blocks.
//! `finish` writes the metadata blocks and the footer and syncs the file:
//!
//! ```text
//!  add* ──> [data 0][data 1]...[data N-1] ──finish──> [filter][index][range][properties][footer] sync
//! ```
//!
//! The range filter block is written only with `TableOptions::range_filter`; the
//! properties record its handle (table format version 4 on).
//!
//! With `TableOptions::metadata_partition` the index and the filter are cut into
//! partitions (format version 8, `partition.rs`): the index entries and filter keys of
//! a run of data blocks are sealed together once they reach the partition's size, and
//! a coarse filter over every key is built beside them. The partitions are written
//! after the data blocks, then the coarse filter and the top level in place of the
//! filter and index blocks:
//!
//! ```text
//!  finish ──> [index part 0][filter part 0]...[coarse filter][top level][range][properties][footer]
//! ```
//!
//! Writing to a temporary name, renaming and syncing the directory is the caller's job.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv_filter::{FilterBuilder, FilterPolicy, KeyHash, RangeFilterBuilder};
use bytes::Bytes;

use super::block_builder::BlockBuilder;
use super::compression::{self, Compression};
use super::footer::{
    BlockHandle, Footer, ALIGNED_FORMAT_VERSION, COMPRESSED_FORMAT_VERSION,
    PARTITIONED_FORMAT_VERSION, RANGE_DEL_FORMAT_VERSION, RANGE_FILTER_FORMAT_VERSION,
    UNCOMPRESSED_FORMAT_VERSION, ZSTD_FORMAT_VERSION,
};
use super::format::{padding_before, MAX_BLOCK_SIZE, MAX_ENTRY_BYTES, PAGE_SIZE};
use super::index::{shortest_separator, IndexBuilder};
use super::partition::{BuiltPartition, TopLevelBuilder, COARSE_BITS_PER_KEY};
use super::properties::TableProperties;
use super::show_key;
use super::trailer;
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::prefix::PrefixExtractor;
use crate::range_del::Fragments;
use crate::types::{SeqNo, ValueKind};

/// Zero bytes for the padding in front of an aligned block (less than a page).
const PADDING: [u8; PAGE_SIZE as usize] = [0; PAGE_SIZE as usize];

/// How a table is laid out.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Target size of a data block (default 4096). Unaligned, a block is closed once its
    /// contents reach this size, so it may exceed it by one entry; aligned, it is closed
    /// before the entry that would take it past this size with its trailer. Clamped to
    /// `1..=MAX_BLOCK_SIZE`.
    pub block_size: usize,
    /// Entries between restart points in a data block (default 16; at least 1).
    pub restart_interval: usize,
    /// Builds the table's filter block; `None` writes a table without one.
    pub filter_policy: Option<Arc<dyn FilterPolicy>>,
    /// Adds each distinct prefix of the keys to the filter too (whole keys stay in),
    /// and records the extractor's name in the properties. Ignored without a filter.
    pub prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
    /// How data blocks are stored (default none). With LZ4 the table is written as
    /// format version 3, and each block that LZ4 shrinks by at least 12.5% is stored
    /// compressed (see `compression.rs`).
    pub compression: Compression,
    /// Builds a range filter block over the table's keys too (format version 4 on).
    /// Settings `RangeFilterBuilder` refuses write no range filter.
    pub range_filter: Option<RangeFilterOptions>,
    /// Keeps each uncompressed data block within as few pages ([`PAGE_SIZE`]) as its
    /// size allows (default on; format version 5): a block, trailer included, holds at
    /// most `block_size` bytes unless one entry alone is larger, and zero padding moves
    /// a block to the next page boundary where it would otherwise cross one more page.
    /// A default 4 KiB block then costs one page of the OS's cache per read, not two.
    /// Ignored with compression: compressed blocks vary in size, and padding each to a
    /// page would give back much of what compression saved.
    pub block_align: bool,
    /// Cuts the index and the filter into partitions of about this many bytes (index
    /// entries and filter bits together; at least 64), written as format version 8
    /// (`partition.rs`), so a reader keeps only a small top level in memory. Default
    /// `None`: whole index and filter blocks, as before.
    pub metadata_partition: Option<usize>,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            filter_policy: None,
            prefix_extractor: None,
            compression: Compression::None,
            range_filter: None,
            block_align: true,
            metadata_partition: None,
        }
    }
}

/// The range filter each new table carries (Grafite; `bloomkv_filter::RangeFilterBuilder`).
///
/// A range of `l` mapped keys (`l ≤ max_range_len`) that holds none of a table's keys
/// reads that table with probability at most `l / 2^(bits_per_key − 2)`; longer ranges
/// and ranges with an open end read it as before. Keys map to integers by the (up to)
/// 8 bytes after the table's common key prefix, so range lengths are counted there.
///
/// ```
/// use bloomkv_kv::{Options, RangeFilterOptions};
/// let options = Options {
///     range_filter: Some(RangeFilterOptions::default()),
///     ..Options::default()
/// };
/// assert!(options.validate().is_ok());
/// assert_eq!(RangeFilterOptions::default().bits_per_key, 16.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeFilterOptions {
    /// Bits spent per key, 3..=40. Default 16: a false-positive rate of at most
    /// `l / 16384` for a range of `l` keys, so an empty range of 16 keys over ten
    /// overlapping tables costs at most 0.01 reads, and one of 64 keys at most 0.04.
    pub bits_per_key: f64,
    /// The longest range, in mapped keys, the filter answers; longer ones read the
    /// table. Default 64: its worst rate, `64 / 16384` ≈ 0.4%, still saves 99.6% of the
    /// reads, and the ranges a store sees empty most (the next page, the next second,
    /// "is this id taken?") are short. Raising it costs no memory, but the rate grows
    /// with the range's length.
    pub max_range_len: u64,
}

impl Default for RangeFilterOptions {
    fn default() -> RangeFilterOptions {
        RangeFilterOptions {
            bits_per_key: 16.0,
            max_range_len: 64,
        }
    }
}

/// What a finished table holds: what the store records about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSummary {
    /// Bytes written.
    pub file_size: u64,
    /// The smallest key.
    pub smallest: Bytes,
    /// The largest key.
    pub largest: Bytes,
    /// Entries written (puts and tombstones).
    pub entries: u64,
    /// Tombstones among them.
    pub deletions: u64,
    /// The largest sequence number written.
    pub max_seq: SeqNo,
}

/// Writes one table file. Call order: `add+ finish`.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    block_size: usize,
    /// Bytes written so far: the offset of the next block.
    offset: u64,
    block: BlockBuilder,
    index: IndexBuilder,
    /// The last written data block, waiting for the next key to get its separator.
    pending: Option<BlockHandle>,
    filter: Option<(Arc<dyn FilterPolicy>, Box<dyn FilterBuilder>)>,
    /// Adds key prefixes to the filter too (only with a filter).
    prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
    /// The last prefix added to the filter.
    last_prefix: Option<Vec<u8>>,
    /// Collects every distinct key for the range filter (only with one).
    range: Option<RangeFilterBuilder>,
    /// The range filter's bits per key (0 without one), for `estimated_size`.
    range_bits_per_key: f64,
    smallest: Vec<u8>,
    last_key: Vec<u8>,
    last_seq: SeqNo,
    entries: u64,
    deletions: u64,
    max_seq: SeqNo,
    data_blocks: u64,
    /// Set when a write failed: the file is incomplete and the builder refuses more.
    failed: bool,
    compression: Compression,
    /// Where a block is compressed before it is written.
    packed: Vec<u8>,
    /// The LZ4 match finder's tables, kept between blocks.
    lz4: compression::Lz4Writer,
    /// Data blocks are capped at `block_size` and padded to page boundaries.
    align: bool,
    /// The range tombstones the table carries (format version 7), if any.
    range_dels: Option<Fragments>,
    /// Partitions index and filter (format version 8), if asked to.
    parts: Option<PartitionWriter>,
}

/// The partitions of a partitioned table being written: the one in progress takes
/// the index entries (here) and the filter keys (the table's filter builder, which
/// `finish` resets for the next partition); sealed ones wait for `finish`.
struct PartitionWriter {
    /// Bytes (index entries and estimated filter bits) a partition is sealed at.
    target: usize,
    index: IndexBuilder,
    /// The number of the partition's first data block.
    first_block: u64,
    /// Data blocks in the partition so far.
    blocks: u64,
    /// The coarse filter over every key of the table.
    coarse: Option<Box<dyn FilterBuilder>>,
    done: Vec<BuiltPartition>,
    /// Bytes of the sealed partitions.
    done_bytes: u64,
}

impl fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableBuilder")
            .field("path", &self.path)
            .field("entries", &self.entries)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl TableBuilder {
    /// Starts a table in `file`, an empty file named `path` (used in errors).
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, options: TableOptions) -> Self {
        TableBuilder {
            file,
            path,
            block_size: options.block_size.clamp(1, MAX_BLOCK_SIZE),
            compression: options.compression,
            packed: Vec::new(),
            lz4: compression::Lz4Writer::default(),
            align: options.block_align && options.compression == Compression::None,
            offset: 0,
            block: BlockBuilder::new(options.restart_interval),
            index: IndexBuilder::default(),
            pending: None,
            prefix_extractor: options
                .prefix_extractor
                .filter(|_| options.filter_policy.is_some()),
            last_prefix: None,
            range: options
                .range_filter
                .and_then(|r| RangeFilterBuilder::new(r.bits_per_key, r.max_range_len).ok()),
            range_bits_per_key: options.range_filter.map_or(0.0, |r| r.bits_per_key),
            filter: options.filter_policy.clone().map(|p| {
                let builder = p.new_builder();
                (p, builder)
            }),
            smallest: Vec::new(),
            last_key: Vec::new(),
            last_seq: 0,
            entries: 0,
            deletions: 0,
            max_seq: 0,
            data_blocks: 0,
            failed: false,
            range_dels: None,
            parts: options.metadata_partition.map(|target| PartitionWriter {
                target: target.max(64),
                index: IndexBuilder::default(),
                first_block: 0,
                blocks: 0,
                coarse: options.filter_policy.as_ref().and_then(|_| {
                    let coarse = bloomkv_filter::RibbonPolicy::new(COARSE_BITS_PER_KEY).ok()?;
                    Some(coarse.new_builder())
                }),
                done: Vec::new(),
                done_bytes: 0,
            }),
        }
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds an entry. Entries must be ordered by key ascending and, for one key, by
    /// sequence number strictly descending: anything else is `InvalidArgument` (and
    /// changes nothing), as is an entry larger than [`MAX_ENTRY_BYTES`].
    pub fn add(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> Result<()> {
        self.check_usable()?;
        let same_key = self.entries > 0 && key == &self.last_key[..];
        if self.entries > 0 && (key < &self.last_key[..] || (same_key && seq >= self.last_seq)) {
            return Err(Error::InvalidArgument(format!(
                "table entries must be ordered by key, then newest first: {} seq {seq} \
                 after {} seq {}",
                show_key(key),
                show_key(&self.last_key),
                self.last_seq
            )));
        }
        if key.len().saturating_add(value.len()) > MAX_ENTRY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "entry of {} key and {} value bytes exceeds the {MAX_ENTRY_BYTES}-byte limit",
                key.len(),
                value.len()
            )));
        }
        if self.align
            && !self.block.is_empty()
            && self.block.size_with(key, seq, value.len()) + trailer::BLOCK_TRAILER_SIZE
                > self.block_size
        {
            // Before the separator below is chosen: this entry starts the next block.
            self.flush_block()?;
        }
        if let Some(handle) = self.pending.take() {
            let separator = shortest_separator(&self.last_key, key);
            self.add_index_entry(&separator, handle, false);
        }
        if let (Some((_, filter)), false) = (&mut self.filter, same_key) {
            // One filter entry per distinct key, however many versions it has.
            filter.add_key(key);
            if let Some(coarse) = self.parts.as_mut().and_then(|p| p.coarse.as_mut()) {
                coarse.add_key(key);
            }
            // Keys arrive sorted, so equal prefixes are neighbours: each is added once.
            let prefix = self
                .prefix_extractor
                .as_ref()
                .and_then(|x| x.prefix_of(key));
            if let Some(prefix) = prefix {
                if self.last_prefix.as_deref() != Some(prefix) {
                    filter.add_hash(KeyHash::of(prefix));
                    if let Some(coarse) = self.parts.as_mut().and_then(|p| p.coarse.as_mut()) {
                        coarse.add_hash(KeyHash::of(prefix));
                    }
                    self.last_prefix = Some(prefix.to_vec());
                }
            }
        }
        if let (Some(range), false) = (&mut self.range, same_key) {
            range.add_key(key);
        }
        self.block.add(key, seq, kind, value);
        if self.entries == 0 {
            self.smallest = key.to_vec();
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_seq = seq;
        self.entries += 1;
        self.deletions += u64::from(kind == ValueKind::Delete);
        self.max_seq = self.max_seq.max(seq);
        if !self.align && self.block.estimated_size() >= self.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Gives the table range tombstones to carry in a range tombstone block (format
    /// version 7); an empty set changes nothing. The table's key range then spans
    /// them too. A table holding tombstones and no entry gets one: a point tombstone
    /// at the first tombstone's start, at its newest sequence number (which deletes
    /// nothing the range tombstone does not), so that every table has a data block.
    pub fn set_range_dels(&mut self, range_dels: Fragments) {
        self.range_dels = (!range_dels.is_empty()).then_some(range_dels);
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.entries
    }

    /// The file's size if it were finished now (an estimate: the filters are guessed
    /// from their bits per key).
    pub fn estimated_size(&self) -> u64 {
        let filter = self.filter.as_ref().map_or(0, |(policy, _)| {
            (policy.bits_per_key().max(0.0) * self.entries as f64 / 8.0) as u64
        });
        let range = self.range.as_ref().map_or(0, |r| {
            // The boundary keys are counted below; the header is under the 128.
            (self.range_bits_per_key * r.num_keys() as f64 / 8.0) as u64
        });
        let parts = self.parts.as_ref().map_or(0, |p| {
            p.done_bytes
                + p.index.size() as u64
                + (COARSE_BITS_PER_KEY * self.entries as f64 / 8.0) as u64
        });
        self.offset
            + self.block.estimated_size() as u64
            + self.index.size() as u64
            + parts
            + filter
            + range
            + 128
            + self.smallest.len() as u64
            + self.last_key.len() as u64
    }

    /// Writes the data block in progress, filter, index, properties and footer, and
    /// syncs the file. An empty table (no entry added) is refused with `InvalidArgument`:
    /// the store never needs one and a reader could not answer `smallest()` for it.
    pub fn finish(mut self) -> Result<TableSummary> {
        self.check_usable()?;
        let first_del = self
            .range_dels
            .as_ref()
            .and_then(|r| r.fragments().first())
            .map(|f| (f.start.clone(), f.seqs.first().copied().unwrap_or(0)));
        if let (0, Some((start, seq))) = (self.entries, first_del) {
            self.add(&start, seq, ValueKind::Delete, b"")?;
        }
        if self.entries == 0 {
            return Err(Error::InvalidArgument(
                "cannot finish an empty table: add at least one entry".into(),
            ));
        }
        if !self.block.is_empty() {
            self.flush_block()?;
        }
        if let Some(handle) = self.pending.take() {
            // The last block's separator is the largest key itself.
            let last = std::mem::take(&mut self.last_key);
            self.add_index_entry(&last, handle, true);
            self.last_key = last;
        }
        let data_size = self.offset;
        // Before the range filter builder is taken: its presence picks the version.
        let format_version = self.format_version();

        let partitioned = match self.parts.take() {
            Some(parts) => Some(self.write_partitions(parts)?),
            None => None,
        };
        let partitions = partitioned.as_ref().map_or(0, |(_, _, n)| *n);
        let (filter_handle, filter_policy, bits_per_key) = match self.filter.take() {
            Some((policy, _)) if partitioned.is_some() => (
                partitioned.as_ref().and_then(|(coarse, _, _)| *coarse),
                policy.name().to_owned(),
                policy.bits_per_key(),
            ),
            Some((policy, mut builder)) => {
                let handle = self.write_block(builder.finish())?;
                (
                    Some(handle),
                    policy.name().to_owned(),
                    policy.bits_per_key(),
                )
            }
            None => (None, String::new(), 0.0),
        };
        let prefix_extractor = self
            .prefix_extractor
            .as_ref()
            .map_or_else(String::new, |e| e.name().to_owned());
        let index_handle = match partitioned {
            Some((_, top, _)) => top,
            None => {
                let index = std::mem::take(&mut self.index).finish();
                self.write_block(index)?
            }
        };
        // After the index, so the metadata still starts with the filter (or the index).
        let range_filter = match self.range.take() {
            Some(range) => Some(self.write_block(range.finish())?),
            None => None,
        };
        let mut smallest = Bytes::from(std::mem::take(&mut self.smallest));
        let mut largest = Bytes::copy_from_slice(&self.last_key);
        let range_dels = match self.range_dels.take() {
            Some(dels) => {
                if let Some((start, end)) = dels.extent() {
                    // The table's range spans its tombstones; `largest` is inclusive
                    // (see `last_covered`).
                    smallest = smallest.min(start.clone());
                    largest = largest.max(crate::range_del::last_covered(end));
                }
                self.max_seq = self.max_seq.max(dels.max_seq());
                Some(self.write_block(dels.encode())?)
            }
            None => None,
        };
        let properties = TableProperties {
            format_version,
            smallest,
            largest,
            entries: self.entries,
            deletions: self.deletions,
            max_seq: self.max_seq,
            data_blocks: self.data_blocks,
            data_size,
            filter_policy,
            bits_per_key,
            prefix_extractor,
            range_filter,
            range_dels,
            partitions,
        };
        let properties_handle = self.write_block(properties.encode())?;
        let footer = Footer {
            index: index_handle,
            filter: filter_handle,
            properties: properties_handle,
            version: format_version,
        };
        self.append(&footer.encode())?;
        let path = self.path.clone();
        self.file.sync().map_err(|e| io_error("sync", &path, e))?;
        Ok(TableSummary {
            file_size: self.offset,
            smallest: properties.smallest,
            largest: properties.largest,
            entries: self.entries,
            deletions: self.deletions,
            max_seq: self.max_seq,
        })
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Io(io::Error::other(format!(
                "table {} failed on an earlier write",
                self.path.display()
            ))));
        }
        Ok(())
    }

    /// The format version this builder writes: 7 with range tombstones, else 5 with aligned blocks, else 6 if blocks
    /// may be ZSTD, else 4 with a range filter, else 3 only if blocks may be LZ4, else 2.
    fn format_version(&self) -> u32 {
        if self.parts.is_some() {
            return PARTITIONED_FORMAT_VERSION;
        }
        if self.range_dels.is_some() {
            return RANGE_DEL_FORMAT_VERSION;
        }
        match (self.range.is_some(), self.compression) {
            _ if self.align => ALIGNED_FORMAT_VERSION,
            (_, Compression::Zstd { .. }) => ZSTD_FORMAT_VERSION,
            (true, _) => RANGE_FILTER_FORMAT_VERSION,
            (false, Compression::None) => UNCOMPRESSED_FORMAT_VERSION,
            (false, Compression::Lz4) => COMPRESSED_FORMAT_VERSION,
        }
    }

    /// Adds the index entry of the last written data block: to the index, or to the
    /// partition in progress, which is sealed once it is full (or `last`).
    fn add_index_entry(&mut self, separator: &[u8], handle: BlockHandle, last: bool) {
        let Some(parts) = &mut self.parts else {
            self.index.add(separator, handle);
            return;
        };
        parts.index.add(separator, handle);
        parts.blocks += 1;
        // The filter holds exactly the keys of the partition's blocks here: the key
        // that starts the next block is added after this entry.
        let filter_bytes = self.filter.as_ref().map_or(0, |(policy, builder)| {
            (policy.bits_per_key().max(0.0) * builder.num_keys() as f64 / 8.0) as usize
        });
        if !last && parts.index.size() + filter_bytes < parts.target {
            return;
        }
        let index = std::mem::take(&mut parts.index).finish();
        let filter = self.filter.as_mut().map(|(_, builder)| builder.finish());
        parts.done_bytes += (index.len() + filter.as_ref().map_or(0, Vec::len)) as u64;
        parts.done.push(BuiltPartition {
            separator: separator.to_vec(),
            first_block: parts.first_block,
            index,
            filter,
        });
        parts.first_block += parts.blocks;
        parts.blocks = 0;
    }

    /// Writes the sealed partitions, the coarse filter and the top level; returns the
    /// coarse filter's handle, the top level's and the number of partitions.
    fn write_partitions(
        &mut self,
        mut parts: PartitionWriter,
    ) -> Result<(Option<BlockHandle>, BlockHandle, u64)> {
        let mut top = TopLevelBuilder::default();
        let count = parts.done.len() as u64;
        for part in std::mem::take(&mut parts.done) {
            let index = self.write_block(part.index)?;
            let filter = match part.filter {
                Some(bytes) => Some(self.write_block(bytes)?),
                None => None,
            };
            top.add(&part.separator, part.first_block, index, filter);
        }
        let coarse = match parts.coarse.as_mut() {
            Some(coarse) => Some(self.write_block(coarse.finish())?),
            None => None,
        };
        let top = self.write_block(top.finish())?;
        Ok((coarse, top, count))
    }

    /// Seals the data block in progress and appends it with one write.
    fn flush_block(&mut self) -> Result<()> {
        let raw = self.block.finish();
        let buf = if self.compression == Compression::Lz4
            && compression::compress_lz4(&mut self.lz4, raw, &mut self.packed)
        {
            trailer::seal_as(&mut self.packed, 0, trailer::LZ4_COMPRESSION);
            &mut self.packed
        } else if self.compression.is_zstd() && compression::compress_zstd(raw, &mut self.packed) {
            trailer::seal_as(&mut self.packed, 0, trailer::ZSTD_COMPRESSION);
            &mut self.packed
        } else {
            trailer::seal(raw, 0);
            raw
        };
        let size = (buf.len() - trailer::BLOCK_TRAILER_SIZE) as u64;
        let written = buf.len() as u64;
        let padding = if self.align {
            padding_before(self.offset, written)
        } else {
            0
        };
        let handle = BlockHandle {
            offset: self.offset + padding,
            size,
        };
        if padding > 0 {
            // In front of the sealed block, so the two still go out in one write.
            buf.splice(0..0, PADDING[..padding as usize].iter().copied());
        }
        let result = self.file.append(buf);
        self.block.reset();
        result.map_err(|e| self.write_failed(e))?;
        self.offset += padding + written;
        self.data_blocks += 1;
        self.pending = Some(handle);
        Ok(())
    }

    /// Seals and appends a metadata block.
    fn write_block(&mut self, mut block: Vec<u8>) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: block.len() as u64,
        };
        trailer::seal(&mut block, 0);
        self.append(&block)?;
        Ok(handle)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.append(bytes).map_err(|e| self.write_failed(e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn write_failed(&mut self, e: io::Error) -> Error {
        self.failed = true;
        io_error("write", &self.path, e)
    }
}

fn io_error(op: &str, path: &Path, e: io::Error) -> Error {
    Error::Io(io::Error::new(
        e.kind(),
        format!("{op} {}: {e}", path.display()),
    ))
}
