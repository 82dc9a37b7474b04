//! The metadata cache: the index and filter partitions of partitioned tables (format
//! version 8) that a store holds in memory, at most `Options::metadata_budget` bytes.
//!
//! A partitioned table keeps only its *top level* in memory for its whole life (one
//! entry per partition and a coarse filter, `partition.rs`); a lookup that needs a
//! partition asks this cache, and on a miss reads the partition from the file (one
//! counted read), checks and decodes it, and offers it here. The top levels of the
//! open tables are charged to the same budget (*pinned* bytes): a budget cannot be met
//! by tiny partitions under large top levels. So, at every moment,
//!
//! ```text
//!   pinned (top levels of open tables) + held (partitions) <= budget
//!       unless the top levels alone exceed it: then no partition is held
//! ```
//!
//! Two pools, one eviction order: when a partition has to go, the least recently used
//! *index* partition goes first, a filter partition only when no index partition is
//! left. A filter partition answers "absent" for most of the probes that reach it
//! (most probes of a store are for keys a table does not hold), and an index partition
//! is needed only after a filter's "maybe", which for an absent key is rare: the bytes
//! of the budget serve most lookups as filters.
//!
//! ```text
//!   key = (table id, partition number)    one map per pool
//!   lookup ─► filter pool ─hit─► answer              (metadata_cache_hits)
//!               │ miss ─► read, check, decode, insert (metadata_cache_misses)
//!   insert ─► evict LRU index partitions, then LRU filter partitions, until it fits
//! ```
//!
//! A table that is dropped (compacted away, or let go of by its store) takes its
//! partitions out with it, so the held bytes are always those of live tables.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bloomkv_filter::FilterReader;

use super::index::IndexBlock;

/// Bytes charged per cached partition beyond what it decodes to: the map entry, the
/// order entry and the `Arc`.
pub(crate) const PARTITION_OVERHEAD: usize = 96;

/// One cached partition.
#[derive(Clone, Debug)]
pub(crate) enum Partition {
    /// A filter partition, opened by the table's policy.
    Filter(Arc<dyn FilterReader>),
    /// An index partition.
    Index(Arc<IndexBlock>),
}

/// Which pool a partition lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pool {
    /// Filter partitions (kept longest).
    Filter,
    /// Index partitions (evicted first).
    Index,
}

type Key = (u64, u32);

/// One pool: partitions by key, and their last use in order.
#[derive(Default)]
struct Lru {
    map: HashMap<Key, (Partition, usize, u64)>,
    order: BTreeMap<u64, Key>,
    bytes: usize,
}

impl Lru {
    fn get(&mut self, key: Key, tick: u64) -> Option<Partition> {
        let (part, _, last) = self.map.get_mut(&key)?;
        self.order.remove(&*last);
        *last = tick;
        self.order.insert(tick, key);
        Some(part.clone())
    }

    fn insert(&mut self, key: Key, part: Partition, charge: usize, tick: u64) {
        self.remove(key);
        self.map.insert(key, (part, charge, tick));
        self.order.insert(tick, key);
        self.bytes += charge;
    }

    fn remove(&mut self, key: Key) {
        if let Some((_, charge, last)) = self.map.remove(&key) {
            self.order.remove(&last);
            self.bytes -= charge;
        }
    }

    fn evict_oldest(&mut self) -> bool {
        let Some((_, key)) = self.order.pop_first() else {
            return false;
        };
        if let Some((_, charge, _)) = self.map.remove(&key) {
            self.bytes -= charge;
        }
        true
    }
}

#[derive(Default)]
struct Pools {
    filters: Lru,
    indexes: Lru,
    tick: u64,
}

/// A store's cache of index and filter partitions, bounded by its metadata budget.
pub(crate) struct MetaCache {
    budget: usize,
    /// Bytes of the open partitioned tables' top levels.
    pinned: AtomicUsize,
    /// Bytes of the partitions held (mirrors the pools, read without the lock).
    held: AtomicUsize,
    pools: Mutex<Pools>,
}

impl std::fmt::Debug for MetaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaCache")
            .field("budget", &self.budget)
            .field("pinned", &self.pinned_bytes())
            .field("held", &self.held_bytes())
            .finish()
    }
}

