//! The range filter block: a Grafite filter and the key range it covers, checksummed.
//!
//! Self-describing like the standalone frame: a magic number, version and kind up
//! front, every size the reader needs in a fixed header, the two boundary keys, the
//! Elias–Fano words, and a CRC-32 of everything before it. All integers
//! little-endian:
//!
//! ```text
//!  offset       size  field
//!  0            4     magic "BKVR"
//!  4            1     version = 1
//!  5            1     kind = 1 (Grafite)
//!  6            1     w: key bytes mapped after the common prefix, 0..=8
//!  7            1     reserved = 0
//!  8            8     keys: add_key calls (duplicates included)
//!  16           8     n: stored hashes, n ≤ r, n ≤ keys
//!  24           8     r: reduced universe (0 iff the block holds no keys)
//!  32           8     L: block length = longest range answered, 1 ≤ L ≤ r
//!  40           8     seed of the block offsets q(j)
//!  48           4     s: length of the smallest key
//!  52           4     g: length of the largest key
//!  56           s     smallest key
//!  56+s         g     largest key
//!  56+s+g       8·LW  Elias–Fano low words (u64), LW = ceil(n·ℓ / 64)
//!  ..           8·HW  Elias–Fano high words (u64), HW = ceil((n + ((r−1) >> ℓ) + 1) / 64)
//!  end−4        4     CRC-32 of every byte before it
//!  ℓ = floor(log2(r / n)) if r > n, else 0
//! ```
//!
//! [`open`] checks, before trusting a byte: length ≥ 60, magic, version, CRC, kind,
//! reserved byte, that both keys fit, `smallest ≤ largest`, `w ≤ 8` and `w` at least
//! the longer boundary key's bytes after the common prefix (up to 8), `r ≤ 2^63`,
//! `1 ≤ L ≤ r`
//! (`L ≥ 1` in an empty block), `n ≤ r`, `n ≤
//! keys`, an empty block (`r = 0`) has `n = keys = s = g = 0`, the exact total length
//! for those sizes (before allocating), and then the Elias–Fano words themselves
//! (exactly `n` values, strictly increasing, below `r`, no bits past the end).

use byteorder::{ByteOrder, LittleEndian};

use super::elias_fano::{word_counts, EliasFano};
use super::grafite::{Hasher, MAX_UNIVERSE};
use super::keymap::{common_prefix_len, KeyMap, MAPPED_BYTES};
use crate::error::FilterError;

/// `"BKVR"`: bloomkv range filter.
pub(crate) const MAGIC: [u8; 4] = *b"BKVR";
/// The version of the block layout.
pub const RANGE_FORMAT_VERSION: u8 = 1;
/// The kind byte of a Grafite block.
pub(crate) const KIND_GRAFITE: u8 = 1;
pub(crate) const HEADER_LEN: usize = 56;
pub(crate) const CRC_LEN: usize = 4;

/// A decoded block, every field validated.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub keys: u64,
    pub map: KeyMap,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// `None` for an empty block.
    pub hasher: Option<Hasher>,
    pub ef: EliasFano,
    pub block_len: u64,
}

