//! RocksDB as a [`BenchStore`] (cargo feature `rocksdb`): the reference LSM.
//!
//! In the flat layout it is set up so its rows compare with bloomkv's:
//!
//! - `end_table` flushes the memtable into a table of its own and waits (the memtable
//!   limit is 1 GiB, so it never fills up on its own);
//! - `disable_auto_compactions`, and the L0 triggers raised far above `--tables`, so
//!   lookups face exactly `--tables` overlapping L0 tables;
//! - a full (per-table) Bloom filter: `BlockBasedOptions::set_bloom_filter(10.0,
//!   false)`, RocksDB's cache-local "fast local Bloom" (one 64-byte line per key, 6
//!   probes at 10 bits/key). Filter and index blocks are held by the table readers
//!   (`cache_index_and_filter_blocks` stays off, its default), as bloomkv keeps them;
//! - 4 KiB data blocks, uncompressed unless the row says LZ4
//!   ([`RocksDbStore::create_compressed`]: `DBCompressionType::Lz4`, the C liblz4
//!   this crate's `rocksdb` feature builds); RocksDB's default block cache (a 32 MiB
//!   HyperClockCache) unless the row gives a size, then a HyperClockCache of it.
//!
//! With compaction on ([`Layout::Defaults`], [`Layout::SmallLevels`]) the options are
//! RocksDB's defaults but for the filter, compression (off) and, for the leveled
//! shape, the memtable, table and level-1 sizes.
//!
//! Timed as its maintainers time it: statistics off (RocksDB's `db_bench` leaves them
//! off unless asked, as every statistics level still updates its tickers on the read
//! path). A counted run (`bloomkv-peers --counted`, [`RocksDbStore::create`]'s
//! `counted`) turns them on at `StatsLevel::ExceptTimers` (no clock read on the read
//! path), and its times are not the figures. Without statistics the rows' reads are
//! the OS's read syscalls, as fjall's are. The counters, under the names bloomkv's
//! mirror: `BLOOM_FILTER_USEFUL`
//! (negatives), `BLOOM_FILTER_FULL_POSITIVE`, `BLOOM_FILTER_FULL_TRUE_POSITIVE`, and
//! `BLOCK_CACHE_DATA_MISS` (data blocks read from a table file). Table probes are not
//! counted. Every get reuses one `ReadOptions`.

use std::path::PathBuf;

use bloomkv::sizing;
use bloomkv_bench::{BenchError, BenchStore, FilterShape, StoreCounters};
use rocksdb::statistics::{StatsLevel, Ticker};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Options, ReadOptions, DB,
    DEFAULT_COLUMN_FAMILY_NAME,
};

use crate::{CacheSize, Layout};

/// Far above any `--tables`: no L0 file count ever triggers a compaction or a stall.
const L0_TRIGGER: i32 = 1 << 20;

/// A RocksDB database set up for the workload.
pub struct RocksDbStore {
    label: String,
    dir: PathBuf,
    /// One `Options` for every open: it owns the statistics the counters read.
    options: Options,
    /// The one `ReadOptions` every get uses.
    read_options: ReadOptions,
    bits_per_key: Option<f64>,
    layout: Layout,
    /// Statistics on: the counters are RocksDB's.
    counted: bool,
    db: Option<DB>,
    /// The block cache asked for and whether blocks are compressed: a reopen builds its
    /// options afresh from them, so it starts with an empty block cache.
    cache: CacheSize,
    lz4: bool,
    /// Keys written into each finished table, in order.
    table_keys: Vec<u64>,
    pending_keys: u64,
}

impl RocksDbStore {
    /// Creates a fresh database in `dir` whose tables carry full Bloom filters at
    /// `bits_per_key` (or none, for `None`), with `cache` and `layout`.
    pub fn create(
        label: impl Into<String>,
        dir: PathBuf,
        bits_per_key: Option<f64>,
        cache: CacheSize,
        layout: Layout,
        counted: bool,
    ) -> Result<Self, BenchError> {
        Self::create_compressed(label, dir, bits_per_key, cache, layout, false, counted)
    }

    /// Like [`create`](Self::create), with data blocks compressed by LZ4 if `lz4`.
    /// `counted` turns RocksDB's statistics on (the counters), else they stay off (the
    /// timed rows).
    pub fn create_compressed(
        label: impl Into<String>,
        dir: PathBuf,
        bits_per_key: Option<f64>,
        cache: CacheSize,
        layout: Layout,
        lz4: bool,
        counted: bool,
    ) -> Result<Self, BenchError> {
        if let Some(bpk) = bits_per_key {
            if !(bpk.is_finite() && bpk >= 1.0) {
                return Err(
                    format!("rocksdb needs at least 1 filter bit per key, got {bpk}").into(),
                );
            }
        }
        let options = options(bits_per_key, cache, layout, lz4, counted);
        let db = open(&options, &dir)?;
        Ok(RocksDbStore {
            label: label.into(),
            dir,
            options,
            read_options: ReadOptions::default(),
            bits_per_key,
            layout,
            counted,
            db: Some(db),
            cache,
            lz4,
            table_keys: Vec::new(),
            pending_keys: 0,
        })
    }

