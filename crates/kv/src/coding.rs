//! Variable-length integers (LEB128 "varints") and fixed-width little-endian reads.
//!
//! A varint stores 7 bits per byte, least significant group first; the high bit of a
//! byte says "more bytes follow". Values below 128 take one byte, a `u64` at most ten.
//!
//! ```text
//!  300 = 0b1_0010_1100  ->  [1010_1100] [0000_0010]
//!                            ^ more      ^ last
//! ```
//!
//! Decoders return `None` instead of reading past the end or overflowing.

/// Appends `v` as a varint.
#[inline]
pub(crate) fn put_varint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// The number of bytes `put_varint` writes for `v`.
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    // One byte per started group of 7 significant bits; zero still takes one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Decodes a varint at `*pos`, advancing `*pos` past it; `None` if truncated or > u64.
#[inline]
pub(crate) fn get_varint(src: &[u8], pos: &mut usize) -> Option<u64> {
    // Fast path: most lengths are below 128 and fit in one byte.
    let first = *src.get(*pos)?;
    if first < 0x80 {
        *pos += 1;
        return Some(u64::from(first));
    }
    let mut result = 0u64;
    let mut p = *pos;
    for shift in (0..64).step_by(7) {
        let byte = *src.get(p)?;
        p += 1;
        // The tenth byte may only carry the top bit of a u64.
        if shift == 63 && byte > 1 {
            return None;
        }
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            *pos = p;
            return Some(result);
        }
    }
    None
}

/// Decodes a varint that must fit a `usize` (a length or an offset in memory).
#[inline]
pub(crate) fn get_varint_usize(src: &[u8], pos: &mut usize) -> Option<usize> {
    get_varint(src, pos).and_then(|v| usize::try_from(v).ok())
}

/// Reads a little-endian `u32` at `pos`; `None` if the bytes are not there.
#[inline]
pub(crate) fn u32_at(src: &[u8], pos: usize) -> Option<u32> {
    let bytes = src.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Reads a little-endian `u64` at `pos`; `None` if the bytes are not there.
#[inline]
pub(crate) fn u64_at(src: &[u8], pos: usize) -> Option<u64> {
    let bytes = src.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Bytes around a small store file's payload (`PROBES`, `RELEASED`): magic and version
/// before it, CRC-32 after.
pub(crate) const FRAME_OVERHEAD: usize = 8 + 4 + 4;

/// A small checksummed file: `magic` (8 bytes), `version` (u32 LE), `payload`, and the
/// CRC-32 of everything before it (u32 LE). See [`unframe`].
pub(crate) fn frame(magic: &[u8; 8], version: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_OVERHEAD + payload.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The payload of a file [`frame`] made, after checking, in this order, its length,
/// checksum, magic and version; why not, naming the file as `what`, if not.
pub(crate) fn unframe<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u32,
    what: &str,
) -> Result<&'a [u8], String> {
    if bytes.len() < FRAME_OVERHEAD {
        return Err(format!(
            "{} bytes, shorter than an empty {what} file",
            bytes.len()
        ));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if u32_at(crc, 0) != Some(crc32fast::hash(body)) {
        return Err("checksum mismatch".into());
    }
    if &body[..8] != magic {
        return Err(format!("not a {what} file"));
    }
    match u32_at(body, 8) {
        Some(v) if v == version => Ok(&body[12..]),
        v => Err(format!("version {v:?}, not {version}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_damage() {
        let bytes = frame(b"BKTESTFF", 3, b"payload");
        assert_eq!(bytes.len(), FRAME_OVERHEAD + 7);
        assert_eq!(unframe(&bytes, b"BKTESTFF", 3, "test"), Ok(&b"payload"[..]));
        assert_eq!(
            unframe(&frame(b"BKTESTFF", 3, b""), b"BKTESTFF", 3, "test"),
            Ok(&b""[..])
        );
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(unframe(&bad, b"BKTESTFF", 3, "test").is_err(), "byte {i}");
        }
        assert!(unframe(&bytes[..bytes.len() - 1], b"BKTESTFF", 3, "test").is_err());
        assert!(unframe(&bytes[..3], b"BKTESTFF", 3, "test").is_err());
        assert!(unframe(&bytes, b"BKOTHERF", 3, "test")
            .unwrap_err()
            .contains("not a test"));
        assert!(unframe(&bytes, b"BKTESTFF", 4, "test")
            .unwrap_err()
            .contains("version"));
    }

    #[test]
    fn varint_len_is_what_put_varint_writes() {
        let mut values = vec![0, 1, u64::MAX];
        for shift in 1..64 {
            values.extend([(1u64 << shift) - 1, 1 << shift, (1 << shift) + 1]);
        }
        for v in values {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(varint_len(v), buf.len(), "{v}");
        }
    }

    #[test]
    fn varints_round_trip_at_every_width() {
        let mut values = vec![0, 1, 127, 128, 255, 300, 16383, 16384, u64::MAX];
        values.extend((0..64).map(|s| 1u64 << s));
        values.extend((1..64).map(|s| (1u64 << s) - 1));
        for v in values {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert!(buf.len() <= 10);
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
            // Every strict prefix is truncated.
            for cut in 0..buf.len() {
                let mut pos = 0;
                assert_eq!(get_varint(&buf[..cut], &mut pos), None);
                assert_eq!(pos, 0);
            }
        }
    }

    #[test]
    fn overlong_varints_are_rejected() {
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
        let mut pos = 0;
        // Ten bytes whose last carries more than the top bit of a u64.
        let mut bytes = vec![0xff; 9];
        bytes.push(0x02);
        assert_eq!(get_varint(&bytes, &mut pos), None);
    }

    #[test]
    fn fixed_reads_check_bounds() {
        assert_eq!(u32_at(&[1, 0, 0, 0], 0), Some(1));
        assert_eq!(u32_at(&[1, 0, 0], 0), None);
        assert_eq!(u32_at(&[1, 0, 0, 0], usize::MAX), None);
        assert_eq!(u64_at(&[2, 0, 0, 0, 0, 0, 0, 0], 0), Some(2));
        assert_eq!(u64_at(&[2, 0, 0, 0, 0, 0, 0], 0), None);
    }
}
