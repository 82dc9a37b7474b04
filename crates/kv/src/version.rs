//! A version: the immutable set of live tables, level by level.
//!
//! ```text
//! L0   [t9] [t8] [t7]          newest first; key ranges may overlap (flush output)
//! L1   [a..f] [g..m] [n..z]    sorted, disjoint key ranges
//! L2   [a..c] [d..h] ...       ten times L1's size budget, and so on
//! ```
//!
//! Flush and compaction never change a version: they build the next one and swap it in
//! (see `db.rs`). A reader holding an `Arc<Version>` keeps reading the tables it saw,
//! even if a compaction retires them meanwhile (an open file outlives its unlink).

use std::ops::Range;
use std::sync::Arc;

use std::sync::OnceLock;

use bloomkv_filter::{KeyHash, RibbonProbe};

use crate::error::Result;
use crate::keycmp;
use crate::lazy_table::{LazyTable, TableOpener, TableRecord};
use crate::sstable::{prefetch_fetched, BatchKey, BatchTally, Table, PREFETCH_AHEAD};
use crate::stats::ReadTally;
use crate::types::{Hit, SeqNo, NUM_LEVELS};

/// How many filter lines a batch asks for ahead of the key it tests, across the tables
/// that key meets (`Version::multi_get_l0_ribbons`): enough to keep several memory
/// misses in flight, few enough that the lines are still cached when their key's turn
/// comes.
const BATCH_PREFETCH_LINES: usize = 16;

/// A live table: its number, what the manifest knows of it, and its reader, opened on
/// first use (see `lazy_table::LazyTable`).
#[derive(Debug)]
pub(crate) struct TableHandle {
    /// The file number (`{number:06}.sst`).
    pub number: u64,
    /// Key range, sizes, entries and `max_seq`: all a version needs to place a
    /// lookup or plan a compaction without reading the table.
    pub record: TableRecord,
    /// The reader: footer, index and filter in memory once opened.
    table: LazyTable,
}

impl TableHandle {
    /// A handle on a table already open (one just built).
    pub(crate) fn opened(number: u64, table: Table) -> TableHandle {
        TableHandle {
            number,
            record: TableRecord::of(&table),
            table: LazyTable::opened(number, table),
        }
    }

    /// A handle on a table the manifest records, opened by `opener` on first use.
    pub(crate) fn lazy(number: u64, record: TableRecord, opener: Arc<TableOpener>) -> TableHandle {
        TableHandle {
            number,
            table: LazyTable::unopened(number, record.clone(), opener),
            record,
        }
    }

    /// The same table without its filter (see `filter_budget.rs`): a new handle on
    /// the same file, opened, whose lookups read data blocks.
    pub(crate) fn without_filter(&self) -> Result<TableHandle> {
        Ok(TableHandle::opened(
            self.number,
            self.table()?.without_filter(),
        ))
    }

    /// The table's reader, opened now if this is its first use. An error is the
    /// failure an open of the table reports (`Corruption` naming the file if it is
    /// missing, damaged, or does not match the manifest).
    #[inline]
    pub(crate) fn table(&self) -> Result<&Table> {
        self.table.get()
    }

    /// The reader if the table has been opened, without opening it.
    pub(crate) fn if_open(&self) -> Option<&Table> {
        self.table.if_open()
    }

    /// Marks the table's file for deletion once no reader holds it.
    pub(crate) fn mark_obsolete(&self) {
        self.table.mark_obsolete();
    }

    pub(crate) fn smallest(&self) -> &[u8] {
        &self.record.smallest
    }

    pub(crate) fn largest(&self) -> &[u8] {
        &self.record.largest
    }

    pub(crate) fn file_size(&self) -> u64 {
        self.record.file_size
    }

    pub(crate) fn max_seq(&self) -> SeqNo {
        self.record.max_seq
    }

    pub(crate) fn entries(&self) -> u64 {
        self.record.entries
    }

    /// Whether `key` lies within the table's key range.
    #[inline]
    pub(crate) fn covers(&self, key: &[u8]) -> bool {
        !keycmp::less(key, self.smallest()) && !keycmp::less(self.largest(), key)
    }

    /// Whether the table's key range intersects `[smallest, largest]`.
    pub(crate) fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.smallest() <= largest && smallest <= self.largest()
    }
}

/// The tables of every level. Immutable once built.
#[derive(Debug, Clone, Default)]
pub(crate) struct Version {
    /// `levels[0]` newest first; deeper levels sorted by smallest key, disjoint.
    /// Private: every version with tables is made by [`Version::apply`] (from
    /// [`Version::empty`] when a store opens), which also derives `l0_bounds`, so the
    /// two cannot drift apart. Read through [`Version::level`] and [`Version::levels`].
    levels: Vec<Vec<Arc<TableHandle>>>,
    /// L0's key ranges in a form a get checks in a few instructions.
    l0_bounds: L0Bounds,
}

