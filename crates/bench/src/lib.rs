//! The disk-I/O savings benchmark: how many table reads a Bloom filter block saves.
//!
//! The workload, the same for every store it runs on:
//!
//! 1. Load `keys` keys (`key{2i:016}`, `value_size`-byte values) in a shuffled order
//!    into `tables` tables with compaction held off, so every table spans the whole key
//!    range and its key-range check cannot rule out any lookup.
//! 2. Reopen the store, so every table is opened from disk (index and filter loaded).
//! 3. `lookups` gets of absent keys (`key{2i+1:016}`: between two present keys), then
//!    `lookups` gets of present keys, each phase measured on its own: the store's
//!    counters, the OS's read syscalls, and the wall clock.
//!
//! Then, on bloomkv only, the prefix-scan phases (`prefix.rs`): the same flat shape with
//! keys in prefix groups, prefix scans of absent and present prefixes with and without
//! a prefix extractor, point gets with a snapshot held, and full scans both ways.
//! With `--range-scans N`, the range-scan phases (`range.rs`): short empty and
//! non-empty range scans over the same flat shape, with and without a range filter.
//!
//! The workload talks to a store only through [`BenchStore`], so the very same code
//! runs on bloomkv without a filter, with each Bloom layout, and on peer stores.
//!
//! A crate of its own (not published): the `bloomkv` command line (`bloomkv bench`,
//! re-exported as `bloomkv::bench` under its `cli` feature) and `bloomkv-peers` run it;
//! an application that embeds bloomkv does not compile it.

mod chart;
mod flags;
mod leveled;
mod multi_get;
mod no_sync;
mod os_io;
mod prefix;
mod provenance;
mod range;
mod report;
mod run;
mod scale;
mod store;
pub mod zipf;

use std::error::Error as StdError;
use std::path::PathBuf;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

pub use chart::{render_leveled_svg, render_range_svg, render_savings_svg, render_sweep_svg};
pub use leveled::{
    print_leveled, run_leveled, Allocation, AllocationRun, LevelRow, LeveledRow, LeveledSettings,
};
pub use multi_get::{multi_get_rows, run_multi_get_phase, run_store_batched, MAX_BATCH};
pub use no_sync::NoSyncFs;
pub use os_io::{OsIo, OsReads};
pub use prefix::{print_prefix_table, run_prefix_phases, PrefixRow, VersionTimes, VERSION_ROUNDS};
pub use provenance::Provenance;
pub use range::{
    print_range_table, run_range_phases, time_range_filter, RangeFilterTimes, RangeRow,
    RANGE_LENGTHS,
};
pub use report::{print_learning, print_table, Machine, Report, Row, SweepPoint};
pub use run::{
    check_lookups, os_read_disagreements, print_disk_bytes, run, run_stores, Bar, BenchArgs,
    MAX_COUNT, MAX_VALUE_SIZE,
};
pub use scale::{
    drop_dir_from_page_cache, print_scale, probe_fresh, run_scale, run_scale_with, scale_options,
    FreshProcess, GetFigures, ScaleRow, COLD_GETS, LOAD_BATCH, PROBE_COMMAND, RSS_HEADROOM,
};
pub use store::{levels_of, BloomkvStore, FilterSetting};

/// Errors the benchmark passes through from the store under test.
pub type BenchError = Box<dyn StdError + Send + Sync>;

/// What a store reports about the filters of its tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct FilterShape {
    /// Total filter bits over all tables (0 without filters).
    pub bits: u64,
    /// Keys the filters were built over.
    pub keys: u64,
    /// The false-positive rate the formula predicts for those bits, keys and probes,
    /// averaged over tables (every absent lookup probes every table).
    pub formula_fp: f64,
    /// Probes per key.
    pub probes: u32,
}

impl FilterShape {
    /// The shape of several tables' filters, given each table's `(bits, keys)`: totals,
    /// and the rate `fp(bits, keys)` averaged over tables (every absent lookup probes
    /// every table). Empty `tables` give the default (no filter).
    pub fn from_tables(tables: &[(u64, u64)], probes: u32, fp: impl Fn(u64, u64) -> f64) -> Self {
        if tables.is_empty() {
            return FilterShape::default();
        }
        FilterShape {
            bits: tables.iter().map(|t| t.0).sum(),
            keys: tables.iter().map(|t| t.1).sum(),
            formula_fp: tables.iter().map(|&(m, n)| fp(m, n)).sum::<f64>() / tables.len() as f64,
            probes,
        }
    }
}

