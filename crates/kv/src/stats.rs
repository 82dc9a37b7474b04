//! Counters of what the read path decided and what it read.
//!
//! Names mirror RocksDB's tickers so results compare directly:
//!
//! | counter | RocksDB ticker | meaning |
//! |---|---|---|
//! | `filter_negatives` | `BLOOM_FILTER_USEFUL` | filter said "absent": a data-block read avoided |
//! | `filter_positives` | `BLOOM_FILTER_FULL_POSITIVE` | filter said "maybe" |
//! | `filter_true_positives` | `BLOOM_FILTER_FULL_TRUE_POSITIVE` | ...and the table held the key (in any version) |
//! | `data_block_reads` | `BLOCK_CACHE_MISS`-ish | positioned reads of table files |
//! | `block_cache_hits` | `BLOCK_CACHE_DATA_HIT` | data blocks served from memory |
//! | `block_cache_misses` | `BLOCK_CACHE_DATA_MISS` | data blocks the cache lacked |
//! | `multi_gets`, `multi_get_keys` | `NUMBER_MULTIGET_CALLS`, `..._KEYS_READ` | batches, and the keys they asked |
//!
//! Each counter is bumped on the line that makes the decision it counts. The observed
//! false-positive rate is `(positives - true_positives) / (positives - true_positives +
//! negatives)`.
//!
//! The hot counters are striped per thread (see [`Counters`]): a `get` writes only
//! cache lines its own thread owns, so readers on several cores do not slow each
//! other down through the counters.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::Serialize;

use crate::types::NUM_LEVELS;

/// How many stripes the read path's counters are split into. Threads take stripes
/// round robin as they first count something, so up to this many threads each count
/// into cache lines of their own.
pub const COUNTER_STRIPES: usize = 16;

/// Live counters, shared by every table of one store. Relaxed atomics: they are
/// statistics, not synchronisation.
///
/// The counters every `get` touches live in [`COUNTER_STRIPES`] cache-line-aligned
/// [`Stripe`]s; a thread adds to its own stripe only, so two threads reading at once
/// never write the same cache line, and [`Counters::snapshot`] sums the stripes. The
/// sum is exact: every addition is an atomic add to one stripe, none is ever lost.
///
/// ```text
///   Counters
///   +-----------+-----------+-----+------------+   cold counters (stalls, WAL,
///   | stripe 0  | stripe 1  | ... | stripe 15  |   corrupt filters): one each
///   | gets, ... | gets, ... |     | gets, ...  |
///   +-----------+-----------+-----+------------+
///     thread A    thread B          thread P (A + 16 ...)
/// ```
#[derive(Debug, Default)]
pub struct Counters {
    stripes: Box<[Stripe; COUNTER_STRIPES]>,
    /// Filter blocks that failed validation and were ignored (tables read without them).
    pub filter_corrupt: AtomicU64,
    /// Tables opened without their filter because no known policy has the name the
    /// table recorded.
    pub filter_unknown_policy: AtomicU64,
    /// Range filter blocks that failed validation and were ignored (scans read those
    /// tables).
    pub range_filter_corrupt: AtomicU64,
    /// Writes that waited for background work (L0 slowdown or stop, or a full set of
    /// frozen memtables).
    pub write_stalls: AtomicU64,
    /// Microseconds those writes spent waiting.
    pub write_stall_micros: AtomicU64,
    /// WAL bytes the last open did not replay (see `RecoveryReport`).
    pub wal_tail_bytes_dropped: AtomicU64,
    /// Bytes of L0 tables written by memtable flushes.
    pub flush_bytes_written: AtomicU64,
    /// Compactions finished.
    pub compactions: AtomicU64,
    /// Bytes of input tables compactions merged.
    pub compaction_bytes_read: AtomicU64,
    /// Bytes of tables compactions wrote.
    pub compaction_bytes_written: AtomicU64,
    /// How long the `Db::open` that made this store's handle took, in microseconds.
    pub open_micros: AtomicU64,
    /// A running average of how long a batch's block reads took, in nanoseconds
    /// (0: none yet). Not a figure for users: it decides whether a batch tells the OS
    /// about its reads ahead of time (`sstable/file.rs`, `ReadAhead`).
    pub batch_read_nanos: AtomicU64,
    /// `PROBES` files ignored as damaged, or not written (see `probe_stats.rs`).
    pub probe_stats_damaged: AtomicU64,
    /// Filters released to keep `Options::filter_memory_budget` (`filter_budget.rs`).
    pub filters_released: AtomicU64,
    /// Index and filter partitions the metadata cache held (`Options::metadata_budget`).
    pub metadata_cache_hits: AtomicU64,
    /// Index and filter partitions the metadata cache lacked: each became a read.
    pub metadata_cache_misses: AtomicU64,
    /// Filter partitions that could not be read or opened: their keys were read from
    /// their data blocks instead (fail open, never a false negative).
    pub metadata_partition_failures: AtomicU64,
    /// Probes of partitioned tables that the coarse filter turned away, no partition
    /// needed.
    pub coarse_filter_negatives: AtomicU64,
    /// The store's learned negatives (`Options::learned_memory`; unset: none).
    pub(crate) learned: std::sync::OnceLock<crate::learned::LearnedNegatives>,
}

