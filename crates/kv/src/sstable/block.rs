//! A data block: the unit a table reads from disk — a few KiB of sorted entries.
//!
//! Keys are prefix-compressed: each entry stores only the bytes that differ from the
//! previous key. Every `restart_interval` entries (16 by default) a *restart point*
//! stores its key whole; the offsets of the restart points, listed at the end of the
//! block, let a lookup binary-search the restart keys and then decode at most one run
//! of entries.
//!
//! ```text
//!  +---------+---------+-----+-------------+-------------+-----+--------------+
//!  | entry 0 | entry 1 | ... | restart[0]  | restart[1]  | ... | num_restarts |
//!  |         |         |     | u32 LE      | u32 LE      |     | u32 LE       |
//!  +---------+---------+-----+-------------+-------------+-----+--------------+
//!  restart[i] = offset of an entry whose key is stored whole (restart[0] = 0)
//!
//!  entry:
//!  +--------------+----------------+-----------------+-----------+--------------+--------+-------+
//!  | shared       | unshared       | value_len       | key delta | seq          | kind   | value |
//!  | varint       | varint         | varint          | unshared  | varint (u64) | u8     |       |
//!  |              |                |                 | bytes     |              | 0 = del|       |
//!  |              |                |                 |           |              | 1 = put|       |
//!  +--------------+----------------+-----------------+-----------+--------------+--------+-------+
//!  key = previous key[..shared] ++ key delta      (shared = 0 at a restart point)
//! ```
//!
//! Several versions of one key (format version 2) are neighbours, newest first: each
//! after the first shares the whole key (`shared` = key length, no delta), so an older
//! version costs its sequence number, kind and value plus three bytes.
//!
//! Decoding validates before it trusts: the restart count must fit the block, every
//! restart offset must lie inside the entries and increase, an entry's `shared` may not
//! exceed the previous key's length, and every length must stay inside the block.
//! Nothing is allocated from a length read off disk; malformed bytes give a
//! [`Malformed`] reason, never a panic.

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use super::Malformed;
use crate::coding::{get_varint, get_varint_usize, u32_at};
use crate::keycmp::{self, common_prefix};
use crate::prefetch::prefetch_lines;
use crate::types::{Entry, SeqNo, ValueKind};

/// A decoded view of one data block whose restart array has been validated.
#[derive(Debug, Clone)]
pub struct Block {
    /// The block's contents (possibly followed by bytes that are not part of it).
    data: Bytes,
    /// Where the entries end and the restart array begins.
    entries_end: usize,
    num_restarts: usize,
}

/// One entry's fields as offsets into the block.
#[derive(Debug)]
struct RawEntry {
    shared: usize,
    delta: Range<usize>,
    seq: SeqNo,
    kind: ValueKind,
    value: Range<usize>,
    next: usize,
}

/// Where a lookup as of a sequence number ended in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The newest version at or below the sequence number.
    Found(Found),
    /// The block holds no version of the key at or below it, and no later block can.
    Absent,
    /// As `Absent`, but the block held versions of the key, all newer than the
    /// sequence number: the table holds the key, just not as of that number (a
    /// snapshot's read; the filter's "maybe" was true).
    OnlyNewer,
    /// The block ends on versions of the key that are all newer than the sequence
    /// number: older ones may continue in the next block.
    Continues,
}

/// What a point lookup found in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Sequence number of the entry.
    pub seq: SeqNo,
    /// Put or tombstone.
    pub kind: ValueKind,
    /// The value's position in the block.
    pub value: Range<usize>,
}

impl Block {
    /// Heap bytes the block keeps alive (what the block cache charges for it).
    pub fn memory_bytes(&self) -> usize {
        self.data.len()
    }