/// Counters a store keeps about its read path. `None` where a store does not count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StoreCounters {
    /// Tables whose key range covered a lookup.
    pub table_probes: Option<u64>,
    /// Filter said "absent": reads avoided.
    pub filter_negatives: Option<u64>,
    /// Filter said "maybe".
    pub filter_positives: Option<u64>,
    /// "Maybe" for a key the table held.
    pub filter_true_positives: Option<u64>,
    /// Reads of table files.
    pub data_block_reads: Option<u64>,
    /// Data blocks served from the store's block cache (no read).
    pub block_cache_hits: Option<u64>,
}

impl StoreCounters {
    fn minus(self, before: StoreCounters) -> StoreCounters {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        StoreCounters {
            table_probes: d(self.table_probes, before.table_probes),
            filter_negatives: d(self.filter_negatives, before.filter_negatives),
            filter_positives: d(self.filter_positives, before.filter_positives),
            filter_true_positives: d(self.filter_true_positives, before.filter_true_positives),
            data_block_reads: d(self.data_block_reads, before.data_block_reads),
            block_cache_hits: d(self.block_cache_hits, before.block_cache_hits),
        }
    }
}

/// A store the workload can drive; `Sync`, so that several threads can look keys up at
/// once.
pub trait BenchStore: Sync {
    /// The row label: which store and which filter.
    fn label(&self) -> String;
    /// Writes one key.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError>;
    /// Ends the current table (flushes the memtable into a table of its own).
    fn end_table(&mut self) -> Result<(), BenchError>;
    /// Closes and reopens the store from disk.
    fn reopen(&mut self) -> Result<(), BenchError>;
    /// Looks a key up; `true` if found.
    fn get(&self, key: &[u8]) -> Result<bool, BenchError>;
    /// Looks a batch of keys up at once (`--multi-get`); the number found. The default
    /// is a loop of [`get`](Self::get)s, for a store without a batched lookup.
    fn multi_get(&self, keys: &[[u8; KEY_LEN]]) -> Result<u64, BenchError> {
        keys.iter()
            .try_fold(0, |found, k| Ok(found + u64::from(self.get(k)?)))
    }
    /// The read-path counters so far.
    fn counters(&self) -> StoreCounters;
    /// The filters' size and predicted false-positive rate.
    fn filter_shape(&self) -> FilterShape;
    /// Number of tables lookups face.
    fn tables(&self) -> usize;
    /// Asks the OS to drop the store's table files from its page cache.
    fn drop_caches(&self);
    /// Bytes of the store's table files on disk, if the store can tell.
    fn disk_bytes(&self) -> Option<u64> {
        None
    }
    /// Bytes of index and filter the store holds in memory now, if it can tell.
    fn metadata_bytes(&self) -> Option<u64> {
        None
    }
    /// Table reads so far made through io_uring, which the OS's read-syscall count
    /// does not see (bloomkv built with its `io-uring` feature); `None` where a store
    /// does not count them.
    fn uring_reads(&self) -> Option<u64> {
        None
    }
    /// The store's learned negatives so far; `None` where a store keeps none.
    fn learned(&self) -> Option<LearnedFigures> {
        None
    }
}

