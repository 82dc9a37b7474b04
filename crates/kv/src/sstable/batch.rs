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
        if !t.file.reads_wait_on_device() {
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
        let t = &*self.inner;
        let learned = self.learned();
        // A key a learned negative rules out needs no block (`learned.rs`).
        let unlearned: Vec<u32>;
        let keys = match learned {
            None => keys,
            Some((learned, id)) => {
                unlearned = keys
                    .iter()
                    .copied()
                    .filter(|&k| {
                        let b = &batch[k as usize];
                        !learned.skips(id, t.index.find(b.key), b.hash)
                    })
                    .collect();
                &unlearned[..]
            }
        };
        // Each key's block, in key order; runs of one block become one group.
        let mut groups: Vec<(usize, BlockHandle, std::ops::Range<usize>)> = Vec::new();
        for (pos, &k) in keys.iter().enumerate() {
            let i = t.index.find(batch[k as usize].key);
            match groups.last_mut() {
                Some((last, _, run)) if *last == i => run.end = pos + 1,
                _ => {
                    // A key past the last block is not in the table (unreachable for a
                    // key within its range: the last separator is the largest key).
                    if let Some(handle) = t.index.handle(i) {
                        groups.push((i, handle, pos..pos + 1));
                    }
                }
            }
        }
        let handles: Vec<BlockHandle> = groups.iter().map(|g| g.1).collect();
        let blocks = t.file.read_data_blocks(
            &handles,
            &mut batch_tally.overlapped_reads,
            &mut batch_tally.cache_misses,
        )?;
        for ((i, handle, run), block) in groups.into_iter().zip(blocks) {
            if run.len() > 1 {
                batch_tally.shared_blocks += 1;
                batch_tally.lookups_saved += run.len() as u64 - 1;
            }
            for &k in &keys[run] {
                let BatchKey { key, hash } = batch[k as usize];
                let held_before = tally.filter_true_positives;
                let hit =
                    self.search_block(i, handle.offset, block.clone(), key, read_seq, tally)?;
                if let Some((learned, id)) = learned {
                    let held = hit.is_some();
                    self.learn_if_absent(learned, id, i, hash, &block, held, held_before, tally);
                }
                found[k as usize] = hit;
            }
        }
        Ok(())
    }
}
