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
pub mod multi;
pub mod plan;
pub mod ratios;
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

/// How often a settling store is asked whether it is idle.
pub const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// When a store said it was idle, as [`wait_idle`] saw it.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    /// The moment the store first said "idle" in the streak that ended the wait.
    pub at: std::time::Instant,
    /// Times the store was asked.
    pub polls: u32,
    /// Which of those answers (from 1) was that first "idle".
    pub idle_poll: u32,
}

/// Asks `busy` every [`SETTLE_POLL`] until it says `false` twice in a row, at most
/// `limit`; an error if the store never goes idle. The settle ends at the *first* of
/// the two idle answers (the second only confirms that no flush or compaction was
/// scheduled in between), so a store that is idle at once costs one answer, whatever
/// the poll interval: no fixed floor. Every store of the comparison settles through
/// here, on this clock.
pub fn wait_idle(
    mut busy: impl FnMut() -> Result<bool, bloomkv_bench::BenchError>,
    limit: std::time::Duration,
) -> Result<Idle, bloomkv_bench::BenchError> {
    let started = std::time::Instant::now();
    let mut polls = 0u32;
    let mut first_idle: Option<(std::time::Instant, u32)> = None;
    loop {
        let answer = busy()?;
        let now = std::time::Instant::now();
        polls += 1;
        if answer {
            first_idle = None;
        } else if let Some((at, idle_poll)) = first_idle {
            return Ok(Idle {
                at,
                polls,
                idle_poll,
            });
        } else {
            first_idle = Some((now, polls));
        }
        if started.elapsed() > limit {
            return Err(format!("compaction still busy after {limit:?}").into());
        }
        std::thread::sleep(SETTLE_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_ends_at_the_first_idle_answer_of_the_final_streak() {
        let mut answers = [true, false, true, true, false, false, true].into_iter();
        let idle = wait_idle(
            || Ok(answers.next().unwrap_or(true)),
            std::time::Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!((idle.polls, idle.idle_poll), (6, 5));
        // Idle at once: two answers, the first one ends the settle.
        let idle = wait_idle(|| Ok(false), std::time::Duration::from_secs(60)).unwrap();
        assert_eq!((idle.polls, idle.idle_poll), (2, 1));
        // A store that never goes idle is an error, not a hang.
        assert!(wait_idle(|| Ok(true), std::time::Duration::from_millis(5)).is_err());
    }
}
