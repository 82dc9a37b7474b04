//! A Ribbon filter small enough to print: the store's own hashing and banding on a
//! band a student can read (16 slots, 8-bit rows), for `examples/ribbon_walkthrough.rs`
//! and `docs/GUIDE.md`.
//!
//! A filter block's Ribbon has 64-bit rows over thousands of slots (`ribbon::block`);
//! this one has rows `width` bits wide (at most 64) over `slots` slots, and `r` result
//! bits per slot (at most 8). The steps are the real ones:
//!
//! ```text
//!  key ──KeyHash──> ribbon_hash (the version-3 derivation), cut to `width` and `r` bits
//!  band:   Band::add, the same on-the-fly elimination the block builder runs
//!  solve:  last slot first, S[p] = result[p] ^ XOR of S[p + j] for c_j = 1, j ≥ 1
//!  store:  interleaved, `width` slots by `r` columns per block, one word per column
//!  query:  the key's start block and the next, r parities of (row & window)
//! ```
//!
//! The solver works a slot at a time with all `r` columns in one byte, where
//! `ribbon::solve` works a column at a time with 64 slots in a word: the same
//! equations, drawn the way a student checks them by hand.

use crate::error::FilterError;
use crate::hash::KeyHash;

use super::band::Band;
use super::hash::{ribbon_hash, seed_salt};

/// The widest row a teaching filter takes (the store's own width).
pub const TEACH_MAX_WIDTH: u32 = 64;
/// The most result bits per slot a teaching filter takes.
pub const TEACH_MAX_RESULT_BITS: u32 = 8;

/// One key's equation: `XOR of S[start + j] for every j with bit j of coeff set` must
/// equal `fingerprint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeachingEquation {
    /// The first slot of the equation.
    pub start: usize,
    /// Bit `j` is slot `start + j`; bit 0 is always 1.
    pub coeff: u64,
    /// The right-hand side, `r` bits.
    pub fingerprint: u8,
}

/// A tiny Ribbon filter: its keys' equations, the band in echelon form, the solution
/// and its interleaved storage.
///
/// ```
/// use bloomkv_filter::TeachingRibbon;
/// let keys: Vec<&[u8]> = vec![b"apple", b"banana", b"cherry", b"date"];
/// let ribbon = TeachingRibbon::build(&keys, 16, 8, 4, 0, 16)?;
/// assert!(keys.iter().all(|k| ribbon.contains(k)));
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TeachingRibbon {
    slots: usize,
    width: u32,
    result_bits: u32,
    seed: u32,
    failed_seeds: Vec<u32>,
    band: Vec<Option<(u64, u8)>>,
    solution: Vec<u8>,
}

impl TeachingRibbon {
    /// Builds a filter of `slots` slots with rows of `width` bits and `result_bits`
    /// bits per slot from `keys`, trying seeds `first_seed`, `first_seed + 1`, … up to
    /// `max_seeds` of them until one bands without contradiction.
    ///
    /// Errors when the sizes are out of range (`1 ≤ width ≤ min(slots, 64)`,
    /// `slots` a multiple of `width`, `1 ≤ result_bits ≤ 8`), or when no seed works.
    pub fn build(
        keys: &[&[u8]],
        slots: usize,
        width: u32,
        result_bits: u32,
        first_seed: u32,
        max_seeds: u32,
    ) -> Result<TeachingRibbon, FilterError> {
        check_sizes(slots, width, result_bits)?;
        let mut failed_seeds = Vec::new();
        for seed in (0..max_seeds).map(|i| first_seed.wrapping_add(i)) {
            match band_keys(keys, slots, width, result_bits, seed) {
                Some(band) => {
                    let solution = back_substitute(&band, width);
                    return Ok(TeachingRibbon {
                        slots,
                        width,
                        result_bits,
                        seed,
                        failed_seeds,
                        band,
                        solution,
                    });
                }
                None => failed_seeds.push(seed),
            }
        }
        Err(FilterError::InvalidArgument(format!(
            "{} keys did not band into {slots} slots of width {width} with {max_seeds} seeds",
            keys.len()
        )))
    }

