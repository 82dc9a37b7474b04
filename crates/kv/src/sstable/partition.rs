//! Partitioned index and filter (table format version 8): a table whose metadata need
//! not be in memory whole.
//!
//! The index and the filter are cut into *partitions* along the same data blocks: a
//! partition covers a run of neighbouring data blocks, and holds their index entries
//! (an index block of its own, `index.rs`'s format) and a filter over their keys (a
//! filter block of the table's policy). What stays in memory while the table is open
//! is the *top level*: one entry per partition, and a *coarse filter* — a Ribbon
//! filter of [`COARSE_BITS_PER_KEY`] bits per key over every key of the table — that
//! turns most absent probes away before any partition is needed. (Tables written
//! before it was a Ribbon have a cache-local Bloom filter there; the filter block
//! says which, and either is read.)
//!
//! ```text
//!  [data 0][data 1] ... [data N-1]                          data blocks, as before
//!  [index part 0][filter part 0][index part 1][filter part 1] ...   each with trailer
//!  [coarse filter]    <- footer's filter handle (none without a filter policy)
//!  [top level]        <- footer's index handle
//!  [range filter][range tombstones][properties][footer]
//!
//!  top level:
//!  +---------+---------+-----+-----------------+
//!  | entry 0 | entry 1 | ... | num_entries u32 |
//!  +---------+---------+-----+-----------------+
//!  entry:
//!  +---------------+-----------+-------------+--------------+------------+---------------+-------------+
//!  | separator_len | separator | first_block | index offset | index size | filter offset | filter size |
//!  | varint        | bytes     | varint      | varint       | varint     | varint        | varint      |
//!  +---------------+-----------+-------------+--------------+------------+---------------+-------------+
//!  separator   = the separator of the partition's last data block
//!  first_block = the number of the partition's first data block (0 for entry 0)
//!  filter handle both 0 in a table without a filter
//! ```
//!
//! A key's data block is found in two steps: the first partition whose separator is
//! `>= key`, then, inside its index partition, the first block whose separator is
//! `>= key`. Block numbers stay global (`first_block` + the position inside the
//! partition), so a snapshot's walk down a key's versions, an iterator and a learned
//! negative name blocks as in an unpartitioned table.
//!
//! A point lookup asks the coarse filter first (in memory), then the partition's filter
//! (the metadata cache, `meta_cache.rs`, or one read that brings the partition's index
//! along: the builder writes each index partition right before its filter partition),
//! then the partition's index, then the data block: a present key outside the cache
//! costs two reads, an absent one that the coarse filter lets through one. A filter partition that cannot be read or decoded answers "maybe"
//! for every key it covers and is counted (`metadata_partition_failures`): never a
//! false negative. An index partition that cannot be read is `Corruption` naming the
//! file, as a damaged index is in any table.

use std::ops::Range;
use std::sync::Arc;

use bloomkv_filter::{FilterPolicy, FilterReader, KeyHash};

use super::file::TableFile;
use super::footer::BlockHandle;
use super::index::{IndexBlock, IndexBuilder};
use super::meta_cache::{MetaCache, Partition, Pool};
use super::trailer;
use super::{BlockKind, Malformed};
use crate::coding::{get_varint, get_varint_usize, put_varint, u32_at};
use crate::error::Result;
use crate::stats;

/// Bits per key of the coarse filter each partitioned table keeps in memory: a
/// Ribbon filter that turns away about 97 absent probes in 100 (its false-positive
/// rate is about 2^-5, 3%; a cache-local Bloom filter of the same memory lets about 9%
/// through) at half the memory of the 10-bit filter whose partitions confirm what it
/// lets through. It is the one filter of a partitioned table that is always probed,
/// so its bits are worth the Ribbon's slower build.
pub const COARSE_BITS_PER_KEY: f64 = 5.0;

/// The bytes a partition is cut at by default (index and filter together).
pub const DEFAULT_PARTITION_BYTES: usize = 4096;

/// One finished partition, held by the builder until the table's metadata is written.
pub(crate) struct BuiltPartition {
    pub(crate) separator: Vec<u8>,
    pub(crate) first_block: u64,
    pub(crate) index: Vec<u8>,
    pub(crate) filter: Option<Vec<u8>>,
}

/// Encodes the top level, one entry per partition.
#[derive(Default)]
pub(crate) struct TopLevelBuilder {
    buf: Vec<u8>,
    count: u32,
}

