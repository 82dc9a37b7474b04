//! Ribbon hashing: one [`KeyHash`] becomes a start slot, a coefficient row and a
//! fingerprint, for a given seed.
//!
//! A key is one linear equation over GF(2): the `w` solution rows from its start slot
//! on, selected by its coefficient bits, must XOR to its fingerprint:
//!
//! ```text
//!  slots:        0 ...  start  start+1  ...  start+w-1  ...  m-1
//!  coefficients:        c_0=1  c_1      ...  c_(w-1)
//!  equation:     XOR_{j : c_j = 1}  S[start + j]  =  fingerprint      (r bits wide)
//! ```
//!
//! All three parts come from the store's one [`KeyHash`] per key, remixed with the
//! block's seed, so a construction that fails can retry with a fresh system of
//! equations without rehashing keys. Two derivations exist, one per block version:
//!
//! ```text
//!  salt        = mix(seed + SEED_SALT)                          (both versions)
//!
//!  version 3, w = 64 (written today): one multiply per part
//!  a           = (h1 ^ salt) · START_FACTOR        c = (h2 ^ rotl(salt, 32)) · COEFF_FACTOR
//!  start       = fastrange(a, m - 63)              (a's high bits)
//!  coefficient = c | 1
//!  fingerprint = a mod 2^32                        (a's low bits)
//!
//!  version 2, w = 128 (still read)
//!  a           = mix(h1 ^ salt)                    b = mix(h2 ^ rotl(salt, 29))
//!  start       = fastrange(a, m - 127)
//!  coefficient = mix(a ^ rotl(b, 17)) << 64 | b | 1
//!  fingerprint = a mod 2^32
//! ```
//!
//! `c_0 = 1` puts the equation's first unknown at its start slot, which banding relies
//! on. `h1` and `h2` are the two independent halves of XXH3-128, so version 3 needs no
//! more mixing than a bijection per half: multiplying by an odd constant keeps `a`
//! uniform, its high bits (the start) and low bits (the fingerprint) independent, and
//! the coefficient independent of both. For an absent key the fingerprint therefore
//! matches the row's computed `r` bits with probability exactly `2^-r`. (`h2` is odd, so
//! `c`'s bit 0 carries nothing; it is forced to 1 anyway.) Version 2 mixed each part
//! through `mix`, a 64-bit finalizer (xor-shift, multiply, twice): three times the
//! work a query does before it reads a word.

use crate::hash::{fastrange64, KeyHash};

/// Width of a coefficient row written today (version 3), in slots (bits).
pub(crate) const ROW_BITS: u64 = 64;

/// Width of a version-2 coefficient row, in slots (bits).
pub(crate) const ROW128_BITS: u64 = 128;

/// Added to the seed before mixing, so seed 0 does not mix to 0.
const SEED_SALT: u64 = 0x2545_F491_4F6C_DD1D;

/// Odd multipliers of version 3's start-and-fingerprint and coefficient halves (the
/// 64-bit golden ratio and an XXH64 prime: well spread bits, odd).
const START_FACTOR: u64 = 0x9E37_79B9_7F4A_7C15;
const COEFF_FACTOR: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// What banding and querying need to know about one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RibbonHash<R> {
    /// First slot of the key's equation, in `0..num_starts`.
    pub start: u64,
    /// The equation's coefficients; bit `j` is slot `start + j`; bit 0 is always 1.
    pub coeff: R,
    /// Right-hand side: the low `r` (or `r + 1`) bits are used.
    pub fingerprint: u32,
}

/// The salt of `seed` (`mix(seed + SEED_SALT)`); a reader derives it once.
#[inline]
pub(crate) fn seed_salt(seed: u32) -> u64 {
    mix(u64::from(seed).wrapping_add(SEED_SALT))
}

