//! The shape of a Ribbon filter: how many slots, how many result columns in which
//! blocks, and the false-positive rate that follows.
//!
//! The `m` slots form `B = m / w` blocks of `w`, the row width (64 in blocks written
//! today, 128 in version-2 blocks). Each block stores `r + 1` result columns if it is
//! one of the first `U` blocks, else `r`: so the filter spends `(B·r + U) · w` bits,
//! any whole number of `w`-bit words, and bits per key can be fractional.
//!
//! ```text
//!  block:    0      1     ...   U-1  |  U    ...   B-1
//!  columns:  r+1    r+1   ...   r+1  |  r    ...   r
//! ```
//!
//! A query starting in block `i` reads blocks `i` and `i + 1` and checks the columns
//! both hold, `cols(min(i + 1, B - 1))`; an absent key passes each checked column with
//! probability 1/2, independently (its fingerprint is independent of its row). With
//! start slots uniform over `0 .. m - w + 1`,
//!
//! ```text
//!  FP = Σ_i  P(start in block i) · 2^-cols(min(i+1, B-1))
//! ```
//!
//! which is exact for the block's shape: no load variance, no spread between filters.
//!
//! **Slots per key.** Banding a random system succeeds with high probability once the
//! slots exceed the keys by a margin that grows slowly with `n`, and faster for narrow
//! rows. Measured with 64-bit rows (the ignored test `ribbon_overhead_sweep`, share of
//! 400, 200, 100, 40 and 8 seeds that succeed, at slots per key around the rule):
//!
//! ```text
//!  10^3 keys   1.015: 0.65   1.025: 1.00
//!  10^4 keys   1.025: 0.48   1.043: 0.74   1.053: 0.91   1.065: 0.95   1.085: 1.00
//!  10^5 keys   1.057: 0.30   1.071: 0.76   1.081: 0.84   1.091: 0.96
//!  10^6 keys   1.088: 0.53   1.099: 0.75   1.109: 0.85   1.119: 0.98
//!  10^7 keys   1.100: 0.00   1.120: 0.63   1.128: 0.75   1.138: 1.00
//! ```
//!
//! [`slot_factor`] follows the ~85% line; a failed seed is retried with another (four
//! in all). Version-2 blocks, with 128-bit rows, needed only 1.025, 1.037, 1.048 and
//! 1.060 slots per key at 10^4 to 10^7 keys for 95%: the price of the narrower row's
//! faster query. Each extra 1% of slots costs 1% of the bits each slot gets, i.e. about
//! 6–7% more false positives at 10 bits per key (`r` ≈ 9 bits: 2^(0.01·9)).

use super::hash::ROW_BITS;

/// Result columns at most (`r + 1` fits the 32-bit fingerprint).
pub(crate) const MAX_COLUMNS: u32 = 32;

/// A Ribbon filter's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Slots per block: the coefficient rows' width, 64 or 128.
    pub width: u64,
    /// Blocks of `width` slots, at least 1.
    pub blocks: u64,
    /// Columns of the lower blocks, `r ≥ 1`.
    pub lower_cols: u32,
    /// Leading blocks holding `r + 1` columns, `< blocks`.
    pub upper_blocks: u64,
}

impl Shape {
    /// Slots `m = width · blocks`.
    pub(crate) fn slots(&self) -> u64 {
        self.blocks * self.width
    }

    /// Possible start slots, `m - width + 1`.
    pub(crate) fn num_starts(&self) -> u64 {
        self.slots() - (self.width - 1)
    }

    /// `width`-bit words of the solution.
    pub(crate) fn words(&self) -> u64 {
        self.blocks * u64::from(self.lower_cols) + self.upper_blocks
    }

    /// Columns stored for block `i`.
    #[inline]
    pub(crate) fn cols(&self, i: u64) -> u32 {
        self.lower_cols + u32::from(i < self.upper_blocks)
    }

    /// Index of block `i`'s first word: its columns are words `offset .. offset + cols`.
    #[inline]
    pub(crate) fn offset(&self, i: u64) -> u64 {
        i * u64::from(self.lower_cols) + i.min(self.upper_blocks)
    }

    /// The expected false-positive rate of this shape (module docs).
    pub(crate) fn expected_fp(&self) -> f64 {
        let b = self.blocks;
        let r = f64::from(self.lower_cols);
        // Blocks 0..b-1 hold `width` starts each and block b-1 one (the very last start);
        // a start in block i checks cols(i + 1) columns, or cols(b - 1) at the end.
        let upper_reads = self.upper_blocks.saturating_sub(1).min(b - 1) as f64;
        let lower_reads = (b - 1) as f64 - upper_reads;
        let last = 0.5f64.powi(self.cols(b - 1) as i32);
        let full =
            self.width as f64 * (upper_reads * 0.5f64.powf(r + 1.0) + lower_reads * 0.5f64.powf(r));
        (full + last) / self.num_starts() as f64
    }