/// The workload's parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    /// Keys loaded.
    pub keys: u64,
    /// Tables they are spread over.
    pub tables: u32,
    /// Lookups per phase.
    pub lookups: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Filter bits per key.
    pub bits_per_key: f64,
    /// Drop table files from the page cache before each phase.
    pub cold: bool,
    /// Seed of the load order and the lookup keys.
    pub seed: u64,
    /// Threads running each lookup phase at once.
    pub threads: usize,
    /// MiB of block cache bloomkv's stores get.
    pub cache_mib: usize,
    /// Block compression of bloomkv's stores: `"none"` or `"lz4"`.
    pub compression: String,
    /// Whether bloomkv's uncompressed data blocks are page-aligned
    /// (`Options::block_align`; on by default, as in the store).
    pub block_align: bool,
    /// How the absent lookups pick their ids: `None`, uniformly (the default);
    /// `Some(θ)`, from a Zipfian of skew θ over the absent ids, ranks scattered over
    /// the key range (`--absent-skew zipf:THETA`).
    pub absent_skew: Option<f64>,
    /// Absent lookups made, unmeasured, before the absent phase: the first draws of the
    /// same stream, whose next `lookups` draws the phase measures (`--absent-warmup`).
    pub absent_warmup: u64,
    /// Memory bloomkv's stores give learned negatives (`Options::learned_memory`), in
    /// bits per loaded key; 0 (the default) learns nothing.
    pub learned_bits_per_key: f64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            keys: 1_000_000,
            tables: 10,
            lookups: 200_000,
            value_size: 100,
            bits_per_key: 10.0,
            cold: false,
            seed: 42,
            threads: 1,
            cache_mib: 8,
            compression: "none".into(),
            block_align: true,
            absent_skew: None,
            absent_warmup: 0,
            learned_bits_per_key: 0.0,
        }
    }
}

impl Workload {
    /// How the absent ids are drawn, as rows record it: `"uniform"` or `"zipf:θ"`.
    pub fn absent_skew_name(&self) -> String {
        match self.absent_skew {
            None => "uniform".into(),
            Some(theta) => format!("zipf:{theta}"),
        }
    }

    /// Bytes of learned negatives a bloomkv store gets (`learned_bits_per_key`).
    pub fn learned_memory(&self) -> usize {
        (self.learned_bits_per_key * self.keys as f64 / 8.0) as usize
    }
}

impl std::fmt::Display for Workload {
    /// One line describing the workload, as the benchmark programs print it first.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} keys ({KEY_LEN}-byte keys, {}-byte values) in {} overlapping tables, \
             {} absent + {} present lookups, {} bits/key, {} thread(s), {} MiB block cache, \
             {} compression{}{}",
            self.keys,
            self.value_size,
            self.tables,
            self.lookups,
            self.lookups,
            self.bits_per_key,
            self.threads,
            self.cache_mib,
            self.compression,
            if self.block_align {
                ""
            } else {
                ", unaligned blocks"
            },
            if self.cold { ", cold page cache" } else { "" }
        )?;
        if let Some(theta) = self.absent_skew {
            write!(
                f,
                ", absent ids Zipf({theta}) after {} warm-up lookups",
                self.absent_warmup
            )?;
        }
        if self.learned_bits_per_key > 0.0 {
            write!(
                f,
                ", {} bits/key of learned negatives",
                self.learned_bits_per_key
            )?;
        }
        Ok(())
    }
}

/// The lookup phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Keys that no table holds.
    Absent,
    /// Keys that exactly one table holds.
    Present,
}

impl Phase {
    /// The phase's name in tables and reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Absent => "absent",
            Phase::Present => "present",
        }
    }
}

/// Length of every key: `key` and sixteen digits.
pub const KEY_LEN: usize = 19;

