//! The memtable is the store's in-memory write buffer: the newest writes, sorted by
//! key, waiting to be flushed to a table.
//!
//! Every write goes to the WAL and then here; a `get` looks here first. When the
//! memtable reaches its size limit it becomes immutable and a flush writes its entries,
//! in key order, into a new SSTable.
//!
//! # Why a skip list
//!
//! Reads must not wait for writes. A concurrent skip list
//! ([`crossbeam_skiplist::SkipMap`]) lets any number of readers search and iterate
//! without locks while the single writer inserts: an insert links a new node with
//! atomic pointer updates, so a reader sees either the old or the new node, never a
//! half-made one. It keeps keys sorted, which flush and scans need, at `O(log n)` per
//! operation. A `RwLock<BTreeMap>` would make readers wait behind each insert.
//!
//! # A key's versions, newest first, and a key is never unlinked
//!
//! Each user key has one skip-list node for the memtable's whole life. The node holds
//! the version that created it; every later version goes on a chain beside it, newest
//! first, each pointing at the one it replaced. An overwrite builds the new chain head
//! and swaps the slot's pointer in one atomic store ([`arc_swap::ArcSwapOption`]): a
//! reader holding the old pointer still reads a complete chain, a reader after the
//! store sees the new head. No step of an overwrite removes the key from the list, so a
//! concurrent `get` or scan can never miss it and fall through to an older memtable or
//! table (removing and re-inserting a node, as a replace-in-place map does, opens
//! exactly that window). Most keys of a memtable are written once, and then the node
//! is the whole entry: no chain is allocated.
//!
//! ```text
//! SkipMap<MemKey, Slot>           ordered by user key (bytewise)
//!   key       first version          later versions, newest first
//!   "apple"   seq 7 Put "green"      seq 12 Put "red"
//!   "banana"  seq 2 Put "yellow"     seq 15 Delete               tombstone on top
//!   "cherry"  seq 3 Put "dark"       (none)
//! ```
//!
//! Reads name the newest sequence number they may see ([`Memtable::get_at`]): the store
//! publishes a batch's last sequence number only after all of its operations are in
//! the memtable, so a reader sees a whole batch or none of it. Versions are kept until
//! the memtable is dropped; a flush writes the versions that the newest reads or a live
//! snapshot can still see ([`Memtable::versions`] and `retain.rs`).
//!
//! # Short keys live in the node
//!
//! An insert compares its key with about `2·log2(n)` nodes' keys on its way down, and
//! in a memtable of a few hundred thousand keys nearly every node it meets is a cache
//! miss. A key held as `Bytes` points elsewhere, so each comparison would wait for a
//! second miss, the key's bytes. Keys of up to [`INLINE_KEY`] bytes are therefore
//! copied into the node itself (`MemKey`) and compared eight bytes at a time
//! (`keycmp`); longer keys get an allocation of their own.
//!
//! [`Memtable::approximate_size`] grows with every write, including overwrites: every
//! version is kept, and the WAL grows with every write too, so a memtable under
//! constant overwrites of a few keys still fills up, gets flushed, and lets its log be
//! retired. A version with a sequence number the key already holds is ignored, so
//! replaying a log twice changes nothing.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::{Bytes, BytesMut};
use crossbeam_skiplist::{map, SkipMap};

use crate::keycmp;
use crate::range_del::{Fragments, RangeTombstone};
pub use crate::types::READ_LATEST;
use crate::types::{Entry, Hit, SeqNo, ValueKind};
use crate::write_batch::OpKind;

/// Bytes charged per write on top of key and value: roughly a skip-list node or a
/// version record (the key and value handles, sequence number, kind and links).
pub const ENTRY_OVERHEAD: usize = 64;

/// How many entries an [`OwnedRange`] copies out of the skip list at its first refill;
/// each refill after copies twice as many as the one before, up to [`RANGE_BATCH`].
const RANGE_BATCH_FIRST: usize = 8;

/// The most entries an [`OwnedRange`] copies out of the skip list per refill.
const RANGE_BATCH: usize = 128;

/// The longest key kept inside its skip-list node (a `MemKey` is then no larger
/// than the `Bytes` it replaces plus its tag).
pub const INLINE_KEY: usize = 38;

/// A memtable key: its bytes in the node when short, else a shared handle. Ordered
/// bytewise, exactly as `[u8]` is (lookups borrow it as a `[u8]`).
#[derive(Clone)]
enum MemKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Shared(Bytes),
}

impl MemKey {
    fn new(key: &[u8]) -> MemKey {
        if key.len() > INLINE_KEY {
            return MemKey::Shared(Bytes::copy_from_slice(key));
        }
        let mut bytes = [0u8; INLINE_KEY];
        bytes[..key.len()].copy_from_slice(key);
        MemKey::Inline {
            len: key.len() as u8,
            bytes,
        }
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            MemKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            MemKey::Shared(b) => b,
        }
    }

    /// The key as `Bytes` (a copy for an inline key).
    fn to_bytes(&self) -> Bytes {
        match self {
            MemKey::Inline { .. } => Bytes::copy_from_slice(self.as_slice()),
            MemKey::Shared(b) => b.clone(),
        }
    }
}

