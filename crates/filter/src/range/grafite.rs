//! Grafite: a range filter over `u64` keys with a false-positive bound for any data
//! and any queries (Costa, Ferragina, Vinciguerra, "Grafite: Taming Adversarial
//! Queries with Optimal Range Filters", SIGMOD 2024).
//!
//! The key universe is cut into blocks of `L ≤ r` consecutive keys (`L` = the longest
//! range the filter answers). Each block gets a random offset `q(j)` in a *reduced
//! universe* `[0, r)`, and a key moves by its block's offset:
//!
//! ```text
//!   h(x) = (q(j) + x − j·L) mod r,  j = ⌊x / L⌋      q(j) = fastrange(mix(j ^ seed), r)
//!
//!   keys     |--- block j ---|--- block j+1 ---|
//!            a  x      b        y
//!   hashed   [q(j)+a−jL .. q(j)+b−jL] mod r  keeps the order of a, x, b inside block j;
//!            y lands at an independent random place
//! ```
//!
//! The paper writes `(q(j) + x) mod r`; adding `x − j·L` (the offset inside the block)
//! instead is the same family of hashes (`q(j) + j·L mod r` is as uniform as `q(j)`),
//! and since `x − j·L < L ≤ r` and `q(j) < r` the sum is reduced by one conditional
//! subtraction instead of a 64-bit division. With `L` a power of two, `j` is a shift.
//!
//! The filter stores the set `h(S)` in an [`EliasFano`] sequence. A query `[a, b]`
//! of length `l = b − a + 1 ≤ L` touches at most two blocks; each piece maps to one
//! interval of `[0, r)` (two, if it wraps past `r − 1`), and the answer is whether a
//! stored hash falls in it: one successor search per interval.
//!
//! * **No false negatives.** A key in `[a, b]` is in one of the pieces, and its hash
//!   is inside that piece's hashed interval, because `h` is a shift within a block.
//! * **False positives.** A key of the same block outside the piece cannot alias into
//!   it while the piece is shorter than `r` (a shift mod `r` is injective on fewer
//!   than `r` consecutive values). A key of another block lands in a piece's
//!   interval with probability `len/r` over the choice of `q`, so by the union bound
//!   a query of length `l` is a false positive with probability at most `n·l/r`.
//!   With `r = n·2^(B−2)` that is `l / 2^(B−2)`, and Elias–Fano spends
//!   `2 + log2(r/n) = B` bits per key: the bound of the paper for `B` bits per key.
//! * **When the answer is "maybe".** A range of `r` or more values covers the whole
//!   reduced universe (the hashed interval would wrap onto itself), and a range
//!   longer than `L` may touch more than two blocks: both answer "maybe" without a
//!   search.

use super::elias_fano::EliasFano;
use crate::hash::fastrange64;

/// A finalizer with full avalanche (MurmurHash3's `fmix64` constants), so that the
/// offsets of neighbouring blocks are independent-looking.
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z ^= z >> 33;
    z = z.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z ^= z >> 33;
    z = z.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    z ^ (z >> 33)
}

/// The parameters of one filter's locality-preserving hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hasher {
    /// The reduced universe `r ≥ 1`.
    pub universe: u64,
    /// The block length `1 ≤ L ≤ r` (also the longest range answered).
    pub block_len: u64,
    pub seed: u64,
    /// `log2 L` when `L` is a power of two: the block number is then a shift.
    shift: Option<u32>,
}

impl Hasher {
    /// The hash of reduced universe `universe ≥ 1` and block length `block_len ≥ 1`,
    /// lowered to `universe` if longer (see the module docs: `L ≤ r`).
    pub(crate) fn new(universe: u64, block_len: u64, seed: u64) -> Hasher {
        let block_len = block_len.clamp(1, universe.max(1));
        Hasher {
            universe: universe.max(1),
            block_len,
            seed,
            shift: block_len
                .is_power_of_two()
                .then(|| block_len.trailing_zeros()),
        }
    }

    /// `⌊x / L⌋`.
    #[inline]
    pub(crate) fn block(&self, x: u64) -> u64 {
        match self.shift {
            Some(s) => x >> s,
            None => x / self.block_len,
        }
    }

    /// `h(x)`, in `[0, r)`.
    #[inline]
    pub(crate) fn hash(&self, x: u64) -> u64 {
        let j = self.block(x);
        let q = fastrange64(mix(j ^ self.seed), self.universe);
        // q < r and x − jL < L ≤ r ≤ 2^63: the sum fits, one subtraction reduces it.
        let s = q + (x - j * self.block_len);
        if s >= self.universe {
            s - self.universe
        } else {
            s
        }
    }
}