/// The key ranges of the L0 tables, for the range check a get makes on each of them.
///
/// Every L0 table's smallest and largest key starts with `prefix` (their longest common
/// prefix); `words[i]` holds the 8 bytes after it of table `i`'s smallest and largest
/// key, big-endian, zero-padded. A key that does not start with `prefix` lies outside
/// every L0 range; one that does is placed against a table by comparing its own word:
/// strictly between the two words it is inside, below or above it is outside, and only
/// a tie needs the whole keys. (Padding with zeros keeps strict order: a shorter key
/// that wins a word comparison is smaller.) With the benchmark's keys, which share
/// their first bytes, the full comparisons cost ~40 instructions per table; this ~6.
///
/// `ribbons[i]` is table `i`'s filter when every L0 table has a version-3 Ribbon filter
/// (else `ribbons` is empty): a get then asks them side by side, without a virtual
/// call per table (`RibbonProbe`). Made by the version's first get (which opens every
/// L0 table, at most `level0_stop_writes_trigger` of them), not when the version is
/// built: a store opens without reading any table. If an L0 table cannot be opened
/// then, `ribbons` stays empty and gets ask table by table, the failure reported by
/// the get that reaches that table.
#[derive(Debug, Clone, Default)]
struct L0Bounds {
    prefix: Vec<u8>,
    words: Vec<(u64, u64)>,
    ribbons: OnceLock<L0Ribbons>,
}

/// Every L0 table's Ribbon probe, and which tables hold range tombstones (bit `i`:
/// `l0[i]`). Empty where some L0 table has no Ribbon filter.
#[derive(Debug, Clone, Default)]
struct L0Ribbons {
    probes: Vec<RibbonProbe>,
    range_dels: u64,
}

impl L0Bounds {
    fn new(l0: &[Arc<TableHandle>]) -> L0Bounds {
        let Some(first) = l0.first() else {
            return L0Bounds::default();
        };
        let mut n = first.smallest().len();
        for t in l0 {
            n = n.min(keycmp::common_prefix(&first.smallest()[..n], t.smallest()));
            n = n.min(keycmp::common_prefix(&first.smallest()[..n], t.largest()));
        }
        L0Bounds {
            prefix: first.smallest()[..n].to_vec(),
            words: l0
                .iter()
                .map(|t| {
                    (
                        keycmp::word_after(t.smallest(), n),
                        keycmp::word_after(t.largest(), n),
                    )
                })
                .collect(),
            ribbons: OnceLock::new(),
        }
    }

    /// The L0 tables whose range covers `key`, one bit per table (table `i`: bit
    /// `i`); `None` when the words do not describe `l0` (more than 64 tables).
    #[inline]
    fn covering(&self, l0: &[Arc<TableHandle>], key: &[u8]) -> Option<u64> {
        if l0.len() > 64 || self.words.len() != l0.len() {
            return None;
        }
        if !keycmp::starts_with(key, &self.prefix) {
            return Some(0);
        }
        let w = keycmp::word_after(key, self.prefix.len());
        let mut covered = 0u64;
        for (i, (handle, &(lo, hi))) in l0.iter().zip(&self.words).enumerate() {
            let inside = if lo < w && w < hi {
                true
            } else if w < lo || hi < w {
                false
            } else {
                handle.covers(key) // a tie: the words cannot tell
            };
            covered |= u64::from(inside) << i;
        }
        Some(covered)
    }

    /// Every L0 table's Ribbon probe and the tables with range tombstones (see
    /// [`L0Ribbons`]), made on first call.
    fn ribbons(&self, l0: &[Arc<TableHandle>]) -> &L0Ribbons {
        self.ribbons.get_or_init(|| {
            let mut range_dels = 0u64;
            let probes = l0
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let table = t.table().ok()?;
                    if table.range_dels().is_some() {
                        range_dels |= 1 << i;
                    }
                    table.ribbon_probe()
                })
                .collect::<Option<Vec<_>>>();
            match probes {
                Some(probes) => L0Ribbons { probes, range_dels },
                None => L0Ribbons::default(),
            }
        })
    }
}

impl Version {
    pub(crate) fn empty() -> Version {
        Version {
            levels: vec![Vec::new(); NUM_LEVELS],
            l0_bounds: L0Bounds::default(),
        }
    }

    /// Every level's tables, L0 first (newest first), then each deeper level by key.
    pub(crate) fn levels(&self) -> &[Vec<Arc<TableHandle>>] {
        &self.levels
    }