    fn db(&self) -> Result<&DB, BenchError> {
        self.db
            .as_ref()
            .ok_or_else(|| "rocksdb store is closed".into())
    }

    /// Flushes the memtable (`flush` returns once it is written).
    pub fn flush(&mut self) -> Result<(), BenchError> {
        Ok(self.db()?.flush()?)
    }

    /// Whether a flush or compaction is running or pending, as RocksDB's properties
    /// say.
    pub fn busy(&self) -> Result<bool, BenchError> {
        let db = self.db()?;
        let int = |name: &str| -> Result<u64, BenchError> {
            Ok(db.property_int_value(name)?.unwrap_or(0))
        };
        Ok(int("rocksdb.compaction-pending")? > 0
            || int("rocksdb.num-running-compactions")? > 0
            || int("rocksdb.num-running-flushes")? > 0
            || int("rocksdb.mem-table-flush-pending")? > 0)
    }

    /// Looks `keys` up with one batched `MultiGet` (`batched_multi_get_cf_opt` on the
    /// default column family, keys not sorted first); the number found.
    pub fn batched_multi_get(
        &self,
        keys: &[[u8; bloomkv_bench::KEY_LEN]],
    ) -> Result<u64, BenchError> {
        let db = self.db()?;
        let cf = db
            .cf_handle(DEFAULT_COLUMN_FAMILY_NAME)
            .ok_or("rocksdb has no default column family")?;
        let mut found = 0;
        for r in db.batched_multi_get_cf_opt(cf, keys, false, &self.read_options) {
            found += u64::from(r?.is_some());
        }
        Ok(found)
    }

    /// Tables per level, deepest last, empty levels left out.
    pub fn levels(&self) -> Vec<(usize, usize)> {
        let files = self
            .db
            .as_ref()
            .and_then(|db| db.live_files().ok())
            .unwrap_or_default();
        let mut levels: Vec<(usize, usize)> = Vec::new();
        for f in files {
            let level = f.level.max(0) as usize;
            match levels.iter_mut().find(|(l, _)| *l == level) {
                Some((_, n)) => *n += 1,
                None => levels.push((level, 1)),
            }
        }
        levels.sort_unstable();
        levels
    }
}

/// Opens the database with its default column family named, under the same options
/// `DB::open` would give it, so that the batched MultiGet can be handed its handle
/// (a database opened without naming any column family has no handle to give).
fn open(options: &Options, dir: &std::path::Path) -> Result<DB, BenchError> {
    let default = ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, options.clone());
    Ok(DB::open_cf_descriptors(options, dir, [default])?)
}

fn options(
    bits_per_key: Option<f64>,
    cache: CacheSize,
    layout: Layout,
    lz4: bool,
    counted: bool,
) -> Options {
    let mut table = BlockBasedOptions::default();
    if let Some(bpk) = bits_per_key {
        // `false`: a full filter per table, not the deprecated per-block filters.
        table.set_bloom_filter(bpk, false);
    }
    table.set_block_size(4096);
    if let CacheSize::Bytes(bytes) = cache {
        // 0: RocksDB sizes the cache's table itself, as its own default cache does.
        table.set_block_cache(&Cache::new_hyper_clock_cache(bytes, 0));
    }

    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_block_based_table_factory(&table);
    opts.set_compression_type(if lz4 {
        DBCompressionType::Lz4
    } else {
        DBCompressionType::None
    });
    match layout {
        Layout::Flat => {
            opts.set_disable_auto_compactions(true);
            opts.set_level_zero_file_num_compaction_trigger(L0_TRIGGER);
            opts.set_level_zero_slowdown_writes_trigger(L0_TRIGGER);
            opts.set_level_zero_stop_writes_trigger(L0_TRIGGER);
            opts.set_write_buffer_size(1 << 30);
        }
        Layout::Defaults => {}
        Layout::SmallLevels => {
            opts.set_write_buffer_size(crate::SMALL_MEMTABLE);
            opts.set_target_file_size_base(crate::SMALL_TABLE);
            opts.set_max_bytes_for_level_base(crate::SMALL_LEVEL1);
        }
    }
    if counted {
        opts.enable_statistics();
        // Counters without timers: RocksDB's default level also times every get and
        // block read.
        opts.set_statistics_level(StatsLevel::ExceptTimers);
    }
    opts
}