/// Writes a block. `hasher` is `None` for an empty key set.
pub(crate) fn encode(
    keys: u64,
    map: &KeyMap,
    smallest: &[u8],
    largest: &[u8],
    block_len: u64,
    hasher: Option<&Hasher>,
    ef: &EliasFano,
) -> Vec<u8> {
    let (low, high) = (ef.low_words(), ef.high_words());
    let len = HEADER_LEN + smallest.len() + largest.len() + ef.coded_bytes() + CRC_LEN;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&MAGIC);
    // width ≤ 8 by construction.
    out.extend_from_slice(&[RANGE_FORMAT_VERSION, KIND_GRAFITE, map.width as u8, 0]);
    out.extend_from_slice(&keys.to_le_bytes());
    out.extend_from_slice(&ef.len().to_le_bytes());
    out.extend_from_slice(&hasher.map_or(0, |h| h.universe).to_le_bytes());
    out.extend_from_slice(&block_len.to_le_bytes());
    out.extend_from_slice(&hasher.map_or(0, |h| h.seed).to_le_bytes());
    // Key lengths: the store's keys are far below 4 GiB; a longer one would not fit a
    // table block either.
    out.extend_from_slice(&(smallest.len() as u32).to_le_bytes());
    out.extend_from_slice(&(largest.len() as u32).to_le_bytes());
    out.extend_from_slice(smallest);
    out.extend_from_slice(largest);
    for w in low.iter().chain(high) {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn corrupt(msg: impl Into<String>) -> FilterError {
    FilterError::Corrupt(format!("range filter block: {}", msg.into()))
}

/// Validates a block and decodes it.
pub(crate) fn open(block: &[u8]) -> Result<Decoded, FilterError> {
    if block.len() < HEADER_LEN + CRC_LEN {
        return Err(corrupt(format!(
            "{} bytes, shorter than the {}-byte header and checksum",
            block.len(),
            HEADER_LEN + CRC_LEN
        )));
    }
    if block[0..4] != MAGIC {
        return Err(corrupt("bad magic number"));
    }
    if block[4] != RANGE_FORMAT_VERSION {
        return Err(corrupt(format!("unsupported version {}", block[4])));
    }
    let body_end = block.len() - CRC_LEN;
    let stored = LittleEndian::read_u32(&block[body_end..]);
    let actual = crc32fast::hash(&block[..body_end]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    if block[5] != KIND_GRAFITE {
        return Err(corrupt(format!("kind {} is not Grafite (1)", block[5])));
    }
    if block[7] != 0 {
        return Err(corrupt("reserved byte is not zero"));
    }
    let u64_at = |at: usize| LittleEndian::read_u64(&block[at..at + 8]);
    let keys = u64_at(8);
    let n = u64_at(16);
    let r = u64_at(24);
    let block_len = u64_at(32);
    let seed = u64_at(40);
    let s = LittleEndian::read_u32(&block[48..52]) as usize;
    let g = LittleEndian::read_u32(&block[52..56]) as usize;
    let keys_end = HEADER_LEN
        .checked_add(s)
        .and_then(|x| x.checked_add(g))
        .filter(|&e| e <= body_end)
        .ok_or_else(|| corrupt(format!("keys of {s} and {g} bytes do not fit")))?;
    let smallest = &block[HEADER_LEN..HEADER_LEN + s];
    let largest = &block[HEADER_LEN + s..keys_end];
    if smallest > largest {
        return Err(corrupt("smallest key is above the largest"));
    }
    let prefix_len = common_prefix_len(smallest, largest);
    let width = usize::from(block[6]);
    let least = s.max(g).saturating_sub(prefix_len).min(MAPPED_BYTES);
    if width > MAPPED_BYTES || width < least {
        return Err(corrupt(format!(
            "{width} mapped bytes; the boundary keys need {least}..={MAPPED_BYTES}"
        )));
    }
    if r > MAX_UNIVERSE {
        // A writer never makes one; the hash and the decoder would overflow on it.
        return Err(corrupt(format!("universe {r} above 2^63")));
    }
    if block_len == 0 || (r != 0 && block_len > r) {
        return Err(corrupt(format!(
            "maximum range length {block_len} outside 1..=r ({r})"
        )));
    }
    if n > r || n > keys {
        return Err(corrupt(format!(
            "{n} hashes for {keys} keys in a universe of {r}"
        )));
    }
    if r == 0 && (keys != 0 || s != 0 || g != 0) {
        return Err(corrupt("an empty universe with keys"));
    }
    if r != 0 && n == 0 {
        return Err(corrupt("a universe without hashes"));
    }
    let (low_words, high_words) =
        word_counts(n, r).ok_or_else(|| corrupt("Elias-Fano sizes overflow"))?;
    let words_len = (body_end - keys_end) as u64;
    if low_words
        .checked_add(high_words)
        .and_then(|w| w.checked_mul(8))
        != Some(words_len)
    {
        return Err(corrupt(format!(
            "{words_len} bytes of Elias-Fano words, {low_words}+{high_words} words expected"
        )));
    }
    // Lengths proven: the allocations below are bounded by the block's own size.
    let words: Vec<u64> = block[keys_end..body_end]
        .chunks_exact(8)
        .map(LittleEndian::read_u64)
        .collect();
    let (low, high) = words.split_at(low_words as usize);
    let ef = EliasFano::from_parts(n, r, low.to_vec(), high.to_vec()).map_err(corrupt)?;
    let hasher = (r != 0).then(|| Hasher::new(r, block_len, seed));
    Ok(Decoded {
        keys,
        map: KeyMap { prefix_len, width },
        smallest: smallest.to_vec(),
        largest: largest.to_vec(),
        hasher,
        ef,
        block_len,
    })
}