    /// The tables of `level` (empty past the deepest level).
    pub(crate) fn level(&self, level: usize) -> &[Arc<TableHandle>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// The newest version of `key` with a sequence number at most `read_seq` held by
    /// any table, tombstones included (`READ_LATEST`: the newest of all, one block read
    /// per table asked).
    ///
    /// L0 tables are consulted newest first (their ranges overlap); on deeper levels at
    /// most one table can hold the key, found by binary search on the largest keys.
    /// Newer tables and shallower levels hold newer versions, so the first table that
    /// has a version at or below `read_seq` has the answer; one whose versions of the
    /// key are all newer answers `None` and the search goes on.
    pub(crate) fn get(
        &self,
        key: &[u8],
        hash: KeyHash,
        read_seq: SeqNo,
        tally: &mut ReadTally,
    ) -> Result<Option<Hit>> {
        // L0 ranges overlap, so every table may be asked. One pass finds the tables
        // whose range covers the key and starts loading each one's filter line; the
        // second tests them, newest first, so the cache misses overlap instead of
        // following one another.
        // L0's share of the tally is not recorded per level: `Counters::snapshot`
        // derives it (totals minus the deeper levels), so a lookup that only meets
        // L0 tables pays nothing for per-level counting.
        let l0 = &self.levels[0];
        let bounds = &self.l0_bounds;
        if l0.len() <= 64 && bounds.words.len() == l0.len() {
            let all = bounds.ribbons(l0);
            let ribbons = (all.probes.len() == l0.len()).then_some(all.probes.as_slice());
            let mut candidates = 0u64;
            if keycmp::starts_with(key, &bounds.prefix) {
                let w = keycmp::word_after(key, bounds.prefix.len());
                for (i, (handle, &(lo, hi))) in l0.iter().zip(&bounds.words).enumerate() {
                    let covered = if lo < w && w < hi {
                        true
                    } else if w < lo || hi < w {
                        false
                    } else {
                        handle.covers(key) // a tie: the words cannot tell
                    };
                    if covered {
                        match ribbons {
                            Some(r) => r[i].prefetch(hash),
                            None => handle.table()?.prefetch_filter(hash),
                        }
                        candidates |= 1 << i;
                    }
                }
            }
            if let Some(ribbons) = ribbons {
                // A range tombstone covering the key in table `j` answers for every
                // older table: the filters are asked only above it, and `j` itself,
                // whose answer is the tombstone unless it holds a newer version, last.
                let mut stop = None;
                let mut asked = candidates & all.range_dels;
                while asked != 0 {
                    let j = asked.trailing_zeros() as usize;
                    asked &= asked - 1;
                    let covered = l0[j]
                        .table()?
                        .range_dels()
                        .and_then(|r| r.newest_covering(key, read_seq));
                    if covered.is_some() {
                        stop = Some(j);
                        candidates &= (1u64 << j) - 1;
                        break;
                    }
                }
                // Every filter asked in one call; a table is read only where its
                // filter says "maybe".
                while candidates != 0 {
                    let before = candidates;
                    let maybe = RibbonProbe::first_maybe(ribbons, &mut candidates, hash);
                    tally.filters_asked(before ^ candidates, maybe.is_some());
                    let Some(i) = maybe else { break };
                    if let Some(hit) = l0[i].table()?.read_hit_at(key, hash, read_seq, tally)? {
                        return Ok(Some(hit));
                    }
                }
                if let Some(j) = stop {
                    return l0[j].table()?.probe_hit_at(key, hash, read_seq, tally);
                }
            }
            while candidates != 0 {
                let i = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if let Some(hit) = l0[i].table()?.probe_hit_at(key, hash, read_seq, tally)? {
                    return Ok(Some(hit));
                }
            }
        } else {
            for handle in l0.iter().filter(|h| h.covers(key)) {
                if let Some(hit) = handle.table()?.probe_hit_at(key, hash, read_seq, tally)? {
                    return Ok(Some(hit));
                }
            }
        }
        for (n, level) in self.levels.iter().enumerate().skip(1) {
            if level.is_empty() {
                continue; // without a call to search it
            }
            // The first table whose largest key is not below `key`; it holds the key
            // only if its smallest is not above it.
            let i = level.partition_point(|h| keycmp::less(h.largest(), key));
            if let Some(handle) = level.get(i).filter(|h| !keycmp::less(key, h.smallest())) {
                let mark = tally.mark();
                let found = handle.table()?.probe_hit_at(key, hash, read_seq, tally)?;
                tally.close_level(n, mark);
                if found.is_some() {
                    return Ok(found);
                }
            }
        }
        Ok(None)
    }

    /// [`Version::get`] for a batch: the newest version of each key of `batch` at or
    /// below `read_seq`, put in `found` (indexed like `batch`). `pending` lists the
    /// positions in `batch` to look up, in any order (a key may appear twice).
    ///
    /// When every L0 table has a Ribbon filter (as [`Version::get`] then asks them side
    /// by side), L0 is asked key by key in rounds (`multi_get_l0_ribbons`): no sorting,
    /// and every key's filters are asked in one call, their lines requested a few keys
    /// ahead. Otherwise, and on the deeper levels, table by table rather than key by
    /// key: L0 newest first, then each deeper level in key order. Each table is handed
    /// the run of still-unanswered keys its range covers (a run, since the keys are then
    /// sorted: two binary searches find it), asks its filter about all of them with
    /// lines prefetched ahead, and reads each block the survivors need once
    /// (`sstable/batch.rs`). Either way a key answered by a table leaves the batch
    /// before the next table, so every key meets exactly the tables, in the order, that
    /// [`Version::get`] would show it, and is tallied as that get would be.
    pub(crate) fn multi_get(
        &self,
        batch: &[BatchKey],
        mut pending: Vec<u32>,
        read_seq: SeqNo,
        tally: &mut ReadTally,
        batch_tally: &mut BatchTally,
        found: &mut [Option<Hit>],
    ) -> Result<()> {
        let l0 = &self.levels[0];
        let side_by_side =
            !l0.is_empty() && l0.len() <= 64 && self.l0_bounds.words.len() == l0.len() && {
                // Tables with range tombstones need their tombstones asked per key,
                // which the side-by-side rounds do not: such an L0 goes table by table.
                let r = self.l0_bounds.ribbons(l0);
                r.probes.len() == l0.len() && r.range_dels == 0
            };
        let deeper = self.levels[1..].iter().any(|l| !l.is_empty());
        if side_by_side {
            self.multi_get_l0_ribbons(batch, &mut pending, read_seq, tally, batch_tally, found)?;
            if pending.is_empty() || !deeper {
                return Ok(());
            }
        }
        // The table-by-table walk takes the keys in key order.
        pending.sort_unstable_by(|&a, &b| batch[a as usize].key.cmp(batch[b as usize].key));
        let mut run = Vec::new();
        let mut ask = |handle: &TableHandle,
                       keys: &[u32],
                       tally: &mut ReadTally,
                       batch_tally: &mut BatchTally,
                       found: &mut [Option<Hit>]|
         -> Result<()> {
            run.clear();
            run.extend_from_slice(keys);
            let table = handle.table()?;
            if table.is_partitioned() {
                return table.probe_each(batch, keys, read_seq, tally, found);
            }
            table.filter_batch(batch, &mut run, tally);
            if !run.is_empty() {
                table.read_batch(batch, &run, read_seq, tally, batch_tally, found)?;
            }
            // The table's range tombstones answer for the keys they cover, whatever
            // its filter said: those keys leave the batch here, deleted.
            table.apply_range_dels(batch, keys, read_seq, tally, found);
            Ok(())
        };
        // Once a table has had to read, the batch is meeting the device: the blocks
        // every later table may need are hinted to the OS at once, so their device
        // reads overlap with the ones before them instead of waiting for their table's
        // turn (`Version::hint_from`).
        let mut hinted = side_by_side && batch_tally.cache_misses > 0;
        if !side_by_side {
            for (i, handle) in l0.iter().enumerate() {
                if pending.is_empty() {
                    return Ok(());
                }
                let covered = covered_run(batch, &pending, handle);
                if covered.is_empty() {
                    continue;
                }
                ask(handle, &pending[covered], tally, batch_tally, found)?;
                pending.retain(|&k| found[k as usize].is_none());
                if !hinted && batch_tally.cache_misses > 0 {
                    hinted = true;
                    self.hint_from(batch, &pending, i + 1);
                }
            }
        } else if hinted {
            self.hint_deeper(batch, &pending, 1);
        }
        for (n, level) in self.levels.iter().enumerate().skip(1) {
            if pending.is_empty() {
                return Ok(());
            }
            for (t, keys) in level_runs(batch, &pending, level) {
                let mark = tally.mark();
                ask(&level[t], &pending[keys], tally, batch_tally, found)?;
                tally.close_level(n, mark);
            }
            pending.retain(|&k| found[k as usize].is_none());
            if !hinted && batch_tally.cache_misses > 0 {
                hinted = true;
                self.hint_deeper(batch, &pending, n + 1);
            }
        }
        Ok(())
    }

    /// L0's share of [`Version::multi_get`] when every L0 table has a Ribbon filter
    /// and none holds range tombstones ([`L0Bounds::ribbons`]): what [`Version::get`]
    /// does for one key, done for all of `pending` in rounds, software-pipelined.
    ///
    /// ```text
    ///  each key: the L0 tables covering it (a bit mask, no sorting)
    ///  round:  key j's filters asked side by side   (lines of key j+ahead requested)
    ///            -> its first "maybe" table, or no table left
    ///          the index block of each (key, table) -- independent searches
    ///          sorted by (table, block): one lookup per block, misses read together
    ///          the blocks' lines asked for stage by stage (`prefetch_fetched`)
    ///          a key found leaves; one whose "maybe" was false goes to the next round
    /// ```
    ///
    /// Keys answered leave `pending`; the rest go on to the deeper levels.
    fn multi_get_l0_ribbons(
        &self,
        batch: &[BatchKey],
        pending: &mut Vec<u32>,
        read_seq: SeqNo,
        tally: &mut ReadTally,
        batch_tally: &mut BatchTally,
        found: &mut [Option<Hit>],
    ) -> Result<()> {
        let l0 = &self.levels[0];
        let ribbons = self.l0_bounds.ribbons(l0).probes.as_slice();
        // Each key with the L0 tables still to ask about it; keys no table covers
        // leave at once.
        let mut live: Vec<(u32, u64)> = Vec::with_capacity(pending.len());
        for &k in pending.iter() {
            let covered = self
                .l0_bounds
                .covering(l0, batch[k as usize].key)
                .unwrap_or(0);
            if covered != 0 {
                live.push((k, covered));
            }
        }
        // How many keys ahead their filter lines are requested: about
        // `BATCH_PREFETCH_LINES` lines in flight, however many tables a key meets.
        let ahead = (BATCH_PREFETCH_LINES / l0.len()).clamp(1, PREFETCH_AHEAD);
        let prefetch = |(k, covered): (u32, u64)| {
            let hash = batch[k as usize].hash;
            let mut c = covered;
            while c != 0 {
                ribbons[c.trailing_zeros() as usize].prefetch(hash);
                c &= c - 1;
            }
        };
        let mut reads: Vec<(u32, usize, u32)> = Vec::new();
        let mut located: Vec<(usize, u32)> = Vec::new();
        let mut fetched = Vec::new();
        let mut starts = Vec::new();
        while !live.is_empty() {
            reads.clear();
            for &item in live.iter().take(ahead) {
                prefetch(item);
            }
            for j in 0..live.len() {
                if let Some(&item) = live.get(j + ahead) {
                    prefetch(item);
                }
                let (k, candidates) = &mut live[j];
                let BatchKey { key, hash } = batch[*k as usize];
                let before = *candidates;
                let maybe = RibbonProbe::first_maybe(ribbons, candidates, hash);
                tally.filters_asked(before ^ *candidates, maybe.is_some());
                if let Some(t) = maybe {
                    let table = l0[t].table()?;
                    let block = table.inner.index.find(key);
                    // As `Table::read_hit_at`: a learned negative spares the block, and
                    // the key goes on to its next table.
                    let skip = table
                        .learned()
                        .is_some_and(|(learned, id)| learned.skips(id, block, hash));
                    if !skip {
                        reads.push((t as u32, block, *k));
                    }
                }
            }
            // Newest table first, each table's keys by block: one lookup per block.
            reads.sort_unstable();
            located.clear();
            located.extend(reads.iter().map(|&(_, i, k)| (i, k)));
            fetched.clear();
            let mut hinted = false;
            let mut start = 0;
            while start < reads.len() {
                let t = reads[start].0;
                let end = start + reads[start..].partition_point(|r| r.0 == t);
                let table = l0[t as usize].table()?;
                table.fetch_located(&located[start..end], start, t, batch_tally, &mut fetched)?;
                // Meeting the device: the blocks the round's later tables need are
                // hinted at once, so their reads overlap these (see `multi_get`).
                if !hinted && batch_tally.cache_misses > 0 {
                    hinted = true;
                    self.hint_l0_reads(&reads[end..]);
                }
                start = end;
            }
            prefetch_fetched(batch, &located, &fetched, &mut starts);
            for f in fetched.drain(..) {
                let table = l0[f.table as usize].table()?;
                table.search_fetched(
                    batch,
                    &located,
                    &starts,
                    f,
                    read_seq,
                    tally,
                    batch_tally,
                    found,
                )?;
            }
            live.retain(|&(k, candidates)| found[k as usize].is_none() && candidates != 0);
        }
        pending.retain(|&k| found[k as usize].is_none());
        Ok(())
    }

    /// Hints the uncached blocks of `reads` ((table, block, key) as
    /// `multi_get_l0_ribbons` makes them, sorted) to the OS, table by table.
    fn hint_l0_reads(&self, reads: &[(u32, usize, u32)]) {
        let l0 = &self.levels[0];
        let mut located = Vec::new();
        for (n, r) in reads.iter().enumerate() {
            located.push((r.1, r.2));
            if reads.get(n + 1).is_none_or(|next| next.0 != r.0) {
                if let Ok(table) = l0[r.0 as usize].table() {
                    table.hint_located(&located);
                }
                located.clear();
            }
        }
    }

    /// Hints the uncached blocks `pending` may need in L0's tables from position
    /// `first` on and in every deeper level (see [`Table::hint_batch`]). A table not
    /// yet open is opened here, as the batch's read of it would; a table that fails to
    /// open gets no hint, and the read that follows reports the failure.
    fn hint_from(&self, batch: &[BatchKey], pending: &[u32], first: usize) {
        for handle in self.levels[0].iter().skip(first) {
            let covered = covered_run(batch, pending, handle);
            if !covered.is_empty() {
                if let Ok(table) = handle.table() {
                    table.hint_batch(batch, &pending[covered]);
                }
            }
        }
        self.hint_deeper(batch, pending, 1);
    }

    /// Hints the uncached blocks `pending` may need on the levels from `first` down.
    fn hint_deeper(&self, batch: &[BatchKey], pending: &[u32], first: usize) {
        for level in self.levels.iter().skip(first.max(1)) {
            for (t, keys) in level_runs(batch, pending, level) {
                if let Ok(table) = level[t].table() {
                    table.hint_batch(batch, &pending[keys]);
                }
            }
        }
    }

    /// All live tables, L0 first.
    pub(crate) fn tables(&self) -> impl Iterator<Item = (usize, &Arc<TableHandle>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(level, tables)| tables.iter().map(move |t| (level, t)))
    }

