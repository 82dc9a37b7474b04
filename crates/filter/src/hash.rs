//! Key hashing: one 128-bit hash per key, split into the two halves of double hashing.
//!
//! A Bloom filter needs `k` independent bit positions per key. Kirsch and Mitzenmacher
//! showed that two hashes suffice: position `i` is derived from `h1 + i * h2`. We take
//! both from a single 128-bit hash call, so a key is hashed exactly once however many
//! probes, and however many tables, consult it.
//!
//! `h2` is forced odd: an even (or zero) step would revisit a subset of positions.
//!
//! Two hashes feed [`KeyHash`]:
//!
//! * [`KeyHash::of`] (XXH3-128) for SSTable filter blocks. It is the faster of the two on
//!   short keys: 3.7 ns against 7.4 ns for MurmurHash3 on 24-byte keys (the `filter`
//!   benchmark's `hash/24B` group; release build, 2-core machine), about half the
//!   cost of a cache-resident lookup,
//!   and every filter block of a store must agree on it, because one hash per lookup
//!   is handed to every table.
//! * [`KeyHash::murmur3`] (MurmurHash3 x64_128, the source documents' choice): the
//!   halves the standalone [`BloomFilter`](crate::BloomFilter) and
//!   [`CountingBloomFilter`](crate::CountingBloomFilter) used for double hashing in
//!   their version-1 frames. Version 2 draws `k` distinct slots from the same
//!   MurmurHash3 halves instead, because a forced-odd step can still be tiny (the
//!   empty item's is 1), which collapses every probe onto one slot.
//!
//! A hash becomes a position in `[0, n)` by [`fastrange64`], never by `%`.

/// The hash of one key, computed once and handed to every filter that is asked about it.
///
/// An LSM lookup may consult ten tables' filters; [`KeyHash::of`] is called once per
/// lookup and each filter reader takes the result through `may_contain_hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash {
    /// First half: picks the starting position (or, for cache-local filters, the line).
    pub h1: u64,
    /// Second half, always odd: the step between probes.
    pub h2: u64,
}

impl KeyHash {
    /// Hashes `key` for the SSTable filter block (XXH3-128; see the crate docs for why).
    #[inline]
    pub fn of(key: &[u8]) -> KeyHash {
        let h = xxhash_rust::xxh3::xxh3_128(key);
        KeyHash::from_halves(h as u64, (h >> 64) as u64)
    }

    /// Hashes `key` with MurmurHash3 x64_128 (seed 0), as the standalone filters do.
    #[inline]
    pub fn murmur3(key: &[u8]) -> KeyHash {
        let (h1, h2) = crate::murmur3::murmur3_x64_128(key, 0);
        KeyHash::from_halves(h1, h2)
    }

    /// Builds a hash from two 64-bit halves, forcing the step odd.
    #[inline]
    pub fn from_halves(h1: u64, h2: u64) -> KeyHash {
        KeyHash { h1, h2: h2 | 1 }
    }
}

/// Maps a 64-bit hash uniformly onto `[0, n)`: the high half of the 128-bit product.
///
/// Lemire's multiply-shift ("fastrange"): one multiplication instead of the 20-90 cycle
/// division behind `%`, and no bias towards small values beyond `n / 2^64`. It uses the
/// hash's *high* bits, so callers that also need independent low-order randomness
/// (the cache-local layout's in-line probes) take it from the other half.
/// Works for any `n` up to `u64::MAX`: filters beyond 2^32 bits need no special case.
///
/// ```
/// use bloomkv_filter::fastrange64;
/// assert_eq!(fastrange64(0, 1000), 0);
/// assert_eq!(fastrange64(u64::MAX, 1000), 999);
/// assert_eq!(fastrange64(1 << 63, 1 << 40), 1 << 39);
/// ```
#[inline(always)]
pub fn fastrange64(hash: u64, n: u64) -> u64 {
    ((u128::from(hash) * u128::from(n)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_is_always_odd() {
        assert_eq!(KeyHash::from_halves(5, 0).h2, 1);
        assert_eq!(KeyHash::from_halves(5, 2).h2, 3);
        for key in [&b""[..], b"a", b"apple", &[0u8; 64]] {
            assert_eq!(KeyHash::of(key).h2 & 1, 1);
            assert_eq!(KeyHash::murmur3(key).h2 & 1, 1);
        }
    }

    #[test]
    fn fastrange_covers_ranges_beyond_32_bits() {
        let n = (1u64 << 32) + 12_345;
        assert_eq!(fastrange64(u64::MAX, n), n - 1);
        assert_eq!(fastrange64(1 << 63, n), n / 2);
        // Monotone in the hash, and reaches indices above 2^32.
        let a = fastrange64(0xFFFF_FFFF_0000_0000, n);
        assert!(a > u64::from(u32::MAX));
        assert!(a < n);
        let n = u64::MAX;
        assert_eq!(fastrange64(u64::MAX, n), n - 1);
    }
}
