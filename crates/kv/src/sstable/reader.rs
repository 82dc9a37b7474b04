//! An open table: the footer, properties, index and filter in memory, the data on disk.
//!
//! [`Table::get`] is the read path for one table. Each decision it makes is counted on
//! the line that makes it:
//!
//! ```text
//!  key outside [smallest, largest] ──> None                     (not a probe)
//!  table_probes += 1
//!  filter says "absent" ───────────> None, no read              (filter_negatives)
//!  index: first block with separator >= key
//!  block cache? ──hit──> the decoded block, no read             (block_cache_hits)
//!     │ miss                                                     (block_cache_misses)
//!     └─> one positioned read of block + trailer, CRC checked   (data_block_reads)
//!  restart-point binary search, scan one run ──> entry or None
//!  the table held the key (any version) ──> filter_true_positives += 1
//! ```
//!
//! A store without a block cache (or a table opened outside one) goes straight to the
//! read. The value comes back as a slice of the block, not a copy, unless it is
//! shorter than [`PIN_MIN_VALUE`]. A batch of lookups (`multi_get`) takes the same
//! steps table by table for all its keys at once (`sstable/batch.rs`).
//!
//! A filter block that fails to open is ignored (the table answers from its data
//! blocks, never a false "absent") and counted in `filter_corrupt`; a filter written by
//! a policy this store does not know is ignored too. The same holds for the range
//! filter block a scan consults ([`Table::may_contain_range`]): one that fails to open
//! leaves every scan reading the table (`range_filter_corrupt`). Anything else that fails to
//! validate is [`Error::Corruption`](crate::Error::Corruption) naming the file.

use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv_filter::{
    FilterInfo, FilterPolicy, KeyHash, RangeFilterReader, RangeFilterStats, RibbonProbe,
};
use bytes::Bytes;

use super::block::{Block, Lookup};
use super::file::{read_footer, TableFile};
use super::footer::{BlockHandle, FOOTER_SIZE, PARTITIONED_FORMAT_VERSION};
use super::index::IndexBlock;
use super::inner::{FilterState, RangeFilterState, TableInner};
use super::iter::{TableIter, TableRevIter};
use super::partition::{self, Partitions, TopLevel};
use super::properties::{disagrees_with_footer, TableProperties};
use super::trailer;
use super::verify::{self, BlockProblem};
use super::{BlockKind, Malformed};
use crate::error::Result;
use crate::fs::RandomAccessFile;
use crate::keycmp;
use crate::range_del::Fragments;
use crate::stats::{self, Counters, ReadTally};
use crate::types::{Entry, Hit, SeqNo, READ_LATEST};

/// An open, immutable table. Cheap to clone; clones share the loaded metadata.
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path())
            .field("file_size", &self.file_size())
            .field("entries", &self.inner.properties.entries)
            .field("filter", &self.inner.filter_state)
            .finish()
    }
}