/// The key's version-3 equation for a system of `num_starts = m - 63` start slots.
#[inline(always)]
pub(crate) fn ribbon_hash(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash<u64> {
    let a = (hash.h1 ^ salt).wrapping_mul(START_FACTOR);
    let c = (hash.h2 ^ salt.rotate_left(32)).wrapping_mul(COEFF_FACTOR);
    RibbonHash {
        start: fastrange64(a, num_starts),
        coeff: c | 1,
        fingerprint: a as u32,
    }
}

/// The key's version-2 equation for a system of `num_starts = m - 127` start slots.
#[inline]
pub(crate) fn ribbon_hash128(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash<u128> {
    let a = mix(hash.h1 ^ salt);
    let b = mix(hash.h2 ^ salt.rotate_left(29));
    let hi = mix(a ^ b.rotate_left(17));
    RibbonHash {
        start: fastrange64(a, num_starts),
        coeff: (u128::from(hi) << 64) | u128::from(b) | 1,
        fingerprint: a as u32,
    }
}

/// The salt of layer `layer ≥ 1` of a bumped block (format version 4) built with
/// `seed`. Layer 0 uses [`seed_salt`] itself, so its equations are version 3's.
#[inline]
pub(crate) fn layer_salt(seed: u32, layer: u32) -> u64 {
    mix(seed_salt(seed) ^ u64::from(layer).wrapping_mul(START_FACTOR))
}

/// The key's equation in layer `layer ≥ 1` of a bumped block, for `num_starts` starts.
/// Layer 0's start decides which keys reach this layer (`ribbon::bump`), so this
/// layer's start and fingerprint must not follow from it: the first half is mixed
/// (`mix`, a bijection whose every output bit depends on every input bit) before the
/// one multiply, where a mere change of salt would leave `(h1 ^ s') · K` a function of
/// `(h1 ^ s) · K` in its low bits. Only keys a layer bumps pay for it.
#[inline]
pub(crate) fn ribbon_hash_layer(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash<u64> {
    let mixed = KeyHash::from_halves(mix(hash.h1 ^ salt), hash.h2);
    ribbon_hash(mixed, salt, num_starts)
}

/// A 64-bit finalizer: two rounds of xor-shift and odd multiply.
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z ^= z >> 32;
    z = z.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z ^= z >> 32;
    z = z.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z ^ (z >> 32)
}

/// The parity (XOR of all bits) of a 64-bit row: one bit of a dot product over GF(2).
/// Folded by shifts and a 16-entry table in a constant rather than `count_ones() & 1`:
/// without a CPU-specific build, `count_ones` on x86-64 is a software popcount, and
/// this is about three times fewer instructions. A reader on a CPU with `popcnt` uses
/// that instead (`block.rs`).
#[inline(always)]
pub(crate) fn parity(mut v: u64) -> u32 {
    v ^= v >> 32;
    v ^= v >> 16;
    v ^= v >> 8;
    v ^= v >> 4;
    (0x6996u32 >> (v & 0xF)) & 1
}

/// The parity of a 128-bit row (version 2).
#[inline(always)]
pub(crate) fn parity128(x: u128) -> u32 {
    parity((x as u64) ^ ((x >> 64) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_coefficient_is_one_and_start_in_range() {
        for i in 0..1000u32 {
            let h = KeyHash::of(&i.to_le_bytes());
            for (seed, starts) in [(0, 1), (1, 2), (7, 1000), (u32::MAX, u64::MAX)] {
                let salt = seed_salt(seed);
                let r = ribbon_hash(h, salt, starts);
                assert_eq!(r.coeff & 1, 1);
                assert!(r.start < starts);
                let r = ribbon_hash128(h, salt, starts);
                assert_eq!(r.coeff & 1, 1);
                assert!(r.start < starts);
            }
        }
    }

    #[test]
    fn seeds_give_different_equations() {
        let h = KeyHash::of(b"key");
        let (s0, s1) = (seed_salt(0), seed_salt(1));
        let a = ribbon_hash(h, s0, 1 << 20);
        let b = ribbon_hash(h, s1, 1 << 20);
        assert_ne!(a.coeff, b.coeff);
        assert_ne!(a.start, b.start);
        assert_ne!(a.fingerprint, b.fingerprint);
        assert_eq!(a, ribbon_hash(h, s0, 1 << 20), "deterministic");
        assert_ne!(
            ribbon_hash128(h, s0, 1 << 20),
            ribbon_hash128(h, s1, 1 << 20)
        );
    }

    /// Start, coefficient and fingerprint bits must look independent and uniform: over
    /// 2^16 keys, each of the fingerprint's low 16 bits and of the coefficient's bits
    /// 1..63 is set about half the time (within 5 σ of a binomial), and the low
    /// fingerprint bit agrees with the start's parity about half the time.
    #[test]
    fn version_3_parts_are_balanced() {
        let n = 1u32 << 16;
        let bound = 5.0 * (f64::from(n) * 0.25).sqrt();
        let salt = seed_salt(3);
        let (mut fp_ones, mut coeff_ones, mut agree) = ([0u32; 16], [0u32; 64], 0u32);
        for i in 0..n {
            let r = ribbon_hash(KeyHash::of(&i.to_le_bytes()), salt, 1_000_003);
            for (b, c) in fp_ones.iter_mut().enumerate() {
                *c += (r.fingerprint >> b) & 1;
            }
            for (b, c) in coeff_ones.iter_mut().enumerate() {
                *c += ((r.coeff >> b) & 1) as u32;
            }
            agree += u32::from((r.fingerprint & 1) as u64 == r.start & 1);
        }
        let half = f64::from(n) / 2.0;
        for (b, &c) in fp_ones.iter().enumerate() {
            assert!(
                (f64::from(c) - half).abs() < bound,
                "fingerprint bit {b}: {c}"
            );
        }
        for (b, &c) in coeff_ones.iter().enumerate().skip(1) {
            assert!(
                (f64::from(c) - half).abs() < bound,
                "coefficient bit {b}: {c}"
            );
        }
        assert_eq!(coeff_ones[0], n);
        assert!((f64::from(agree) - half).abs() < bound, "{agree}");
    }

    #[test]
    fn parity_matches_count_ones() {
        let mut x = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210u128;
        for _ in 0..1000 {
            assert_eq!(parity128(x), x.count_ones() & 1);
            assert_eq!(parity(x as u64), (x as u64).count_ones() & 1);
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835) ^ (x >> 7);
        }
        assert_eq!(parity128(0), 0);
        assert_eq!(parity128(1 << 127), 1);
        assert_eq!(parity(1 << 63), 1);
    }
}
