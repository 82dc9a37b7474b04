//! The checksummed frame that stores a standalone filter: header, words, CRC-32.
//!
//! Shared by [`BloomFilter`](crate::BloomFilter) (kind 1, one bit per slot) and
//! [`CountingBloomFilter`](crate::CountingBloomFilter) (kind 2, four bits per slot).
//! All integers little-endian:
//!
//! ```text
//! offset  size  field
//!      0     4  magic "BKVF"
//!      4     1  version: 1 or 2, the probe rule (see `standalone_probes`)
//!      5     1  kind: 1 = bloom, 2 = counting
//!      6     2  reserved = 0
//!      8     4  num_hashes (u32)
//!     12     8  size: bits (bloom) or counters (counting), 1..=2^48
//!     20     8  items (u64)
//!     28   8·W  payload words, W = ceil(size · slot_bits / 64)
//! 28+8W     4  CRC-32 (crc32fast, IEEE) of bytes 0 .. 28+8W
//! ```
//!
//! Both versions share this layout; the version only says where an item's probes land.
//!
//! Decoding checks, in order: minimum length, magic, version, checksum, kind,
//! reserved bytes, size range and exact total length for that size. Only then is the
//! payload copied, so the allocation is bounded by the input's own length; the slack
//! bits after the last slot are checked on that copy, and must be zero.

use byteorder::{ByteOrder, LittleEndian};

use crate::error::FilterError;
use crate::sizing::MAX_NUM_BITS;
use crate::standalone_probes::ProbeRule;

/// `"BKVF"`: bloomkv filter.
pub(crate) const MAGIC: [u8; 4] = *b"BKVF";
pub(crate) const HEADER_LEN: usize = 28;
pub(crate) const CRC_LEN: usize = 4;

/// Which filter a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKind {
    Bloom,
    Counting,
}

impl FrameKind {
    fn id(self) -> u8 {
        match self {
            FrameKind::Bloom => 1,
            FrameKind::Counting => 2,
        }
    }

    /// Bits per slot: one per bit, four per counter.
    fn slot_bits(self) -> u64 {
        match self {
            FrameKind::Bloom => 1,
            FrameKind::Counting => 4,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FrameKind::Bloom => "bloom filter",
            FrameKind::Counting => "counting bloom filter",
        }
    }
}

/// The header fields of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub kind: FrameKind,
    /// The probe rule, recorded as the frame version.
    pub rule: ProbeRule,
    pub num_hashes: u32,
    pub size: u64,
    pub items: u64,
}

/// Payload words needed for `size` slots of `kind` (`size` ≤ 2^48, so no overflow).
pub(crate) fn payload_words(kind: FrameKind, size: u64) -> u64 {
    (size * kind.slot_bits()).div_ceil(64)
}

/// Writes header, words and CRC.
pub(crate) fn encode(header: &FrameHeader, words: &[u64]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN + words.len() * 8 + CRC_LEN];
    out[0..4].copy_from_slice(&MAGIC);
    out[4] = header.rule.frame_version();
    out[5] = header.kind.id();
    // out[6..8]: reserved, zero
    LittleEndian::write_u32(&mut out[8..12], header.num_hashes);
    LittleEndian::write_u64(&mut out[12..20], header.size);
    LittleEndian::write_u64(&mut out[20..28], header.items);
    let body_end = HEADER_LEN + words.len() * 8;
    LittleEndian::write_u64_into(words, &mut out[HEADER_LEN..body_end]);
    let crc = crc32fast::hash(&out[..body_end]);
    LittleEndian::write_u32(&mut out[body_end..], crc);
    out
}

fn corrupt(what: &str, msg: String) -> FilterError {
    FilterError::Corrupt(format!("{what}: {msg}"))
}

/// Validates a frame of `expected` kind and returns its header and words.
pub(crate) fn decode(
    bytes: &[u8],
    expected: FrameKind,
) -> Result<(FrameHeader, Vec<u64>), FilterError> {
    let what = expected.name();
    if bytes.len() < HEADER_LEN + CRC_LEN {
        return Err(corrupt(
            what,
            format!(
                "{} bytes, shorter than the {}-byte header and checksum",
                bytes.len(),
                HEADER_LEN + CRC_LEN
            ),
        ));
    }
    if bytes[0..4] != MAGIC {
        return Err(corrupt(what, "bad magic number".into()));
    }
    let Some(rule) = ProbeRule::from_frame_version(bytes[4]) else {
        return Err(corrupt(what, format!("unsupported version {}", bytes[4])));
    };
    let body_end = bytes.len() - CRC_LEN;
    let stored = LittleEndian::read_u32(&bytes[body_end..]);
    let actual = crc32fast::hash(&bytes[..body_end]);
    if stored != actual {
        return Err(corrupt(
            what,
            format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    if bytes[5] != expected.id() {
        return Err(corrupt(
            what,
            format!("kind {} where {} was expected", bytes[5], expected.id()),
        ));
    }
    if bytes[6] != 0 || bytes[7] != 0 {
        return Err(corrupt(what, "reserved bytes are not zero".into()));
    }
    let header = FrameHeader {
        kind: expected,
        rule,
        num_hashes: LittleEndian::read_u32(&bytes[8..12]),
        size: LittleEndian::read_u64(&bytes[12..20]),
        items: LittleEndian::read_u64(&bytes[20..28]),
    };
    if header.size == 0 || header.size > MAX_NUM_BITS {
        return Err(corrupt(
            what,
            format!("size {} outside 1..={MAX_NUM_BITS}", header.size),
        ));
    }
    let words = payload_words(expected, header.size);
    let payload_len = (body_end - HEADER_LEN) as u64;
    if payload_len != words * 8 {
        return Err(corrupt(
            what,
            format!(
                "payload is {payload_len} bytes but size {} needs {}",
                header.size,
                words * 8
            ),
        ));
    }
    // Length is now proven: the allocation below is bounded by the input.
    let mut out = vec![0u64; (payload_len / 8) as usize];
    LittleEndian::read_u64_into(&bytes[HEADER_LEN..body_end], &mut out);
    let used_bits = header.size * expected.slot_bits();
    let slack = words * 64 - used_bits;
    if slack > 0 {
        let last = out.last().copied().unwrap_or(0);
        if last >> (64 - slack) != 0 {
            return Err(corrupt(what, "bits set beyond the declared size".into()));
        }
    }
    Ok((header, out))
}