impl TopLevelBuilder {
    /// Adds the entry of the next partition.
    pub(crate) fn add(
        &mut self,
        separator: &[u8],
        first_block: u64,
        index: BlockHandle,
        filter: Option<BlockHandle>,
    ) {
        put_varint(&mut self.buf, separator.len() as u64);
        self.buf.extend_from_slice(separator);
        put_varint(&mut self.buf, first_block);
        index.encode_varint(&mut self.buf);
        filter.unwrap_or_default().encode_varint(&mut self.buf);
        self.count += 1;
    }

    /// The finished block (without trailer).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

/// One decoded top-level entry.
#[derive(Debug, Clone)]
struct PartEntry {
    separator: Range<usize>,
    first_block: u64,
    index: BlockHandle,
    filter: Option<BlockHandle>,
}

/// The decoded top level.
#[derive(Debug)]
pub(crate) struct TopLevel {
    data: Vec<u8>,
    entries: Vec<PartEntry>,
}

/// Where a table's partitions may lie, and what the top level must agree with.
pub(crate) struct Bounds {
    /// The end of the data blocks: partitions start here or later.
    pub(crate) data_end: u64,
    /// Where the in-memory metadata starts: partitions end (trailer included) by here.
    pub(crate) meta_start: u64,
    /// Data blocks in the table.
    pub(crate) data_blocks: u64,
    /// Partitions the properties count.
    pub(crate) partitions: u64,
    /// Whether the table has a filter (then every partition has one).
    pub(crate) has_filter: bool,
}

impl TopLevel {
    /// Decodes and validates a top level against `bounds`.
    pub(crate) fn decode(data: Vec<u8>, bounds: &Bounds) -> Result<TopLevel, Malformed> {
        let body_len = data
            .len()
            .checked_sub(4)
            .ok_or("too short for an entry count")?;
        let count = u32_at(&data, body_len).ok_or("too short for an entry count")? as usize;
        // Each entry takes at least six bytes; check before allocating for `count`.
        if count == 0 || count > body_len / 6 || count as u64 != bounds.partitions {
            return Err(Malformed(format!(
                "partition count {count} does not fit a {}-byte top level of a table \
                 with {} partitions",
                data.len(),
                bounds.partitions
            )));
        }
        let body = &data[..body_len];
        let mut entries: Vec<PartEntry> = Vec::with_capacity(count);
        let mut pos = 0;
        for i in 0..count {
            let bad = |what: &str| Malformed(format!("partition {i}: {what}"));
            let len = get_varint_usize(body, &mut pos).ok_or_else(|| bad("bad key length"))?;
            let end = pos
                .checked_add(len)
                .filter(|&e| e <= body.len())
                .ok_or_else(|| bad("separator runs past the end of the block"))?;
            let separator = pos..end;
            pos = end;
            let first_block = get_varint(body, &mut pos).ok_or_else(|| bad("bad first block"))?;
            let index = BlockHandle::decode_varint(body, &mut pos)
                .ok_or_else(|| bad("bad index partition handle"))?;
            let filter = BlockHandle::decode_varint(body, &mut pos)
                .ok_or_else(|| bad("bad filter partition handle"))?;
            let inside = |h: &BlockHandle| h.lies_within(bounds.data_end, bounds.meta_start);
            if !inside(&index) {
                return Err(bad("index partition outside the partitions' bytes"));
            }
            let filter = match (bounds.has_filter, filter == BlockHandle::default()) {
                (true, false) if inside(&filter) => Some(filter),
                (false, true) => None,
                (true, false) => return Err(bad("filter partition outside the partitions' bytes")),
                (true, true) => return Err(bad("no filter partition in a table with a filter")),
                (false, false) => return Err(bad("a filter partition in a table without one")),
            };
            match entries.last() {
                None if first_block != 0 => {
                    return Err(bad("the first partition must start at block 0"))
                }
                Some(prev) => {
                    if first_block <= prev.first_block {
                        return Err(bad("first block does not increase"));
                    }
                    if body[separator.clone()] < body[prev.separator.clone()] {
                        return Err(bad("separator decreases"));
                    }
                }
                None => {}
            }
            if first_block >= bounds.data_blocks {
                return Err(bad("first block past the table's data blocks"));
            }
            entries.push(PartEntry {
                separator,
                first_block,
                index,
                filter,
            });
        }
        if pos != body.len() {
            return Err(Malformed(format!(
                "{} unexpected bytes after {count} partitions",
                body.len() - pos
            )));
        }
        Ok(TopLevel { data, entries })
    }

