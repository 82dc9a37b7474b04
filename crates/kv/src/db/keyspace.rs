//! Keyspaces: several independent key spaces in one store, sharing one log.
//!
//! ```text
//!  store/                      the default keyspace (the store as it always was)
//!    000012.wal                the one log: every keyspace's writes, each op tagged
//!    MANIFEST, SETTINGS, *.sst
//!    KEYSPACES                 which named keyspaces exist (see `keyspaces.rs`)
//!    keyspace-000001/          "orders": MANIFEST, SETTINGS, *.sst — no log
//!    keyspace-000002/          "dedup":  its own filter settings, prefix extractor …
//! ```
//!
//! Each keyspace is an `Inner` of its own — memtable, tables, manifest, filters,
//! compaction, background thread, block cache — made from its own [`Options`]. What
//! they share is the `Journal`: the log, the writer, the sequence numbers and the
//! snapshots. So a [`WriteBatch`](crate::WriteBatch) spanning keyspaces is one log
//! record, applied whole or not at all, also across a crash; a [`Snapshot`] taken in
//! one keyspace reads any other at the same point ([`Snapshot::in_keyspace`]); and a
//! log is deleted only when no keyspace needs it.
//!
//! Making and dropping a keyspace are crash-safe through the `KEYSPACES` file: a new
//! keyspace's directory and empty store are made first, then the list that names it is
//! written; a dropped keyspace leaves the list first, then its files are deleted. Open
//! deletes what any keyspace the list does not name left behind.

use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::filename;
use crate::keyspaces::{self, Registry, DEFAULT_KEYSPACE};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::scan::{own_bounds, ScanIter};
use crate::stats::DbStats;
use crate::store_dir::write_state;
use crate::table_files::TableInfo;
use crate::types::KeyspaceId;
use crate::version::Version;
use crate::write_batch::WriteBatch;

use super::background;
use super::inner::{lock, Inner, Parts, Recovered};
use super::{Db, Snapshot};

/// An open named keyspace: its state and its background thread.
pub(super) struct OpenKeyspace {
    pub(super) inner: Arc<Inner>,
    pub(super) worker: Option<JoinHandle<()>>,
}

/// The store's named keyspaces: the list as `KEYSPACES` records it, and each open one.
pub(super) struct KeyspaceSet {
    registry: Registry,
    open: BTreeMap<String, OpenKeyspace>,
}

impl KeyspaceSet {
    pub(super) fn new(registry: Registry) -> KeyspaceSet {
        KeyspaceSet {
            registry,
            open: BTreeMap::new(),
        }
    }

    /// Each open named keyspace with its number, and the list: what a checkpoint copies.
    pub(super) fn for_checkpoint(&self) -> (Vec<(KeyspaceId, Arc<Inner>)>, Registry) {
        let named = self
            .open
            .values()
            .map(|k| (k.inner.id, k.inner.clone()))
            .collect();
        (named, self.registry.clone())
    }

    /// Whether the store has no named keyspace.
    pub(super) fn is_empty(&self) -> bool {
        self.registry.entries.is_empty()
    }

    pub(super) fn insert(&mut self, name: String, keyspace: OpenKeyspace) {
        self.open.insert(name, keyspace);
    }

    /// Stops every named keyspace's background thread and saves what it learned;
    /// the handles stay (their reads go on).
    pub(super) fn shutdown(&mut self) {
        for ks in self.open.values_mut() {
            stop_worker(ks);
        }
    }
}

fn stop_worker(ks: &mut OpenKeyspace) {
    lock(&ks.inner.signal).shutdown = true;
    ks.inner.wake.notify_all();
    if let Some(worker) = ks.worker.take() {
        let _ = worker.join();
    }
    ks.inner.save_probe_stats();
}

/// The options a named keyspace is opened with when it is not being made: its
/// recorded settings apply over these (see [`load_options`](crate::load_options)). The
/// store-wide ones come from the root's options.
pub(super) fn keyspace_base(root: &Options) -> Options {
    store_wide(root, Options::default())
}

/// `own`, with what cannot differ between keyspaces taken from the root's options:
/// the file system, read-only, whether writes sync (they share a log), how the log is
/// recovered, and the filter policies the store can open.
fn store_wide(root: &Options, own: Options) -> Options {
    let mut extra = own.extra_filter_policies;
    extra.extend(root.extra_filter_policies.iter().cloned());
    Options {
        file_system: root.file_system.clone(),
        read_only: root.read_only,
        sync_writes: root.sync_writes,
        wal_recovery: root.wal_recovery,
        create_if_missing: false,
        extra_filter_policies: extra,
        ..own
    }
}