impl Table {
    /// Opens a table: reads and validates the footer, then the properties, index and
    /// filter blocks (in one read). `policies` are the filter policies the store knows;
    /// the one whose name the table recorded opens its filter.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        counters: Arc<Counters>,
        policies: &[Arc<dyn FilterPolicy>],
    ) -> Result<Table> {
        Table::open_file(TableFile::new(file, path, counters), policies)
    }

    /// Like [`Table::open`], over a [`TableFile`] (the store's come from its table
    /// cache).
    pub(crate) fn open_file(file: TableFile, policies: &[Arc<dyn FilterPolicy>]) -> Result<Table> {
        let file_size = file.size()?;
        let footer = read_footer(&file, file_size)?;

        // Filter, index and properties lie together between the data and the footer.
        let meta_start = footer.meta_start();
        let meta_end = file_size - FOOTER_SIZE as u64;
        let meta_len = usize::try_from(meta_end - meta_start).map_err(|_| {
            file.corruption(BlockKind::Footer, meta_end, "metadata too large".into())
        })?;
        let meta = file.read(meta_start, meta_len)?;
        let block = |handle: BlockHandle, kind: BlockKind| -> Result<&[u8]> {
            // The footer checked its handles; the range filter's comes from the
            // properties, so every bound is checked here.
            let sealed = handle
                .offset
                .checked_sub(meta_start)
                .zip(handle.end().and_then(|end| end.checked_sub(meta_start)))
                .and_then(|(start, end)| {
                    meta.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
                })
                .ok_or_else(|| {
                    file.corruption(kind, handle.offset, "block outside the metadata".into())
                })?;
            let len =
                trailer::check(sealed).map_err(|m| file.corruption(kind, handle.offset, m))?;
            Ok(&sealed[..len])
        };

        let props_handle = footer.properties;
        let properties = TableProperties::decode(block(props_handle, BlockKind::Properties)?)
            .map_err(|m| file.corruption(BlockKind::Properties, props_handle.offset, m))?;
        if let Some((kind, offset, m)) = disagrees_with_footer(&footer, &properties, meta_end) {
            return Err(file.corruption(kind, offset, m));
        }
        if footer.version >= PARTITIONED_FORMAT_VERSION {
            return Table::open_partitioned(
                file.clone(),
                policies,
                footer,
                properties,
                &block,
                meta_start,
                file_size,
            );
        }
        let index = IndexBlock::decode(
            block(footer.index, BlockKind::Index)?.to_vec(),
            meta_start,
            footer.version >= 2,
        )
        .map_err(|m| file.corruption(BlockKind::Index, footer.index.offset, m))?;
        if properties.data_size != meta_start {
            return Err(file.corruption(
                BlockKind::Properties,
                props_handle.offset,
                Malformed(format!(
                    "data_size {} disagrees with the data blocks' end at {meta_start}",
                    properties.data_size
                )),
            ));
        }
        if index.len() as u64 != properties.data_blocks {
            return Err(file.corruption(
                BlockKind::Index,
                footer.index.offset,
                Malformed(format!(
                    "{} entries, but the properties count {} data blocks",
                    index.len(),
                    properties.data_blocks
                )),
            ));
        }

        let (filter, filter_state) = match footer.filter {
            // `disagrees_with_footer` refused a named policy without a filter.
            None => (None, FilterState::NotWritten),
            Some(handle) => {
                let name = &properties.filter_policy;
                match policies.iter().find(|p| p.name() == name) {
                    None => {
                        // Fail open, and say why: not damage, a name nobody registered.
                        stats::bump(&file.counters().filter_unknown_policy);
                        (None, FilterState::UnknownPolicy(name.clone()))
                    }
                    Some(policy) => {
                        let opened = block(handle, BlockKind::Filter).and_then(|bytes| {
                            policy.open_reader(bytes).map_err(|e| {
                                file.corruption(
                                    BlockKind::Filter,
                                    handle.offset,
                                    e.to_string().into(),
                                )
                            })
                        });
                        match opened {
                            Ok(reader) => (Some(reader), FilterState::Loaded),
                            Err(e) => {
                                // Fail open: the table is read without its filter.
                                stats::bump(&file.counters().filter_corrupt);
                                (None, FilterState::Corrupt(e.to_string()))
                            }
                        }
                    }
                }
            }
        };

        let (range_filter, range_filter_state) = open_range_filter(&file, &properties, &block);
        let range_dels = open_range_dels(&file, &properties, &block)?;

        Ok(Table {
            inner: Arc::new(TableInner {
                range_dels,
                file,
                file_size,
                properties,
                index: Arc::new(index),
                filter,
                filter_state,
                range_filter,
                range_filter_state,
                learned_id: crate::learned::next_table_id(),
                parts: None,
            }),
        })
    }

    /// [`open_file`](Self::open_file) for a table of format version 8: the top level
    /// and the coarse filter come into memory, the partitions stay on disk.
    #[allow(clippy::too_many_arguments)]
    fn open_partitioned<'m>(
        file: TableFile,
        policies: &[Arc<dyn FilterPolicy>],
        footer: super::footer::Footer,
        properties: TableProperties,
        block: &dyn Fn(BlockHandle, BlockKind) -> Result<&'m [u8]>,
        meta_start: u64,
        file_size: u64,
    ) -> Result<Table> {
        if properties.data_size > meta_start {
            return Err(file.corruption(
                BlockKind::Properties,
                footer.properties.offset,
                Malformed(format!(
                    "data_size {} runs past the metadata's start at {meta_start}",
                    properties.data_size
                )),
            ));
        }
        let bounds = partition::Bounds {
            data_end: properties.data_size,
            meta_start,
            data_blocks: properties.data_blocks,
            partitions: properties.partitions,
            has_filter: footer.filter.is_some(),
        };
        let top = TopLevel::decode(block(footer.index, BlockKind::Index)?.to_vec(), &bounds)
            .map_err(|m| file.corruption(BlockKind::Index, footer.index.offset, m))?;
        let (coarse, policy, filter_state) = match footer.filter {
            None => (None, None, FilterState::NotWritten),
            Some(handle) => {
                let name = &properties.filter_policy;
                match policies.iter().find(|p| p.name() == name) {
                    None => {
                        stats::bump(&file.counters().filter_unknown_policy);
                        (None, None, FilterState::UnknownPolicy(name.clone()))
                    }
                    Some(policy) => {
                        let opened = block(handle, BlockKind::Filter).and_then(|bytes| {
                            bloomkv_filter::open_filter_block(bytes).map_err(|e| {
                                file.corruption(
                                    BlockKind::Filter,
                                    handle.offset,
                                    e.to_string().into(),
                                )
                            })
                        });
                        match opened {
                            Ok(coarse) => (Some(coarse), Some(policy.clone()), FilterState::Loaded),
                            Err(e) => {
                                // Fail open: the coarse filter only turns probes away
                                // early; the partitions' filters still answer.
                                stats::bump(&file.counters().filter_corrupt);
                                (
                                    None,
                                    Some(policy.clone()),
                                    FilterState::Corrupt(e.to_string()),
                                )
                            }
                        }
                    }
                }
            }
        };
        let (range_filter, range_filter_state) = open_range_filter(&file, &properties, block);
        let range_dels = open_range_dels(&file, &properties, block)?;
        let parts = Partitions::new(
            top,
            coarse,
            policy,
            properties.data_size,
            properties.data_blocks,
            file.meta_cache(),
        );
        Ok(Table {
            inner: Arc::new(TableInner {
                range_dels,
                file,
                file_size,
                properties,
                index: Arc::new(IndexBlock::empty()),
                filter: None,
                filter_state,
                range_filter,
                range_filter_state,
                learned_id: None,
                parts: Some(Arc::new(parts)),
            }),
        })
    }
}