    /// Number of partitions.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The first partition whose separator is `>= key` (`len()` if none).
    fn find(&self, key: &[u8]) -> usize {
        self.entries
            .partition_point(|e| &self.data[e.separator.clone()] < key)
    }

    /// The first partition whose separator is `> key` (`len()` if none).
    fn upper(&self, key: &[u8]) -> usize {
        self.entries
            .partition_point(|e| &self.data[e.separator.clone()] <= key)
    }

    /// The partition holding data block `block`.
    fn of_block(&self, block: u64) -> usize {
        self.entries
            .partition_point(|e| e.first_block <= block)
            .saturating_sub(1)
    }

    /// The index partition's and filter partition's handles of partition `p`.
    pub(crate) fn handles(&self, p: usize) -> Option<(BlockHandle, Option<BlockHandle>)> {
        self.entries.get(p).map(|e| (e.index, e.filter))
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.data.capacity() + self.entries.capacity() * std::mem::size_of::<PartEntry>()
    }
}

/// The index partition an iterator or a lookup is using, kept so that the next
/// block's handle needs no second cache lookup.
pub(crate) type Memo = Option<(usize, Arc<IndexBlock>)>;

/// What an open partitioned table keeps in memory: the top level, the coarse filter,
/// and how to reach its partitions.
pub(crate) struct Partitions {
    top: TopLevel,
    /// The coarse filter; `None` without a filter (or when it failed to open).
    coarse: Option<Box<dyn FilterReader>>,
    /// Opens the filter partitions; `None` when the table's filter is not consulted.
    policy: Option<Arc<dyn FilterPolicy>>,
    data_end: u64,
    data_blocks: u64,
    /// The store's metadata cache and the table's id in it.
    cache: Option<(Arc<MetaCache>, u64)>,
    /// Bytes pinned in the cache while the table is open.
    pinned: usize,
}

impl std::fmt::Debug for Partitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partitions")
            .field("partitions", &self.top.len())
            .field("coarse", &self.coarse.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Partitions {
    fn drop(&mut self) {
        if let Some((cache, id)) = &self.cache {
            cache.unpin(self.pinned, *id, self.top.len() as u32);
        }
    }
}

impl Partitions {
    /// The in-memory part of an open partitioned table; its bytes are pinned in
    /// `cache` until it is dropped.
    pub(crate) fn new(
        top: TopLevel,
        coarse: Option<Box<dyn FilterReader>>,
        policy: Option<Arc<dyn FilterPolicy>>,
        data_end: u64,
        data_blocks: u64,
        cache: Option<(Arc<MetaCache>, u64)>,
    ) -> Partitions {
        let pinned = top.memory_bytes() + coarse.as_ref().map_or(0, |c| c.memory_bytes());
        if let Some((cache, _)) = &cache {
            cache.pin(pinned);
        }
        Partitions {
            top,
            coarse,
            policy,
            data_end,
            data_blocks,
            cache,
            pinned,
        }
    }

    /// Whether lookups consult filters (the coarse one and the partitions').
    pub(crate) fn has_filter(&self) -> bool {
        self.policy.is_some()
    }

    /// The coarse filter, for questions no single partition can answer (prefixes).
    pub(crate) fn coarse(&self) -> Option<&dyn FilterReader> {
        self.coarse.as_deref().filter(|_| self.policy.is_some())
    }

    /// Heap bytes of the coarse filter.
    pub(crate) fn coarse_bytes(&self) -> usize {
        self.coarse.as_ref().map_or(0, |c| c.memory_bytes())
    }

    /// Heap bytes of the top level.
    pub(crate) fn top_bytes(&self) -> usize {
        self.top.memory_bytes()
    }

    /// Number of data blocks.
    pub(crate) fn num_blocks(&self) -> usize {
        self.data_blocks as usize
    }

    /// Number of partitions.
    pub(crate) fn len(&self) -> usize {
        self.top.len()
    }

    /// Where partition `p`'s index and filter lie.
    #[cfg(test)]
    pub(crate) fn handles(&self, p: usize) -> Option<(BlockHandle, Option<BlockHandle>)> {
        self.top.handles(p)
    }

    /// Whether the table may hold the key with `hash`, which lies in partition `p`:
    /// the coarse filter, then the partition's filter. `true` without a filter, and
    /// for a partition whose filter cannot be read (counted).
    /// A partition read for the filter brings its index partition along (they are
    /// neighbours on disk, one read): it is left in `memo` for the lookup's next step.
    pub(crate) fn may_contain(
        &self,
        file: &TableFile,
        p: usize,
        hash: KeyHash,
        memo: &mut Memo,
    ) -> bool {
        let Some(policy) = &self.policy else {
            return true;
        };
        if let Some(coarse) = &self.coarse {
            if !coarse.may_contain_hash(hash) {
                stats::bump(&file.counters().coarse_filter_negatives); // no partition needed
                return false;
            }
        }
        match self.filter_partition(file, policy, p, memo) {
            Some(filter) => filter.may_contain_hash(hash),
            None => {
                // Fail open: the partition's keys are read from their data blocks.
                stats::bump(&file.counters().metadata_partition_failures);
                true
            }
        }
    }

    /// The filter of partition `p`: cached, or read, opened and offered to the cache.
    ///
    /// A miss reads the partition's index and filter together, in one read (the
    /// builder writes each index partition right before its filter partition): a
    /// "maybe" then needs no second read for the index, and a "no" costs the one read
    /// it would have cost alone. The index, if it checks out, goes to `memo` and the
    /// cache; if it does not, it is left to be read (and reported) on its own.
    fn filter_partition(
        &self,
        file: &TableFile,
        policy: &Arc<dyn FilterPolicy>,
        p: usize,
        memo: &mut Memo,
    ) -> Option<Arc<dyn FilterReader>> {
        let (index_handle, Some(handle)) = self.top.handles(p)? else {
            return None;
        };
        if let Some((cache, id)) = &self.cache {
            if let Some(Partition::Filter(f)) = cache.get(Pool::Filter, *id, p as u32) {
                stats::bump(&file.counters().metadata_cache_hits);
                return Some(f);
            }
            stats::bump(&file.counters().metadata_cache_misses);
        }
        let bytes = match index_handle.end() {
            Some(end) if end == handle.offset => {
                let (index, filter) = self.read_pair(file, p, index_handle, handle)?;
                if let Some(index) = index {
                    *memo = Some((p, index));
                }
                filter
            }
            _ => file.read_block(handle, BlockKind::Filter).ok()?,
        };
        let reader: Arc<dyn FilterReader> = Arc::from(policy.open_reader(&bytes).ok()?);
        if let Some((cache, id)) = &self.cache {
            let charge = reader.memory_bytes();
            cache.insert(
                Pool::Filter,
                *id,
                p as u32,
                Partition::Filter(reader.clone()),
                charge,
            );
        }
        Some(reader)
    }

    /// The index of partition `p`: from `memo`, cached, or read, checked and offered
    /// to the cache. A partition that fails to read or validate is `Corruption`.
    fn index_partition(
        &self,
        file: &TableFile,
        p: usize,
        memo: &mut Memo,
    ) -> Result<Arc<IndexBlock>> {
        if let Some((q, index)) = memo {
            if *q == p {
                return Ok(index.clone());
            }
        }
        let index = self.load_index_partition(file, p)?;
        *memo = Some((p, index.clone()));
        Ok(index)
    }

    /// Reads index partition `p` at `index` and its filter partition at `filter` (its
    /// neighbour) in one read: the index decoded, checked and offered to the cache
    /// (`None` if it fails: its own read reports it), the filter's checked contents
    /// (`None` if its trailer fails). `None` if the read itself fails.
    #[allow(clippy::type_complexity)]
    fn read_pair(
        &self,
        file: &TableFile,
        p: usize,
        index: BlockHandle,
        filter: BlockHandle,
    ) -> Option<(Option<Arc<IndexBlock>>, Vec<u8>)> {
        let end = filter.end()?;
        let len = usize::try_from(end.checked_sub(index.offset)?).ok()?;
        let buf = file.read(index.offset, len).ok()?;
        let split = usize::try_from(filter.offset.checked_sub(index.offset)?).ok()?;
        let (sealed_index, sealed_filter) = (buf.get(..split)?, buf.get(split..)?);
        let index = trailer::check(sealed_index).ok().and_then(|n| {
            self.decode_index_partition(file, p, index, sealed_index[..n].to_vec())
                .ok()
        });
        let n = trailer::check(sealed_filter).ok()?;
        Some((index, sealed_filter[..n].to_vec()))
    }

    fn load_index_partition(&self, file: &TableFile, p: usize) -> Result<Arc<IndexBlock>> {
        let corrupt = |offset: u64, m: &str| file.corruption(BlockKind::Index, offset, m.into());
        let (handle, _) = self
            .top
            .handles(p)
            .ok_or_else(|| corrupt(0, "no such index partition"))?;
        if let Some((cache, id)) = &self.cache {
            if let Some(Partition::Index(index)) = cache.get(Pool::Index, *id, p as u32) {
                stats::bump(&file.counters().metadata_cache_hits);
                return Ok(index);
            }
            stats::bump(&file.counters().metadata_cache_misses);
        }
        let bytes = file.read_block(handle, BlockKind::Index)?;
        self.decode_index_partition(file, p, handle, bytes)
    }

    /// Decodes index partition `p` (the contents of its block at `handle`), checks it
    /// against the top level, and offers it to the cache.
    fn decode_index_partition(
        &self,
        file: &TableFile,
        p: usize,
        handle: BlockHandle,
        bytes: Vec<u8>,
    ) -> Result<Arc<IndexBlock>> {
        let corrupt = |offset: u64, m: &str| file.corruption(BlockKind::Index, offset, m.into());
        let index = IndexBlock::decode(bytes, self.data_end, true)
            .map_err(|m| file.corruption(BlockKind::Index, handle.offset, m))?;
        // The partition must hold exactly the blocks the top level gives it.
        let first = self
            .top
            .entries
            .get(p)
            .ok_or_else(|| corrupt(handle.offset, "no such index partition"))?
            .first_block;
        let next = self
            .top
            .entries
            .get(p + 1)
            .map_or(self.data_blocks, |e| e.first_block);
        if index.len() as u64 != next - first {
            return Err(corrupt(
                handle.offset,
                format!(
                    "index partition {p} holds {} blocks, the top level gives it {}",
                    index.len(),
                    next - first
                )
                .as_str(),
            ));
        }
        let index = Arc::new(index);
        if let Some((cache, id)) = &self.cache {
            let charge = index.memory_bytes();
            cache.insert(
                Pool::Index,
                *id,
                p as u32,
                Partition::Index(index.clone()),
                charge,
            );
        }
        Ok(index)
    }

    /// The partition whose blocks may hold `key` (`len()` past the last separator).
    pub(crate) fn partition_of(&self, key: &[u8]) -> usize {
        self.top.find(key)
    }

    /// The first data block whose separator is `>= key`, given its partition `p`
    /// (from [`partition_of`](Self::partition_of)).
    pub(crate) fn find_in(
        &self,
        file: &TableFile,
        p: usize,
        key: &[u8],
        memo: &mut Memo,
    ) -> Result<usize> {
        let Some(entry) = self.top.entries.get(p) else {
            return Ok(self.num_blocks());
        };
        let index = self.index_partition(file, p, memo)?;
        Ok(entry.first_block as usize + index.find(key))
    }

    /// The first data block whose separator is `>= key` (`num_blocks()` if none).
    pub(crate) fn find(&self, file: &TableFile, key: &[u8], memo: &mut Memo) -> Result<usize> {
        self.find_in(file, self.partition_of(key), key, memo)
    }

    /// The first data block whose separator is `> key` (`num_blocks()` if none).
    pub(crate) fn upper(&self, file: &TableFile, key: &[u8], memo: &mut Memo) -> Result<usize> {
        let p = self.top.upper(key);
        let Some(entry) = self.top.entries.get(p) else {
            return Ok(self.num_blocks());
        };
        let index = self.index_partition(file, p, memo)?;
        Ok(entry.first_block as usize + index.upper(key))
    }

    /// The handle of data block `i` (`None` past the last).
    pub(crate) fn handle(
        &self,
        file: &TableFile,
        i: usize,
        memo: &mut Memo,
    ) -> Result<Option<BlockHandle>> {
        if i >= self.num_blocks() {
            return Ok(None);
        }
        let p = self.top.of_block(i as u64);
        let first = self
            .top
            .entries
            .get(p)
            .map_or(0, |e| e.first_block as usize);
        let index = self.index_partition(file, p, memo)?;
        Ok(index.handle(i - first))
    }

    /// Every data block's separator and handle, in order: the whole index, read
    /// partition by partition (for `verify`).
    pub(crate) fn whole_index(&self, file: &TableFile) -> Result<IndexBlock> {
        let mut whole = IndexBuilder::default();
        for p in 0..self.top.len() {
            let index = self.load_index_partition(file, p)?;
            for i in 0..index.len() {
                if let (Some(sep), Some(h)) = (index.separator(i), index.handle(i)) {
                    whole.add(sep, h);
                }
            }
        }
        IndexBlock::decode(whole.finish(), self.data_end, true)
            .map_err(|m| file.corruption(BlockKind::Index, self.data_end, m))
    }
}
