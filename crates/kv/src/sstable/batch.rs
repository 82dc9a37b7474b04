//! One table's share of a batched lookup (`multi_get`): every key of the batch that
//! the table's range covers, asked at once.
//!
//! A single get asks a table one question after another — filter, index, block — and
//! each waits on the memory or the device the one before it touched. A batch asks the
//! same questions of many keys, so their waits can overlap: the filter lines of the
//! keys a few places ahead are requested while the current key is tested (software
//! pipelining), and the keys the filter lets through are grouped by data block, so one
//! cache lookup or one read, one decode, serves every key that lives in that block. The
//! blocks the cache lacks are read together: the device reads of all of them are
//! started before the first is waited for (`TableFile::read_data_blocks`).
//!
//! ```text
//!  keys covered (sorted)   k1   k2   k3   k4   k5   k6
//!  filter (prefetch +8)    ✓    ✗    ✓    ✓    ✗    ✓     table_probes, filter_*
//!  index: block of each    b3        b3   b7        b9
//!  blocks (cache, then      [b3]──────┘   [b7]      [b9]  one lookup per block;
//!   misses read together)                                 shared: b3 serves 2 keys
//!  search each key in its block ──> Hit / none            filter_true_positives
//! ```
//!
//! Every per-key decision is tallied exactly as [`Table::probe_hit_at`] tallies it, so
//! a batch's filter counters equal a loop of gets'; only the block lookups differ (a
//! shared block is looked up once), and those are counted on their own.

use bloomkv_filter::KeyHash;

use std::ops::Range;

use super::block::Block;
use super::footer::BlockHandle;
use super::reader::Table;
use crate::error::Result;
use crate::stats::ReadTally;
use crate::types::{Hit, SeqNo};

/// How many keys ahead a batch asks for the filter lines it will test: enough to
/// cover a memory miss (~100–200 ns here) with the tests of the keys in between
/// (~10–20 ns each), few enough that the lines are still in the CPU's cache when
/// their turn comes.
pub(crate) const PREFETCH_AHEAD: usize = 8;

/// A key of a batch, hashed once for every table's filter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchKey<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) hash: KeyHash,
}

/// What a batch did beyond its per-key decisions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchTally {
    /// Blocks looked up once for several keys.
    pub(crate) shared_blocks: u64,
    /// The lookups those saved (keys served beyond each shared block's first).
    pub(crate) lookups_saved: u64,
    /// Block reads issued together with others.
    pub(crate) overlapped_reads: u64,
    /// Blocks the cache lacked (each then read): the batch is meeting the device.
    pub(crate) cache_misses: u64,
}

/// A data block a batch looked up ([`Table::fetch_located`]), with the keys to search
/// in it.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The caller's number for the table the block is of.
    pub(crate) table: u32,
    block_no: usize,
    offset: u64,
    /// `None` only until the lookup fills it.
    block: Option<Block>,
    /// The keys' items in the caller's list.
    keys: Range<usize>,
}

/// Asks for the lines the searches of `fetched`'s keys will read, one stage at a time
/// over all the blocks, so that the misses of different blocks overlap: every block's
/// restart array, then every block's restart keys, then for each key the run of entries
/// its search scans (its start put in `starts`, indexed like `located`; `usize::MAX`
/// where the block is malformed, for the search to report).
pub(crate) fn prefetch_fetched(
    batch: &[BatchKey],
    located: &[(usize, u32)],
    fetched: &[Fetched],
    starts: &mut Vec<usize>,
) {
    let blocks = || {
        fetched
            .iter()
            .filter_map(|f| f.block.as_ref().map(|b| (f, b)))
    };
    for (_, block) in blocks() {
        block.prefetch_restart_array();
    }
    for (_, block) in blocks() {
        block.prefetch_restarts();
    }
    starts.clear();
    starts.resize(located.len(), usize::MAX);
    for (f, block) in blocks() {
        for j in f.keys.clone() {
            if let Ok(pos) = block.run_of(batch[located[j].1 as usize].key) {
                block.prefetch_run(pos);
                starts[j] = pos;
            }
        }
    }
}