/// Opens the range filter block the properties name, failing open (counted).
fn open_range_filter<'m>(
    file: &TableFile,
    properties: &TableProperties,
    block: &dyn Fn(BlockHandle, BlockKind) -> Result<&'m [u8]>,
) -> (Option<Arc<RangeFilterReader>>, RangeFilterState) {
    match properties.range_filter {
        None => (None, RangeFilterState::NotWritten),
        Some(handle) => {
            let opened = block(handle, BlockKind::Filter).and_then(|bytes| {
                RangeFilterReader::open(bytes).map_err(|e| {
                    file.corruption(BlockKind::Filter, handle.offset, e.to_string().into())
                })
            });
            match opened {
                Ok(reader) => (Some(Arc::new(reader)), RangeFilterState::Loaded),
                Err(e) => {
                    // Fail open: every scan reads the table.
                    stats::bump(&file.counters().range_filter_corrupt);
                    (None, RangeFilterState::Corrupt(e.to_string()))
                }
            }
        }
    }
}

/// Opens and checks the range tombstone block the properties name.
fn open_range_dels<'m>(
    file: &TableFile,
    properties: &TableProperties,
    block: &dyn Fn(BlockHandle, BlockKind) -> Result<&'m [u8]>,
) -> Result<Option<Fragments>> {
    // Not fail-open, unlike the filters: a table read without its tombstones would
    // bring back the keys they delete.
    let range_dels = match properties.range_dels {
        None => None,
        Some(handle) => {
            let corrupt =
                |m: String| file.corruption(BlockKind::RangeTombstones, handle.offset, m.into());
            let frags =
                Fragments::decode(block(handle, BlockKind::RangeTombstones)?).map_err(corrupt)?;
            let inside = frags.extent().is_some_and(|(start, end)| {
                *start >= properties.smallest
                    && crate::range_del::last_covered(end) <= properties.largest
            });
            if !inside {
                return Err(corrupt(
                    "range tombstones empty or outside the table's key range".into(),
                ));
            }
            Some(frags)
        }
    };
    Ok(range_dels)
}

