//! Which versions of a key a flush or compaction keeps: every version a reader can
//! still see, and no other (LevelDB's and RocksDB's rule).
//!
//! A reader sees, of each key, the newest version at or below its sequence number.
//! Readers without a snapshot see the newest version; a live snapshot at `s` sees the
//! newest version with `seq <= s`. So with a key's versions newest first, `v0` is always
//! kept, and an older `v(i)` is kept exactly when some snapshot lies in its *stripe*
//! `[v(i).seq, v(i-1).seq)`: that snapshot sees it, and every other reader sees a newer
//! version.
//!
//! ```text
//!  seq:    3      8        12     17          versions of "k" (v3 oldest, v0 newest)
//!          v3     v2       v1     v0
//!  snaps:      5             14               snapshot 5 sees v3, 14 sees v1
//!  kept:   v3     .        v1     v0          v2 is seen by no one: dropped
//! ```
//!
//! A tombstone is needed only to hide older versions. When nothing deeper can hold the
//! key (the output is the bottom of the tree) and the tombstone is the oldest version
//! kept, readers who see it and readers who see nothing agree, so it goes too (and
//! again for the next tombstone that becomes the oldest). With no snapshot held, this
//! is exactly the old rule: the newest version, or nothing if it is a tombstone at the
//! bottom. A snapshot dropped before the compaction no longer protects anything.

use std::collections::VecDeque;
use std::iter::Peekable;

use crate::error::Result;
use crate::range_del::Fragments;
use crate::types::{Entry, SeqNo, ValueKind};

/// Filters a merged run (key order, newest version first) down to the versions that
/// `snapshots` (ascending) or the newest reads can see.
pub(crate) struct Retain<I: Iterator<Item = Result<Entry>>> {
    inner: Peekable<I>,
    snapshots: Vec<SeqNo>,
    drop_tombstones: bool,
    out: VecDeque<Entry>,
    /// The range tombstones of the run's sources: a version one of them hides from
    /// every reader that could see it goes.
    range_dels: Option<Fragments>,
}

impl<I: Iterator<Item = Result<Entry>>> Retain<I> {
    /// `snapshots`: the live snapshots' sequence numbers, ascending. `drop_tombstones`:
    /// no deeper level can hold an older version of any key in the run.
    pub(crate) fn new(inner: I, snapshots: Vec<SeqNo>, drop_tombstones: bool) -> Self {
        Retain {
            inner: inner.peekable(),
            snapshots,
            drop_tombstones,
            out: VecDeque::new(),
            range_dels: None,
        }
    }

    /// Also drops the versions that `range_dels` hide from every reader that could
    /// see them. A range tombstone at `t` over a key acts here as a point tombstone of
    /// that key at `t`: it is placed among the key's versions by its sequence number,
    /// the rule above decides, and then it is taken out again (the range tombstone
    /// itself travels in the table's tombstone block, or goes at the bottom when no
    /// snapshot is older than it: see `db/flush_compact.rs`).
    pub(crate) fn with_range_dels(mut self, range_dels: Option<Fragments>) -> Self {
        self.range_dels = range_dels.filter(|r| !r.is_empty());
        self
    }

    /// Whether a snapshot lies in `[low, high)`.
    fn seen_between(&self, low: SeqNo, high: SeqNo) -> bool {
        let i = self.snapshots.partition_point(|&s| s < low);
        self.snapshots.get(i).is_some_and(|&s| s < high)
    }

    /// Keeps what is visible of one key's versions (newest first).
    fn decide(&mut self, versions: Vec<Entry>) {
        let covering: Vec<SeqNo> = match (&self.range_dels, versions.first()) {
            (Some(r), Some(first)) => r.covering(&first.key).to_vec(),
            _ => Vec::new(),
        };
        if covering.is_empty() {
            return self.decide_marked(versions.into_iter().map(|v| (v, false)));
        }
        // The range tombstones over the key, as stand-in point tombstones (marked), in
        // sequence order among the real versions.
        let key = versions[0].key.clone();
        let mut marked: Vec<(Entry, bool)> = versions.into_iter().map(|v| (v, false)).collect();
        marked.extend(covering.into_iter().map(|seq| {
            let stand_in = Entry {
                key: key.clone(),
                seq,
                kind: ValueKind::Delete,
                value: bytes::Bytes::new(),
            };
            (stand_in, true)
        }));
        marked.sort_by_key(|v| std::cmp::Reverse(v.0.seq));
        self.decide_marked(marked.into_iter());
    }

