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
//! # Only the newest version
//!
//! The store has no snapshots: nothing ever asks for a key as of an older sequence
//! number. So the memtable keeps one entry per user key, the one with the highest
//! sequence number; a newer write replaces the older entry, and a delete is stored as
//! a [`ValueKind::Delete`] entry (a tombstone, which must reach the tables to hide older
//! versions there). An entry is replaced only by one with an equal or higher sequence
//! number, so applying writes out of order, or replaying a log twice, still leaves the
//! newest version.
//!
//! ```text
//! SkipMap<Bytes, Slot>        ordered by user key (bytewise)
//!   "apple"  -> (seq 12, Put,    "red")
//!   "banana" -> (seq 15, Delete, "")       tombstone
//!   "cherry" -> (seq  3, Put,    "dark")
//! ```
//!
//! [`Memtable::approximate_size`] grows with every write, including writes that replace
//! an entry: the WAL grows with every write too, so a memtable under constant
//! overwrites of a few keys still fills up, gets flushed, and lets its log be retired.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use crossbeam_skiplist::{map, SkipMap};

use crate::types::{Entry, SeqNo, ValueKind};

/// Bytes charged per write on top of key and value: roughly a skip-list node (the
/// key and value handles, sequence number, kind and its tower of links).
pub const ENTRY_OVERHEAD: usize = 64;

/// How many entries an [`OwnedRange`] copies out of the skip list per refill.
const RANGE_BATCH: usize = 128;

/// The value side of one memtable entry.
#[derive(Debug, Clone)]
struct Slot {
    seq: SeqNo,
    kind: ValueKind,
    value: Bytes,
}

/// A sorted, concurrent in-memory table holding the newest version of each key.
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
/// assert_eq!(table.get(b"gone").unwrap().kind, ValueKind::Delete);
/// assert!(table.get(b"absent").is_none());
///
/// let keys: Vec<_> = table.iter().map(|e| e.key).collect();
/// assert_eq!(keys, vec![Bytes::from("gone"), Bytes::from("k")]);
/// ```
#[derive(Debug, Default)]
pub struct Memtable {
    map: SkipMap<Bytes, Slot>,
    size: AtomicUsize,
    max_seq: AtomicU64,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable::default()
    }

    /// Records a write: sets `key` to `value` (`Put`) or to a tombstone (`Delete`, the
    /// value is ignored) as of `seq`. An entry with a higher sequence number already
    /// present for `key` is kept.
    pub fn apply(&self, seq: SeqNo, kind: ValueKind, key: Bytes, value: Bytes) {
        let value = match kind {
            ValueKind::Put => value,
            ValueKind::Delete => Bytes::new(),
        };
        let charge = key.len() + value.len() + ENTRY_OVERHEAD;
        let slot = Slot { seq, kind, value };
        let entry = self
            .map
            .compare_insert(key, slot, |current| current.seq <= seq);
        if entry.value().seq == seq {
            self.size.fetch_add(charge, Ordering::Relaxed);
            self.max_seq.fetch_max(seq, Ordering::Relaxed);
        }
    }

    /// The newest entry for `key`, tombstones included (the caller decides what a
    /// tombstone means); `None` if this memtable has never seen the key.
    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        // An empty map (the usual state after a flush or a reopen) answers without
        // pinning an epoch and walking the skip list's head.
        if self.map.is_empty() {
            return None;
        }
        self.map.get(key).map(to_entry)
    }

    /// Bytes written into this memtable: keys, values and [`ENTRY_OVERHEAD`] per write,
    /// counting replaced entries too (see the module docs).
    pub fn approximate_size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// The number of distinct keys (tombstones included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no write has been applied.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The highest sequence number applied (0 when empty).
    pub fn max_seq(&self) -> SeqNo {
        self.max_seq.load(Ordering::Relaxed)
    }

    /// Every entry in key order (what a flush writes).
    pub fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        self.map.iter().map(to_entry)
    }

    /// The entries with keys within `start..end` (each bound included, excluded or
    /// unbounded), in key order. An empty or inverted range yields nothing.
    ///
    /// Concurrent writes may or may not be seen; each key is yielded at most once.
    pub fn range<'a>(
        &'a self,
        start: Bound<&'a [u8]>,
        end: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = Entry> + 'a {
        self.map.range::<[u8], _>((start, end)).map(to_entry)
    }

    /// Like [`Memtable::range`], but the iterator owns its memtable handle and bounds,
    /// so it can outlive the caller's borrows (a store's `scan` returns one).
    ///
    /// It copies up to 128 entries at a time out of the skip list and resumes after the
    /// last key it yielded, so it holds no borrow of the list between refills.
    pub fn owned_range(self: &Arc<Self>, start: Bound<Bytes>, end: Bound<Bytes>) -> OwnedRange {
        OwnedRange {
            table: Arc::clone(self),
            next_start: start,
            end,
            buffer: VecDeque::new(),
            exhausted: false,
        }
    }
}

