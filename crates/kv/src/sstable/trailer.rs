//! The 5-byte trailer that follows every block on disk.
//!
//! ```text
//!  +----------------+------------------+-----------------------------+
//!  | block contents | type: u8         | crc: u32 LE                 |
//!  | (size bytes)   | 0 = uncompressed | CRC-32 of contents and type |
//!  |                | 1 = LZ4 (data    |                             |
//!  |                | blocks, v3)      |                             |
//!  |                | 2 = ZSTD (data   |                             |
//!  |                | blocks, v6)      |                             |
//!  +----------------+------------------+-----------------------------+
//! ```
//!
//! A block handle's `size` counts the contents only; a reader fetches `size + 5` bytes in
//! one positioned read and checks the trailer before decoding anything.

use super::Malformed;

/// Bytes of trailer after each block.
pub(crate) const BLOCK_TRAILER_SIZE: usize = 5;

/// Stored as built: every metadata block, and data blocks unless compressed.
pub(crate) const NO_COMPRESSION: u8 = 0;

/// A data block compressed with LZ4 (format version 3; see `compression.rs`).
pub(crate) const LZ4_COMPRESSION: u8 = 1;

/// A data block compressed with ZSTD (format version 6; see `compression.rs`).
pub(crate) const ZSTD_COMPRESSION: u8 = 2;

/// Appends the trailer for the uncompressed block occupying `buf[start..]`.
pub(crate) fn seal(buf: &mut Vec<u8>, start: usize) {
    seal_as(buf, start, NO_COMPRESSION);
}

/// Appends the trailer, with type `kind`, for the block occupying `buf[start..]`.
pub(crate) fn seal_as(buf: &mut Vec<u8>, start: usize, kind: u8) {
    buf.push(kind);
    let crc = crc32fast::hash(&buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
}

/// Checks the trailer of an uncompressed block at the end of `sealed` and returns the
/// length of the contents.
pub(crate) fn check(sealed: &[u8]) -> Result<usize, Malformed> {
    match check_data(sealed)? {
        (len, NO_COMPRESSION) => Ok(len),
        (_, kind) => Err(Malformed(format!(
            "compression type {kind} where only uncompressed blocks may be"
        ))),
    }
}

/// Checks the trailer of a data block at the end of `sealed` and returns the length of
/// the stored contents and their compression type (one this code knows).
pub(crate) fn check_data(sealed: &[u8]) -> Result<(usize, u8), Malformed> {
    let Some(len) = sealed.len().checked_sub(BLOCK_TRAILER_SIZE) else {
        return Err(Malformed(format!(
            "{} bytes cannot hold a block trailer",
            sealed.len()
        )));
    };
    let kind = sealed[len];
    let stored = u32::from_le_bytes([
        sealed[len + 1],
        sealed[len + 2],
        sealed[len + 3],
        sealed[len + 4],
    ]);
    let actual = crc32fast::hash(&sealed[..=len]);
    if stored != actual {
        return Err(Malformed(format!(
            "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        )));
    }
    if !matches!(kind, NO_COMPRESSION | LZ4_COMPRESSION | ZSTD_COMPRESSION) {
        return Err(Malformed(format!("unknown compression type {kind}")));
    }
    Ok((len, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_blocks_check_and_every_flip_is_caught() {
        let mut buf = b"prefix".to_vec();
        seal(&mut buf, 0);
        let mut block = b"hello block".to_vec();
        seal(&mut block, 0);
        assert_eq!(check(&block), Ok(11));
        for i in 0..block.len() {
            for bit in 0..8 {
                let mut bad = block.clone();
                bad[i] ^= 1 << bit;
                assert!(check(&bad).is_err(), "flip of bit {bit} in byte {i}");
            }
        }
        assert!(check(&block[..4]).is_err());
    }

    #[test]
    fn an_unknown_compression_type_is_refused() {
        let mut block = b"abc".to_vec();
        block.push(7);
        let crc = crc32fast::hash(&block);
        block.extend_from_slice(&crc.to_le_bytes());
        assert!(check(&block).unwrap_err().0.contains("compression type 7"));
    }
}
