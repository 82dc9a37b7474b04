//! Merging sorted runs into one: the heart of both `scan` and compaction.
//!
//! Each source (a memtable snapshot, a table) yields entries in strictly increasing
//! key order, one version per key. Several sources may hold the same key; the version
//! with the highest sequence number is the live one and the rest are shadowed.
//! [`MergeIter`] yields each key once, with its newest version, in key order, using a
//! binary heap of the sources' current heads: O(log s) per entry for s sources.
//!
//! An error from any source is yielded once and ends the merge: a scan or compaction
//! never silently skips data it could not read.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::error::Result;
use crate::types::Entry;

/// A sorted source of entries.
pub(crate) type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// One source's current head in the heap. Ordered so the heap's top is the smallest
/// key and, among equal keys, the newest version.
struct Head {
    entry: Entry,
    source: usize,
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
        // BinaryHeap is a max-heap: reverse the key order, keep the seq order.
        other
            .entry
            .key
            .cmp(&self.entry.key)
            .then(self.entry.seq.cmp(&other.entry.seq))
    }
}

/// Yields the newest version of every key across its sources, in key order.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    pending_error: Option<crate::error::Error>,
    started: bool,
    done: bool,
}

impl MergeIter {
    /// Merges `sources`; the order of `sources` does not matter (seq decides).
    pub(crate) fn new(sources: Vec<Source>) -> MergeIter {
        MergeIter {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            pending_error: None,
            started: false,
            done: false,
        }
    }

    /// Pulls the next entry of `source` into the heap.
    fn advance(&mut self, source: usize) {
        match self.sources[source].next() {
            Some(Ok(entry)) => self.heap.push(Head { entry, source }),
            Some(Err(e)) if self.pending_error.is_none() => self.pending_error = Some(e),
            Some(Err(_)) => {}
            None => {}
        }
    }
}

impl Iterator for MergeIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            for source in 0..self.sources.len() {
                self.advance(source);
            }
        }
        if let Some(e) = self.pending_error.take() {
            self.done = true;
            return Some(Err(e));
        }
        let Some(top) = self.heap.pop() else {
            self.done = true;
            return None;
        };
        self.advance(top.source);
        // Drop the older versions of the same key that other sources hold.
        while let Some(next) = self.heap.peek() {
            if next.entry.key != top.entry.key {
                break;
            }
            let source = next.source;
            self.heap.pop();
            self.advance(source);
        }
        if let Some(e) = self.pending_error.take() {
            self.done = true;
            return Some(Err(e));
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

    #[test]
    fn newest_version_wins_and_keys_come_out_once_in_order() {
        let merged: Vec<Entry> = MergeIter::new(vec![
            source(vec![entry("a", 1), entry("c", 5), entry("e", 2)]),
            source(vec![entry("a", 7), entry("b", 3), entry("e", 1)]),
            source(vec![entry("c", 4), entry("d", 9)]),
        ])
        .collect::<Result<_>>()
        .unwrap();
        let got: Vec<(String, u64)> = merged
            .iter()
            .map(|e| (String::from_utf8(e.key.to_vec()).unwrap(), e.seq))
            .collect();
        let want = [("a", 7), ("b", 3), ("c", 5), ("d", 9), ("e", 2)];
        assert_eq!(
            got,
            want.iter()
                .map(|(k, s)| (k.to_string(), *s))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_error_ends_the_merge() {
        let failing: Source = Box::new(
            vec![
                Ok(entry("a", 1)),
                Err(crate::Error::InvalidArgument("boom".into())),
            ]
            .into_iter(),
        );
        let items: Vec<Result<Entry>> =
            MergeIter::new(vec![failing, source(vec![entry("b", 2)])]).collect();
        assert!(items.iter().any(|r| r.is_err()));
        assert!(items.last().unwrap().is_err());
    }
}
