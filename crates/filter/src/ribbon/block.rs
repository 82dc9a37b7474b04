//! The Ribbon filter block (filter-block format version 2) and its reader.
//!
//! Same idea as the Bloom block: the payload, then a fixed trailer at the end with a
//! CRC-32 over everything before it; format version 2 adds a 16-byte Ribbon header
//! before the trailer. All integers little-endian:
//!
//! ```text
//!  +------------------------------+----- header (16 B) -----+------------- trailer (24 B) -------------+
//!  | solution: W words, u128 LE   | seed | 0   | upper      | 2 | 2 | r | 2 | num_keys | num_bits | crc |
//!  +------------------------------+------+-----+------------+---+---+---+---+----------+----------+-----+
//!                                   u32   u32     u64        ver lay     coeff  u64        u64      u32
//!                                                                          words
//!  W        = B·r + upper 128-bit words; B = (W - upper) / r blocks of 128 slots
//!  word k of block i (k < cols(i)) = solution bits of column k for slots 128i .. 128i+127,
//!           bit j = slot 128i + j; blocks i < upper hold r+1 columns, the others r
//!  seed     the seed of the key hashing that banded (ribbon::hash)
//!  upper    blocks with r+1 columns, 0 ≤ upper < B
//!  ver = 2, lay = 2 (ribbon), r = lower columns 1..=31, coeff words = 2 (128-bit rows)
//!  num_keys keys added (duplicates included), ≤ 128·B
//!  num_bits = 128·W
//!  crc32    CRC-32 (IEEE) of every byte before it
//! ```
//!
//! [`open`] checks, before trusting a byte: length (header and trailer present, whole
//! words), version, CRC, layout, coefficient width, `r` range, reserved zero,
//! `num_bits` equal to the payload, `W - upper` a positive multiple of `r`, `upper <
//! B`, and `num_keys ≤ 128·B`. Every failure is [`FilterError::Corrupt`].
//!
//! A query: its start slot `s` falls in block `i = s / 128` at offset `o = s % 128`;
//! for each column both blocks `i` and `i + 1` hold, the 128 solution bits from `s` on
//! are `(word_i >> o) | (word_{i+1} << (128 - o))`, and their parity under the key's
//! coefficient row `c` is one result bit, computed as
//! `parity((word_i & c << o) ^ (word_{i+1} & c >> (128 - o)))` so that the row is
//! shifted once per query rather than every column's words. The key may be present
//! iff all result bits equal its fingerprint's; the first four are compared before
//! the others are computed, since most queries of a store's filter fail there.

use byteorder::{ByteOrder, LittleEndian};

use super::hash::{parity, ribbon_hash_salted, seed_salt, COEFF_BITS};
use super::shape::{Shape, MAX_COLUMNS};
use crate::error::FilterError;
use crate::filter_block::TRAILER_LEN;
use crate::hash::KeyHash;
use crate::layout::prefetch;
use crate::policy::{FilterInfo, FilterReader};

/// The filter-block format version of Ribbon blocks.
pub const RIBBON_FORMAT_VERSION: u8 = 2;
/// The layout id of Ribbon blocks in the trailer.
pub(crate) const RIBBON_LAYOUT_ID: u8 = 2;
/// Bytes of the Ribbon header before the trailer.
pub(crate) const HEADER_LEN: usize = 16;
/// Bytes a Ribbon block spends beyond its solution.
pub(crate) const OVERHEAD_LEN: usize = HEADER_LEN + TRAILER_LEN;
/// 64-bit words per coefficient row, as recorded.
const COEFF_WORDS: u8 = (COEFF_BITS / 64) as u8;

