//! Key hashing: one 128-bit hash per key, split into the two halves of double hashing.
//!
//! A Bloom filter needs `k` independent bit positions per key. Kirsch and Mitzenmacher
//! showed that two hashes suffice: position `i` is derived from `h1 + i * h2`. We take
//! both from a single 128-bit hash call, so a key is hashed exactly once however many
//! probes, and however many tables, consult it.
//!
//! `h2` is forced odd: an even (or zero) step would revisit a subset of positions.

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

    /// Builds a hash from two 64-bit halves, forcing the step odd.
    #[inline]
    pub fn from_halves(h1: u64, h2: u64) -> KeyHash {
        KeyHash { h1, h2: h2 | 1 }
    }
}