/// A handle on one keyspace of a store: cheap to clone, `Send + Sync`. Reads and
/// writes here touch only this keyspace; [`Db::write`] takes batches across keyspaces.
///
/// ```
/// use bloomkv_kv::{Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let users = db.keyspace("users", Options::default())?;
/// // A de-duplication keyspace with more filter bits per key than the default 10.
/// let seen = db.keyspace("seen", Options { bits_per_key: 16.0, ..Options::default() })?;
/// users.put("u1", "ann")?;
/// seen.put("msg-9f2c", "")?;
/// assert_eq!(users.get("u1")?.as_deref(), Some(&b"ann"[..]));
/// assert_eq!(seen.get("u1")?, None);
/// assert_eq!(db.keyspace_names(), ["seen", "users"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Keyspace {
    inner: Arc<Inner>,
    name: Arc<str>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl From<&Keyspace> for KeyspaceId {
    fn from(ks: &Keyspace) -> KeyspaceId {
        ks.inner.id
    }
}

impl Keyspace {
    /// Its name (`"default"` for the store's default keyspace).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Its number in the store, what a write batch records.
    pub fn id(&self) -> KeyspaceId {
        self.inner.id
    }

    /// Sets `key` to `value` in this keyspace.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self, key, value);
        self.inner.write(batch)
    }

    /// Deletes `key` in this keyspace.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key);
        self.inner.write(batch)
    }

    /// Deletes every key in `[start, end)` in this keyspace (see [`Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self, start, end);
        self.inner.write(batch)
    }

    /// The value of `key` in this keyspace (see [`Db::get`]).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.inner.get(key.as_ref())
    }

    /// The values of many keys at one point in time (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        self.inner.multi_get_at(keys, None)
    }

    /// The live keys in `range`, in key order (see [`Db::scan`]).
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> ScanIter {
        let (start, end) = own_bounds(&range);
        self.inner.scan_at(start, end, None, None)
    }

    /// The live keys starting with `prefix` (see [`Db::scan_prefix`]).
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> ScanIter {
        self.inner.scan_prefix_at(prefix.as_ref(), None)
    }

    /// A snapshot of the whole store, read in this keyspace; [`Snapshot::in_keyspace`]
    /// reads any other at the same point.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(&self.inner)
    }

    /// Writes this keyspace's memtables to tables now.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Flushes and runs every compaction this keyspace's tree needs now (see
    /// [`Db::wait_for_compaction`]).
    pub fn wait_for_compaction(&self) -> Result<()> {
        self.inner.wait_for_compaction()
    }

    /// Compacts this keyspace into one sorted run (see [`Db::compact`]).
    pub fn compact(&self) -> Result<()> {
        self.inner.flush()?;
        let mut maint = self.inner.maint_for_caller();
        self.inner.compact_all(&mut maint)
    }

    /// This keyspace's counters and shape.
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// This keyspace's live tables with their filters' shapes (see [`Db::table_infos`]).
    pub fn table_infos(&self) -> Vec<TableInfo> {
        self.inner.table_infos()
    }

    /// The directory its tables are in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }
}

