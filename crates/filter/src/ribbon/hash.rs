//! Ribbon hashing: one [`KeyHash`] becomes a start slot, a 128-bit coefficient row and a
//! fingerprint, for a given seed.
//!
//! A key is one linear equation over GF(2): the `w = 128` solution rows from its start
//! slot on, selected by its coefficient bits, must XOR to its fingerprint:
//!
//! ```text
//!  slots:        0 ...  start  start+1  ...  start+127  ...  m-1
//!  coefficients:        c_0=1  c_1      ...  c_127
//!  equation:     XOR_{j : c_j = 1}  S[start + j]  =  fingerprint      (r bits wide)
//! ```
//!
//! All three parts come from the store's one [`KeyHash`] per key, remixed with the
//! block's seed, so a construction that fails can retry with a fresh system of
//! equations without rehashing keys:
//!
//! ```text
//!  salt        = mix(seed + SEED_SALT)
//!  a           = mix(h1 ^ salt)                b = mix(h2 ^ rotl(salt, 29))
//!  start       = fastrange(a, m - 127)         (uses a's high bits)
//!  coefficient = mix(a ^ rotl(b, 17)) << 64 | b | 1
//!  fingerprint = a mod 2^32                    (low bits: independent of the start)
//! ```
//!
//! `c_0 = 1` puts the equation's first unknown at its start slot, which banding relies
//! on. For an absent key the fingerprint is uniform and independent of the start and
//! row, so it matches the row's computed `r` bits with probability exactly `2^-r`.
//! `mix` is a 64-bit finalizer (xor-shift, multiply, twice): a bijection in which every
//! input bit affects every output bit.

use crate::hash::{fastrange64, KeyHash};

/// Width of a coefficient row, in slots (bits).
pub(crate) const COEFF_BITS: u64 = 128;

/// Added to the seed before mixing, so seed 0 does not mix to 0.
const SEED_SALT: u64 = 0x2545_F491_4F6C_DD1D;

/// What banding and querying need to know about one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RibbonHash {
    /// First slot of the key's equation, in `0..num_starts`.
    pub start: u64,
    /// The equation's coefficients; bit `j` is slot `start + j`; bit 0 is always 1.
    pub coeff: u128,
    /// Right-hand side: the low `r` (or `r + 1`) bits are used.
    pub fingerprint: u32,
}

/// Derives the key's equation for a system of `num_starts = m - 127` start slots.
#[inline]
pub(crate) fn ribbon_hash(hash: KeyHash, seed: u32, num_starts: u64) -> RibbonHash {
    ribbon_hash_salted(hash, seed_salt(seed), num_starts)
}

/// The salt of `seed` (`mix(seed + SEED_SALT)`), for [`ribbon_hash_salted`].
#[inline]
pub(crate) fn seed_salt(seed: u32) -> u64 {
    mix(u64::from(seed).wrapping_add(SEED_SALT))
}

/// [`ribbon_hash`] with the seed's salt derived once by the caller (a reader keeps it).
#[inline]
pub(crate) fn ribbon_hash_salted(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash {
    let a = mix(hash.h1 ^ salt);
    let b = mix(hash.h2 ^ salt.rotate_left(29));
    let hi = mix(a ^ b.rotate_left(17));
    RibbonHash {
        start: fastrange64(a, num_starts),
        coeff: (u128::from(hi) << 64) | u128::from(b) | 1,
        fingerprint: a as u32,
    }
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

/// The parity (XOR of all bits) of a 128-bit row: one bit of a dot product over
/// GF(2). Folded by shifts and a 16-entry table in a constant rather than
/// `count_ones() & 1`: without a CPU-specific build, `count_ones` on x86-64 is a
/// software popcount, and this is about three times fewer instructions. With the
/// row shifted once per query (`block.rs`), hot Ribbon hits went from 105 to 60 ns in
/// the `filter` benchmark (one run each, busy machine).
#[inline(always)]
pub(crate) fn parity(x: u128) -> u32 {
    let mut v = (x as u64) ^ ((x >> 64) as u64);
    v ^= v >> 32;
    v ^= v >> 16;
    v ^= v >> 8;
    v ^= v >> 4;
    (0x6996u32 >> (v & 0xF)) & 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_coefficient_is_one_and_start_in_range() {
        for i in 0..1000u32 {
            let h = KeyHash::of(&i.to_le_bytes());
            for (seed, starts) in [(0, 1), (1, 2), (7, 1000), (u32::MAX, u64::MAX)] {
                let r = ribbon_hash(h, seed, starts);
                assert_eq!(r.coeff & 1, 1);
                assert!(r.start < starts);
            }
        }
    }

    #[test]
    fn seeds_give_different_equations() {
        let h = KeyHash::of(b"key");
        let a = ribbon_hash(h, 0, 1 << 20);
        let b = ribbon_hash(h, 1, 1 << 20);
        assert_ne!(a.coeff, b.coeff);
        assert_ne!(a.start, b.start);
        assert_eq!(a, ribbon_hash(h, 0, 1 << 20), "deterministic");
    }

    #[test]
    fn parity_matches_count_ones() {
        let mut x = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210u128;
        for _ in 0..1000 {
            assert_eq!(parity(x), x.count_ones() & 1);
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835) ^ (x >> 7);
        }
        assert_eq!(parity(0), 0);
        assert_eq!(parity(1 << 127), 1);
    }
}