/// One thread's share of the read path's counters, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Stripe {
    /// `get` calls.
    pub gets: AtomicU64,
    /// `get`s answered by a memtable (value or tombstone).
    pub memtable_hits: AtomicU64,
    /// Lookups a table's range tombstone answered "deleted".
    pub range_del_answers: AtomicU64,
    /// Tables whose key range covered a looked-up key.
    pub table_probes: AtomicU64,
    /// Filter consultations.
    pub filter_checks: AtomicU64,
    /// Filter said "absent": the read it saved.
    pub filter_negatives: AtomicU64,
    /// Filter said "maybe".
    pub filter_positives: AtomicU64,
    /// Filter said "maybe" and the table held the key.
    pub filter_true_positives: AtomicU64,
    /// Positioned reads of table files (one per syscall).
    pub data_block_reads: AtomicU64,
    /// Bytes those reads returned.
    pub bytes_read: AtomicU64,
    /// Prefix-filter consultations by prefix scans (tables whose filter holds the
    /// store's extractor's prefixes).
    pub prefix_checks: AtomicU64,
    /// Prefix filter said "no key with this prefix": a table skipped by a scan, unread.
    pub prefix_negatives: AtomicU64,
    /// Range-filter consultations by scans with both bounds set.
    pub range_filter_checks: AtomicU64,
    /// Range filter said "no key in this range": a table skipped by a scan, unread.
    pub range_filter_negatives: AtomicU64,
    /// Data blocks served from the block cache.
    pub block_cache_hits: AtomicU64,
    /// Data blocks the block cache did not hold (each then read from the file).
    pub block_cache_misses: AtomicU64,
    /// `multi_get` calls.
    pub multi_gets: AtomicU64,
    /// Keys those calls asked for (each also counted in `gets`).
    pub multi_get_keys: AtomicU64,
    /// Data blocks a batch looked up once for several of its keys.
    pub multi_get_shared_blocks: AtomicU64,
    /// Block lookups (cache lookups or reads) a loop of gets would have made and the
    /// batches did not: for each shared block, the keys it served beyond the first.
    pub multi_get_lookups_saved: AtomicU64,
    /// Data-block reads a batch issued together, their device reads overlapped.
    pub multi_get_overlapped_reads: AtomicU64,
    /// Table reads made through io_uring (each also one of `data_block_reads`).
    pub uring_reads: AtomicU64,
    /// The read path's decisions, level by level.
    pub levels: [LevelCounters; NUM_LEVELS],
}

/// The stripe this thread counts into: taken round robin at the thread's first count.
#[inline]
fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % COUNTER_STRIPES;
    }
    INDEX.with(|i| *i)
}