    /// Bytes of table data on `level`.
    ///
    /// Data blocks only: a level's budget is about its data, so the tree's shape does
    /// not change with the filters its tables carry (a filter allocation changes no
    /// compaction decision, and allocations can be compared on one shape).
    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|t| t.record.data_size).sum()
    }

    /// The deepest level holding any table, or 0.
    pub(crate) fn deepest_nonempty_level(&self) -> usize {
        self.levels.iter().rposition(|l| !l.is_empty()).unwrap_or(0)
    }

    /// Tables of `level` whose ranges intersect `[smallest, largest]`.
    pub(crate) fn overlapping(
        &self,
        level: usize,
        smallest: &[u8],
        largest: &[u8],
    ) -> Vec<Arc<TableHandle>> {
        self.levels[level]
            .iter()
            .filter(|t| t.overlaps(smallest, largest))
            .cloned()
            .collect()
    }

    /// The next version: `removed` tables gone, `added` placed on their levels.
    pub(crate) fn apply(&self, removed: &[u64], added: Vec<(usize, Arc<TableHandle>)>) -> Version {
        let mut levels: Vec<Vec<Arc<TableHandle>>> = self
            .levels
            .iter()
            .map(|tables| {
                tables
                    .iter()
                    .filter(|t| !removed.contains(&t.number))
                    .cloned()
                    .collect()
            })
            .collect();
        for (level, handle) in added {
            levels[level].push(handle);
        }
        levels[0].sort_by_key(|t| std::cmp::Reverse(t.number));
        for tables in &mut levels[1..] {
            tables.sort_by(|a, b| a.smallest().cmp(b.smallest()));
        }
        let l0_bounds = L0Bounds::new(&levels[0]);
        Version { levels, l0_bounds }
    }
}

