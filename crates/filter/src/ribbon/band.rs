//! Banding: on-the-fly Gaussian elimination, one key's equation at a time.
//!
//! The band holds at most one row per slot, and a row stored at slot `p` has its first
//! 1 bit at `p` (its *pivot*) and every other bit within the next 63 slots (rows are
//! 64 bits wide, `w = 64`): the matrix is in echelon form at all times, and a band of
//! `m` slots costs `16 · m` bytes (8 + 4, padded). Adding an equation `(start, c, f)`:
//!
//! ```text
//!  p = start
//!  loop:
//!    slot p empty?        store (c, f) at p: done, one more pivot
//!    else                 c ^= row[p].c ; f ^= row[p].f      (clears bit 0 of c)
//!      c == 0 and f == 0  the equation was implied by earlier ones (a duplicate key)
//!      c == 0 and f != 0  contradiction: this seed's system is singular -> fail
//!      else               shift c right to its lowest 1 bit, advancing p as far
//! ```
//!
//! Every equation's 1 bits lie below slot `m` (a start is below `m - 63`), and so do a
//! stored row's; an XOR with one keeps `c`'s 1 bits there and a shift drops only
//! zeros, so `p` never passes the last slot (though it may pass `start + 64`). With a
//! little more slots than keys, the expected work per key is a few XORs of 64-bit rows
//! (Dillinger & Walzer, "Ribbon filter", 2021).

/// What [`Band::insert`] did with an equation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// Stored as the row of this slot (its pivot).
    Stored(usize),
    /// Implied by the rows already stored (a repeated key): nothing stored.
    Implied,
    /// Contradicts the rows already stored: nothing stored.
    Contradiction,
}

/// The band: a coefficient row and a result row per slot (`coeff == 0` = empty slot).
#[derive(Debug)]
pub(crate) struct Band {
    /// `(coefficients, result)` per slot, side by side: a step of banding reads both,
    /// so one bounds check and one cache line instead of two of each.
    rows: Vec<(u64, u32)>,
}

impl Band {
    /// An empty band of `slots` slots.
    pub(crate) fn new(slots: usize) -> Band {
        Band {
            rows: vec![(0, 0); slots],
        }
    }

    /// Adds the equation `c · S[start..start+64] = f`. Returns `false` if it
    /// contradicts the equations already added (construction must retry).
    #[inline]
    pub(crate) fn add(&mut self, start: usize, coeff: u64, result: u32) -> bool {
        !matches!(self.insert(start, coeff, result), Insert::Contradiction)
    }

    /// Adds the equation `c · S[start..start+64] = f` and says what became of it: the
    /// slot it now occupies, implied, or refused. A refused equation changes nothing,
    /// and [`Band::clear`] of a slot it returned undoes an insert (bumping, `bump.rs`,
    /// undoes the last ones of a bucket this way: no stored row was ever changed by a
    /// later one).
    #[inline]
    pub(crate) fn insert(&mut self, start: usize, coeff: u64, result: u32) -> Insert {
        let (mut p, mut c, mut f) = (start, coeff, result);
        loop {
            // `c` has bit 0 set here: it was forced, or shifted to its lowest 1 bit.
            let Some((row_c, row_f)) = self.rows.get_mut(p) else {
                return Insert::Contradiction; // unreachable for starts below slots - 63
            };
            if *row_c == 0 {
                *row_c = c;
                *row_f = f;
                return Insert::Stored(p);
            }
            c ^= *row_c;
            f ^= *row_f;
            if c == 0 {
                return if f == 0 {
                    Insert::Implied
                } else {
                    Insert::Contradiction
                };
            }
            let tz = c.trailing_zeros();
            c >>= tz;
            p += tz as usize;
        }
    }

    /// Empties `slot` (undoes the insert that stored a row there).
    #[inline]
    pub(crate) fn clear(&mut self, slot: usize) {
        if let Some(row) = self.rows.get_mut(slot) {
            *row = (0, 0);
        }
    }

    /// The row stored at `slot`: `(coefficients, result)`, coefficients 0 if empty.
    #[inline]
    pub(crate) fn row(&self, slot: usize) -> (u64, u32) {
        self.rows.get(slot).copied().unwrap_or((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_implied_contradictions_are_refused() {
        let mut band = Band::new(256);
        assert!(band.add(3, 0b1011, 5));
        assert!(band.add(3, 0b1011, 5), "the same equation again");
        assert!(!band.add(3, 0b1011, 6), "same row, other result");
        // A row reduced by the stored one moves to its next 1 bit.
        assert!(band.add(3, 0b0011, 1));
        assert_eq!(band.row(6), (0b1, 4));
    }

    #[test]
    fn clear_undoes_an_insert() {
        let mut band = Band::new(256);
        assert_eq!(band.insert(3, 0b1011, 5), Insert::Stored(3));
        assert_eq!(band.insert(3, 0b0011, 1), Insert::Stored(6));
        assert_eq!(band.insert(3, 0b1011, 5), Insert::Implied);
        assert_eq!(band.insert(3, 0b1011, 6), Insert::Contradiction);
        band.clear(6);
        assert_eq!(band.row(6), (0, 0));
        assert_eq!(band.insert(3, 0b0011, 1), Insert::Stored(6));
    }
}
