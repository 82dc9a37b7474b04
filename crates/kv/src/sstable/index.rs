//! The index block: which data block may hold a key.
//!
//! One entry per data block, in order: a *separator* key and the block's handle. The
//! separator is at least the block's last key and below the next block's first key, so
//! the block that may hold `key` is the first whose separator is `>= key`. Separators
//! are shortened where possible (`"apple"`/`"banana"` → `"b"`), keeping the index — which
//! lives in memory for the table's lifetime — small. The last block's separator is the
//! table's largest key.
//!
//! ```text
//!  +---------+---------+-----+-------------+
//!  | entry 0 | entry 1 | ... | num_entries |
//!  |         |         |     | u32 LE      |
//!  +---------+---------+-----+-------------+
//!  entry:
//!  +---------------+-----------+--------------+------------+
//!  | separator_len | separator | block offset | block size |
//!  | varint        | bytes     | varint       | varint     |
//!  +---------------+-----------+--------------+------------+
//! ```
//!
//! In format version 2 a key's versions may continue into the next block; the block's
//! separator is then that key itself, and the next block's separator may equal it. So
//! separators strictly increase in version 1 tables and never decrease in version 2
//! ones; either way the first block whose separator is `>= key` is where `key`'s
//! newest version is, and its older versions follow in the next blocks.
//!
//! Decoding checks that the entries fill the block exactly, that separators increase
//! (strictly, in version 1), and that block handles increase without overlapping and end before the
//! metadata blocks.

use std::ops::Range;

use super::footer::BlockHandle;
use super::Malformed;
use crate::coding::{get_varint_usize, put_varint, u32_at};
use crate::keycmp;
use crate::prefetch::prefetch_lines;

/// Accumulates index entries while a table is written.
#[derive(Debug, Default)]
pub(crate) struct IndexBuilder {
    buf: Vec<u8>,
    count: u32,
}

impl IndexBuilder {
    /// Adds the entry for the next data block.
    pub(crate) fn add(&mut self, separator: &[u8], handle: BlockHandle) {
        put_varint(&mut self.buf, separator.len() as u64);
        self.buf.extend_from_slice(separator);
        handle.encode_varint(&mut self.buf);
        self.count += 1;
    }

    /// Bytes of the block so far.
    pub(crate) fn size(&self) -> usize {
        self.buf.len() + 4
    }

    /// The finished block (without trailer).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

/// A short key `s` with `last <= s < next`; `last` itself if none is shorter.
///
/// With `i` the first position where the keys differ (`last[i] < next[i]`):
/// `last[..i] ++ [last[i] + 1]` if that byte is still below `next[i]`; otherwise the
/// first byte of `last` after `i` that can be raised, raised, ends the separator
/// (`"apple"`/`"banana"` → `"aq"`).
pub(crate) fn shortest_separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let i = keycmp::common_prefix(last, next);
    if let (Some(&a), Some(&b)) = (last.get(i), next.get(i)) {
        if a < 0xff && a + 1 < b {
            let mut sep = last[..i].to_vec();
            sep.push(a + 1);
            return sep;
        }
        // last[..=i] < next already; any key extending it stays below `next`.
        let raisable = last
            .iter()
            .enumerate()
            .skip(i + 1)
            .find(|&(_, &byte)| byte < 0xff);
        if let Some((j, &byte)) = raisable.filter(|&(j, _)| j + 1 < last.len()) {
            let mut sep = last[..j].to_vec();
            sep.push(byte + 1);
            return sep;
        }
    }
    last.to_vec()
}

/// Words of the binary search in one cache line.
const WORDS_PER_LINE: usize = 64 / std::mem::size_of::<u64>();

/// The number of `words` below `word` (which are sorted): a branch-free binary search
/// that calls `near` with the positions the answer may still be, once those fit in
/// about one cache line of words (not at all for fewer than two words).
#[inline]
fn lower_bound(words: &[u64], word: u64, near: impl FnOnce(Range<usize>)) -> usize {
    // Every word below `base` is below `word`, every word from `base + len` on is not.
    let (mut base, mut len) = (0, words.len());
    let halve = |base: &mut usize, len: &mut usize| {
        let half = *len / 2;
        // `base + half - 1 < base + len <= words.len()`.
        if words.get(*base + half - 1).is_some_and(|&w| w < word) {
            *base += half;
        }
        *len -= half;
    };
    while len > WORDS_PER_LINE {
        halve(&mut base, &mut len);
    }
    if len > 1 {
        near(base..words.len().min(base + len + 1));
    }
    while len > 1 {
        halve(&mut base, &mut len);
    }
    base + usize::from(words.get(base).is_some_and(|&w| w < word))
}