    /// [`Retain::decide`] over versions some of which are stand-ins (`true`), which
    /// shape what is kept but are not kept themselves.
    fn decide_marked(&mut self, versions: impl Iterator<Item = (Entry, bool)>) {
        let mut kept: Vec<(Entry, bool)> = Vec::new();
        let mut newer: Option<SeqNo> = None;
        for (v, stand_in) in versions {
            let keep = match newer {
                None => true,
                Some(newer_seq) => self.seen_between(v.seq, newer_seq),
            };
            newer = Some(v.seq);
            if keep {
                kept.push((v, stand_in));
            }
        }
        if self.drop_tombstones {
            while kept
                .last()
                .is_some_and(|(v, _)| v.kind == ValueKind::Delete)
            {
                kept.pop();
            }
        }
        self.out
            .extend(kept.into_iter().filter(|(_, s)| !s).map(|(v, _)| v));
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for Retain<I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(e) = self.out.pop_front() {
                return Some(Ok(e));
            }
            let first = match self.inner.next()? {
                Ok(e) => e,
                Err(e) => return Some(Err(e)),
            };
            // Most keys have one version: it passes straight through (unless it is a
            // tombstone that may go), with no list built for it.
            let more = matches!(self.inner.peek(), Some(Ok(next)) if next.key == first.key);
            let covered = self
                .range_dels
                .as_ref()
                .is_some_and(|r| !r.covering(&first.key).is_empty());
            if !more && !covered {
                if self.drop_tombstones && first.kind == ValueKind::Delete {
                    continue;
                }
                return Some(Ok(first));
            }
            let mut versions = vec![first];
            while let Some(Ok(next)) = self.inner.peek() {
                if next.key != versions[0].key {
                    break;
                }
                if let Some(Ok(e)) = self.inner.next() {
                    versions.push(e);
                }
            }
            self.decide(versions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn v(key: &str, seq: SeqNo, kind: ValueKind) -> Result<Entry> {
        Ok(Entry {
            key: Bytes::copy_from_slice(key.as_bytes()),
            seq,
            kind,
            value: Bytes::new(),
        })
    }

    fn kept(
        input: Vec<Result<Entry>>,
        snapshots: Vec<SeqNo>,
        bottom: bool,
    ) -> Vec<(String, SeqNo)> {
        Retain::new(input.into_iter(), snapshots, bottom)
            .map(|e| {
                let e = e.unwrap();
                (String::from_utf8(e.key.to_vec()).unwrap(), e.seq)
            })
            .collect()
    }

    fn k(seq: SeqNo) -> (String, SeqNo) {
        ("k".to_string(), seq)
    }

    use ValueKind::{Delete, Put};

    #[test]
    fn each_snapshot_keeps_the_version_it_sees() {
        let run = || {
            vec![
                v("k", 17, Put),
                v("k", 12, Put),
                v("k", 8, Put),
                v("k", 3, Put),
            ]
        };
        assert_eq!(kept(run(), vec![], false), vec![k(17)]);
        assert_eq!(kept(run(), vec![5, 14], false), vec![k(17), k(12), k(3)]);
        // A snapshot at a version's own seq sees it; one at the next version's does not.
        assert_eq!(kept(run(), vec![8], false), vec![k(17), k(8)]);
        assert_eq!(kept(run(), vec![2], false), vec![k(17)]);
        assert_eq!(kept(run(), vec![20], false), vec![k(17)]);
    }

    #[test]
    fn bottom_tombstones_go_only_when_nothing_older_is_kept() {
        let run = || vec![v("k", 9, Delete), v("k", 4, Put), v("j", 1, Put)];
        let mut input = run();
        input.rotate_left(2); // "j" first: key order
        assert_eq!(kept(input, vec![], true), vec![("j".into(), 1)]);
        // A snapshot at 5 still sees the put at 4: the tombstone must hide it.
        let input = vec![v("k", 9, Delete), v("k", 4, Put)];
        assert_eq!(kept(input, vec![5], true), vec![k(9), k(4)]);
        // Not at the bottom: the tombstone hides deeper levels and stays.
        let input = vec![v("k", 9, Delete), v("k", 4, Put)];
        assert_eq!(kept(input, vec![], false), vec![k(9)]);
        // Tombstone under a put, both kept for a snapshot: at the bottom it goes.
        let input = vec![v("k", 9, Put), v("k", 4, Delete)];
        assert_eq!(kept(input, vec![5], true), vec![k(9)]);
    }

    #[test]
    fn errors_pass_through() {
        let input = vec![
            v("a", 1, Put),
            Err(crate::Error::InvalidArgument("x".into())),
        ];
        let out: Vec<Result<Entry>> = Retain::new(input.into_iter(), vec![], false).collect();
        assert!(out.iter().any(|r| r.is_err()));
    }
}
