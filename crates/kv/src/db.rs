//! The store: where the write path, the read path and the background work meet.
//!
//! ```text
//! write ─► WAL record (CRC) ─► memtable ──full──► immutable memtable ──flush──► L0 table
//!                                                                               │
//! get ─► memtable ─► immutables (newest first) ─► L0 newest first ─► L1 … L6 ◄──┘ compaction
//!                                         hash the key once │
//!                            per table: key range? ─► filter? ─► one data-block read
//! ```
//!
//! Concurrency: one writer at a time holds `writer` (WAL order = sequence order).
//! Readers never take that lock: they load the current [`View`] from an [`ArcSwap`]
//! (a `get` takes a guard in a thread-local slot: no lock, no reference count, nothing
//! shared written), then work on immutable data. The few places that replace the
//! view do so under `view_write`, reading and replacing it as one step. Flush and compaction
//! run one at a time under `maint`, build the next [`Version`] off to the side, record
//! it in the manifest, and only then swap the view and delete what it retired.
//!
//! Crash safety rests on three orderings: a write is in the WAL before it is in the
//! memtable; a table is fsynced and renamed into place before the manifest names it;
//! a WAL or table is deleted only after a manifest that no longer needs it is durable.

use std::collections::HashSet;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bloomkv_filter::{FilterPolicy, KeyHash};
use bytes::Bytes;

use crate::compaction;
use crate::error::{Error, Result};
use crate::filename::{self, parse_file_name, FileKind};
use crate::filter_plan::{self, FilterAllocation};
use crate::fs::{FileLock, FileSystem};
use crate::inspect::TableInfo;
use crate::manifest::{self, ManifestState, TableMeta};
use crate::memtable::{ByteArena, Memtable, READ_LATEST};
use crate::merge::{MergeIter, Source};
use crate::options::{FilterKind, Options, NUM_LEVELS};
use crate::prefix::prefix_successor;
use crate::recovery::{self, ClosedMark, RecoveryReport};
use crate::retain::Retain;
use crate::scan::{own_bounds, ScanIter};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::sstable::{Hit, Table, TableBuilder, TableFile, TableOptions};
use crate::stats::{add, bump, Counters, DbStats, ReadTally};
use crate::table_cache::TableCache;
use crate::types::{Entry, SeqNo};
use crate::version::{TableHandle, Version};
use crate::wal::WalWriter;
use crate::write_batch::{self, WriteBatch};

/// An open store. `Send + Sync`: share it between threads with an `Arc`.
///
/// ```
/// use bloomkv_kv::{Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// db.put("apple", "red")?;
/// assert_eq!(db.get("apple")?.as_deref(), Some(&b"red"[..]));
/// db.delete("apple")?;
/// assert_eq!(db.get("apple")?, None);
/// db.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Db {
    inner: Arc<Inner>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// Set by the first `shutdown` (from `close` or `Drop`).
    closed: AtomicBool,
    /// What open replayed from the logs and what it dropped.
    recovery: RecoveryReport,
}

/// What a reader needs, swapped as a whole when a memtable freezes or a version changes.
///
/// Each memtable is backed by a run of consecutive WALs and records the OLDEST of
/// them: its writes are in that log and every later one, up to (not including) the
/// log recorded by the next memtable (for the live memtable: up to the log the writer
/// appends to). Usually the run is one log; after an open that kept a recovered log
/// it can be several (see [`Db::open`]). Retiring every log below the oldest memtable's
/// number therefore never retires a log that unflushed data still needs.
struct View {
    /// The memtable taking writes, and the oldest WAL backing it.
    mem: Arc<Memtable>,
    mem_wal: u64,
    /// Frozen memtables waiting for flush, oldest first, each with its oldest WAL.
    imm: Vec<(Arc<Memtable>, u64)>,
    /// The live tables.
    version: Arc<Version>,
}

/// The single writer's state.
struct Writer {
    wal: WalWriter,
    /// The number of the log `wal` appends to.
    wal_number: u64,
    /// That log's length when `wal` began appending to it (0 for a fresh log).
    wal_start: u64,
    next_seq: SeqNo,
    /// Where small values are copied for the memtable.
    values: ByteArena,
}

/// State owned by whoever runs a flush or compaction.
struct Maint {
    /// Where each level's next size-triggered compaction starts (round robin).
    compact_pointer: Vec<Option<Bytes>>,
    /// The highest sequence number that tables hold.
    last_sequence: SeqNo,
}

/// Wakes the background thread.
#[derive(Default)]
struct Signal {
    pending: bool,
    shutdown: bool,
}

pub(crate) struct Inner {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    options: Options,
    /// Builds new tables' filters (`None`: tables get no filter).
    policy: Option<Arc<dyn FilterPolicy>>,
    /// Opens any table's filter, whatever policy wrote it.
    policies: Vec<Arc<dyn FilterPolicy>>,
    counters: Arc<Counters>,
    /// Bounds the open table files (`max_open_files`).
    table_cache: Arc<TableCache>,
    next_file_number: AtomicU64,
    /// The current view. Readers `load` it; it is replaced only under `view_write`.
    view: ArcSwap<View>,
    /// Held while the view is read and replaced (a memtable freeze, a version
    /// install), so that two replacements never overwrite each other.
    view_write: Mutex<()>,
    /// The last sequence number of the newest write batch that is completely in the
    /// memtable. Readers see writes up to it and no further, so a batch becomes visible
    /// all at once; published (release) by the writer after the batch is applied.
    visible_seq: AtomicU64,
    writer: Mutex<Writer>,
    /// Signalled (with `writer` locked briefly, so a writer that checked the view and
    /// is about to wait cannot miss it) after every flush, compaction or background
    /// failure: what a stalled writer waits for.
    progress: Condvar,
    maint: Mutex<Maint>,
    /// Callers (`flush`, `compact`, `wait_for_compaction`) waiting for `maint`: the
    /// background thread, which otherwise keeps it for as long as it finds work,
    /// hands it over between two steps and waits on `maint_handoff` until they have it.
    maint_callers: Mutex<usize>,
    maint_handoff: Condvar,
    signal: Mutex<Signal>,
    wake: Condvar,
    /// The first background failure; once set, writes are refused.
    bg_error: Mutex<Option<String>>,
    /// The live snapshots: what flushes and compactions must keep versions for.
    pub(crate) snapshots: SnapshotList,
    /// The directory's lock (`None` for a read-only open, which takes none).
    _lock: Option<FileLock>,
}

/// Sets the store's background error if dropped during a panic.
struct StopWritesOnPanic<'a>(&'a Inner);

impl Drop for StopWritesOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .set_bg_error_message("a write panicked; the log's tail is unknown".into());
        }
    }
}