impl Borrow<[u8]> for MemKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &MemKey) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for MemKey {}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &MemKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemKey {
    #[inline]
    fn cmp(&self, other: &MemKey) -> std::cmp::Ordering {
        keycmp::compare(self.as_slice(), other.as_slice())
    }
}

impl fmt::Debug for MemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_slice())
    }
}

/// Bytes of a [`ByteArena`] chunk.
const ARENA_CHUNK: usize = 4096;

/// Short byte strings as consecutive slices of shared 4 KiB chunks, so a string costs
/// no allocation of its own and a chunk is freed when the last string in it goes. The
/// writer copies small values here (they go with their memtable), and a flush the
/// keys it hands to the table builder. What a store's get or scan returns never comes
/// from an arena: a read copies the value (see `Slot::visible_at`), so a value an
/// application keeps does not pin a chunk.
#[derive(Debug, Default)]
pub(crate) struct ByteArena {
    chunk: BytesMut,
}

impl ByteArena {
    /// `bytes`, copied into the current chunk (a fresh one if it has no room).
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Bytes {
        if bytes.is_empty() {
            return Bytes::new();
        }
        if self.chunk.capacity() - self.chunk.len() < bytes.len() {
            self.chunk = BytesMut::with_capacity(ARENA_CHUNK.max(bytes.len()));
        }
        self.chunk.extend_from_slice(bytes);
        self.chunk.split().freeze()
    }
}

/// One version of a key and the older version it replaced.
#[derive(Debug)]
struct KeyVersion {
    seq: SeqNo,
    kind: ValueKind,
    value: Bytes,
    older: Option<Arc<KeyVersion>>,
}

impl KeyVersion {
    /// The newest version in this chain that a read at `read_seq` may see.
    fn visible_at(&self, read_seq: SeqNo) -> Option<&KeyVersion> {
        let mut v = self;
        while v.seq > read_seq {
            v = v.older.as_deref()?;
        }
        Some(v)
    }

    /// This chain with `new` linked in at its place by sequence number (newest first);
    /// `None` if the chain already holds a version with `new`'s sequence number.
    /// Writes arrive in sequence order, so `new` almost always becomes the head; the
    /// rebuild below the head only runs when a log is replayed out of order.
    fn with(self: &Arc<Self>, new: &KeyVersion) -> Option<Arc<KeyVersion>> {
        if new.seq > self.seq {
            let mut head = new.shallow();
            head.older = Some(Arc::clone(self));
            return Some(Arc::new(head));
        }
        if new.seq == self.seq {
            return None;
        }
        let older = match &self.older {
            Some(older) => older.with(new)?,
            None => Arc::new(new.shallow()),
        };
        let mut head = self.shallow();
        head.older = Some(older);
        Some(Arc::new(head))
    }

    fn shallow(&self) -> KeyVersion {
        KeyVersion {
            seq: self.seq,
            kind: self.kind,
            value: self.value.clone(),
            older: None,
        }
    }
}

impl Drop for KeyVersion {
    /// Unlinks the chain iteratively: a hot key's chain can be a million versions long,
    /// and the default recursive drop of nested `Arc`s would overflow the stack.
    fn drop(&mut self) {
        let mut next = self.older.take();
        while let Some(v) = next {
            match Arc::try_unwrap(v) {
                Ok(mut v) => next = v.older.take(),
                Err(_) => break,
            }
        }
    }
}

/// The value side of one memtable entry: the version that created the node, and the
/// key's later versions, newest first (`None` while there is none).
///
/// The versions are `first` and the chain together; sequence numbers are unique among
/// them. The chain is sorted, and `first` is its oldest except after a log replayed
/// out of order, which may link a version older than `first` into the chain, so reads
/// take the newer of the two candidates.
#[derive(Debug)]
struct Slot {
    first: KeyVersion,
    others: ArcSwapOption<KeyVersion>,
}

impl Slot {
    /// The newest version a read at `read_seq` may see, with its own copy of the value:
    /// what a get or scan hands out never pins the memtable's memory (a value may share
    /// a chunk with many others, see [`ByteArena`]), and copying straight out of the
    /// version writes nothing shared (no reference count of the chunk is touched).
    fn visible_at(&self, read_seq: SeqNo) -> Option<Hit> {
        let others = self.others.load();
        let chained = others.as_deref().and_then(|v| v.visible_at(read_seq));
        let first = (self.first.seq <= read_seq).then_some(&self.first);
        let v = chained.into_iter().chain(first).max_by_key(|v| v.seq)?;
        Some(Hit {
            seq: v.seq,
            kind: v.kind,
            value: Bytes::copy_from_slice(&v.value),
        })
    }

    /// Every version, newest first.
    fn versions(&self) -> impl Iterator<Item = KeyVersion> {
        let mut first = Some(self.first.shallow());
        let mut chain = self.others.load_full();
        std::iter::from_fn(move || {
            let take_first = match (&first, &chain) {
                (Some(f), Some(c)) => f.seq > c.seq,
                (f, _) => f.is_some(),
            };
            if take_first {
                return first.take();
            }
            let c = chain.take()?;
            chain = c.older.clone();
            Some(c.shallow())
        })
    }
}

