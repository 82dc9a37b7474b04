//! Merging sorted runs into one: the heart of scans, flushes and compaction.
//!
//! Each source (a memtable range, a table) yields entries in key order, and several
//! versions of one key newest first. Several sources may hold the same key.
//! [`MergeIter`] interleaves them into one run in the same order, every version kept,
//! using a binary heap of the sources' current heads: O(log s) per entry for s sources.
//! Compaction then decides which versions to keep (`retain.rs`); a scan asks
//! [`MergeIter::next_visible`] for each key's newest version at its sequence number.
//!
//! Walking backwards (a reverse scan) the sources yield keys in descending order and
//! the heap's top is the largest key; a key's versions are gathered the same way.
//!
//! An error from any source is yielded once and ends the merge: a scan or compaction
//! never silently skips data it could not read.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::error::Result;
use crate::types::{Entry, SeqNo};

/// A sorted source of entries.
pub(crate) type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// Which way the sources (and the merge) walk the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Ascending keys, each key's versions newest first.
    Forward,
    /// Descending keys.
    Backward,
}

/// One source's current head in the heap. Ordered so the heap's top is the next key in
/// the walk's direction and, among equal keys, the newest version.
struct Head {
    entry: Entry,
    source: usize,
    backward: bool,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: forwards the smallest key is the greatest head.
        let keys = self.entry.key.cmp(&other.entry.key);
        let keys = if self.backward { keys } else { keys.reverse() };
        keys.then(self.entry.seq.cmp(&other.entry.seq))
    }
}

/// Yields every version of every key across its sources, in the walk's order.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    backward: bool,
    pending_error: Option<crate::error::Error>,
    started: bool,
    done: bool,
}

impl MergeIter {
    /// Merges forward `sources`; the order of `sources` does not matter (seq decides).
    pub(crate) fn new(sources: Vec<Source>) -> MergeIter {
        MergeIter::with_direction(sources, Direction::Forward)
    }

    /// Merges sources that all walk in `direction`.
    pub(crate) fn with_direction(sources: Vec<Source>, direction: Direction) -> MergeIter {
        MergeIter {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            backward: direction == Direction::Backward,
            pending_error: None,
            started: false,
            done: false,
        }
    }

    /// Pulls the next entry of `source` into the heap.
    fn advance(&mut self, source: usize) {
        match self.sources[source].next() {
            Some(Ok(entry)) => self.heap.push(Head {
                entry,
                source,
                backward: self.backward,
            }),
            Some(Err(e)) if self.pending_error.is_none() => self.pending_error = Some(e),
            Some(Err(_)) => {}
            None => {}
        }
    }

    fn start(&mut self) {
        if !self.started {
            self.started = true;
            for source in 0..self.sources.len() {
                self.advance(source);
            }
        }
    }

    /// The error a source reported, ending the merge.
    fn take_error(&mut self) -> Option<Result<Entry>> {
        let e = self.pending_error.take()?;
        self.done = true;
        Some(Err(e))
    }

    /// The next key's newest version with a sequence number at most `read_seq`
    /// (tombstones included); keys with no such version are passed over.
    pub(crate) fn next_visible(&mut self, read_seq: SeqNo) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        self.start();
        loop {
            if let Some(e) = self.take_error() {
                return Some(e);
            }
            let Some(top) = self.heap.pop() else {
                self.done = true;
                return None;
            };
            self.advance(top.source);
            let key = top.entry.key.clone();
            let mut best = Some(top.entry).filter(|e| e.seq <= read_seq);
            // Every other version of the same key, from this source or others.
            while self.heap.peek().is_some_and(|next| next.entry.key == key) {
                let Some(head) = self.heap.pop() else { break };
                self.advance(head.source);
                let candidate = head.entry;
                if candidate.seq <= read_seq && best.as_ref().is_none_or(|b| candidate.seq > b.seq)
                {
                    best = Some(candidate);
                }
            }
            if let Some(e) = self.take_error() {
                return Some(e);
            }
            if let Some(entry) = best {
                return Some(Ok(entry));
            }
        }
    }
}

impl Iterator for MergeIter {
    type Item = Result<Entry>;

