//! The table cache bounds how many table files the store holds open at once.
//!
//! A store's tables keep their index and filter in memory for their whole life, so a
//! filter negative costs no I/O whatever this cache does. Only the file descriptor,
//! needed to read a data block, comes and goes: each table has a [`FileSlot`] holding
//! its open file or nothing, and the cache closes the least recently useful files when
//! more than `max_open_files` are open (RocksDB's and LevelDB's `max_open_files`).
//!
//! ```text
//!   FileSlot (one per table)           TableCache
//!   ┌──────────────────────────┐      ┌──────────────────────────────────┐
//!   │ path                     │      │ open count ≤ capacity            │
//!   │ file: Some(fd) | None ───┼─────►│ clock: [slot, slot, slot, …]     │
//!   │ referenced: bool         │      │          ▲ hand                  │
//!   │ obsolete: bool           │      └──────────────────────────────────┘
//!   └──────────────────────────┘
//! ```
//!
//! **Reads do not write shared memory.** A read loads the slot's pointer
//! ([`arc_swap`]: a thread-local reservation, no reference count bumped) and sets the
//! slot's `referenced` bit only if it is clear. The lock is taken only to open a file.
//!
//! **Eviction is CLOCK** (second chance): the hand walks the slots; a referenced slot
//! loses its bit and is passed over, an unreferenced one is closed. A read in flight
//! keeps its file alive until it finishes, so the count of descriptors can exceed the
//! budget by at most the number of concurrent reads.
//!
//! **Deletion waits for the last reader.** Once a compaction's manifest no longer names
//! a table, its slot is marked obsolete; the file is deleted when the slot drops, that
//! is when no version, scan or read still refers to it. A closed descriptor can then
//! always be reopened by whoever still reads the table.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arc_swap::ArcSwapOption;

use super::block_cache::{self, BlockCache};
use super::meta_cache::MetaCache;
use crate::fs::{FileSystem, RandomAccessFile};

/// An open table file.
struct OpenFile(Arc<dyn RandomAccessFile>);

/// Bounds the open table files of one store.
pub(crate) struct TableCache {
    fs: Arc<dyn FileSystem>,
    capacity: usize,
    open: AtomicUsize,
    clock: Mutex<Clock>,
    /// The store's decoded data blocks (`None`: `block_cache_size` is 0).
    blocks: Option<BlockCache>,
    /// The partitions of partitioned tables (`None`: no `metadata_budget`).
    metadata: Option<Arc<MetaCache>>,
}

#[derive(Default)]
struct Clock {
    /// Every table that has opened its file once, while it lives; dead entries are
    /// dropped by `evict` as the hand passes and by `register` when they pile up.
    slots: Vec<Weak<FileSlot>>,
    hand: usize,
    /// `slots.len()` at which `register` next sweeps out dead entries.
    sweep_at: usize,
}

/// Fewest entries in the clock list before `register` sweeps it.
const MIN_SWEEP: usize = 64;

impl Clock {
    /// Adds a slot that has just opened its file for the first time.
    ///
    /// A store under `max_open_files` never evicts, so `evict` never meets the entries
    /// of the tables compaction deleted; without a sweep here the list would keep one
    /// per table the store ever opened. Sweeping when the list has doubled since the
    /// last sweep costs O(1) per table, amortized, and keeps the list within twice the
    /// live tables (or `MIN_SWEEP`).
    fn register(&mut self, slot: &Arc<FileSlot>) {
        self.slots.push(Arc::downgrade(slot));
        if self.slots.len() >= self.sweep_at.max(MIN_SWEEP) {
            self.slots.retain(|s| s.strong_count() > 0);
            self.hand = 0;
            self.sweep_at = 2 * self.slots.len();
        }
    }
}

/// One table's file: open or closed, reopened on demand.
pub struct FileSlot {
    path: PathBuf,
    /// The table's key in the block cache: unique, never reused.
    id: u64,
    file: ArcSwapOption<OpenFile>,
    referenced: AtomicBool,
    registered: AtomicBool,
    obsolete: AtomicBool,
    cache: Arc<TableCache>,
}

