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
//! Readers never take that lock: they load the current [`View`](inner::View) from an
//! [`ArcSwap`](arc_swap::ArcSwap)
//! (a `get` takes a guard in a thread-local slot: no lock, no reference count, nothing
//! shared written), then work on immutable data. The few places that replace the
//! view do so under `view_write`, reading and replacing it as one step. Flush and
//! compaction run one at a time under `maint`, build the next
//! [`Version`](crate::version::Version) off to the side, record it in the manifest, and
//! only then swap the view and delete what it retired.
//!
//! Crash safety rests on three orderings: a write is in the WAL before it is in the
//! memtable; a table is fsynced and renamed into place before the manifest names it;
//! a WAL or table is deleted only after a manifest that no longer needs it is durable.
//!
//! One store, cut by path: every file here is an `impl` of the same two types, [`Db`]
//! (the handle) and `Inner` (the state it shares with the background thread, snapshots
//! and scans).
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | `Db` and its public methods |
//! | `inner.rs` | the shared state, its one constructor, signals, the background error, `stats` |
//! | `open.rs` | the steps of open, and the read-only open that reuses them |
//! | `write.rs` | `write`, backpressure (`make_room`), `freeze` |
//! | `read.rs` | `get`, and the start of a scan |
//! | `flush_compact.rs` | flush and compaction, `install` |
//! | `background.rs` | the background thread and its panic capture |
//! | `snapshot.rs` | snapshots and the list of live ones compaction reads |
//! | `checkpoint.rs` | `checkpoint`: a consistent copy of the live store |
//! | `journal.rs` | what the keyspaces share: the log, the writer, sequence numbers, snapshots |
//! | `keyspace.rs` | named keyspaces: `Keyspace`, `Db::keyspace`, `Db::drop_keyspace` |
//!
//! What the store shares with the files beside it goes through narrow doors: tables are
//! built and opened by `table_files.rs`, the directory is tidied by `store_dir.rs`, a
//! scan gets its sources and an opaque hold on the store (`scan::StoreHold`).

mod background;
mod checkpoint;
mod flush_compact;
mod inner;
mod journal;
mod keyspace;
mod open;
mod read;
mod snapshot;
mod write;

pub use checkpoint::Checkpoint;
pub use keyspace::Keyspace;

use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use bytes::Bytes;

use crate::error::Result;
use crate::recovery::RecoveryReport;
use crate::scan::{own_bounds, ScanIter};
use crate::settings::SettingsReport;
use crate::stats::DbStats;
use crate::table_files::TableInfo;
use crate::write_batch::{self, WriteBatch};

use inner::{lock, Inner};
use keyspace::KeyspaceSet;
pub use snapshot::Snapshot;

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
    /// What open found in the settings file, and whether it rewrote it.
    settings: SettingsReport,
    /// The named keyspaces (see `keyspace.rs`).
    keyspaces: Mutex<KeyspaceSet>,
}