impl Table {
    /// The same table without its filter (`FilterState::Released`): every lookup
    /// reads a data block, so nothing is ever missed. Shares the file, index, range
    /// filter, tombstones and learned-negatives id with `self`; the filter's memory
    /// goes when the last clone of `self` does.
    pub(crate) fn without_filter(&self) -> Table {
        let t = &*self.inner;
        Table {
            inner: Arc::new(TableInner {
                file: t.file.clone(),
                file_size: t.file_size,
                properties: t.properties.clone(),
                index: Arc::clone(&t.index),
                filter: None,
                filter_state: FilterState::Released,
                range_filter: t.range_filter.clone(),
                range_filter_state: t.range_filter_state.clone(),
                range_dels: t.range_dels.clone(),
                learned_id: t.learned_id,
                parts: t.parts.clone(),
            }),
        }
    }

    /// Marks the table's file for deletion once no reader holds the table.
    pub(crate) fn mark_obsolete(&self) {
        self.inner.file.mark_obsolete();
        if let Some((learned, id)) = self.learned() {
            learned.forget_table(id);
        }
    }

    /// The store's learned negatives and this table's id among them, if it learns.
    #[inline]
    pub(crate) fn learned(&self) -> Option<(&crate::learned::LearnedNegatives, u32)> {
        let t = &*self.inner;
        Some((t.file.counters().learned.get()?, t.learned_id?))
    }

    /// Looks `key` up; `hash` is `KeyHash::of(key)`, computed once per store lookup.
    /// Returns the entry (a tombstone too: the store decides what it means) or `None`.
    /// The read path's decisions go straight to the table's counters.
    pub fn get(&self, key: &[u8], hash: KeyHash) -> Result<Option<Entry>> {
        let mut tally = ReadTally::default();
        let result = self.get_tallied(key, hash, &mut tally);
        self.inner.file.counters().add_tally(&tally);
        result
    }

    /// Whether `key` lies within the table's key range.
    #[inline]
    pub fn covers(&self, key: &[u8]) -> bool {
        let p = &self.inner.properties;
        !keycmp::less(key, &p.smallest) && !keycmp::less(&p.largest, key)
    }

    /// Starts loading the filter memory a lookup of `hash` will read (no-op without a
    /// filter). See
    /// [`FilterReader::prefetch_hash`](bloomkv_filter::FilterReader::prefetch_hash).
    #[inline]
    pub fn prefetch_filter(&self, hash: KeyHash) {
        if let Some(filter) = &self.inner.filter {
            filter.prefetch_hash(hash);
        }
    }

    /// The table's filter as a [`RibbonProbe`], if it is a version-3 Ribbon filter.
    pub(crate) fn ribbon_probe(&self) -> Option<RibbonProbe> {
        self.inner.filter.as_ref()?.ribbon_probe()
    }

    /// The read path for one table, each decision tallied on the line that makes it
    /// (the store adds a lookup's tally to the shared counters once, see [`ReadTally`]):
    /// key range, then the in-memory filter, then exactly one data-block read.
    pub fn get_tallied(
        &self,
        key: &[u8],
        hash: KeyHash,
        tally: &mut ReadTally,
    ) -> Result<Option<Entry>> {
        if !self.covers(key) {
            return Ok(None);
        }
        self.probe_covered(key, hash, tally)
    }

    /// [`get_tallied`](Self::get_tallied) for a key the caller has already found within
    /// the table's range (`covers(key)`): the filter, then at most one data-block read.
    /// The table's newest version of the key is returned.
    #[inline]
    pub fn probe_covered(
        &self,
        key: &[u8],
        hash: KeyHash,
        tally: &mut ReadTally,
    ) -> Result<Option<Entry>> {
        self.probe_covered_at(key, hash, READ_LATEST, tally)
    }