impl Counters {
    /// This thread's stripe: where its counts go.
    #[inline]
    pub fn local(&self) -> &Stripe {
        &self.stripes[stripe_index()]
    }

    /// The sum of one counter over all stripes.
    fn sum(&self, field: impl Fn(&Stripe) -> &AtomicU64) -> u64 {
        self.sum_with(field, Ordering::Relaxed)
    }

    /// [`Self::sum`] with each stripe's counter loaded with `order`.
    fn sum_with(&self, field: impl Fn(&Stripe) -> &AtomicU64, order: Ordering) -> u64 {
        self.stripes.iter().map(|s| field(s).load(order)).sum()
    }
}

/// Adds one to a counter.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n` to a counter.
#[inline]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// The read path's decisions during one lookup, tallied in plain integers and added to
/// the shared [`Counters`] once per `get`: ten tables' worth of decisions then cost
/// five atomic additions instead of thirty.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadTally {
    /// Tables whose key range covered the key.
    pub table_probes: u64,
    /// Filter consultations.
    pub filter_checks: u64,
    /// Filter said "absent".
    pub filter_negatives: u64,
    /// Filter said "maybe".
    pub filter_positives: u64,
    /// Filter said "maybe" and the table held the key.
    pub filter_true_positives: u64,
    /// The same decisions, level by level (L0 first).
    pub levels: [LevelTally; NUM_LEVELS],
    /// Lookups a table's range tombstone answered "deleted" (no older table asked).
    pub range_del_answers: u64,
}

/// One level's share of a lookup's decisions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LevelTally {
    /// Tables of the level whose key range covered the key.
    pub table_probes: u32,
    /// Filter said "absent".
    pub filter_negatives: u32,
    /// Filter said "maybe".
    pub filter_positives: u32,
    /// Filter said "maybe" and the table held the key.
    pub filter_true_positives: u32,
}

impl ReadTally {
    /// Where the tally stands, to attribute what follows to one level.
    #[inline]
    pub(crate) fn mark(&self) -> [u64; 4] {
        [
            self.table_probes,
            self.filter_negatives,
            self.filter_positives,
            self.filter_true_positives,
        ]
    }

    /// The tables in the mask `asked` were probed and their filters asked: all said
    /// "absent" but the last, which said "maybe" if `last_maybe`.
    #[inline]
    pub(crate) fn filters_asked(&mut self, asked: u64, last_maybe: bool) {
        let n = u64::from(asked.count_ones());
        let maybe = u64::from(last_maybe);
        self.table_probes += n;
        self.filter_checks += n;
        self.filter_positives += maybe;
        self.filter_negatives += n - maybe;
    }

    /// Attributes everything since `mark` to `level`.
    #[inline]
    pub(crate) fn close_level(&mut self, level: usize, mark: [u64; 4]) {
        if self.table_probes == mark[0] {
            return;
        }
        let l = &mut self.levels[level];
        l.table_probes += (self.table_probes - mark[0]) as u32;
        l.filter_negatives += (self.filter_negatives - mark[1]) as u32;
        l.filter_positives += (self.filter_positives - mark[2]) as u32;
        l.filter_true_positives += (self.filter_true_positives - mark[3]) as u32;
    }
}

/// Live per-level counters.
#[derive(Debug, Default)]
pub struct LevelCounters {
    /// Tables of the level whose key range covered a looked-up key.
    pub table_probes: AtomicU64,
    /// Filter said "absent".
    pub filter_negatives: AtomicU64,
    /// Filter said "maybe".
    pub filter_positives: AtomicU64,
    /// Filter said "maybe" and the key was there.
    pub filter_true_positives: AtomicU64,
}

/// One level's counters in a [`DbStats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LevelStats {
    /// Tables of the level whose key range covered a looked-up key.
    pub table_probes: u64,
    /// Filter said "absent" (reads avoided on this level).
    pub filter_negatives: u64,
    /// Filter said "maybe" (each cost one data-block read).
    pub filter_positives: u64,
    /// Filter said "maybe" and the key was there.
    pub filter_true_positives: u64,
}