/// The positions of `pending` (sorted by key) that fall within `handle`'s key range.
fn covered_run(batch: &[BatchKey], pending: &[u32], handle: &TableHandle) -> Range<usize> {
    let key = |k: &u32| batch[*k as usize].key;
    let lo = pending.partition_point(|k| keycmp::less(key(k), handle.smallest()));
    let hi = lo + pending[lo..].partition_point(|k| !keycmp::less(handle.largest(), key(k)));
    lo..hi
}

/// The tables of one sorted, disjoint `level` that `pending` (sorted by key) meets,
/// each with the positions of the keys it covers: the keys are walked, each time to
/// the table that may hold the next one, which takes the keys up to its largest.
fn level_runs(
    batch: &[BatchKey],
    pending: &[u32],
    level: &[Arc<TableHandle>],
) -> Vec<(usize, Range<usize>)> {
    let key = |k: &u32| batch[*k as usize].key;
    let mut runs = Vec::new();
    let mut start = 0;
    while let Some(first) = pending.get(start) {
        let t = level.partition_point(|h| keycmp::less(h.largest(), key(first)));
        let Some(handle) = level.get(t) else {
            break; // past the level's last key
        };
        let hi =
            start + pending[start..].partition_point(|k| !keycmp::less(handle.largest(), key(k)));
        let lo =
            start + pending[start..hi].partition_point(|k| keycmp::less(key(k), handle.smallest()));
        if lo < hi {
            runs.push((t, lo..hi));
        }
        start = hi;
    }
    runs
}

