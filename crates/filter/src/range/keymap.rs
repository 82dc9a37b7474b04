//! The order-preserving map from a table's byte-string keys to `u64`.
//!
//! Grafite works on integers; a table holds byte strings. Every key of a table lies
//! between its smallest and largest key, so every key starts with their longest
//! common prefix `P`. The map drops `P` and reads the next `w` bytes as a big-endian
//! integer, padding short keys with zero bytes, where `w` = the longest key's length
//! after `P`, at most 8 (so that the table's last byte counts as 1, not as `2^56`):
//!
//! ```text
//!   P = "user:00", w = 2   (smallest "user:0012", largest "user:0097")
//!   "user:0042"   ->  "42"  ->  0x3432
//!   "user:004"    ->  "4" ++ 00  ->  0x3400
//! ```
//!
//! For keys `x ≤ y` that share `P`, `map(x) ≤ map(y)`: truncating and zero-padding
//! keep byte-wise order or make two keys equal, never swap them. Keys that agree on
//! those `w` bytes (`"ab"` and `"ab\0"`, or two keys differing only past byte 8 of the
//! suffix) *merge* into one integer: the filter then answers for both, which can add
//! false positives and never a false negative. A range's length is measured in this
//! mapped space: `["user:0042", "user:0043"]` is 2 values long, `["user:0049",
//! "user:0050"]` 248 (the digits are bytes), and a range longer than the filter's `L`
//! is answered "maybe".

/// The number of bytes of a key, after the prefix, that the map reads.
pub(crate) const MAPPED_BYTES: usize = 8;

/// The length of the longest common prefix of `a` and `b`.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The map of a key set whose keys all start with the first `prefix_len` bytes of the
/// set's smallest key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyMap {
    pub prefix_len: usize,
    /// Bytes read after the prefix, `0..=8`.
    pub width: usize,
}

impl KeyMap {
    /// The map of a key set: its prefix, and the longest key's bytes after it.
    pub(crate) fn of<'a>(
        smallest: &[u8],
        largest: &[u8],
        keys: impl Iterator<Item = &'a [u8]>,
    ) -> KeyMap {
        let prefix_len = common_prefix_len(smallest, largest);
        let longest = keys.map(<[u8]>::len).max().unwrap_or(0);
        KeyMap {
            prefix_len,
            width: longest.saturating_sub(prefix_len).min(MAPPED_BYTES),
        }
    }

    /// The integer of `key`, which must start with the set's prefix (any key between
    /// the set's smallest and largest does); bytes of a shorter key count as zero.
    #[inline]
    pub(crate) fn map(&self, key: &[u8]) -> u64 {
        if self.width == 0 {
            return 0;
        }
        let rest = key.get(self.prefix_len..).unwrap_or(&[]);
        let mut buf = [0u8; MAPPED_BYTES];
        let n = rest.len().min(self.width);
        buf[..n].copy_from_slice(&rest[..n]);
        // width ≥ 1: the shift is below 64.
        u64::from_be_bytes(buf) >> (8 * (MAPPED_BYTES - self.width))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_order_and_merges_only_equal_8_bytes() {
        let m = KeyMap {
            prefix_len: 2,
            width: 8,
        };
        let keys: [&[u8]; 7] = [
            b"ab",
            b"ab\0",
            b"abc",
            b"abc\0\0\0\0\0\0\x01",
            b"abcdefghij",
            b"abcdefghik",
            b"abd",
        ];
        for w in keys.windows(2) {
            assert!(m.map(w[0]) <= m.map(w[1]), "{:?} {:?}", w[0], w[1]);
        }
        assert_eq!(m.map(b"ab"), m.map(b"ab\0")); // merged: zero padding
        assert_eq!(m.map(b"abcdefghijX"), m.map(b"abcdefghijY")); // merged: byte 9 of the suffix
        assert!(m.map(b"abcdefghij") < m.map(b"abcdefghik")); // byte 8 still counts
        assert_eq!(m.map(b"abc"), 0x6300_0000_0000_0000);
        let narrow = KeyMap {
            prefix_len: 2,
            width: 2,
        };
        assert_eq!(narrow.map(b"abc"), 0x6300);
        assert_eq!(narrow.map(b"abcd"), 0x6364);
        assert_eq!(narrow.map(b"abcde"), 0x6364); // merged past the width
        assert_eq!(
            KeyMap {
                prefix_len: 3,
                width: 0
            }
            .map(b"abc"),
            0
        );
        assert_eq!(common_prefix_len(b"user:0012", b"user:0097"), 7);
        assert_eq!(common_prefix_len(b"", b"x"), 0);
    }
}