impl fmt::Debug for FileSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSlot")
            .field("path", &self.path)
            .field("open", &self.file.load().is_some())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Clock>) -> MutexGuard<'_, Clock> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TableCache {
    /// A cache keeping at most `capacity` (≥ 1) table files open.
    pub(crate) fn new(fs: Arc<dyn FileSystem>, capacity: usize) -> Arc<TableCache> {
        TableCache::with_block_cache(fs, capacity, 0, None)
    }

    /// A cache keeping at most `capacity` (≥ 1) table files open, and up to
    /// `block_cache_bytes` of their decoded data blocks (0: none).
    pub(crate) fn with_block_cache(
        fs: Arc<dyn FileSystem>,
        capacity: usize,
        block_cache_bytes: usize,
        metadata_budget: Option<usize>,
    ) -> Arc<TableCache> {
        Arc::new(TableCache {
            fs,
            capacity: capacity.max(1),
            open: AtomicUsize::new(0),
            clock: Mutex::new(Clock::default()),
            blocks: BlockCache::new(block_cache_bytes),
            metadata: metadata_budget.map(|b| Arc::new(MetaCache::new(b))),
        })
    }

    /// Bytes the block cache holds now (0 without one).
    pub(crate) fn block_cache_bytes(&self) -> u64 {
        self.blocks.as_ref().map_or(0, BlockCache::used_bytes)
    }

    /// Bytes of partitions the metadata cache holds now (0 without one).
    pub(crate) fn metadata_cache_bytes(&self) -> u64 {
        self.metadata.as_ref().map_or(0, |m| m.held_bytes() as u64)
    }

    /// A closed slot for the table file at `path`; it opens on first read.
    pub(crate) fn slot(self: &Arc<Self>, path: PathBuf) -> Arc<FileSlot> {
        Arc::new(FileSlot {
            path,
            id: block_cache::next_table_id(),
            file: ArcSwapOption::empty(),
            referenced: AtomicBool::new(false),
            registered: AtomicBool::new(false),
            obsolete: AtomicBool::new(false),
            cache: Arc::clone(self),
        })
    }

    /// Table files open now.
    pub(crate) fn open_files(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    fn open_slot(&self, slot: &Arc<FileSlot>) -> io::Result<Arc<OpenFile>> {
        let mut clock = lock(&self.clock);
        // Another reader may have opened it while this one waited for the lock.
        if let Some(file) = slot.file.load_full() {
            return Ok(file);
        }
        let file = Arc::new(OpenFile(self.fs.open_random(&slot.path)?));
        slot.file.store(Some(Arc::clone(&file)));
        slot.referenced.store(true, Ordering::Relaxed);
        if !slot.registered.swap(true, Ordering::Relaxed) {
            clock.register(slot);
        }
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        if open > self.capacity {
            self.evict(&mut clock, open - self.capacity, slot);
        }
        Ok(file)
    }

    /// Closes up to `excess` files by CLOCK, never `keep` (the file just opened).
    fn evict(&self, clock: &mut Clock, mut excess: usize, keep: &Arc<FileSlot>) {
        // Two sweeps suffice: the first clears every referenced bit it passes.
        let mut steps = 2 * clock.slots.len();
        while excess > 0 && steps > 0 && !clock.slots.is_empty() {
            steps -= 1;
            if clock.hand >= clock.slots.len() {
                clock.hand = 0;
            }
            let Some(slot) = clock.slots[clock.hand].upgrade() else {
                // The table is gone: forget its slot (its drop fixed the count).
                clock.slots.swap_remove(clock.hand);
                continue;
            };
            clock.hand += 1;
            if Arc::ptr_eq(&slot, keep) || slot.file.load().is_none() {
                continue;
            }
            if slot.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            slot.file.store(None);
            self.open.fetch_sub(1, Ordering::Relaxed);
            excess -= 1;
        }
    }
}