impl LevelStats {
    /// Observed false-positive rate of this level's filters, or 0 if none was asked
    /// about an absent key.
    pub fn observed_fp_rate(&self) -> f64 {
        let fp = self
            .filter_positives
            .saturating_sub(self.filter_true_positives);
        let absent = fp + self.filter_negatives;
        if absent == 0 {
            0.0
        } else {
            fp as f64 / absent as f64
        }
    }
}

impl Counters {
    /// Adds a lookup's tally to this thread's stripe of the counters.
    pub fn add_tally(&self, t: &ReadTally) {
        let s = self.local();
        // The deeper levels' counts first, then the totals (release): a `snapshot` that
        // sees a lookup's totals (acquire) sees its per-level counts too, so L0's row,
        // derived as totals minus the deeper levels, never counts another level's
        // probes while lookups run (it can lag instead; exact once they stop).
        for (live, t) in s.levels.iter().zip(&t.levels) {
            if t.table_probes == 0 {
                continue;
            }
            add(&live.table_probes, u64::from(t.table_probes));
            for (counter, n) in [
                (&live.filter_negatives, t.filter_negatives),
                (&live.filter_positives, t.filter_positives),
                (&live.filter_true_positives, t.filter_true_positives),
            ] {
                if n != 0 {
                    add(counter, u64::from(n));
                }
            }
        }
        for (counter, n) in [
            (&s.table_probes, t.table_probes),
            (&s.filter_checks, t.filter_checks),
            (&s.filter_negatives, t.filter_negatives),
            (&s.filter_positives, t.filter_positives),
            (&s.filter_true_positives, t.filter_true_positives),
            (&s.range_del_answers, t.range_del_answers),
        ] {
            if n != 0 {
                counter.fetch_add(n, Ordering::Release);
            }
        }
    }
}