    /// The next version in the merged order.
    fn next(&mut self) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        self.start();
        if let Some(e) = self.take_error() {
            return Some(e);
        }
        let Some(top) = self.heap.pop() else {
            self.done = true;
            return None;
        };
        self.advance(top.source);
        if let Some(e) = self.take_error() {
            return Some(e);
        }
        Some(Ok(top.entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ValueKind;
    use bytes::Bytes;

    fn entry(key: &str, seq: u64) -> Entry {
        Entry {
            key: Bytes::copy_from_slice(key.as_bytes()),
            seq,
            kind: ValueKind::Put,
            value: Bytes::from(format!("{key}@{seq}")),
        }
    }

    fn source(entries: Vec<Entry>) -> Source {
        Box::new(entries.into_iter().map(Ok))
    }

    fn shown(entries: &[Entry]) -> Vec<(String, u64)> {
        entries
            .iter()
            .map(|e| (String::from_utf8(e.key.to_vec()).unwrap(), e.seq))
            .collect()
    }

    fn want(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
        pairs.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    fn sources() -> Vec<Source> {
        vec![
            source(vec![entry("a", 1), entry("c", 5), entry("e", 2)]),
            source(vec![entry("a", 7), entry("b", 3), entry("e", 1)]),
            source(vec![entry("c", 4), entry("d", 9)]),
            source(vec![entry("a", 8), entry("a", 6)]), // two versions in one source
        ]
    }

    #[test]
    fn every_version_comes_out_in_key_order_newest_first() {
        let merged: Vec<Entry> = MergeIter::new(sources()).collect::<Result<_>>().unwrap();
        let expected = [
            ("a", 8),
            ("a", 7),
            ("a", 6),
            ("a", 1),
            ("b", 3),
            ("c", 5),
            ("c", 4),
            ("d", 9),
            ("e", 2),
            ("e", 1),
        ];
        assert_eq!(shown(&merged), want(&expected));
    }

    #[test]
    fn visible_versions_are_the_newest_at_the_read_sequence_number() {
        let at = |seq| {
            let mut m = MergeIter::new(sources());
            let got: Vec<Entry> = std::iter::from_fn(|| m.next_visible(seq))
                .collect::<Result<_>>()
                .unwrap();
            shown(&got)
        };
        let latest = [("a", 8), ("b", 3), ("c", 5), ("d", 9), ("e", 2)];
        assert_eq!(at(u64::MAX), want(&latest));
        assert_eq!(at(6), want(&[("a", 6), ("b", 3), ("c", 5), ("e", 2)]));
        assert_eq!(at(1), want(&[("a", 1), ("e", 1)]));
        assert_eq!(at(0), want(&[]));
    }

    #[test]
    fn backward_merge_walks_keys_down() {
        let rev = |v: Vec<Entry>| -> Source { Box::new(v.into_iter().rev().map(Ok)) };
        let mut m = MergeIter::with_direction(
            vec![
                rev(vec![entry("a", 1), entry("c", 5), entry("e", 2)]),
                rev(vec![entry("a", 7), entry("b", 3), entry("e", 1)]),
                rev(vec![entry("a", 8), entry("a", 6)]),
            ],
            Direction::Backward,
        );
        let got: Vec<Entry> = std::iter::from_fn(|| m.next_visible(6))
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(shown(&got), want(&[("e", 2), ("c", 5), ("b", 3), ("a", 6)]));
    }

    #[test]
    fn an_error_ends_the_merge() {
        let failing = || -> Source {
            Box::new(
                vec![
                    Ok(entry("a", 1)),
                    Err(crate::Error::InvalidArgument("boom".into())),
                ]
                .into_iter(),
            )
        };
        let items: Vec<Result<Entry>> =
            MergeIter::new(vec![failing(), source(vec![entry("b", 2)])]).collect();
        assert!(items.last().unwrap().is_err());
        let mut m = MergeIter::new(vec![failing(), source(vec![entry("b", 2)])]);
        let items: Vec<Result<Entry>> = std::iter::from_fn(|| m.next_visible(9)).collect();
        assert!(items.last().unwrap().is_err());
        assert_eq!(items.iter().filter(|r| r.is_err()).count(), 1);
    }
}