    /// The equation of `key` under seed `seed` in a filter of these sizes.
    pub fn equation_for(
        key: &[u8],
        slots: usize,
        width: u32,
        result_bits: u32,
        seed: u32,
    ) -> TeachingEquation {
        let num_starts = (slots as u64).saturating_sub(u64::from(width)) + 1;
        let h = ribbon_hash(KeyHash::of(key), seed_salt(seed), num_starts);
        TeachingEquation {
            start: h.start as usize,
            coeff: h.coeff & low_bits(width),
            fingerprint: (h.fingerprint & low_bits(result_bits) as u32) as u8,
        }
    }

    /// The equation of `key` in this filter (its seed and sizes).
    pub fn equation(&self, key: &[u8]) -> TeachingEquation {
        Self::equation_for(key, self.slots, self.width, self.result_bits, self.seed)
    }

    /// Slots of the filter.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Width of a row, in slots.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Result bits per slot (`r`): an absent key passes with probability `2^-r`.
    pub fn result_bits(&self) -> u32 {
        self.result_bits
    }

    /// The seed whose equations banded.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// The seeds tried before it, whose equations contradicted each other.
    pub fn failed_seeds(&self) -> &[u32] {
        &self.failed_seeds
    }

    /// The band after elimination, per slot: `Some((coeff, result))` for a slot that
    /// holds an equation (bit 0 of `coeff`, its pivot, is that slot), `None` for a free
    /// slot.
    pub fn band(&self) -> &[Option<(u64, u8)>] {
        &self.band
    }

    /// The solution: `r` bits per slot.
    pub fn solution(&self) -> &[u8] {
        &self.solution
    }

    /// The solution stored interleaved: for each block of `width` slots, its `r`
    /// columns one word each (bit `i` of column `b`'s word is bit `b` of the block's
    /// slot `i`): `words[block * r + b]`.
    pub fn interleaved(&self) -> Vec<u64> {
        let (width, r) = (self.width as usize, self.result_bits as usize);
        let mut words = vec![0u64; self.slots / width * r];
        for (slot, &s) in self.solution.iter().enumerate() {
            let (block, i) = (slot / width, slot % width);
            for b in 0..r {
                if let Some(w) = words.get_mut(block * r + b) {
                    *w |= u64::from((s >> b) & 1) << i;
                }
            }
        }
        words
    }

    /// Whether `key`'s equation holds, evaluated on the solution slot by slot.
    pub fn contains(&self, key: &[u8]) -> bool {
        let eq = self.equation(key);
        let mut acc = 0u8;
        for j in 0..self.width as usize {
            if (eq.coeff >> j) & 1 == 1 {
                acc ^= self.solution.get(eq.start + j).copied().unwrap_or(0);
            }
        }
        acc == eq.fingerprint
    }

    /// Whether `key`'s equation holds, evaluated the way a block query does: read the
    /// words of the key's start block and the next, shift the `width` slots from the
    /// start into one window, and compare `parity(coeff & window)` with each
    /// fingerprint bit.
    pub fn contains_interleaved(&self, words: &[u64], key: &[u8]) -> bool {
        let eq = self.equation(key);
        let (width, r) = (self.width as usize, self.result_bits as usize);
        let (block, shift) = (eq.start / width, eq.start % width);
        (0..r).all(|b| {
            let here = words.get(block * r + b).copied().unwrap_or(0);
            let next = words.get((block + 1) * r + b).copied().unwrap_or(0);
            let mut window = here >> shift;
            if shift > 0 {
                window |= next << (width - shift);
            }
            window &= low_bits(self.width);
            ((eq.coeff & window).count_ones() & 1) as u8 == (eq.fingerprint >> b) & 1
        })
    }

    /// Of `seeds` seeds from 0, how many band `keys` keys (named `0`, `1`, …) into
    /// `slots` slots of rows `width` wide: how the slack a build needs depends on the
    /// row width. Errors as [`TeachingRibbon::build`] on sizes.
    pub fn banding_successes(
        keys: usize,
        slots: usize,
        width: u32,
        seeds: u32,
    ) -> Result<u32, FilterError> {
        check_sizes(slots, width, 1)?;
        let names: Vec<[u8; 8]> = (0..keys as u64).map(u64::to_le_bytes).collect();
        let keys: Vec<&[u8]> = names.iter().map(|k| &k[..]).collect();
        Ok((0..seeds)
            .filter(|&seed| band_keys(&keys, slots, width, 1, seed).is_some())
            .count() as u32)
    }
}