#[cfg(test)]
mod tests {
    use bloomkv_filter::{FilterPolicy, RibbonPolicy};

    use super::*;
    use crate::sstable::test_util::{build, path, MemFile, TestEntry};
    use crate::sstable::TableOptions;
    use crate::stats::Counters;
    use crate::types::{ValueKind, READ_LATEST};
    use bytes::Bytes;

    /// A range tombstone in a newer L0 table hides a key of an older one whose Ribbon
    /// filter says "maybe" (it holds the key) while the newer table's filter says "no"
    /// (it holds no entry for it): the side-by-side Ribbon walk, which would skip the
    /// newer table on its filter's "no", must stop at such a table and let its
    /// tombstone answer.
    #[test]
    fn a_range_tombstone_in_l0_hides_a_key_below_it_despite_the_ribbon_walk() {
        use crate::range_del::{Fragments, RangeTombstone};
        use crate::sstable::test_util::MemWritable;
        use crate::sstable::TableBuilder;
        let policy: Arc<dyn FilterPolicy> = Arc::new(RibbonPolicy::new(5.0).unwrap());
        let options = TableOptions {
            filter_policy: Some(policy.clone()),
            ..TableOptions::default()
        };
        let key = |i: u32| format!("key{i:06}").into_bytes();
        let open = |data: Vec<u8>, number: u64| {
            let table = Table::open(
                MemFile::new(data),
                path(),
                Arc::new(Counters::default()),
                std::slice::from_ref(&policy),
            )
            .unwrap();
            assert_eq!(table.filter_info().unwrap().layout, "ribbon");
            (0, Arc::new(TableHandle::opened(number, table)))
        };
        // Older: every even key. Newer: the odd keys, and a tombstone over 1000..2000.
        let older: Vec<TestEntry> = (0..3000)
            .map(|i| (key(2 * i), 1, ValueKind::Put, b"old".to_vec()))
            .collect();
        let (old_data, _) = build(&older, options.clone());
        let file = MemWritable::default();
        let mut b = TableBuilder::new(Box::new(file.clone()), path(), options.clone());
        for i in 0..3000 {
            b.add(&key(2 * i + 1), 2, ValueKind::Put, b"new").unwrap();
        }
        b.set_range_dels(Fragments::new([RangeTombstone {
            start: Bytes::from(key(1000)),
            end: Bytes::from(key(2000)),
            seq: 3,
        }]));
        b.finish().unwrap();
        let new_data = file.data.lock().unwrap().clone();
        let version = Version::empty().apply(&[], vec![open(new_data, 2), open(old_data, 1)]);
        // The side-by-side walk is used, knowing which table holds tombstones.
        let ribbons = version.l0_bounds.ribbons(version.level(0));
        assert_eq!((ribbons.probes.len(), ribbons.range_dels), (2, 0b01));
        for i in 0..6000 {
            let k = key(i);
            let mut tally = ReadTally::default();
            let got = version
                .get(&k, KeyHash::of(&k), READ_LATEST, &mut tally)
                .unwrap()
                .and_then(Hit::live_value);
            let hidden = (1000..2000).contains(&i);
            assert_eq!(got.is_some(), !hidden, "key {i}");
            assert_eq!(tally.range_del_answers, u64::from(hidden), "key {i}");
        }
        // A batch answers as the gets do: the tombstone hides the older table's keys.
        let keys: Vec<Vec<u8>> = (0..6000).map(key).collect();
        let (found, tally) = batch_get(&version, &keys, READ_LATEST);
        for (i, hit) in found.into_iter().enumerate() {
            let hidden = (1000..2000).contains(&i);
            assert_eq!(
                hit.and_then(Hit::live_value).is_some(),
                !hidden,
                "batch key {i}"
            );
        }
        assert_eq!(tally.range_del_answers, 1000);
    }