/// Locks a mutex, recovering from poisoning: every critical section leaves its state
/// consistent before anything that could panic, so the data is still sound. The
/// writer's cannot (a file system's append or sync may panic midway), so it stops
/// writes if it unwinds ([`StopWritesOnPanic`]) and a later writer finds the error.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Db {
    /// Opens the store in `path`, creating it if `options.create_if_missing`.
    ///
    /// Recovery: the manifest names the live tables; every WAL it does not retire is
    /// replayed, oldest first, under `options.wal_recovery` (what was dropped is in
    /// [`Db::recovery_report`]). Then one of two things happens:
    ///
    /// * **Kept.** Every log replayed cleanly (nothing dropped), the writes fit in
    ///   less than `memtable_size`, and the last session closed cleanly (its `CLOSED`
    ///   mark names the newest log at its current length; see
    ///   `recovery::ClosedMark`): they become the live memtable, backed by the logs
    ///   they came from, and the newest log is reopened for appending. Nothing is
    ///   written at open, and a program that opens, writes a little and exits (a
    ///   command-line `put`) adds to one log instead of leaving a table per run. The
    ///   manifest already keeps every log from the oldest replayed one; the next flush
    ///   retires them all at once (its manifest names the log after them, and only
    ///   then are they deleted).
    /// * **Flushed.** Otherwise (a tail was dropped or a record skipped, the writes
    ///   are large, or the last session crashed, failed a sync or was never closed)
    ///   they are written to an L0 table, a manifest that retires the old logs is made
    ///   durable, and a fresh log is started: a damaged log, or one whose bytes may be
    ///   only in the page cache, is never written after.
    ///
    /// With [`Options::read_only`] nothing is written, no lock is taken, and the logs
    /// are replayed into memory only: see [`Options::read_only`].
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = store_dir(path.as_ref())?;
        let fs = options.file_system.clone();
        if options.read_only {
            return open_read_only(dir, options);
        }
        if !fs.exists(&dir) {
            if !options.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "{} does not exist and create_if_missing is false",
                    dir.display()
                )));
            }
            fs.create_dir_all(&dir)?;
        }
        if !options.create_if_missing && !fs.exists(&filename::manifest_path(&dir)) {
            // Refused before the lock is taken: no LOCK file is left in a directory
            // that holds no store.
            return Err(no_store(&dir));
        }
        let lock_path = filename::lock_path(&dir);
        let file_lock = match fs.lock(&lock_path) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Error::Locked(dir));
            }
            Err(e) => return Err(e.into()),
        };

        let counters = Arc::new(Counters::default());
        let table_cache = TableCache::with_block_cache(
            fs.clone(),
            options.max_open_files,
            options.block_cache_size,
        );
        let policy = options.filter_policy()?;
        let policies = options.known_policies()?;
        let names = fs.list(&dir)?;
        let state = manifest::read_manifest(fs.as_ref(), &dir)?;
        let state = match state {
            Some(s) => s,
            None if !options.create_if_missing => return Err(no_store(&dir)),
            None => {
                if stray_store_file(&names).is_some() {
                    return Err(no_manifest(&dir, &names));
                }
                ManifestState::new(1, 0, 0, Vec::new())
            }
        };

        // Before anything is written: leftover temp files go (they are never named by
        // a manifest, and after a full disk they hold the space a reopen needs), and
        // tables the manifest does not name are moved aside, never deleted.
        let moved_aside = tidy_before_writing(&fs, &dir, &names, &state)?;
        let names = if moved_aside.is_empty() {
            names
        } else {
            fs.list(&dir)?
        };

        // Open every live table; index and filter come into memory now.
        let mut tables = Vec::new();
        for meta in state.tables() {
            let level = table_level(&dir, meta)?;
            let handle = open_table(&table_cache, &dir, meta.number, &counters, &policies)?;
            tables.push((level, Arc::new(handle)));
        }
        let version = Version::empty().apply(&[], tables);

        let max_on_disk = names
            .iter()
            .filter_map(|n| file_number(n))
            .max()
            .unwrap_or(0);
        let next_file_number = AtomicU64::new(state.next_file_number().max(max_on_disk + 1).max(1));

        // Replay the live WALs, oldest first, into one memtable.
        let mut wals: Vec<u64> = names
            .iter()
            .filter_map(|n| match parse_file_name(n) {
                Some(FileKind::Wal(number)) if number >= state.wal_number() => Some(number),
                _ => None,
            })
            .collect();
        wals.sort_unstable();
        let replayed = recovery::replay(
            fs.as_ref(),
            &dir,
            &wals,
            options.wal_recovery,
            state.last_sequence(),
        )?;
        let recovered = replayed.memtable;
        let last_seq = replayed.last_seq;
        let mut report = replayed.report;
        report.tables_moved_aside = moved_aside;
        add(&counters.wal_tail_bytes_dropped, report.bytes_dropped());

        let mut maint = Maint {
            compact_pointer: vec![None; NUM_LEVELS],
            last_sequence: state.last_sequence(),
        };
        let mut inner_version = version;
        // The mark vouches for the logs once: whatever happens next, this session's
        // own clean close must write a new one. (A mark that cannot be removed is
        // harmless: the first append makes the log longer than it says.)
        let mark = ClosedMark::read(fs.as_ref(), &dir);
        if mark.is_some() {
            let _ = fs.remove(&filename::closed_path(&dir));
        }
        let keep = recovery::can_keep(&report, &recovered, options.memtable_size, mark);
        let (mem, mem_wal, wal_file, wal_number, wal_start) =
            match (wals.first(), report.wals.last()) {
                (Some(&oldest), Some(newest)) if keep => {
                    // The logs replayed cleanly, hold less than a memtable, and the last
                    // session closed cleanly: they stay the memtable's logs, and writes go
                    // on appending to the newest. No manifest change is needed: it
                    // already keeps every log from `oldest`.
                    let file = fs.open_append(&filename::wal_path(&dir, newest.number))?;
                    remove_obsolete(&fs, &dir, None, oldest);
                    report.kept_in_memtable = true;
                    (recovered, oldest, file, newest.number, newest.file_len)
                }
                _ => {
                    let mut built = Vec::new();
                    if !recovered.is_empty() {
                        let number = next_file_number.fetch_add(1, Ordering::Relaxed);
                        let handle = build_table(
                            &fs,
                            &table_cache,
                            &dir,
                            number,
                            &options,
                            &policy,
                            &counters,
                            &policies,
                            // No snapshot exists yet: the newest version of each key.
                            Retain::new(recovered.versions().map(Ok), Vec::new(), false),
                        )?;
                        if let Some(handle) = handle {
                            inner_version = inner_version.apply(&[], vec![(0, Arc::new(handle))]);
                            built.push(number);
                        }
                    }
                    // Also when nothing was kept: the numbers of records point-in-time
                    // recovery dropped are used up, and the logs that held them go.
                    maint.last_sequence = maint.last_sequence.max(last_seq);

                    // A manifest that retires the old WALs, then the fresh WAL it names. In
                    // this order, a crash or error in between leaves no WAL newer than one
                    // with a torn tail, and no WAL without a manifest (either would refuse
                    // the next open); a named WAL that does not exist yet holds no writes.
                    let wal_number = next_file_number.fetch_add(1, Ordering::Relaxed);
                    let next = next_file_number.load(Ordering::Relaxed);
                    if let Err(e) = write_state(
                        &fs,
                        &dir,
                        &inner_version,
                        wal_number,
                        next,
                        maint.last_sequence,
                    ) {
                        // No manifest names the table: delete it, as a failed install
                        // does, or the next open would move it aside for good (the
                        // logs it came from are still there and replay again).
                        discard_unrecorded(&fs, &dir, &built);
                        return Err(e);
                    }
                    let wal_file = fs.create(&filename::wal_path(&dir, wal_number))?;
                    fs.sync_dir(&dir)?;
                    remove_obsolete(&fs, &dir, None, wal_number);
                    (Memtable::new(), wal_number, wal_file, wal_number, 0)
                }
            };

        let inner = Arc::new(Inner {
            fs,
            policy,
            policies,
            counters,
            table_cache,
            next_file_number,
            view: ArcSwap::from_pointee(View {
                mem: Arc::new(mem),
                mem_wal,
                imm: Vec::new(),
                version: Arc::new(inner_version),
            }),
            view_write: Mutex::new(()),
            writer: Mutex::new(Writer {
                wal: WalWriter::new(wal_file),
                wal_number,
                wal_start,
                next_seq: last_seq + 1,
                values: ByteArena::default(),
            }),
            visible_seq: AtomicU64::new(last_seq),
            progress: Condvar::new(),
            maint: Mutex::new(maint),
            maint_callers: Mutex::new(0),
            maint_handoff: Condvar::new(),
            signal: Mutex::new(Signal::default()),
            wake: Condvar::new(),
            bg_error: Mutex::new(None),
            snapshots: SnapshotList::default(),
            _lock: Some(file_lock),
            options,
            dir,
        });
        let worker_inner = inner.clone();
        let worker = std::thread::Builder::new()
            .name("bloomkv-bg".into())
            .spawn(move || worker_inner.background_loop())?;
        let db = Db {
            inner,
            worker: Mutex::new(Some(worker)),
            closed: AtomicBool::new(false),
            recovery: report,
        };
        db.inner.schedule();
        Ok(db)
    }

    /// What open replayed from the write-ahead logs and what it dropped (see
    /// [`WalRecovery`](crate::WalRecovery) for what each mode drops; the byte count is
    /// also `DbStats::wal_tail_bytes_dropped`).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let mut batch =
            WriteBatch::with_capacity(write_batch::PUT_OVERHEAD + key.len() + value.len());
        batch.put(key, value);
        self.write(batch)
    }

    /// Deletes `key` (a tombstone; deleting an absent key is not an error).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch)
    }

    /// Applies every operation of `batch`, or none of them, also across a crash: the
    /// batch is one WAL record. Concurrent readers see the whole batch or none of it.
    ///
    /// Keys may be empty. A key over [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) (64 KiB), a
    /// value over [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN) (64 MiB) or a batch over
    /// [`MAX_BATCH_LEN`](crate::MAX_BATCH_LEN) (256 MiB encoded) is `InvalidArgument`:
    /// that write is refused and the store goes on taking writes. A failed append or
    /// sync of the log, a failed switch to a new log, a failed flush or compaction (a
    /// full disk, say) or a panic in background work or in the log's own file calls
    /// stops the store's writes until it is reopened: later writes, flushes and compactions return `Error::Closed` with
    /// the cause, reads go on, and nothing acknowledged is lost.
    ///
    /// Under sustained load a write may wait for background work: see
    /// [`Options::level0_slowdown_writes_trigger`] and `DbStats::write_stalls`.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// The value of `key`, or `None` if it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(key.as_ref())
    }

    /// Iterates over the live keys in `range`, in key order, with their values.
    ///
    /// The scan reads the store as of the moment it starts (later writes are not seen)
    /// and is double-ended: `.rev()` walks from the end, and both ends may be mixed.
    /// Memtables are read in batches of keys and tables lazily, block by block. Errors
    /// come as items and end the iteration. With [`Options::prefix_extractor`] set and
    /// both bounds keys with the same prefix, tables the prefix filter rules out are
    /// skipped unread, as in [`Db::scan_prefix`]. Like a [`Snapshot`], a scan holds the
    /// store: after [`Db::close`] the directory stays locked until the scan is dropped.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, k.to_uppercase())?;
    /// }
    /// db.delete("c")?;
    /// let keys: Vec<_> = db
    ///     .scan("b".."z")
    ///     .map(|kv| kv.map(|(k, _)| k))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(keys, vec!["b", "d"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Walking from both ends:
    ///
    /// ```
    /// # use bloomkv_kv::{Db, Options};
    /// # let dir = tempfile::tempdir()?;
    /// # let db = Db::open(dir.path(), Options::default())?;
    /// # for k in ["a", "b", "c", "d"] { db.put(k, k)?; }
    /// let mut scan = db.scan::<&str, _>(..);
    /// assert_eq!(scan.next_back().transpose()?.map(|(k, _)| k), Some("d".into()));
    /// assert_eq!(scan.next().transpose()?.map(|(k, _)| k), Some("a".into()));
    /// let middle: Vec<_> = scan.rev().map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(middle, vec!["c", "b"]); // the two ends met
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> ScanIter {
        let (start, end) = own_bounds(&range);
        self.inner.scan_at(start, end, None, None)
    }

    /// Iterates over the live keys starting with `prefix`, in key order (a
    /// [`ScanIter`]: point-in-time, double-ended).
    ///
    /// With [`Options::prefix_extractor`] set and `prefix` in its domain (for
    /// [`FixedPrefix::new(n)`](crate::FixedPrefix): at least `n` bytes long), each
    /// table's filter is asked whether it holds a key with that prefix first, and a
    /// table it rules out is skipped without a read (`DbStats::prefix_negatives`).
    /// Otherwise every table whose key range meets the prefix is read.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bloomkv_kv::{Db, FixedPrefix, Options};
    /// let dir = tempfile::tempdir()?;
    /// let options = Options {
    ///     prefix_extractor: Some(Arc::new(FixedPrefix::new(5))),
    ///     ..Options::default()
    /// };
    /// let db = Db::open(dir.path(), options)?;
    /// db.put("user1:name", "ann")?;
    /// db.put("user3:name", "bob")?;
    /// db.put("user3:mail", "bob@example.com")?;
    /// db.put("user5:name", "cy")?;
    /// db.flush()?;
    /// let bob: Vec<_> = db
    ///     .scan_prefix("user3")
    ///     .map(|kv| kv.map(|(_, v)| v))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(bob, vec!["bob@example.com", "bob"]);
    /// // "user4" lies inside the table's key range; only its prefix filter rules it out.
    /// assert_eq!(db.scan_prefix("user4").count(), 0);
    /// assert_eq!(db.stats().prefix_negatives, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> ScanIter {
        self.inner.scan_prefix_at(prefix.as_ref(), None)
    }

    /// A consistent view of the store as it is now, for reads that must not see later
    /// writes (see [`Snapshot`]). Cheap: a sequence number registered in a list.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("balance", "100")?;
    /// let snap = db.snapshot();
    /// db.put("balance", "50")?;
    /// db.flush()?;
    /// assert_eq!(snap.get("balance")?.as_deref(), Some(&b"100"[..]));
    /// assert_eq!(db.get("balance")?.as_deref(), Some(&b"50"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(&self.inner)
    }

    /// Writes the memtable (and any frozen ones) to L0 tables now.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Flushes the memtables and runs every compaction the tree needs now (each level
    /// within its budget, L0 under its trigger), in the caller's thread; returns when
    /// none is left. What a benchmark or a test calls to measure a settled tree.
    pub fn wait_for_compaction(&self) -> Result<()> {
        self.inner.flush()?;
        let mut maint = self.inner.maint_for_caller();
        while let Some(pick) = self.inner.pick_compaction(&mut maint) {
            self.inner
                .compact(&mut maint, pick.inputs, pick.output_level)?;
        }
        Ok(())
    }

    /// Compacts every table into one sorted run on the deepest level, dropping
    /// overwritten versions and tombstones.
    pub fn compact(&self) -> Result<()> {
        self.inner.flush()?;
        let mut maint = self.inner.maint_for_caller();
        self.inner.compact_all(&mut maint)
    }

    /// The counters and the shape of the store.
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// Every live table with its filter's shape, L0 first.
    pub fn table_infos(&self) -> Vec<TableInfo> {
        let view = self.inner.current();
        view.version
            .tables()
            .map(|(level, t)| TableInfo::of(level, t.number, &t.table))
            .collect()
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Asks the OS to drop every live table file from its page cache, so the next reads
    /// reach the device (for cold-cache benchmarks). A hint: errors are ignored.
    pub fn drop_table_caches(&self) {
        let view = self.inner.current();
        for (_, t) in view.version.tables() {
            let _ = t.table.drop_cache();
        }
    }

    /// Stops background work, syncs the WAL and leaves the clean-close mark; an error
    /// says the last writes may not be durable.
    ///
    /// The directory lock goes with the last handle on the store: this `Db`, and every
    /// [`Snapshot`] and [`ScanIter`] made from it, which go on reading after `close`
    /// (another open could otherwise delete the tables they read). Until those are
    /// dropped, opening the directory again fails with [`Error::Locked`].
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        // `close` then `Drop`: the second call has nothing left to do (and must not
        // rewrite the clean-close mark, which could only lose it).
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let mut s = lock(&self.inner.signal);
            s.shutdown = true;
        }
        self.inner.wake.notify_all();
        if let Some(worker) = lock(&self.worker).take() {
            let _ = worker.join();
        }
        let mut w = lock(&self.inner.writer);
        w.wal.sync()?;
        self.inner.mark_closed(&w);
        Ok(())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Inner {
    /// The current view, owned (a reference count taken): for work that outlives a
    /// lookup or that is not on the read path.
    fn current(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// Replaces the view with `next(current)`, atomically: a flush or compaction
    /// installing its version at the same moment is not undone (both replace the view
    /// only under `view_write`).
    fn update_view(&self, next: impl FnOnce(&View) -> View) {
        let _guard = lock(&self.view_write);
        let current = self.view.load_full();
        self.view.store(Arc::new(next(&current)));
    }

    /// Wakes writers waiting for a flush or compaction. The writer lock is taken (and
    /// dropped) first: a writer checks the view and starts waiting under that lock, so
    /// it is either already waiting or will see the new view.
    fn notify_progress(&self) {
        drop(lock(&self.writer));
        self.progress.notify_all();
    }

    /// Refuses every write, flush and compaction of a read-only open.
    fn check_writable(&self) -> Result<()> {
        if self.options.read_only {
            return Err(Error::ReadOnly(self.dir.clone()));
        }
        Ok(())
    }

    /// Leaves the clean-close mark (see [`ClosedMark`]) once every write is synced:
    /// the next open may then append to this log. Not after any error, and never for a
    /// read-only open. Best effort: without a mark, the next open takes the path that
    /// needs none.
    fn mark_closed(&self, w: &Writer) {
        if self.options.read_only || self.check_bg_error().is_err() {
            return;
        }
        let mark = ClosedMark {
            wal: w.wal_number,
            wal_len: w.wal_start + w.wal.bytes_written(),
        };
        if let Ok(mut file) = self.fs.create(&filename::closed_path(&self.dir)) {
            let _ = file.append(&mark.encode());
        }
    }

    fn check_bg_error(&self) -> Result<()> {
        match lock(&self.bg_error).as_ref() {
            Some(e) => Err(Error::Closed(format!("writes stopped after an error: {e}"))),
            None => Ok(()),
        }
    }

    fn set_bg_error(&self, e: &Error) {
        self.set_bg_error_message(e.to_string());
    }

    /// Records the first background failure; writes are refused from now on.
    fn set_bg_error_message(&self, message: String) {
        let mut slot = lock(&self.bg_error);
        if slot.is_none() {
            *slot = Some(message);
        }
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.check_writable()?;
        if batch.is_empty() {
            return Ok(());
        }
        // Every argument is checked before the log is touched: a bad write is refused
        // alone and the store goes on taking writes.
        batch.check_limits()?;
        let mut w = lock(&self.writer);
        self.check_bg_error()?;
        // A panic below (a file system's append or sync, say) leaves the log's tail
        // and the sequence numbers unknown: stop taking writes, as an error does.
        let _poison = StopWritesOnPanic(self);
        w = self.make_room(w)?;
        let seq = w.next_seq;
        let n = batch.len() as u64;
        let payload = batch.into_record(seq)?;
        // Checked before it is logged: a payload the log holds always replays.
        write_batch::check(&payload, Path::new("(write batch)"))?;
        // A failed append may leave half a record; appending after it would turn a torn
        // tail into corruption in the middle, so the store stops taking writes.
        let logged = w.wal.add_record(&payload).and_then(|()| {
            if self.options.sync_writes {
                w.wal.sync()
            } else {
                Ok(())
            }
        });
        if let Err(e) = logged {
            if !matches!(e, Error::InvalidArgument(_)) {
                self.set_bg_error(&e);
            }
            return Err(e);
        }
        let view = self.view.load();
        // A small record's values are copied into the writer's value arena and the
        // writer frees the record: a memtable entry then costs one allocation of its
        // own (its skip-list node), and a flush that drops it frees nothing the
        // writer allocates from meanwhile. A large record is shared by its values
        // instead of copied.
        let share = payload.len() > COPY_RECORD_MAX;
        let (owned, shared) = if share {
            (Vec::new(), Bytes::from(payload))
        } else {
            (payload, Bytes::new())
        };
        let record: &[u8] = if share { &shared } else { &owned };
        let values = &mut w.values;
        let mut next = seq;
        // The payload was checked above: every operation is applied.
        write_batch::for_each_op(record, Path::new("(write batch)"), |kind, key, value| {
            let value = if share {
                shared.slice(value)
            } else {
                values.copy(&record[value])
            };
            view.mem.apply(next, kind, &record[key], value);
            next += 1;
        })?;
        w.next_seq = seq + n;
        // The whole batch is in the memtable: make it visible at once.
        self.visible_seq.store(seq + n - 1, Ordering::Release);
        Ok(())
    }

    /// Makes room for a write, applying backpressure (LevelDB's and RocksDB's rules):
    ///
    /// - L0 at `level0_slowdown_writes_trigger` tables: the write first yields up to
    ///   1 ms to compaction (once per write), spreading a stall over many writes;
    /// - memtable full and `max_immutable_memtables` frozen ones waiting for flush, or
    ///   L0 at `level0_stop_writes_trigger`: the writer waits until background work
    ///   makes progress (a condition variable, signalled after every flush and
    ///   compaction), so L0 stays bounded by the stop trigger plus the frozen memtables;
    /// - memtable full otherwise: it is frozen and a fresh one takes the write.
    ///
    /// The L0 triggers apply only while auto compaction runs: with it off nothing
    /// would ever lower L0, and a stop would be forever.
    fn make_room<'a>(&'a self, mut w: MutexGuard<'a, Writer>) -> Result<MutexGuard<'a, Writer>> {
        let mut slowed = false;
        let mut stalled_since = None;
        let result = loop {
            let view = self.current();
            let l0 = if self.options.disable_auto_compaction {
                0
            } else {
                view.version.level(0).len()
            };
            if !slowed && l0 >= self.options.level0_slowdown_writes_trigger {
                slowed = true;
                stalled_since.get_or_insert_with(Instant::now);
                self.schedule();
                w = self
                    .progress
                    .wait_timeout(w, Duration::from_millis(1))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                // The background thread may have failed meanwhile, and the one
                // notification it sent may have ended this wait: waiting again below
                // would be forever, and writing would ignore the error.
                if let Err(e) = self.check_bg_error() {
                    break Err(e);
                }
                continue;
            }
            if view.mem.approximate_size() < self.options.memtable_size {
                break Ok(());
            }
            if view.imm.len() >= self.options.max_immutable_memtables
                || l0 >= self.options.level0_stop_writes_trigger
            {
                stalled_since.get_or_insert_with(Instant::now);
                self.schedule();
                w = self.progress.wait(w).unwrap_or_else(|p| p.into_inner());
                if let Err(e) = self.check_bg_error() {
                    break Err(e);
                }
                continue;
            }
            break self.freeze(&mut w).map(|()| {
                self.schedule();
            });
        };
        if let Some(since) = stalled_since {
            bump(&self.counters.write_stalls);
            add(
                &self.counters.write_stall_micros,
                since.elapsed().as_micros() as u64,
            );
        }
        result.map(|()| w)
    }

    /// Makes the memtable immutable and starts a new one backed by a new WAL.
    /// The old WAL is synced first, so only the newest WAL can ever have a torn tail.
    fn freeze(&self, w: &mut Writer) -> Result<()> {
        let _poison = StopWritesOnPanic(self);
        let result = (|| {
            w.wal.sync()?;
            let number = self.next_file_number.fetch_add(1, Ordering::Relaxed);
            let file = self.fs.create(&filename::wal_path(&self.dir, number))?;
            self.fs.sync_dir(&self.dir)?;
            Ok::<_, Error>((number, file))
        })();
        let (number, file) = match result {
            Ok(r) => r,
            Err(e) => {
                self.set_bg_error(&e);
                return Err(e);
            }
        };
        w.wal = WalWriter::new(file);
        w.wal_number = number;
        w.wal_start = 0;
        // Read and replace the view under one lock: with a separate read, a version
        // installed in between by the background thread would be overwritten by the
        // older one, and the next install would drop (and delete) its tables.
        self.update_view(|view| {
            let mut imm = view.imm.clone();
            imm.push((view.mem.clone(), view.mem_wal));
            View {
                mem: Arc::new(Memtable::new()),
                mem_wal: number,
                imm,
                version: view.version.clone(),
            }
        });
        Ok(())
    }

    /// The last sequence number whose batch is wholly visible.
    pub(crate) fn visible_seq(&self) -> SeqNo {
        self.visible_seq.load(Ordering::Acquire)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        // The view first, then the sequence number: every table in the view was
        // flushed from writes at or below it, so memtables and tables agree on one
        // point in time, and the tables' newest version is the answer: no walk down
        // older versions (READ_LATEST). A guard, not a clone: nothing shared is written.
        let view = self.view.load();
        let read_seq = self.visible_seq.load(Ordering::Acquire);
        self.read(&view, key, read_seq, READ_LATEST)
    }

    /// A snapshot's `get`: the current memtables and tables read as of `read_seq`.
    pub(crate) fn get_at(&self, key: &[u8], read_seq: SeqNo) -> Result<Option<Bytes>> {
        let view = self.view.load();
        self.read(&view, key, read_seq, read_seq)
    }

    /// One lookup in `view`: memtables at `mem_seq`, then the tables at `table_seq`.
    fn read(
        &self,
        view: &View,
        key: &[u8],
        mem_seq: SeqNo,
        table_seq: SeqNo,
    ) -> Result<Option<Bytes>> {
        bump(&self.counters.local().gets);
        let in_memory = view.mem.hit_at(key, mem_seq).or_else(|| {
            view.imm
                .iter()
                .rev()
                .find_map(|(mem, _)| mem.hit_at(key, mem_seq))
        });
        if let Some(hit) = in_memory {
            bump(&self.counters.local().memtable_hits);
            return Ok(hit.live_value());
        }
        // Hash once; every table's filter is probed with the same hash.
        let hash = KeyHash::of(key);
        let mut tally = ReadTally::default();
        let found = view.version.get(key, hash, table_seq, &mut tally);
        self.counters.add_tally(&tally);
        Ok(found?.and_then(Hit::live_value))
    }

    /// A scan of `start..end` as of a snapshot's `read_seq`, or as of now for `None`.
    /// `prefix`: every key in the range has this prefix of the store's extractor, so
    /// tables whose filter rules it out are left out. Without one, a range whose two
    /// bounds share a prefix gets the same.
    pub(crate) fn scan_at(
        self: &Arc<Self>,
        start: Bound<Bytes>,
        end: Bound<Bytes>,
        read_seq: Option<SeqNo>,
        prefix: Option<&[u8]>,
    ) -> ScanIter {
        // The view first, then "now", as `get` does. A snapshot's number is registered,
        // so every flush and compaction since kept the versions it sees, and any later
        // view serves it. An unregistered number read before the view is not safe: a
        // compaction finishing in between keeps only the newest version of each key,
        // which may be newer than that number, and the scan would then fall through to
        // an older version in another table and go back in time. Read after the view,
        // the number is at least every version the view's tables hold, so whatever a
        // compaction dropped was shadowed by a version the scan sees.
        let view = self.current();
        #[cfg(test)]
        tests::between_scan_loads();
        let read_seq = read_seq.unwrap_or_else(|| self.visible_seq());
        let extractor = self.options.prefix_extractor.as_deref();
        let prefix = prefix.or_else(|| match (extractor, &start, &end) {
            (
                Some(x),
                Bound::Included(s) | Bound::Excluded(s),
                Bound::Included(e) | Bound::Excluded(e),
            ) => x.prefix_of(s).filter(|p| x.prefix_of(e) == Some(*p)),
            _ => None,
        });
        let prefix_probe = extractor
            .zip(prefix)
            .map(|(x, p)| (x.name(), KeyHash::of(p)));
        let mems = std::iter::once(&view.mem)
            .chain(view.imm.iter().map(|(m, _)| m))
            .cloned()
            .collect();
        let tables = view
            .version
            .tables()
            .filter(|(_, h)| range_overlaps(&start, &end, h.smallest(), h.largest()))
            .filter(|(_, h)| match prefix_probe {
                Some((name, hash)) => h.table.may_contain_prefix(name, hash),
                None => true,
            })
            .filter(|(_, h)| h.table.may_contain_range(as_slice(&start), as_slice(&end)))
            .map(|(_, h)| h.table.clone())
            .collect();
        ScanIter::new(self.clone(), mems, tables, read_seq, start, end)
    }

    /// The keys starting with `prefix`, as of `read_seq` (see [`Inner::scan_at`]).
    pub(crate) fn scan_prefix_at(
        self: &Arc<Self>,
        prefix: &[u8],
        read_seq: Option<SeqNo>,
    ) -> ScanIter {
        let start = Bound::Included(Bytes::copy_from_slice(prefix));
        let end = match prefix_successor(prefix) {
            Some(e) => Bound::Excluded(Bytes::from(e)),
            None => Bound::Unbounded,
        };
        let extractor = self.options.prefix_extractor.as_deref();
        // Only where the extractor promises that every key starting with `prefix` has
        // the prefix it extracts from `prefix` (a fixed-length one at least as long):
        // the extractor's contract alone does not, and asking the filter about a
        // shorter prefix than the keys' would skip tables holding them.
        let filter_prefix = extractor
            .filter(|x| x.covers_extensions(prefix))
            .and_then(|x| x.prefix_of(prefix));
        self.scan_at(start, end, read_seq, filter_prefix)
    }

    fn flush(&self) -> Result<()> {
        self.check_writable()?;
        {
            let mut w = lock(&self.writer);
            self.check_bg_error()?;
            if !self.current().mem.is_empty() {
                self.freeze(&mut w)?;
            }
        }
        let mut maint = self.maint_for_caller();
        while self.flush_oldest(&mut maint)? {}
        Ok(())
    }

    /// `maint` for a caller's flush or compaction: announced first, so that a
    /// background thread busy with a steady writer's work hands it over at its next
    /// step instead of keeping it until the writes stop.
    fn maint_for_caller(&self) -> MutexGuard<'_, Maint> {
        *lock(&self.maint_callers) += 1;
        let maint = lock(&self.maint);
        *lock(&self.maint_callers) -= 1;
        self.maint_handoff.notify_all();
        maint
    }

    /// Writes the oldest frozen memtable as an L0 table. `false` when none waits.
    fn flush_oldest(&self, maint: &mut Maint) -> Result<bool> {
        let view = self.current();
        let Some((mem, _)) = view.imm.first().cloned() else {
            return Ok(false);
        };
        let number = self.next_file_number.fetch_add(1, Ordering::Relaxed);
        // Every version a live snapshot sees goes to the table; the newest always does.
        let snapshots = self.snapshots.sequence_numbers();
        let versions = Retain::new(mem.versions().map(Ok), snapshots, false);
        let added = self
            .build_table(number, 0, (&[], mem.len() as u64), versions)?
            .map(|h| vec![(0, Arc::new(h))])
            .unwrap_or_default();
        add(&self.counters.flush_bytes_written, table_bytes(&added));
        let version = view.version.apply(&[], added);
        // The oldest WAL still needed backs the next frozen memtable, or the live one.
        let live_wal = view.imm.get(1).map(|(_, w)| *w).unwrap_or(view.mem_wal);
        maint.last_sequence = maint.last_sequence.max(mem.max_seq());
        self.install(maint, version, live_wal, |current| {
            current.imm.iter().skip(1).cloned().collect()
        })?;
        self.notify_progress();
        Ok(true)
    }

    /// Records `version` in the manifest, makes it current, and deletes what it retired.
    fn install(
        &self,
        maint: &Maint,
        version: Version,
        live_wal: u64,
        imm: impl FnOnce(&View) -> Vec<(Arc<Memtable>, u64)>,
    ) -> Result<()> {
        let next = self.next_file_number.load(Ordering::Relaxed);
        if let Err(e) = write_state(
            &self.fs,
            &self.dir,
            &version,
            live_wal,
            next,
            maint.last_sequence,
        ) {
            self.set_bg_error(&e);
            // A writer stalled for this flush or compaction wakes to the error (this
            // may be a caller's thread, whose failure nothing else announces). Taking
            // the writer lock here is safe: `install` runs under `maint` and never
            // under the writer lock, and the lock order is `maint` → writer.
            self.notify_progress();
            // Tables this version adds that no manifest names: delete them now, so a
            // full disk gets their space back.
            let old: HashSet<u64> = self
                .current()
                .version
                .tables()
                .map(|(_, t)| t.number)
                .collect();
            let added: Vec<u64> = version
                .tables()
                .map(|(_, t)| t.number)
                .filter(|n| !old.contains(n))
                .collect();
            discard_unrecorded(&self.fs, &self.dir, &added);
            return Err(e);
        }
        let live: HashSet<u64> = version.tables().map(|(_, t)| t.number).collect();
        self.update_view(|current| {
            // The manifest no longer names these tables: each file goes when its last
            // reader lets go of it (see `table_cache`).
            for (_, t) in current.version.tables() {
                if !live.contains(&t.number) {
                    t.table.mark_obsolete();
                }
            }
            View {
                mem: current.mem.clone(),
                mem_wal: current.mem_wal,
                imm: imm(current),
                version: Arc::new(version),
            }
        });
        remove_obsolete(&self.fs, &self.dir, None, live_wal);
        Ok(())
    }

    /// Writes table `number` for `level`, with the filter the level's plan calls for
    /// (`incoming`: about how many keys the table will hold).
    fn build_table(
        &self,
        number: u64,
        level: usize,
        (inputs, incoming): (&[u64], u64),
        entries: impl Iterator<Item = Result<Entry>>,
    ) -> Result<Option<TableHandle>> {
        let policy = self.policy_for_level(level, inputs, incoming)?;
        build_table(
            &self.fs,
            &self.table_cache,
            &self.dir,
            number,
            &self.options,
            &policy,
            &self.counters,
            &self.policies,
            entries,
        )
    }

    /// The filter policy for a new table on `level` (see `filter_plan.rs`): the store's
    /// policy under the uniform allocation, otherwise the plan for the live tree plus
    /// the `incoming` keys.
    fn policy_for_level(
        &self,
        level: usize,
        inputs: &[u64],
        incoming: u64,
    ) -> Result<Option<Arc<dyn FilterPolicy>>> {
        let options = &self.options;
        let hybrid = options.filter == FilterKind::Ribbon && options.bloom_before_level > 0;
        if options.filter_allocation == FilterAllocation::Uniform
            && !options.optimize_filters_for_hits
            && !hybrid
        {
            return Ok(self.policy.clone());
        }
        let version = self.current().version.clone();
        let loads = filter_plan::loads(&version, options, level, inputs, incoming);
        let kinds = filter_plan::level_kinds(options);
        let plan = filter_plan::plan(
            options.filter_allocation,
            options.bits_per_key,
            options.optimize_filters_for_hits,
            &kinds,
            &loads,
        );
        filter_plan::policy_for(&kinds[level], plan.bits_per_key[level])
    }

    /// Merges `inputs` into tables on `output_level`, splitting at the target size.
    fn compact(
        &self,
        maint: &mut Maint,
        inputs: Vec<Arc<TableHandle>>,
        output_level: usize,
    ) -> Result<()> {
        let view = self.current();
        let version = &view.version;
        // A tombstone may go only when no deeper level could hold an older value.
        let drop_tombstones = version.levels()[output_level + 1..]
            .iter()
            .all(|l| l.is_empty());
        let sources: Vec<Source> = inputs
            .iter()
            .map(|h| Box::new(h.table.iter_from(Bound::Unbounded)) as Source)
            .collect();
        // Read after the inputs were chosen: a snapshot taken later sees at least
        // every write the inputs hold, so it needs only their newest versions.
        let snapshots = self.snapshots.sequence_numbers();
        let mut merged =
            Retain::new(MergeIter::new(sources), snapshots, drop_tombstones).peekable();
        // Keys joining the output level (its own inputs are already counted there).
        let incoming: u64 = inputs.iter().map(|h| h.table.properties().entries).sum();
        let removed: Vec<u64> = inputs.iter().map(|h| h.number).collect();
        let mut added: Vec<(usize, Arc<TableHandle>)> = Vec::new();
        let written = self.write_outputs(
            maint,
            &mut merged,
            output_level,
            (&removed, incoming),
            &mut added,
        );
        if !matches!(written, Ok(true)) {
            // An error, or a closing store: the inputs stay live, and the outputs so
            // far are in no manifest, so their files go with their last handle (here)
            // rather than wait in the directory for the next open to set them aside.
            for (_, h) in &added {
                h.table.mark_obsolete();
            }
            return written.map(|_| ());
        }
        // The edit applies to the current version, which may hold tables flushed
        // during the merge, and the oldest WAL still needed is read now: a flush may
        // have retired one since the merge began, and the manifest must never name an
        // older log again.
        bump(&self.counters.compactions);
        add(
            &self.counters.compaction_bytes_read,
            inputs.iter().map(|h| h.table.file_size()).sum(),
        );
        add(&self.counters.compaction_bytes_written, table_bytes(&added));
        let current = self.current();
        let next = current.version.apply(&removed, added);
        self.install(maint, next, current.mem_wal_min(), |current| {
            current.imm.clone()
        })?;
        self.notify_progress();
        Ok(())
    }

    /// Writes the merge into tables on `output_level`, split at the target size,
    /// pushing each onto `added`; `Ok(false)` if the store began closing first.
    fn write_outputs(
        &self,
        maint: &mut Maint,
        merged: &mut std::iter::Peekable<impl Iterator<Item = Result<Entry>>>,
        output_level: usize,
        (removed, incoming): (&[u64], u64),
        added: &mut Vec<(usize, Arc<TableHandle>)>,
    ) -> Result<bool> {
        while merged.peek().is_some() {
            // A long compaction must not hold writers up: a memtable frozen meanwhile
            // is flushed between two output tables. Its L0 table is newer than every
            // input and is not one, so the merge below is unaffected.
            while self.flush_oldest(maint)? {}
            // Nor a closing store: its background work is dropped between two output
            // tables.
            if self.closing() {
                return Ok(false);
            }
            let number = self.next_file_number.fetch_add(1, Ordering::Relaxed);
            let target = self.options.target_file_size;
            let chunk = ChunkUntil {
                inner: merged,
                written: 0,
                target,
                last_key: None,
            };
            if let Some(h) = self.build_table(number, output_level, (removed, incoming), chunk)? {
                added.push((output_level, Arc::new(h)));
            }
        }
        Ok(true)
    }

    fn compact_all(&self, maint: &mut Maint) -> Result<()> {
        let version = self.current().version.clone();
        let inputs: Vec<Arc<TableHandle>> = version.tables().map(|(_, t)| t.clone()).collect();
        if inputs.is_empty() {
            return Ok(());
        }
        let output_level = match version.deepest_nonempty_level() {
            // Sized from the bottom up, a tree whose data is all in L0 has its base on
            // the last level: any level above would be over its budget of nothing, and
            // the data would move down again one level at a time.
            0 if self.options.dynamic_level_bytes => NUM_LEVELS - 1,
            deepest => deepest.max(1),
        };
        self.compact(maint, inputs, output_level)
    }

    /// The most urgent size-triggered compaction, if any (see `compaction.rs`).
    fn pick_compaction(&self, maint: &mut Maint) -> Option<compaction::Pick> {
        let version = self.current().version.clone();
        compaction::pick(&version, &self.options, &mut maint.compact_pointer)
    }

    /// Whether the store is shutting down (background work should stop).
    fn closing(&self) -> bool {
        lock(&self.signal).shutdown
    }

    fn schedule(&self) {
        lock(&self.signal).pending = true;
        self.wake.notify_all();
    }

    fn background_loop(&self) {
        loop {
            {
                let mut s = lock(&self.signal);
                while !s.pending && !s.shutdown {
                    s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                if s.shutdown {
                    return;
                }
                s.pending = false;
            }
            if lock(&self.bg_error).is_some() {
                // Nothing will run again, but whoever scheduled this pass may be
                // waiting for progress: wake them to find the error.
                self.notify_progress();
                continue;
            }
            // A panic in background work must not leave writers waiting for progress
            // that will never come: it becomes the store's background error.
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.background_work()));
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(panic) => Some(format!(
                    "background thread panicked: {}",
                    panic_message(panic.as_ref())
                )),
            };
            if let Some(message) = failure {
                self.set_bg_error_message(message);
            }
            self.notify_progress();
        }
    }

    /// Flushes every frozen memtable, then compacts until no level is over budget.
    fn background_work(&self) -> Result<()> {
        let mut maint = lock(&self.maint);
        loop {
            if self.closing() {
                return Ok(());
            }
            if *lock(&self.maint_callers) > 0 {
                // A caller waits for `maint`: let it in, then queue behind it.
                drop(maint);
                let mut callers = lock(&self.maint_callers);
                while *callers > 0 {
                    callers = self
                        .maint_handoff
                        .wait(callers)
                        .unwrap_or_else(|p| p.into_inner());
                }
                drop(callers);
                maint = lock(&self.maint);
                continue;
            }
            // L0 over its trigger is compacted before the next flush: with flushes
            // first, a fast writer keeps the thread flushing and L0 grows without bound.
            let auto = !self.options.disable_auto_compaction;
            if auto && compaction::l0_over_trigger(&self.current().version, &self.options) {
                if let Some(pick) = self.pick_compaction(&mut maint) {
                    self.compact(&mut maint, pick.inputs, pick.output_level)?;
                    continue;
                }
            }
            if self.flush_oldest(&mut maint)? {
                continue;
            }
            if !auto {
                return Ok(());
            }
            match self.pick_compaction(&mut maint) {
                Some(pick) => self.compact(&mut maint, pick.inputs, pick.output_level)?,
                None => return Ok(()),
            }
        }
    }

    fn stats(&self) -> DbStats {
        let mut stats = self.counters.snapshot();
        let view = self.current();
        stats.tables_per_level = view.version.levels().iter().map(Vec::len).collect();
        stats.open_table_files = self.table_cache.open_files() as u64;
        stats.block_cache_bytes = self.table_cache.block_cache_bytes();
        stats.filter_memory_bytes = view
            .version
            .tables()
            .map(|(_, t)| t.table.filter_memory_bytes() as u64)
            .sum();
        stats
    }
}