/// A point-in-time copy of the store's counters and shape.
///
/// Each counter is exact: every addition is counted once. A copy taken while gets run
/// reads the counters one after another, so two of them may differ by the gets in
/// flight (a get's `filter_true_positives` may be in while its `filter_positives` is
/// not yet); L0's row may lag behind the totals but never takes another level's counts.
/// Once the gets stop, every sum and difference holds exactly.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DbStats {
    /// `get` calls.
    pub gets: u64,
    /// `get`s answered by a memtable.
    pub memtable_hits: u64,
    /// Tables whose key range covered a looked-up key.
    pub table_probes: u64,
    /// Filter consultations.
    pub filter_checks: u64,
    /// Filter said "absent" (disk reads avoided).
    pub filter_negatives: u64,
    /// Filter said "maybe".
    pub filter_positives: u64,
    /// Filter said "maybe" and the key was there.
    pub filter_true_positives: u64,
    /// Positioned reads of table files.
    pub data_block_reads: u64,
    /// Bytes read from table files.
    pub bytes_read: u64,
    /// Filters ignored because they failed validation.
    pub filter_corrupt: u64,
    /// Tables read without their filter because the policy name they recorded is not
    /// registered (`FilterKind::Custom`, `Options::extra_filter_policies`).
    pub filter_unknown_policy: u64,
    /// Writes that waited for flush or compaction (RocksDB's `STALL_MICROS` family).
    pub write_stalls: u64,
    /// Microseconds writes spent waiting.
    pub write_stall_micros: u64,
    /// Table files held open now (bounded by `Options::max_open_files`).
    pub open_table_files: u64,
    /// The read path's decisions per level, L0 first.
    pub levels: Vec<LevelStats>,
    /// Live tables per level, L0 first.
    pub tables_per_level: Vec<usize>,
    /// Bytes of filter held in memory across the live tables opened so far (a table
    /// is opened by the first read that reaches it, not by `Db::open`).
    pub filter_memory_bytes: u64,
    /// Bytes of index and filter held in memory across the live tables opened so far:
    /// under `Options::metadata_budget`, the partitioned tables' top levels and the
    /// partitions the metadata cache holds.
    pub metadata_bytes: u64,
    /// Of `metadata_bytes`: the index and filter partitions the metadata cache holds
    /// now (at most `Options::metadata_budget`; 0 without one).
    pub metadata_cache_bytes: u64,
    /// Of `metadata_bytes`: the top levels (and coarse filters) of the live
    /// partitioned tables opened so far, which stay in memory while they are open.
    pub metadata_top_level_bytes: u64,
    /// Partitions (index or filter) the metadata cache held when a lookup needed them.
    pub metadata_cache_hits: u64,
    /// Partitions the metadata cache lacked: each became one read (in
    /// `data_block_reads`).
    pub metadata_cache_misses: u64,
    /// Filter partitions that could not be read or opened; the lookups they would have
    /// answered read data blocks instead (fail open: never a false negative).
    pub metadata_partition_failures: u64,
    /// Probes of partitioned tables turned away by the coarse filter each keeps in
    /// memory (each is also one of `filter_negatives`).
    pub coarse_filter_negatives: u64,
    /// Live tables opened so far (their index and filter in memory); the others are
    /// known from the manifest alone.
    pub opened_tables: u64,
    /// WAL bytes that open did not replay: torn tails, and whatever the chosen
    /// `WalRecovery` mode skipped or cut (listed in `Db::recovery_report`).
    pub wal_tail_bytes_dropped: u64,
    /// Tables a prefix scan asked its prefix filter about (RocksDB's
    /// `BLOOM_FILTER_PREFIX_CHECKED`).
    pub prefix_checks: u64,
    /// ...and that the filter ruled out, so the scan skipped them unread
    /// (`BLOOM_FILTER_PREFIX_USEFUL`).
    pub prefix_negatives: u64,
    /// Tables a scan with both bounds set asked its range filter about.
    pub range_filter_checks: u64,
    /// ...and that the range filter ruled out, so the scan skipped them unread.
    pub range_filter_negatives: u64,
    /// Range filter blocks ignored because they failed validation.
    pub range_filter_corrupt: u64,
    /// Data blocks served from the block cache (`BLOCK_CACHE_DATA_HIT`): no read.
    pub block_cache_hits: u64,
    /// Data blocks looked for in the block cache and not found
    /// (`BLOCK_CACHE_DATA_MISS`): each became one read of the table file.
    pub block_cache_misses: u64,
    /// Bytes the block cache holds now (within `Options::block_cache_size`).
    pub block_cache_bytes: u64,
    /// Bytes of L0 tables written by memtable flushes (RocksDB's `FLUSH_WRITE_BYTES`).
    pub flush_bytes_written: u64,
    /// Compactions finished.
    pub compactions: u64,
    /// Bytes of input tables compactions merged (`COMPACT_READ_BYTES`).
    pub compaction_bytes_read: u64,
    /// Bytes of tables compactions wrote (`COMPACT_WRITE_BYTES`). With
    /// `flush_bytes_written` it gives the write amplification: table bytes written per
    /// byte flushed.
    pub compaction_bytes_written: u64,
    /// `multi_get` calls (RocksDB's `NUMBER_MULTIGET_CALLS`).
    pub multi_gets: u64,
    /// Keys those calls asked for (`NUMBER_MULTIGET_KEYS_READ`). Each is also a get in
    /// `gets`, and every per-key counter (memtable hits, filter answers, per level)
    /// counts it exactly as a `get` of that key would.
    pub multi_get_keys: u64,
    /// Data blocks a batch looked up once for several of its keys: one cache lookup or
    /// one read where a loop of gets makes one per key.
    pub multi_get_shared_blocks: u64,
    /// The block lookups those shared blocks saved: the keys each served beyond the
    /// first.
    pub multi_get_lookups_saved: u64,
    /// Data-block reads a batch issued together, their device reads overlapped
    /// (each is also one of `data_block_reads`).
    pub multi_get_overlapped_reads: u64,
    /// Table reads made through io_uring (the `io-uring` feature): each is also one of
    /// `data_block_reads`, but not a read syscall, so the kernel's `syscr` sees
    /// `data_block_reads - uring_reads` of the store's reads. 0 without the feature.
    pub uring_reads: u64,
    /// How long the `Db::open` that made this handle took, in microseconds (manifest,
    /// tables, log replay, and any flush of what the logs held).
    pub open_micros: u64,
    /// Data-block reads skipped because a learned negative showed the table lacks the
    /// key (`Options::learned_memory`): each was a filter's "maybe", counted in
    /// `filter_positives`, that cost no read.
    pub learned_skips: u64,
    /// False positives recorded as learned negatives so far.
    pub learned_recorded: u64,
    /// False positives not recorded because a key of the same block shares the
    /// fingerprint (recording it could hide that key).
    pub learned_refused: u64,
    /// Learned negatives held now.
    pub learned_entries: u64,
    /// Bytes the learned negatives occupy (fixed at open, within
    /// `Options::learned_memory`, or the share `FilterAllocation::Adaptive` gives them).
    pub learned_bytes: u64,
    /// Lookups (of `get` or `multi_get`) answered "deleted" by a range tombstone: no
    /// older table was asked about the key.
    pub range_del_answers: u64,
    /// Range tombstones (fragment and sequence number pairs) held by the memtables and
    /// the live tables opened so far.
    pub range_tombstones: u64,
    /// Probe statistics files (`PROBES`, see `probe_stats.rs`) found damaged at open
    /// and ignored (the store started blind), or that could not be written.
    pub probe_stats_damaged: u64,
    /// Live tables' filters released (let go of from memory) to keep
    /// `Options::filter_memory_budget` for levels under their planned share, since
    /// open (see `filter_budget.rs`); such a table reads a data block per lookup.
    pub filters_released: u64,
}