/// A sorted, concurrent in-memory table holding every version of each key written
/// since it was created.
///
/// ```
/// use bloomkv_kv::memtable::Memtable;
/// use bloomkv_kv::ValueKind;
/// use bytes::Bytes;
///
/// let table = Memtable::new();
/// table.apply(1, ValueKind::Put, Bytes::from("k"), Bytes::from("old"));
/// table.apply(2, ValueKind::Put, Bytes::from("k"), Bytes::from("new"));
/// table.apply(3, ValueKind::Delete, Bytes::from("gone"), Bytes::new());
///
/// let entry = table.get(b"k").unwrap();
/// assert_eq!((entry.seq, &entry.value[..]), (2, &b"new"[..]));
/// assert_eq!(&table.get_at(b"k", 1).unwrap().value[..], b"old");
/// assert_eq!(table.get(b"gone").unwrap().kind, ValueKind::Delete);
/// assert!(table.get(b"absent").is_none());
///
/// let keys: Vec<_> = table.iter().map(|e| e.key).collect();
/// assert_eq!(keys, vec![Bytes::from("gone"), Bytes::from("k")]);
/// ```
#[derive(Debug, Default)]
pub struct Memtable {
    map: SkipMap<MemKey, Slot>,
    size: AtomicUsize,
    max_seq: AtomicU64,
    /// Set (release) once the first write is completely applied; read (acquire) by the
    /// emptiness shortcut, so "empty" is never answered for a key a reader could see.
    has_entries: AtomicBool,
    /// As `has_entries`, for point writes alone (puts and deletes): a memtable holding
    /// only range tombstones answers a get without walking its empty skip list.
    has_points: AtomicBool,
    /// The range tombstones (`delete_range`), fragmented; rebuilt whole by each new
    /// one (they are rare), swapped in atomically so a reader sees the old or the new
    /// set. `has_range_dels` lets a get that meets none skip even the load.
    range_dels: ArcSwapOption<Fragments>,
    has_range_dels: AtomicBool,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable::default()
    }

    /// Records a write: sets `key` to `value` (`Put`) or to a tombstone (`Delete`, the
    /// value is ignored) as of `seq`. A version with the same sequence number already
    /// present for `key` is kept (replaying a write is harmless); an older sequence
    /// number is linked below the newer versions, never over them.
    pub fn apply(&self, seq: SeqNo, kind: ValueKind, key: impl AsRef<[u8]>, value: Bytes) {
        let key = key.as_ref();
        let value = match kind {
            ValueKind::Put => value,
            ValueKind::Delete => Bytes::new(),
        };
        let charge = key.len() + value.len() + ENTRY_OVERHEAD;
        let mut new = Some(KeyVersion {
            seq,
            kind,
            value,
            older: None,
        });
        let entry = self.map.get_or_insert_with(MemKey::new(key), || Slot {
            // `new` is always there when the node is made: this runs at most once.
            first: new.take().unwrap_or_else(|| KeyVersion {
                seq,
                kind,
                value: Bytes::new(),
                older: None,
            }),
            others: ArcSwapOption::empty(),
        });
        let accepted = match new {
            // The node was made with this version.
            None => true,
            Some(new) => {
                let slot = entry.value();
                // One writer at a time (the store's write lock), so this
                // read-modify-write is not racing another writer; readers see the old
                // or the new chain.
                let next = match slot.others.load_full() {
                    _ if new.seq == slot.first.seq => None,
                    Some(head) => head.with(&new),
                    None => Some(Arc::new(new)),
                };
                let changed = next.is_some();
                if changed {
                    slot.others.store(next);
                }
                changed
            }
        };
        if accepted {
            self.size.fetch_add(charge, Ordering::Relaxed);
            self.max_seq.fetch_max(seq, Ordering::Relaxed);
            self.has_points.store(true, Ordering::Release);
            self.has_entries.store(true, Ordering::Release);
        }
    }

    /// Records one operation of a write batch: a put or delete ([`Memtable::apply`]),
    /// or a range delete of `[key, value)` ([`Memtable::delete_range`]).
    pub fn apply_op(&self, seq: SeqNo, kind: OpKind, key: impl AsRef<[u8]>, value: Bytes) {
        match kind.point() {
            Some(point) => self.apply(seq, point, key, value),
            None => self.delete_range(seq, Bytes::copy_from_slice(key.as_ref()), value),
        }
    }

    /// Records a range tombstone: every key in `[start, end)` deleted as of `seq`.
    /// One writer at a time (the store's write lock): the set is rebuilt and swapped.
    pub fn delete_range(&self, seq: SeqNo, start: Bytes, end: Bytes) {
        let charge = start.len() + end.len() + ENTRY_OVERHEAD;
        let new = RangeTombstone { start, end, seq };
        let current = self.range_dels.load_full();
        let old = current.iter().flat_map(|f| f.tombstones());
        let next = Fragments::new(old.chain(std::iter::once(new)));
        self.range_dels.store(Some(Arc::new(next)));
        self.has_range_dels.store(true, Ordering::Release);
        self.size.fetch_add(charge, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        self.has_entries.store(true, Ordering::Release);
    }

    /// The memtable's range tombstones (`None` if it has none).
    pub fn range_dels(&self) -> Option<Arc<Fragments>> {
        if !self.has_range_dels.load(Ordering::Acquire) {
            return None;
        }
        self.range_dels.load_full()
    }

    /// The newest entry for `key`, tombstones included (the caller decides what a
    /// tombstone means); `None` if this memtable has never seen the key.
    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.get_at(key, READ_LATEST)
    }

    /// The newest entry for `key` with a sequence number at most `read_seq`;
    /// `None` if this memtable holds no such version.
    pub fn get_at(&self, key: &[u8], read_seq: SeqNo) -> Option<Entry> {
        let hit = self.hit_at(key, read_seq)?;
        Some(hit.into_entry(Bytes::copy_from_slice(key)))
    }

    /// [`Memtable::get_at`] without the key, which the store's get does not need.
    pub(crate) fn hit_at(&self, key: &[u8], read_seq: SeqNo) -> Option<Hit> {
        // An empty memtable (the usual state after a flush or a reopen) answers without
        // pinning an epoch and walking the skip list's head.
        if !self.has_entries.load(Ordering::Acquire) {
            return None;
        }
        let point = if self.has_points.load(Ordering::Acquire) {
            self.map
                .get(key)
                .and_then(|e| e.value().visible_at(read_seq))
        } else {
            None
        };
        if !self.has_range_dels.load(Ordering::Acquire) {
            return point;
        }
        // A range tombstone newer than the key's newest visible version (or over a key
        // this memtable never saw) answers "deleted": nothing older may be asked.
        let guard = self.range_dels.load();
        let covering = guard.as_ref()?.newest_covering(key, read_seq);
        match (point, covering) {
            (Some(p), Some(t)) if t > p.seq => Some(Hit::range_deleted(t)),
            (None, Some(t)) => Some(Hit::range_deleted(t)),
            (point, _) => point,
        }
    }

    /// Bytes written into this memtable: keys, values and [`ENTRY_OVERHEAD`] per write,
    /// counting overwrites too (see the module docs).
    pub fn approximate_size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// The number of distinct keys (tombstones included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no write has been applied.
    pub fn is_empty(&self) -> bool {
        !self.has_entries.load(Ordering::Acquire)
    }

    /// The highest sequence number applied (0 when empty).
    pub fn max_seq(&self) -> SeqNo {
        self.max_seq.load(Ordering::Relaxed)
    }

    /// Every version of every key, in key order and newest first within a key: what
    /// a flush chooses from (the order a table stores them in).
    pub fn versions(&self) -> impl Iterator<Item = Entry> + '_ {
        let mut keys = ByteArena::default();
        self.map.iter().flat_map(move |e| {
            let key = match e.key() {
                MemKey::Inline { .. } => keys.copy(e.key().as_slice()),
                MemKey::Shared(b) => b.clone(),
            };
            e.value().versions().map(move |v| Entry {
                key: key.clone(),
                seq: v.seq,
                kind: v.kind,
                value: v.value.clone(),
            })
        })
    }

    /// Every key's newest entry, in key order.
    pub fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        self.map
            .iter()
            .filter_map(|e| visible_entry(&e, READ_LATEST))
    }

    /// The newest entries (as of `read_seq`) with keys within `start..end` (each bound
    /// included, excluded or unbounded), in key order. An empty or inverted range
    /// yields nothing.
    pub fn range<'a>(
        &'a self,
        start: Bound<&'a [u8]>,
        end: Bound<&'a [u8]>,
        read_seq: SeqNo,
    ) -> impl Iterator<Item = Entry> + 'a {
        self.map
            .range::<[u8], _>((start, end))
            .filter_map(move |e| visible_entry(&e, read_seq))
    }

    /// Like [`Memtable::range`], but the iterator owns its memtable handle and bounds,
    /// so it can outlive the caller's borrows (a store's `scan` returns one).
    ///
    /// It copies entries out of the skip list in batches and resumes after the last key
    /// it copied, so it holds no borrow of the list between refills. The first batch is
    /// 8 entries and each one after is twice the one before, up to 128: a short scan
    /// copies about what it reads, and a long one re-seeks once per 128 keys. Keys are
    /// never unlinked and versions are read as of `read_seq`, so a scan that crosses
    /// refills still sees one point in time.
    pub fn owned_range(
        self: &Arc<Self>,
        start: Bound<Bytes>,
        end: Bound<Bytes>,
        read_seq: SeqNo,
    ) -> OwnedRange {
        OwnedRange {
            table: Arc::clone(self),
            next_start: start,
            end,
            read_seq,
            buffer: VecDeque::new(),
            batch: RANGE_BATCH_FIRST,
            exhausted: false,
            reverse: false,
        }
    }

    /// Like [`Memtable::owned_range`], walking the range from its end down to its start
    /// (the backward half of a double-ended scan); it refills from the back the same way.
    pub fn owned_range_rev(
        self: &Arc<Self>,
        start: Bound<Bytes>,
        end: Bound<Bytes>,
        read_seq: SeqNo,
    ) -> OwnedRange {
        OwnedRange {
            reverse: true,
            ..self.owned_range(start, end, read_seq)
        }
    }
}