impl Table {
    /// Asks the filter about each key of `keys` (positions in `batch`, every one within
    /// the table's range) and keeps in `keys` those it may hold. The filter lines of
    /// the key [`PREFETCH_AHEAD`] places on are requested before each test. Tallied
    /// key by key as [`Table::probe_hit_at`] does; without a filter every key stays.
    pub(crate) fn filter_batch(
        &self,
        batch: &[BatchKey],
        keys: &mut Vec<u32>,
        tally: &mut ReadTally,
    ) {
        let n = keys.len() as u64;
        tally.table_probes += n;
        let Some(filter) = &self.inner.filter else {
            return;
        };
        tally.filter_checks += n;
        let hash = |k: u32| batch[k as usize].hash;
        for &k in keys.iter().take(PREFETCH_AHEAD) {
            filter.prefetch_hash(hash(k));
        }
        let mut kept = 0;
        for i in 0..keys.len() {
            if let Some(&ahead) = keys.get(i + PREFETCH_AHEAD) {
                filter.prefetch_hash(hash(ahead));
            }
            let k = keys[i];
            if filter.may_contain_hash(hash(k)) {
                keys[kept] = k;
                kept += 1;
            }
        }
        let positives = kept as u64;
        tally.filter_positives += positives;
        tally.filter_negatives += n - positives;
        keys.truncate(kept);
    }

    /// Tells the OS which uncached data blocks this table would read for `keys`
    /// (positions in `batch`, sorted, each within the table's range): the blocks of the
    /// keys its filter lets through. Nothing is tallied — the walk that reads the
    /// blocks later asks the filter again and counts as a get would — so a key that an
    /// earlier table answers only costs its hinted block's device read, never a counted
    /// one.
    pub(crate) fn hint_batch(&self, batch: &[BatchKey], keys: &[u32]) {
        let t = &*self.inner;
        if t.parts.is_some() || !t.file.reads_wait_on_device() {
            return; // the pages are in the OS's cache: hints would only cost
        }
        let mut handles = Vec::new();
        let mut last = None;
        for &k in keys {
            let k = &batch[k as usize];
            if let Some(filter) = &t.filter {
                if !filter.may_contain_hash(k.hash) {
                    continue;
                }
            }
            let i = t.index.find(k.key);
            if last == Some(i) {
                continue;
            }
            last = Some(i);
            if let Some(handle) = t.index.handle(i) {
                handles.push(handle);
            }
        }
        t.file.hint_uncached(&handles);
    }

    /// Looks up each key of `keys` (positions in `batch`, sorted by key, each within
    /// the table's range and let through by its filter) as of `read_seq`, and puts what
    /// the table holds of it in `found` (indexed like `batch`). Keys in one data block
    /// share one lookup of it; the blocks the cache lacks are read together.
    pub(crate) fn read_batch(
        &self,
        batch: &[BatchKey],
        keys: &[u32],
        read_seq: SeqNo,
        tally: &mut ReadTally,
        batch_tally: &mut BatchTally,
        found: &mut [Option<Hit>],
    ) -> Result<()> {
        let index = &self.inner.index;
        let located: Vec<(usize, u32)> = keys
            .iter()
            .map(|&k| (index.find(batch[k as usize].key), k))
            .collect();
        self.read_located(batch, &located, read_seq, tally, batch_tally, found)
    }

    /// [`read_batch`](Self::read_batch) for keys whose data block is known: each item
    /// of `located` is a block number (`IndexBlock::find` of the key) and a position in
    /// `batch`, items of one block side by side. Each run of one block is one lookup
    /// of it.
    pub(crate) fn read_located(
        &self,
        batch: &[BatchKey],
        located: &[(usize, u32)],
        read_seq: SeqNo,
        tally: &mut ReadTally,
        batch_tally: &mut BatchTally,
        found: &mut [Option<Hit>],
    ) -> Result<()> {
        // A key a learned negative rules out needs no block (`learned.rs`).
        let unlearned: Vec<(usize, u32)>;
        let located = match self.learned() {
            None => located,
            Some((learned, id)) => {
                unlearned = located
                    .iter()
                    .copied()
                    .filter(|&(i, k)| !learned.skips(id, i, batch[k as usize].hash))
                    .collect();
                &unlearned[..]
            }
        };
        let mut fetched = Vec::new();
        self.fetch_located(located, 0, 0, batch_tally, &mut fetched)?;
        let mut starts = Vec::new();
        prefetch_fetched(batch, located, &fetched, &mut starts);
        for f in fetched {
            self.search_fetched(
                batch,
                located,
                &starts,
                f,
                read_seq,
                tally,
                batch_tally,
                found,
            )?;
        }
        Ok(())
    }

