//! MurmurHash3 x64_128: the hash the source documents build their Bloom filter on.
//!
//! Austin Appleby's MurmurHash3 (public domain, SMHasher) in its 64-bit, 128-bit-output
//! form. One call yields two 64-bit halves `(h1, h2)`, exactly what double hashing
//! needs, so the standalone [`BloomFilter`](crate::BloomFilter) and
//! [`CountingBloomFilter`](crate::CountingBloomFilter) hash each item once.
//!
//! The input is consumed in 16-byte blocks read as two little-endian `u64`s; the last
//! 0..=15 bytes form the tail. The result matches the reference C++
//! `MurmurHash3_x64_128` and Python's `mmh3.hash128` / `mmh3.hash64` on every
//! platform, because blocks are always read little-endian:
//!
//! ```text
//!  data:  | block 0 (16 B) | block 1 (16 B) | ... | tail (len % 16 B) |
//!  block: | k1: u64 LE (8 B) | k2: u64 LE (8 B) |
//!  out:   (h1, h2)   -- mmh3.hash128 == h2 << 64 | h1
//! ```
//!
//! SSTable filter blocks use XXH3-128 instead ([`KeyHash::of`](crate::KeyHash::of)):
//! the `filter` benchmark measures both on 24-byte keys.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The 64-bit finalizer: forces every input bit to affect every output bit.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[inline]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// MurmurHash3 x64_128 of `data` with a 32-bit `seed`, as the pair `(h1, h2)`.
///
/// ```
/// use bloomkv_filter::murmur3::murmur3_x64_128;
/// // Python: mmh3.hash64(b"foo", signed=False) == (16316970633193145697, 9128664383759220103)
/// assert_eq!(murmur3_x64_128(b"foo", 0), (16316970633193145697, 9128664383759220103));
/// ```
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);

    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (lo, hi) = block.split_at(8);
        let k1 = u64::from_le_bytes(lo.try_into().unwrap_or([0; 8]));
        let k2 = u64::from_le_bytes(hi.try_into().unwrap_or([0; 8]));

        h1 ^= mix_k1(k1);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);

        h2 ^= mix_k2(k2);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    // The tail: bytes 0..8 go to k1, bytes 8..15 to k2, both little-endian.
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k1 = 0u64;
        let mut k2 = 0u64;
        for (i, &b) in tail.iter().enumerate() {
            if i < 8 {
                k1 |= u64::from(b) << (8 * i);
            } else {
                k2 |= u64::from(b) << (8 * (i - 8));
            }
        }
        if tail.len() > 8 {
            h2 ^= mix_k2(k2);
        }
        h1 ^= mix_k1(k1);
    }

    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// MurmurHash3 x64_128 as one `u128` (`h2 << 64 | h1`), the value `mmh3.hash128` prints.
pub fn murmur3_x64_128_u128(data: &[u8], seed: u32) -> u128 {
    let (h1, h2) = murmur3_x64_128(data, seed);
    (u128::from(h2) << 64) | u128::from(h1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Published outputs of Python's `mmh3` package (its README), which wraps the
    // reference C++ code: hash64 / hash128 / hash_bytes of "foo".
    #[test]
    fn matches_mmh3_readme_vectors() {
        assert_eq!(
            murmur3_x64_128(b"foo", 0),
            (16_316_970_633_193_145_697, 9_128_664_383_759_220_103)
        );
        assert_eq!(
            murmur3_x64_128_u128(b"foo", 0),
            168_394_135_621_993_849_475_852_668_931_176_482_145
        );
        assert_eq!(
            murmur3_x64_128_u128(b"foo", 42),
            215_966_891_540_331_383_248_189_432_718_888_555_506
        );
        // mmh3.hash64("foo", 42) signed == (-840311307571801102, -6739155424061121879)
        let (h1, h2) = murmur3_x64_128(b"foo", 42);
        assert_eq!(
            (h1 as i64, h2 as i64),
            (-840_311_307_571_801_102, -6_739_155_424_061_121_879)
        );
        // mmh3.hash_bytes("foo"): h1 then h2, little-endian.
        let (h1, h2) = murmur3_x64_128(b"foo", 0);
        let mut bytes = h1.to_le_bytes().to_vec();
        bytes.extend_from_slice(&h2.to_le_bytes());
        assert_eq!(bytes, b"aE\xf5\x01W\x86q\xe2\x87}\xba+\xe4\x87\xaf~");
    }

    #[test]
    fn empty_input_seed_zero_is_zero() {
        // With seed 0 and no data every step keeps both halves zero (fmix64(0) == 0).
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
        assert_ne!(murmur3_x64_128(b"", 1), (0, 0));
    }

    /// SMHasher's `VerificationTest`: hash the keys {}, {0}, {0,1}, .. {0..254} with
    /// seed 256 - len, concatenate the 16-byte outputs, hash that with seed 0 and read
    /// the first 4 bytes little-endian. The published value for MurmurHash3_x64_128 is
    /// 0x6384BA69. It covers every tail length and multi-block inputs.
    #[test]
    fn passes_smhasher_verification_value() {
        let mut key = [0u8; 256];
        let mut hashes = Vec::with_capacity(256 * 16);
        for len in 0..256usize {
            key[len] = len as u8;
            let (h1, h2) = murmur3_x64_128(&key[..len], 256 - len as u32);
            hashes.extend_from_slice(&h1.to_le_bytes());
            hashes.extend_from_slice(&h2.to_le_bytes());
        }
        let (h1, _) = murmur3_x64_128(&hashes, 0);
        assert_eq!(h1 as u32, 0x6384_BA69);
    }
}
