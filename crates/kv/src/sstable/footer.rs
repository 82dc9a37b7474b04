//! The fixed-size footer at the end of every table file, and block handles.
//!
//! A reader knows nothing about a table but its length, so the last 64 bytes say where
//! everything else is. The magic number identifies the file type, the version selects
//! the decoder (see [`FORMAT_VERSION`] for what each version means), and a CRC guards
//! the handles.
//!
//! ```text
//!  byte  0        8        16       24       32       40       48     52     56         64
//!        +--------+--------+--------+--------+--------+--------+------+------+----------+
//!        | index  | index  | filter | filter | props  | props  | ver- | crc  | magic    |
//!        | offset | size   | offset | size   | offset | size   | sion |      | "bloomkvT"
//!        | u64 LE | u64 LE | u64 LE | u64 LE | u64 LE | u64 LE | u32  | u32  | 8 bytes  |
//!        +--------+--------+--------+--------+--------+--------+------+------+----------+
//!  crc = CRC-32 of bytes 0..52. A table without a filter has filter offset = size = 0
//!  (no real block can start at offset 0: data blocks come first).
//! ```
//!
//! A handle's `size` excludes the block's 5-byte trailer; every block it names must end
//! (trailer included) before the footer starts.

use super::trailer::BLOCK_TRAILER_SIZE;
use super::Malformed;
use crate::coding::{get_varint, put_varint, u32_at, u64_at};

/// Bytes of the footer.
pub(crate) const FOOTER_SIZE: usize = 64;

/// The last 8 bytes of every table file.
pub(crate) const MAGIC: [u8; 8] = *b"bloomkvT";

/// The table format this code writes.
///
/// * 1: each user key at most once, keys strictly increasing; separators strictly
///   increasing.
/// * 2: several versions of one user key, ordered by key ascending and sequence number
///   descending; a key's versions may continue into the next data block, so two
///   neighbouring index separators may be equal. The properties block ends with the
///   name of the prefix extractor whose prefixes the filter holds.
/// * 3: data blocks may be LZ4-compressed (trailer type 1, see `compression.rs`).
///   Written only by a builder with compression on; otherwise tables stay version 2
///   (or 5, when their blocks are aligned).
/// * 4: as 3, and the properties block ends with the handle of a range filter block
///   (zero when there is none). Written only by a builder with a range filter, so
///   tables without one stay readable by builds that predate it.
/// * 5: as 4, and uncompressed data blocks may be preceded by zero padding that starts
///   them on a page boundary (`TableOptions::block_align`): data blocks no longer
///   follow each other byte for byte. Written only by a builder that aligns.
/// * 6: as 5, and data blocks may be ZSTD-compressed (trailer type 2, see
///   `compression.rs`). Written only by a builder that may choose ZSTD, so a build
///   that predates it refuses such a table at open, by its version, instead of
///   failing on its first ZSTD block.
/// * 7: as 6, and the properties end with the handle of a range tombstone block
///   (`range_del.rs`). Written only by a builder given range tombstones, so tables
///   without any keep their older versions; a build that predates it refuses such a
///   table at open instead of reading it without its tombstones (which would bring
///   deleted keys back).
/// * 8: as 7, and index and filter are partitioned (`partition.rs`): the footer's
///   index handle names the *top level* (one entry per partition: its last separator,
///   first data block and the handles of its index and filter partitions), its filter
///   handle a coarse filter over every key (Ribbon; cache-local Bloom in older tables); the partitions lie between the data
///   blocks and the coarse filter. The properties end with the number of partitions,
///   after the range tombstone handle, which may be zero here. Written only by a
///   builder told to partition (`TableOptions::metadata_partition`, set by a store
///   with `Options::metadata_budget`).
pub const FORMAT_VERSION: u32 = 8;

/// The version a table without compressed blocks, range filter or aligned blocks is
/// written as.
pub(crate) const UNCOMPRESSED_FORMAT_VERSION: u32 = 2;

/// The version a table with compressed blocks and no range filter is written as.
pub(crate) const COMPRESSED_FORMAT_VERSION: u32 = 3;

/// The first version whose properties may name a range filter block.
pub(crate) const RANGE_FILTER_FORMAT_VERSION: u32 = 4;

/// The version a table with aligned data blocks is written as.
pub(crate) const ALIGNED_FORMAT_VERSION: u32 = 5;

/// The version a table whose data blocks may be ZSTD-compressed is written as.
pub(crate) const ZSTD_FORMAT_VERSION: u32 = 6;

/// The first version whose properties may name a range tombstone block (and the
/// version a table holding range tombstones is written as).
pub(crate) const RANGE_DEL_FORMAT_VERSION: u32 = 7;

/// The version a table with partitioned index and filter is written as (and the first
/// whose properties end with the number of partitions).
pub(crate) const PARTITIONED_FORMAT_VERSION: u32 = 8;

/// The oldest table format this code still reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Where a block lies in a table file: its offset and its size without the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Length of the block's contents (the 5-byte trailer follows).
    pub size: u64,
}

