//! fjall 3 as a [`BenchStore`]: the peer written in Rust.
//!
//! In the flat layout it is set up so its rows compare with bloomkv's:
//!
//! - one keyspace; `end_table` seals the memtable and waits until it is flushed into a
//!   table of its own (a memtable never fills up on its own: its limit is 1 GiB);
//! - compaction held off: leveled compaction with its L0 trigger at 255 tables, so no
//!   two tables are ever merged. fjall still *moves* the very first table to the last
//!   level (a metadata change: the file, its filter and its key range stay as they
//!   are), so lookups face exactly `--tables` overlapping tables, one of them in L6;
//! - filters as the row says: none, Bloom at `bits_per_key` on every level, or fjall's
//!   own default policy (L0 filters built for a 0.01% false-positive rate, about 19
//!   bits/key, 10 bits/key below); filter and index blocks pinned in memory on every
//!   level, as bloomkv keeps them;
//! - data blocks of 4 KiB, uncompressed unless the row says LZ4 (as bloomkv's rows
//!   are; [`FjallStore::create_compressed`]); the block cache is fjall's default
//!   (32 MiB) unless the row says otherwise.
//!
//! With compaction on ([`Layout::Defaults`], [`Layout::SmallLevels`]) everything but
//! compression (off), the cache and, for the leveled shape, the memtable and table
//! sizes stays at fjall's defaults, pinning included.
//!
//! fjall counts its read path only when built with its `metrics` feature, which adds
//! atomic counter updates to every filter check and block load. This crate turns it
//! on only with its own `fjall-metrics` feature, for a counted run: filter negatives
//! are then its `io_skipped_by_filter`, and table reads the blocks it loaded from a
//! file (`block_load_io_count`: data, index and filter blocks). Without it the rows'
//! reads are the OS's read syscalls. fjall does not count table probes or filter
//! positives, so those columns stay empty.

use std::path::PathBuf;
use std::sync::Arc;

use bloomkv::sizing;
use bloomkv_bench::{BenchError, BenchStore, FilterShape, StoreCounters};
use fjall::compaction::Leveled;
use fjall::config::{
    BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry, PinningPolicy,
};
use fjall::{AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions};

use crate::{CacheSize, Layout};

/// The one keyspace the workload writes to.
const KEYSPACE: &str = "bench";

/// fjall stalls writes once L0 holds 20 tables and halts them at 30, waiting for a
/// compaction that is held off here: more tables than this are refused.
pub const MAX_TABLES: u32 = 20;

/// The false-positive rate fjall's default policy builds L0 filters for.
const DEFAULT_L0_FP: f32 = 0.0001;

/// fjall's default policy below L0: Bloom at 10 bits/key.
const DEFAULT_DEEPER_BPK: f64 = 10.0;

/// Which filters fjall builds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FjallFilter {
    /// No filter blocks.
    None,
    /// Bloom at this many bits per key on every level.
    BitsPerKey(f64),
    /// fjall's default policy: L0 built for a 0.01% false-positive rate, 10 bits/key
    /// on every level below.
    Default,
}

/// fjall's Bloom construction at `bits_per_key` (lsm-tree's `with_bpk`): the bit count
/// is `n · ⌊bits_per_key⌋` rounded up to whole bytes, the probe count
/// `max(1, ⌊bits_per_key · ln 2⌋)`.
fn fjall_filter_bits(keys: u64, bits_per_key: f64) -> u64 {
    (keys * bits_per_key.floor() as u64).div_ceil(8) * 8
}

fn fjall_probes(bits_per_key: f64) -> u32 {
    ((bits_per_key * std::f64::consts::LN_2).floor() as u32).max(1)
}

/// fjall's Bloom construction for a false-positive rate (lsm-tree's `with_fp_rate`):
/// `m = −n·ln(fp)/ln²2` rounded up to whole bytes, probes `⌊⌊m/n⌋ · ln 2⌋`. Returns
/// `(bits, probes)`.
fn fjall_fp_rate_filter(keys: u64, fp: f32) -> (u64, u32) {
    let ln2 = std::f32::consts::LN_2;
    let m = -(keys as f32 * fp.ln()) / (ln2 * ln2);
    let bits = ((m / 8.0).ceil() * 8.0) as u64;
    let bpk = (bits / keys.max(1)) as f32;
    (bits, ((bpk * ln2) as u32).max(1))
}

/// An open database and its keyspace (the keyspace is dropped first).
struct Open {
    keyspace: Keyspace,
    db: Database,
}

/// A fjall database set up for the workload.
pub struct FjallStore {
    label: String,
    dir: PathBuf,
    filter: FjallFilter,
    cache: CacheSize,
    layout: Layout,
    /// Data blocks compressed with LZ4 (else stored raw).
    lz4: bool,
    open: Option<Open>,
    /// Keys written into each finished table, in order (flat layout).
    table_keys: Vec<u64>,
    /// Keys written since the last `end_table`.
    pending_keys: u64,
    /// Keys written in all.
    keys: u64,
}