    /// Validates the block formed by the first `len` bytes of `data`.
    pub fn new(data: Bytes, len: usize) -> Result<Block, Malformed> {
        let Some(content) = data.get(..len) else {
            return Err(Malformed(format!(
                "block length {len} exceeds the {} bytes read",
                data.len()
            )));
        };
        let Some(count) = len.checked_sub(4).and_then(|at| u32_at(content, at)) else {
            return Err(Malformed(format!(
                "{len} bytes cannot hold a restart count"
            )));
        };
        // Check the count against the length before using it for anything.
        let num_restarts = count as usize;
        let max_restarts = (len - 4) / 4;
        if num_restarts == 0 || num_restarts > max_restarts {
            return Err(Malformed(format!(
                "restart count {count} does not fit a {len}-byte block"
            )));
        }
        let entries_end = len - 4 - 4 * num_restarts;
        let mut previous = None;
        for i in 0..num_restarts {
            let offset = u32_at(content, entries_end + 4 * i).unwrap_or(u32::MAX) as usize;
            let in_order = match previous {
                None => offset == 0,
                Some(p) => offset > p,
            };
            if !in_order || offset >= entries_end {
                return Err(Malformed(format!(
                    "restart point {i} at offset {offset} is out of order or outside \
                     the {entries_end} bytes of entries"
                )));
            }
            previous = Some(offset);
        }
        Ok(Block {
            data,
            entries_end,
            num_restarts,
        })
    }

    /// The bytes of the block's entries region (all positions below are relative to it).
    #[inline]
    fn entries(&self) -> &[u8] {
        &self.data[..self.entries_end]
    }

    /// Offset of restart point `i` (validated in `new`).
    #[inline]
    fn restart(&self, i: usize) -> usize {
        u32_at(&self.data, self.entries_end + 4 * i).unwrap_or(0) as usize
    }