impl View {
    /// The oldest WAL still backing unflushed data.
    fn mem_wal_min(&self) -> u64 {
        self.imm.first().map(|(_, w)| *w).unwrap_or(self.mem_wal)
    }
}

/// Passes entries through until the table being written reaches its target size, and
/// then to the end of the current key: a key's versions never straddle two tables, so
/// tables on one level keep disjoint key ranges.
struct ChunkUntil<'a, I: Iterator<Item = Result<Entry>>> {
    inner: &'a mut std::iter::Peekable<I>,
    written: u64,
    target: u64,
    last_key: Option<Bytes>,
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for ChunkUntil<'_, I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.written >= self.target {
            let same_key = match (self.inner.peek(), &self.last_key) {
                (Some(Ok(next)), Some(last)) => next.key == *last,
                _ => false,
            };
            if !same_key {
                return None;
            }
        }
        let item = self.inner.next()?;
        if let Ok(e) = &item {
            self.written += (e.key.len() + e.value.len() + 16) as u64;
            self.last_key = Some(e.key.clone());
        }
        Some(item)
    }
}

/// The largest encoded batch whose values a write copies into the memtable; the
/// values of a larger one share its buffer.
const COPY_RECORD_MAX: usize = 16 << 10;

/// Bytes of the tables a flush or compaction added.
fn table_bytes(added: &[(usize, Arc<TableHandle>)]) -> u64 {
    added.iter().map(|(_, h)| h.table.file_size()).sum()
}

