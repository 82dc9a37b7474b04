//! Block compression: how a data block is packed on disk and unpacked when read.
//!
//! A data block is compressed whole, after it is built and before its trailer is
//! appended; the trailer's type byte says which form was written (format version 3):
//!
//! ```text
//!  type 0 (none): | block contents                                   | 0 | crc |
//!  type 1 (LZ4):  | raw_len: u32 LE | LZ4 block of the contents      | 1 | crc |
//!  type 2 (ZSTD): | raw_len: u32 LE | one ZSTD frame of the contents | 2 | crc |
//!                  raw_len = length of the contents once decompressed
//! ```
//!
//! ZSTD (format version 6) is written by `ruzstd`, a pure-Rust encoder and decoder,
//! so the default build stays free of C. Its encoder implements one strategy, about
//! zstd's level 1 (`CompressionLevel::Fastest`, ruzstd 0.9); every
//! [`Compression::Zstd`] level is written with it for now, and the level is kept in
//! the settings so a stronger encoder can honour it without a format change (the
//! decoder reads any level: a frame says nothing about the level that made it). The
//! frame carries no checksum of its own (the trailer's CRC covers it), and the
//! decoder accepts a window of at most [`MAX_ZSTD_WINDOW`] bytes, so a frame that
//! passed the CRC but claims a huge window is refused before any buffer is reserved.
//!
//! The writer keeps a block raw when LZ4 saves less than an eighth of it (12.5%,
//! RocksDB's rule): a block that barely shrinks would cost decompression on every
//! read for almost no space. The CRC covers the stored bytes and the type, so damage
//! is caught before decompression starts. Even so, the reader trusts nothing: the
//! declared length must fit what that many compressed bytes can expand to (LZ4 emits
//! at most 255 bytes per input byte) and the block size limit before anything is
//! allocated, and decompression must produce exactly that many bytes.
//!
//! The encoder is the store's own ([`super::lz4`]): `lz4_flex`'s picks overlapping
//! matches inside runs of one byte, which its decoder copies a byte at a time; ours
//! avoids them, and the benchmark's present get from LZ4 blocks went from 1.60–1.70×
//! the uncompressed get to 1.08–1.11× (`examples/compression_cost.rs`, no cache,
//! three alternating pairs of runs), its tables from 0.606× raw to 0.565×.
//!
//! The decoder is `lz4_flex`'s fast one with its bounds checks on (`checked-decode`),
//! not its `safe-decode` one: a present get without a block cache costs 1.24–1.26×
//! the uncompressed get with it against 1.38–1.44× with the safe decoder
//! (`examples/compression_cost.rs`, two alternating pairs of runs). The fast decoder's
//! one advisory (RUSTSEC-2026-0041: an unchecked match offset could copy uninitialized
//! memory into the output on invalid input) is fixed from lz4_flex 0.11.6 / 0.12.1 on;
//! this crate requires 0.13. The output is a fresh buffer, never a reused one, and a
//! block reaches the decoder only after its CRC passed.
//!
//! The stored bytes are read into a buffer the thread keeps for its next read
//! (`file.rs`, `SPARE`): they are only decompressed out of, so the next block read
//! neither allocates nor zeroes them again. Measured on the benchmark's 1M-key store
//! written with LZ4 (`cargo run --release -- bench --filters cache-local
//! --prefix-scans 0 --range-scans 0 --compression lz4 --dir D`), then `cargo run
//! --release --example point_get -- D/cache-local-bloom 1000000 3 0 present` (no
//! cache: every get reads and decompresses a block), the builds before and after
//! alternated five times: 1,972–2,444 → 1,926–2,338 ns per get, 2–9% less in each
//! pair; a raw store's gets measured the same (three pairs).

use super::format::MAX_BLOCK_SIZE;
pub(crate) use super::lz4::Lz4Writer;
use super::trailer::BLOCK_TRAILER_SIZE;
use super::Malformed;

/// How a data block is stored on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as built.
    #[default]
    None,
    /// LZ4 block format (`lz4_flex`), kept only where it saves at least 12.5% of the
    /// block (else the block is stored raw, as RocksDB does).
    Lz4,
    /// One ZSTD frame per block (`ruzstd`, pure Rust), kept under the same 12.5% rule.
    /// Smaller than LZ4, slower to decode: RocksDB's usual choice for the bottommost
    /// level ([`Options::bottommost_compression`](crate::Options::bottommost_compression)).
    /// `level` is zstd's, 1 to 22; the pure-Rust encoder writes every level with its
    /// one strategy (about level 1) for now (see `docs/FORMAT.md`).
    Zstd {
        /// zstd's compression level, 1 (fastest) to 22.
        level: i32,
    },
}