/// One decoded entry: the separator's position in the block and the data block handle.
#[derive(Debug, Clone)]
struct IndexEntry {
    separator: Range<usize>,
    handle: BlockHandle,
}

/// The decoded index, kept in memory for the table's lifetime.
///
/// A lookup's binary search runs first over `words`, one `u64` per separator packed
/// side by side, and touches separators' bytes only among the few entries whose word
/// equals the key's (see [`SearchWords`]).
#[derive(Debug)]
pub(crate) struct IndexBlock {
    data: Vec<u8>,
    entries: Vec<IndexEntry>,
    words: SearchWords,
}

/// Separators reduced to one word each, for a binary search that stays in a few
/// cache lines.
///
/// All separators share their first `prefix` bytes (the common prefix of the first and
/// the last, since they are sorted). Word `i` is the next 8 bytes of separator `i`,
/// zero-padded and read big-endian. Reading a key the same way keeps order: a
/// separator whose word is below the key's is below the key, one whose word is above
/// is above it, and only equal words leave the order to the full bytes.
///
/// ```text
///   separators  user:0042  | user:0107  | user:1
///   prefix      user:                                (5 bytes)
///   words       "0042····"   "0107····"   "1·······"   (· = zero byte)
/// ```
#[derive(Debug, Default)]
struct SearchWords {
    prefix: Vec<u8>,
    words: Vec<u64>,
}

/// Where a key stands against the separators' common prefix.
enum Placed {
    /// Below every separator.
    Below,
    /// Above every separator.
    Above,
    /// Starts with the prefix; the key's word.
    Word(u64),
}

impl SearchWords {
    fn new(data: &[u8], entries: &[IndexEntry]) -> SearchWords {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return SearchWords::default();
        };
        let (first, last) = (
            &data[first.separator.clone()],
            &data[last.separator.clone()],
        );
        let prefix = first[..keycmp::common_prefix(first, last)].to_vec();
        let words = entries
            .iter()
            .map(|e| keycmp::word_after(&data[e.separator.clone()], prefix.len()))
            .collect();
        SearchWords { prefix, words }
    }

    fn place(&self, key: &[u8]) -> Placed {
        match key.get(..self.prefix.len()) {
            Some(head) if head == &self.prefix[..] => {
                Placed::Word(keycmp::word_after(key, head.len()))
            }
            // Differs within the prefix (or is a shorter prefix of it): the first
            // difference orders the key against every separator at once.
            _ if keycmp::less(key, &self.prefix) => Placed::Below,
            _ => Placed::Above,
        }
    }
}

impl IndexBlock {
    /// An index of no blocks: what a partitioned table (format version 8) keeps in
    /// place of its index, whose entries live in partitions (`partition.rs`).
    pub(crate) fn empty() -> IndexBlock {
        IndexBlock {
            data: Vec::new(),
            entries: Vec::new(),
            words: SearchWords::default(),
        }
    }

    /// Decodes and validates an index whose data blocks must end by `data_end`;
    /// `equal_separators` allows neighbouring separators to be equal (format version 2).
    pub(crate) fn decode(
        data: Vec<u8>,
        data_end: u64,
        equal_separators: bool,
    ) -> Result<IndexBlock, Malformed> {
        let body_len = data
            .len()
            .checked_sub(4)
            .ok_or("too short for an entry count")?;
        let count = u32_at(&data, body_len).ok_or("too short for an entry count")? as usize;
        // Each entry takes at least three bytes; check before allocating for `count`.
        if count == 0 || count > body_len / 3 {
            return Err(Malformed(format!(
                "entry count {count} does not fit a {}-byte index",
                data.len()
            )));
        }
        let body = &data[..body_len];
        let mut entries = Vec::with_capacity(count);
        let mut pos = 0;
        let mut prev: Option<(Range<usize>, u64)> = None;
        for i in 0..count {
            let bad = |what: &str| Malformed(format!("index entry {i}: {what}"));
            let len = get_varint_usize(body, &mut pos).ok_or_else(|| bad("bad key length"))?;
            let end = pos
                .checked_add(len)
                .filter(|&e| e <= body.len())
                .ok_or_else(|| bad("separator runs past the end of the block"))?;
            let separator = pos..end;
            pos = end;
            let handle = BlockHandle::decode_varint(body, &mut pos)
                .ok_or_else(|| bad("bad block handle"))?;
            let block_end = handle.end().filter(|&e| e <= data_end).ok_or_else(|| {
                bad(&format!(
                    "block (offset {}, size {}) extends past the data blocks' end {data_end}",
                    handle.offset, handle.size
                ))
            })?;
            if let Some((prev_sep, prev_end)) = &prev {
                let order = body[separator.clone()].cmp(&body[prev_sep.clone()]);
                if order.is_lt() || (order.is_eq() && !equal_separators) {
                    return Err(bad("separator does not increase"));
                }
                if handle.offset < *prev_end {
                    return Err(bad("block overlaps the previous block"));
                }
            }
            prev = Some((separator.clone(), block_end));
            entries.push(IndexEntry { separator, handle });
        }
        if pos != body.len() {
            return Err(Malformed(format!(
                "{} unexpected bytes after {count} entries",
                body.len() - pos
            )));
        }
        let words = SearchWords::new(&data, &entries);
        Ok(IndexBlock {
            data,
            entries,
            words,
        })
    }