/// The `i`-th present key (even numbers); absent keys are the odd ones between them.
pub fn key(n: u64) -> [u8; KEY_LEN] {
    let mut k = *b"key0000000000000000";
    let mut n = n;
    for slot in k[3..].iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// Something to report progress to (a progress bar, or nothing).
pub trait Progress {
    /// Starts a step of `len` units.
    fn start(&self, message: &str, len: u64);
    /// `n` more units done.
    fn inc(&self, n: u64);
    /// The step is over.
    fn finish(&self);
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn inc(&self, _: u64) {}
    fn finish(&self) {}
}

/// The value stored under key number `i`: its first half pseudo-random bytes (a
/// function of `i`, so every store gets the same ones), its second half one byte
/// repeated. A block of such values compresses to a bit over half its size, as
/// records with an id, a payload and padding do; all-equal values would flatter
/// compression, all-random ones would leave it nothing.
pub fn fill_value(value: &mut Vec<u8>, i: u64, len: usize) {
    value.clear();
    let random = len / 2;
    let mut state = i ^ 0x9e37_79b9_7f4a_7c15;
    while value.len() < random {
        // SplitMix64: a full-period 64-bit generator, cheap and well mixed.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let take = (random - value.len()).min(8);
        value.extend_from_slice(&z.to_le_bytes()[..take]);
    }
    value.resize(len, b'v');
}

/// Loads the workload's keys, in its shuffled order and under the names `key_of`
/// gives, into a fresh store at `dir` opened with `options`: one table per
/// `keys / tables` keys (flushed), then the store is closed and reopened. The flat
/// shape of the prefix and range phases, which need options of their own.
pub(crate) fn load_flat_db<K: AsRef<[u8]>>(
    dir: &std::path::Path,
    options: &bloomkv_kv::Options,
    w: &Workload,
    label: &str,
    key_of: impl Fn(u64) -> K,
    progress: &dyn Progress,
) -> Result<bloomkv_kv::Db, BenchError> {
    let db = bloomkv_kv::Db::open(dir, options.clone())?;
    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(w.seed));
    let mut value = Vec::with_capacity(w.value_size);
    let per_table = w.keys.div_ceil(u64::from(w.tables.max(1))).max(1);
    progress.start(label, w.keys);
    for (n, &i) in (1u64..).zip(&order) {
        fill_value(&mut value, i, w.value_size);
        db.put(key_of(i), &value)?;
        if n.is_multiple_of(per_table) || n == w.keys {
            db.flush()?;
        }
        if n.is_multiple_of(4096) {
            progress.inc(4096);
        }
    }
    progress.finish();
    db.close()?;
    let db = bloomkv_kv::Db::open(dir, options.clone())?;
    db.open_tables()?; // as `BloomkvStore::reopen` does
    Ok(db)
}

/// Loads the workload's keys into `store` and reopens it.
pub fn load(
    store: &mut dyn BenchStore,
    w: &Workload,
    progress: &dyn Progress,
) -> Result<(), BenchError> {
    load_timed(store, w, progress).map(|_| ())
}

/// [`load`], returning the milliseconds its final reopen took (the rows' `open_ms`).
pub fn load_timed(
    store: &mut dyn BenchStore,
    w: &Workload,
    progress: &dyn Progress,
) -> Result<f64, BenchError> {
    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(w.seed));
    let mut value = Vec::with_capacity(w.value_size);
    let per_table = w.keys.div_ceil(u64::from(w.tables.max(1))).max(1);
    progress.start(&format!("load {}", store.label()), w.keys);
    for (n, &i) in (1u64..).zip(&order) {
        fill_value(&mut value, i, w.value_size);
        store.put(&key(2 * i), &value)?;
        if n.is_multiple_of(per_table) || n == w.keys {
            store.end_table()?;
        }
        if n.is_multiple_of(4096) {
            progress.inc(4096);
        }
    }
    progress.finish();
    let started = Instant::now();
    store.reopen()?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// The keys one phase looks up, the same sequence for every store. The absent phase's
/// follow its warm-up's ([`absent_warmup_keys`]) in one stream.
pub fn lookup_keys(w: &Workload, phase: Phase) -> Vec<[u8; KEY_LEN]> {
    match phase {
        Phase::Absent => {
            let mut keys = absent_stream(w, w.absent_warmup + w.lookups);
            keys.drain(..w.absent_warmup as usize);
            keys
        }
        Phase::Present => uniform_keys(w, phase, w.lookups),
    }
}

/// The absent lookups made, unmeasured, before the absent phase (`absent_warmup` of
/// them): the start of the stream the phase continues.
pub fn absent_warmup_keys(w: &Workload) -> Vec<[u8; KEY_LEN]> {
    absent_stream(w, w.absent_warmup)
}

/// The first `n` absent keys of the workload's stream: uniform over the absent ids,
/// or, with `absent_skew` θ, YCSB's scrambled Zipfian — rank r drawn with probability
/// ∝ (r+1)^−θ, then scattered to id `fnv64(r) mod keys`, so the hot keys lie all over
/// the key range (and a few ranks may share an id, as in YCSB).
fn absent_stream(w: &Workload, n: u64) -> Vec<[u8; KEY_LEN]> {
    let Some(theta) = w.absent_skew else {
        return uniform_keys(w, Phase::Absent, n);
    };
    let zipf = zipf::Zipfian::new(w.keys, theta);
    let mut rng = zipf::SplitMix64::new(w.seed ^ (1 << 32));
    (0..n)
        .map(|_| {
            let i = zipf::fnv64(zipf.sample(&mut rng)) % w.keys.max(1);
            key(2 * i + 1)
        })
        .collect()
}