fn check_sizes(slots: usize, width: u32, result_bits: u32) -> Result<(), FilterError> {
    if width == 0 || width > TEACH_MAX_WIDTH || slots < width as usize {
        return Err(FilterError::InvalidArgument(format!(
            "row width {width} must be in 1..={TEACH_MAX_WIDTH} and at most the {slots} slots"
        )));
    }
    if !slots.is_multiple_of(width as usize) {
        return Err(FilterError::InvalidArgument(format!(
            "{slots} slots are not whole blocks of {width}"
        )));
    }
    if result_bits == 0 || result_bits > TEACH_MAX_RESULT_BITS {
        return Err(FilterError::InvalidArgument(format!(
            "result bits {result_bits} must be in 1..={TEACH_MAX_RESULT_BITS}"
        )));
    }
    Ok(())
}

fn low_bits(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Bands every key's equation under `seed`; `None` on a contradiction.
fn band_keys(
    keys: &[&[u8]],
    slots: usize,
    width: u32,
    result_bits: u32,
    seed: u32,
) -> Option<Vec<Option<(u64, u8)>>> {
    let mut band = Band::new(slots);
    for key in keys {
        let eq = TeachingRibbon::equation_for(key, slots, width, result_bits, seed);
        if !band.add(eq.start, eq.coeff, u32::from(eq.fingerprint)) {
            return None;
        }
    }
    Some(
        (0..slots)
            .map(|p| match band.row(p) {
                (0, _) => None,
                (c, f) => Some((c, f as u8)),
            })
            .collect(),
    )
}

/// Solves the banded system from the last slot to the first; free slots get 0.
fn back_substitute(band: &[Option<(u64, u8)>], width: u32) -> Vec<u8> {
    let mut s = vec![0u8; band.len()];
    for p in (0..band.len()).rev() {
        if let Some((coeff, result)) = band[p] {
            let mut v = result;
            for j in 1..width as usize {
                if (coeff >> j) & 1 == 1 {
                    v ^= s.get(p + j).copied().unwrap_or(0);
                }
            }
            s[p] = v;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("key{i}").into_bytes()).collect()
    }

    #[test]
    fn every_key_answers_in_both_evaluations() {
        let names = names(12);
        let keys: Vec<&[u8]> = names.iter().map(|k| &k[..]).collect();
        let ribbon = TeachingRibbon::build(&keys, 16, 8, 4, 0, 64).expect("a seed bands");
        let words = ribbon.interleaved();
        assert_eq!(words.len(), 2 * 4);
        for key in &keys {
            assert!(ribbon.contains(key));
            assert!(ribbon.contains_interleaved(&words, key));
        }
        // The band is in echelon form: each stored row's pivot is its own slot and its
        // bits stay inside the band of slots.
        for (p, row) in ribbon.band().iter().enumerate() {
            if let Some((c, _)) = row {
                assert_eq!(c & 1, 1, "pivot of slot {p}");
                assert!(p + (64 - c.leading_zeros() as usize) <= 16);
            }
        }
        // The two evaluations agree on absent keys too.
        for i in 0..200 {
            let k = format!("absent{i}");
            assert_eq!(
                ribbon.contains(k.as_bytes()),
                ribbon.contains_interleaved(&words, k.as_bytes())
            );
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        let keys: Vec<&[u8]> = vec![b"a"];
        assert!(TeachingRibbon::build(&keys, 16, 0, 4, 0, 1).is_err());
        assert!(TeachingRibbon::build(&keys, 16, 65, 4, 0, 1).is_err());
        assert!(TeachingRibbon::build(&keys, 12, 8, 4, 0, 1).is_err());
        assert!(TeachingRibbon::build(&keys, 16, 8, 9, 0, 1).is_err());
        assert!(TeachingRibbon::build(&keys, 16, 8, 0, 0, 1).is_err());
        // 17 keys never fit 16 slots.
        let names = names(17);
        let many: Vec<&[u8]> = names.iter().map(|k| &k[..]).collect();
        assert!(TeachingRibbon::build(&many, 16, 8, 4, 0, 8).is_err());
    }

    #[test]
    fn wider_rows_band_more_often() {
        let narrow = TeachingRibbon::banding_successes(56, 64, 8, 100).expect("sizes");
        let wide = TeachingRibbon::banding_successes(56, 64, 32, 100).expect("sizes");
        assert!(wide > narrow, "width 32: {wide}, width 8: {narrow}");
    }
}
