//! A range tombstone deletes every key in `[start, end)` as of one sequence number;
//! this module keeps a set of them in the form reads need: *fragmented*.
//!
//! `delete_range("b", "f")` at seq 9 and `delete_range("d", "h")` at seq 12 overlap.
//! Cut at every start and end, they become pieces that never overlap, each holding
//! the sequence numbers of the tombstones over it, newest first (RocksDB's
//! fragmented range tombstones):
//!
//! ```text
//!   tombstones          b------------f            seq 9
//!                             d-------------h     seq 12
//!   fragments           [b,d) {9}  [d,f) {12,9}  [f,h) {12}
//! ```
//!
//! A version of key `k` with sequence number `v` is hidden from a reader at `S` when a
//! tombstone with `seq` in `(v, S]` covers `k`. With fragments, that is one binary
//! search for the piece holding `k` and one look down its (short) list for the newest
//! `seq <= S`: [`Fragments::newest_covering`].
//!
//! The memtable keeps its tombstones here (rebuilt on each `delete_range`, which is
//! rare), a table stores its fragments in its range tombstone block (format version 7,
//! drawn below), and a scan merges every source's fragments into one set.
//!
//! # The range tombstone block
//!
//! All integers are LEB128 varints; the block is followed by the usual 5-byte trailer
//! (type 0, CRC-32), like every block.
//!
//! ```text
//! +-----------+------------+------------+
//! | count     | fragment 0 | ... n-1    |
//! +-----------+------------+------------+
//! fragment: | start_len | start | end_len | end | seqs_len | seq 0 | ... | seq m-1 |
//!                                                            newest first
//! ```
//!
//! A decoder refuses: a count the bytes cannot hold, a length past the end, a
//! fragment whose start is not below its end, fragments out of order or overlapping,
//! an empty or not strictly decreasing list of sequence numbers, a number past
//! `MAX_SEQ`, and any byte after the last fragment.

use bytes::Bytes;

use crate::coding::{get_varint, get_varint_usize, put_varint};
use crate::types::{SeqNo, MAX_SEQ};

/// The largest key a range ending (exclusively) at `end` can hold, as a table's
/// inclusive `largest` records it: `end` without its last byte when that byte is 0
/// (the key just below `k\0` is `k`), else `end` itself, which covers one key too many
/// but never one too few.
pub fn last_covered(end: &Bytes) -> Bytes {
    match end.split_last() {
        Some((0, head)) => end.slice(..head.len()),
        _ => end.clone(),
    }
}

/// The first key after `key`: `key` followed by a zero byte.
pub fn successor(key: &[u8]) -> Bytes {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    Bytes::from(next)
}

/// One `delete_range` as written: `[start, end)` deleted at `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// The first key deleted.
    pub start: Bytes,
    /// The first key past the range (not deleted).
    pub end: Bytes,
    /// The write's sequence number.
    pub seq: SeqNo,
}

/// A piece of key space and the tombstones over all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// The piece's first key.
    pub start: Bytes,
    /// The first key past the piece.
    pub end: Bytes,
    /// The sequence numbers of the tombstones covering the piece, newest first,
    /// distinct, never empty.
    pub seqs: Vec<SeqNo>,
}

/// A set of range tombstones as sorted, non-overlapping fragments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fragments {
    frags: Vec<Fragment>,
}

