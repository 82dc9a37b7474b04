//! A snapshot is a sequence number held open: reads through it see the store exactly
//! as it was when it was taken, while writes, flushes and compactions go on.
//!
//! Every write gets a sequence number, and the store never overwrites in place: the
//! memtable keeps each key's versions, and tables hold a key's versions newest first.
//! Reading "as of `s`" means taking, for each key, the newest version with a sequence
//! number at most `s`. A [`Snapshot`] is such an `s` (the last fully applied batch when
//! it was taken), plus a promise from compaction: [`SnapshotList`] records every live
//! snapshot, oldest first, and a flush or compaction keeps each version some live
//! snapshot can see (`retain.rs`). Dropping the last clone of a snapshot removes it from
//! the list; the versions only it could see are dropped by the next compaction over
//! them. Holding none costs nothing: compaction then keeps only newest versions.
//!
//! ```text
//!  writes:    seq 10 put k=a    seq 11 put k=b    seq 12 delete k
//!  snapshot at 10 ───────┘ sees a     at 11 sees b     Db::get sees none
//!  SnapshotList { 10: 1, 11: 1 }  (seq -> clones alive; compaction reads it ascending)
//! ```
//!
//! A snapshot reaches the store only through its read methods (`get_at`, `scan_at`,
//! `scan_prefix_at`) and its registration (`acquire_snapshot`, `release_snapshot`).

use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::error::Result;
use crate::scan::{own_bounds, ScanIter};
use crate::types::SeqNo;

use super::inner::Inner;

/// The live snapshots' sequence numbers, each with the number of [`Snapshot`]s holding
/// it, oldest first.
#[derive(Debug, Default)]
pub(super) struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at the sequence number `current()` returns, read under the
    /// list's lock: a flush or compaction that read the list before this registration
    /// only holds writes at or below that number, so it kept what the snapshot sees.
    pub(super) fn acquire(&self, current: impl FnOnce() -> SeqNo) -> SeqNo {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let seq = current();
        *live.entry(seq).or_insert(0) += 1;
        seq
    }

    /// Releases one holder of `seq`.
    pub(super) fn release(&self, seq: SeqNo) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = live.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                live.remove(&seq);
            }
        }
    }

    /// The live snapshots' sequence numbers, ascending (what a compaction keeps for).
    pub(super) fn sequence_numbers(&self) -> Vec<SeqNo> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.keys().copied().collect()
    }
}

/// A consistent, read-only view of the store as of one moment. `Send + Sync + Clone`
/// (clones share the view); released when the last clone is dropped.
///
/// A snapshot keeps the store's internals alive: while one is held, the versions it
/// sees survive compaction (they take space), and the store's files and directory lock
/// stay with it even after [`Db::close`](crate::Db::close).
///
/// ```
/// use bloomkv_kv::{Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// db.put("k", "before")?;
/// let snap = db.snapshot();
/// db.put("k", "after")?;
/// db.put("new", "x")?;
/// db.compact()?; // flushes and compacts; the snapshot's versions stay
/// assert_eq!(snap.get("k")?.as_deref(), Some(&b"before"[..]));
/// assert_eq!(snap.get("new")?, None);
/// assert_eq!(db.get("k")?.as_deref(), Some(&b"after"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Snapshot {
    held: Arc<Held>,
}

/// The registration a snapshot and its clones share.
struct Held {
    db: Arc<Inner>,
    seq: SeqNo,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.db.release_snapshot(self.seq);
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("seq", &self.held.seq)
            .finish()
    }
}

impl Snapshot {
    pub(super) fn new(db: &Arc<Inner>) -> Snapshot {
        let seq = db.acquire_snapshot();
        Snapshot {
            held: Arc::new(Held {
                db: Arc::clone(db),
                seq,
            }),
        }
    }

    /// The sequence number the snapshot reads at: the last write it sees.
    pub fn sequence_number(&self) -> SeqNo {
        self.held.seq
    }

    /// The same point in time, read in `keyspace` (of the same store): write numbers
    /// are the store's, so a batch across keyspaces is seen whole in every keyspace
    /// or in none. A keyspace of another store is `InvalidArgument`.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options, WriteBatch};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let a = db.keyspace("a", Options::default())?;
    /// let b = db.keyspace("b", Options::default())?;
    /// let snap = db.snapshot();
    /// let mut batch = WriteBatch::new();
    /// batch.put_in(&a, "k", "1");
    /// batch.put_in(&b, "k", "1");
    /// db.write(batch)?;
    /// assert_eq!(snap.in_keyspace(&a)?.get("k")?, None);
    /// assert_eq!(snap.in_keyspace(&b)?.get("k")?, None);
    /// assert_eq!(b.snapshot().in_keyspace(&a)?.get("k")?.as_deref(), Some(&b"1"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_keyspace(&self, keyspace: &crate::Keyspace) -> Result<Snapshot> {
        let inner = keyspace.inner();
        if !Arc::ptr_eq(&inner.journal, &self.held.db.journal) {
            return Err(crate::Error::InvalidArgument(format!(
                "keyspace {:?} belongs to another store",
                keyspace.name()
            )));
        }
        // The sequence number is live (this snapshot holds it): registering it again
        // keeps it so for the new one.
        let seq = inner.journal.snapshots.acquire(|| self.held.seq);
        Ok(Snapshot {
            held: Arc::new(Held {
                db: Arc::clone(inner),
                seq,
            }),
        })
    }

    /// The value `key` had when the snapshot was taken, or `None` if it was absent or
    /// deleted then.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("k", "v1")?;
    /// let snap = db.snapshot();
    /// db.delete("k")?;
    /// assert_eq!(snap.get("k")?.as_deref(), Some(&b"v1"[..]));
    /// assert_eq!(db.get("k")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.held.db.get_at(key.as_ref(), self.held.seq)
    }

    /// [`Db::multi_get`](crate::Db::multi_get) as of the snapshot: one answer per key,
    /// in the order asked.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        self.held.db.multi_get_at(keys, Some(self.held.seq))
    }

    /// The live keys in `range` as of the snapshot, with their values: the same
    /// iterator as [`Db::scan`](crate::Db::scan), double-ended.
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let snap = db.snapshot();
    /// db.put("c", "3")?;
    /// db.delete("a")?;
    /// let keys: Vec<_> = snap.scan::<&str, _>(..).rev().map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, vec!["b", "a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> ScanIter {
        let (start, end) = own_bounds(&range);
        self.held.db.scan_at(start, end, Some(self.held.seq), None)
    }

    /// The live keys starting with `prefix` as of the snapshot (see
    /// [`Db::scan_prefix`](crate::Db::scan_prefix) for how prefix filters skip tables).
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("user1:name", "ann")?;
    /// let snap = db.snapshot();
    /// db.put("user1:mail", "ann@example.com")?;
    /// assert_eq!(snap.scan_prefix("user1:").count(), 1);
    /// assert_eq!(db.scan_prefix("user1:").count(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> ScanIter {
        self.held
            .db
            .scan_prefix_at(prefix.as_ref(), Some(self.held.seq))
    }
}