    /// Six overlapping L0 tables with Ribbon filters of few bits per key (many false
    /// positives): every twelfth key in all of them, the newest holding the answer.
    /// `keys` asked of `version` as one batch at `read_seq`: each key's answer, in
    /// order, and the batch's tally.
    fn batch_get(
        version: &Version,
        keys: &[Vec<u8>],
        read_seq: SeqNo,
    ) -> (Vec<Option<Hit>>, ReadTally) {
        let batch: Vec<BatchKey> = keys
            .iter()
            .map(|k| BatchKey {
                key: k,
                hash: KeyHash::of(k),
            })
            .collect();
        let mut found = vec![None; batch.len()];
        let (mut tally, mut batch_tally) = (ReadTally::default(), BatchTally::default());
        let pending = (0..batch.len() as u32).collect();
        version
            .multi_get(
                &batch,
                pending,
                read_seq,
                &mut tally,
                &mut batch_tally,
                &mut found,
            )
            .unwrap();
        (found, tally)
    }

    fn six_ribbon_tables() -> Version {
        let policy: Arc<dyn FilterPolicy> = Arc::new(RibbonPolicy::new(5.0).unwrap());
        let options = TableOptions {
            filter_policy: Some(policy.clone()),
            ..TableOptions::default()
        };
        let key = |i: u32| format!("key{i:06}").into_bytes();
        let tables: Vec<(usize, Arc<TableHandle>)> = (0..6u32)
            .map(|t| {
                let entries: Vec<TestEntry> = (t * 1_000..t * 1_000 + 9_000)
                    .filter(|i| i % 6 == t || i % 12 == 0)
                    .map(|i| (key(2 * i), u64::from(t) + 1, ValueKind::Put, vec![t as u8]))
                    .collect();
                let (data, _) = build(&entries, options.clone());
                let file = MemFile::new(data);
                let counters = Arc::new(Counters::default());
                let table =
                    Table::open(file, path(), counters, std::slice::from_ref(&policy)).unwrap();
                assert_eq!(table.filter_info().unwrap().layout, "ribbon");
                let number = u64::from(t) + 1;
                (0, Arc::new(TableHandle::opened(number, table)))
            })
            .collect();
        Version::empty().apply(&[], tables)
    }