    /// The table's newest version of `key` with a sequence number at most `read_seq`
    /// (a snapshot's read), tombstones included; `None` if the table holds none.
    pub fn get_at(
        &self,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Entry>> {
        if !self.covers(key) {
            return Ok(None);
        }
        self.probe_covered_at(key, hash, read_seq, tally)
    }

    /// The read path for one table as of `read_seq`. At [`READ_LATEST`] (no snapshot:
    /// the newest version is the answer) it is one data-block read; an older
    /// `read_seq` walks down the key's versions, into the next blocks while they
    /// continue there.
    pub fn probe_covered_at(
        &self,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Entry>> {
        Ok(self
            .probe_hit_at(key, hash, read_seq, tally)?
            .map(|hit| hit.into_entry(Bytes::copy_from_slice(key))))
    }

    /// [`probe_covered_at`](Self::probe_covered_at) without a copy of the key, for the
    /// store's get, which knows it already. Inlined, so that a get asking many tables
    /// pays a call, and the move of a result, only where a filter says "maybe".
    #[inline(always)]
    pub(crate) fn probe_hit_at(
        &self,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        if let Some(range_dels) = &self.inner.range_dels {
            return self.probe_under_range_dels(range_dels, key, hash, read_seq, tally);
        }
        if !self.filter_may_hold(hash, tally) {
            return Ok(None);
        }
        self.read_hit_at(key, hash, read_seq, tally)
    }

    /// [`probe_hit_at`](Self::probe_hit_at) in a table holding range tombstones. The
    /// tombstones are asked first, before the filter: one covering the key at `t`
    /// means the answer is "deleted" unless this table holds a newer version of the
    /// key, and no older table need be asked at all (counted: `range_del_answers`).
    /// A filter's "no" here cannot end the search with "not in this table": the
    /// tombstone has spoken for every older table.
    #[cold]
    fn probe_under_range_dels(
        &self,
        range_dels: &Fragments,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        let covering = range_dels.newest_covering(key, read_seq);
        let point = if self.filter_may_hold(hash, tally) {
            self.read_hit_at(key, hash, read_seq, tally)?
        } else {
            None
        };
        Ok(match (point, covering) {
            (Some(p), Some(t)) if p.seq < t => {
                tally.range_del_answers += 1;
                Some(Hit::range_deleted(t))
            }
            (None, Some(t)) => {
                tally.range_del_answers += 1;
                Some(Hit::range_deleted(t))
            }
            (point, _) => point,
        })
    }

    /// The rest of [`probe_hit_at`](Self::probe_hit_at) in a partitioned table (format
    /// version 8, `partition.rs`), reached from [`read_hit_at`](Self::read_hit_at), the
    /// probe already counted: the coarse filter, the key's filter partition, its index
    /// partition, then the data block, each decision tallied as in a whole table. A
    /// partition's reads are counted with the table's reads (`data_block_reads`). The
    /// get path of a table without partitions never comes here.
    #[cold]
    #[inline(never)]
    fn probe_partitioned(
        &self,
        parts: &Partitions,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        let t = &*self.inner;
        let p = parts.partition_of(key);
        if p >= parts.len() {
            return Ok(None); // above the largest separator: not in this table
        }
        let mut memo = None;
        if parts.has_filter() {
            tally.filter_checks += 1;
            if parts.may_contain(&t.file, p, hash, &mut memo) {
                tally.filter_positives += 1;
            } else {
                tally.filter_negatives += 1; // the reads of index partition and block avoided
                return Ok(None);
            }
        }
        let i = parts.find_in(&t.file, p, key, &mut memo)?;
        let Some(handle) = parts.handle(&t.file, i, &mut memo)? else {
            return Ok(None); // unreachable for a key <= largest
        };
        let block = t.file.read_data_block(handle)?;
        self.search_block(i, handle.offset, block, key, read_seq, tally)
    }

    /// The table's range tombstones (format version 7 tables), if any.
    pub fn range_dels(&self) -> Option<&Fragments> {
        self.inner.range_dels.as_ref()
    }

    /// For a batched get: every key of `keys` (positions in `batch`) that a range
    /// tombstone of this table covers above what `found` holds for it is answered
    /// "deleted". Called after the table's own reads.
    pub(crate) fn apply_range_dels(
        &self,
        batch: &[super::BatchKey],
        keys: &[u32],
        read_seq: SeqNo,
        tally: &mut ReadTally,
        found: &mut [Option<Hit>],
    ) {
        let Some(range_dels) = &self.inner.range_dels else {
            return;
        };
        for &k in keys {
            let Some(t) = range_dels.newest_covering(batch[k as usize].key, read_seq) else {
                continue;
            };
            let slot = &mut found[k as usize];
            if slot.as_ref().is_none_or(|h| h.seq < t) {
                tally.range_del_answers += 1;
                *slot = Some(Hit::range_deleted(t));
            }
        }
    }

    /// The first half of [`probe_hit_at`](Self::probe_hit_at): the table is probed,
    /// and its filter asked. `false`: the table certainly does not hold the key (a
    /// data-block read avoided).
    #[inline(always)]
    fn filter_may_hold(&self, hash: KeyHash, tally: &mut ReadTally) -> bool {
        tally.table_probes += 1;
        let Some(filter) = &self.inner.filter else {
            return true;
        };
        tally.filter_checks += 1;
        if filter.may_contain_hash(hash) {
            tally.filter_positives += 1;
            true
        } else {
            tally.filter_negatives += 1;
            false
        }
    }

    /// The second half of [`probe_hit_at`](Self::probe_hit_at), once
    /// [`filter_may_hold`](Self::filter_may_hold) said yes: the one data-block read
    /// (more for a snapshot whose versions continue into the next blocks) — none
    /// where a learned negative (`learned.rs`) says the block lacks the key.
    pub(crate) fn read_hit_at(
        &self,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        let t = &*self.inner;
        let i = t.index.find(key);
        let Some(handle) = t.index.handle(i) else {
            // A partitioned table keeps no whole index (and no whole filter, so the
            // probe got here): its lookups go on through its partitions. Otherwise
            // unreachable for a key <= largest: the last separator is largest.
            return match &t.parts {
                Some(parts) => self.probe_partitioned(parts, key, hash, read_seq, tally),
                None => Ok(None),
            };
        };
        let learned = self.learned();
        if let Some((learned, id)) = learned {
            if learned.skips(id, i, hash) {
                return Ok(None);
            }
        }
        let block = t.file.read_data_block(handle)?;
        let Some((learned, id)) = learned else {
            return self.search_block(i, handle.offset, block, key, read_seq, tally);
        };
        let held_before = tally.filter_true_positives;
        let found = self.search_block(i, handle.offset, block.clone(), key, read_seq, tally)?;
        self.learn_if_absent(
            learned,
            id,
            i,
            hash,
            &block,
            found.is_some(),
            held_before,
            tally,
        );
        Ok(found)
    }

    /// After a search of block `i` for the key with `hash`: records a learned negative
    /// if the table holds no version of the key (nothing found, and the search did
    /// not count the filter's "maybe" true, which it does for any version it meets).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn learn_if_absent(
        &self,
        learned: &crate::learned::LearnedNegatives,
        id: u32,
        i: usize,
        hash: KeyHash,
        block: &Block,
        found: bool,
        held_before: u64,
        tally: &ReadTally,
    ) {
        if !found && self.inner.filter.is_some() && tally.filter_true_positives == held_before {
            let keys = block.clone().into_iter().map(|e| e.map(|e| e.key));
            learned.learn(id, i, hash, keys);
        }
    }

    /// Searches `block`, the table's data block number `i` at `offset`, for the newest
    /// version of `key` at or below `read_seq`, and the next blocks while the key's
    /// versions continue there (only a snapshot's read can need them).
    ///
    /// `filter_true_positives` counts a "maybe" for a key the table holds in any
    /// version: a snapshot's read that meets only versions newer than its number finds
    /// nothing here, yet the filter was right, so it is not a false positive.
    pub(crate) fn search_block(
        &self,
        i: usize,
        offset: u64,
        block: Block,
        key: &[u8],
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        self.search_block_from(i, offset, block, key, read_seq, None, tally)
    }

    /// [`search_block`](Self::search_block), the first block's search started at
    /// `start` (its restart point for `key`, `Block::run_of`) where a batch found it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_block_from(
        &self,
        mut i: usize,
        mut offset: u64,
        mut block: Block,
        key: &[u8],
        read_seq: SeqNo,
        mut start: Option<usize>,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        let t = &*self.inner;
        let corrupt = |offset: u64| move |m| t.file.corruption(BlockKind::Data, offset, m);
        // At the newest sequence number the key's first entry is the answer, so
        // `Continues` (all versions in this block too new) only happens to snapshots.
        let mut held = false;
        let found = loop {
            let lookup = match start.take() {
                Some(pos) => block.scan_from(pos, key, read_seq),
                None => block.get_at(key, read_seq),
            };
            match lookup.map_err(corrupt(offset))? {
                Lookup::Found(found) => {
                    held = true;
                    break Some(found);
                }
                Lookup::Absent => break None,
                Lookup::OnlyNewer => {
                    held = true;
                    break None;
                }
                Lookup::Continues => {
                    held = true;
                    i += 1;
                    let Some(next) = t.block_handle(i, &mut None)? else {
                        break None;
                    };
                    offset = next.offset;
                    block = t.file.read_data_block(next)?;
                }
            }
        };
        if held && t.consults_filter() {
            tally.filter_true_positives += 1; // the filter's "maybe" was right
        }
        let Some(found) = found else {
            return Ok(None);
        };
        Ok(Some(Hit {
            seq: found.seq,
            kind: found.kind,
            value: value_of(&block, found.value),
        }))
    }