/// Encodes a Ribbon block.
pub(crate) fn encode(shape: &Shape, seed: u32, num_keys: u64, words: &[u128]) -> Vec<u8> {
    let payload = words.len() * 16;
    let mut out = vec![0u8; payload + OVERHEAD_LEN];
    for (dst, w) in out.chunks_exact_mut(16).zip(words) {
        dst.copy_from_slice(&w.to_le_bytes());
    }
    let h = &mut out[payload..];
    LittleEndian::write_u32(&mut h[0..4], seed);
    LittleEndian::write_u32(&mut h[4..8], 0);
    LittleEndian::write_u64(&mut h[8..16], shape.upper_blocks);
    let t = &mut h[HEADER_LEN..];
    t[0] = RIBBON_FORMAT_VERSION;
    t[1] = RIBBON_LAYOUT_ID;
    t[2] = shape.lower_cols as u8; // < MAX_COLUMNS by construction
    t[3] = COEFF_WORDS;
    LittleEndian::write_u64(&mut t[4..12], num_keys);
    LittleEndian::write_u64(&mut t[12..20], words.len() as u64 * 128);
    let end = out.len() - 4;
    let crc = crc32fast::hash(&out[..end]);
    LittleEndian::write_u32(&mut out[end..], crc);
    out
}

fn corrupt(msg: impl Into<String>) -> FilterError {
    FilterError::Corrupt(format!("ribbon filter block: {}", msg.into()))
}