/// The text of a caught panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// A bound over owned bytes as a bound over a slice.
fn as_slice(bound: &Bound<Bytes>) -> Bound<&[u8]> {
    bound.as_ref().map(|k| &k[..])
}

fn range_overlaps(
    start: &Bound<Bytes>,
    end: &Bound<Bytes>,
    smallest: &[u8],
    largest: &[u8],
) -> bool {
    let after_start = match start {
        Bound::Included(s) => largest >= &s[..],
        Bound::Excluded(s) => largest > &s[..],
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => smallest <= &e[..],
        Bound::Excluded(e) => smallest < &e[..],
        Bound::Unbounded => true,
    };
    after_start && before_end
}

pub(crate) fn open_table(
    cache: &Arc<TableCache>,
    dir: &Path,
    number: u64,
    counters: &Arc<Counters>,
    policies: &[Arc<dyn FilterPolicy>],
) -> Result<TableHandle> {
    let path = filename::table_path(dir, number);
    let file = TableFile::cached(cache.slot(path.clone()), counters.clone());
    let table = Table::open_file(file, policies).map_err(|e| live_table_error(&path, e))?;
    Ok(TableHandle { number, table })
}

/// What a failure to open a live table means. A table the manifest names that is
/// missing, or shorter than its own footer says, is corruption; any other I/O error
/// (too many open files, permission denied, a full disk, a device error) is the
/// operating system's refusal, reported as `Error::Io` with the path: the store may
/// well be sound.
pub(crate) fn live_table_error(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            Error::corruption(path, format!("live table cannot be read: {e}"))
        }
        other => other,
    }
}