    /// The first position in `0..len()` whose separator `s` fails `before(s)`, where
    /// `before` holds for a prefix of the separators: all with a word below `key`'s,
    /// none with a word above it.
    #[inline]
    fn search(&self, key: &[u8], before: impl Fn(&[u8]) -> bool) -> usize {
        let word = match self.words.place(key) {
            Placed::Below => return 0,
            Placed::Above => return self.entries.len(),
            Placed::Word(w) => w,
        };
        let words = &self.words.words;
        // The entry of the block found is read next, for its handle, and its line is
        // seldom cached (32 bytes for each of a table's blocks): asked for while the
        // search's last steps wait on their own line, its miss overlaps theirs.
        let lo = lower_bound(words, word, |near| {
            prefetch_lines(self.entries.get(near).unwrap_or_default())
        });
        let equal = words[lo..].partition_point(|&w| w == word);
        lo + self.entries[lo..lo + equal]
            .partition_point(|e| before(&self.data[e.separator.clone()]))
    }

    /// Number of data blocks.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The position of the first block whose separator is `>= key` (== `len()` if none).
    #[inline]
    pub(crate) fn find(&self, key: &[u8]) -> usize {
        self.search(key, |s| keycmp::less(s, key))
    }

    /// The position of the first block whose separator is `> key` (== `len()` if none):
    /// every block after it holds only keys above `key`.
    #[inline]
    pub(crate) fn upper(&self, key: &[u8]) -> usize {
        self.search(key, |s| !keycmp::less(key, s))
    }

