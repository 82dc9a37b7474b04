//! bloomkv's disk-I/O savings workload run on peer LSM stores, side by side with bloomkv.
//!
//! Every store here implements the benchmark's [`BenchStore`](bloomkv_bench::BenchStore),
//! so the very same workload code (`bloomkv_bench::run_store`: same keys, same
//! shuffled load order, same number of tables, same lookups) drives each of them, and
//! their rows land in one table. Each store is set up as its maintainers ship it —
//! its own default block cache, its own filter policy where it has one — plus rows at
//! a matching cache and at a cache that holds everything:
//!
//! ```text
//! store         layout                     filter                     block cache
//! bloomkv       flat: --tables, no merge   none / Bloom / Ribbon      8 MiB (its default)
//! fjall         flat: --tables, no merge   none / 10 bits/key / own   32 MiB (its default)
//! rocksdb       flat: --tables, no merge   none / 10 bits/key         32 MiB (its default)
//! every store   defaults, compaction on    as above                   default (timed fill)
//! every store   small levels, compaction   per-level defaults         default (--shape leveled)
//! ```
//!
//! In the flat layout each store holds compaction off while loading and querying, so
//! lookups face exactly `--tables` overlapping tables, as they do in bloomkv.

pub mod bloomkv_auto;
pub mod environment;
pub mod fill;
pub mod fjall_store;
mod labeled;
pub mod lz4_writers;
mod page_cache;
pub mod plan;
pub mod report;
#[cfg(feature = "rocksdb")]
pub mod rocksdb_store;
pub mod tpch;
pub mod ycsb;

pub use bloomkv_auto::open_auto;
pub use fjall_store::{FjallFilter, FjallStore};
pub use labeled::Labeled;
#[cfg(feature = "rocksdb")]
pub use rocksdb_store::RocksDbStore;

pub use bloomkv_bench::check_lookups;

/// How a store lays its tables out for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The flat shape: one table per `end_table`, compaction held off.
    Flat,
    /// Compaction on, everything else at the store's defaults: the timed fill.
    Defaults,
    /// Compaction on with small level budgets ([`SMALL_MEMTABLE`], [`SMALL_TABLE`],
    /// [`SMALL_LEVEL1`] where the store has such a knob), so that a million keys
    /// settle over several levels: the leveled shape.
    SmallLevels,
}

/// Block cache of a store: its own default, or a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheSize {
    /// What the store uses when not told (bloomkv 8 MiB, fjall 32 MiB, RocksDB
    /// 32 MiB).
    Default,
    /// This many bytes.
    Bytes(usize),
}

impl CacheSize {
    /// The size in bytes, given the store's default.
    pub fn bytes(self, default: usize) -> usize {
        match self {
            CacheSize::Default => default,
            CacheSize::Bytes(b) => b,
        }
    }
}

/// fjall 3's block cache when none is set (`Config::default`, 32 MiB).
pub const FJALL_DEFAULT_CACHE: usize = 32 << 20;

/// RocksDB's block cache when none is set: a 32 MiB HyperClockCache (11.x,
/// `BlockBasedTableFactory::InitializeOptions`).
pub const ROCKSDB_DEFAULT_CACHE: usize = 32 << 20;

/// The cache-holds-everything rows: larger than all the tables of the default
/// workload (about 120 MB of keys and values).
pub const CACHE_ALL: usize = 512 << 20;

/// Memtable size of the leveled shape.
pub const SMALL_MEMTABLE: usize = 2 << 20;

/// Table size compaction aims at in the leveled shape.
pub const SMALL_TABLE: u64 = 1 << 20;

/// Level-1 budget of the leveled shape (bloomkv's and RocksDB's; fjall derives its
/// own as table size × L0 trigger).
pub const SMALL_LEVEL1: u64 = 256 << 10;

/// Polls `busy` until it has said `false` several times in a row (a compaction can
/// be scheduled just after a flush finishes), at most `limit`; an error if the store
/// never goes idle.
pub fn wait_idle(
    mut busy: impl FnMut() -> Result<bool, bloomkv_bench::BenchError>,
    limit: std::time::Duration,
) -> Result<(), bloomkv_bench::BenchError> {
    let started = std::time::Instant::now();
    let mut quiet = 0;
    while quiet < 5 {
        if busy()? {
            quiet = 0;
        } else {
            quiet += 1;
        }
        if started.elapsed() > limit {
            return Err(format!("compaction still busy after {limit:?}").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}