    /// A batch over L0 tables that all have Ribbon filters goes key by key in rounds
    /// (`multi_get_l0_ribbons`): a key whose first "maybe" was false goes on in the
    /// next round. Its answers and its tally must be a loop of gets', whatever the
    /// keys' order, with keys asked twice, and at a snapshot's sequence number too.
    #[test]
    fn a_batch_over_ribbon_l0_answers_and_tallies_as_a_loop_of_gets() {
        let version = six_ribbon_tables();
        assert_eq!(version.l0_bounds.ribbons(version.level(0)).probes.len(), 6);
        let key = |i: u32| format!("key{i:06}").into_bytes();
        // Unsorted, present and absent, within and outside the tables' ranges, and a
        // repeat of each tenth key; fixed by a multiplicative step over 0..28,100.
        let mut keys: Vec<Vec<u8>> = (0..3_000u32).map(|n| key(n * 7_919 % 28_100)).collect();
        keys.extend((0..300u32).map(|n| key(n * 70_790 % 28_100)));
        for read_seq in [READ_LATEST, 3] {
            let (found, tally) = batch_get(&version, &keys, read_seq);
            let mut want_tally = ReadTally::default();
            // Keys that met a false "maybe" and went on to a later round.
            let mut false_maybes = 0;
            for (k, got) in keys.iter().zip(&found) {
                let before = want_tally;
                let want = version
                    .get(k, KeyHash::of(k), read_seq, &mut want_tally)
                    .unwrap();
                assert_eq!(got, &want, "{}", String::from_utf8_lossy(k));
                let true_positives =
                    want_tally.filter_true_positives - before.filter_true_positives;
                let positives = want_tally.filter_positives - before.filter_positives;
                false_maybes += usize::from(positives > true_positives);
            }
            assert_eq!(tally, want_tally, "read_seq {read_seq}");
            assert!(found.iter().flatten().count() > 500);
            assert!(false_maybes > 50, "{false_maybes}");
        }
    }

    /// With a Ribbon filter in every L0 table, a get asks the filters side by side
    /// (`RibbonProbe`); it must answer, and tally, as asking each table through its
    /// own reader, newest first, does.
    #[test]
    fn ribbon_l0_answers_and_tallies_as_table_by_table() {
        let key = |i: u32| format!("key{i:06}").into_bytes();
        let version = six_ribbon_tables();
        assert_eq!(version.l0_bounds.ribbons(version.level(0)).probes.len(), 6);
        let (mut found, mut read) = (0, 0);
        for i in 0..28_100 {
            let k = key(i);
            let hash = KeyHash::of(&k);
            let mut fast = ReadTally::default();
            let got = version.get(&k, hash, READ_LATEST, &mut fast).unwrap();
            let mut slow = ReadTally::default();
            let want = version
                .level(0)
                .iter()
                .filter(|h| h.covers(&k))
                .find_map(|h| {
                    h.table()
                        .unwrap()
                        .probe_hit_at(&k, hash, READ_LATEST, &mut slow)
                        .unwrap()
                });
            assert_eq!(got, want, "key {i}");
            assert_eq!(fast, slow, "key {i}");
            found += usize::from(got.is_some());
            read += fast.filter_positives - fast.filter_true_positives;
        }
        assert!(found > 5_000, "{found}");
        assert!(read > 1_000, "{read} false positives");
    }
}