/// `n` keys of `phase`, uniform over its ids.
fn uniform_keys(w: &Workload, phase: Phase, n: u64) -> Vec<[u8; KEY_LEN]> {
    let salt = match phase {
        Phase::Absent => 1,
        Phase::Present => 2,
    };
    let mut rng = StdRng::seed_from_u64(w.seed ^ (salt << 32));
    (0..n)
        .map(|_| {
            let i = rng.gen_range(0..w.keys);
            match phase {
                Phase::Absent => key(2 * i + 1),
                Phase::Present => key(2 * i),
            }
        })
        .collect()
}

/// What one phase on one store measured.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    /// Lookups made.
    pub lookups: u64,
    /// Lookups that found their key.
    pub found: u64,
    /// The store's counters over the phase.
    pub counters: StoreCounters,
    /// The OS's reads over the phase, where it counts them.
    pub os: Option<OsReads>,
    /// Wall-clock nanoseconds for all lookups.
    pub nanos: u128,
    /// Threads that made them.
    pub threads: usize,
}

/// Runs `each` over every item and sums what it returns: on the calling thread (with
/// progress every 4,096 items) when `threads` ≤ 1, otherwise on exactly `threads`
/// threads at once, each over one contiguous share of the items (sizes differing by
/// at most one; none empty unless there are fewer items than threads). Every lookup
/// and scan phase of the run (`--threads`) goes through here.
pub fn in_shares<T: Sync>(
    items: &[T],
    threads: usize,
    progress: &dyn Progress,
    each: impl Fn(&T) -> Result<u64, BenchError> + Sync,
) -> Result<u64, BenchError> {
    if threads <= 1 {
        let mut sum = 0u64;
        for chunk in items.chunks(4096) {
            for item in chunk {
                sum += each(item)?;
            }
            progress.inc(chunk.len() as u64);
        }
        return Ok(sum);
    }
    let len = items.len();
    let each = &each;
    let sum = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| &items[i * len / threads..(i + 1) * len / threads])
            .map(|share| {
                s.spawn(move || -> Result<u64, BenchError> {
                    share
                        .iter()
                        .try_fold(0u64, |sum, item| Ok(sum + each(item)?))
                })
            })
            .collect();
        handles.into_iter().try_fold(0u64, |sum, h| {
            let part = h
                .join()
                .map_err(|_| BenchError::from("a lookup thread panicked"))??;
            Ok::<u64, BenchError>(sum + part)
        })
    })?;
    progress.inc(len as u64);
    Ok(sum)
}

/// A line above a table whose phases ran on several threads (nothing for one), so
/// its times read as what they are.
pub fn threads_note(threads: usize) -> String {
    if threads <= 1 {
        String::new()
    } else {
        format!("(each phase on {threads} threads at once: times are wall-clock per operation)\n")
    }
}

/// Runs one lookup phase and measures it.
pub fn run_phase(
    store: &dyn BenchStore,
    w: &Workload,
    phase: Phase,
    progress: &dyn Progress,
) -> Result<PhaseResult, BenchError> {
    let keys = lookup_keys(w, phase);
    if w.cold {
        store.drop_caches();
    }
    progress.start(
        &format!("{} {}", store.label(), phase.name()),
        keys.len() as u64,
    );
    let cost = OsIo::self_cost();
    let before = store.counters();
    let os_before = OsIo::now();
    let started = Instant::now();
    let found = in_shares(&keys, w.threads, progress, |k| Ok(u64::from(store.get(k)?)))?;
    let nanos = started.elapsed().as_nanos();
    let os_after = OsIo::now();
    let counters = store.counters().minus(before);
    progress.finish();
    let os = match (os_before, os_after, cost) {
        (Some(b), Some(a), Some(c)) => Some(OsReads::between(b, a, c)),
        _ => None,
    };
    Ok(PhaseResult {
        lookups: keys.len() as u64,
        found,
        counters,
        os,
        nanos,
        threads: w.threads.max(1),
    })
}