impl MetaCache {
    /// A cache of at most `budget` bytes, top levels included.
    pub(crate) fn new(budget: usize) -> MetaCache {
        MetaCache {
            budget,
            pinned: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            pools: Mutex::new(Pools::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pools> {
        // A panic while holding the lock leaves the pools consistent (every change is
        // made whole before the next): carry on with them.
        self.pools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Charges a table's top level while it is open.
    pub(crate) fn pin(&self, bytes: usize) {
        self.pinned.fetch_add(bytes, Ordering::Relaxed);
        let mut pools = self.lock();
        self.shrink(&mut pools);
    }

    /// Releases a closed table's top level and drops its `partitions` partitions.
    pub(crate) fn unpin(&self, bytes: usize, table: u64, partitions: u32) {
        self.pinned.fetch_sub(bytes, Ordering::Relaxed);
        let mut pools = self.lock();
        for p in 0..partitions {
            pools.filters.remove((table, p));
            pools.indexes.remove((table, p));
        }
        self.publish(&pools);
    }

    /// Bytes of open tables' top levels.
    pub(crate) fn pinned_bytes(&self) -> usize {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Bytes of partitions held.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The cached partition, if held (and marks it used).
    pub(crate) fn get(&self, pool: Pool, table: u64, partition: u32) -> Option<Partition> {
        let mut pools = self.lock();
        pools.tick += 1;
        let tick = pools.tick;
        match pool {
            Pool::Filter => pools.filters.get((table, partition), tick),
            Pool::Index => pools.indexes.get((table, partition), tick),
        }
    }

    /// Offers a partition that passed every check; it stays only if the budget has
    /// room for it once index partitions, then older filter partitions, have made way.
    pub(crate) fn insert(
        &self,
        pool: Pool,
        table: u64,
        partition: u32,
        part: Partition,
        bytes: usize,
    ) {
        let charge = bytes + PARTITION_OVERHEAD;
        if charge.saturating_add(self.pinned_bytes()) > self.budget {
            return; // it would only push everything else out and then itself
        }
        let mut pools = self.lock();
        pools.tick += 1;
        let tick = pools.tick;
        match pool {
            Pool::Filter => pools.filters.insert((table, partition), part, charge, tick),
            Pool::Index => pools.indexes.insert((table, partition), part, charge, tick),
        }
        self.shrink(&mut pools);
    }

    /// Evicts until pinned + held fits the budget: index partitions first.
    fn shrink(&self, pools: &mut Pools) {
        let room = self.budget.saturating_sub(self.pinned_bytes());
        while pools.filters.bytes + pools.indexes.bytes > room {
            if !pools.indexes.evict_oldest() && !pools.filters.evict_oldest() {
                break;
            }
        }
        self.publish(pools);
    }

    fn publish(&self, pools: &Pools) {
        self.held
            .store(pools.filters.bytes + pools.indexes.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_part() -> Partition {
        let mut b = super::super::index::IndexBuilder::default();
        b.add(
            b"k",
            super::super::footer::BlockHandle {
                offset: 0,
                size: 10,
            },
        );
        Partition::Index(Arc::new(IndexBlock::decode(b.finish(), 100, true).unwrap()))
    }

    #[test]
    fn held_bytes_stay_within_the_budget_minus_the_top_levels() {
        let cache = MetaCache::new(1000);
        for p in 0..20 {
            cache.insert(Pool::Index, 1, p, index_part(), 100);
            assert!(cache.held_bytes() <= 1000);
        }
        assert_eq!(cache.held_bytes(), 5 * 196);
        cache.pin(600);
        assert!(cache.held_bytes() + cache.pinned_bytes() <= 1000);
        cache.pin(600);
        assert_eq!(
            cache.held_bytes(),
            0,
            "top levels over the budget hold nothing"
        );
        cache.insert(Pool::Index, 1, 99, index_part(), 10);
        assert_eq!(cache.held_bytes(), 0);
    }

    #[test]
    fn index_partitions_go_before_filter_partitions() {
        let cache = MetaCache::new(1000);
        cache.insert(Pool::Filter, 1, 0, index_part(), 200); // the pool is what counts
        cache.insert(Pool::Index, 1, 0, index_part(), 200);
        cache.insert(Pool::Index, 1, 1, index_part(), 200);
        cache.insert(Pool::Filter, 1, 1, index_part(), 200);
        // Four of 296 bytes do not fit: the oldest index partition went.
        assert!(cache.get(Pool::Index, 1, 0).is_none());
        assert!(cache.get(Pool::Filter, 1, 0).is_some());
        assert!(cache.get(Pool::Index, 1, 1).is_some());
        cache.insert(Pool::Filter, 1, 2, index_part(), 200);
        assert!(cache.get(Pool::Index, 1, 1).is_none());
        assert!(cache.get(Pool::Filter, 1, 0).is_some());
        cache.unpin(0, 1, 3);
        assert_eq!(
            cache.held_bytes(),
            0,
            "a closed table's partitions leave with it"
        );
    }
}