/// The largest reduced universe a block may have: with `r ≤ 2^63` the hash's sum
/// `q + (x − jL)` (both terms below `r`) fits a `u64`, and so do the Elias–Fano
/// decoder's positions. Writers never exceed it; a block that does is refused.
pub(crate) const MAX_UNIVERSE: u64 = 1 << 63;

/// The reduced universe for `n` distinct keys at `bits_per_key`: `n · 2^(B−2)`,
/// rounded up, at least `n` and at most [`MAX_UNIVERSE`].
pub(crate) fn reduced_universe(n: u64, bits_per_key: f64) -> u64 {
    const MAX: f64 = MAX_UNIVERSE as f64;
    let r = (n as f64 * (bits_per_key - 2.0).exp2()).ceil();
    // NaN or infinity cannot come from a validated bits_per_key; cap them anyway.
    let r = if r.is_finite() { r.min(MAX) } else { MAX };
    (r as u64).max(n)
}

/// Hashes sorted, distinct keys and codes their hashes.
pub(crate) fn build(keys: &[u64], hasher: &Hasher) -> EliasFano {
    let mut hashed: Vec<u64> = keys.iter().map(|&x| hasher.hash(x)).collect();
    hashed.sort_unstable();
    hashed.dedup();
    EliasFano::new(&hashed, hasher.universe)
}

/// Whether a stored key may lie in `a ..= b` (`a ≤ b`): "maybe" for ranges of `r` or
/// more values or longer than `L`, else the answer of one or two hashed intervals.
pub(crate) fn may_contain(ef: &EliasFano, hasher: &Hasher, a: u64, b: u64) -> bool {
    if a > b {
        return false;
    }
    let len = u128::from(b - a) + 1;
    if len > u128::from(hasher.block_len) || len >= u128::from(hasher.universe) {
        return true;
    }
    let (ja, jb) = (hasher.block(a), hasher.block(b));
    if ja == jb {
        piece(ef, hasher, a, b)
    } else {
        // len ≤ L: b is in the block right after a's. Its first key is jb·L ≤ b.
        let split = jb * hasher.block_len;
        piece(ef, hasher, a, split - 1) || piece(ef, hasher, split, b)
    }
}

/// `a ..= b` inside one block, shorter than `r`: one hashed interval, or two when it
/// wraps past `r − 1`.
#[inline]
fn piece(ef: &EliasFano, hasher: &Hasher, a: u64, b: u64) -> bool {
    let (lo, hi) = (hasher.hash(a), hasher.hash(b));
    if lo <= hi {
        ef.any_in(lo, hi)
    } else {
        ef.any_in(lo, hasher.universe - 1) || ef.any_in(0, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_a_shift_within_a_block() {
        let h = Hasher::new(1000, 64, 7);
        for x in 64 * 5..64 * 6 - 1 {
            assert_eq!((h.hash(x) + 1) % 1000, h.hash(x + 1));
        }
        // Not a power of two: the block number is a division, the same shift inside.
        let h = Hasher::new(1000, 48, 7);
        for x in 48 * 5..48 * 6 - 1 {
            assert_eq!((h.hash(x) + 1) % 1000, h.hash(x + 1));
        }
        assert_eq!(h.block(48 * 6 - 1), 5);
        assert_eq!(h.block(48 * 6), 6);
    }

    #[test]
    fn every_stored_key_is_found_by_every_short_range_over_it() {
        let keys = [0u64, 5, 63, 64, 65, 1000, u64::MAX - 1, u64::MAX];
        let h = Hasher::new(reduced_universe(keys.len() as u64, 10.0), 16, 3);
        let ef = build(&keys, &h);
        for &k in &keys {
            for before in 0..16u64 {
                for len in 1..=16u64 {
                    let a = k.saturating_sub(before);
                    let b = a.saturating_add(len - 1);
                    if a <= k && k <= b {
                        assert!(may_contain(&ef, &h, a, b), "{k} in {a}..={b}");
                    }
                }
            }
        }
    }

    #[test]
    fn too_long_ranges_are_maybe() {
        let h = Hasher::new(8, 100, 0);
        assert_eq!(h.block_len, 8); // lowered to r
        let ef = build(&[1000], &h);
        assert!(may_contain(&ef, &h, 0, 7)); // 8 values ≥ r
        let h = Hasher::new(1 << 20, 4, 0);
        let ef = build(&[1000], &h);
        assert!(may_contain(&ef, &h, 0, 4)); // 5 values > L
        assert!(!may_contain(&ef, &h, 5, 4)); // empty
    }
}