/// Runs the whole workload on `store`: load, reopen, both phases.
pub fn run_store(
    store: &mut dyn BenchStore,
    w: &Workload,
    progress: &dyn Progress,
) -> Result<Vec<Row>, BenchError> {
    let open_ms = load_timed(store, w, progress)?;
    let shape = store.filter_shape();
    let mut rows = Vec::new();
    for phase in [Phase::Absent, Phase::Present] {
        if phase == Phase::Absent {
            warm_up_absent(store, w, progress)?;
        }
        let before = store.learned();
        let result = run_phase(store, w, phase, progress)?;
        let mut row = Row::new(&store.label(), phase, &result, &shape, w.keys);
        row.table_bytes = store.disk_bytes();
        row.open_ms = Some(open_ms);
        row.record_learning(w, before, store.learned());
        row.metadata_bytes = store.metadata_bytes();
        rows.push(row);
    }
    Ok(rows)
}

/// Makes the workload's absent warm-up lookups (`absent_warmup`, unmeasured): what a
/// store learns from them serves the absent phase that follows.
pub fn warm_up_absent(
    store: &dyn BenchStore,
    w: &Workload,
    progress: &dyn Progress,
) -> Result<(), BenchError> {
    if w.absent_warmup == 0 {
        return Ok(());
    }
    let keys = absent_warmup_keys(w);
    progress.start(
        &format!("{} absent warm-up", store.label()),
        keys.len() as u64,
    );
    let found = in_shares(&keys, w.threads, progress, |k| Ok(u64::from(store.get(k)?)))?;
    progress.finish();
    if found != 0 {
        return Err(format!("{}: {found} absent warm-up keys found", store.label()).into());
    }
    Ok(())
}

/// What a store's learned negatives hold and have done (bloomkv with
/// `Options::learned_memory`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LearnedFigures {
    /// Bytes they occupy.
    pub bytes: u64,
    /// Data-block reads they skipped so far.
    pub skips: u64,
    /// Learned negatives held.
    pub entries: u64,
}

/// Fills each row's `reads_avoided_pct` against the row of `baseline` in the same phase
/// (and batch size).
pub fn compare_to_baseline(rows: &mut [Row], baseline: &str) {
    let base: Vec<(Phase, usize, f64)> = rows
        .iter()
        .filter(|r| r.filter == baseline)
        .map(|r| (r.phase, r.batch, r.data_block_reads as f64))
        .collect();
    for row in rows.iter_mut() {
        let same = |&&(p, b, _): &&(Phase, usize, f64)| p == row.phase && b == row.batch;
        if let Some((_, _, reads)) = base.iter().find(same) {
            row.reads_avoided_pct = if *reads > 0.0 {
                Some(100.0 * (1.0 - row.data_block_reads as f64 / reads))
            } else {
                None
            };
        }
    }
}

/// Where a benchmark's stores live: a given directory, or a temporary one removed after.
///
/// A given directory is the benchmark's only if it is new, empty, or was made by an
/// earlier run: a marker file ([`WORK_DIR_MARKER`]) lists the store directories the
/// benchmark created there, and only those are ever removed. A directory holding
/// anything else is refused, never emptied.
pub struct WorkDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

/// The file in a `--dir` that lists the store directories the benchmark created.
pub const WORK_DIR_MARKER: &str = ".bloomkv-bench";

impl WorkDir {
    /// `dir` if given (created if missing; refused if it holds files the benchmark
    /// did not make), else a fresh temporary directory.
    pub fn new(dir: Option<PathBuf>) -> std::io::Result<WorkDir> {
        match dir {
            Some(path) => {
                std::fs::create_dir_all(&path).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("--dir {}: {e}", path.display()))
                })?;
                let marker = path.join(WORK_DIR_MARKER);
                if !marker.exists() {
                    if std::fs::read_dir(&path)?.next().is_some() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            format!(
                                "--dir {} holds files the benchmark did not make; give it a new \
                                 or empty directory (it deletes the stores it creates there)",
                                path.display()
                            ),
                        ));
                    }
                    std::fs::write(&marker, "")?;
                }
                Ok(WorkDir { path, _temp: None })
            }
            None => {
                let temp = tempfile::Builder::new().prefix("bloomkv-bench").tempdir()?;
                Ok(WorkDir {
                    path: temp.path().to_path_buf(),
                    _temp: Some(temp),
                })
            }
        }
    }

    /// A subdirectory for one store, emptied first if an earlier run made it. A
    /// subdirectory the benchmark did not make is refused.
    pub fn store_dir(&self, name: &str) -> std::io::Result<PathBuf> {
        let path = self.path.join(name);
        let marker = self.path.join(WORK_DIR_MARKER);
        let ours = |listed: &str| listed.lines().any(|l| l == name);
        if self._temp.is_some() {
            if path.exists() {
                std::fs::remove_dir_all(&path)?;
            }
            return Ok(path);
        }
        let listed = std::fs::read_to_string(&marker)?;
        if path.exists() {
            if !ours(&listed) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and was not made by the benchmark; not touching it",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_dir_all(&path)?;
        }
        if !ours(&listed) {
            std::fs::write(&marker, format!("{listed}{name}\n"))?;
        }
        Ok(path)
    }
}

