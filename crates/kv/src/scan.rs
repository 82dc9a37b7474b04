//! A scan is a point-in-time, double-ended walk over a key range of the whole store.
//!
//! When a scan starts it fixes what it reads: the memtables and tables of the current
//! view (held, so a flush or compaction meanwhile changes nothing it sees) and a
//! sequence number (the last complete batch, or a snapshot's). Each key is yielded with
//! its newest version at that number; tombstones hide it.
//!
//! Walking forwards and backwards are two independent merges over the same fixed
//! sources, each opened when first asked for: `next` merges ascending sources (table
//! iterators from the start key, memtable ranges), `next_back` descending ones (tables
//! read from the last block within the end key down). The two ends remember the last
//! key each yielded and stop where they meet, so every key comes out exactly once
//! whichever mix of `next` and `next_back` is used.
//!
//! ```text
//!  start ─► next() ─► a  b  c  ·  ·  ·  x  y  z ◄─ next_back() ◄─ end
//!                         front_key     back_key      yields only keys in between
//! ```
//!
//! Range tombstones (`range_del.rs`) of every source are merged into one set when the
//! scan starts; an entry the merge picks (the newest visible version of its key) is
//! passed over when a tombstone newer than it and visible at the scan's number covers
//! its key, walking either way.
//!
//! A scan whose tables were chosen with a prefix filter (a prefix scan) simply never
//! opens the tables the filter ruled out.
//!
//! The store hands a scan everything it reads (memtables, tables, bounds, sequence
//! number) and one opaque `StoreHold` that keeps the store alive; the scan asks the
//! store for nothing after it starts.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::merge::{Direction, MergeIter, Source};
use crate::range_del::Fragments;
use crate::sstable::Table;
use crate::types::{SeqNo, ValueKind};

/// What keeps a store alive while something made from it reads it: the store itself,
/// held and never asked for anything. Its lock stays taken, and its files stay, until
/// the last holder is dropped.
pub(crate) type StoreHold = Arc<dyn std::any::Any + Send + Sync>;

/// The iterator [`Db::scan`](crate::Db::scan), [`Db::scan_prefix`](crate::Db::scan_prefix)
/// and the [`Snapshot`](crate::Snapshot) scans return: live keys in order with their
/// values, as of one moment. A [`DoubleEndedIterator`]: `.rev()` walks from the end,
/// and `next`/`next_back` may be mixed. Errors come as items and end the iteration.
pub struct ScanIter {
    mems: Vec<Arc<Memtable>>,
    /// The tables, in runs: an L0 table alone, a deeper level's tables together in
    /// key order (their ranges are disjoint). A run is one source of the merge, which
    /// opens its next table only when it has walked past the one before: a short scan
    /// reads one table per level, not every table to the right of its start.
    runs: Vec<Vec<Table>>,
    read_seq: SeqNo,
    start: Bound<Bytes>,
    end: Bound<Bytes>,
    front: Option<MergeIter>,
    back: Option<MergeIter>,
    /// The last key `next` yielded (or passed over as deleted).
    front_key: Option<Bytes>,
    /// The last key `next_back` yielded (or passed over as deleted).
    back_key: Option<Bytes>,
    done: bool,
    /// An error to yield before anything else (a table that could not be opened).
    failed: Option<Error>,
    /// Every range tombstone of the scan's sources, merged (`None`: there are none):
    /// an entry the merge yields is dropped when one newer than it, and visible at
    /// `read_seq`, covers its key.
    range_dels: Option<Fragments>,
    /// The store, held as a snapshot holds it: its lock stays taken while the scan
    /// lives, so no other `Db` can open the directory and delete tables the scan reads.
    /// Declared last, so dropped last: a scan that holds a closed store's last handle
    /// deletes the tables compaction retired (its `tables`, `front`, `back`) while
    /// the lock is still taken.
    _store: StoreHold,
}