    /// The shape of 64-bit rows for `n ≥ 1` keys within `budget_bits` of solution, with
    /// `slot_factor` slots per key; `None` if not even one column fits.
    pub(crate) fn for_keys(n: u64, budget_bits: f64, slot_factor: f64) -> Option<Shape> {
        let slots = (n as f64 * slot_factor).ceil();
        // Past 2^63 slots, `blocks · width` would overflow: no such block can be built.
        if !(slots.is_finite() && budget_bits.is_finite())
            || budget_bits < 0.0
            || slots >= (1u64 << 63) as f64
        {
            return None;
        }
        let blocks = ((slots as u64).div_ceil(ROW_BITS)).max(1);
        let words = (budget_bits / ROW_BITS as f64).floor() as u64;
        let mut lower = words / blocks;
        let mut upper = words % blocks;
        if lower == 0 {
            return None;
        }
        if lower >= u64::from(MAX_COLUMNS) {
            // 2^-31 already: spend no more.
            lower = u64::from(MAX_COLUMNS) - 1;
            upper = 0;
        }
        Some(Shape {
            width: ROW_BITS,
            blocks,
            lower_cols: lower as u32,
            upper_blocks: upper,
        })
    }
}

/// Slots per key for `n` keys: `0.94 + 0.0085 · log2(n)` (1.053 at 10^4 keys, 1.081
/// at 10^5, 1.109 at 10^6, 1.138 at 10^7), fitted to where one seed succeeds about 85%
/// of the time with 64-bit rows (module docs), so that all four seeds fail about once
/// in 2,000 tables.
pub(crate) fn slot_factor(n: u64) -> f64 {
    let log = (n.max(2) as f64).log2();
    0.94 + 0.0085 * log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_columns() {
        let s = Shape {
            width: 64,
            blocks: 4,
            lower_cols: 3,
            upper_blocks: 2,
        };
        assert_eq!(s.words(), 14);
        assert_eq!(
            (0..4).map(|i| s.cols(i)).collect::<Vec<_>>(),
            vec![4, 4, 3, 3]
        );
        assert_eq!(
            (0..5).map(|i| s.offset(i)).collect::<Vec<_>>(),
            vec![0, 4, 8, 11, 14]
        );
    }

    #[test]
    fn one_block_has_one_start() {
        let s = Shape {
            width: 64,
            blocks: 1,
            lower_cols: 7,
            upper_blocks: 0,
        };
        assert_eq!(s.num_starts(), 1);
        assert_eq!(s.expected_fp(), 0.5f64.powi(7));
    }

    #[test]
    fn expected_fp_mixes_r_and_r_plus_1() {
        let all_r = Shape {
            width: 128,
            blocks: 1000,
            lower_cols: 9,
            upper_blocks: 0,
        };
        assert!((all_r.expected_fp() - 0.5f64.powi(9)).abs() < 1e-15);
        let half = Shape {
            upper_blocks: 500,
            ..all_r
        };
        let mix = 0.5 * (0.5f64.powi(9) + 0.5f64.powi(10));
        assert!((half.expected_fp() - mix).abs() / mix < 0.002);
    }

    #[test]
    fn shape_spends_the_budget() {
        let n = 100_000u64;
        let s = Shape::for_keys(n, 10.0 * n as f64 - 320.0, slot_factor(n)).unwrap();
        let bits = s.words() * 64;
        assert!(bits as f64 <= 10.0 * n as f64 - 320.0);
        assert!(bits as f64 > 10.0 * n as f64 - 320.0 - 64.0);
        assert!(s.upper_blocks < s.blocks);
        assert!(Shape::for_keys(n, 100.0, 1.05).is_none());
        assert!(Shape::for_keys(n, f64::NAN, 1.05).is_none());
    }

    /// How the slots-per-key rule was measured: for each table size, the fraction of
    /// seeds whose banding succeeds at a few slot factors around the rule, over
    /// random key sets. Run with
    /// `cargo test --release -p bloomkv-filter --lib ribbon_overhead_sweep -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn ribbon_overhead_sweep() {
        use super::super::band::Band;
        use super::super::hash::{ribbon_hash, seed_salt};
        use crate::hash::KeyHash;
        let mut state = 1u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        for (n, trials) in [
            (1_000u64, 400u32),
            (10_000, 200),
            (100_000, 100),
            (1_000_000, 40),
            (10_000_000, 8),
        ] {
            let rule = slot_factor(n);
            let mut line = format!("n {n:>8} rule {rule:.4}:");
            for delta in [-0.01, 0.0, 0.01] {
                let factor = rule + delta;
                let shape = Shape::for_keys(n, 1e12, factor).unwrap();
                let mut ok = 0;
                for seed in 0..trials {
                    let mut band = Band::new(shape.slots() as usize);
                    let fine = (0..n).all(|_| {
                        let h = KeyHash::from_halves(next(), next());
                        let r = ribbon_hash(h, seed_salt(seed), shape.num_starts());
                        band.add(r.start as usize, r.coeff, r.fingerprint)
                    });
                    ok += u32::from(fine);
                }
                line += &format!("  {factor:.4}: {:.3}", f64::from(ok) / f64::from(trials));
            }
            println!("{line}");
        }
    }
}