#[cfg(test)]
mod value_tests {
    use super::fill_value;

    #[test]
    fn values_are_half_random_half_repeated_and_the_same_for_every_store() {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        fill_value(&mut a, 7, 100);
        fill_value(&mut b, 7, 100);
        fill_value(&mut c, 8, 100);
        assert_eq!(a.len(), 100);
        assert_eq!(a, b, "a key's value must not depend on the run");
        assert_ne!(
            a[..50],
            c[..50],
            "different keys get different random halves"
        );
        assert!(a[50..].iter().all(|&x| x == b'v'));
        // The random half is not one repeated byte either (it would compress).
        let distinct: std::collections::HashSet<u8> = a[..50].iter().copied().collect();
        assert!(distinct.len() > 20, "{distinct:?}");
        // Odd and tiny lengths.
        for len in [0, 1, 3, 17] {
            fill_value(&mut a, 1, len);
            assert_eq!(a.len(), len);
        }
    }
}

#[cfg(test)]
mod thread_tests {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::thread::ThreadId;

    use super::*;

    /// Records which thread looked up which key.
    #[derive(Default)]
    struct Recording(Mutex<HashMap<ThreadId, Vec<Vec<u8>>>>);

    impl BenchStore for Recording {
        fn label(&self) -> String {
            "recording".into()
        }
        fn put(&mut self, _: &[u8], _: &[u8]) -> Result<(), BenchError> {
            Ok(())
        }
        fn end_table(&mut self) -> Result<(), BenchError> {
            Ok(())
        }
        fn reopen(&mut self) -> Result<(), BenchError> {
            Ok(())
        }
        fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
            let mut seen = self.0.lock().map_err(|_| "poisoned")?;
            seen.entry(std::thread::current().id())
                .or_default()
                .push(key.to_vec());
            Ok(false)
        }
        fn counters(&self) -> StoreCounters {
            StoreCounters::default()
        }
        fn filter_shape(&self) -> FilterShape {
            FilterShape::default()
        }
        fn tables(&self) -> usize {
            1
        }
        fn drop_caches(&self) {}
    }

    /// `--threads N` runs exactly N threads, each over its own share of the phase's
    /// keys, sizes within one of each other, every key once. (Shares of
    /// `ceil(lookups / N)` keys ran 5 threads for `--threads 6` over 10 lookups, and
    /// the row still said 6.)
    #[test]
    fn a_phase_runs_exactly_the_threads_asked_for_over_every_key_once() {
        for (threads, lookups) in [(6usize, 10u64), (3, 3), (4, 1001), (2, 7)] {
            let w = Workload {
                lookups,
                threads,
                ..Workload::default()
            };
            let store = Recording::default();
            let result = run_phase(&store, &w, Phase::Absent, &NoProgress).unwrap();
            assert_eq!(result.threads, threads);
            let seen = store.0.into_inner().unwrap();
            assert_eq!(seen.len(), threads, "{threads} threads over {lookups}");
            let sizes: Vec<usize> = seen.values().map(Vec::len).collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 1, "{sizes:?}");
            let mut all: Vec<Vec<u8>> = seen.into_values().flatten().collect();
            let mut want: Vec<Vec<u8>> = lookup_keys(&w, Phase::Absent)
                .iter()
                .map(|k| k.to_vec())
                .collect();
            all.sort();
            want.sort();
            assert_eq!(all, want, "every key once");
        }
    }
}