impl DbStats {
    /// False positives: "maybe" answers for keys the table did not hold.
    pub fn false_positives(&self) -> u64 {
        self.filter_positives
            .saturating_sub(self.filter_true_positives)
    }

    /// Observed false-positive rate over filter checks of absent keys, or 0 if none.
    pub fn observed_fp_rate(&self) -> f64 {
        let fp = self.false_positives();
        let absent = fp + self.filter_negatives;
        if absent == 0 {
            0.0
        } else {
            fp as f64 / absent as f64
        }
    }

    /// Total live tables.
    pub fn num_tables(&self) -> usize {
        self.tables_per_level.iter().sum()
    }
}

impl Counters {
    /// Per-level counters, L0 first. Levels 1.. are counted as lookups meet them; L0's
    /// row is the totals minus the deeper levels (every table probe belongs to some
    /// level), so the common lookup that only meets L0 tables records nothing extra.
    /// Each level's counters, L0's derived as `totals` minus the deeper levels'.
    /// `totals` must be read first, with acquire (see `add_tally`).
    fn level_stats(&self, totals: &LevelStats) -> Vec<LevelStats> {
        let mut levels: Vec<LevelStats> = (0..NUM_LEVELS)
            .map(|l| LevelStats {
                table_probes: self.sum(|s| &s.levels[l].table_probes),
                filter_negatives: self.sum(|s| &s.levels[l].filter_negatives),
                filter_positives: self.sum(|s| &s.levels[l].filter_positives),
                filter_true_positives: self.sum(|s| &s.levels[l].filter_true_positives),
            })
            .collect();
        let deeper = |f: fn(&LevelStats) -> u64, levels: &[LevelStats]| -> u64 {
            levels[1..].iter().map(f).sum()
        };
        let l0 = LevelStats {
            table_probes: totals
                .table_probes
                .saturating_sub(deeper(|l| l.table_probes, &levels)),
            filter_negatives: totals
                .filter_negatives
                .saturating_sub(deeper(|l| l.filter_negatives, &levels)),
            filter_positives: totals
                .filter_positives
                .saturating_sub(deeper(|l| l.filter_positives, &levels)),
            filter_true_positives: totals
                .filter_true_positives
                .saturating_sub(deeper(|l| l.filter_true_positives, &levels)),
        };
        levels[0] = l0;
        levels
    }