impl FjallStore {
    /// Creates a fresh database in `dir` with `filter`, `cache` and `layout`, its data
    /// blocks uncompressed.
    pub fn create(
        label: impl Into<String>,
        dir: PathBuf,
        filter: FjallFilter,
        cache: CacheSize,
        layout: Layout,
    ) -> Result<Self, BenchError> {
        Self::create_compressed(label, dir, filter, cache, layout, false)
    }

    /// Like [`create`](Self::create), with data blocks compressed by LZ4 if `lz4` (on
    /// every level; fjall's LZ4 is `lz4_flex`, as bloomkv's is).
    pub fn create_compressed(
        label: impl Into<String>,
        dir: PathBuf,
        filter: FjallFilter,
        cache: CacheSize,
        layout: Layout,
        lz4: bool,
    ) -> Result<Self, BenchError> {
        if let FjallFilter::BitsPerKey(bpk) = filter {
            if !(bpk.is_finite() && bpk >= 1.0) {
                return Err(format!("fjall needs at least 1 filter bit per key, got {bpk}").into());
            }
        }
        let mut store = FjallStore {
            label: label.into(),
            dir,
            filter,
            cache,
            layout,
            lz4,
            open: None,
            table_keys: Vec::new(),
            pending_keys: 0,
            keys: 0,
        };
        store.open = Some(store.open_db()?);
        Ok(store)
    }

    /// The keyspace's options. They are stored with the keyspace when it is created,
    /// and read back from it on every reopen.
    fn keyspace_options(&self) -> KeyspaceCreateOptions {
        let compression = if self.lz4 {
            CompressionPolicy::all(CompressionType::Lz4)
        } else {
            CompressionPolicy::disabled()
        };
        let mut o = KeyspaceCreateOptions::default().data_block_compression_policy(compression);
        o = match self.filter {
            FjallFilter::None => o.filter_policy(FilterPolicy::disabled()),
            FjallFilter::BitsPerKey(bpk) => o.filter_policy(FilterPolicy::all(
                FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(bpk as f32)),
            )),
            FjallFilter::Default => o,
        };
        match self.layout {
            Layout::Flat => o
                .filter_block_pinning_policy(PinningPolicy::all(true))
                .index_block_pinning_policy(PinningPolicy::all(true))
                .compaction_strategy(Arc::new(Leveled::default().with_l0_threshold(u8::MAX)))
                .max_memtable_size(1 << 30)
                // The journal is written through at each table's end, not at every
                // put: loading speed is not what the flat shape measures.
                .manual_journal_persist(true),
            Layout::Defaults => o,
            Layout::SmallLevels => o
                .max_memtable_size(crate::SMALL_MEMTABLE as u64)
                .compaction_strategy(Arc::new(
                    Leveled::default().with_table_target_size(crate::SMALL_TABLE),
                )),
        }
    }

    fn open_db(&self) -> Result<Open, BenchError> {
        let mut builder = Database::builder(&self.dir);
        if let CacheSize::Bytes(b) = self.cache {
            builder = builder.cache_size(b as u64);
        }
        if self.layout == Layout::Flat {
            builder = builder.manual_journal_persist(true);
        }
        let db = builder.open()?;
        let options = self.keyspace_options();
        let keyspace = db.keyspace(KEYSPACE, || options)?;
        Ok(Open { keyspace, db })
    }

    fn keyspace(&self) -> Result<&Keyspace, BenchError> {
        self.open
            .as_ref()
            .map(|o| &o.keyspace)
            .ok_or_else(|| "fjall store is closed".into())
    }

    /// Seals the memtable into a table and waits until it is written.
    pub fn flush(&mut self) -> Result<(), BenchError> {
        self.keyspace()?.rotate_memtable_and_wait()?;
        Ok(())
    }

    /// Whether a flush or compaction is running or due, as fjall says.
    pub fn busy(&self) -> Result<bool, BenchError> {
        let open = self.open.as_ref().ok_or("fjall store is closed")?;
        Ok(open.db.outstanding_flushes() > 0
            || open.db.active_compactions() > 0
            || open.keyspace.sealed_memtable_count() > 0)
    }

    /// Tables per level, deepest last, empty levels left out.
    pub fn levels(&self) -> Vec<(usize, usize)> {
        let Some(open) = self.open.as_ref() else {
            return Vec::new();
        };
        (0..8)
            .filter_map(|l| {
                let n = open.keyspace.tree.level_table_count(l)?;
                (n > 0).then_some((l, n))
            })
            .collect()
    }
}