    /// Decodes the entry at `pos`, given the length of the key before it.
    #[inline]
    fn decode_entry(&self, pos: usize, prev_key_len: usize) -> Result<RawEntry, Malformed> {
        let buf = self.entries();
        let bad = |what: &str| Malformed(format!("entry at offset {pos}: {what}"));
        let mut p = pos;
        let shared = get_varint_usize(buf, &mut p).ok_or_else(|| bad("bad shared length"))?;
        let unshared = get_varint_usize(buf, &mut p).ok_or_else(|| bad("bad unshared length"))?;
        let value_len = get_varint_usize(buf, &mut p).ok_or_else(|| bad("bad value length"))?;
        if shared > prev_key_len {
            return Err(bad(&format!(
                "shares {shared} bytes with a previous key of {prev_key_len}"
            )));
        }
        let delta_end = p
            .checked_add(unshared)
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| bad("key runs past the end of the block"))?;
        let delta = p..delta_end;
        p = delta_end;
        let seq = get_varint(buf, &mut p).ok_or_else(|| bad("bad sequence number"))?;
        let kind_byte = *buf.get(p).ok_or_else(|| bad("missing kind byte"))?;
        let kind = ValueKind::from_u8(kind_byte)
            .ok_or_else(|| bad(&format!("unknown kind {kind_byte}")))?;
        p += 1;
        let value_end = p
            .checked_add(value_len)
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| bad("value runs past the end of the block"))?;
        Ok(RawEntry {
            shared,
            delta,
            seq,
            kind,
            value: p..value_end,
            next: value_end,
        })
    }

    /// The key stored whole at restart point `i`.
    fn restart_key(&self, i: usize) -> Result<&[u8], Malformed> {
        let e = self.decode_entry(self.restart(i), 0)?;
        Ok(&self.entries()[e.delta])
    }

    /// The last restart point whose key is below `target` (or 0): where a scan for the
    /// first key at or above `target` starts.
    fn restart_before(&self, target: &[u8]) -> Result<usize, Malformed> {
        let (mut lo, mut hi) = (0, self.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if keycmp::less(self.restart_key(mid)?, target) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(lo)
    }

    /// Finds the newest version of `target` in this block ([`Block::get_at`] at the
    /// newest sequence number: the first entry for the key is the answer).
    pub fn get(&self, target: &[u8]) -> Result<Option<Found>, Malformed> {
        Ok(match self.get_at(target, SeqNo::MAX)? {
            Lookup::Found(found) => Some(found),
            Lookup::Absent | Lookup::OnlyNewer | Lookup::Continues => None,
        })
    }

    /// Finds the newest version of `target` with a sequence number at most `read_seq`
    /// (versions are stored newest first): a binary search over the restart keys, then
    /// a scan of one run, then a walk down the key's versions.
    ///
    /// The scan never rebuilds a key: it tracks how many leading bytes the current key
    /// shares with `target` (`matched`) and compares only the new bytes of each entry.
    /// An entry sharing more than `matched` bytes with its predecessor orders against
    /// `target` exactly as the predecessor did.
    pub fn get_at(&self, target: &[u8], read_seq: SeqNo) -> Result<Lookup, Malformed> {
        // Asked again on a hit, though the cache asked when it cloned the block
        // (`block_cache.rs`): without this second ask a cached get measured slower
        // (docs/notes/2026-12-cached-get.md); a block just read, or with no cache, was never asked for.
        self.prefetch();
        let pos = self.restart(self.restart_before(target)?);
        self.scan_from(pos, target, read_seq)
    }

    /// Where a search for `target` starts: the offset of the restart point at or
    /// before it.
    #[inline]
    pub(crate) fn run_of(&self, target: &[u8]) -> Result<usize, Malformed> {
        Ok(self.restart(self.restart_before(target)?))
    }

    /// [`get_at`](Self::get_at) from `pos`, a restart point at or before `target`
    /// ([`run_of`](Self::run_of)), asking for no line: a batch has asked for the lines
    /// it reads stage by stage ([`prefetch_restarts`](Self::prefetch_restarts),
    /// [`prefetch_run`](Self::prefetch_run)).
    pub(crate) fn scan_from(
        &self,
        mut pos: usize,
        target: &[u8],
        read_seq: SeqNo,
    ) -> Result<Lookup, Malformed> {
        let buf = self.entries();
        let (mut key_len, mut matched, mut order) = (0, 0, Ordering::Less);
        let mut newer = false;
        while pos < self.entries_end {
            let e = self.decode_entry(pos, key_len)?;
            let delta = &buf[e.delta.clone()];
            if e.shared <= matched {
                // key = target[..shared] ++ delta: compare the rest.
                let rest = &target[e.shared..];
                matched = e.shared + common_prefix(delta, rest);
                order = keycmp::compare(delta, rest);
            }
            key_len = e.shared + delta.len();
            match order {
                Ordering::Less => pos = e.next,
                Ordering::Equal if e.seq > read_seq => {
                    newer = true;
                    pos = e.next;
                }
                Ordering::Equal => {
                    return Ok(Lookup::Found(Found {
                        seq: e.seq,
                        kind: e.kind,
                        value: e.value,
                    }))
                }
                Ordering::Greater if newer => return Ok(Lookup::OnlyNewer),
                Ordering::Greater => return Ok(Lookup::Absent),
            }
        }
        Ok(if order == Ordering::Equal {
            Lookup::Continues
        } else {
            Lookup::Absent
        })
    }

    /// Starts loading every cache line of the block, last line (the restart array)
    /// first.
    ///
    /// A point lookup's block is usually not in the CPU's caches (the block cache holds
    /// far more than they do), and its search reads lines one after another: the
    /// restart array at the end, a restart key, then a run of entries — each read
    /// waiting on the one before. Asking for all of the block's lines at once lets their
    /// loads overlap. For a 4 KiB block that is 65 hints, a few nanoseconds; the get it
    /// serves costs microseconds when its lines come one by one. Measured with the flat
    /// shape's 1M keys, every block cached (`examples/point_get.rs`): see
    /// docs/notes/2026-12-cached-get.md.
    #[inline]
    pub(crate) fn prefetch(&self) {
        prefetch_lines(&self.data[..self.entries_end + 4 * self.num_restarts + 4]);
    }

    /// Starts loading the restart array, the first line a search reads. The first of a
    /// batch's stages: a batch asks for the lines of all its blocks one stage at a time
    /// (array, restart keys, then the run each key is in), so the misses of different
    /// blocks overlap while each block's lines stay few — about a third of
    /// [`prefetch`](Self::prefetch)'s 65 for a 4 KiB block of 100-byte values.
    #[inline]
    pub(crate) fn prefetch_restart_array(&self) {
        let end = self.entries_end + 4 * self.num_restarts + 4;
        prefetch_lines(&self.data[self.entries_end..end]);
    }

    /// Starts loading the first line of every restart key (reads the restart array).
    #[inline]
    pub(crate) fn prefetch_restarts(&self) {
        for i in 0..self.num_restarts {
            let pos = self.restart(i);
            prefetch_lines(&self.data[pos..pos + 1]);
        }
    }

    /// Starts loading the run of entries from `pos` (a restart point, [`run_of`]) to
    /// the next restart point: the lines a search from `pos` may read.
    ///
    /// [`run_of`]: Self::run_of
    #[inline]
    pub(crate) fn prefetch_run(&self, pos: usize) {
        let next = (0..self.num_restarts)
            .map(|i| self.restart(i))
            .find(|&r| r > pos)
            .unwrap_or(self.entries_end);
        prefetch_lines(&self.data[pos.min(next)..next]);
    }

    /// The bytes at `range` (from a [`Found`]) without copying.
    pub fn slice(&self, range: Range<usize>) -> Bytes {
        self.data.slice(range)
    }

    /// The bytes at `range` as a slice.
    pub fn bytes(&self, range: Range<usize>) -> &[u8] {
        &self.entries()[range]
    }
}

