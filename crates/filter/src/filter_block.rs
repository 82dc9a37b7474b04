//! The SSTable filter block, format v1: a bit array and a fixed, checksummed trailer.
//!
//! A filter block is self-describing: the trailer records which layout built the bit
//! array and with how many probes, so any reader decodes any block, whatever policy
//! it was opened through. All integers little-endian:
//!
//! ```text
//!  +--------------------------------------+------------------ trailer (24 B) --------------------+
//!  | payload: W words (u64 LE), 8·W bytes | ver | lay | k | 0 | num_keys | num_bits | crc32 |
//!  +--------------------------------------+-----+-----+---+---+----------+----------+-------+
//!                                            u8    u8   u8  u8    u64        u64       u32
//!
//!  bit i of the array = (word[i / 64] >> (i % 64)) & 1
//!  ver      format version, 1
//!  lay      layout id: 0 = standard, 1 = cache-local (512-bit lines, word 8j..8j+8 = line j)
//!  k        probes per key, 1..=30
//!  0        reserved, must be zero
//!  num_keys distinct keys the filter was built from, ≤ num_bits (≥ 1 bit per key)
//!  num_bits = 64·W; a positive multiple of 64 (standard) or 512 (cache-local)
//!  crc32    CRC-32 (IEEE, crc32fast) of every byte before it
//! ```
//!
//! [`decode`] checks, before trusting any byte: the length covers a trailer and a
//! whole number of words, the version is 1, the checksum matches, the layout is known,
//! the reserved byte is zero, `k` is in range, `num_bits` equals the payload's bit
//! count and suits the layout, and `num_keys ≤ num_bits` (every policy spends at least
//! one bit per key; the bound also keeps the rate model's work small for any block). Every failure is [`FilterError::Corrupt`] with the
//! reason; nothing panics, and the only allocation (by the reader, after decoding) is
//! bounded by the block's own length.
//!
//! An empty table still gets a valid block (one zero word or line): its reader
//! answers "absent" for every key, which is exact, since the table has no keys.

use byteorder::{ByteOrder, LittleEndian};

use crate::error::FilterError;
use crate::layout::{BloomLayout, MAX_PROBES};

/// The filter block format version this crate writes and reads.
pub const FORMAT_VERSION: u8 = 1;

/// Bytes of the fixed trailer after the payload.
pub const TRAILER_LEN: usize = 24;

/// The decoded trailer of a filter block, and the payload it describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader<'a> {
    /// Layout that built the bit array.
    pub layout: BloomLayout,
    /// Probes per key.
    pub num_probes: u32,
    /// Keys the filter was built from.
    pub num_keys: u64,
    /// Bits in the array (payload length × 8).
    pub num_bits: u64,
    /// The bit array: `num_bits / 8` bytes of little-endian `u64` words.
    pub payload: &'a [u8],
}

/// Encodes a filter block from its bit array and parameters.
pub(crate) fn encode(
    layout: BloomLayout,
    num_probes: u32,
    num_keys: u64,
    words: &[u64],
) -> Vec<u8> {
    let payload_len = words.len() * 8;
    let mut out = vec![0u8; payload_len + TRAILER_LEN];
    LittleEndian::write_u64_into(words, &mut out[..payload_len]);
    let t = &mut out[payload_len..];
    t[0] = FORMAT_VERSION;
    t[1] = layout.id();
    // num_probes ≤ MAX_PROBES < 256 by construction.
    t[2] = num_probes.min(MAX_PROBES) as u8;
    t[3] = 0;
    LittleEndian::write_u64(&mut t[4..12], num_keys);
    LittleEndian::write_u64(&mut t[12..20], words.len() as u64 * 64);
    let crc = crc32fast::hash(&out[..payload_len + 20]);
    LittleEndian::write_u32(&mut out[payload_len + 20..], crc);
    out
}

/// The format version byte of a block: 1 for Bloom blocks (this module), 4 for bumped
/// Ribbon blocks and 3 for standard ones (2 for those with 128-bit rows, still read;
/// each with its own header before the same trailer). `None` if too short to have one.
pub fn format_version(block: &[u8]) -> Option<u8> {
    block
        .len()
        .checked_sub(TRAILER_LEN)
        .and_then(|t| block.get(t))
        .copied()
}

fn corrupt(msg: impl Into<String>) -> FilterError {
    FilterError::Corrupt(format!("filter block: {}", msg.into()))
}