impl FileSlot {
    /// Runs `f` on the open file, opening it first if the cache closed it.
    pub fn with_file<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&dyn RandomAccessFile) -> io::Result<R>,
    ) -> io::Result<R> {
        {
            let guard = self.file.load();
            if let Some(file) = guard.as_ref() {
                // Check before writing: a hot table's bit is already set, and a read
                // then writes nothing shared.
                if !self.referenced.load(Ordering::Relaxed) {
                    self.referenced.store(true, Ordering::Relaxed);
                }
                return f(file.0.as_ref());
            }
        }
        let file = self.cache.open_slot(self)?;
        f(file.0.as_ref())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store's block cache, if it has one, and this table's id in it.
    #[inline]
    pub(crate) fn block_cache(&self) -> Option<(&BlockCache, u64)> {
        self.cache.blocks.as_ref().map(|c| (c, self.id))
    }

    /// The store's metadata cache, if it has one, and this table's id in it.
    pub(crate) fn meta_cache(&self) -> Option<(Arc<MetaCache>, u64)> {
        self.cache.metadata.clone().map(|c| (c, self.id))
    }

    /// Marks the table obsolete: its file is deleted when the last reader lets go.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for FileSlot {
    fn drop(&mut self) {
        if self.file.swap(None).is_some() {
            self.cache.open.fetch_sub(1, Ordering::Relaxed);
        }
        if self.obsolete.load(Ordering::Acquire) {
            // Best effort: a file that cannot be deleted now stays; the next open
            // moves it into `lost/` with every table the manifest does not name.
            let _ = self.cache.fs.remove(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::mem::MemFileSystem;

    fn cache_with_files(n: usize, capacity: usize) -> (Arc<TableCache>, Vec<Arc<FileSlot>>) {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/store");
        fs.create_dir_all(dir).unwrap();
        let cache = TableCache::new(fs.clone(), capacity);
        let slots = (0..n)
            .map(|i| {
                let path = dir.join(format!("{i:06}.sst"));
                let mut f = fs.create(&path).unwrap();
                f.append(&[i as u8; 16]).unwrap();
                f.sync().unwrap();
                cache.slot(path)
            })
            .collect();
        (cache, slots)
    }

    fn read_first(slot: &Arc<FileSlot>) -> u8 {
        slot.with_file(|f| {
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, 0)?;
            Ok(b[0])
        })
        .unwrap()
    }

    #[test]
    fn open_files_never_exceed_the_capacity() {
        let (cache, slots) = cache_with_files(20, 5);
        for round in 0..3 {
            for (i, slot) in slots.iter().enumerate() {
                assert_eq!(read_first(slot), i as u8, "round {round}");
                assert!(cache.open_files() <= 5, "{} open", cache.open_files());
            }
        }
        assert_eq!(cache.open_files(), 5);
    }

    #[test]
    fn a_hot_file_survives_a_sweep_of_cold_ones() {
        let (cache, slots) = cache_with_files(10, 3);
        read_first(&slots[0]);
        for slot in &slots[1..] {
            // The hot table is read between every cold one: its bit is always set
            // when the hand comes by, so it is never the one closed.
            read_first(slot);
            read_first(&slots[0]);
            assert!(slots[0].file.load().is_some());
        }
        assert!(cache.open_files() <= 3);
    }

    #[test]
    fn dropped_slots_release_their_count_and_obsolete_files_are_deleted() {
        let (cache, mut slots) = cache_with_files(4, 10);
        for slot in &slots {
            read_first(slot);
        }
        assert_eq!(cache.open_files(), 4);
        let gone = slots.pop().unwrap();
        let path = gone.path().to_path_buf();
        gone.mark_obsolete();
        drop(gone);
        assert_eq!(cache.open_files(), 3);
        assert!(
            !cache.fs.exists(&path),
            "obsolete file deleted on last drop"
        );
        // A slot dropped without being obsolete keeps its file.
        let kept = slots.pop().unwrap();
        let path = kept.path().to_path_buf();
        drop(kept);
        assert!(cache.fs.exists(&path));
        assert_eq!(cache.open_files(), 2);
    }

    /// Tables come and go (compaction) while fewer than `max_open_files` are open, so
    /// nothing is evicted: the clock list still forgets the dead ones. (It kept all
    /// 5,000 before `Clock::register` swept it.)
    #[test]
    fn the_clock_list_forgets_dropped_tables_without_evictions() {
        let (cache, live) = cache_with_files(10, 1000);
        for slot in &live {
            read_first(slot);
        }
        let fs = Arc::clone(&cache.fs);
        for i in 0..5_000u32 {
            let path = Path::new("/store").join(format!("t{i}.sst"));
            let mut f = fs.create(&path).unwrap();
            f.append(&[7; 16]).unwrap();
            let slot = cache.slot(path);
            assert_eq!(read_first(&slot), 7);
            drop(slot);
            let listed = lock(&cache.clock).slots.len();
            // Within twice the live tables or the sweep minimum (64), whichever is more.
            assert!(listed <= 100, "{listed} listed");
        }
        assert_eq!(cache.open_files(), live.len());
        // The live tables are still listed, so eviction can still close them.
        let listed: Vec<Arc<FileSlot>> = lock(&cache.clock)
            .slots
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        assert_eq!(listed.len(), live.len());
    }

    #[test]
    fn a_missing_file_is_an_error_not_a_panic() {
        let (cache, _slots) = cache_with_files(1, 2);
        let slot = cache.slot(PathBuf::from("/store/999999.sst"));
        assert!(slot.with_file(|_| Ok(())).is_err());
        assert_eq!(cache.open_files(), 0);
    }
}
