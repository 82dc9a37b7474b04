//! A keyspace's shared state, one `Inner` behind an `Arc`: the view readers load, the
//! maintenance state and the signals between them; the writer, the sequence numbers,
//! the snapshots and the background error are the store's, in its `Journal` (see
//! `journal.rs`). A store without named keyspaces has one `Inner`, the default
//! keyspace.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bloomkv_filter::FilterPolicy;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::memtable::{ByteArena, Memtable};
use crate::options::{FilterAllocation, Options};
use crate::probe_stats::{ProbeStats, Raw, Tracker};
use crate::recovery::ClosedMark;
use crate::sstable::TableCache;
use crate::stats::{Counters, DbStats};
use crate::table_files::TableFiles;
use crate::types::NUM_LEVELS;
use crate::types::{KeyspaceId, SeqNo};
use crate::version::Version;
use crate::wal::WalWriter;

use super::journal::Journal;

/// What a reader needs, swapped as a whole when a memtable freezes or a version changes.
///
/// Each memtable is backed by a run of consecutive WALs and records the OLDEST of
/// them: its writes are in that log and every later one, up to (not including) the
/// log recorded by the next memtable (for the live memtable: up to the log the writer
/// appends to). Usually the run is one log; after an open that kept a recovered log
/// it can be several (see [`Db::open`](super::Db::open)). Retiring every log below the
/// oldest memtable's number therefore never retires a log that unflushed data still
/// needs.
pub(super) struct View {
    /// The memtable taking writes, and the oldest WAL backing it.
    pub(super) mem: Arc<Memtable>,
    pub(super) mem_wal: u64,
    /// Frozen memtables waiting for flush, oldest first, each with its oldest WAL.
    pub(super) imm: Vec<(Arc<Memtable>, u64)>,
    /// The live tables.
    pub(super) version: Arc<Version>,
}

impl View {
    /// Whether this view holds a memtable or a version `next` does not.
    fn holds_more_than(&self, next: &View) -> bool {
        let kept = |m: &Arc<Memtable>| {
            Arc::ptr_eq(m, &next.mem) || next.imm.iter().any(|(n, _)| Arc::ptr_eq(m, n))
        };
        !Arc::ptr_eq(&self.version, &next.version)
            || !kept(&self.mem)
            || self.imm.iter().any(|(m, _)| !kept(m))
    }
}

/// How long a flush or compaction waits for the gets reading the view it replaced.
const RETIRE_WAIT: Duration = Duration::from_secs(1);

