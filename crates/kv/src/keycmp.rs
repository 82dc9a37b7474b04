//! Comparing keys eight bytes at a time.
//!
//! A get compares its key a few dozen times: against each table's smallest and largest
//! key, against the index's separators in a binary search, against a data block's
//! restart keys and entries. The keys are short (tens of bytes), and for short slices
//! the standard comparison's call into the C library's `memcmp` costs more than the
//! comparison itself. Here both functions are inlined and read whole 8-byte words:
//!
//! ```text
//!   a = k e y 0 0 0 0 0 | 0 0 0 0 1 2 3 4 | 5 6 7          (19 bytes)
//!   b = k e y 0 0 0 0 0 | 0 0 0 0 1 2 4 0 | 0 0 0
//!       word 0: equal     word 1: differs -> compare as big-endian u64
//! ```
//!
//! A word read big-endian orders like its bytes, so the first unequal word decides.
//! The tail (fewer than 8 bytes left) is read as the last 8 bytes of the shared
//! length, overlapping the previous word; those overlapping bytes are equal, so the
//! answer stays exact. Only slices shorter than one word go byte by byte.

use std::cmp::Ordering;

/// The 8 bytes of `s` at `at` (the caller checks `at + 8 <= s.len()`).
#[inline(always)]
fn word(s: &[u8], at: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    w
}

/// `a.cmp(b)`, byte-wise lexicographic like `<[u8]>::cmp`.
#[inline]
pub(crate) fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    if n < 8 {
        for i in 0..n {
            if a[i] != b[i] {
                return a[i].cmp(&b[i]);
            }
        }
        return a.len().cmp(&b.len());
    }
    let mut i = 0;
    while i + 8 < n {
        let (x, y) = (word(a, i), word(b, i));
        if x != y {
            return u64::from_be_bytes(x).cmp(&u64::from_be_bytes(y));
        }
        i += 8;
    }
    let (x, y) = (word(a, n - 8), word(b, n - 8));
    if x != y {
        return u64::from_be_bytes(x).cmp(&u64::from_be_bytes(y));
    }
    a.len().cmp(&b.len())
}

/// `a < b`.
#[inline]
pub(crate) fn less(a: &[u8], b: &[u8]) -> bool {
    compare(a, b) == Ordering::Less
}

/// The 8 bytes of `s` after its first `skip`, zero-padded, as a big-endian word.
///
/// Two keys that share their first `skip` bytes order like these words wherever the
/// words differ (a key that ends sooner is padded with zeros, and is the smaller one
/// wherever that decides); equal words say nothing. The index's search and a get's L0
/// range checks compare these first and the keys only on a tie.
///
/// Without a copy where it can: 8 bytes or more after `skip` are one load; fewer, the
/// last word of `s` shifted left (`s` at least 8 bytes long). Only a shorter key is
/// copied into a zeroed word, which costs a call to `memcpy`.
#[inline]
pub(crate) fn word_after(s: &[u8], skip: usize) -> u64 {
    let tail = s.get(skip..).unwrap_or_default();
    if let Some(w) = tail.first_chunk::<8>() {
        return u64::from_be_bytes(*w);
    }
    if let (Some(w), n @ 1..) = (s.last_chunk::<8>(), tail.len()) {
        // The last n bytes of `w` are the tail; shifting drops the bytes before it.
        return u64::from_be_bytes(*w) << (8 * (8 - n));
    }
    let mut w = [0u8; 8];
    w[..tail.len()].copy_from_slice(tail);
    u64::from_be_bytes(w)
}

/// Whether `s` starts with `prefix`, compared as [`compare`] does (no `memcmp` call).
#[inline]
pub(crate) fn starts_with(s: &[u8], prefix: &[u8]) -> bool {
    s.get(..prefix.len())
        .is_some_and(|head| compare(head, prefix).is_eq())
}

/// The length of the longest common prefix of `a` and `b`.
#[inline]
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let diff = u64::from_le_bytes(word(a, i)) ^ u64::from_le_bytes(word(b, i));
        if diff != 0 {
            // Little-endian: the first differing byte is the lowest set one.
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        assert_eq!(compare(b"", b""), Ordering::Equal);
        assert_eq!(compare(b"", b"a"), Ordering::Less);
        assert_eq!(compare(b"abcdefgh", b"abcdefgh\0"), Ordering::Less);
        assert_eq!(compare(b"abcdefghi", b"abcdefghh"), Ordering::Greater);
        assert_eq!(
            compare(b"key0000000000001234", b"key0000000000001240"),
            Ordering::Less
        );
        assert_eq!(
            common_prefix(b"key0000000000001234", b"key0000000000001240"),
            17
        );
        assert_eq!(common_prefix(b"abcdefgh", b"abcdefgh"), 8);
        assert_eq!(common_prefix(b"", b"abc"), 0);
        assert!(less(b"a\xff", b"b"));
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        // Few distinct bytes, so that long shared prefixes and equal keys are common.
        prop::collection::vec(
            prop_oneof![Just(0u8), Just(1), Just(0x80), Just(0xff)],
            0..40,
        )
    }

    proptest! {
        #[test]
        fn agrees_with_the_standard_comparison(a in key(), b in key()) {
            prop_assert_eq!(compare(&a, &b), a.cmp(&b));
            prop_assert_eq!(less(&a, &b), a < b);
            let expected = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), expected);
        }

        #[test]
        fn agrees_on_a_key_and_its_extensions(a in key(), tail in key()) {
            let mut b = a.clone();
            b.extend_from_slice(&tail);
            prop_assert_eq!(compare(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare(&b, &a), b.cmp(&a));
            prop_assert_eq!(common_prefix(&a, &b), a.len());
            prop_assert!(starts_with(&b, &a));
        }

        #[test]
        fn word_after_and_starts_with_agree_with_their_definitions(
            a in key(), b in key(), skip in 0usize..44,
        ) {
            let mut w = [0u8; 8];
            let tail = a.get(skip..).unwrap_or_default();
            let n = tail.len().min(8);
            w[..n].copy_from_slice(&tail[..n]);
            prop_assert_eq!(word_after(&a, skip), u64::from_be_bytes(w));
            prop_assert_eq!(starts_with(&a, &b), a.starts_with(&b));
        }
    }
}