    /// All entries in key order, reading each data block once.
    pub fn iter(&self) -> TableIter {
        self.iter_from(Bound::Unbounded)
    }

    /// Entries from `start` on, in key order (every version of each key, newest first).
    pub fn iter_from(&self, start: Bound<&[u8]>) -> TableIter {
        TableIter::new(self.inner.clone(), start)
    }

    /// Entries within `start..end`, in descending key order (each key's versions
    /// oldest first): the backward half of a double-ended scan.
    pub fn iter_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> TableRevIter {
        TableRevIter::new(self.inner.clone(), start, end)
    }

    /// Whether the filter may hold a key with the prefix whose hash is `hash`, as
    /// written by the extractor named `extractor`. `true` (read the table) when the
    /// table has no filter, or its filter holds another extractor's prefixes or none.
    pub fn may_contain_prefix(&self, extractor: &str, hash: KeyHash) -> bool {
        let t = &*self.inner;
        // A partitioned table answers prefixes from its coarse filter, which holds
        // every prefix its partitions' filters do.
        let coarse = t.parts.as_ref().and_then(|p| p.coarse());
        let Some(filter) = t.filter.as_deref().or(coarse) else {
            return true;
        };
        if t.properties.prefix_extractor != extractor {
            return true; // this filter never saw these prefixes
        }
        let counters = t.file.counters();
        stats::bump(&counters.local().prefix_checks);
        if !filter.may_contain_hash(hash) {
            stats::bump(&counters.local().prefix_negatives); // the table is skipped, unread
            return false;
        }
        true
    }