/// Validates a filter block and returns its trailer fields and payload.
///
/// ```
/// use bloomkv_filter::{filter_block, BloomPolicy, FilterPolicy};
///
/// let mut builder = BloomPolicy::new(10.0)?.new_builder();
/// builder.add_key(b"k1");
/// let block = builder.finish();
/// let header = filter_block::decode(&block)?;
/// assert_eq!((header.num_keys, header.num_probes, header.num_bits), (1, 6, 512));
///
/// let mut damaged = block.clone();
/// damaged[3] ^= 0x10;
/// assert!(filter_block::decode(&damaged).is_err());
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
pub fn decode(block: &[u8]) -> Result<BlockHeader<'_>, FilterError> {
    if block.len() < TRAILER_LEN {
        return Err(corrupt(format!(
            "{} bytes, shorter than the {TRAILER_LEN}-byte trailer",
            block.len()
        )));
    }
    let payload_len = block.len() - TRAILER_LEN;
    if !payload_len.is_multiple_of(8) {
        return Err(corrupt(format!(
            "payload of {payload_len} bytes is not a whole number of 64-bit words"
        )));
    }
    let (payload, t) = block.split_at(payload_len);
    if t[0] != FORMAT_VERSION {
        return Err(corrupt(format!(
            "unsupported format version {} (this reader knows {FORMAT_VERSION})",
            t[0]
        )));
    }
    let stored = LittleEndian::read_u32(&t[20..24]);
    let actual = crc32fast::hash(&block[..payload_len + 20]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    let layout =
        BloomLayout::from_id(t[1]).ok_or_else(|| corrupt(format!("unknown layout id {}", t[1])))?;
    if t[3] != 0 {
        return Err(corrupt("reserved trailer byte is not zero"));
    }
    let num_probes = u32::from(t[2]);
    if num_probes == 0 || num_probes > MAX_PROBES {
        return Err(corrupt(format!(
            "probe count {num_probes} outside 1..={MAX_PROBES}"
        )));
    }
    let num_keys = LittleEndian::read_u64(&t[4..12]);
    let num_bits = LittleEndian::read_u64(&t[12..20]);
    let payload_bits = payload_len as u64 * 8;
    if num_bits != payload_bits {
        return Err(corrupt(format!(
            "trailer says {num_bits} bits but the payload holds {payload_bits}"
        )));
    }
    let g = layout.granularity_bits();
    if num_bits == 0 || !num_bits.is_multiple_of(g) {
        return Err(corrupt(format!(
            "{num_bits} bits is not a positive multiple of {g} for the {} layout",
            layout.name()
        )));
    }
    if num_keys > num_bits {
        return Err(corrupt(format!(
            "{num_keys} keys in {num_bits} bits: more keys than bits"
        )));
    }
    Ok(BlockHeader {
        layout,
        num_probes,
        num_keys,
        num_bits,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(layout: BloomLayout, probes: u32, words: usize) -> Vec<u8> {
        let w: Vec<u64> = (0..words as u64).map(|i| i * 0x0101_0101).collect();
        encode(layout, probes, 3, &w)
    }

    fn reason(b: &[u8]) -> String {
        match decode(b) {
            Err(FilterError::Corrupt(r)) => r,
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    /// Re-seals a hand-edited block with a correct CRC, to reach the checks after it.
    fn reseal(mut b: Vec<u8>) -> Vec<u8> {
        let n = b.len();
        let crc = crc32fast::hash(&b[..n - 4]);
        LittleEndian::write_u32(&mut b[n - 4..], crc);
        b
    }

    #[test]
    fn round_trips_the_trailer() {
        let b = block(BloomLayout::CacheLocal, 6, 16);
        let h = decode(&b).unwrap();
        assert_eq!(h.layout, BloomLayout::CacheLocal);
        assert_eq!((h.num_probes, h.num_keys, h.num_bits), (6, 3, 1024));
        assert_eq!(h.payload.len(), 128);
        assert_eq!(b.len(), 128 + TRAILER_LEN);
    }

    #[test]
    fn each_check_names_its_reason() {
        assert!(reason(&[0u8; 10]).contains("shorter"));
        assert!(reason(&[0u8; 27]).contains("whole number"));

        let good = block(BloomLayout::Standard, 7, 2);
        let t = 16;
        let mut b = good.clone();
        b[t] = 2;
        assert!(reason(&b).contains("version"));
        let mut b = good.clone();
        b[0] ^= 1;
        assert!(reason(&b).contains("checksum"));
        let mut b = good.clone();
        b[t + 1] = 9;
        assert!(reason(&reseal(b)).contains("layout"));
        let mut b = good.clone();
        b[t + 3] = 1;
        assert!(reason(&reseal(b)).contains("reserved"));
        for k in [0u8, 31, 255] {
            let mut b = good.clone();
            b[t + 2] = k;
            assert!(reason(&reseal(b)).contains("probe count"));
        }
        let mut b = good.clone();
        LittleEndian::write_u64(&mut b[t + 12..t + 20], 1 << 40);
        assert!(reason(&reseal(b)).contains("payload holds"));
        // 128 bits is fine for standard, not for 512-bit lines.
        let mut b = good.clone();
        b[t + 1] = BloomLayout::CacheLocal.id();
        assert!(reason(&reseal(b)).contains("multiple of 512"));
        // No payload at all.
        let b = encode(BloomLayout::Standard, 7, 0, &[]);
        assert!(reason(&b).contains("positive multiple"));
        // More keys than bits: 128 bits cannot hold 129 keys at >= 1 bit each.
        for keys in [129, 1 << 36, u64::MAX] {
            let mut b = good.clone();
            LittleEndian::write_u64(&mut b[t + 4..t + 12], keys);
            assert!(reason(&reseal(b)).contains("more keys than bits"));
        }
        let mut b = good.clone();
        LittleEndian::write_u64(&mut b[t + 4..t + 12], 128);
        assert_eq!(decode(&reseal(b)).unwrap().num_keys, 128);
    }
}