impl BenchStore for RocksDbStore {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        self.db()?.put(key, value)?;
        self.pending_keys += 1;
        Ok(())
    }

    fn end_table(&mut self) -> Result<(), BenchError> {
        if self.pending_keys == 0 {
            return Ok(());
        }
        // `flush` waits until the memtable is written as a table.
        self.db()?.flush()?;
        self.table_keys.push(self.pending_keys);
        self.pending_keys = 0;
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), BenchError> {
        // Dropping the handle closes the database (and joins its background threads).
        self.db = None;
        // Options made anew: the block cache lives in the table factory the old options
        // hold (RocksDB's default cache too), and would carry the blocks read before
        // the reopen into the phases after it, where bloomkv's and fjall's start empty.
        self.options = options(
            self.bits_per_key,
            self.cache,
            self.layout,
            self.lz4,
            self.counted,
        );
        self.db = Some(open(&self.options, &self.dir)?);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
        // Pinned: the value stays in the block it was found in, no copy.
        Ok(self
            .db()?
            .get_pinned_opt(key, &self.read_options)?
            .is_some())
    }

    fn multi_get(&self, keys: &[[u8; bloomkv_bench::KEY_LEN]]) -> Result<u64, BenchError> {
        self.batched_multi_get(keys)
    }

    /// RocksDB's tickers in a counted run; nothing otherwise (statistics off).
    fn counters(&self) -> StoreCounters {
        if !self.counted {
            return StoreCounters::default();
        }
        let t = |ticker: Ticker| Some(self.options.get_ticker_count(ticker));
        let filtered = self.bits_per_key.is_some();
        StoreCounters {
            table_probes: None,
            filter_negatives: t(Ticker::BloomFilterUseful).filter(|_| filtered),
            filter_positives: t(Ticker::BloomFilterFullPositive).filter(|_| filtered),
            filter_true_positives: t(Ticker::BloomFilterFullTruePositive).filter(|_| filtered),
            data_block_reads: t(Ticker::BlockCacheDataMiss),
            block_cache_hits: t(Ticker::BlockCacheDataHit),
        }
    }

    /// Computed from RocksDB's construction rule (about `bits_per_key` bits per key in
    /// 512-bit lines, 6 probes at 10 bits/key) and the keys in each table (as written
    /// in the flat layout, as RocksDB lists its live files otherwise); the formula is
    /// the cache-local one (bloomkv's model of one-line-per-key filters).
    fn filter_shape(&self) -> FilterShape {
        let Some(bpk) = self.bits_per_key else {
            return FilterShape::default();
        };
        let probes = rocksdb_probes(bpk);
        let keys: Vec<u64> = if self.layout == Layout::Flat {
            self.table_keys.clone()
        } else {
            self.db
                .as_ref()
                .and_then(|db| db.live_files().ok())
                .unwrap_or_default()
                .iter()
                .map(|f| f.num_entries)
                .collect()
        };
        let tables: Vec<(u64, u64)> = keys
            .iter()
            .map(|&n| (rocksdb_filter_bits(n, bpk), n))
            .collect();
        FilterShape::from_tables(&tables, probes, |m, n| {
            sizing::cache_local_false_positive_rate(m, n, probes).unwrap_or(1.0)
        })
    }

    fn tables(&self) -> usize {
        self.db
            .as_ref()
            .and_then(|db| db.live_files().ok())
            .map(|files| files.len())
            .unwrap_or(0)
    }

    fn drop_caches(&self) {
        bloomkv_bench::drop_dir_from_page_cache(&self.dir);
    }

    /// The live table files' sizes, as RocksDB reports them.
    fn disk_bytes(&self) -> Option<u64> {
        let files = self.db.as_ref()?.live_files().ok()?;
        Some(files.iter().map(|f| f.size as u64).sum())
    }
}

/// RocksDB's bits per key in thousandths, as its Bloom policy rounds them.
fn millibits(bits_per_key: f64) -> u64 {
    (bits_per_key * 1000.0 + 0.500001) as u64
}

/// RocksDB's filter size for `keys` keys (`CalculateSpace` in
/// `table/block_based/filter_policy.cc`): `keys · millibits / 8000` bytes rounded up
/// to whole 64-byte lines. (With `optimize_filters_for_memory` RocksDB may trim a
/// filter a little to fit its allocation; this is the target size.)
fn rocksdb_filter_bits(keys: u64, bits_per_key: f64) -> u64 {
    let bytes = (keys * millibits(bits_per_key)).div_ceil(8000);
    bytes.div_ceil(64).max(1) * 64 * 8
}

/// RocksDB's probe count for its fast local Bloom filter (`ChooseNumProbes` in
/// `util/bloom_impl.h`).
fn rocksdb_probes(bits_per_key: f64) -> u32 {
    match millibits(bits_per_key) {
        0..=2080 => 1,
        2081..=3580 => 2,
        3581..=5100 => 3,
        5101..=6640 => 4,
        6641..=8300 => 5,
        8301..=10070 => 6,
        10071..=11720 => 7,
        11721..=14001 => 8,
        14002..=16050 => 9,
        16051..=18300 => 10,
        18301..=22001 => 11,
        22002..=25501 => 12,
        m @ 25502..=50000 => ((m - 1) / 2000 - 1) as u32,
        _ => 24,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_rule_at_ten_bits_per_key() {
        assert_eq!(rocksdb_probes(10.0), 6);
        assert_eq!(rocksdb_probes(28.0), 12);
        assert_eq!(rocksdb_probes(28.002), 13);
        assert_eq!(
            rocksdb_filter_bits(100_000, 10.0),
            125_000 / 64 * 64 * 8 + 512
        );
    }
}