/// Writes `entries` as table `number`: temp name, fsync, rename, directory fsync, open.
/// `None` if `entries` was empty.
///
/// On any failure the files it made are deleted at once: no manifest names the table
/// yet, so they are garbage, and on a full disk they hold the space the next attempt
/// (or a reopen) needs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_table(
    fs: &Arc<dyn FileSystem>,
    cache: &Arc<TableCache>,
    dir: &Path,
    number: u64,
    options: &Options,
    policy: &Option<Arc<dyn FilterPolicy>>,
    counters: &Arc<Counters>,
    policies: &[Arc<dyn FilterPolicy>],
    entries: impl Iterator<Item = Result<Entry>>,
) -> Result<Option<TableHandle>> {
    let tmp = filename::temp_table_path(dir, number);
    let path = filename::table_path(dir, number);
    let mut renamed = false;
    let built = (|| {
        let mut builder = TableBuilder::new(
            fs.create(&tmp)?,
            tmp.clone(),
            TableOptions {
                block_size: options.block_size,
                restart_interval: options.restart_interval,
                filter_policy: policy.clone(),
                prefix_extractor: options.prefix_extractor.clone(),
                compression: options.compression,
                range_filter: options.range_filter,
                block_align: options.block_align,
            },
        );
        for entry in entries {
            let e = entry?;
            builder.add(&e.key, e.seq, e.kind, &e.value)?;
        }
        if builder.num_entries() == 0 {
            drop(builder);
            let _ = fs.remove(&tmp);
            return Ok(None);
        }
        builder.finish()?;
        fs.rename(&tmp, &path)?;
        renamed = true;
        fs.sync_dir(dir)?;
        open_table(cache, dir, number, counters, policies).map(Some)
    })();
    if built.is_err() {
        let _ = fs.remove(if renamed { &path } else { &tmp });
    }
    built
}

