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
//!  4            1     version = 1 (bytes map) or 2 (packed positions)
//!  5            1     kind = 1 (Grafite)
//!  6            1     w: key bytes mapped after the common prefix, 0..=8;
//!                     version 2: m, byte positions coded, 0..=64
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
//!  56+s+g       2·m   version 2 only: (lo, hi) bytes of each coded position
//!  56+s+g+2m    8·LW  Elias–Fano low words (u64), LW = ceil(n·ℓ / 64)
//!  ..           8·HW  Elias–Fano high words (u64), HW = ceil((n + ((r−1) >> ℓ) + 1) / 64)
//!  end−4        4     CRC-32 of every byte before it
//!  ℓ = floor(log2(r / n)) if r > n, else 0
//! ```
//!
//! [`open`] checks, before trusting a byte: length ≥ 60, magic, version (1 or 2), CRC,
//! kind, reserved byte, that both keys fit, `smallest ≤ largest`; in version 1 `w ≤ 8`
//! and `w` at least the longer boundary key's bytes after the common prefix (up to 8);
//! in version 2 `m ≤ 64`, the pairs inside the block, `lo ≤ hi` each, their codes
//! within 64 bits and both boundary keys' bytes inside their positions' ranges; `r ≤ 2^63`,
//! `1 ≤ L ≤ r`
//! (`L ≥ 1` in an empty block), `n ≤ r`, `n ≤
//! keys`, an empty block (`r = 0`) has `n = keys = s = g = 0`, the exact total length
//! for those sizes (before allocating), and then the Elias–Fano words themselves
//! (exactly `n` values, strictly increasing, below `r`, no bits past the end).

use byteorder::{ByteOrder, LittleEndian};

use super::elias_fano::{word_counts, EliasFano};
use super::grafite::{Hasher, MAX_UNIVERSE};
use super::keymap::{
    common_prefix_len, position_bits, KeyMap, Packed, MAPPED_BYTES, MAX_POSITIONS,
};
use crate::error::FilterError;

/// `"BKVR"`: bloomkv range filter.
pub(crate) const MAGIC: [u8; 4] = *b"BKVR";
/// The newest version of the block layout: 2, packed positions (written where a key
/// runs past 8 bytes after the common prefix); version 1 blocks (8 bytes as they are)
/// are still written where the keys fit, and read.
pub const RANGE_FORMAT_VERSION: u8 = 2;
/// Version 1: the map reads `w ≤ 8` bytes after the prefix.
pub(crate) const VERSION_BYTES: u8 = 1;
/// Version 2: packed positions, their byte ranges after the boundary keys.
pub(crate) const VERSION_PACKED: u8 = 2;
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
    let positions = map.packed.map_or(0, |p| p.count);
    let len =
        HEADER_LEN + smallest.len() + largest.len() + 2 * positions + ef.coded_bytes() + CRC_LEN;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&MAGIC);
    // width ≤ 8, or positions ≤ 64, by construction.
    let (version, width) = match &map.packed {
        None => (VERSION_BYTES, map.width as u8),
        Some(p) => (VERSION_PACKED, p.count as u8),
    };
    out.extend_from_slice(&[version, KIND_GRAFITE, width, 0]);
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
    if let Some(p) = &map.packed {
        for i in 0..p.count {
            out.extend_from_slice(&[p.lo[i], p.hi[i]]);
        }
    }
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
    let version = block[4];
    if version != VERSION_BYTES && version != VERSION_PACKED {
        return Err(corrupt(format!("unsupported version {version}")));
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
    let (map, map_end) = if version == VERSION_BYTES {
        let least = s.max(g).saturating_sub(prefix_len).min(MAPPED_BYTES);
        if width > MAPPED_BYTES || width < least {
            return Err(corrupt(format!(
                "{width} mapped bytes; the boundary keys need {least}..={MAPPED_BYTES}"
            )));
        }
        let map = KeyMap {
            prefix_len,
            width,
            packed: None,
        };
        (map, keys_end)
    } else {
        let packed = open_packed(block, keys_end, body_end, width)?;
        for key in [smallest, largest] {
            let rest = &key[prefix_len..];
            for (i, &b) in rest.iter().take(packed.count).enumerate() {
                if b < packed.lo[i] || b > packed.hi[i] {
                    return Err(corrupt(format!(
                        "a boundary key's byte {b:#04x} at position {i} is outside {:#04x}..={:#04x}",
                        packed.lo[i], packed.hi[i]
                    )));
                }
            }
        }
        let map = KeyMap {
            prefix_len,
            width,
            packed: Some(packed),
        };
        (map, keys_end + 2 * width)
    };
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
    let words_len = (body_end - map_end) as u64;
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
    let words: Vec<u64> = block[map_end..body_end]
        .chunks_exact(8)
        .map(LittleEndian::read_u64)
        .collect();
    let (low, high) = words.split_at(low_words as usize);
    let ef = EliasFano::from_parts(n, r, low.to_vec(), high.to_vec()).map_err(corrupt)?;
    let hasher = (r != 0).then(|| Hasher::new(r, block_len, seed));
    Ok(Decoded {
        keys,
        map,
        smallest: smallest.to_vec(),
        largest: largest.to_vec(),
        hasher,
        ef,
        block_len,
    })
}