impl BlockHandle {
    /// The offset just past the block's trailer, or `None` on overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_SIZE as u64)
    }

    /// Whether the block, trailer included, lies within `start..end` of the file.
    pub fn lies_within(&self, start: u64, end: u64) -> bool {
        self.offset >= start && self.end().is_some_and(|e| e <= end)
    }

    /// Appends the handle as two varints (the index block's encoding).
    pub(crate) fn encode_varint(&self, dst: &mut Vec<u8>) {
        put_varint(dst, self.offset);
        put_varint(dst, self.size);
    }

    /// Decodes two varints at `*pos`.
    pub(crate) fn decode_varint(src: &[u8], pos: &mut usize) -> Option<BlockHandle> {
        Some(BlockHandle {
            offset: get_varint(src, pos)?,
            size: get_varint(src, pos)?,
        })
    }
}

/// The decoded footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) index: BlockHandle,
    pub(crate) filter: Option<BlockHandle>,
    pub(crate) properties: BlockHandle,
    pub(crate) version: u32,
}

impl Footer {
    /// Encodes the footer.
    pub(crate) fn encode(&self) -> [u8; FOOTER_SIZE] {
        let mut out = [0u8; FOOTER_SIZE];
        let filter = self.filter.unwrap_or_default();
        let fields = [
            self.index.offset,
            self.index.size,
            filter.offset,
            filter.size,
            self.properties.offset,
            self.properties.size,
        ];
        for (i, v) in fields.iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        out[48..52].copy_from_slice(&self.version.to_le_bytes());
        let crc = crc32fast::hash(&out[..52]);
        out[52..56].copy_from_slice(&crc.to_le_bytes());
        out[56..64].copy_from_slice(&MAGIC);
        out
    }

    /// Decodes and validates the footer of a `file_size`-byte table.
    pub(crate) fn decode(buf: &[u8], file_size: u64) -> Result<Footer, Malformed> {
        if buf.len() != FOOTER_SIZE {
            return Err(Malformed(format!(
                "footer is {} bytes, expected {FOOTER_SIZE}",
                buf.len()
            )));
        }
        if buf[56..64] != MAGIC {
            return Err("bad magic number: not a bloomkv table".into());
        }
        let field = |i: usize| u64_at(buf, 8 * i).unwrap_or(0);
        let stored_crc = u32_at(buf, 52).unwrap_or(0);
        let crc = crc32fast::hash(&buf[..52]);
        if stored_crc != crc {
            return Err(Malformed(format!(
                "checksum mismatch (stored {stored_crc:#010x}, computed {crc:#010x})"
            )));
        }
        let version = u32_at(buf, 48).unwrap_or(0);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Malformed(format!(
                "unknown table format version {version} (this build reads \
                 {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
            )));
        }
        let handle = |i: usize| BlockHandle {
            offset: field(i),
            size: field(i + 1),
        };
        let footer = Footer {
            index: handle(0),
            filter: Some(handle(2)).filter(|h| *h != BlockHandle::default()),
            properties: handle(4),
            version,
        };
        let meta_end = file_size.saturating_sub(FOOTER_SIZE as u64);
        for (name, h) in [
            ("index", Some(footer.index)),
            ("filter", footer.filter),
            ("properties", footer.properties.into()),
        ] {
            let Some(h) = h else { continue };
            // No metadata block starts at offset 0: the data blocks come first.
            if !h.lies_within(1, meta_end) {
                return Err(Malformed(format!(
                    "{name} block handle (offset {}, size {}) points outside the \
                     {meta_end} bytes before the footer",
                    h.offset, h.size
                )));
            }
        }
        Ok(footer)
    }

    /// Where the metadata blocks start: the end of the data blocks.
    pub(crate) fn meta_start(&self) -> u64 {
        let mut start = self.index.offset.min(self.properties.offset);
        if let Some(f) = self.filter {
            start = start.min(f.offset);
        }
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Footer {
        Footer {
            index: BlockHandle {
                offset: 1000,
                size: 50,
            },
            filter: Some(BlockHandle {
                offset: 900,
                size: 95,
            }),
            properties: BlockHandle {
                offset: 1055,
                size: 40,
            },
            version: FORMAT_VERSION,
        }
    }

    #[test]
    fn footers_round_trip_with_and_without_filter() {
        let f = sample();
        assert_eq!(Footer::decode(&f.encode(), 1100 + 64), Ok(f));
        assert_eq!(f.meta_start(), 900);
        let g = Footer { filter: None, ..f };
        assert_eq!(Footer::decode(&g.encode(), 1100 + 64), Ok(g));
        assert_eq!(g.meta_start(), 1000);
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let bytes = sample().encode();
        for i in 0..FOOTER_SIZE {
            let mut bad = bytes;
            bad[i] ^= 0x40;
            assert!(Footer::decode(&bad, 1164).is_err(), "byte {i}");
        }
    }

    #[test]
    fn wrong_magic_version_and_handles_are_named() {
        let mut bad = sample().encode();
        bad[63] = b'X';
        assert!(Footer::decode(&bad, 1164).unwrap_err().0.contains("magic"));

        let bad = Footer {
            version: 9,
            ..sample()
        };
        let err = Footer::decode(&bad.encode(), 1164).unwrap_err();
        assert!(err.0.contains("version 9"), "{err}");

        // The properties block would end past the footer's start.
        let err = Footer::decode(&sample().encode(), 1099 + 64).unwrap_err();
        assert!(err.0.contains("properties"), "{err}");

        let huge = Footer {
            index: BlockHandle {
                offset: u64::MAX - 2,
                size: 10,
            },
            ..sample()
        };
        assert!(Footer::decode(&huge.encode(), 1164).is_err());
    }
}