impl IntoIterator for Block {
    type Item = Result<Entry, Malformed>;
    type IntoIter = BlockIter;

    /// An iterator over the block's entries in order.
    fn into_iter(self) -> BlockIter {
        BlockIter {
            block: self,
            pos: 0,
            next_restart: 0,
            key: Vec::new(),
            seq: 0,
            has_key: false,
            pending: None,
            failed: false,
        }
    }
}

/// Yields a block's entries in key order, checking the order: keys increase, and the
/// versions of one key come newest first (strictly decreasing sequence numbers). Values
/// share the block's buffer; keys are copied (they are rebuilt from prefixes).
#[derive(Debug)]
pub struct BlockIter {
    block: Block,
    pos: usize,
    /// The first restart point at or after `pos`: each must be the start of an entry
    /// that shares nothing (a seek or a get starts decoding there).
    next_restart: usize,
    key: Vec<u8>,
    /// The previously decoded entry's sequence number (for the order check).
    seq: SeqNo,
    /// Whether `key` holds the previously decoded key (for the order check).
    has_key: bool,
    /// An entry decoded by `seek` and not yet returned.
    pending: Option<Entry>,
    failed: bool,
}

impl BlockIter {
    /// Positions the iterator at the first entry whose key is at or after `target`
    /// (strictly after, if `inclusive` is false).
    pub fn seek(&mut self, target: &[u8], inclusive: bool) -> Result<(), Malformed> {
        self.pending = None;
        self.next_restart = self.block.restart_before(target)?;
        self.pos = self.block.restart(self.next_restart);
        self.key.clear();
        self.has_key = false;
        while let Some(entry) = self.decode_next() {
            let entry = entry?;
            let keep = match entry.key[..].cmp(target) {
                Ordering::Less => false,
                Ordering::Equal => inclusive,
                Ordering::Greater => true,
            };
            if keep {
                self.pending = Some(entry);
                break;
            }
        }
        Ok(())
    }

    fn decode_next(&mut self) -> Option<Result<Entry, Malformed>> {
        if self.failed {
            return None;
        }
        let result = if self.pos >= self.block.entries_end {
            // Every restart point lies inside the entries (`Block::new`): one not met
            // on the way is inside an entry.
            if self.next_restart >= self.block.num_restarts {
                return None;
            }
            Err(self.misplaced_restart())
        } else {
            self.decode_at_pos()
        };
        self.failed = result.is_err();
        Some(result)
    }