/// The lowest and highest ZSTD level [`Compression::Zstd`] accepts.
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

impl std::fmt::Display for Compression {
    /// The spelling the settings file and the command line use: `None`, `Lz4`,
    /// `Zstd(3)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("None"),
            Compression::Lz4 => f.write_str("Lz4"),
            Compression::Zstd { level } => write!(f, "Zstd({level})"),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;

    /// Reads what [`Display`](std::fmt::Display) writes (case-insensitive), and `zstd`
    /// alone as level 3, zstd's default.
    fn from_str(s: &str) -> Result<Compression, String> {
        let lower = s.trim().to_ascii_lowercase();
        let level = match lower.as_str() {
            "none" => return Ok(Compression::None),
            "lz4" => return Ok(Compression::Lz4),
            "zstd" => 3,
            _ => lower
                .strip_prefix("zstd(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|l| l.trim().parse::<i32>().ok())
                .filter(|l| ZSTD_LEVELS.contains(l))
                .ok_or_else(|| {
                    format!(
                        "unknown compression {s:?} (none, lz4, zstd or zstd(N) with N in \
                         {}..={})",
                        ZSTD_LEVELS.start(),
                        ZSTD_LEVELS.end()
                    )
                })?,
        };
        Ok(Compression::Zstd { level })
    }
}

impl Compression {
    /// The bytes a data block whose contents are `raw` is stored as, before its
    /// trailer: `None` if it is stored raw (no compression, or LZ4 would save less
    /// than an eighth of it, or the block is longer than a reader unpacks), else the
    /// type-1 form (the length prefix and the store's own LZ4 block). For sizing a
    /// store on one's own data and for comparing LZ4 writers.
    ///
    /// ```
    /// use bloomkv_kv::Compression;
    /// let block = b"user000001 value value value value value value value value ".repeat(60);
    /// let packed = Compression::Lz4.pack_block(&block).expect("repetitive: it shrinks");
    /// assert!(packed.len() < block.len() / 4);
    /// assert_eq!(Compression::None.pack_block(&block), None);
    /// ```
    pub fn pack_block(self, raw: &[u8]) -> Option<Vec<u8>> {
        match self {
            Compression::None => None,
            Compression::Lz4 => {
                let mut out = Vec::new();
                compress_lz4(&mut Lz4Writer::default(), raw, &mut out).then_some(out)
            }
            Compression::Zstd { .. } => {
                let mut out = Vec::new();
                compress_zstd(raw, &mut out).then_some(out)
            }
        }
    }

    /// The contents of a block [`pack_block`](Self::pack_block) packed with this
    /// compression, checked as a reader checks it (declared length, window, exact
    /// output). For timing decoders on one's own data; the store itself goes through
    /// the block trailer, which says which form a block is in.
    ///
    /// ```
    /// use bloomkv_kv::Compression;
    /// let block = b"user000001 value value value value value value value value ".repeat(60);
    /// let zstd = Compression::Zstd { level: 3 };
    /// let packed = zstd.pack_block(&block).expect("repetitive: it shrinks");
    /// assert_eq!(zstd.unpack_block(&packed)?, block);
    /// assert!(Compression::Lz4.unpack_block(&packed).is_err());
    /// # Ok::<(), bloomkv_kv::Error>(())
    /// ```
    pub fn unpack_block(self, packed: &[u8]) -> crate::Result<Vec<u8>> {
        let unpacked = match self {
            Compression::None => Ok(packed.to_vec()),
            Compression::Lz4 => decompress_lz4(packed),
            Compression::Zstd { .. } => decompress_zstd(packed),
        };
        unpacked.map_err(|m| crate::Error::InvalidArgument(m.0))
    }