fn to_entry(entry: map::Entry<'_, Bytes, Slot>) -> Entry {
    let slot = entry.value();
    Entry {
        key: entry.key().clone(),
        seq: slot.seq,
        kind: slot.kind,
        value: slot.value.clone(),
    }
}

/// An ordered iterator over a key range of a shared memtable; see
/// [`Memtable::owned_range`].
#[derive(Debug)]
pub struct OwnedRange {
    table: Arc<Memtable>,
    next_start: Bound<Bytes>,
    end: Bound<Bytes>,
    buffer: VecDeque<Entry>,
    exhausted: bool,
}

impl OwnedRange {
    fn refill(&mut self) {
        let start = as_ref_bound(&self.next_start);
        let end = as_ref_bound(&self.end);
        self.buffer
            .extend(self.table.range(start, end).take(RANGE_BATCH));
        match self.buffer.back() {
            Some(last) if self.buffer.len() == RANGE_BATCH => {
                self.next_start = Bound::Excluded(last.key.clone());
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
        if self.buffer.is_empty() && !self.exhausted {
            self.refill();
        }
        self.buffer.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::thread;

    use super::*;

    fn key(i: u32) -> Bytes {
        Bytes::from(format!("key{i:05}"))
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
        let size = table.approximate_size();
        put(&table, 3, "k", "old");
        assert_eq!(&table.get(b"k").unwrap().value[..], b"new");
        assert_eq!(
            table.approximate_size(),
            size,
            "a rejected write costs nothing"
        );
        // Replaying the same write is harmless.
        put(&table, 5, "k", "new");
        assert_eq!(table.get(b"k").unwrap().seq, 5);
        assert_eq!(table.max_seq(), 5);
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
                            .range(as_ref_bound(&start), as_ref_bound(&end))
                            .map(|e| e.key)
                            .collect();
                        assert_eq!(got, want, "range({start:?}, {end:?})");
                        let owned: Vec<Bytes> = table
                            .owned_range(start.clone(), end.clone())
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
            handle.owned_range(Bound::Unbounded, Bound::Unbounded)
        };
        let keys: Vec<Bytes> = iter.map(|e| e.key).collect();
        let expected: Vec<Bytes> = (0..(RANGE_BATCH as u32 * 3 + 7)).map(key).collect();
        assert_eq!(keys, expected);
        // Exactly one batch worth of keys: the refill after it finds nothing.
        let exact = Arc::new(Memtable::new());
        for i in 0..RANGE_BATCH as u32 {
            exact.apply(1, ValueKind::Put, key(i), Bytes::new());
        }
        assert_eq!(
            exact
                .owned_range(Bound::Unbounded, Bound::Unbounded)
                .count(),
            RANGE_BATCH
        );
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
                            .owned_range(Bound::Included(key(100)), Bound::Excluded(key(400)))
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
}