    fn misplaced_restart(&self) -> Malformed {
        let i = self.next_restart;
        Malformed(format!(
            "restart point {i} at offset {} is not the start of an entry",
            self.block.restart(i)
        ))
    }

    fn decode_at_pos(&mut self) -> Result<Entry, Malformed> {
        // An entry at a restart point is decoded as the first of its run (a previous
        // key of length 0), so one that shares bytes is refused here as a seek or a
        // get starting there would refuse it.
        let restart = (self.next_restart < self.block.num_restarts)
            .then(|| self.block.restart(self.next_restart));
        if restart.is_some_and(|r| r < self.pos) {
            return Err(self.misplaced_restart());
        }
        let at_restart = restart == Some(self.pos);
        let prev_key_len = if at_restart { 0 } else { self.key.len() };
        let e = self.block.decode_entry(self.pos, prev_key_len)?;
        if at_restart {
            self.next_restart += 1;
        }
        let delta = &self.block.entries()[e.delta.clone()];
        // New key = key[..shared] ++ delta, so it is greater iff delta > key[shared..],
        // and the same key (an older version, which must have a lower seq) iff equal.
        if self.has_key {
            let order = delta.cmp(&self.key[e.shared..]);
            if order.is_lt() || (order.is_eq() && e.seq >= self.seq) {
                return Err(Malformed(format!(
                    "entry at offset {}: out of order (key not above the previous one, \
                     or not an older version of it)",
                    self.pos
                )));
            }
        }
        self.seq = e.seq;
        self.key.truncate(e.shared);
        self.key.extend_from_slice(delta);
        self.has_key = true;
        self.pos = e.next;
        Ok(Entry {
            key: Bytes::copy_from_slice(&self.key),
            seq: e.seq,
            kind: e.kind,
            value: self.block.data.slice(e.value),
        })
    }
}

impl Iterator for BlockIter {
    type Item = Result<Entry, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.pending.take() {
            return Some(Ok(entry));
        }
        self.decode_next()
    }
}

#[cfg(test)]
mod tests {
    use super::super::block_builder::BlockBuilder;
    use super::*;
    use proptest::prelude::*;

    fn build(entries: &[(&[u8], &[u8])], restart_interval: usize) -> Bytes {
        let mut b = BlockBuilder::new(restart_interval);
        for (i, (k, v)) in entries.iter().enumerate() {
            let kind = if i % 5 == 4 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            b.add(k, i as u64 * 1000, kind, v);
        }
        Bytes::copy_from_slice(b.finish())
    }