    /// Whether this is a ZSTD setting (whatever its level).
    pub(crate) fn is_zstd(self) -> bool {
        matches!(self, Compression::Zstd { .. })
    }
}

/// Bytes of the length prefix in front of an LZ4 block.
const RAW_LEN_SIZE: usize = 4;

/// The most bytes one byte of an LZ4 block can expand to.
pub(crate) const LZ4_MAX_EXPANSION: u64 = 255;

/// The smallest LZ4 data block on disk: its length prefix, one byte of LZ4 and the
/// trailer.
pub(crate) const MIN_LZ4_BLOCK_LEN: u64 = (RAW_LEN_SIZE + 1 + BLOCK_TRAILER_SIZE) as u64;

/// The longest block an LZ4 block may unpack to: a block closes once it reaches
/// `MAX_BLOCK_SIZE`, so with its last entry (at most `MAX_ENTRY_BYTES`) and restart
/// array it stays near twice that. The writer keeps a longer block raw and the reader
/// refuses a longer claim, so the two agree on every block.
const MAX_LZ4_RAW_LEN: usize = MAX_BLOCK_SIZE * 2;

/// Compresses `raw` into `out` (cleared first) in the type-1 form with `writer`'s
/// match finder ([`Lz4Writer`]). `false`, with `out` unspecified, when the result
/// would not save at least 12.5% of `raw`, or `raw` is longer than a reader unpacks.
pub(crate) fn compress_lz4(writer: &mut Lz4Writer, raw: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(raw_len) = u32::try_from(raw.len())
        .ok()
        .filter(|_| raw.len() <= MAX_LZ4_RAW_LEN)
    else {
        return false;
    };
    out.extend_from_slice(&raw_len.to_le_bytes());
    writer.compress(raw, out);
    out.len() <= raw.len() - raw.len() / 8
}

/// Decompresses a type-1 block's stored bytes (the trailer already checked).
pub(crate) fn decompress_lz4(stored: &[u8]) -> Result<Vec<u8>, Malformed> {
    let Some((len_bytes, body)) = stored.split_first_chunk::<RAW_LEN_SIZE>() else {
        return Err(Malformed(format!(
            "{} bytes cannot hold an LZ4 block's length",
            stored.len()
        )));
    };
    let raw_len = u32::from_le_bytes(*len_bytes) as usize;
    let bound = body.len().saturating_mul(LZ4_MAX_EXPANSION as usize);
    if raw_len == 0 || raw_len > bound || raw_len > MAX_LZ4_RAW_LEN {
        return Err(Malformed(format!(
            "LZ4 block of {} bytes claims {raw_len} bytes decompressed",
            body.len()
        )));
    }
    match lz4_flex::block::decompress(body, raw_len) {
        Ok(raw) if raw.len() == raw_len => Ok(raw),
        Ok(raw) => Err(Malformed(format!(
            "LZ4 block decompressed to {} bytes, not the {raw_len} it claims",
            raw.len()
        ))),
        Err(e) => Err(Malformed(format!("LZ4 block does not decompress: {e}"))),
    }
}

/// The largest window a ZSTD frame in a data block may declare (8 MiB, what zstd
/// itself uses up to level 19 for inputs this large). The pure-Rust encoder declares
/// 128 KiB whatever the block's size; the bound keeps what a decoder reserves for one
/// block small even for a crafted frame that passed the CRC.
pub(crate) const MAX_ZSTD_WINDOW: u64 = 8 << 20;

/// The smallest ZSTD data block on disk: its length prefix, a frame's magic number,
/// its shortest header (2 bytes), one block header (3 bytes) and one byte, and the
/// trailer. A bound for sanity checks, not a promise that so short a frame exists.
pub(crate) const MIN_ZSTD_BLOCK_LEN: u64 =
    (RAW_LEN_SIZE + 4 + 2 + 3 + 1 + BLOCK_TRAILER_SIZE) as u64;

/// The longest block a ZSTD block unpacks to (the same limit as LZ4's).
pub(crate) const MAX_ZSTD_RAW_LEN: usize = MAX_LZ4_RAW_LEN;

/// Compresses `raw` into `out` (cleared first) in the type-2 form. `false`, with
/// `out` unspecified, when the result would not save at least 12.5% of `raw`, or `raw`
/// is longer than a reader unpacks (or empty: a block never is).
pub(crate) fn compress_zstd(raw: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(raw_len) = u32::try_from(raw.len())
        .ok()
        .filter(|_| !raw.is_empty() && raw.len() <= MAX_ZSTD_RAW_LEN)
    else {
        return false;
    };
    out.extend_from_slice(&raw_len.to_le_bytes());
    ruzstd::encoding::compress(raw, &mut *out, ruzstd::encoding::CompressionLevel::Fastest);
    out.len() <= raw.len() - raw.len() / 8
}

thread_local! {
    /// One decoder per thread: its tables are allocated once, not for every block.
    static ZSTD_DECODER: std::cell::RefCell<ruzstd::decoding::FrameDecoder> = {
        let mut d = ruzstd::decoding::FrameDecoder::new();
        d.set_max_window_size(MAX_ZSTD_WINDOW);
        std::cell::RefCell::new(d)
    };
}

/// Decompresses a type-2 block's stored bytes (the trailer already checked): the
/// declared length must be positive and within the block limit before the output is
/// allocated, and the frame must fill exactly that many bytes.
pub(crate) fn decompress_zstd(stored: &[u8]) -> Result<Vec<u8>, Malformed> {
    let Some((len_bytes, body)) = stored.split_first_chunk::<RAW_LEN_SIZE>() else {
        return Err(Malformed(format!(
            "{} bytes cannot hold a ZSTD block's length",
            stored.len()
        )));
    };
    let raw_len = u32::from_le_bytes(*len_bytes) as usize;
    if raw_len == 0 || raw_len > MAX_ZSTD_RAW_LEN {
        return Err(Malformed(format!(
            "ZSTD block of {} bytes claims {raw_len} bytes decompressed",
            body.len()
        )));
    }
    let mut raw = vec![0u8; raw_len];
    let written = ZSTD_DECODER
        .with(|d| match d.try_borrow_mut() {
            Ok(mut d) => d.decode_all(body, &mut raw),
            // Only a decode that re-entered this one could hold it: use a fresh one.
            Err(_) => {
                let mut fresh = ruzstd::decoding::FrameDecoder::new();
                fresh.set_max_window_size(MAX_ZSTD_WINDOW);
                fresh.decode_all(body, &mut raw)
            }
        })
        .map_err(|e| Malformed(format!("ZSTD block does not decompress: {e}")))?;
    if written != raw_len {
        return Err(Malformed(format!(
            "ZSTD block decompressed to {written} bytes, not the {raw_len} it claims"
        )));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressible(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"abcdefgh"[(i / 3) % 8]).collect()
    }

    fn incompressible(n: usize) -> Vec<u8> {
        crate::sstable::test_util::noise(0x9E37_79B9_7F4A_7C15, n)
    }

    #[test]
    fn pack_block_is_what_the_table_writer_stores() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_lz4(&mut Lz4Writer::default(), &raw, &mut out));
        let packed = Compression::Lz4.pack_block(&raw).unwrap();
        assert_eq!(packed, out);
        assert_eq!(decompress_lz4(&packed).unwrap(), raw);
        assert_eq!(Compression::Lz4.pack_block(&incompressible(4096)), None);
        assert_eq!(Compression::None.pack_block(&raw), None);
    }

    #[test]
    fn compressible_blocks_round_trip_and_shrink() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_lz4(&mut Lz4Writer::default(), &raw, &mut out));
        assert!(out.len() < raw.len() / 4, "{} bytes", out.len());
        assert_eq!(decompress_lz4(&out).unwrap(), raw);
    }

    #[test]
    fn blocks_packed_by_lz4_flex_still_read() {
        // Tables written before the store had its own LZ4 writer hold lz4_flex's
        // choice of matches: the same format, read by the same decoder.
        let raw = compressible(4096);
        let mut old = (raw.len() as u32).to_le_bytes().to_vec();
        old.extend_from_slice(&lz4_flex::block::compress(&raw));
        let mut ours = Vec::new();
        assert!(compress_lz4(&mut Lz4Writer::default(), &raw, &mut ours));
        assert_ne!(old, ours, "the writers differ, or this test proves nothing");
        assert_eq!(decompress_lz4(&old).unwrap(), raw);
        assert_eq!(decompress_lz4(&ours).unwrap(), raw);
    }

    /// The writer never packs a block the reader would refuse to unpack: one byte
    /// over the reader's limit stays raw (the check comes before any work, and the
    /// zeroed buffer is never touched), and the reader refuses a claim of that length.
    #[test]
    fn a_block_longer_than_a_reader_unpacks_stays_raw() {
        let raw = vec![0u8; MAX_LZ4_RAW_LEN + 1];
        let mut out = Vec::new();
        assert!(!compress_lz4(&mut Lz4Writer::default(), &raw, &mut out));
        let mut claim = (raw.len() as u32).to_le_bytes().to_vec();
        claim.resize(RAW_LEN_SIZE + raw.len() / 255 + 1, 0);
        let err = decompress_lz4(&claim).unwrap_err();
        assert!(err.0.contains("claims"), "{err}");
    }

    #[test]
    fn incompressible_blocks_are_left_raw() {
        let raw = incompressible(4096);
        let mut out = Vec::new();
        assert!(!compress_lz4(&mut Lz4Writer::default(), &raw, &mut out));
    }

    #[test]
    fn a_lying_length_is_refused_before_any_allocation() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_lz4(&mut Lz4Writer::default(), &raw, &mut out));
        for claim in [0u32, 4095, 4097, u32::MAX] {
            let mut bad = out.clone();
            bad[..4].copy_from_slice(&claim.to_le_bytes());
            assert!(decompress_lz4(&bad).is_err(), "claim {claim}");
        }
        assert!(decompress_lz4(&out[..3]).is_err());
    }

    #[test]
    fn damaged_lz4_bytes_never_panic() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_lz4(&mut Lz4Writer::default(), &raw, &mut out));
        // Without the CRC's protection: every flip either fails or yields 4096 bytes.
        for i in 4..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[i] ^= 1 << bit;
                if let Ok(v) = decompress_lz4(&bad) {
                    assert_eq!(v.len(), raw.len());
                }
            }
        }
    }

    #[test]
    fn zstd_blocks_round_trip_shrink_and_stay_raw_when_they_do_not() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_zstd(&raw, &mut out));
        assert!(out.len() < raw.len() / 4, "{} bytes", out.len());
        assert_eq!(decompress_zstd(&out).unwrap(), raw);
        assert_eq!(Compression::Zstd { level: 3 }.pack_block(&raw), Some(out));
        assert!(!compress_zstd(&incompressible(4096), &mut Vec::new()));
        assert!(!compress_zstd(&[], &mut Vec::new()));
        assert!(!compress_zstd(
            &vec![0u8; MAX_ZSTD_RAW_LEN + 1],
            &mut Vec::new()
        ));
    }

    #[test]
    fn a_lying_zstd_length_is_refused() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_zstd(&raw, &mut out));
        for claim in [0u32, 4095, 4097, (MAX_ZSTD_RAW_LEN + 1) as u32, u32::MAX] {
            let mut bad = out.clone();
            bad[..4].copy_from_slice(&claim.to_le_bytes());
            assert!(decompress_zstd(&bad).is_err(), "claim {claim}");
        }
        assert!(decompress_zstd(&out[..3]).is_err());
        assert!(decompress_zstd(&out[..4]).is_err(), "no frame at all");
        assert!(
            decompress_zstd(&out[..out.len() - 1]).is_err(),
            "a cut frame"
        );
    }

    #[test]
    fn damaged_zstd_bytes_never_panic() {
        let raw = compressible(4096);
        let mut out = Vec::new();
        assert!(compress_zstd(&raw, &mut out));
        // Without the CRC's protection: every flip either fails or yields 4096 bytes.
        for i in 4..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[i] ^= 1 << bit;
                if let Ok(v) = decompress_zstd(&bad) {
                    assert_eq!(v.len(), raw.len());
                }
            }
        }
    }

    #[test]
    fn a_frame_claiming_a_huge_window_is_refused() {
        // A frame header (magic, descriptor: window descriptor present, no content
        // size) whose window descriptor asks for 2^41 bytes.
        let mut stored = 4096u32.to_le_bytes().to_vec();
        stored.extend_from_slice(&[0x28, 0xB5, 0x2F, 0xFD, 0x00, 0xF8]);
        stored.extend_from_slice(&[0x01, 0x00, 0x00]); // a last, empty raw block
        let err = decompress_zstd(&stored).unwrap_err();
        assert!(err.0.contains("ZSTD"), "{err}");
    }

    #[test]
    fn compressions_are_spelled_and_read_back() {
        for c in [
            Compression::None,
            Compression::Lz4,
            Compression::Zstd { level: 1 },
            Compression::Zstd { level: 22 },
        ] {
            assert_eq!(c.to_string().parse::<Compression>(), Ok(c));
        }
        assert_eq!("zstd".parse(), Ok(Compression::Zstd { level: 3 }));
        assert_eq!("LZ4".parse(), Ok(Compression::Lz4));
        for bad in ["zstd(0)", "zstd(23)", "zstd(x)", "zlib", ""] {
            assert!(bad.parse::<Compression>().is_err(), "{bad}");
        }
    }
}