/// After a manifest write failed: deletes those of the `added` tables that the
/// manifest on disk does not name (the write failed before its rename, so they are
/// garbage). If the manifest cannot be read back, nothing is deleted.
pub(crate) fn discard_unrecorded(fs: &Arc<dyn FileSystem>, dir: &Path, added: &[u64]) {
    let Ok(Some(state)) = manifest::read_manifest(fs.as_ref(), dir) else {
        return;
    };
    let named: HashSet<u64> = state.tables().iter().map(|t| t.number).collect();
    for &number in added.iter().filter(|n| !named.contains(n)) {
        let _ = fs.remove(&filename::table_path(dir, number));
    }
}

/// Writes the manifest for `version` (atomic: temp file, fsync, rename, dir fsync).
pub(crate) fn write_state(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    version: &Version,
    wal_number: u64,
    next_file_number: u64,
    last_sequence: SeqNo,
) -> Result<()> {
    let tables = version
        .tables()
        .map(|(level, t)| TableMeta {
            level: level as u32,
            number: t.number,
            file_size: t.file_size(),
            smallest: Bytes::copy_from_slice(t.smallest()),
            largest: Bytes::copy_from_slice(t.largest()),
            entries: t.table.properties().entries,
            max_seq: t.max_seq(),
        })
        .collect();
    let state = ManifestState::new(next_file_number, last_sequence, wal_number, tables);
    manifest::write_manifest(fs.as_ref(), dir, &state)
}