/// Reads and checks version 2's `m` position ranges, which start at `at`.
fn open_packed(block: &[u8], at: usize, body_end: usize, m: usize) -> Result<Packed, FilterError> {
    if m > MAX_POSITIONS {
        return Err(corrupt(format!(
            "{m} packed positions, at most {MAX_POSITIONS}"
        )));
    }
    let pairs = block
        .get(at..at + 2 * m)
        .filter(|_| at + 2 * m <= body_end)
        .ok_or_else(|| corrupt(format!("{m} position ranges do not fit")))?;
    let mut p = Packed {
        count: m,
        lo: [0; MAX_POSITIONS],
        hi: [0; MAX_POSITIONS],
    };
    let mut bits = 0;
    for (i, pair) in pairs.chunks_exact(2).enumerate() {
        let (lo, hi) = (pair[0], pair[1]);
        if lo > hi {
            return Err(corrupt(format!(
                "position {i}: range {lo:#04x}..={hi:#04x}"
            )));
        }
        p.lo[i] = lo;
        p.hi[i] = hi;
        bits += position_bits(lo, hi);
    }
    if bits > u64::BITS {
        return Err(corrupt(format!(
            "packed positions need {bits} bits, over 64"
        )));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;
    use crate::range::filter::{RangeFilterBuilder, RangeFilterReader};

    /// Line-item keys of orders spread over seven digits, every eighth order absent.
    fn line_keys() -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for i in 0..3000u64 {
            let order = 1 + i * 1999;
            if i % 8 == 7 {
                continue;
            }
            for line in 1..=(1 + i % 7) {
                keys.push(format!("lineitem/{order:010}/{line:02}").into_bytes());
            }
        }
        keys
    }

    fn build(keys: &[Vec<u8>]) -> Vec<u8> {
        let mut b = RangeFilterBuilder::new(16.0, 64).unwrap();
        for k in keys {
            b.add_key(k);
        }
        b.finish()
    }

    fn with_crc(mut block: Vec<u8>) -> Vec<u8> {
        let end = block.len() - CRC_LEN;
        let crc = crc32fast::hash(&block[..end]);
        block[end..].copy_from_slice(&crc.to_le_bytes());
        block
    }

    #[test]
    fn long_text_keys_get_a_version_2_block_that_keeps_lines_apart() {
        let keys = line_keys();
        let block = build(&keys);
        assert_eq!(block[4], VERSION_PACKED);
        let r = RangeFilterReader::open(&block).unwrap();
        let stats = r.stats();
        assert_eq!(stats.stored_hashes, keys.len() as u64, "no two keys merged");
        // Every key's own range is "maybe" (no false negative)...
        for k in &keys {
            assert!(r.may_contain_range(k, Bound::Included(k)));
        }
        // ...and absent lines of present orders, and absent orders, are almost all "no".
        let (mut asked, mut maybe) = (0u64, 0u64);
        for i in 0..3000u64 {
            let order = 1 + i * 1999;
            let lines = if i % 8 == 7 { 0 } else { 1 + i % 7 };
            for line in (lines + 1)..=8 {
                let k = format!("lineitem/{order:010}/{line:02}").into_bytes();
                asked += 1;
                maybe += r.may_contain_range(&k, Bound::Included(&k)) as u64;
            }
            if lines == 0 {
                let a = format!("lineitem/{order:010}/").into_bytes();
                let z = format!("lineitem/{order:010}/99").into_bytes();
                asked += 1;
                maybe += r.may_contain_range(&a, Bound::Included(&z)) as u64;
            }
        }
        // The bound at 16 bits/key is l / 2^14 per range with l ≤ 7 here: at most
        // 7/16384 of the asked ranges, with 3σ of binomial slack.
        let p = 7.0 / 16384.0;
        let limit = asked as f64 * p + 3.0 * (asked as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (maybe as f64) <= limit,
            "{maybe} of {asked} maybe, limit {limit:.1}"
        );
    }

    /// A block written before version 2 existed, for keys that run past 8 bytes: the
    /// version 1 map (merging lines) still opens and answers as it did.
    #[test]
    fn version_1_blocks_of_long_keys_still_open() {
        let mut keys = line_keys();
        keys.sort();
        let (s, l) = (&keys[0], &keys[keys.len() - 1]);
        let map = KeyMap::of(s, l, keys.iter().map(|k| k.as_slice()));
        let mut mapped: Vec<u64> = keys.iter().map(|k| map.map(k)).collect();
        mapped.dedup();
        let universe = crate::range::grafite::reduced_universe(mapped.len() as u64, 16.0);
        let hasher = Hasher::new(universe, 64, 7);
        let ef = crate::range::grafite::build(&mapped, &hasher);
        let block = encode(keys.len() as u64, &map, s, l, 64, Some(&hasher), &ef);
        assert_eq!(block[4], VERSION_BYTES);
        let r = RangeFilterReader::open(&block).unwrap();
        assert_eq!(r.stats().stored_hashes, mapped.len() as u64);
        assert!(mapped.len() < keys.len(), "the version 1 map merges lines");
        for k in &keys {
            assert!(r.may_contain_range(k, Bound::Included(k)));
        }
    }

    #[test]
    fn short_keys_still_get_version_1_blocks() {
        let keys: Vec<Vec<u8>> = (0..500u32)
            .map(|i| format!("k{i:05}").into_bytes())
            .collect();
        assert_eq!(build(&keys)[4], VERSION_BYTES);
    }

    #[test]
    fn damaged_version_2_position_ranges_are_refused() {
        let keys = line_keys();
        let block = build(&keys);
        let s = LittleEndian::read_u32(&block[48..52]) as usize;
        let g = LittleEndian::read_u32(&block[52..56]) as usize;
        let pairs = HEADER_LEN + s + g;
        let m = usize::from(block[6]);
        assert!(m > 8);
        // lo above hi.
        let mut b = block.clone();
        b[pairs] = b[pairs + 1].wrapping_add(1);
        assert!(open(&with_crc(b)).is_err());
        // More positions than there are: the ranges and words no longer fit.
        let mut b = block.clone();
        b[6] = 65;
        assert!(open(&with_crc(b)).is_err());
        b = block.clone();
        b[6] = (m + 1) as u8;
        assert!(open(&with_crc(b)).is_err());
        // A position range that leaves a boundary key outside it.
        let mut b = block.clone();
        b[pairs + 2] = b[pairs + 3]; // the second position's lo = its hi
        assert!(open(&with_crc(b)).is_err());
        // Ranges wide enough to need more than 64 bits.
        let mut b = block.clone();
        for i in 0..m {
            b[pairs + 2 * i] = 0;
            b[pairs + 2 * i + 1] = 0xff;
        }
        assert!(open(&with_crc(b)).is_err());
        // And the block as written opens.
        assert!(open(&block).is_ok());
    }
}