    /// Whether the table may hold a key in `start .. end`. Consults the range filter
    /// only when both bounds are set (an excluded start counts as included: a
    /// superset); `true` (read the table) without a loaded range filter or bound.
    pub fn may_contain_range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
        let t = &*self.inner;
        let (Some(filter), Bound::Included(s) | Bound::Excluded(s)) = (&t.range_filter, start)
        else {
            return true;
        };
        if matches!(end, Bound::Unbounded) {
            return true;
        }
        let counters = t.file.counters();
        stats::bump(&counters.local().range_filter_checks);
        if !filter.may_contain_range(s, end) {
            stats::bump(&counters.local().range_filter_negatives); // skipped, unread
            return false;
        }
        true
    }

    /// Re-reads every block of the file and reports each one that fails its checksum or
    /// does not decode, plus disagreements between data and properties.
    pub fn verify(&self) -> Vec<BlockProblem> {
        verify::check_table_file(&self.inner.file)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.inner.file.path()
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> u64 {
        self.inner.file_size
    }

    /// The smallest key in the table.
    pub fn smallest(&self) -> &Bytes {
        &self.inner.properties.smallest
    }

    /// The largest key in the table.
    pub fn largest(&self) -> &Bytes {
        &self.inner.properties.largest
    }

    /// What the table says about itself.
    pub fn properties(&self) -> &TableProperties {
        &self.inner.properties
    }

    /// Whether lookups consult a filter.
    pub fn has_filter(&self) -> bool {
        self.inner.consults_filter()
    }

    /// Whether the table's index and filter are partitioned (format version 8).
    pub fn is_partitioned(&self) -> bool {
        self.inner.parts.is_some()
    }

    /// Whether the filter is loaded, and if not, why.
    pub fn filter_state(&self) -> &FilterState {
        &self.inner.filter_state
    }

    /// What the loaded filter says about itself.
    pub fn filter_info(&self) -> Option<FilterInfo> {
        let coarse = self.inner.parts.as_ref().and_then(|p| p.coarse());
        self.inner.filter.as_deref().or(coarse).map(|f| f.info())
    }

    /// Whether scans consult a range filter, and if not, why.
    pub fn range_filter_state(&self) -> &RangeFilterState {
        &self.inner.range_filter_state
    }

    /// What the loaded range filter says about itself.
    pub fn range_filter_stats(&self) -> Option<RangeFilterStats> {
        self.inner.range_filter.as_ref().map(|f| f.stats())
    }

    /// Heap bytes of the loaded filter (0 without one); of a partitioned table, its
    /// coarse filter (the partitions' filters are the metadata cache's).
    pub fn filter_memory_bytes(&self) -> usize {
        match &self.inner.parts {
            Some(parts) => parts.coarse_bytes(),
            None => self.inner.filter.as_ref().map_or(0, |f| f.memory_bytes()),
        }
    }

    /// Heap bytes of the in-memory index; of a partitioned table, its top level.
    pub fn index_memory_bytes(&self) -> usize {
        match &self.inner.parts {
            Some(parts) => parts.top_bytes(),
            None => self.inner.index.memory_bytes(),
        }
    }

    /// Number of data blocks.
    pub fn num_data_blocks(&self) -> usize {
        self.inner.num_blocks()
    }

    /// Asks the OS to drop the file's cached pages (cold-cache benchmarks).
    pub fn drop_cache(&self) -> Result<()> {
        self.inner.file.drop_cache()
    }
}