/// Drops `view` in this thread once no get reads it any more (waiting at most
/// [`RETIRE_WAIT`]).
///
/// Whoever lets go of a view last frees what only it held: after a flush the whole
/// frozen memtable (tens of MiB in hundreds of thousands of nodes: tens of
/// milliseconds), after a compaction the replaced tables, whose files are then deleted.
/// A get holds the view it loaded for microseconds, but when a flush replaces the view
/// under a busy reader, the reader's get was the last holder and took that long (YCSB's
/// slowest reads, 75-170 ms, in the workloads that write). Waiting those microseconds
/// out here moves the freeing to the flush or compaction's thread. A scan or snapshot
/// that holds a memtable itself still frees it when it ends; a get that holds the view
/// longer than [`RETIRE_WAIT`] frees it too.
fn drop_when_unread(view: Arc<View>) {
    let deadline = Instant::now() + RETIRE_WAIT;
    let mut spins = 0u32;
    while Arc::strong_count(&view) > 1 && Instant::now() < deadline {
        if spins < 64 {
            std::thread::yield_now();
            spins += 1;
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    drop(view);
}

/// The single writer's state (one per store, in its [`Journal`]).
pub(super) struct Writer {
    pub(super) wal: WalWriter,
    /// The number of the log `wal` appends to.
    pub(super) wal_number: u64,
    /// That log's length when `wal` began appending to it (0 for a fresh log).
    pub(super) wal_start: u64,
    pub(super) next_seq: SeqNo,
    /// Where small values are copied for the memtable.
    pub(super) values: ByteArena,
}

/// State owned by whoever runs a flush or compaction.
pub(super) struct Maint {
    /// Where each level's next size-triggered compaction starts (round robin).
    pub(super) compact_pointer: Vec<Option<Bytes>>,
    /// The highest sequence number that tables hold.
    pub(super) last_sequence: SeqNo,
    /// After a filter rewrite was picked (`flush_compact.rs`): the first file number
    /// its outputs can have.
    pub(super) rewrite_outputs: Option<u64>,
    /// Tables a filter rewrite wrote: not rewritten again.
    pub(super) rewritten: std::collections::HashSet<u64>,
}

/// Wakes the background thread.
#[derive(Default)]
pub(super) struct Signal {
    pub(super) pending: bool,
    pub(super) shutdown: bool,
}

pub(super) struct Inner {
    /// Which keyspace this is ([`KeyspaceId::DEFAULT`] for the store's root).
    pub(super) id: KeyspaceId,
    /// What every keyspace of the store shares: the log and its writer, the sequence
    /// numbers, the snapshots, the background error.
    pub(super) journal: Arc<Journal>,
    /// Set when the keyspace is dropped: its handles refuse writes from then on.
    pub(super) dropped: AtomicBool,
    pub(super) dir: PathBuf,
    pub(super) fs: Arc<dyn FileSystem>,
    pub(super) options: Options,
    /// Builds new tables' filters (`None`: tables get no filter).
    pub(super) policy: Option<Arc<dyn FilterPolicy>>,
    /// Opens any table's filter, whatever policy wrote it.
    pub(super) policies: Vec<Arc<dyn FilterPolicy>>,
    pub(super) counters: Arc<Counters>,
    /// Bounds the open table files (`max_open_files`).
    pub(super) table_cache: Arc<TableCache>,
    /// The default keyspace's is the journal's (logs are numbered from it too).
    pub(super) next_file_number: Arc<AtomicU64>,
    /// The current view. Readers `load` it; it is replaced only under `view_write`.
    pub(super) view: ArcSwap<View>,
    /// Held while the view is read and replaced (a memtable freeze, a version
    /// install), so that two replacements never overwrite each other.
    pub(super) view_write: Mutex<()>,
    /// Views a flush or compaction replaced that held something the new view does
    /// not, waiting for the thread that replaced them to drop them
    /// ([`Inner::drop_retired`]).
    pub(super) retired: Mutex<Vec<Arc<View>>>,
    /// Signalled (with the journal's writer locked briefly, so a writer that checked
    /// the view and is about to wait cannot miss it) after every flush, compaction or
    /// background failure: what a stalled writer waits for.
    pub(super) progress: Condvar,
    pub(super) maint: Mutex<Maint>,
    /// Callers (`flush`, `compact`, `wait_for_compaction`) waiting for `maint`: the
    /// background thread, which otherwise keeps it for as long as it finds work,
    /// hands it over between two steps and waits on `maint_handoff` until they have it.
    pub(super) maint_callers: Mutex<usize>,
    pub(super) maint_handoff: Condvar,
    pub(super) signal: Mutex<Signal>,
    pub(super) wake: Condvar,
    /// Where lookups went, for `FilterAllocation::Adaptive` (see `probe_stats.rs`).
    pub(super) probes: Mutex<Tracker>,
    /// Live tables whose filters the budget released (`filter_budget.rs`), as the
    /// `RELEASED` file records them.
    pub(super) released: Mutex<BTreeSet<u64>>,
}

/// Locks a mutex, recovering from poisoning: every critical section leaves its state
/// consistent before anything that could panic, so the data is still sound. The
/// writer's cannot (a file system's append or sync may panic midway), so it stops
/// writes if it unwinds (`StopWritesOnPanic`, in `write.rs`) and a later writer finds
/// the error.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What both opens make before they read anything: the directory, the options, and
/// the counters, table cache and filter policies the tables are opened with.
pub(super) struct Parts {
    pub(super) dir: PathBuf,
    pub(super) fs: Arc<dyn FileSystem>,
    pub(super) options: Options,
    pub(super) policy: Option<Arc<dyn FilterPolicy>>,
    pub(super) policies: Vec<Arc<dyn FilterPolicy>>,
    pub(super) counters: Arc<Counters>,
    pub(super) table_cache: Arc<TableCache>,
    /// Tables whose filters the budget released (`filter_budget.rs`), read at open
    /// (empty without a budget: then every filter loads).
    pub(super) released: BTreeSet<u64>,
}

impl Parts {
    pub(super) fn new(dir: PathBuf, options: Options) -> Result<Parts> {
        let fs = options.file_system.clone();
        let counters = Arc::new(Counters::default());
        if let Some(learned) = crate::learned::LearnedNegatives::new(options.learned_memory) {
            let _ = counters.learned.set(learned); // the counters were made just now
        }
        let table_cache = TableCache::with_block_cache(
            fs.clone(),
            options.max_open_files,
            options.block_cache_size,
            options.metadata_budget,
        );
        let policy = options.filter_policy()?;
        let policies = options.known_policies()?;
        let released = if options.filter_memory_budget.is_some() {
            crate::filter_budget::read(fs.as_ref(), &dir)
        } else {
            BTreeSet::new()
        };
        Ok(Parts {
            released,
            dir,
            fs,
            options,
            policy,
            policies,
            counters,
            table_cache,
        })
    }

    /// Where this store's tables are written and opened.
    pub(super) fn table_files(&self) -> TableFiles<'_> {
        TableFiles {
            fs: &self.fs,
            cache: &self.table_cache,
            dir: &self.dir,
            options: &self.options,
            counters: &self.counters,
            policies: &self.policies,
        }
    }
}

/// Under `FilterAllocation::Adaptive`: the probe statistics the last run left (a
/// damaged file ignored and counted), and, unless the user sized them, learned
/// negatives given their share of the tree's filter memory (within the filter
/// budget). Otherwise an empty tracker.
fn adaptive_start(
    fs: &Arc<dyn FileSystem>,
    dir: &std::path::Path,
    options: &Options,
    counters: &Counters,
    version: &crate::version::Version,
) -> Tracker {
    let mut tracker = Tracker::default();
    if options.filter_allocation != FilterAllocation::Adaptive {
        return tracker;
    }
    match ProbeStats::read(fs.as_ref(), dir) {
        Ok(Some(stats)) => tracker.stats = stats,
        Ok(None) => {}
        Err(_) => crate::stats::bump(&counters.probe_stats_damaged),
    }
    if options.learned_memory == 0 {
        let share = tracker.stats.learned_share();
        tracker.learned_share = share;
        let keys: u64 = version.tables().map(|(_, t)| t.entries()).sum();
        let mut filters = options.bits_per_key * keys as f64 / 8.0;
        if let Some(budget) = options.filter_memory_budget {
            filters = filters.min(budget as f64);
        }
        if let Some(learned) = crate::learned::LearnedNegatives::new((filters * share) as usize) {
            let _ = counters.learned.set(learned); // none was made: learned_memory is 0
        }
    }
    tracker
}

/// Where an open's recovery left a keyspace: what [`Inner::new`] starts from.
pub(super) struct Recovered {
    /// The live tables.
    pub(super) version: Version,
    /// The memtable writes go to, and the oldest log backing it (see [`View`]).
    pub(super) mem: Memtable,
    pub(super) mem_wal: u64,
    /// The highest sequence number the tables hold.
    pub(super) last_sequence: SeqNo,
    /// The keyspace's file numbers (the default keyspace's are the journal's).
    pub(super) next_file_number: Arc<AtomicU64>,
}

/// Where an open's recovery left the log: what the [`Journal`]'s writer starts from.
pub(super) struct RecoveredLog {
    /// The log the writer appends to, its number, and its length when it was opened.
    pub(super) wal: WalWriter,
    pub(super) wal_number: u64,
    pub(super) wal_start: u64,
    /// The last sequence number written: readers see up to it, writes number above.
    pub(super) last_seq: SeqNo,
}

impl RecoveredLog {
    /// The writer's state this log starts.
    pub(super) fn writer(self) -> Writer {
        Writer {
            wal: self.wal,
            wal_number: self.wal_number,
            wal_start: self.wal_start,
            next_seq: self.last_seq + 1,
            values: ByteArena::default(),
        }
    }
}

impl Inner {
    /// A keyspace's shared state, made from its parts and what open recovered.
    pub(super) fn new(
        parts: Parts,
        recovered: Recovered,
        journal: Arc<Journal>,
        id: KeyspaceId,
    ) -> Inner {
        let Parts {
            dir,
            fs,
            options,
            policy,
            policies,
            counters,
            table_cache,
            released,
        } = parts;
        let probes = Mutex::new(adaptive_start(
            &fs,
            &dir,
            &options,
            &counters,
            &recovered.version,
        ));
        Inner {
            id,
            journal,
            dropped: AtomicBool::new(false),
            fs,
            policy,
            policies,
            counters,
            table_cache,
            next_file_number: recovered.next_file_number,
            view: ArcSwap::from_pointee(View {
                mem: Arc::new(recovered.mem),
                mem_wal: recovered.mem_wal,
                imm: Vec::new(),
                version: Arc::new(recovered.version),
            }),
            view_write: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
            progress: Condvar::new(),
            maint: Mutex::new(Maint {
                compact_pointer: vec![None; NUM_LEVELS],
                last_sequence: recovered.last_sequence,
                rewrite_outputs: None,
                rewritten: Default::default(),
            }),
            maint_callers: Mutex::new(0),
            maint_handoff: Condvar::new(),
            signal: Mutex::new(Signal::default()),
            wake: Condvar::new(),
            probes,
            released: Mutex::new(released),
            options,
            dir,
        }
    }

    /// Where this store's tables are written and opened.
    pub(super) fn table_files(&self) -> TableFiles<'_> {
        TableFiles {
            fs: &self.fs,
            cache: &self.table_cache,
            dir: &self.dir,
            options: &self.options,
            counters: &self.counters,
            policies: &self.policies,
        }
    }

    /// Under `FilterAllocation::Adaptive`, folds the read path's counters into the
    /// probe statistics and returns them (with the learned negatives' share);
    /// `None` under the other allocations.
    pub(super) fn probe_stats(&self) -> Option<(ProbeStats, f64)> {
        if self.options.filter_allocation != FilterAllocation::Adaptive {
            return None;
        }
        let mut t = lock(&self.probes);
        t.fold(Raw::of(&self.counters.snapshot()));
        Some((t.stats, t.learned_share))
    }

    /// Under `FilterAllocation::Adaptive`, writes the probe statistics to `PROBES`
    /// (after a flush or compaction, and at close). Best effort: a failure is counted
    /// in `DbStats::probe_stats_damaged` and the next open starts from the older file.
    pub(super) fn save_probe_stats(&self) {
        if self.options.read_only {
            return;
        }
        if let Some((stats, _)) = self.probe_stats() {
            if stats.write(self.fs.as_ref(), &self.dir).is_err() {
                crate::stats::bump(&self.counters.probe_stats_damaged);
            }
        }
    }

    /// Registers a snapshot at the last visible sequence number (see
    /// [`SnapshotList::acquire`]) and returns that number.
    pub(super) fn acquire_snapshot(&self) -> SeqNo {
        self.journal
            .snapshots
            .acquire(|| self.journal.visible_seq())
    }

    /// Releases one snapshot at `seq`.
    pub(super) fn release_snapshot(&self, seq: SeqNo) {
        self.journal.snapshots.release(seq);
    }

    /// The current view, owned (a reference count taken): for work that outlives a
    /// lookup or that is not on the read path.
    pub(super) fn current(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// Replaces the view with `next(current)`, atomically: a flush or compaction
    /// installing its version at the same moment is not undone (both replace the view
    /// only under `view_write`).
    ///
    /// When the old view holds something the new one does not (a flushed memtable,
    /// the tables a compaction replaced), it is kept in `retired` for the flush or
    /// compaction to drop once it has let go of its own references
    /// ([`Inner::drop_retired`]).
    pub(super) fn update_view(&self, next: impl FnOnce(&View) -> View) {
        let guard = lock(&self.view_write);
        let current = self.view.load_full();
        let next = Arc::new(next(&current));
        let frees = current.holds_more_than(&next);
        self.view.store(next);
        drop(guard);
        if frees {
            lock(&self.retired).push(current);
        }
    }

    /// Drops the views flushes and compactions replaced, in this thread, each once no
    /// get reads it any more ([`drop_when_unread`]). Called by a flush or compaction
    /// when it is done, holding no view of its own.
    pub(super) fn drop_retired(&self) {
        let views = std::mem::take(&mut *lock(&self.retired));
        for view in views {
            drop_when_unread(view);
        }
    }

    /// Wakes writers waiting for a flush or compaction. The writer lock is taken (and
    /// dropped) first: a writer checks the view and starts waiting under that lock, so
    /// it is either already waiting or will see the new view.
    pub(super) fn notify_progress(&self) {
        drop(lock(&self.journal.writer));
        self.progress.notify_all();
    }

    /// Refuses every write, flush and compaction of a read-only open, and of a
    /// dropped keyspace.
    pub(super) fn check_writable(&self) -> Result<()> {
        if self.options.read_only {
            return Err(Error::ReadOnly(self.dir.clone()));
        }
        self.check_not_dropped()
    }

    /// Refuses a dropped keyspace's use.
    pub(super) fn check_not_dropped(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "keyspace number {} was dropped",
                self.id
            )));
        }
        Ok(())
    }

    /// If nothing is unflushed (no write in the live memtable, none frozen), makes log
    /// `wal` the oldest backing this keyspace and says so. Called with the writer lock
    /// held, as a new log starts (`Journal::new_log`).
    pub(super) fn move_if_idle(&self, wal: u64) -> bool {
        let _guard = lock(&self.view_write);
        let current = self.view.load_full();
        if !current.mem.is_empty() || !current.imm.is_empty() {
            return false;
        }
        self.view.store(Arc::new(View {
            mem: current.mem.clone(),
            mem_wal: wal,
            imm: Vec::new(),
            version: current.version.clone(),
        }));
        true
    }

    /// Leaves the clean-close mark (see [`ClosedMark`]) once every write is synced:
    /// the next open may then append to this log. Not after any error, and never for a
    /// read-only open. Best effort: without a mark, the next open takes the path that
    /// needs none.
    pub(super) fn mark_closed(&self, w: &Writer) {
        if self.options.read_only || lock(&self.journal.bg_error).is_some() {
            return;
        }
        let mark = ClosedMark {
            wal: w.wal_number,
            wal_len: w.wal_start + w.wal.bytes_written(),
        };
        crate::store_dir::write_closed_mark(&self.fs, &self.dir, &mark.encode());
    }

    pub(super) fn check_bg_error(&self) -> Result<()> {
        self.journal.check_bg_error()
    }

    pub(super) fn set_bg_error(&self, e: &Error) {
        self.set_bg_error_message(e.to_string());
    }

    /// Records the first background failure; writes are refused from now on (in every
    /// keyspace: they share the log).
    pub(super) fn set_bg_error_message(&self, message: String) {
        self.journal.set_bg_error_message(message);
    }

    /// `maint` for a caller's flush or compaction: announced first, so that a
    /// background thread busy with a steady writer's work hands it over at its next
    /// step instead of keeping it until the writes stop.
    pub(super) fn maint_for_caller(&self) -> MutexGuard<'_, Maint> {
        *lock(&self.maint_callers) += 1;
        let maint = lock(&self.maint);
        *lock(&self.maint_callers) -= 1;
        self.maint_handoff.notify_all();
        maint
    }

    /// Whether the store is shutting down (background work should stop).
    pub(super) fn closing(&self) -> bool {
        lock(&self.signal).shutdown
    }

    pub(super) fn schedule(&self) {
        lock(&self.signal).pending = true;
        self.wake.notify_all();
    }

    pub(super) fn stats(&self) -> DbStats {
        let mut stats = self.counters.snapshot();
        let view = self.current();
        stats.tables_per_level = view.version.levels().iter().map(Vec::len).collect();
        stats.open_table_files = self.table_cache.open_files() as u64;
        stats.block_cache_bytes = self.table_cache.block_cache_bytes();
        stats.metadata_cache_bytes = self.table_cache.metadata_cache_bytes();
        stats.metadata_bytes = stats.metadata_cache_bytes;
        for table in view.version.tables().filter_map(|(_, t)| t.if_open()) {
            let filter = table.filter_memory_bytes() as u64;
            stats.filter_memory_bytes += filter;
            let held = filter + table.index_memory_bytes() as u64;
            stats.metadata_bytes += held;
            if table.is_partitioned() {
                stats.metadata_top_level_bytes += held;
            }
            stats.opened_tables += 1;
            stats.range_tombstones += table.range_dels().map_or(0, |f| f.count());
        }
        for mem in std::iter::once(&view.mem).chain(view.imm.iter().map(|(m, _)| m)) {
            stats.range_tombstones += mem.range_dels().map_or(0, |f| f.count());
        }
        stats
    }
}