impl Db {
    /// The keyspace called `name`, made with `options` if the store has none of that
    /// name (`"default"` is the store's default keyspace: what [`Db::get`],
    /// [`Db::put`] and the rest read and write).
    ///
    /// A keyspace has its own memtable, tables, filter settings, prefix extractor,
    /// compression, compaction, block cache and open-file limit, all from `options`
    /// (so the store's memory and open files add up over its keyspaces); it shares the
    /// store's log, so some settings are the store's and `options` cannot change
    /// them: the file system, `read_only`, `sync_writes` and `wal_recovery` (and
    /// `create_if_missing` does not apply). An existing keyspace was opened by
    /// [`Db::open`] with the settings it recorded when it was made; `options` are then
    /// not used (see [`load_options`](crate::load_options) for what a store records).
    ///
    /// Names are 1 to 64 ASCII letters, digits, `_`, `-` or `.`, not starting with
    /// `.`. A read-only store cannot make a keyspace (`Error::ReadOnly`).
    pub fn keyspace(&self, name: &str, options: Options) -> Result<Keyspace> {
        if name == DEFAULT_KEYSPACE {
            return Ok(Keyspace {
                inner: self.inner.clone(),
                name: name.into(),
            });
        }
        keyspaces::check_name(name)?;
        let mut set = lock(&self.keyspaces);
        if let Some(open) = set.open.get(name) {
            return Ok(Keyspace {
                inner: open.inner.clone(),
                name: name.into(),
            });
        }
        self.inner.check_writable()?;
        self.inner.check_bg_error()?;
        let root = &self.inner;
        let id = KeyspaceId::new(set.registry.next_id);
        let next_id = set.registry.next_id.checked_add(1).ok_or_else(|| {
            Error::InvalidArgument(
                "the store has made 2^32 - 1 keyspaces; no number is left".into(),
            )
        })?;
        let dir = filename::keyspace_dir(&root.dir, id.get());
        let fs = root.fs.clone();
        // A directory of this number is what a crash left before the list named it.
        keyspaces::remove_dir_files(fs.as_ref(), &dir)?;
        let options = Options {
            create_if_missing: true,
            ..store_wide(&root.options, options)
        };
        options.validate()?;
        fs.create_dir_all(&dir)?;
        fs.sync_dir(&root.dir)?;
        let parts = Parts::new(dir.clone(), options)?;
        crate::settings::at_open(fs.as_ref(), &dir, &parts.options)?;
        // An empty store whose manifest names the log being written: every write of
        // the keyspace will be in it or a later one. Its tables hold no sequence
        // number yet (0): that log holds older writes of other keyspaces, and replay
        // takes a keyspace's number as the floor the records of its logs are above.
        let wal_number = lock(&root.journal.writer).wal_number;
        let last_sequence = 0;
        // Its tables are numbered from the store's one counter, as the logs are.
        let numbers = root.journal.file_numbers.load(Ordering::Relaxed);
        write_state(
            &fs,
            &dir,
            &Version::empty(),
            wal_number,
            numbers,
            last_sequence,
        )?;
        let mut registry = set.registry.clone();
        registry.next_id = next_id;
        registry.entries.push((id, name.to_string()));
        // The commit point: before it, open deletes the directory.
        keyspaces::write(fs.as_ref(), &root.dir, &registry)?;
        set.registry = registry;
        let recovered = Recovered {
            version: Version::empty(),
            mem: Memtable::new(),
            mem_wal: wal_number,
            last_sequence,
            next_file_number: root.journal.file_numbers.clone(),
        };
        let inner = Arc::new(Inner::new(parts, recovered, root.journal.clone(), id));
        {
            // Under the writer lock: no log starts between reading its number and
            // the pin (a log started since would only be pinned needlessly).
            let _w = lock(&root.journal.writer);
            root.journal.register(&inner, wal_number);
        }
        let worker = background::spawn(&inner)?;
        set.open.insert(
            name.to_string(),
            OpenKeyspace {
                inner: inner.clone(),
                worker: Some(worker),
            },
        );
        Ok(Keyspace {
            inner,
            name: name.into(),
        })
    }

    /// The names of the store's named keyspaces, in name order (the default keyspace
    /// is not listed).
    pub fn keyspace_names(&self) -> Vec<String> {
        lock(&self.keyspaces).open.keys().cloned().collect()
    }

    /// Drops the keyspace called `name`: its writes are refused from now on (also
    /// through handles still held), it leaves the store's list of keyspaces durably,
    /// and its files are deleted. A crash at any point leaves it whole or gone. The
    /// default keyspace cannot be dropped; an unknown name is `InvalidArgument`.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let tmp = db.keyspace("scratch", Options::default())?;
    /// tmp.put("k", "v")?;
    /// db.drop_keyspace("scratch")?;
    /// assert!(tmp.put("k", "w").is_err());
    /// assert!(db.keyspace_names().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        if name == DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".into(),
            ));
        }
        self.inner.check_writable()?;
        let mut set = lock(&self.keyspaces);
        let Some(id) = set.registry.find(name) else {
            return Err(Error::InvalidArgument(format!(
                "no keyspace is called {name:?}"
            )));
        };
        let root = &self.inner;
        if let Some(open) = set.open.get(name) {
            // Under the writer lock: a batch naming it is applied whole before, or
            // refused after.
            let _w = lock(&root.journal.writer);
            open.inner.dropped.store(true, Ordering::Release);
        }
        if let Some(open) = set.open.get_mut(name) {
            stop_worker(open);
        }
        let mut registry = set.registry.clone();
        registry.entries.retain(|(i, _)| *i != id);
        keyspaces::write(root.fs.as_ref(), &root.dir, &registry)?;
        set.registry = registry;
        set.open.remove(name);
        // Its writes in the logs are skipped from now on, by number: the logs only it
        // needed can go.
        root.journal.unregister(id);
        keyspaces::remove_dir_files(
            root.fs.as_ref(),
            &filename::keyspace_dir(&root.dir, id.get()),
        )
    }
}