    /// Copies the counters, each summed over the stripes (shape fields are filled in
    /// by the store).
    pub fn snapshot(&self) -> DbStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        // The totals L0's row is derived from, read once, before the levels (acquire:
        // see `add_tally`), so the copy's totals and its levels agree.
        let total = |field: fn(&Stripe) -> &AtomicU64| self.sum_with(field, Ordering::Acquire);
        let totals = LevelStats {
            table_probes: total(|s| &s.table_probes),
            filter_negatives: total(|s| &s.filter_negatives),
            filter_positives: total(|s| &s.filter_positives),
            filter_true_positives: total(|s| &s.filter_true_positives),
        };
        let learned = self.learned.get().map(|l| l.stats()).unwrap_or_default();
        DbStats {
            gets: self.sum(|s| &s.gets),
            memtable_hits: self.sum(|s| &s.memtable_hits),
            table_probes: totals.table_probes,
            filter_checks: self.sum(|s| &s.filter_checks),
            filter_negatives: totals.filter_negatives,
            filter_positives: totals.filter_positives,
            filter_true_positives: totals.filter_true_positives,
            data_block_reads: self.sum(|s| &s.data_block_reads),
            bytes_read: self.sum(|s| &s.bytes_read),
            filter_corrupt: get(&self.filter_corrupt),
            filter_unknown_policy: get(&self.filter_unknown_policy),
            write_stalls: get(&self.write_stalls),
            write_stall_micros: get(&self.write_stall_micros),
            open_table_files: 0,
            levels: self.level_stats(&totals),
            tables_per_level: Vec::new(),
            filter_memory_bytes: 0,
            metadata_bytes: 0,
            metadata_cache_bytes: 0,
            metadata_top_level_bytes: 0,
            metadata_cache_hits: get(&self.metadata_cache_hits),
            metadata_cache_misses: get(&self.metadata_cache_misses),
            metadata_partition_failures: get(&self.metadata_partition_failures),
            coarse_filter_negatives: get(&self.coarse_filter_negatives),
            opened_tables: 0,
            wal_tail_bytes_dropped: get(&self.wal_tail_bytes_dropped),
            prefix_checks: self.sum(|s| &s.prefix_checks),
            prefix_negatives: self.sum(|s| &s.prefix_negatives),
            range_filter_checks: self.sum(|s| &s.range_filter_checks),
            range_filter_negatives: self.sum(|s| &s.range_filter_negatives),
            range_filter_corrupt: get(&self.range_filter_corrupt),
            block_cache_hits: self.sum(|s| &s.block_cache_hits),
            block_cache_misses: self.sum(|s| &s.block_cache_misses),
            block_cache_bytes: 0,
            flush_bytes_written: get(&self.flush_bytes_written),
            compactions: get(&self.compactions),
            compaction_bytes_read: get(&self.compaction_bytes_read),
            compaction_bytes_written: get(&self.compaction_bytes_written),
            multi_gets: self.sum(|s| &s.multi_gets),
            multi_get_keys: self.sum(|s| &s.multi_get_keys),
            multi_get_shared_blocks: self.sum(|s| &s.multi_get_shared_blocks),
            multi_get_lookups_saved: self.sum(|s| &s.multi_get_lookups_saved),
            multi_get_overlapped_reads: self.sum(|s| &s.multi_get_overlapped_reads),
            uring_reads: self.sum(|s| &s.uring_reads),
            open_micros: get(&self.open_micros),
            learned_skips: learned.skips,
            learned_recorded: learned.learned,
            learned_refused: learned.refused,
            learned_entries: learned.entries,
            learned_bytes: learned.bytes,
            range_del_answers: self.sum(|s| &s.range_del_answers),
            range_tombstones: 0,
            probe_stats_damaged: get(&self.probe_stats_damaged),
            filters_released: get(&self.filters_released),
        }
    }
}