impl View {
    /// The oldest WAL still backing unflushed data.
    pub(super) fn mem_wal_min(&self) -> u64 {
        self.imm.first().map(|(_, w)| *w).unwrap_or(self.mem_wal)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Weak};
    use std::time::Duration;

    use crate::{Db, Options};

    use super::lock;

    /// A get that holds the view a flush replaces does not pay for freeing the flushed
    /// memtable: the flush waits until the get lets go, and frees it itself.
    #[test]
    fn a_flush_frees_the_memtable_it_flushed_not_a_get_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            disable_auto_compaction: true,
            ..Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), options).unwrap());
        for i in 0..1_000 {
            db.put(format!("k{i:04}"), "v").unwrap();
        }
        {
            let mut w = lock(&db.inner.journal.writer);
            db.inner.freeze(&mut w).unwrap();
        }
        // A get's hold on the view with the frozen memtable (a guard, as `get` takes).
        let reading = db.inner.view.load();
        let frozen: Weak<_> = Arc::downgrade(&reading.imm[0].0);
        let flusher = {
            let db = Arc::clone(&db);
            std::thread::spawn(move || db.flush().unwrap())
        };
        while Arc::ptr_eq(&db.inner.view.load().version, &reading.version) {
            std::thread::yield_now();
        }
        // The flush has installed its view and waits for the get.
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !flusher.is_finished(),
            "the flush left the freeing to the get"
        );
        assert!(frozen.upgrade().is_some());
        drop(reading);
        flusher.join().unwrap();
        assert!(
            frozen.upgrade().is_none(),
            "the flushed memtable outlived the flush"
        );
        assert!(db.get("k0999").unwrap().is_some());
    }
}
