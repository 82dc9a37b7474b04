//! The block cache keeps decoded data blocks in memory, so a get of a hot key costs no
//! read of the table file.
//!
//! One cache per store, shared by all its tables, bounded in bytes
//! (`Options::block_cache_size`; 0 = no cache). It holds data blocks only, after their
//! checksum passed, their contents were decompressed and their restart array was
//! validated: a block that fails any check never enters it, and a hit is served without
//! checking again. Index and filter blocks need no cache: every open table keeps them in
//! memory for its whole life — except under `Options::metadata_budget`, whose
//! partitions have a cache of their own (`meta_cache.rs`), so that data blocks never
//! push them out.
//!
//! ```text
//!   key = (table id, block offset)      value = Block (decoded, validated)
//!   table id: unique per opened table file for the life of the process,
//!             never reused, so a deleted table's blocks can never be served
//!
//!   get ─► index ─► cache? ──hit──► search the block (block_cache_hits)
//!                     │miss
//!                     └──► one read of the file, check, decode, insert
//!                          (block_cache_misses, data_block_reads)
//! ```
//!
//! **Sharded and byte-weighted**: `quick_cache`, the cache fjall uses — shards with a
//! lock each, every entry weighted by its bytes (plus a fixed overhead for the entry
//! itself), eviction by its CLOCK-based hot/cold policy: a block read once enters the
//! cold part and only a second hit promotes it. Scans and compactions look blocks up
//! but never insert: one big scan neither floods the cache nor evicts the hot set.
//!
//! **Admitted on a second miss once full** ([`Admission`]): until the cache has taken
//! in its capacity's worth of blocks every block read for a get is kept; after that a
//! block enters only when it was missed once already in the recent past (a
//! *doorkeeper*, as in TinyLFU). A full cache keeps the blocks that are asked for
//! again, and a block asked for once — most of them when the store is much larger
//! than the cache — costs no insert, no eviction and no fresh 4 KiB of memory the CPU
//! caches do not hold: its buffer is freed after the get and reused by the next read.
//!
//! Blocks of tables that compaction deleted are not removed eagerly: nothing can ask
//! for their id again, and they age out like any cold block.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomkv_filter::KeyHash;
use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

use super::block::Block;

/// Bytes charged per cached block beyond its contents: the entry, its key and the
/// block's bookkeeping.
pub const BLOCK_OVERHEAD: u64 = 96;

/// A fresh id for a table file opened by a store.
pub(crate) fn next_table_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Weighs a block by the bytes it keeps alive.
#[derive(Debug, Clone, Copy)]
struct ByBytes;

impl Weighter<(u64, u64), Cached> for ByBytes {
    fn weight(&self, _key: &(u64, u64), block: &Cached) -> u64 {
        weight(&block.0)
    }
}

/// The bytes a cached block is charged: its contents and [`BLOCK_OVERHEAD`].
fn weight(block: &Block) -> u64 {
    block.memory_bytes() as u64 + BLOCK_OVERHEAD
}

/// A cached block whose clone — what a hit returns — first asks for the block's
/// lines.
///
/// A hit clones the block out of the cache, and the clone's reference count sits in
/// its own allocation: an atomic increment there is a cache miss that, being a locked
/// instruction, makes every later load wait for it. Asking for the block's lines
/// before it lets those misses overlap it instead of following it.
struct Cached(Block);

impl Clone for Cached {
    #[inline]
    fn clone(&self) -> Cached {
        if !QUIET.with(Cell::get) {
            self.0.prefetch();
        }
        Cached(self.0.clone())
    }
}

