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
//!
//! **Packed positions (block version 2).** Where the keys run on past those 8 bytes
//! (text keys: `lineitem/0000000042/03`), the map spends on each byte position only
//! the bits its values need. The writer records, per position after `P`, the smallest
//! and largest byte any key has there (`lo`, `hi`). Code 0 means "below `lo`, or the
//! key ended" (kept only if a byte can be below `lo`), then `lo..=hi` in order, then
//! one code for "above `hi`" (kept only if `hi < 255`); a position takes the bits of
//! its largest code, and positions are taken in order while they fit 64 bits. A key
//! below a position's range codes 0 there and at every later position; one above it
//! codes "above" there and the largest code at every later position:
//!
//! ```text
//!   P = "lineitem/000", positions: 7 digits ('0'..'9': 4 bits each), '/' (2 bits),
//!   line tens '0' (2 bits), line units '1'..'7' (4 bits) = 36 bits
//!   "lineitem/0000042/05"  ->  digits, '/' = 1, tens = 1, units = 5
//!   "lineitem/0000042/"    ->  digits, '/' = 1, then 0, 0  (ended: below)
//!   "lineitem/0000042/99"  ->  digits, '/' = 1, tens 2 (above), units 8 (largest)
//! ```
//!
//! Order holds for any two byte strings: up to their first differing position they
//! code alike; there the clamped codes keep their order, and equal clamped codes force
//! equal tails. Keys merge only where they agree on every coded position.

/// The number of bytes of a key, after the prefix, that the map reads.
pub(crate) const MAPPED_BYTES: usize = 8;

/// The most byte positions a packed map codes.
pub(crate) const MAX_POSITIONS: usize = 64;

/// The byte range of each coded position of a packed map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed {
    /// Positions coded, `0..=MAX_POSITIONS`.
    pub count: usize,
    /// Smallest byte at each position.
    pub lo: [u8; MAX_POSITIONS],
    /// Largest byte at each position.
    pub hi: [u8; MAX_POSITIONS],
}

/// The largest code of a position whose bytes span `lo..=hi`: code 0 is kept for
/// "below `lo`" (or the key's end) when a byte can be below `lo`, and the code after
/// `hi`'s for "above `hi`" when a byte can be above it, so a query byte outside the
/// range never codes like a stored key's.
fn top_code(lo: u8, hi: u8) -> u64 {
    u64::from(hi - lo) + u64::from(lo > 0) + u64::from(hi < u8::MAX)
}

/// Bits of a position whose bytes span `lo..=hi` (at most 9 when both ends are
/// reserved; 8 for a position that takes every byte).
pub(crate) fn position_bits(lo: u8, hi: u8) -> u32 {
    u64::BITS - top_code(lo, hi).leading_zeros()
}

