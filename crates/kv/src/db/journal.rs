//! The journal: what every keyspace of a store shares. One log, one writer, one
//! sequence of write numbers, one list of snapshots, one background error.
//!
//! ```text
//!                       Journal { writer (the log), visible_seq, snapshots, pins }
//!                        ▲                ▲                     ▲
//!   default keyspace: Inner (root dir)   Inner (keyspace-000001/)   Inner (…000002/)
//!                      memtable, tables, manifest, compaction — each its own
//! ```
//!
//! Sharing the log is what makes a batch across keyspaces atomic (it is one record)
//! and a snapshot cover every keyspace (write numbers are global). The price is that a
//! log can be deleted only when *no* keyspace needs it: each keyspace pins the oldest
//! log its memtables are backed by ([`Journal::retire_logs`]), and logs below the
//! lowest pin go. A store without named keyspaces has one pin, its own, and behaves
//! exactly as before.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::{FileLock, FileSystem};
use crate::store_dir::remove_logs_below;
use crate::types::KeyspaceId;
use crate::wal::WalWriter;

use super::inner::{lock, Inner, RecoveredLog, Writer};
use super::snapshot::SnapshotList;

pub(super) struct Journal {
    /// The store's root directory, where the logs are.
    pub(super) dir: PathBuf,
    pub(super) fs: Arc<dyn FileSystem>,
    /// The root's file numbers: logs take theirs from it, as the default keyspace's
    /// tables do.
    pub(super) file_numbers: Arc<AtomicU64>,
    /// The single writer's state.
    pub(super) writer: Mutex<Writer>,
    /// The last sequence number of the newest write batch that is completely in the
    /// memtables. Readers see writes up to it and no further, so a batch becomes visible
    /// all at once; published (release) by the writer after the batch is applied.
    pub(super) visible_seq: AtomicU64,
    /// The live snapshots: what every keyspace's flushes and compactions keep versions
    /// for.
    pub(super) snapshots: SnapshotList,
    /// The first background failure in any keyspace; once set, writes are refused.
    pub(super) bg_error: Mutex<Option<String>>,
    /// The oldest log each open keyspace's memtables are backed by.
    pins: Mutex<BTreeMap<KeyspaceId, u64>>,
    /// Set when the store's handle closes: writes through the handles that outlive it
    /// (a keyspace's) are refused, as the log was synced and marked closed.
    pub(super) closed: AtomicBool,
    /// The directory's lock, held while any handle on any keyspace is (`None` for a
    /// read-only open, which takes none).
    _lock: Option<FileLock>,
    /// The open keyspaces, for the writer (a batch names them by number) and for a
    /// new log (idle keyspaces move to it).
    open: RwLock<HashMap<KeyspaceId, Weak<Inner>>>,
}

impl Journal {
    pub(super) fn new(
        dir: PathBuf,
        fs: Arc<dyn FileSystem>,
        file_numbers: Arc<AtomicU64>,
        log: RecoveredLog,
        lock: Option<FileLock>,
    ) -> Journal {
        let last_seq = log.last_seq;
        Journal {
            dir,
            fs,
            file_numbers,
            writer: Mutex::new(log.writer()),
            visible_seq: AtomicU64::new(last_seq),
            snapshots: SnapshotList::default(),
            bg_error: Mutex::new(None),
            pins: Mutex::new(BTreeMap::new()),
            open: RwLock::new(HashMap::new()),
            closed: AtomicBool::new(false),
            _lock: lock,
        }
    }

    /// Makes `inner` a keyspace the writer can reach by number, backed from log `wal`.
    pub(super) fn register(&self, inner: &Arc<Inner>, wal: u64) {
        lock(&self.pins).insert(inner.id, wal);
        self.open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(inner.id, Arc::downgrade(inner));
    }

    /// Forgets a dropped keyspace (called with the writer lock held, so no batch is
    /// half applied to it) and deletes the logs only it held.
    pub(super) fn unregister(&self, id: KeyspaceId) {
        self.open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let mut pins = lock(&self.pins);
        pins.remove(&id);
        if let Some(&first) = pins.values().min() {
            remove_logs_below(&self.fs, &self.dir, first);
        }
    }

    /// The open keyspace numbered `id`.
    pub(super) fn keyspace(&self, id: KeyspaceId) -> Result<Arc<Inner>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .and_then(Weak::upgrade)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "keyspace number {id} is not open in this store (dropped, or of \
                     another store)"
                ))
            })
    }

    /// Keyspace `id`'s memtables no longer need logs below `first_live` (its manifest
    /// saying so is durable): deletes the logs no keyspace needs.
    pub(super) fn retire_logs(&self, id: KeyspaceId, first_live: u64) {
        let mut pins = lock(&self.pins);
        pins.insert(id, first_live);
        if let Some(&first) = pins.values().min() {
            remove_logs_below(&self.fs, &self.dir, first);
        }
    }

    /// Syncs the log being written and starts a new one; returns its number. On a
    /// failure the store stops taking writes.
    pub(super) fn new_log(&self, w: &mut Writer) -> Result<u64> {
        let result = (|| {
            w.wal.sync()?;
            let number = self.file_numbers.fetch_add(1, Ordering::Relaxed);
            let file = self.fs.create(&filename::wal_path(&self.dir, number))?;
            self.fs.sync_dir(&self.dir)?;
            Ok::<_, Error>((number, file))
        })();
        let (number, file) = match result {
            Ok(r) => r,
            Err(e) => {
                self.set_bg_error_message(e.to_string());
                return Err(e);
            }
        };
        w.wal = WalWriter::new(file);
        w.wal_number = number;
        w.wal_start = 0;
        // A keyspace with nothing unflushed needs no log before this one: it moves
        // here, or an idle keyspace would keep every later log from being deleted.
        let open: Vec<Arc<Inner>> = self
            .open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for inner in open {
            if inner.move_if_idle(number) {
                lock(&self.pins).insert(inner.id, number);
            }
        }
        Ok(number)
    }

    pub(super) fn check_bg_error(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the store was closed".into()));
        }
        match lock(&self.bg_error).as_ref() {
            Some(e) => Err(Error::Closed(format!("writes stopped after an error: {e}"))),
            None => Ok(()),
        }
    }

    /// Records the first background failure; writes are refused from now on.
    pub(super) fn set_bg_error_message(&self, message: String) {
        let mut slot = lock(&self.bg_error);
        if slot.is_none() {
            *slot = Some(message);
        }
    }

    /// The last sequence number readers may see.
    #[inline]
    pub(super) fn visible_seq(&self) -> u64 {
        self.visible_seq.load(Ordering::Acquire)
    }
}