/// Values shorter than this many bytes are copied out of their block; longer ones are
/// returned as a slice of it, without a copy.
///
/// A slice keeps the whole block alive for as long as the caller holds the value: in
/// the block cache that costs nothing extra while the block stays cached (the cache
/// charges it anyway), but a value held after its block was evicted, or taken from a
/// block the cache did not admit, pins the block's bytes — up to `block / value` times
/// its own size. A copy costs an allocation and the value's bytes moved (about one
/// allocation for a value of a few cache lines); a slice one reference-count increment
/// on a line the lookup has just touched. At 64 bytes — one cache line — the pinned
/// memory per held value is bounded by 64× for the default 4 KiB blocks, the copy of
/// anything shorter costs no more than its allocation, and values from 64 bytes up are
/// returned without one, as RocksDB's `PinnableSlice` and fjall's slices do. A caller
/// that keeps many values long after the lookup (a cache of its own, say) and wants
/// them compact copies them (`Bytes::copy_from_slice`).
pub const PIN_MIN_VALUE: usize = 64;

/// The value at `range` of `block`: a slice of the block, or a copy when it is short
/// (see [`PIN_MIN_VALUE`]).
#[inline]
pub(crate) fn value_of(block: &Block, range: std::ops::Range<usize>) -> Bytes {
    if range.len() < PIN_MIN_VALUE {
        Bytes::copy_from_slice(block.bytes(range))
    } else {
        block.slice(range)
    }
}