impl Fragments {
    /// Fragments `tombstones` (any order, overlapping or not; empty ranges ignored).
    pub fn new(tombstones: impl IntoIterator<Item = RangeTombstone>) -> Fragments {
        let mut tombs: Vec<RangeTombstone> =
            tombstones.into_iter().filter(|t| t.start < t.end).collect();
        if tombs.is_empty() {
            return Fragments::default();
        }
        tombs.sort_by(|a, b| a.start.cmp(&b.start));
        let mut bounds: Vec<Bytes> = tombs
            .iter()
            .flat_map(|t| [t.start.clone(), t.end.clone()])
            .collect();
        bounds.sort();
        bounds.dedup();
        let mut frags: Vec<Fragment> = Vec::new();
        let mut active: Vec<(Bytes, SeqNo)> = Vec::new();
        let mut next = 0;
        for w in bounds.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            while let Some(t) = tombs.get(next).filter(|t| t.start <= *a) {
                active.push((t.end.clone(), t.seq));
                next += 1;
            }
            // No bound lies between `a` and `b`: a tombstone still open past `a`
            // covers all of `[a, b)`.
            active.retain(|(end, _)| end > a);
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<SeqNo> = active.iter().map(|(_, s)| *s).collect();
            seqs.sort_unstable_by_key(|&s| std::cmp::Reverse(s));
            seqs.dedup();
            match frags.last_mut() {
                // Neighbours with the same tombstones are one piece.
                Some(prev) if prev.end == *a && prev.seqs == seqs => prev.end = b.clone(),
                _ => frags.push(Fragment {
                    start: a.clone(),
                    end: b.clone(),
                    seqs,
                }),
            }
        }
        Fragments { frags }
    }

    /// The tombstones of several fragment sets as one set.
    pub fn merge<'a>(sets: impl IntoIterator<Item = &'a Fragments>) -> Fragments {
        Fragments::new(sets.into_iter().flat_map(Fragments::tombstones))
    }

    /// Every (fragment, seq) pair as a tombstone.
    pub fn tombstones(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.frags.iter().flat_map(|f| {
            f.seqs.iter().map(move |&seq| RangeTombstone {
                start: f.start.clone(),
                end: f.end.clone(),
                seq,
            })
        })
    }

    /// The fragments in key order.
    pub fn fragments(&self) -> &[Fragment] {
        &self.frags
    }

    /// Whether the set holds no tombstone.
    pub fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The number of (fragment, seq) pairs: what the tombstone block stores.
    pub fn count(&self) -> u64 {
        self.frags.iter().map(|f| f.seqs.len() as u64).sum()
    }

    /// The newest sequence number of any tombstone.
    pub fn max_seq(&self) -> SeqNo {
        self.frags
            .iter()
            .filter_map(|f| f.seqs.first())
            .copied()
            .max()
            .unwrap_or(0)
    }

    /// The first key covered and the first key past the last covered one.
    pub fn extent(&self) -> Option<(&Bytes, &Bytes)> {
        Some((&self.frags.first()?.start, &self.frags.last()?.end))
    }

    /// The newest tombstone over `key` that a reader at `read_seq` sees, if any: one
    /// binary search, then the piece's list (newest first) down to `read_seq`.
    #[inline]
    pub fn newest_covering(&self, key: &[u8], read_seq: SeqNo) -> Option<SeqNo> {
        // The first piece whose end lies past the key; it covers the key if it starts
        // at or before it.
        let i = self.frags.partition_point(|f| &f.end[..] <= key);
        let f = self.frags.get(i).filter(|f| &f.start[..] <= key)?;
        f.seqs.iter().copied().find(|&s| s <= read_seq)
    }

    /// Every sequence number of a tombstone over `key`, newest first (empty if none).
    pub fn covering(&self, key: &[u8]) -> &[SeqNo] {
        let i = self.frags.partition_point(|f| &f.end[..] <= key);
        match self.frags.get(i) {
            Some(f) if &f.start[..] <= key => &f.seqs,
            _ => &[],
        }
    }

    /// Whether a version of `key` at `seq` is hidden from a reader at `read_seq`.
    #[inline]
    pub fn hides(&self, key: &[u8], seq: SeqNo, read_seq: SeqNo) -> bool {
        self.newest_covering(key, read_seq).is_some_and(|t| t > seq)
    }

    /// The pieces inside `[lo, hi)` (`None`: unbounded on that side), cut at the bounds.
    pub fn clip(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Fragments {
        let frags = self
            .frags
            .iter()
            .filter_map(|f| {
                let start = match lo {
                    Some(lo) if &f.start[..] < lo => Bytes::copy_from_slice(lo),
                    _ => f.start.clone(),
                };
                let end = match hi {
                    Some(hi) if &f.end[..] > hi => Bytes::copy_from_slice(hi),
                    _ => f.end.clone(),
                };
                (start < end).then(|| Fragment {
                    start,
                    end,
                    seqs: f.seqs.clone(),
                })
            })
            .collect();
        Fragments { frags }
    }

    /// The set with only the sequence numbers `keep` accepts (pieces left with none
    /// go).
    pub fn retain_seqs(&self, mut keep: impl FnMut(SeqNo) -> bool) -> Fragments {
        let frags = self
            .frags
            .iter()
            .filter_map(|f| {
                let seqs: Vec<SeqNo> = f.seqs.iter().copied().filter(|&s| keep(s)).collect();
                (!seqs.is_empty()).then(|| Fragment {
                    start: f.start.clone(),
                    end: f.end.clone(),
                    seqs,
                })
            })
            .collect();
        Fragments { frags }
    }

    /// The block's bytes (without trailer); see the module doc.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.frags.len() as u64);
        for f in &self.frags {
            for key in [&f.start, &f.end] {
                put_varint(&mut out, key.len() as u64);
                out.extend_from_slice(key);
            }
            put_varint(&mut out, f.seqs.len() as u64);
            for &s in &f.seqs {
                put_varint(&mut out, s);
            }
        }
        out
    }

    /// Decodes and validates a block (without trailer); the reason on any fault.
    pub fn decode(buf: &[u8]) -> Result<Fragments, String> {
        let mut pos = 0;
        let count = get_varint_usize(buf, &mut pos).ok_or("bad fragment count")?;
        // A fragment takes at least 5 bytes (two one-byte keys with their lengths and
        // one seq count): check before allocating.
        if count > buf.len() / 5 {
            return Err(format!(
                "{count} fragments cannot fit in {} bytes",
                buf.len()
            ));
        }
        let mut frags: Vec<Fragment> = Vec::with_capacity(count);
        for i in 0..count {
            let mut key = |what: &str| -> Result<Bytes, String> {
                let len = get_varint_usize(buf, &mut pos)
                    .ok_or_else(|| format!("fragment {i}: bad {what} length"))?;
                let bytes = pos
                    .checked_add(len)
                    .and_then(|end| buf.get(pos..end))
                    .ok_or_else(|| format!("fragment {i}: {what} runs past the end"))?;
                pos += len;
                Ok(Bytes::copy_from_slice(bytes))
            };
            let start = key("start")?;
            let end = key("end")?;
            if start >= end {
                return Err(format!("fragment {i}: start is not below end"));
            }
            if frags.last().is_some_and(|prev| prev.end > start) {
                return Err(format!("fragment {i}: out of order or overlapping"));
            }
            let n = get_varint_usize(buf, &mut pos)
                .ok_or_else(|| format!("fragment {i}: bad sequence count"))?;
            if n == 0 || n > buf.len() - pos {
                return Err(format!("fragment {i}: {n} sequence numbers"));
            }
            let mut seqs = Vec::with_capacity(n);
            for _ in 0..n {
                let s = get_varint(buf, &mut pos)
                    .ok_or_else(|| format!("fragment {i}: bad sequence number"))?;
                if s > MAX_SEQ || seqs.last().is_some_and(|&prev| prev <= s) {
                    return Err(format!(
                        "fragment {i}: sequence numbers not newest first or past the limit"
                    ));
                }
                seqs.push(s);
            }
            frags.push(Fragment { start, end, seqs });
        }
        if pos != buf.len() {
            return Err(format!(
                "{} unexpected bytes after the fragments",
                buf.len() - pos
            ));
        }
        Ok(Fragments { frags })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(start: &str, end: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: Bytes::copy_from_slice(start.as_bytes()),
            end: Bytes::copy_from_slice(end.as_bytes()),
            seq,
        }
    }

    #[test]
    fn overlapping_tombstones_become_disjoint_pieces_newest_first() {
        let f = Fragments::new([t("b", "f", 9), t("d", "h", 12)]);
        let got: Vec<(&[u8], &[u8], Vec<SeqNo>)> = f
            .fragments()
            .iter()
            .map(|f| (&f.start[..], &f.end[..], f.seqs.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (&b"b"[..], &b"d"[..], vec![9]),
                (b"d", b"f", vec![12, 9]),
                (b"f", b"h", vec![12])
            ]
        );
        assert_eq!(f.newest_covering(b"e", 100), Some(12));
        assert_eq!(f.newest_covering(b"e", 11), Some(9));
        assert_eq!(f.newest_covering(b"e", 8), None);
        assert_eq!(f.newest_covering(b"h", 100), None, "end is exclusive");
        assert_eq!(f.newest_covering(b"a", 100), None);
        assert!(f.hides(b"g", 11, 12));
        assert!(!f.hides(b"g", 12, 12));
    }

    #[test]
    fn a_damaged_block_is_refused() {
        let f = Fragments::new([t("b", "f", 9), t("d", "h", 12)]);
        let bytes = f.encode();
        assert_eq!(Fragments::decode(&bytes).unwrap(), f);
        for cut in 0..bytes.len() {
            assert!(Fragments::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Fragments::decode(&longer).is_err());
        // Out of order: the second fragment's start before the first one's end.
        let mut swapped = Vec::new();
        put_varint(&mut swapped, 2);
        for (s, e) in [("c", "e"), ("d", "f")] {
            for k in [s, e] {
                put_varint(&mut swapped, 1);
                swapped.extend_from_slice(k.as_bytes());
            }
            put_varint(&mut swapped, 1);
            put_varint(&mut swapped, 3);
        }
        assert!(Fragments::decode(&swapped).is_err());
    }

    proptest! {
        /// Against a plain list: a key is covered at `read_seq` by the newest tombstone
        /// whose range holds it, whatever the fragmentation, clipping and codec did.
        #[test]
        fn fragments_answer_as_the_plain_list(
            raw in proptest::collection::vec((0u8..20, 0u8..20, 1u64..50), 0..12),
            read_seq in 0u64..60,
            lo in 0u8..20,
        ) {
            let tombs: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(a, b, s)| RangeTombstone {
                    start: Bytes::from(vec![a]),
                    end: Bytes::from(vec![b]),
                    seq: s,
                })
                .collect();
            let f = Fragments::new(tombs.clone());
            let decoded = Fragments::decode(&f.encode()).unwrap();
            prop_assert_eq!(&decoded, &f);
            let clipped = f.clip(Some(&[lo]), None);
            for k in 0u8..21 {
                let want = tombs
                    .iter()
                    .filter(|t| t.start[0] <= k && k < t.end[0] && t.seq <= read_seq)
                    .map(|t| t.seq)
                    .max();
                prop_assert_eq!(f.newest_covering(&[k], read_seq), want);
                let want_clipped = if k >= lo { want } else { None };
                prop_assert_eq!(clipped.newest_covering(&[k], read_seq), want_clipped);
            }
        }
    }
}