impl Packed {
    /// The packed positions of a key set: each position's byte range, as many
    /// positions as fit 64 bits.
    fn of<'a>(prefix_len: usize, keys: impl Iterator<Item = &'a [u8]>) -> Packed {
        let mut p = Packed {
            count: 0,
            lo: [u8::MAX; MAX_POSITIONS],
            hi: [0; MAX_POSITIONS],
        };
        let mut seen = 0;
        for k in keys {
            let rest = k.get(prefix_len..).unwrap_or(&[]);
            let n = rest.len().min(MAX_POSITIONS);
            for (i, &b) in rest[..n].iter().enumerate() {
                p.lo[i] = p.lo[i].min(b);
                p.hi[i] = p.hi[i].max(b);
            }
            seen = seen.max(n);
        }
        let mut bits = 0;
        while p.count < seen {
            let b = position_bits(p.lo[p.count], p.hi[p.count]);
            if bits + b > u64::BITS {
                break;
            }
            bits += b;
            p.count += 1;
        }
        // Unused positions stay zero, so equal maps compare equal.
        p.lo[p.count..].fill(0);
        p.hi[p.count..].fill(0);
        p
    }

    /// Total bits of the codes.
    #[cfg(test)]
    pub(crate) fn bits(&self) -> u32 {
        (0..self.count)
            .map(|i| position_bits(self.lo[i], self.hi[i]))
            .sum()
    }

    #[inline]
    fn map(&self, rest: &[u8]) -> u64 {
        #[derive(PartialEq)]
        enum Walk {
            Exact,
            Below,
            Above,
        }
        let mut walk = Walk::Exact;
        let mut v: u64 = 0;
        for i in 0..self.count {
            let (lo, hi) = (self.lo[i], self.hi[i]);
            let code = match walk {
                Walk::Below => 0,
                Walk::Above => top_code(lo, hi),
                Walk::Exact => match rest.get(i) {
                    Some(&b) if b >= lo && b <= hi => u64::from(b - lo) + u64::from(lo > 0),
                    Some(&b) if b > hi => {
                        walk = Walk::Above;
                        top_code(lo, hi)
                    }
                    // Below lo, or the key ended: it sorts before every key going on.
                    _ => {
                        walk = Walk::Below;
                        0
                    }
                },
            };
            // At most 9 bits a position and 64 in all: neither shift nor sum overflows.
            let bits = position_bits(lo, hi);
            v = (v << bits) | code;
        }
        v
    }
}

