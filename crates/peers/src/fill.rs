//! Stores with compaction on: the timed fill, and the leveled shape built by it.
//!
//! **Fill.** The workload's keys, made before the clock starts, are written in the
//! same shuffled order into a store opened with compaction on and sync off (no fsync
//! per write; each store hands its log to the OS as it does by default). Two times
//! are taken: until the last `put` returns, and until the store has also flushed its
//! memtable and its compaction is idle ("settled"): a store that defers work to
//! background threads cannot hide it. "Settled" is measured alike for every store:
//! its own flush call, then the question "anything running or due?" every
//! millisecond, and the clock stops at the first "no" (confirmed by the next
//! answer, [`crate::wait_idle`]).
//!
//! **Leveled shape.** The same fill into a store with small level budgets, settled,
//! then the workload's absent and present gets, measured by the very same phase code
//! as the flat shape (`bloomkv_bench::run_phase`).

use std::time::{Duration, Instant};

use bloomkv_bench::{
    key, run_phase, BenchError, BenchStore, BloomkvStore, NoProgress, Phase, Row, Workload, KEY_LEN,
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use crate::{FjallStore, Idle};

/// A store with compaction on: bloomkv, fjall or RocksDB (boxed: they differ in size).
pub enum AutoStore {
    /// bloomkv.
    Bloomkv(Box<BloomkvStore>),
    /// fjall.
    Fjall(Box<FjallStore>),
    /// RocksDB.
    #[cfg(feature = "rocksdb")]
    RocksDb(Box<crate::RocksDbStore>),
}

impl AutoStore {
    /// The store as the workload sees it.
    pub fn store(&mut self) -> &mut dyn BenchStore {
        match self {
            AutoStore::Bloomkv(s) => s.as_mut() as &mut dyn BenchStore,
            AutoStore::Fjall(s) => s.as_mut() as &mut dyn BenchStore,
            #[cfg(feature = "rocksdb")]
            AutoStore::RocksDb(s) => s.as_mut() as &mut dyn BenchStore,
        }
    }

    /// Asks the store to flush its memtable (its own call, which returns once the
    /// flush is written), then asks it every millisecond whether any flush or
    /// compaction is still running or due, until it says "idle" ([`crate::wait_idle`]:
    /// the same loop and clock for every store).
    pub fn settle(&mut self) -> Result<Idle, BenchError> {
        let limit = Duration::from_secs(600);
        match self {
            AutoStore::Bloomkv(s) => {
                // `wait_for_compaction` flushes and runs what compaction is due in
                // this thread; when it returns the store has nothing left to do.
                s.settle()?;
                crate::wait_idle(|| Ok(false), limit)
            }
            AutoStore::Fjall(s) => {
                s.flush()?;
                crate::wait_idle(|| s.busy(), limit)
            }
            #[cfg(feature = "rocksdb")]
            AutoStore::RocksDb(s) => {
                s.flush()?;
                crate::wait_idle(|| s.busy(), limit)
            }
        }
    }

    /// Tables per level, empty levels left out.
    pub fn levels(&self) -> Vec<(usize, usize)> {
        match self {
            AutoStore::Bloomkv(s) => s.levels(),
            AutoStore::Fjall(s) => s.levels(),
            #[cfg(feature = "rocksdb")]
            AutoStore::RocksDb(s) => s.levels(),
        }
    }
}

/// One timed fill.
#[derive(Debug, Clone, Serialize)]
pub struct FillResult {
    /// The row: store and setup.
    pub store: String,
    /// Keys written.
    pub keys: u64,
    /// Nanoseconds per `put`, until the last one returned.
    pub ns_per_put: f64,
    /// Milliseconds from the last `put` until the store first said it was idle
    /// (flushed, no compaction running or due), polled every millisecond.
    pub settle_ms: f64,
    /// Times the store was asked whether it was idle.
    pub settle_polls: u32,
    /// Milliseconds from the first `put` until settled.
    pub total_ms: f64,
    /// Tables per level once settled, as `[level, tables]`.
    pub levels: Vec<(usize, usize)>,
}

/// Levels as `L0 3 · L1 4 · L2 31`.
pub fn levels_text(levels: &[(usize, usize)]) -> String {
    levels
        .iter()
        .map(|(l, n)| format!("L{l} {n}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Writes the workload's keys in its shuffled order into `store`, and settles it.
pub fn fill(store: &mut AutoStore, w: &Workload) -> Result<FillResult, BenchError> {
    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(w.seed));
    let keys: Vec<[u8; KEY_LEN]> = order.iter().map(|&i| key(2 * i)).collect();
    drop(order);
    let value = vec![b'v'; w.value_size];
    let label = store.store().label();
    let started = Instant::now();
    {
        let s = store.store();
        for k in &keys {
            s.put(k, &value)?;
        }
    }
    let puts = started.elapsed();
    let idle = store.settle()?;
    let total = idle.at.duration_since(started);
    Ok(FillResult {
        store: label,
        keys: keys.len() as u64,
        ns_per_put: puts.as_nanos() as f64 / keys.len().max(1) as f64,
        settle_ms: (total - puts).as_secs_f64() * 1000.0,
        total_ms: total.as_secs_f64() * 1000.0,
        settle_polls: idle.polls,
        levels: store.levels(),
    })
}

/// The leveled and scale shapes on `store`: fill and settle (timed), then the absent
/// and present phases. Every present key must be found and no absent one.
pub fn run_leveled(
    store: &mut AutoStore,
    w: &Workload,
) -> Result<(FillResult, Vec<Row>), BenchError> {
    let filled = fill(store, w)?;
    let s = store.store();
    let shape = s.filter_shape();
    let mut rows = Vec::new();
    for phase in [Phase::Absent, Phase::Present] {
        let result = run_phase(&*s, w, phase, &NoProgress)?;
        rows.push(Row::new(&s.label(), phase, &result, &shape, w.keys));
    }
    bloomkv_bench::check_lookups(&rows)?;
    Ok((filled, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CacheSize, FjallFilter, Layout};

    /// Every store's fill ends through the same poller on the same clock: each was
    /// asked at least twice (an idle answer and its confirmation), and its settle is
    /// inside its total.
    #[test]
    fn every_store_settles_through_the_same_poller() {
        let dir = tempfile::tempdir().unwrap();
        let w = Workload {
            keys: 3000,
            ..Workload::default()
        };
        let setup = crate::bloomkv_auto::BloomkvSetup {
            filter: bloomkv::kv::FilterKind::CacheLocalBloom,
            bits_per_key: 10.0,
            allocation: bloomkv::kv::FilterAllocation::Uniform,
            no_last_level_filter: false,
            cache: CacheSize::Default,
        };
        let mut stores = vec![
            AutoStore::Bloomkv(Box::new(
                crate::open_auto("b", dir.path().join("b"), setup, Layout::Defaults).unwrap(),
            )),
            AutoStore::Fjall(Box::new(
                FjallStore::create(
                    "f",
                    dir.path().join("f"),
                    FjallFilter::Default,
                    CacheSize::Default,
                    Layout::Defaults,
                )
                .unwrap(),
            )),
        ];
        #[cfg(feature = "rocksdb")]
        stores.push(AutoStore::RocksDb(Box::new(
            crate::RocksDbStore::create(
                "r",
                dir.path().join("r"),
                Some(10.0),
                CacheSize::Default,
                Layout::Defaults,
                false,
            )
            .unwrap(),
        )));
        for store in &mut stores {
            let f = fill(store, &w).unwrap();
            assert!(f.settle_polls >= 2, "{}: {} polls", f.store, f.settle_polls);
            assert!(f.settle_ms >= 0.0 && f.settle_ms <= f.total_ms, "{f:?}");
            assert_eq!(f.keys, 3000);
        }
    }
}