    fn sample() -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..100u32)
            .map(|i| {
                let key = format!("key{:05}", i * 2).into_bytes();
                let value = vec![b'v'; (i % 7) as usize];
                (key, value)
            })
            .collect()
    }

    fn as_refs(v: &[(Vec<u8>, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
        v.iter().map(|(k, v)| (&k[..], &v[..])).collect()
    }

    #[test]
    fn every_key_is_found_and_gaps_are_not_at_any_restart_interval() {
        let entries = sample();
        for interval in [1, 2, 3, 16, 1000] {
            let data = build(&as_refs(&entries), interval);
            let block = Block::new(data.clone(), data.len()).unwrap();
            for (i, (k, v)) in entries.iter().enumerate() {
                let found = block.get(k).unwrap().unwrap();
                assert_eq!(block.bytes(found.value.clone()), &v[..]);
                assert_eq!(found.seq, i as u64 * 1000);
                // Odd numbers fall between keys; a shorter prefix before them.
                let gap = format!("key{:05}", i * 2 + 1).into_bytes();
                assert_eq!(block.get(&gap).unwrap(), None);
                assert_eq!(block.get(&k[..k.len() - 1]).unwrap(), None);
                let mut longer = k.clone();
                longer.push(0);
                assert_eq!(block.get(&longer).unwrap(), None);
            }
            assert_eq!(block.get(b"").unwrap(), None);
            assert_eq!(block.get(b"zzz").unwrap(), None);
            let all: Vec<Entry> = block.into_iter().map(|e| e.unwrap()).collect();
            assert_eq!(all.len(), entries.len());
            for (e, (k, v)) in all.iter().zip(&entries) {
                assert_eq!((&e.key[..], &e.value[..]), (&k[..], &v[..]));
            }
        }
    }

    #[test]
    fn keys_that_are_prefixes_of_each_other_are_told_apart() {
        let keys: Vec<&[u8]> = vec![b"", b"a", b"aa", b"aaa", b"ab", b"b", b"b\0", b"b\xff"];
        let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (*k, *k)).collect();
        for interval in [1, 2, 16] {
            let data = build(&entries, interval);
            let block = Block::new(data.clone(), data.len()).unwrap();
            for k in &keys {
                let found = block.get(k).unwrap().unwrap();
                assert_eq!(block.bytes(found.value), *k);
            }
            for absent in [&b"a\0"[..], b"aab", b"ac", b"c", b"b\0\0"] {
                assert_eq!(block.get(absent).unwrap(), None, "{absent:?}");
            }
        }
    }

    #[test]
    fn seek_positions_at_the_first_key_at_or_after_the_target() {
        let entries = sample();
        let data = build(&as_refs(&entries), 4);
        for (i, (k, _)) in entries.iter().enumerate() {
            let block = Block::new(data.clone(), data.len()).unwrap();
            let mut it = block.into_iter();
            it.seek(k, true).unwrap();
            assert_eq!(it.next().unwrap().unwrap().key, &k[..]);
            let block = Block::new(data.clone(), data.len()).unwrap();
            let mut it = block.into_iter();
            it.seek(k, false).unwrap();
            let rest: Vec<_> = it.map(|e| e.unwrap().key).collect();
            assert_eq!(rest.len(), entries.len() - i - 1);
        }
        let mut it = Block::new(data.clone(), data.len()).unwrap().into_iter();
        it.seek(b"zzz", true).unwrap();
        assert!(it.next().is_none());
    }

    /// The worked example of the format documentation, byte for byte.
    #[test]
    fn the_documented_example_block_is_what_the_builder_writes() {
        let mut b = BlockBuilder::new(16);
        b.add(b"apple", 7, ValueKind::Put, b"red");
        b.add(b"apricot", 9, ValueKind::Put, b"orange");
        let mut want = vec![0x00, 0x05, 0x03];
        want.extend_from_slice(b"apple");
        want.extend_from_slice(&[0x07, 0x01]);
        want.extend_from_slice(b"red");
        want.extend_from_slice(&[0x02, 0x05, 0x06]);
        want.extend_from_slice(b"ricot");
        want.extend_from_slice(&[0x09, 0x01]);
        want.extend_from_slice(b"orange");
        want.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(b.finish(), &want);
    }

    #[test]
    fn a_huge_restart_count_is_refused_before_use() {
        let mut data = build(&[(b"a", b"1")], 16).to_vec();
        let n = data.len();
        data[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = Block::new(Bytes::from(data), n).unwrap_err();
        assert!(err.0.contains("restart count"), "{err}");
    }

    #[test]
    fn short_blocks_and_bad_restarts_are_refused() {
        for len in 0..4 {
            assert!(Block::new(Bytes::from(vec![0; len]), len).is_err());
        }
        assert!(Block::new(Bytes::from(vec![0; 4]), 4).is_err()); // zero restarts
        assert!(Block::new(Bytes::from(vec![0; 4]), 5).is_err()); // len past data
                                                                  // One restart pointing past the entries.
        let mut data = vec![0u8; 3];
        data.extend_from_slice(&7u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        assert!(Block::new(Bytes::from(data.clone()), data.len()).is_err());
    }

    #[test]
    fn a_shared_length_beyond_the_previous_key_is_corruption() {
        // entry: shared=5 unshared=1 value_len=0 'a' seq=0 kind=1; one restart at 0.
        let mut data = vec![5, 1, 0, b'a', 0, 1];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        let block = Block::new(Bytes::from(data.clone()), data.len()).unwrap();
        assert!(block.get(b"a").unwrap_err().0.contains("shares 5 bytes"));
        let mut it = block.into_iter();
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    /// A restart point must be the start of an entry that shares nothing: a seek or a
    /// get starting there decodes it as the first key of its run. The iterator (and so
    /// `verify`, compaction and every scan) refuses a block where one is not, as a get
    /// starting there does; it once read such a block without complaint.
    #[test]
    fn a_restart_point_must_start_an_entry_that_shares_nothing() {
        // Six entries, restart interval 2: restarts at entries 0, 2 and 4.
        let keys: Vec<String> = (0..6).map(|i| format!("key{i:04}")).collect();
        let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_bytes(), &b"v"[..])).collect();
        let good = build(&entries, 2).to_vec();
        let n = good.len();
        let restarts_at = n - 4 - 4 * 3;
        let entry_starts: Vec<usize> = {
            let block = Block::new(Bytes::from(good.clone()), n).unwrap();
            let mut it = block.into_iter();
            let mut starts = vec![0];
            while let Some(e) = it.next() {
                e.unwrap();
                starts.push(it.pos);
            }
            starts
        };
        let with_restart_1 = |offset: usize| {
            let mut data = good.clone();
            data[restarts_at + 4..restarts_at + 8].copy_from_slice(&(offset as u32).to_le_bytes());
            Block::new(Bytes::from(data), n).unwrap()
        };
        let scan = |block: Block| block.into_iter().collect::<Result<Vec<_>, _>>();
        assert_eq!(scan(with_restart_1(entry_starts[2])).unwrap().len(), 6);
        // Entry 1 shares "key000" with entry 0; as a restart point a get from it fails.
        let shares = with_restart_1(entry_starts[1]);
        assert!(shares.clone().get(b"key0001").is_err());
        let err = scan(shares).unwrap_err();
        assert!(err.0.contains("shares 6 bytes"), "{err}");
        // A restart point inside entry 2.
        let err = scan(with_restart_1(entry_starts[2] + 1)).unwrap_err();
        assert!(err.0.contains("restart point 1"), "{err}");
        // A restart point inside the last entry, which the scan steps over to the end.
        let mut data = good.clone();
        let last = entry_starts[5] + 1;
        data[restarts_at + 8..restarts_at + 12].copy_from_slice(&(last as u32).to_le_bytes());
        let err = scan(Block::new(Bytes::from(data), n).unwrap()).unwrap_err();
        assert!(err.0.contains("restart point 2"), "{err}");
    }

    #[test]
    fn keys_out_of_order_stop_the_iterator() {
        let mut b = BlockBuilder::new(16);
        b.add(b"b", 1, ValueKind::Put, b"");
        b.add(b"a", 1, ValueKind::Put, b""); // the table builder would refuse this
        let data = Bytes::copy_from_slice(b.finish());
        let mut it = Block::new(data.clone(), data.len()).unwrap().into_iter();
        assert!(it.next().unwrap().is_ok());
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn decoding_arbitrary_bytes_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            target in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let data = Bytes::from(bytes);
            if let Ok(block) = Block::new(data.clone(), data.len()) {
                let _ = block.get(&target);
                let mut it = block.clone().into_iter();
                let _ = it.seek(&target, true);
                for _ in it.by_ref() {}
                for _ in block.into_iter() {}
            }
        }

        #[test]
        fn damaging_a_valid_block_never_panics(
            pos in 0usize..400,
            byte in any::<u8>(),
            target in proptest::collection::vec(any::<u8>(), 0..10),
        ) {
            let entries = sample();
            let mut data = build(&as_refs(&entries[..20]), 4).to_vec();
            let pos = pos % data.len();
            data[pos] = byte;
            let data = Bytes::from(data);
            if let Ok(block) = Block::new(data.clone(), data.len()) {
                let _ = block.get(&target);
                for _ in block.into_iter() {}
            }
        }
    }
}