/// The version a read at `read_seq` sees, as an entry with the key (see
/// [`Slot::visible_at`]).
fn visible_entry(entry: &map::Entry<'_, MemKey, Slot>, read_seq: SeqNo) -> Option<Entry> {
    let hit = entry.value().visible_at(read_seq)?;
    Some(hit.into_entry(entry.key().to_bytes()))
}

/// An ordered iterator over a key range of a shared memtable; see
/// [`Memtable::owned_range`].
#[derive(Debug)]
pub struct OwnedRange {
    table: Arc<Memtable>,
    next_start: Bound<Bytes>,
    end: Bound<Bytes>,
    read_seq: SeqNo,
    buffer: VecDeque<Entry>,
    /// Skip-list keys the next refill copies.
    batch: usize,
    exhausted: bool,
    /// Walks from the end down (`next_start` stays, `end` moves).
    reverse: bool,
}

impl OwnedRange {
    fn refill(&mut self) {
        let start = as_ref_bound(&self.next_start);
        let end = as_ref_bound(&self.end);
        // Count skip-list keys, not yielded entries: a key with no version visible at
        // `read_seq` must still advance the resume point.
        let mut seen = 0;
        let mut last_key = None;
        let range = self.table.map.range::<[u8], _>((start, end));
        let size = self.batch;
        self.batch = (size * 2).min(RANGE_BATCH);
        let batch: Box<dyn Iterator<Item = _>> = if self.reverse {
            Box::new(range.rev().take(size))
        } else {
            Box::new(range.take(size))
        };
        for e in batch {
            seen += 1;
            last_key = Some(e.key().clone());
            if let Some(entry) = visible_entry(&e, self.read_seq) {
                self.buffer.push_back(entry);
            }
        }
        match last_key {
            Some(last) if seen == size && self.reverse => {
                self.end = Bound::Excluded(last.to_bytes());
            }
            Some(last) if seen == size => {
                self.next_start = Bound::Excluded(last.to_bytes());
            }
            _ => self.exhausted = true,
        }
    }
}