/// The length of the longest common prefix of `a` and `b`.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The map of a key set whose keys all start with the first `prefix_len` bytes of the
/// set's smallest key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyMap {
    pub prefix_len: usize,
    /// Bytes read after the prefix, `0..=8` (version 1); positions coded (packed).
    pub width: usize,
    /// The packed positions (block version 2), or `None`: `width` bytes as they are.
    pub packed: Option<Packed>,
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
            packed: None,
        }
    }

    /// The map a writer chooses: 8 bytes as they are where every key fits them
    /// (version 1, as before), packed positions where some key runs on past them.
    pub(crate) fn choose<'a>(
        smallest: &[u8],
        largest: &[u8],
        keys: impl Iterator<Item = &'a [u8]> + Clone,
    ) -> KeyMap {
        let prefix_len = common_prefix_len(smallest, largest);
        let longest = keys.clone().map(<[u8]>::len).max().unwrap_or(0);
        if longest.saturating_sub(prefix_len) <= MAPPED_BYTES {
            return KeyMap::of(smallest, largest, keys);
        }
        let packed = Packed::of(prefix_len, keys);
        KeyMap {
            prefix_len,
            width: packed.count,
            packed: Some(packed),
        }
    }

    /// The integer of `key`, which must start with the set's prefix (any key between
    /// the set's smallest and largest does); bytes of a shorter key count as zero.
    #[inline]
    pub(crate) fn map(&self, key: &[u8]) -> u64 {
        if let Some(p) = &self.packed {
            return p.map(key.get(self.prefix_len..).unwrap_or(&[]));
        }
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
            packed: None,
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
            packed: None,
        };
        assert_eq!(narrow.map(b"abc"), 0x6300);
        assert_eq!(narrow.map(b"abcd"), 0x6364);
        assert_eq!(narrow.map(b"abcde"), 0x6364); // merged past the width
        assert_eq!(
            KeyMap {
                prefix_len: 3,
                width: 0,
                packed: None,
            }
            .map(b"abc"),
            0
        );
        assert_eq!(common_prefix_len(b"user:0012", b"user:0097"), 7);
        assert_eq!(common_prefix_len(b"", b"x"), 0);
    }

    fn line_keys() -> Vec<Vec<u8>> {
        // Orders 1..=6,000,000 spread (seven digits), lines 1..=7.
        let mut keys = Vec::new();
        for o in [1u64, 2, 7, 33, 1_000_001, 5_999_969, 6_000_000] {
            for line in 1..=7 {
                keys.push(format!("lineitem/{o:010}/{line:02}").into_bytes());
            }
        }
        keys.sort();
        keys
    }

    fn chosen(keys: &[Vec<u8>]) -> KeyMap {
        let (s, l) = (&keys[0], &keys[keys.len() - 1]);
        KeyMap::choose(s, l, keys.iter().map(|k| k.as_slice()))
    }

    #[test]
    fn packed_map_keeps_every_line_of_a_seven_digit_order_apart() {
        let keys = line_keys();
        let m = chosen(&keys);
        let p = m
            .packed
            .expect("the keys run past 8 bytes after the prefix");
        assert_eq!(m.prefix_len, b"lineitem/000".len());
        // Seven digits at 4 bits each, '/' and the tens digit at 2 (one byte, a code
        // below it and one above), the line ('1'..'7' and the two) at 4.
        assert_eq!(p.count, 10);
        assert_eq!(p.bits(), 7 * 4 + 2 + 2 + 4);
        let bits = |i: usize| position_bits(p.lo[i], p.hi[i]);
        assert_eq!((bits(7), bits(8), bits(9)), (2, 2, 4));
        // A byte that takes every value costs 8 bits, as in the version 1 map.
        assert_eq!(position_bits(0, 255), 8);
        let mapped: Vec<u64> = keys.iter().map(|k| m.map(k)).collect();
        assert!(
            mapped.windows(2).all(|w| w[0] < w[1]),
            "distinct and ordered"
        );
        // Today's 8-byte map merges the lines of an order.
        let v1 = KeyMap::of(
            &keys[0],
            &keys[keys.len() - 1],
            keys.iter().map(|k| k.as_slice()),
        );
        assert_eq!(v1.map(&keys[0]), v1.map(&keys[1]));
        // "Any lines of order 2?" is 41 mapped values long (tens: ended 0 .. above 2;
        // units 0 .. 8), inside the filter's default L = 64; "has it a line 8?" maps
        // to a value no stored key has.
        let a = m.map(b"lineitem/0000000002/");
        let z = m.map(b"lineitem/0000000002/99");
        assert_eq!(z - a + 1, 2 * 16 + 8 + 1);
        let eighth = m.map(b"lineitem/0000000002/08");
        assert!(!mapped.contains(&eighth));
    }

    /// Order holds for query keys of any shape after the prefix (the reader clamps a
    /// query to the table's key range first, so both ends share it): shorter, longer,
    /// bytes outside each position's range.
    #[test]
    fn packed_map_keeps_order_for_any_bytes() {
        let keys = line_keys();
        let m = chosen(&keys);
        let mut probes: Vec<Vec<u8>> = keys.clone();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for k in &keys {
            for _ in 0..20 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut q = k.clone();
                let at = m.prefix_len + (x as usize) % (q.len() + 1 - m.prefix_len);
                match (x >> 32) % 4 {
                    0 => q.truncate(at),
                    1 => q.insert(at.min(q.len()), (x >> 40) as u8),
                    2 if at < q.len() => q[at] = (x >> 40) as u8,
                    _ => q.extend_from_slice(&[(x >> 48) as u8, b'9']),
                }
                probes.push(q);
            }
        }
        probes.sort();
        let mapped: Vec<u64> = probes.iter().map(|k| m.map(k)).collect();
        for (w, k) in mapped.windows(2).zip(probes.windows(2)) {
            assert!(
                w[0] <= w[1],
                "{:?} -> {} > {:?} -> {}",
                k[0],
                w[0],
                k[1],
                w[1]
            );
        }
    }

    #[test]
    fn keys_within_eight_bytes_keep_the_version_1_map() {
        let keys: Vec<Vec<u8>> = (0..100u32)
            .map(|i| format!("user:{i:04}").into_bytes())
            .collect();
        let m = chosen(&keys);
        assert_eq!(m.packed, None);
        assert_eq!((m.prefix_len, m.width), (7, 2));
    }
}