impl std::fmt::Debug for ScanIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanIter")
            .field("read_seq", &self.read_seq)
            .field("tables", &self.runs.iter().map(Vec::len).sum::<usize>())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl ScanIter {
    /// A scan of `start..end` over these memtables and tables at `read_seq`.
    pub(crate) fn new(
        store: StoreHold,
        mems: Vec<Arc<Memtable>>,
        runs: Vec<Vec<Table>>,
        read_seq: SeqNo,
        start: Bound<Bytes>,
        end: Bound<Bytes>,
    ) -> ScanIter {
        ScanIter {
            _store: store,
            mems,
            runs,
            read_seq,
            start,
            end,
            front: None,
            back: None,
            front_key: None,
            back_key: None,
            done: false,
            failed: None,
            range_dels: None,
        }
    }

    /// The scan, with the range tombstones of all of its sources (memtables, and every
    /// table whose range meets the scan's, including tables its filters left out:
    /// their tombstones still hide keys of the others).
    pub(crate) fn with_range_dels(mut self, range_dels: Option<Fragments>) -> ScanIter {
        self.range_dels = range_dels;
        self
    }

    /// The scan, made to yield `failed` (if any) as its first and last item.
    pub(crate) fn failing(mut self, failed: Option<Error>) -> ScanIter {
        self.failed = failed;
        self
    }

    /// The merge of every source walking in `direction`. A backward walk opened after
    /// the front has moved starts just past the front's last key.
    fn open(&self, direction: Direction) -> MergeIter {
        let start = match (direction, &self.front_key) {
            (Direction::Backward, Some(k)) => Bound::Excluded(k.clone()),
            _ => self.start.clone(),
        };
        let end = match (direction, &self.back_key) {
            (Direction::Forward, Some(k)) => Bound::Excluded(k.clone()),
            _ => self.end.clone(),
        };
        let mut sources: Vec<Source> = Vec::with_capacity(self.mems.len() + self.runs.len());
        for mem in &self.mems {
            let range = match direction {
                Direction::Forward => mem.owned_range(start.clone(), end.clone(), self.read_seq),
                Direction::Backward => {
                    mem.owned_range_rev(start.clone(), end.clone(), self.read_seq)
                }
            };
            sources.push(Box::new(range.map(Ok)));
        }
        for run in &self.runs {
            let (s, e) = (start.clone(), end.clone());
            let walk = move |table: Table| -> Source {
                let (s, e) = (slice(&s), slice(&e));
                match direction {
                    Direction::Forward => Box::new(table.iter_from(s)),
                    Direction::Backward => Box::new(table.iter_rev(s, e)),
                }
            };
            sources.push(match (run.as_slice(), direction) {
                ([table], _) => walk(table.clone()),
                (_, Direction::Forward) => Box::new(run.clone().into_iter().flat_map(walk)),
                (_, Direction::Backward) => Box::new(run.clone().into_iter().rev().flat_map(walk)),
            });
        }
        MergeIter::with_direction(sources, direction)
    }

    fn before_end(&self, key: &[u8]) -> bool {
        let below_end = match &self.end {
            Bound::Included(e) => key <= &e[..],
            Bound::Excluded(e) => key < &e[..],
            Bound::Unbounded => true,
        };
        below_end && self.back_key.as_ref().is_none_or(|b| key < &b[..])
    }

    fn after_start(&self, key: &[u8]) -> bool {
        let above_start = match &self.start {
            Bound::Included(s) => key >= &s[..],
            Bound::Excluded(s) => key > &s[..],
            Bound::Unbounded => true,
        };
        above_start && self.front_key.as_ref().is_none_or(|f| key > &f[..])
    }
}

impl ScanIter {
    /// The merge that walks from one end (opened on its first step).
    fn merge(&mut self, direction: Direction) -> &mut Option<MergeIter> {
        match direction {
            Direction::Forward => &mut self.front,
            Direction::Backward => &mut self.back,
        }
    }

    /// One step from one end: the next live entry that end's merge yields, until it
    /// passes the range's far bound or meets the other end. The two ends are two
    /// independent merges; each remembers the last key it passed, and each stops
    /// where the other has been.
    fn step(&mut self, direction: Direction) -> Option<Result<(Bytes, Bytes)>> {
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        while !self.done {
            if self.merge(direction).is_none() {
                let opened = self.open(direction);
                *self.merge(direction) = Some(opened);
            }
            let read_seq = self.read_seq;
            let item = self
                .merge(direction)
                .as_mut()
                .and_then(|m| m.next_visible(read_seq));
            let entry = match item {
                None => break,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(e)) => e,
            };
            let (in_range, last) = match direction {
                Direction::Forward => (self.before_end(&entry.key), &mut self.front_key),
                Direction::Backward => (self.after_start(&entry.key), &mut self.back_key),
            };
            if !in_range {
                break;
            }
            *last = Some(entry.key.clone());
            let hidden = self
                .range_dels
                .as_ref()
                .is_some_and(|r| r.hides(&entry.key, entry.seq, read_seq));
            if entry.kind == ValueKind::Put && !hidden {
                return Some(Ok((entry.key, entry.value)));
            }
        }
        self.done = true;
        None
    }
}

impl Iterator for ScanIter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(Direction::Forward)
    }
}

impl DoubleEndedIterator for ScanIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(Direction::Backward)
    }
}

/// An owned bound as a borrowed one.
fn slice(b: &Bound<Bytes>) -> Bound<&[u8]> {
    b.as_ref().map(|k| &k[..])
}

/// A range's bounds as owned keys.
pub(crate) fn own_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: &R,
) -> (Bound<Bytes>, Bound<Bytes>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(Bytes::copy_from_slice(k.as_ref())),
        Bound::Excluded(k) => Bound::Excluded(Bytes::copy_from_slice(k.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}