/// Deletes retired WALs, leftover temp files and, given the live set (`repair`, before
/// any reader exists), tables the manifest no longer names. Best effort: a log or temp
/// file that cannot be deleted now goes at the next call; a table the next open finds
/// unnamed is moved into `lost/` (open cannot tell it from one the manifest lost).
pub(crate) fn remove_obsolete(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    live: Option<&HashSet<u64>>,
    live_wal: u64,
) {
    let Ok(names) = fs.list(dir) else { return };
    for name in names {
        let obsolete = match parse_file_name(&name) {
            Some(FileKind::Table(n)) => live.is_some_and(|live| !live.contains(&n)),
            Some(FileKind::Wal(n)) => n < live_wal,
            Some(FileKind::TempTable(_)) | Some(FileKind::ManifestTemp) => true,
            _ => false,
        };
        if obsolete {
            let _ = fs.remove(&dir.join(&name));
        }
    }
}

/// The level of a table the manifest in `dir` lists, refused when the store has no
/// such level: the manifest's format numbers levels up to `MAX_LEVELS`, the store
/// uses `NUM_LEVELS`.
pub(crate) fn table_level(dir: &Path, meta: &TableMeta) -> Result<usize> {
    let level = meta.level as usize;
    if level >= NUM_LEVELS {
        return Err(Error::corruption(
            filename::manifest_path(dir),
            format!(
                "table {} on level {level}: the store has levels 0 to {}",
                meta.number,
                NUM_LEVELS - 1
            ),
        ));
    }
    Ok(level)
}

/// The error for a directory without a `MANIFEST`: corruption if it holds a table or
/// a log (a store lost its manifest: `repair` rebuilds it), otherwise no store at all
/// (which an open that creates stores goes on from).
pub(crate) fn no_manifest(dir: &Path, names: &[String]) -> Error {
    match stray_store_file(names) {
        Some(stray) => Error::corruption(
            filename::manifest_path(dir),
            format!("missing, but the directory holds store file {stray} (`repair` rebuilds it)"),
        ),
        None => Error::InvalidArgument(format!(
            "{} holds no bloomkv store (no MANIFEST)",
            dir.display()
        )),
    }
}

/// The store's directory as given, refused when empty: an empty path would resolve
/// against the current directory for some operations (its `LOCK` file) and fail for
/// others, leaving a file behind and an error that names no path.
pub(crate) fn store_dir(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::InvalidArgument("the store's path is empty".into()));
    }
    Ok(path.to_path_buf())
}

/// A table or log among `names`: what only a store that has a manifest leaves.
pub(crate) fn stray_store_file(names: &[String]) -> Option<&String> {
    names.iter().find(|n| {
        matches!(
            parse_file_name(n),
            Some(FileKind::Table(_)) | Some(FileKind::Wal(_))
        )
    })
}

fn no_store(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{} holds no bloomkv store and create_if_missing is false",
        dir.display()
    ))
}

/// How many times a read-only open starts again when the store changed under it.
const READ_ONLY_ATTEMPTS: usize = 20;

/// A read-only open (see [`Options::read_only`]): the manifest's tables are opened and
/// the logs replayed into the memtable; nothing is written, deleted or locked, and no
/// background thread runs. A writer may be rotating files meanwhile: when an attempt
/// fails and the manifest changed while it ran, it starts again.
fn open_read_only(dir: PathBuf, options: Options) -> Result<Db> {
    let fs = options.file_system.clone();
    if !fs.exists(&dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist",
            dir.display()
        )));
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = DirState::read(fs.as_ref(), &dir);
        let opened = open_read_only_once(&dir, &options);
        if opened.is_ok() {
            return opened;
        }
        // A table or log that vanished because a writer moved on: read again.
        let after = DirState::read(fs.as_ref(), &dir);
        if before.manifest == after.manifest {
            return opened;
        }
        if attempt >= READ_ONLY_ATTEMPTS {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "{} is open by another process that kept changing it: {} file(s) \
                     rotated while reading, {attempt} attempt(s); try again",
                    dir.display(),
                    before.changes(&after)
                ),
            )));
        }
    }
}

/// What a reader without the lock compares before and after reading a store to tell
/// whether a writer changed it meanwhile: the manifest's bytes and the file names.
/// (Logs grow in place; only a log's last record can be caught half-written, which
/// the default recovery mode tolerates.)
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DirState {
    manifest: Option<Vec<u8>>,
    names: Vec<String>,
}

impl DirState {
    pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> DirState {
        DirState {
            manifest: fs.read_all(&filename::manifest_path(dir)).ok(),
            names: fs.list(dir).unwrap_or_default(),
        }
    }

    /// Files that appeared or vanished between `self` and `later`, plus one if the
    /// manifest was replaced.
    pub(crate) fn changes(&self, later: &DirState) -> usize {
        let a: HashSet<&String> = self.names.iter().collect();
        let b: HashSet<&String> = later.names.iter().collect();
        a.symmetric_difference(&b).count() + usize::from(self.manifest != later.manifest)
    }
}