thread_local! {
    /// Set while [`BlockCache::get_quiet`] clones a block out of the cache: a batch asks
    /// for the lines of its blocks itself, stage by stage (`sstable/batch.rs`).
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Decides which blocks read for gets enter the cache.
///
/// While fewer than the cache's capacity in bytes have been admitted, every block is.
/// From then on (the cache is full, or was), a block is admitted when its key is the
/// one last refused in its slot of `recent`: a table of key fingerprints, one per
/// block the cache can hold, each slot overwritten by the latest refused key that maps
/// to it. A block missed twice within about that many misses enters; one missed once
/// leaves only its fingerprint behind.
///
/// Measured over the flat shape's 1M keys and an 8 MiB cache (`examples/point_get.rs`,
/// docs/notes/2026-12-block-cache-admission.md): present gets 8–14% faster, and more of them served by the
/// cache (8.0% against 7.3%), since the blocks it holds stay long enough to be asked
/// for again.
struct Admission {
    /// Bytes of blocks admitted while filling, up to the capacity; then it stays.
    filled: AtomicU64,
    capacity: u64,
    recent: Box<[AtomicU64]>,
}

impl Admission {
    fn new(capacity: u64) -> Admission {
        let slots = (capacity / 4096).clamp(64, 1 << 20).next_power_of_two() as usize;
        Admission {
            filled: AtomicU64::new(0),
            capacity,
            recent: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Whether the block at (`table`, `offset`), of `weight` bytes, enters the cache.
    #[inline]
    fn admits(&self, table: u64, offset: u64, weight: u64) -> bool {
        if self.filled.load(Ordering::Relaxed) < self.capacity {
            self.filled.fetch_add(weight, Ordering::Relaxed);
            return true;
        }
        // The filters' key hash over both numbers; `| 1` keeps it off 0 (empty).
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&table.to_le_bytes());
        key[8..].copy_from_slice(&offset.to_le_bytes());
        let h = KeyHash::of(&key).h1;
        let fingerprint = h | 1;
        let slot = &self.recent[h as usize & (self.recent.len() - 1)];
        if slot.load(Ordering::Relaxed) == fingerprint {
            return true;
        }
        slot.store(fingerprint, Ordering::Relaxed);
        false
    }
}

/// Decoded data blocks of one store's tables, bounded in bytes.
pub(crate) struct BlockCache {
    cache: Cache<(u64, u64), Cached, ByBytes>,
    admission: Admission,
}

impl BlockCache {
    /// A cache of at most `capacity` bytes, or `None` for 0.
    pub(crate) fn new(capacity: usize) -> Option<BlockCache> {
        if capacity == 0 {
            return None;
        }
        let capacity = capacity as u64;
        // Shards of at least 512 KiB each (a shard refuses a block heavier than its
        // share), up to 16: enough that threads seldom meet on one shard's lock.
        let shards = (capacity / (512 << 10)).clamp(1, 16).next_power_of_two() as usize;
        let shards = if shards as u64 * (512 << 10) > capacity && shards > 1 {
            shards / 2
        } else {
            shards
        };
        let options = OptionsBuilder::new()
            .estimated_items_capacity((capacity / 4096).max(16) as usize)
            .weight_capacity(capacity)
            .shards(shards)
            .build()
            .ok()?;
        Some(BlockCache {
            cache: Cache::with_options(options, ByBytes, Default::default(), Default::default()),
            admission: Admission::new(capacity),
        })
    }

    /// The block at `offset` of table `table`, if cached.
    #[inline]
    pub(crate) fn get(&self, table: u64, offset: u64) -> Option<Block> {
        self.cache.get(&(table, offset)).map(|c| c.0)
    }

    /// [`get`](Self::get) without asking for the block's lines: a batch looks up all
    /// its blocks first and then asks for only the lines its searches read, each stage
    /// for all blocks at once. 65 hints per 4 KiB block would fill the CPU's few
    /// outstanding-miss slots, so that a batch's misses could no longer overlap.
    #[inline]
    pub(crate) fn get_quiet(&self, table: u64, offset: u64) -> Option<Block> {
        QUIET.with(|q| q.set(true));
        let block = self.cache.get(&(table, offset)).map(|c| c.0);
        QUIET.with(|q| q.set(false));
        block
    }

    /// Whether the block at `offset` of table `table` is cached, without touching its
    /// recency.
    #[inline]
    pub(crate) fn contains(&self, table: u64, offset: u64) -> bool {
        self.cache.peek(&(table, offset)).is_some()
    }

    /// Keeps `block` (decoded and validated) as the block at `offset` of `table`, if
    /// [`Admission`] lets it in.
    pub(crate) fn insert(&self, table: u64, offset: u64, block: Block) {
        if self.admission.admits(table, offset, weight(&block)) {
            self.cache.insert((table, offset), Cached(block));
        }
    }

    /// Bytes held now, overheads included (never above the capacity once an insert
    /// has returned).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn block(fill: u8, len: usize) -> Block {
        // `len - 8` bytes of entry area, one restart point at 0, the count 1: a block
        // `Block::new` accepts (its entries are never decoded here).
        let mut b = vec![fill; len - 8];
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        let n = b.len();
        Block::new(Bytes::from(b), n).expect("valid block")
    }

    #[test]
    fn zero_bytes_means_no_cache() {
        assert!(BlockCache::new(0).is_none());
    }

    #[test]
    fn a_cached_block_comes_back_and_other_tables_do_not_see_it() {
        let cache = BlockCache::new(1 << 20).unwrap();
        cache.insert(7, 4096, block(1, 4096));
        assert!(cache.get(7, 4096).is_some());
        assert!(cache.get(8, 4096).is_none());
        assert!(cache.get(7, 0).is_none());
    }

    #[test]
    fn the_cache_stays_within_its_budget() {
        let capacity = 256 << 10;
        let cache = BlockCache::new(capacity).unwrap();
        let mut state = 12345u64;
        for _ in 0..5_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let offset = (state >> 33) % 1_000;
            let len = 512 + ((state >> 20) % 4096) as usize;
            if cache.get(1, offset).is_none() {
                cache.insert(1, offset, block(2, len));
            }
            assert!(
                cache.used_bytes() <= capacity as u64,
                "{}",
                cache.used_bytes()
            );
        }
        // And it was used, not left empty.
        assert!(cache.used_bytes() > capacity as u64 / 2);
    }

    /// Fills a 256 KiB cache with table 1's blocks 0..n, as gets would.
    fn full_cache() -> (BlockCache, Vec<u64>) {
        let cache = BlockCache::new(256 << 10).unwrap();
        let mut offsets = Vec::new();
        for i in 0..(256 << 10) / 4096 {
            let offset = i * 4096;
            cache.insert(1, offset, block(1, 4096));
            offsets.push(offset);
        }
        (cache, offsets)
    }

    #[test]
    fn a_full_cache_takes_a_block_on_its_second_miss() {
        let (cache, _) = full_cache();
        cache.insert(2, 0, block(2, 4096));
        assert!(cache.get(2, 0).is_none(), "a first miss is not admitted");
        cache.insert(2, 0, block(2, 4096));
        assert!(cache.get(2, 0).is_some(), "a second miss is");
    }

    #[test]
    fn blocks_asked_for_once_do_not_push_out_what_a_full_cache_holds() {
        let (cache, held) = full_cache();
        let before = held.iter().filter(|&&o| cache.get(1, o).is_some()).count();
        assert!(before > held.len() / 2, "{before} of {}", held.len());
        for offset in 0..10_000 {
            cache.insert(3, offset * 4096, block(3, 4096));
        }
        let after = held.iter().filter(|&&o| cache.get(1, o).is_some()).count();
        assert_eq!(after, before);
        assert!((0..10_000).all(|o| cache.get(3, o * 4096).is_none()));
    }
}