fn as_ref_bound(bound: &Bound<Bytes>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(&key[..]),
        Bound::Excluded(key) => Bound::Excluded(&key[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for OwnedRange {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        while self.buffer.is_empty() && !self.exhausted {
            self.refill();
        }
        self.buffer.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::thread;

    use proptest::prelude::*;

    use super::*;

    fn key(i: u32) -> Bytes {
        Bytes::from(format!("key{i:05}"))
    }

    /// A memtable holding only a range tombstone answers from the tombstone without
    /// walking its empty skip list, and finds point writes once they come.
    #[test]
    fn a_memtable_of_tombstones_alone_still_answers_and_then_finds_points() {
        let mem = Memtable::new();
        mem.delete_range(5, key(10), key(20));
        assert!(!mem.is_empty());
        assert_eq!(mem.hit_at(&key(15), READ_LATEST).map(|h| h.seq), Some(5));
        assert!(mem
            .hit_at(&key(15), READ_LATEST)
            .and_then(Hit::live_value)
            .is_none());
        assert!(mem.hit_at(&key(25), READ_LATEST).is_none());
        assert!(
            mem.hit_at(&key(15), 4).is_none(),
            "the tombstone is newer than seq 4"
        );
        // A put above the tombstone and one outside it are both found.
        mem.apply(6, ValueKind::Put, key(15), Bytes::from_static(b"new"));
        mem.apply(7, ValueKind::Put, key(30), Bytes::from_static(b"out"));
        let live = |k: u32| mem.hit_at(&key(k), READ_LATEST).and_then(Hit::live_value);
        assert_eq!(live(15).as_deref(), Some(&b"new"[..]));
        assert_eq!(live(30).as_deref(), Some(&b"out"[..]));
        assert!(live(12).is_none());
    }

    /// A key's versions are a chain of `Arc`s, and dropping one nested a call per
    /// version: a hot key overwritten 100,000 times overflowed a thread's stack when
    /// its memtable was dropped (the process aborted).
    #[test]
    fn a_long_chain_of_one_keys_versions_drops_on_a_small_stack() {
        let mem = Memtable::new();
        for seq in 1..=100_000u64 {
            mem.apply(
                seq,
                ValueKind::Put,
                "hot",
                Bytes::from(seq.to_le_bytes().to_vec()),
            );
        }
        assert_eq!(mem.get(b"hot").map(|e| e.seq), Some(100_000));
        thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || drop(mem))
            .unwrap()
            .join()
            .unwrap();
    }

    fn put(table: &Memtable, seq: SeqNo, k: &str, v: &str) {
        table.apply(
            seq,
            ValueKind::Put,
            Bytes::copy_from_slice(k.as_bytes()),
            Bytes::copy_from_slice(v.as_bytes()),
        );
    }

    #[test]
    fn newest_version_wins() {
        let table = Memtable::new();
        put(&table, 1, "k", "v1");
        put(&table, 2, "k", "v2");
        let e = table.get(b"k").unwrap();
        assert_eq!(
            (e.seq, e.kind, &e.value[..]),
            (2, ValueKind::Put, &b"v2"[..])
        );
        assert_eq!(table.len(), 1);
        assert_eq!(table.max_seq(), 2);
    }

    #[test]
    fn an_older_write_never_replaces_a_newer_one() {
        let table = Memtable::new();
        put(&table, 5, "k", "new");
        put(&table, 3, "k", "old");
        assert_eq!(&table.get(b"k").unwrap().value[..], b"new");
        assert_eq!(&table.get_at(b"k", 4).unwrap().value[..], b"old");
        assert!(table.get_at(b"k", 2).is_none());
        // Replaying a write is harmless and costs nothing.
        let size = table.approximate_size();
        put(&table, 5, "k", "new");
        put(&table, 3, "k", "old");
        assert_eq!(
            table.approximate_size(),
            size,
            "a replayed write costs nothing"
        );
        assert_eq!(table.get(b"k").unwrap().seq, 5);
        assert_eq!(table.max_seq(), 5);
        // Versions on both sides of the one that made the node (5).
        put(&table, 8, "k", "newest");
        put(&table, 4, "k", "middle");
        let seqs: Vec<SeqNo> = table.versions().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![8, 5, 4, 3]);
        for (read, want) in [(3, 3), (4, 4), (6, 5), (7, 5), (8, 8), (READ_LATEST, 8)] {
            assert_eq!(
                table.get_at(b"k", read).unwrap().seq,
                want,
                "read at {read}"
            );
        }
        let size = table.approximate_size();
        put(&table, 4, "k", "middle");
        put(&table, 8, "k", "newest");
        assert_eq!(table.approximate_size(), size);
    }

    #[test]
    fn reads_see_the_newest_version_at_their_sequence_number() {
        let table = Arc::new(Memtable::new());
        put(&table, 1, "a", "a1");
        put(&table, 2, "b", "b2");
        put(&table, 3, "a", "a3");
        table.apply(4, ValueKind::Delete, Bytes::from("b"), Bytes::new());
        put(&table, 6, "c", "c6");
        put(&table, 5, "a", "a5"); // out of order: linked between 3 and 6
        let at = |seq: SeqNo| -> Vec<(String, SeqNo)> {
            table
                .owned_range(Bound::Unbounded, Bound::Unbounded, seq)
                .map(|e| (String::from_utf8_lossy(&e.key).into_owned(), e.seq))
                .collect()
        };
        let s = |k: &str, q: SeqNo| (k.to_string(), q);
        assert_eq!(at(0), vec![]);
        assert_eq!(at(1), vec![s("a", 1)]);
        assert_eq!(at(2), vec![s("a", 1), s("b", 2)]);
        assert_eq!(at(4), vec![s("a", 3), s("b", 4)]);
        assert_eq!(at(READ_LATEST), vec![s("a", 5), s("b", 4), s("c", 6)]);
        assert_eq!(table.get_at(b"a", 4).unwrap().seq, 3);
        assert_eq!(table.get_at(b"a", 5).unwrap().seq, 5);
    }

    #[test]
    fn tombstones_are_entries() {
        let table = Memtable::new();
        put(&table, 1, "k", "v");
        table.apply(
            2,
            ValueKind::Delete,
            Bytes::from("k"),
            Bytes::from("ignored"),
        );
        let e = table.get(b"k").unwrap();
        assert_eq!(e.kind, ValueKind::Delete);
        assert!(e.value.is_empty());
        assert_eq!(e.seq, 2);
        // A put after the delete resurrects the key.
        put(&table, 3, "k", "back");
        assert_eq!(table.get(b"k").unwrap().kind, ValueKind::Put);
        // An empty value is a value, not a tombstone.
        put(&table, 4, "e", "");
        assert_eq!(table.get(b"e").unwrap().kind, ValueKind::Put);
    }

    #[test]
    fn size_counts_every_write() {
        let table = Memtable::new();
        assert!(table.is_empty());
        assert_eq!(table.approximate_size(), 0);
        put(&table, 1, "abc", "12345");
        assert_eq!(table.approximate_size(), 3 + 5 + ENTRY_OVERHEAD);
        put(&table, 2, "abc", "1");
        assert_eq!(table.approximate_size(), 2 * (3 + ENTRY_OVERHEAD) + 5 + 1);
        assert!(!table.is_empty());
    }

    #[test]
    fn iteration_is_in_key_order() {
        let table = Memtable::new();
        for (seq, k) in [(1, "m"), (2, "a"), (3, "z"), (4, "b"), (5, "")] {
            put(&table, seq, k, k);
        }
        let keys: Vec<Bytes> = table.iter().map(|e| e.key).collect();
        let expected: Vec<Bytes> = ["", "a", "b", "m", "z"]
            .into_iter()
            .map(Bytes::from)
            .collect();
        assert_eq!(keys, expected);
    }

    fn reference(keys: &[Bytes], start: Bound<&[u8]>, end: Bound<&[u8]>) -> Vec<Bytes> {
        keys.iter()
            .filter(|k| match start {
                Bound::Included(s) => &k[..] >= s,
                Bound::Excluded(s) => &k[..] > s,
                Bound::Unbounded => true,
            })
            .filter(|k| match end {
                Bound::Included(e) => &k[..] <= e,
                Bound::Excluded(e) => &k[..] < e,
                Bound::Unbounded => true,
            })
            .cloned()
            .collect()
    }

    #[test]
    fn ranges_honour_every_bound_combination() {
        let table = Arc::new(Memtable::new());
        // Even numbers present; odd numbers probe bounds between keys.
        let keys: Vec<Bytes> = (0..600).step_by(2).map(key).collect();
        for (i, k) in keys.iter().enumerate() {
            table.apply(i as u64, ValueKind::Put, k.clone(), k.clone());
        }
        let probes: Vec<Bytes> = [0, 1, 2, 3, 255, 256, 257, 300, 597, 598, 599, 700]
            .into_iter()
            .map(key)
            .chain([Bytes::new()])
            .collect();
        let bounds = |k: &Bytes| {
            [
                Bound::Included(k.clone()),
                Bound::Excluded(k.clone()),
                Bound::Unbounded,
            ]
        };
        for s in &probes {
            for e in &probes {
                for start in bounds(s) {
                    for end in bounds(e) {
                        let want = reference(&keys, as_ref_bound(&start), as_ref_bound(&end));
                        let got: Vec<Bytes> = table
                            .range(as_ref_bound(&start), as_ref_bound(&end), READ_LATEST)
                            .map(|e| e.key)
                            .collect();
                        assert_eq!(got, want, "range({start:?}, {end:?})");
                        let owned: Vec<Bytes> = table
                            .owned_range(start.clone(), end.clone(), READ_LATEST)
                            .map(|e| e.key)
                            .collect();
                        assert_eq!(owned, want, "owned_range({start:?}, {end:?})");
                    }
                }
            }
        }
    }

    #[test]
    fn owned_range_outlives_the_borrow_and_crosses_refills() {
        let table = Arc::new(Memtable::new());
        for i in 0..(RANGE_BATCH as u32 * 3 + 7) {
            table.apply(u64::from(i), ValueKind::Put, key(i), Bytes::new());
        }
        let iter = {
            let handle = Arc::clone(&table);
            handle.owned_range(Bound::Unbounded, Bound::Unbounded, READ_LATEST)
        };
        let keys: Vec<Bytes> = iter.map(|e| e.key).collect();
        let expected: Vec<Bytes> = (0..(RANGE_BATCH as u32 * 3 + 7)).map(key).collect();
        assert_eq!(keys, expected);
        // Exactly a whole number of batches (8, 8 + 16, ... and past the cap): the
        // refill after the last finds nothing, walking either way.
        for n in [8u32, 24, 56, 120, 248, 376] {
            let exact = Arc::new(Memtable::new());
            for i in 0..n {
                exact.apply(1, ValueKind::Put, key(i), Bytes::new());
            }
            let all = |rev: bool| -> Vec<Bytes> {
                let range = if rev {
                    exact.owned_range_rev(Bound::Unbounded, Bound::Unbounded, READ_LATEST)
                } else {
                    exact.owned_range(Bound::Unbounded, Bound::Unbounded, READ_LATEST)
                };
                range.map(|e| e.key).collect()
            };
            let forward: Vec<Bytes> = (0..n).map(key).collect();
            assert_eq!(all(false), forward, "{n} keys forward");
            let backward: Vec<Bytes> = (0..n).rev().map(key).collect();
            assert_eq!(all(true), backward, "{n} keys backward");
        }
    }

    #[test]
    fn a_short_walk_copies_a_short_batch() {
        let table = Arc::new(Memtable::new());
        for i in 0..2_000 {
            table.apply(u64::from(i), ValueKind::Put, key(i), Bytes::new());
        }
        let mut range = table.owned_range(Bound::Included(key(500)), Bound::Unbounded, READ_LATEST);
        assert_eq!(range.next().map(|e| e.key), Some(key(500)));
        // The first refill copied the first batch; the next ones grow to the cap.
        assert_eq!(range.buffer.len(), RANGE_BATCH_FIRST - 1);
        let mut copied = vec![RANGE_BATCH_FIRST];
        while copied.len() < 7 {
            while !range.buffer.is_empty() {
                range.next();
            }
            range.next();
            copied.push(range.buffer.len() + 1);
        }
        assert_eq!(copied, [8, 16, 32, 64, 128, 128, 128]);
    }

    #[test]
    fn memtable_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Memtable>();
        assert_send_sync::<OwnedRange>();
    }

    /// One writer overwrites keys with rising sequence numbers while readers look them
    /// up and scan: readers never block, never see a key go back in time, and always
    /// see keys in order with each key once.
    #[test]
    fn concurrent_readers_while_a_writer_inserts() {
        const KEYS: u32 = 500;
        const WRITES: u64 = 4000;
        let table = Arc::new(Memtable::new());
        let done = Arc::new(AtomicBool::new(false));

        let readers: Vec<_> = (0..3)
            .map(|r| {
                let table = Arc::clone(&table);
                let done = Arc::clone(&done);
                thread::spawn(move || {
                    let mut last_seen = vec![0u64; KEYS as usize];
                    let mut rounds = 0u64;
                    while !done.load(Ordering::Acquire) || rounds < 3 {
                        for i in (r..KEYS).step_by(7) {
                            if let Some(e) = table.get(&key(i)) {
                                // The value is the sequence number that wrote it.
                                assert_eq!(e.value, Bytes::from(e.seq.to_string()));
                                assert!(e.seq >= last_seen[i as usize], "key went back in time");
                                last_seen[i as usize] = e.seq;
                            }
                        }
                        let scanned: Vec<Bytes> = table
                            .owned_range(
                                Bound::Included(key(100)),
                                Bound::Excluded(key(400)),
                                READ_LATEST,
                            )
                            .map(|e| e.key)
                            .collect();
                        assert!(scanned.windows(2).all(|w| w[0] < w[1]), "scan out of order");
                        assert!(scanned.len() <= 300);
                        rounds += 1;
                    }
                })
            })
            .collect();

        for seq in 1..=WRITES {
            let i = (seq * 7919 % u64::from(KEYS)) as u32;
            table.apply(seq, ValueKind::Put, key(i), Bytes::from(seq.to_string()));
        }
        done.store(true, Ordering::Release);
        for reader in readers {
            reader.join().unwrap();
        }

        assert_eq!(table.len(), KEYS as usize);
        assert_eq!(table.max_seq(), WRITES);
        // Each key holds the last seq that wrote it.
        for i in 0..KEYS {
            let last = (1..=WRITES)
                .filter(|seq| (seq * 7919 % u64::from(KEYS)) as u32 == i)
                .max()
                .unwrap();
            assert_eq!(table.get(&key(i)).unwrap().seq, last);
        }
    }

    /// Keys on both sides of the inline limit, sharing long prefixes, with bytes 0x00
    /// and 0xff: the memtable must order them exactly as `[u8]` does, find each one,
    /// and give back the bytes it was given.
    fn mixed_keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let byte = prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()];
        let key = (0..INLINE_KEY + 10, proptest::collection::vec(byte, 0..8)).prop_map(
            |(shared, tail)| {
                let mut k = vec![b'k'; shared];
                k.extend(tail);
                k
            },
        );
        proptest::collection::vec(key, 1..60)
    }

    proptest! {
        #[test]
        fn inline_and_shared_keys_order_like_bytes(keys in mixed_keys()) {
            let table = Memtable::new();
            for (seq, k) in keys.iter().enumerate() {
                table.apply(seq as SeqNo + 1, ValueKind::Put, Bytes::copy_from_slice(k), Bytes::new());
            }
            let mut want = keys.clone();
            want.sort();
            want.dedup();
            let got: Vec<Vec<u8>> = table.iter().map(|e| e.key.to_vec()).collect();
            prop_assert_eq!(&got, &want);
            for k in &want {
                prop_assert_eq!(table.get(k).map(|e| e.key.to_vec()), Some(k.clone()));
            }
            let mut absent = want[0].clone();
            absent.push(0);
            if !want.contains(&absent) {
                prop_assert!(table.get(&absent).is_none());
            }
        }
    }

    #[test]
    fn keys_at_the_inline_limit_keep_their_bytes() {
        for len in [0, 1, INLINE_KEY - 1, INLINE_KEY, INLINE_KEY + 1, 200] {
            let k: Vec<u8> = (0..len).map(|i| i as u8 ^ 0xa5).collect();
            let table = Memtable::new();
            table.apply(
                1,
                ValueKind::Put,
                Bytes::copy_from_slice(&k),
                Bytes::from("v"),
            );
            let inline = matches!(MemKey::new(&k), MemKey::Inline { .. });
            assert_eq!(inline, len <= INLINE_KEY, "length {len}");
            assert_eq!(table.get(&k).unwrap().key.to_vec(), k);
            assert_eq!(table.versions().next().unwrap().key.to_vec(), k);
        }
    }

    #[test]
    fn an_arena_packs_copies_and_a_read_gets_its_own() {
        let mut arena = ByteArena::default();
        let a = arena.copy(b"first value");
        let b = arena.copy(b"second");
        assert_eq!((&a[..], &b[..]), (&b"first value"[..], &b"second"[..]));
        // Consecutive copies share a chunk: `b` starts where `a` ends.
        assert_eq!(b.as_ptr(), a.as_ptr().wrapping_add(a.len()));
        let big = vec![7u8; ARENA_CHUNK + 1];
        assert_eq!(&arena.copy(&big)[..], &big[..]);
        assert!(arena.copy(b"").is_empty());
        // A chunk's strings outlive the arena.
        drop(arena);
        assert_eq!(&a[..], b"first value");

        // What a read returns is a copy, not a slice of the memtable's chunk.
        let table = Memtable::new();
        let mut values = ByteArena::default();
        table.apply(1, ValueKind::Put, b"k", values.copy(b"v1"));
        let stored = table.versions().next().unwrap().value;
        let read = table.get(b"k").unwrap().value;
        assert_eq!(read, stored);
        assert_ne!(read.as_ptr(), stored.as_ptr());
    }
}
