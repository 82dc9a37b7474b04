//! An LZ4 block writer that picks the matches a reader copies fastest.
//!
//! An LZ4 block is a run of *sequences*: some literal bytes, then a *match* — copy
//! `length` bytes starting `offset` bytes back in what was already decoded. The format
//! lets a writer choose any match it likes, and the reader (`lz4_flex`'s decoder, see
//! [`compression`](crate::sstable::compression)) copies most of them sixteen bytes at
//! a time — but a match that overlaps its own output (`offset < length`, or a long
//! match with `offset < length + 15`) a byte at a time. On a data block of values like
//! the benchmark's (half random bytes, half one byte repeated) `lz4_flex`'s own writer
//! splits each run of the repeated byte into a short match and one that starts a byte
//! or two back, an overlapping match, and decompression spends most of its time in
//! those byte loops (a profile of `examples/compression_cost.rs` shows it).
//!
//! This writer keeps the output a plain LZ4 block any LZ4 decoder reads and differs
//! from `lz4_flex`'s in small ways: it tries the two newest earlier positions with the
//! same four bytes, not one, and keeps the longer match (of two as long, the one the
//! reader copies without overlap); inside a match it remembers the last two positions,
//! not one. On the benchmark's blocks the parse that results matches each entry's run
//! whole, from its first byte, against the previous entry's run: an offset of one
//! entry, a fast copy, and a longer match, since the next entry's lengths and key
//! follow both runs alike. The test `runs_copy_fast_after_the_first` shows both parses
//! of one such block. A present get that reads an LZ4 block went from 1.60–1.70× the
//! cost of one that reads a raw block to 1.08–1.11×, the tables from 0.606× the raw
//! bytes to 0.565×, and loading and compacting the 500,000 keys from 1.12–1.24 s to
//! 1.34–1.48 s (`cargo run --release --example compression_cost -- 500000 200000 5`,
//! three runs alternated with the build before this writer): the second candidate and
//! the remembered positions cost the writer a little more than `lz4_flex`'s, and
//! LZ4's acceleration over bytes that do not compress is kept.
//!
//! Only the runs of a block's first entry are left to overlapping matches. The format's
//! end rules hold: the last five bytes are literals and no match starts within the
//! last twelve.

/// Shortest match the format can express.
const MIN_MATCH: usize = 4;
/// Bytes at the end of a block that are always literals.
const LAST_LITERALS: usize = 5;
/// No match starts within this many bytes of the end.
const MF_LIMIT: usize = 12;
/// Farthest offset a match can name.
const MAX_OFFSET: usize = u16::MAX as usize;
/// Candidates tried per position: in a data block two find nearly all that sixteen do
/// (1.2% more bytes; one alone, 1.9% more) in about half the time (a one-block timing
/// taken while the writer was built: 3.3 against 6.2 µs for 3.9 KiB).
const MAX_CHAIN: usize = 2;
/// A reader copies a long match sixteen bytes at a time only this far from its source.
const WILD_COPY_SLACK: usize = 15;

const HASH_BITS: u32 = 12;
const NONE: u32 = u32::MAX;

/// Reusable match-finder state: one per table writer, so no block allocates it anew.
#[derive(Debug, Default)]
pub(crate) struct Lz4Writer {
    /// Newest position of each hash of four bytes.
    head: Vec<u32>,
    /// For a position, the previous position with the same hash (a window of slots).
    prev: Vec<u32>,
}

/// A match found for the bytes at the position searched.
#[derive(Clone, Copy)]
struct Match {
    offset: usize,
    len: usize,
}

impl Match {
    /// Whether a reader copies it without overlap (sixteen bytes at a time).
    fn copies_fast(&self) -> bool {
        self.offset >= self.len + WILD_COPY_SLACK
    }

    /// Whether `self` is a better choice than `other`: longer, or as long and faster.
    fn beats(&self, other: &Option<Match>) -> bool {
        match other {
            None => true,
            Some(o) => {
                self.len > o.len || (self.len == o.len && self.copies_fast() && !o.copies_fast())
            }
        }
    }
}

fn read_u32(src: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&src[at..at + 4]);
    u32::from_le_bytes(word)
}