fn open_read_only_once(dir: &Path, options: &Options) -> Result<Db> {
    let fs = options.file_system.clone();
    let counters = Arc::new(Counters::default());
    let table_cache =
        TableCache::with_block_cache(fs.clone(), options.max_open_files, options.block_cache_size);
    let policy = options.filter_policy()?;
    let policies = options.known_policies()?;
    // The logs are listed before the manifest is read. A writer deletes a log only
    // after a manifest that retires it is in place, so every log the manifest read
    // below still needs was listed (a log started since holds only newer writes, a
    // suffix this open does not see). A listed log or named table that vanishes before
    // it is read fails this attempt, and the caller reads again.
    let names = fs.list(dir)?;
    let Some(state) = manifest::read_manifest(fs.as_ref(), dir)? else {
        return Err(no_manifest(dir, &names));
    };
    let mut tables = Vec::new();
    for meta in state.tables() {
        let level = table_level(dir, meta)?;
        let handle = open_table(&table_cache, dir, meta.number, &counters, &policies)?;
        tables.push((level, Arc::new(handle)));
    }
    let version = Version::empty().apply(&[], tables);
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match parse_file_name(n) {
            Some(FileKind::Wal(number)) if number >= state.wal_number() => Some(number),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    let replayed = recovery::replay(
        fs.as_ref(),
        dir,
        &wals,
        options.wal_recovery,
        state.last_sequence(),
    )?;
    let last_seq = replayed.last_seq;
    add(
        &counters.wal_tail_bytes_dropped,
        replayed.report.bytes_dropped(),
    );
    let mem_wal = wals.first().copied().unwrap_or(state.wal_number());
    let inner = Arc::new(Inner {
        fs,
        policy,
        policies,
        counters,
        table_cache,
        next_file_number: AtomicU64::new(state.next_file_number()),
        view: ArcSwap::from_pointee(View {
            mem: Arc::new(replayed.memtable),
            mem_wal,
            imm: Vec::new(),
            version: Arc::new(version),
        }),
        view_write: Mutex::new(()),
        writer: Mutex::new(Writer {
            wal: WalWriter::new(Box::new(NoWrites)),
            wal_number: mem_wal,
            wal_start: 0,
            next_seq: last_seq + 1,
            values: ByteArena::default(),
        }),
        visible_seq: AtomicU64::new(last_seq),
        progress: Condvar::new(),
        maint: Mutex::new(Maint {
            compact_pointer: vec![None; NUM_LEVELS],
            last_sequence: state.last_sequence(),
        }),
        maint_callers: Mutex::new(0),
        maint_handoff: Condvar::new(),
        signal: Mutex::new(Signal::default()),
        wake: Condvar::new(),
        bg_error: Mutex::new(None),
        snapshots: SnapshotList::default(),
        _lock: None,
        options: options.clone(),
        dir: dir.to_path_buf(),
    });
    Ok(Db {
        inner,
        worker: Mutex::new(None),
        closed: AtomicBool::new(false),
        recovery: replayed.report,
    })
}

/// The log "writer" of a read-only open: every write is refused before it gets here.
struct NoWrites;

impl crate::fs::WritableFile for NoWrites {
    fn append(&mut self, _: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the store is open read-only",
        ))
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Open's first step on an existing store, before it writes anything: deletes leftover
/// temp files (a table or manifest being written when the store stopped: never named
/// by a manifest) and moves every table the manifest does not name into `lost/`.
/// Returns where the moved tables are now.
///
/// Such a table is normally the output of a flush or compaction cut short by a crash,
/// or an input a finished compaction had not yet deleted; either way the named tables
/// and logs hold its entries. But open cannot prove that (a table written by another
/// process that got past the lock, or copied in by hand, looks the same), so it keeps
/// the file where the store no longer reads it and `repair` or a person can.
fn tidy_before_writing(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    names: &[String],
    state: &ManifestState,
) -> Result<Vec<PathBuf>> {
    let live: HashSet<u64> = state.tables().iter().map(|t| t.number).collect();
    let mut unlisted = Vec::new();
    for name in names {
        match parse_file_name(name) {
            Some(FileKind::TempTable(_)) | Some(FileKind::ManifestTemp) => {
                let path = dir.join(name);
                match fs.remove(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Some(FileKind::Table(n)) if !live.contains(&n) => unlisted.push(n),
            _ => {}
        }
    }
    let mut moved = Vec::new();
    if unlisted.is_empty() {
        return Ok(moved);
    }
    let lost = filename::lost_dir(dir);
    fs.create_dir_all(&lost)?;
    for number in unlisted {
        let to = free_name(fs.as_ref(), &lost, &filename::table_file_name(number));
        fs.rename(&filename::table_path(dir, number), &to)?;
        moved.push(to);
    }
    fs.sync_dir(&lost)?;
    fs.sync_dir(dir)?;
    Ok(moved)
}

/// A name in `dir` for `name` that no file has yet (`name`, `name.1`, `name.2`, ...).
pub(crate) fn free_name(fs: &dyn FileSystem, dir: &Path, name: &str) -> PathBuf {
    let mut candidate = dir.join(name);
    let mut i = 0u32;
    while fs.exists(&candidate) {
        i += 1;
        candidate = dir.join(format!("{name}.{i}"));
    }
    candidate
}

/// The number in a store file's name, if it has one.
pub(crate) fn file_number(name: &str) -> Option<u64> {
    match parse_file_name(name)? {
        FileKind::Table(n) | FileKind::TempTable(n) | FileKind::Wal(n) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    thread_local! {
        /// What a test lets happen between a scan's two loads, once.
        static PAUSE: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// Runs what a test queued for the gap between a scan's view and its sequence
    /// number (`Inner::scan_at`), as a scan thread descheduled there would let it.
    pub(super) fn between_scan_loads() {
        if let Some(f) = PAUSE.with(|p| p.borrow_mut().take()) {
            f();
        }
    }

    /// A scan must not go back in time however long it is held up between its two
    /// loads. In the gap a newer version is written, flushed and compacted with the
    /// older one away (no snapshot asks for it). Reading the number after the view,
    /// the scan sees the version its view holds or the newer one; reading it before
    /// (as `Db::scan` once did), it would find only a version newer than its number
    /// and return nothing: the failure `tests/fresh_reads.rs` caught under load.
    #[test]
    fn a_compaction_between_a_scans_two_loads_does_not_send_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            disable_auto_compaction: true,
            ..Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), options).unwrap());
        db.put("k", "v0").unwrap();
        db.flush().unwrap();
        for (round, prefix) in [(1, false), (2, true)] {
            let before = format!("v{}", round - 1);
            let after = format!("v{round}");
            let writer = Arc::clone(&db);
            let newer = after.clone();
            PAUSE.with(|p| {
                *p.borrow_mut() = Some(Box::new(move || {
                    writer.put("k", newer).unwrap();
                    writer.flush().unwrap();
                    writer.compact().unwrap();
                }))
            });
            let scan = if prefix {
                db.scan_prefix("k")
            } else {
                db.scan::<&str, _>(..)
            };
            let seen: Vec<Bytes> = scan.map(|kv| kv.unwrap().1).collect();
            assert!(
                PAUSE.with(|p| p.borrow().is_none()),
                "the pause did not run"
            );
            assert!(
                seen == [before.as_str()] || seen == [after.as_str()],
                "round {round}: the scan saw {seen:?}"
            );
        }
    }

    /// A background failure while a writer yields to compaction (L0 at the slowdown
    /// trigger) and will next have to wait for a flush: the writer must wake to the
    /// error, not wait forever. Before the fix, the failure's one notification ended
    /// the writer's 1 ms yield, the writer then waited untimed for progress, and the
    /// background thread, finding the error set, never notified again. The old code
    /// hangs here only if the failure lands within that 1 ms (it did in both of two
    /// runs; a slow wake-up of the background thread would let it pass); the fixed
    /// code returns the error whenever the failure lands.
    #[test]
    fn a_writer_yielding_to_a_failing_compaction_gets_the_error() {
        use crate::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
        use crate::fs::mem::MemFileSystem;

        let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
        let options = Options {
            file_system: Arc::new(fs.clone()),
            memtable_size: 4096,
            max_immutable_memtables: 1,
            l0_compaction_trigger: 1,
            level0_slowdown_writes_trigger: 1,
            level0_stop_writes_trigger: 1000,
            ..Options::default()
        };
        let db = Arc::new(Db::open("/db", options).unwrap());
        let value = [b'v'; 100];
        let mut n = 0u32;
        let mut put = |db: &Db| {
            n += 1;
            db.put(format!("key{n:06}"), value).unwrap();
        };
        // Hold the background thread off while the stage is set.
        let mut maint = lock(&db.inner.maint);
        while db.inner.current().imm.is_empty() {
            put(&db);
        }
        assert!(db.inner.flush_oldest(&mut maint).unwrap());
        assert_eq!(db.inner.current().version.level(0).len(), 1);
        // L0 is at the slowdown trigger now: every write yields first.
        while db.inner.current().imm.is_empty() {
            put(&db);
        }
        while db.inner.current().mem.approximate_size() < 4096 {
            put(&db);
        }
        // The background work's first new file (a table) will find the disk full.
        fs.set_plan(FaultPlan::nth(1, &[OpKind::Create], Fault::NoSpace));
        lock(&db.inner.signal).pending = false;
        let (done, result) = std::sync::mpsc::channel();
        let writer = Arc::clone(&db);
        std::thread::spawn(move || {
            let _ = done.send(writer.put("late", "write"));
        });
        // The writer has scheduled background work and is in its yield.
        while !lock(&db.inner.signal).pending {
            std::thread::yield_now();
        }
        drop(maint);
        let got = result
            .recv_timeout(Duration::from_secs(60))
            .expect("the writer never woke to the background error");
        assert!(matches!(got, Err(Error::Closed(_))), "{got:?}");
        assert!(
            db.get("late").unwrap().is_none(),
            "a refused write was applied"
        );
    }
}