impl Db {
    /// What open replayed from the write-ahead logs and what it dropped (see
    /// [`WalRecovery`](crate::WalRecovery) for what each mode drops; the byte count is
    /// also `DbStats::wal_tail_bytes_dropped`).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// What open found in the store's settings file (`SETTINGS`: how its tables and
    /// levels are made) and whether it rewrote it. The options given to open win: a
    /// writable open rewrites a file that is missing, damaged or different, so it
    /// says how the newest tables are made; a read-only open only reads it. See
    /// [`load_options`](crate::load_options) to open a store with what it records.
    pub fn settings_report(&self) -> &SettingsReport {
        &self.settings
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

    /// Deletes every key in `[start, end)` with one range tombstone: one write, one
    /// sequence number, however many keys the range holds. Gets, scans (both ways),
    /// snapshots and `multi_get` honour it; compaction drops the keys it hides and, at
    /// the bottom of the tree, the tombstone itself. `start >= end`, or a bound over
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN), is `InvalidArgument`.
    ///
    /// ```
    /// # fn main() -> bloomkv_kv::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = bloomkv_kv::Db::open(dir.path(), bloomkv_kv::Options::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v")?;
    /// }
    /// db.delete_range("b", "d")?;
    /// let keys: Vec<_> = db.scan::<&str, _>(..).map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, ["a", "d"]);
    /// assert!(db.delete_range("d", "b").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
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
    /// [`Options::level0_slowdown_writes_trigger`](crate::Options::level0_slowdown_writes_trigger)
    /// and `DbStats::write_stalls`.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// The value of `key`, or `None` if it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(key.as_ref())
    }

    /// The values of many keys, one answer per key in the order asked, all read at one
    /// point in time: a write batch committed meanwhile is seen whole or not at all.
    /// Duplicates, empty keys and absent keys are allowed; an empty batch is an empty
    /// answer. A key over [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) is `InvalidArgument`
    /// before any lookup; an I/O error fails the call and the store goes on.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("apple", "red")?;
    /// db.put("cherry", "dark red")?;
    /// let values = db.multi_get(["cherry", "banana", "apple", "cherry"])?;
    /// assert_eq!(values[0].as_deref(), Some(&b"dark red"[..]));
    /// assert_eq!(values[1], None);
    /// assert_eq!(values[2].as_deref(), Some(&b"red"[..]));
    /// assert_eq!(values[3], values[0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        self.inner.multi_get_at(keys, None)
    }

    /// Iterates over the live keys in `range`, in key order, with their values.
    ///
    /// The scan reads the store as of the moment it starts (later writes are not seen)
    /// and is double-ended: `.rev()` walks from the end, and both ends may be mixed.
    /// Memtables are read in batches of keys and tables lazily, block by block. Errors
    /// come as items and end the iteration. With
    /// [`Options::prefix_extractor`](crate::Options::prefix_extractor) set and both bounds
    /// keys with the same prefix, tables the prefix filter rules out are skipped unread,
    /// as in [`Db::scan_prefix`]. Like a [`Snapshot`], a scan holds the store: after
    /// [`Db::close`] the directory stays locked until the scan is dropped.
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
    /// With [`Options::prefix_extractor`](crate::Options::prefix_extractor) set and `prefix`
    /// in its domain (for [`FixedPrefix::new(n)`](crate::FixedPrefix): at least `n` bytes
    /// long), each table's filter is asked whether it holds a key with that prefix first,
    /// and a table it rules out is skipped without a read (`DbStats::prefix_negatives`).
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

    /// Makes a consistent, openable copy of the store in `dir` (which must not exist
    /// or be empty) while writers go on: the memtables are flushed, the tables of that
    /// moment are hard-linked (copied where the file system cannot link) and a manifest
    /// naming them is written last. The copy is the store at
    /// [`Checkpoint::sequence`]; a failed checkpoint leaves no `MANIFEST` in `dir`, so
    /// it never opens as a store. A store with named keyspaces is copied whole, every
    /// keyspace at the same sequence number. A read-only handle cannot take one (it
    /// cannot flush: `Error::ReadOnly`). See `db/checkpoint.rs`.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path().join("live"), Options::default())?;
    /// db.put("k", "v")?;
    /// let copy = db.checkpoint(dir.path().join("copy"))?;
    /// db.put("k", "later")?;
    /// let old = Db::open(&copy.path, Options::default())?;
    /// assert_eq!(old.get("k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<Checkpoint> {
        let set = lock(&self.keyspaces);
        if set.is_empty() {
            drop(set);
            return self.inner.checkpoint(dir.as_ref());
        }
        // Held throughout: no keyspace is made or dropped while it is copied.
        let (named, registry) = set.for_checkpoint();
        checkpoint::checkpoint_keyspaces(&self.inner, &named, &registry, dir.as_ref())
    }

    /// Writes the memtable (and any frozen ones) to L0 tables now.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Flushes the memtables and runs every compaction the tree needs now (each level
    /// within its budget, L0 under its trigger), in the caller's thread; returns when
    /// none is left. What a benchmark or a test calls to measure a settled tree.
    pub fn wait_for_compaction(&self) -> Result<()> {
        self.inner.wait_for_compaction()
    }

    /// Compacts every table into one sorted run on the deepest level, dropping
    /// overwritten versions and tombstones.
    pub fn compact(&self) -> Result<()> {
        self.inner.flush()?;
        let mut maint = self.inner.maint_for_caller();
        self.inner.compact_all(&mut maint)
    }

    /// The counters and the shape of the store's default keyspace (each named
    /// [`Keyspace`] has its own `stats`).
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// Opens every live table not opened yet, reading its footer, index and filter,
    /// and returns how many it opened. `Db::open` reads no table: each is opened by the
    /// first read that reaches it, so a store's first lookups pay for those reads.
    /// An application that would rather pay at start (or a benchmark that compares
    /// lookups with a store that opens its tables eagerly) calls this after open.
    /// The first table that cannot be opened is the error (`Corruption` naming its
    /// file); the tables opened before it stay open.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// db.close()?;
    ///
    /// let db = Db::open(dir.path(), Options::default())?;
    /// assert_eq!(db.stats().opened_tables, 0);
    /// assert_eq!(db.open_tables()?, 1);
    /// assert_eq!(db.stats().opened_tables, 1);
    /// assert_eq!(db.open_tables()?, 0, "each table is opened once");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_tables(&self) -> Result<usize> {
        let view = self.inner.current();
        let mut opened = 0;
        for (_, t) in view.version.tables() {
            if t.if_open().is_none() {
                t.table()?;
                opened += 1;
            }
        }
        Ok(opened)
    }

    /// Every live table with its filter's shape, L0 first. Opens the tables not yet
    /// opened (their filters are what it describes); a table that cannot be opened
    /// is left out (`verify` names it and why).
    pub fn table_infos(&self) -> Vec<TableInfo> {
        self.inner.table_infos()
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
            if let Some(table) = t.if_open() {
                let _ = table.drop_cache();
            } else {
                // Not opened: its pages are dropped through a file opened for it.
                let path = crate::filename::table_path(&self.inner.dir, t.number);
                if let Ok(file) = self.inner.fs.open_random(&path) {
                    let _ = file.drop_cache();
                }
            }
        }
    }

    /// Stops background work, syncs the WAL and leaves the clean-close mark; an error
    /// says the last writes may not be durable.
    ///
    /// The directory lock goes with the last handle on the store: this `Db`, and every
    /// [`Snapshot`], [`ScanIter`] and [`Keyspace`] made from it (a keyspace's writes are
    /// refused after `close`), which go on reading after `close`
    /// (another open could otherwise delete the tables they read). Until those are
    /// dropped, opening the directory again fails with
    /// [`Error::Locked`](crate::Error::Locked).
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        // `close` then `Drop`: the second call has nothing left to do (and must not
        // rewrite the clean-close mark, which could only lose it).
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        lock(&self.keyspaces).shutdown();
        {
            let mut s = lock(&self.inner.signal);
            s.shutdown = true;
        }
        self.inner.wake.notify_all();
        if let Some(worker) = lock(&self.worker).take() {
            let _ = worker.join();
        }
        self.inner.save_probe_stats();
        let mut w = lock(&self.inner.journal.writer);
        // Under the writer lock: a keyspace's handle that outlives this one writes
        // before the sync below or is refused.
        self.inner.journal.closed.store(true, Ordering::Release);
        w.wal.sync()?;
        self.inner.mark_closed(&w);
        Ok(())
    }
}

impl Inner {
    /// [`Db::wait_for_compaction`] of this keyspace.
    fn wait_for_compaction(&self) -> Result<()> {
        self.flush()?;
        let mut maint = self.maint_for_caller();
        while let Some(pick) = self.pick_compaction(&mut maint) {
            self.compact(&mut maint, pick.inputs, pick.output_level)?;
        }
        Ok(())
    }

    /// [`Db::table_infos`] of this keyspace.
    fn table_infos(&self) -> Vec<TableInfo> {
        let view = self.current();
        view.version
            .tables()
            .filter_map(|(level, t)| Some(TableInfo::of(level, t.number, t.table().ok()?)))
            .collect()
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