/// Validates a Ribbon block and opens a reader over it.
pub(crate) fn open(block: &[u8]) -> Result<RibbonReader, FilterError> {
    if block.len() < OVERHEAD_LEN {
        return Err(corrupt(format!(
            "{} bytes, shorter than the {OVERHEAD_LEN}-byte header and trailer",
            block.len()
        )));
    }
    let payload_len = block.len() - OVERHEAD_LEN;
    if !payload_len.is_multiple_of(16) {
        return Err(corrupt(format!(
            "solution of {payload_len} bytes is not a whole number of 128-bit words"
        )));
    }
    let (payload, rest) = block.split_at(payload_len);
    let (h, t) = rest.split_at(HEADER_LEN);
    if t[0] != RIBBON_FORMAT_VERSION {
        return Err(corrupt(format!("format version {} is not 2", t[0])));
    }
    let stored = LittleEndian::read_u32(&t[20..24]);
    let actual = crc32fast::hash(&block[..block.len() - 4]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    if t[1] != RIBBON_LAYOUT_ID {
        return Err(corrupt(format!("layout id {} is not ribbon (2)", t[1])));
    }
    if t[3] != COEFF_WORDS {
        return Err(corrupt(format!(
            "coefficient rows of {} words; this reader knows {COEFF_WORDS}",
            t[3]
        )));
    }
    let lower = u32::from(t[2]);
    if lower == 0 || lower >= MAX_COLUMNS {
        return Err(corrupt(format!(
            "{lower} result columns outside 1..={}",
            MAX_COLUMNS - 1
        )));
    }
    let seed = LittleEndian::read_u32(&h[0..4]);
    if LittleEndian::read_u32(&h[4..8]) != 0 {
        return Err(corrupt("reserved header bytes are not zero"));
    }
    let upper = LittleEndian::read_u64(&h[8..16]);
    let num_keys = LittleEndian::read_u64(&t[4..12]);
    let num_bits = LittleEndian::read_u64(&t[12..20]);
    let words = payload_len as u64 / 16;
    if num_bits != words * 128 {
        return Err(corrupt(format!(
            "trailer says {num_bits} bits but the solution holds {}",
            words * 128
        )));
    }
    let lower_words = words
        .checked_sub(upper)
        .filter(|w| *w > 0 && w.is_multiple_of(u64::from(lower)))
        .ok_or_else(|| {
            corrupt(format!(
                "{words} words do not split into blocks of {lower} columns plus {upper}"
            ))
        })?;
    let blocks = lower_words / u64::from(lower);
    if upper >= blocks {
        return Err(corrupt(format!(
            "{upper} upper blocks out of {blocks}: must be fewer"
        )));
    }
    let shape = Shape {
        blocks,
        lower_cols: lower,
        upper_blocks: upper,
    };
    if num_keys > shape.slots() {
        return Err(corrupt(format!(
            "{num_keys} keys in {} slots: more keys than slots",
            shape.slots()
        )));
    }
    // Length proven: the allocation is bounded by the block's own size.
    let words: Vec<u128> = payload
        .chunks_exact(16)
        .map(|c| {
            let mut b = [0u8; 16];
            b.copy_from_slice(c);
            u128::from_le_bytes(b)
        })
        .collect();
    let ones = words.iter().map(|w| u64::from(w.count_ones())).sum();
    Ok(RibbonReader {
        words,
        shape,
        num_starts: shape.num_starts(),
        salt: seed_salt(seed),
        num_keys,
        ones,
    })
}

/// Columns a query checks before the rest (see `may_contain_hash`). Four was the
/// fastest of two to six in a query-only loop (not kept); with it a miss took 29–35 ns
/// against 44–53 ns checking every column (`cargo bench --bench filter --
/// 'miss/1e(4|5)/bloomkv ribbon'`, alternated builds; docs/FILTERS.md).
const EARLY_COLUMNS: usize = 4;

/// A mask of the low `n ≤ 32` bits.
#[inline]
fn low_bits(n: usize) -> u32 {
    u32::MAX.checked_shr(32 - n as u32).unwrap_or(0)
}

/// A decoded Ribbon block.
#[derive(Debug)]
pub(crate) struct RibbonReader {
    words: Vec<u128>,
    shape: Shape,
    num_starts: u64,
    /// The seed's salt, derived once rather than per query.
    salt: u64,
    num_keys: u64,
    ones: u64,
}

impl RibbonReader {
    /// The word ranges a query of `start` reads: its block's and the next block's
    /// first `cols` words.
    #[inline]
    fn spans(&self, start: u64) -> (usize, usize, usize) {
        let i = start / COEFF_BITS;
        let j = (i + 1).min(self.shape.blocks - 1);
        (
            self.shape.offset(i) as usize,
            self.shape.offset(j) as usize,
            self.shape.cols(j) as usize,
        )
    }
}

impl FilterReader for RibbonReader {
    #[inline]
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        let h = ribbon_hash_salted(hash, self.salt, self.num_starts);
        let (lo, hi, cols) = self.spans(h.start);
        let (Some(lo_words), Some(hi_words)) =
            (self.words.get(lo..lo + cols), self.words.get(hi..hi + cols))
        else {
            return true; // unreachable for a validated shape; fail open
        };
        // Align the row to the two blocks instead of each column's words to the row:
        // bits o.. of block i's words and bits ..o of block i+1's meet the row's
        // bits 0.. and 128-o.. . `(c >> 1) >> (127 - o)` is `c >> (128 - o)` without
        // the undefined shift by 128 when o = 0.
        let o = (h.start % COEFF_BITS) as u32;
        let row_lo = h.coeff << o;
        let row_hi = (h.coeff >> 1) >> (127 - o);
        // One dot product per column. The first `EARLY_COLUMNS` columns are checked
        // alone: an absent key fails them with probability 15/16, and then the other
        // columns are never computed (a filter in a store answers "absent" far more
        // often than "may be present"). The branch goes the same way 15 times in 16.
        let dot = |b: usize| parity((lo_words[b] & row_lo) ^ (hi_words[b] & row_hi)) << b;
        let early = cols.min(EARLY_COLUMNS);
        let got = (0..early).fold(0u32, |got, b| got | dot(b));
        if got != h.fingerprint & low_bits(early) {
            return false;
        }
        let got = (early..cols).fold(got, |got, b| got | dot(b));
        got == h.fingerprint & low_bits(cols)
    }

    #[inline]
    fn prefetch_hash(&self, hash: KeyHash) {
        let h = ribbon_hash_salted(hash, self.salt, self.num_starts);
        let (lo, hi, cols) = self.spans(h.start);
        // The words of the columns checked first, in both blocks: most queries end
        // there (`may_contain_hash`). Each run is at most 64 bytes, so its first and
        // last words name every line it touches.
        let early = cols.min(EARLY_COLUMNS);
        for first in [lo, hi] {
            for w in [first, first + early - 1] {
                if let Some(word) = self.words.get(w) {
                    prefetch(word);
                }
            }
        }
    }

    fn info(&self) -> FilterInfo {
        let num_bits = self.words.len() as u64 * 128;
        FilterInfo {
            layout: "ribbon",
            num_bits,
            num_keys: self.num_keys,
            num_probes: self.shape.lower_cols,
            fill_ratio: self.ones as f64 / num_bits as f64,
            estimated_fp_rate: self.shape.expected_fp(),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.words.len() * 16
    }
}