fn hash(word: u32) -> usize {
    (word.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// Number of equal leading bytes of `a` and `b`.
fn common_len(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let (mut x, mut y) = ([0u8; 8], [0u8; 8]);
        x.copy_from_slice(&a[i..i + 8]);
        y.copy_from_slice(&b[i..i + 8]);
        let diff = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Appends an LZ4 length continuation: 255s, then the remainder.
fn put_length(out: &mut Vec<u8>, mut n: usize) {
    while n >= 255 {
        out.push(255);
        n -= 255;
    }
    out.push(n as u8);
}

/// Appends one sequence: `literals`, then the match (`None` for the block's last).
fn put_sequence(out: &mut Vec<u8>, literals: &[u8], m: Option<(usize, usize)>) {
    let match_code = m.map_or(0, |(_, len)| len - MIN_MATCH);
    out.push(((literals.len().min(15) as u8) << 4) | match_code.min(15) as u8);
    if literals.len() >= 15 {
        put_length(out, literals.len() - 15);
    }
    out.extend_from_slice(literals);
    if let Some((offset, _)) = m {
        out.extend_from_slice(&(offset as u16).to_le_bytes());
        if match_code >= 15 {
            put_length(out, match_code - 15);
        }
    }
}

impl Lz4Writer {
    /// Appends `src` to `out` as one LZ4 block.
    pub(crate) fn compress(&mut self, src: &[u8], out: &mut Vec<u8>) {
        let n = src.len();
        let mut literal_start = 0;
        if n > MF_LIMIT {
            let window = n.next_power_of_two().min(MAX_OFFSET + 1);
            self.head.clear();
            self.head.resize(1 << HASH_BITS, NONE);
            if self.prev.len() < window {
                self.prev.resize(window, NONE);
            }
            let mask = window - 1;
            let last_start = n - MF_LIMIT;
            let (mut i, mut misses) = (0, 0);
            while i <= last_start {
                let Some(m) = self.search(src, i, mask) else {
                    // LZ4's acceleration: past 64 positions without a match, step
                    // further each time, so bytes that do not compress cost little.
                    i += 1 + (misses >> 6);
                    misses += 1;
                    continue;
                };
                misses = 0;
                put_sequence(out, &src[literal_start..i], Some((m.offset, m.len)));
                let end = i + m.len;
                for p in (i + 1).max(end.saturating_sub(2))..end.min(last_start + 1) {
                    self.insert(src, p, mask);
                }
                i = end;
                literal_start = end;
            }
        }
        put_sequence(out, &src[literal_start..], None);
    }

    /// Remembers position `p`; returns the newest earlier position with the same hash.
    fn insert(&mut self, src: &[u8], p: usize, mask: usize) -> u32 {
        let h = hash(read_u32(src, p));
        let newest = self.head[h];
        self.prev[p & mask] = newest;
        self.head[h] = p as u32;
        newest
    }

    /// Remembers position `i` and returns the best match for the bytes at `i`.
    fn search(&mut self, src: &[u8], i: usize, mask: usize) -> Option<Match> {
        let match_end = src.len() - LAST_LITERALS;
        let word = read_u32(src, i);
        let mut candidate = self.insert(src, i, mask);
        let mut best = None;
        for _ in 0..MAX_CHAIN {
            let c = candidate as usize;
            // Stop at the chain's end, at a slot a newer position took over (links only
            // go back), and beyond the farthest offset.
            if candidate == NONE || c >= i || i - c > MAX_OFFSET {
                break;
            }
            if read_u32(src, c) == word {
                let len =
                    MIN_MATCH + common_len(&src[c + MIN_MATCH..], &src[i + MIN_MATCH..match_end]);
                let m = Match { offset: i - c, len };
                if m.beats(&best) {
                    best = Some(m);
                    if i + len == match_end && m.copies_fast() {
                        break;
                    }
                }
            }
            candidate = self.prev[c & mask];
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compress(src: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Lz4Writer::default().compress(src, &mut out);
        out
    }

    /// The sequences of an LZ4 block, as (literal count, offset, match length); the
    /// last has no match. Panics on a malformed block (a test helper).
    fn sequences(block: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut p = 0;
        let length = |p: &mut usize, mut n: usize| loop {
            let b = block[*p];
            *p += 1;
            n += b as usize;
            if b != 255 {
                return n;
            }
        };
        loop {
            let token = block[p];
            p += 1;
            let mut lits = (token >> 4) as usize;
            if lits == 15 {
                lits = length(&mut p, lits);
            }
            p += lits;
            if p == block.len() {
                out.push((lits, 0, 0));
                return out;
            }
            let offset = u16::from_le_bytes([block[p], block[p + 1]]) as usize;
            p += 2;
            let mut len = (token & 15) as usize;
            if len == 15 {
                len = length(&mut p, len);
            }
            out.push((lits, offset, len + MIN_MATCH));
        }
    }

    /// Checks the round trip and the format's end rules.
    fn check(src: &[u8]) -> Vec<(usize, usize, usize)> {
        let block = compress(src);
        let back = lz4_flex::block::decompress(&block, src.len()).unwrap();
        assert!(back == src, "round trip of {} bytes", src.len());
        let seqs = sequences(&block);
        let mut pos = 0;
        for (k, &(lits, offset, len)) in seqs.iter().enumerate() {
            pos += lits;
            if k + 1 < seqs.len() {
                assert!(offset >= 1 && offset <= pos, "offset {offset} at {pos}");
                assert!(
                    pos <= src.len() - MF_LIMIT,
                    "match starts at {pos} of {}",
                    src.len()
                );
                pos += len;
                assert!(pos <= src.len() - LAST_LITERALS, "match ends at {pos}");
            }
        }
        assert_eq!(pos, src.len());
        seqs
    }

    /// A data block like the benchmark's: consecutive keys, values of 50 random bytes
    /// and 50 of one byte.
    fn entries_block(entries: usize) -> Vec<u8> {
        let mut block = crate::sstable::block_builder::BlockBuilder::new(16);
        for i in 0..entries as u64 {
            let mut value = crate::sstable::test_util::noise(0x9E37_79B9_7F4A_7C15 ^ i, 50);
            value.resize(100, b'v');
            let key = format!("key{:016}", 1_000 + i);
            block.add(
                key.as_bytes(),
                5_000 + i,
                crate::types::ValueKind::Put,
                &value,
            );
        }
        block.finish().clone()
    }

    #[test]
    fn small_and_edge_inputs_round_trip() {
        for n in 0..40 {
            check(&vec![7u8; n]);
            check(&(0..n as u8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn runs_copy_fast_after_the_first() {
        let src = entries_block(32);
        let seqs = check(&src);
        let overlapping: usize = seqs
            .iter()
            .filter(|&&(_, offset, len)| len > 0 && offset < len + WILD_COPY_SLACK)
            .map(|&(_, _, len)| len)
            .sum();
        // Only the first entry's runs (its key's zeros, its value's tail) are copied
        // onto themselves: no more than that entry's 113 bytes.
        assert!(
            overlapping <= 113,
            "{overlapping} bytes copied with overlap: {seqs:?}"
        );
        // lz4_flex's own writer copies nearly every run byte by byte.
        let theirs = lz4_flex::block::compress(&src);
        let theirs_overlapping: usize = sequences(&theirs)
            .iter()
            .filter(|&&(_, offset, len)| len > 0 && offset < len + WILD_COPY_SLACK)
            .map(|&(_, _, len)| len)
            .sum();
        assert!(
            theirs_overlapping > 4 * overlapping.max(100),
            "{theirs_overlapping} against {overlapping}"
        );
        assert!(compress(&src).len() <= theirs.len());
    }

    #[test]
    fn offsets_stay_within_the_window() {
        // Repeats both within and beyond 64 KiB of each other.
        let unit = entries_block(800);
        let mut src = unit.clone();
        src.extend_from_slice(&unit[..1000]);
        assert!(src.len() > MAX_OFFSET + 1000);
        check(&src);
        // 300 bytes of noise, a run of zeros, then bytes 100..300 again at exactly the
        // farthest offset and one byte beyond it: the first is matched there, the
        // second cannot be (its offset would wrap to 0) and still round-trips.
        for distance in [MAX_OFFSET, MAX_OFFSET + 1] {
            let mut src = vec![0u8; distance + 300];
            src[..300].copy_from_slice(&crate::sstable::test_util::noise(7, 300));
            src.copy_within(100..300, distance + 100);
            let seqs = check(&src);
            let farthest = seqs.iter().map(|&(_, offset, _)| offset).max();
            assert_eq!(
                farthest == Some(MAX_OFFSET),
                distance == MAX_OFFSET,
                "{distance}"
            );
        }
    }

    #[test]
    fn random_inputs_round_trip() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        // One writer for every input, as a table builder keeps one for all its blocks:
        // what it packs must not depend on the blocks before (window sizes vary here).
        let mut reused = Lz4Writer::default();
        for _ in 0..300 {
            let n = if rng.gen_ratio(1, 30) {
                rng.gen_range(60_000..70_000)
            } else {
                rng.gen_range(0..3000)
            };
            let mut src: Vec<u8> = Vec::with_capacity(n);
            while src.len() < n {
                match rng.gen_range(0..4) {
                    // a literal from a small alphabet (many short matches)
                    0 => src.push(rng.gen_range(0..4)),
                    // a run of one byte
                    1 => src.extend(std::iter::repeat_n(rng.gen::<u8>(), rng.gen_range(1..40))),
                    // a copy of earlier bytes
                    2 if !src.is_empty() => {
                        let from = rng.gen_range(0..src.len());
                        let len = rng.gen_range(1..60).min(src.len() - from);
                        src.extend_from_within(from..from + len);
                    }
                    _ => src.push(rng.gen()),
                }
            }
            src.truncate(n);
            check(&src);
            let mut out = Vec::new();
            reused.compress(&src, &mut out);
            assert!(
                out == compress(&src),
                "a reused writer packed {n} bytes differently"
            );
        }
    }
}