impl BenchStore for FjallStore {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        self.keyspace()?.insert(key, value)?;
        self.pending_keys += 1;
        self.keys += 1;
        Ok(())
    }

    fn end_table(&mut self) -> Result<(), BenchError> {
        if self.pending_keys == 0 {
            return Ok(());
        }
        // Seal the memtable and wait until its table is written and installed.
        self.keyspace()?.rotate_memtable_and_wait()?;
        self.table_keys.push(self.pending_keys);
        self.pending_keys = 0;
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), BenchError> {
        // Dropping the handles stops fjall's workers and persists the journal.
        self.open = None;
        self.open = Some(self.open_db()?);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
        Ok(self.keyspace()?.get(key)?.is_some())
    }

    #[cfg(feature = "fjall-metrics")]
    fn counters(&self) -> StoreCounters {
        let Some(open) = self.open.as_ref() else {
            return StoreCounters::default();
        };
        let m = open.keyspace.metrics();
        StoreCounters {
            filter_negatives: Some(m.io_skipped_by_filter() as u64),
            data_block_reads: Some(m.block_load_io_count() as u64),
            ..StoreCounters::default()
        }
    }

    /// Without fjall's `metrics` feature nothing is counted: the rows' reads are the
    /// OS's read syscalls.
    #[cfg(not(feature = "fjall-metrics"))]
    fn counters(&self) -> StoreCounters {
        StoreCounters::default()
    }

    /// The memory is fjall's own sum of its tables' filter blocks (`filter_size()`, a
    /// few header bytes each included), in every layout. The predicted rate: in the
    /// flat layout computed per table from fjall's L0 construction rule (every table
    /// is flushed into L0, and the one fjall moves deeper keeps its filter) and the
    /// keys written into it; with compaction on, the textbook one at the tables'
    /// average bits per key.
    fn filter_shape(&self) -> FilterShape {
        let Some(open) = self.open.as_ref() else {
            return FilterShape::default();
        };
        if self.filter == FjallFilter::None {
            return FilterShape::default();
        }
        let bits = open.keyspace.tree.filter_size() * 8;
        let keys = if self.table_keys.is_empty() {
            self.keys
        } else {
            self.table_keys.iter().sum()
        };
        let (l0_rule, deeper_bpk) = match self.filter {
            FjallFilter::BitsPerKey(bpk) => (None, bpk),
            _ => (Some(DEFAULT_L0_FP), DEFAULT_DEEPER_BPK),
        };
        let textbook = |m: u64, n: u64, k: u32| sizing::false_positive_rate(m, n, k).unwrap_or(1.0);
        if self.layout == Layout::Flat && !self.table_keys.is_empty() {
            // Every table is written by a flush into L0 and its filter built by the L0
            // rule; the table fjall then moves below L0 keeps that filter (the move
            // changes metadata only), so every table follows the L0 rule.
            let per_table: Vec<(u64, u32, u64)> = self
                .table_keys
                .iter()
                .map(|&n| match l0_rule {
                    Some(fp) => {
                        let (m, k) = fjall_fp_rate_filter(n, fp);
                        (m, k, n)
                    }
                    None => (
                        fjall_filter_bits(n, deeper_bpk),
                        fjall_probes(deeper_bpk),
                        n,
                    ),
                })
                .collect();
            let l0_probes = per_table.last().map_or(1, |t| t.1);
            let formula_fp = per_table
                .iter()
                .map(|&(m, k, n)| textbook(m, n, k))
                .sum::<f64>()
                / per_table.len() as f64;
            return FilterShape {
                // The memory is fjall's own count (its filter blocks as built, a few
                // header bytes each included); the rules above give the rate.
                bits,
                keys,
                formula_fp,
                probes: l0_probes,
            };
        }
        let bpk = bits as f64 / keys.max(1) as f64;
        let probes = fjall_probes(bpk.floor().max(1.0));
        FilterShape {
            bits,
            keys,
            formula_fp: textbook(bits, keys, probes),
            probes,
        }
    }

    fn tables(&self) -> usize {
        self.open
            .as_ref()
            .map(|o| o.keyspace.table_count())
            .unwrap_or(0)
    }

    fn drop_caches(&self) {
        bloomkv_bench::drop_dir_from_page_cache(&self.dir);
    }

    /// The files of every keyspace's `tables` directory: the workload's keyspace and
    /// fjall's own metadata keyspace (a table of about 2 KiB).
    fn disk_bytes(&self) -> Option<u64> {
        let mut bytes = 0;
        for keyspace in std::fs::read_dir(self.dir.join("keyspaces")).ok()? {
            let Ok(tables) = std::fs::read_dir(keyspace.ok()?.path().join("tables")) else {
                continue; // a keyspace without tables yet
            };
            for table in tables {
                bytes += table.ok()?.metadata().ok()?.len();
            }
        }
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_rule_at_ten_bits_per_key() {
        assert_eq!(fjall_probes(10.0), 6);
        assert_eq!(fjall_filter_bits(100_000, 10.0), 1_000_000);
        assert_eq!(fjall_filter_bits(3, 10.0), 32);
        // The default L0 rule: 0.01% is −ln(1e-4)/ln²2 ≈ 19.17 bits/key, rounded up
        // to whole bytes over the table; ⌊19 · ln 2⌋ = 13 probes.
        let (m, k) = fjall_fp_rate_filter(100_000, 0.0001);
        assert!((1_916_000..1_918_000).contains(&m), "{m}");
        assert_eq!(m % 8, 0);
        assert_eq!(k, 13);
    }
}