    /// The handle of block `i`.
    #[inline]
    pub(crate) fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.entries.get(i).map(|e| e.handle)
    }

    /// The separator of block `i`.
    pub(crate) fn separator(&self, i: usize) -> Option<&[u8]> {
        self.entries.get(i).map(|e| &self.data[e.separator.clone()])
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.data.capacity()
            + self.entries.capacity() * std::mem::size_of::<IndexEntry>()
            + self.words.prefix.capacity()
            + self.words.words.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bound_counts_the_words_below_and_names_one_line_of_candidates() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for len in 0..70 {
            for _ in 0..50 {
                // Few distinct values, so runs of equal words are common.
                let mut words: Vec<u64> = (0..len).map(|_| rng.gen_range(0..20) * 2).collect();
                words.sort_unstable();
                for word in 0..42 {
                    let mut named = None;
                    let got = lower_bound(&words, word, |near| named = Some(near));
                    let want = words.partition_point(|&w| w < word);
                    assert_eq!(got, want, "{words:?} {word}");
                    match named {
                        None => assert!(len < 2),
                        Some(near) => {
                            assert!(near.len() <= WORDS_PER_LINE + 1 && near.len() >= 2);
                            assert!(near.end <= len);
                            // The answer is among them, unless every word is below.
                            assert!(near.contains(&want) || want == len, "{near:?} {want}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_separators_fall_between_their_keys() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..5000 {
            let mut gen = || -> Vec<u8> {
                let len = rng.gen_range(0..6);
                (0..len)
                    .map(|_| [0u8, 1, 0x7f, 0xfe, 0xff][rng.gen_range(0..5)])
                    .collect()
            };
            let (a, b) = (gen(), gen());
            let (last, next) = match a.cmp(&b) {
                std::cmp::Ordering::Less => (a, b),
                std::cmp::Ordering::Greater => (b, a),
                std::cmp::Ordering::Equal => continue,
            };
            let sep = shortest_separator(&last, &next);
            assert!(sep >= last && sep < next, "{last:?} {sep:?} {next:?}");
            assert!(sep.len() <= last.len());
        }
    }

    #[test]
    fn separators_are_short_and_between_the_keys() {
        let cases: &[(&[u8], &[u8], &[u8])] = &[
            (b"apple", b"banana", b"aq"),
            (b"apple", b"cherry", b"b"),
            (b"a\xff\xffz", b"b", b"a\xff\xffz"),
            (b"a\xff\xffzz", b"b", b"a\xff\xff{"),
            (b"abc1", b"abc9", b"abc2"),
            (b"abc1", b"abc2", b"abc1"),
            (b"abc", b"abcd", b"abc"),
            (b"a\xff", b"b", b"a\xff"),
            (b"", b"a", b""),
        ];
        for (last, next, want) in cases {
            let sep = shortest_separator(last, next);
            assert_eq!(&sep[..], *want);
            assert!(&sep[..] >= *last && &sep[..] < *next);
        }
    }

    fn handle(offset: u64, size: u64) -> BlockHandle {
        BlockHandle { offset, size }
    }

    #[test]
    fn find_picks_the_first_block_whose_separator_covers_the_key() {
        let mut b = IndexBuilder::default();
        b.add(b"c", handle(0, 10));
        b.add(b"f", handle(15, 10));
        b.add(b"k", handle(30, 10));
        let index = IndexBlock::decode(b.finish(), 45, false).unwrap();
        assert_eq!(index.len(), 3);
        assert_eq!(index.find(b"a"), 0);
        assert_eq!(index.find(b"c"), 0);
        assert_eq!(index.find(b"c\0"), 1);
        assert_eq!(index.find(b"k"), 2);
        assert_eq!(index.find(b"z"), 3);
        assert_eq!(index.handle(1), Some(handle(15, 10)));
        assert_eq!(index.handle(3), None);
    }

    #[test]
    fn bad_indexes_are_refused() {
        let mut b = IndexBuilder::default();
        b.add(b"c", handle(0, 10));
        let bytes = b.finish();
        assert!(IndexBlock::decode(bytes.clone(), 14, false).is_err()); // block past data end
        for len in 0..bytes.len() {
            assert!(IndexBlock::decode(bytes[..len].to_vec(), 100, true).is_err());
        }
        let mut hostile = bytes.clone();
        let n = hostile.len();
        hostile[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(IndexBlock::decode(hostile, 100, true)
            .unwrap_err()
            .0
            .contains("count"));

        let mut b = IndexBuilder::default();
        b.add(b"c", handle(0, 10));
        b.add(b"c", handle(15, 10));
        let repeated = b.finish();
        assert!(IndexBlock::decode(repeated.clone(), 100, false).is_err()); // repeats in v1
        let v2 = IndexBlock::decode(repeated, 100, true).unwrap(); // a key spanning blocks
        assert_eq!((v2.find(b"c"), v2.upper(b"c"), v2.upper(b"b")), (0, 2, 0));
        let mut b = IndexBuilder::default();
        b.add(b"d", handle(0, 10));
        b.add(b"c", handle(15, 10));
        assert!(IndexBlock::decode(b.finish(), 100, true).is_err()); // decreases
        let mut b = IndexBuilder::default();
        b.add(b"c", handle(0, 10));
        b.add(b"d", handle(12, 10));
        assert!(IndexBlock::decode(b.finish(), 100, true).is_err()); // overlap
    }

    proptest::proptest! {
        /// The word search answers exactly what a plain binary search over the
        /// separators does: separators with long shared prefixes, repeats (format 2),
        /// keys below, above, inside the prefix and between separators.
        #[test]
        fn the_word_search_agrees_with_a_plain_search(
            mut seps in proptest::collection::vec(
                proptest::collection::vec(proptest::prop_oneof![
                    proptest::strategy::Just(0u8), proptest::strategy::Just(1), proptest::strategy::Just(0xff)
                ], 0..14),
                1..40,
            ),
            shared in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
            keys in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), proptest::collection::vec(
                    proptest::prop_oneof![proptest::strategy::Just(0u8), proptest::strategy::Just(1), proptest::strategy::Just(2), proptest::strategy::Just(0xff)], 0..22)),
                1..30,
            ),
        ) {
            for s in &mut seps {
                s.splice(0..0, shared.iter().copied());
            }
            seps.sort();
            let mut b = IndexBuilder::default();
            for (i, sep) in seps.iter().enumerate() {
                b.add(sep, handle(i as u64 * 10, 5));
            }
            let index = IndexBlock::decode(b.finish(), seps.len() as u64 * 10, true).unwrap();
            for (with_prefix, tail) in keys {
                let key: Vec<u8> = if with_prefix {
                    shared.iter().chain(&tail).copied().collect()
                } else {
                    tail
                };
                let find = seps.partition_point(|s| s[..] < key[..]);
                let upper = seps.partition_point(|s| s[..] <= key[..]);
                proptest::prop_assert_eq!(index.find(&key), find, "{:?}", key);
                proptest::prop_assert_eq!(index.upper(&key), upper, "{:?}", key);
            }
        }
    }
}