    /// Looks up the blocks `located` needs (items as for
    /// [`read_located`](Self::read_located), none ruled out by a learned negative):
    /// one lookup per run of one block, from the cache without asking for its lines
    /// (`BlockCache::get_quiet`), the misses read together. One [`Fetched`] per block
    /// goes to `out`, tagged `table`; `base` is where `located` starts in the list
    /// the caller will search with.
    pub(crate) fn fetch_located(
        &self,
        located: &[(usize, u32)],
        base: usize,
        table: u32,
        batch_tally: &mut BatchTally,
        out: &mut Vec<Fetched>,
    ) -> Result<()> {
        let t = &*self.inner;
        let first = out.len();
        let mut handles: Vec<BlockHandle> = Vec::new();
        for (pos, &(i, _)) in located.iter().enumerate() {
            let pos = base + pos;
            match out[first..].last_mut() {
                Some(f) if f.block_no == i => f.keys.end = pos + 1,
                _ => {
                    // A key past the last block is not in the table (unreachable for a
                    // key within its range: the last separator is the largest key).
                    if let Some(handle) = t.index.handle(i) {
                        handles.push(handle);
                        out.push(Fetched {
                            table,
                            block_no: i,
                            offset: handle.offset,
                            block: None,
                            keys: pos..pos + 1,
                        });
                    }
                }
            }
        }
        let blocks = t.file.read_data_blocks(
            &handles,
            &mut batch_tally.overlapped_reads,
            &mut batch_tally.cache_misses,
        )?;
        for (f, block) in out[first..].iter_mut().zip(blocks) {
            f.block = Some(block);
        }
        Ok(())
    }

    /// Searches the block of `f` (from [`fetch_located`](Self::fetch_located)) for each
    /// of its keys (items of `located`, each starting at its run in `starts`, from
    /// [`prefetch_fetched`]) and puts what the table holds in `found`; tallied as a
    /// get's read of the block would be, and learned from where the table learns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_fetched(
        &self,
        batch: &[BatchKey],
        located: &[(usize, u32)],
        starts: &[usize],
        f: Fetched,
        read_seq: SeqNo,
        tally: &mut ReadTally,
        batch_tally: &mut BatchTally,
        found: &mut [Option<Hit>],
    ) -> Result<()> {
        let Some(block) = f.block else {
            return Ok(());
        };
        if f.keys.len() > 1 {
            batch_tally.shared_blocks += 1;
            batch_tally.lookups_saved += f.keys.len() as u64 - 1;
        }
        let learned = self.learned();
        for j in f.keys {
            let k = located[j].1;
            let BatchKey { key, hash } = batch[k as usize];
            let held_before = tally.filter_true_positives;
            let start = starts.get(j).copied().filter(|&s| s != usize::MAX);
            let hit = self.search_block_from(
                f.block_no,
                f.offset,
                block.clone(),
                key,
                read_seq,
                start,
                tally,
            )?;
            if let Some((learned, id)) = learned {
                let held = hit.is_some();
                self.learn_if_absent(
                    learned,
                    id,
                    f.block_no,
                    hash,
                    &block,
                    held,
                    held_before,
                    tally,
                );
            }
            found[k as usize] = hit;
        }
        Ok(())
    }

    /// A partitioned table's share of a batch (format version 8): each key of `keys`
    /// asked as a get asks it ([`Table::probe_hit_at`], range tombstones included), its
    /// answer put in `found`. Its partitions come one key at a time through the
    /// metadata cache.
    pub(crate) fn probe_each(
        &self,
        batch: &[BatchKey],
        keys: &[u32],
        read_seq: SeqNo,
        tally: &mut ReadTally,
        found: &mut [Option<Hit>],
    ) -> Result<()> {
        for &k in keys {
            let BatchKey { key, hash } = batch[k as usize];
            found[k as usize] = self.probe_hit_at(key, hash, read_seq, tally)?;
        }
        Ok(())
    }

    /// Tells the OS which uncached data blocks `located` (as for
    /// [`read_located`](Self::read_located)) will read. Nothing is tallied.
    pub(crate) fn hint_located(&self, located: &[(usize, u32)]) {
        let t = &*self.inner;
        if !t.file.reads_wait_on_device() {
            return; // the pages are in the OS's cache: hints would only cost
        }
        let mut handles: Vec<BlockHandle> = located
            .iter()
            .filter_map(|&(i, _)| t.index.handle(i))
            .collect();
        handles.dedup_by_key(|h| h.offset);
        t.file.hint_uncached(&handles);
    }
}
