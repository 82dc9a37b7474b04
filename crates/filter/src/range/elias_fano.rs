//! Elias–Fano: a sorted sequence of integers in about `2 + log2(u/n)` bits each.
//!
//! `n` values below a universe `u` are each split into `ℓ = floor(log2(u/n))` low bits,
//! stored verbatim side by side, and the remaining high bits, stored in unary: value
//! `i` (0-based, in sorted order) sets bit `(v_i >> ℓ) + i` of the *high* bit vector.
//! The high vector has `n` ones and one zero per bucket of `2^ℓ` values, so it is at
//! most `2n + 1` bits long, and the low bits cost `n·ℓ`:
//!
//! ```text
//!  values  3  5  9 10 14      u = 16, n = 5, ℓ = floor(log2(16/5)) = 1
//!  high    1  2  4  5  7      (v >> ℓ)
//!  low     1  1  1  0  0      (v & 1)
//!  high bits, bit (v_i >> ℓ) + i:  0 1 0 1 0 0 1 1 0 0 1 0
//!                bucket:            0 |1  |2 |3|4   |5|6|7 ...  ones before the b-th zero
//!                                                                  are the values in buckets < b
//! ```
//!
//! [`EliasFano::successor`] finds the first value `≥ x`: the elements of buckets `<
//! x >> ℓ` are those before the `(x >> ℓ)`-th zero of the high vector, found by
//! `select0` from a sampled index of every 256th zero (rebuilt when a block is
//! opened, never stored); the answer is then among the few ones that follow it. With
//! `ℓ` chosen as above a bucket holds at most about two values on average, so a
//! successor query reads a handful of words.
//!
//! The sequence here is strictly increasing (callers deduplicate), which is what
//! [`EliasFano::from_parts`] checks when it decodes one from untrusted words.

/// Every `ZERO_SAMPLE`-th zero of the high vector is indexed: a `select0` then scans
/// about `2·ZERO_SAMPLE` bits (one or two words) from the sample. The index costs
/// `64 / ZERO_SAMPLE` bits per bucket in memory (about 1 bit per key), nothing on disk.
const ZERO_SAMPLE: u64 = 64;

/// A strictly increasing sequence of `u64` values below a universe, Elias–Fano coded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EliasFano {
    len: u64,
    universe: u64,
    low_bits: u32,
    low: Vec<u64>,
    high: Vec<u64>,
    high_len: u64,
    /// `zero_pos[j]` = position in `high` of zero number `j · ZERO_SAMPLE`.
    zero_pos: Vec<u64>,
}

/// `ℓ = floor(log2(u / n))`, 0 when `u ≤ n` (or `n = 0`).
pub(crate) fn low_bits_for(len: u64, universe: u64) -> u32 {
    if len == 0 || universe <= len {
        0
    } else {
        (universe / len).ilog2()
    }
}

/// Words of low bits and high bits for `len` values below `universe`, or `None` if
/// the sizes overflow (only a corrupt header can ask for that).
pub(crate) fn word_counts(len: u64, universe: u64) -> Option<(u64, u64)> {
    let l = low_bits_for(len, universe);
    let low = len.checked_mul(u64::from(l))?.div_ceil(64);
    let high = high_len(len, universe, l)?.div_ceil(64);
    Some((low, high))
}

/// Bits of the high vector: `len` ones and one zero per bucket.
fn high_len(len: u64, universe: u64, low_bits: u32) -> Option<u64> {
    let buckets = if universe == 0 {
        0
    } else {
        ((universe - 1) >> low_bits) + 1
    };
    len.checked_add(buckets)
}

impl EliasFano {
    /// Codes `values`, which must be strictly increasing and below `universe`.
    pub(crate) fn new(values: &[u64], universe: u64) -> EliasFano {
        debug_assert!(values.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(values.last().is_none_or(|&v| v < universe));
        let len = values.len() as u64;
        let low_bits = low_bits_for(len, universe);
        // Sizes cannot overflow: len ≤ universe values fit in memory already.
        let (low_words, high_words) = word_counts(len, universe).unwrap_or((0, 0));
        let high_len = high_len(len, universe, low_bits).unwrap_or(0);
        let mut low = vec![0u64; low_words as usize];
        let mut high = vec![0u64; high_words as usize];
        for (i, &v) in values.iter().enumerate() {
            let i = i as u64;
            if low_bits > 0 {
                write_bits(&mut low, i * u64::from(low_bits), low_bits, v);
            }
            let pos = (v >> low_bits) + i;
            high[(pos / 64) as usize] |= 1 << (pos % 64);
        }
        let mut ef = EliasFano {
            len,
            universe,
            low_bits,
            low,
            high,
            high_len,
            zero_pos: Vec::new(),
        };
        ef.zero_pos = ef.sample_zeros();
        ef
    }

    /// Rebuilds a sequence from its words, checking that they are one this module
    /// wrote: the word counts for `len` and `universe`, exactly `len` ones in the high
    /// vector, nothing set past its end, and values strictly increasing below
    /// `universe`. Returns the reason when they are not.
    pub(crate) fn from_parts(
        len: u64,
        universe: u64,
        low: Vec<u64>,
        high: Vec<u64>,
    ) -> Result<EliasFano, String> {
        if len > universe {
            return Err(format!("{len} distinct values below {universe}"));
        }
        let (low_words, high_words) =
            word_counts(len, universe).ok_or_else(|| "sizes overflow".to_string())?;
        if low.len() as u64 != low_words || high.len() as u64 != high_words {
            return Err(format!(
                "{} low and {} high words where {low_words} and {high_words} were expected",
                low.len(),
                high.len()
            ));
        }
        let low_bits = low_bits_for(len, universe);
        let high_len = high_len(len, universe, low_bits).ok_or("sizes overflow")?;
        let ones: u64 = high.iter().map(|w| u64::from(w.count_ones())).sum();
        if ones != len {
            return Err(format!("{ones} values in the high bits, {len} declared"));
        }
        let used_low = len * u64::from(low_bits);
        if slack_set(&low, used_low) || slack_set(&high, high_len) {
            return Err("bits set past the end of the sequence".into());
        }
        let mut ef = EliasFano {
            len,
            universe,
            low_bits,
            low,
            high,
            high_len,
            zero_pos: Vec::new(),
        };
        let mut prev: Option<u64> = None;
        for v in ef.iter() {
            if v >= universe || prev.is_some_and(|p| p >= v) {
                return Err(format!("value {v} out of order or outside the universe"));
            }
            prev = Some(v);
        }
        ef.zero_pos = ef.sample_zeros();
        Ok(ef)
    }

    /// Number of values.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The universe the values lie below.
    pub(crate) fn universe(&self) -> u64 {
        self.universe
    }

    /// The low words, as stored.
    pub(crate) fn low_words(&self) -> &[u64] {
        &self.low
    }

    /// The high words, as stored.
    pub(crate) fn high_words(&self) -> &[u64] {
        &self.high
    }

    /// Bytes of the coded sequence (low and high words; the zero index not counted).
    pub(crate) fn coded_bytes(&self) -> usize {
        (self.low.len() + self.high.len()) * 8
    }

    /// Low bits of value `i`.
    #[inline]
    fn low(&self, i: u64) -> u64 {
        if self.low_bits == 0 {
            0
        } else {
            read_bits(&self.low, i * u64::from(self.low_bits), self.low_bits)
        }
    }

    /// Every value, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut i = 0u64;
        let mut pos = 0u64;
        std::iter::from_fn(move || {
            let p = self.next_one(pos)?;
            let v = ((p - i) << self.low_bits) | self.low(i);
            i += 1;
            pos = p + 1;
            Some(v)
        })
    }

    /// The position of the first one at or after `pos`.
    #[inline]
    fn next_one(&self, pos: u64) -> Option<u64> {
        let mut w = (pos / 64) as usize;
        let mut word = *self.high.get(w)? & (u64::MAX << (pos % 64));
        loop {
            if word != 0 {
                let p = w as u64 * 64 + u64::from(word.trailing_zeros());
                return (p < self.high_len).then_some(p);
            }
            w += 1;
            word = *self.high.get(w)?;
        }
    }

    /// The positions of zeros number `0, S, 2S, ...` of the high vector.
    fn sample_zeros(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut zeros = 0u64;
        for (w, &word) in self.high.iter().enumerate() {
            let base = w as u64 * 64;
            let valid = self.high_len.saturating_sub(base).min(64);
            let mut inv = !word & low_mask(valid);
            while inv != 0 {
                if zeros.is_multiple_of(ZERO_SAMPLE) {
                    out.push(base + u64::from(inv.trailing_zeros()));
                }
                zeros += 1;
                inv &= inv - 1;
            }
        }
        out
    }

    /// The position of zero number `k` (0-based), if there is one.
    fn select0(&self, k: u64) -> Option<u64> {
        let start = *self.zero_pos.get((k / ZERO_SAMPLE) as usize)?;
        let mut rem = k % ZERO_SAMPLE;
        if rem == 0 {
            return Some(start);
        }
        // Count zeros after `start`, a word at a time, until the word holding the rem-th.
        let mut w = (start / 64) as usize;
        let mut inv = !*self.high.get(w)? & (u64::MAX << (start % 64)) & !(1u64 << (start % 64));
        loop {
            let base = w as u64 * 64;
            inv &= low_mask(self.high_len.saturating_sub(base).min(64));
            let c = u64::from(inv.count_ones());
            if rem <= c {
                return Some(base + u64::from(select_in_word(inv, rem - 1)));
            }
            rem -= c;
            w += 1;
            inv = !*self.high.get(w)?;
        }
    }

    /// The smallest value `≥ x`, if any.
    pub(crate) fn successor(&self, x: u64) -> Option<u64> {
        if self.len == 0 || x >= self.universe {
            return None;
        }
        let bucket = x >> self.low_bits;
        // Ones before the bucket's first position are the values of lower buckets.
        let start = if bucket == 0 {
            0
        } else {
            self.select0(bucket - 1)? + 1
        };
        let mut i = start - bucket; // values before `start`
        let mut pos = start;
        loop {
            let p = self.next_one(pos)?;
            let v = ((p - i) << self.low_bits) | self.low(i);
            if v >= x {
                return Some(v);
            }
            i += 1;
            pos = p + 1;
        }
    }

    /// Whether any value lies in `lo ..= hi`.
    #[inline]
    pub(crate) fn any_in(&self, lo: u64, hi: u64) -> bool {
        lo <= hi && self.successor(lo).is_some_and(|v| v <= hi)
    }
}

/// The position of the `k`-th set bit (0-based) of `x`, which has more than `k`: whole
/// bytes are skipped by their popcount, then at most 8 bits are cleared.
#[inline]
fn select_in_word(mut x: u64, mut k: u64) -> u32 {
    let mut shift = 0u32;
    loop {
        let c = u64::from((x & 0xFF).count_ones());
        if k < c || shift >= 56 {
            break;
        }
        k -= c;
        x >>= 8;
        shift += 8;
    }
    for _ in 0..k {
        x &= x - 1;
    }
    shift + x.trailing_zeros()
}

/// The low `bits` bits set (all of them for 64).
#[inline]
fn low_mask(bits: u64) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Whether any bit at or past `used` is set in `words`.
fn slack_set(words: &[u64], used: u64) -> bool {
    words.iter().enumerate().any(|(w, &word)| {
        let base = w as u64 * 64;
        word & !low_mask(used.saturating_sub(base)) != 0
    })
}

/// Writes the low `width` bits of `v` at bit `at` (`1 ≤ width ≤ 63`).
fn write_bits(words: &mut [u64], at: u64, width: u32, v: u64) {
    let v = v & low_mask(u64::from(width));
    let (w, o) = ((at / 64) as usize, at % 64);
    words[w] |= v << o;
    if o + u64::from(width) > 64 {
        words[w + 1] |= v >> (64 - o);
    }
}

/// Reads `width` bits at bit `at` (`1 ≤ width ≤ 63`); missing words read as zero.
#[inline]
fn read_bits(words: &[u64], at: u64, width: u32) -> u64 {
    let (w, o) = ((at / 64) as usize, at % 64);
    let mut v = words.get(w).copied().unwrap_or(0) >> o;
    if o + u64::from(width) > 64 {
        v |= words.get(w + 1).copied().unwrap_or(0) << (64 - o);
    }
    v & low_mask(u64::from(width))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_successor(values: &[u64], x: u64) -> Option<u64> {
        values.iter().copied().find(|&v| v >= x)
    }

    fn check(values: &[u64], universe: u64) {
        let ef = EliasFano::new(values, universe);
        assert_eq!(ef.iter().collect::<Vec<_>>(), values);
        let probes = values
            .iter()
            .flat_map(|&v| [v.saturating_sub(1), v, v + 1])
            .chain([0, universe.saturating_sub(1), universe, u64::MAX]);
        for x in probes {
            assert_eq!(ef.successor(x), naive_successor(values, x), "x = {x}");
        }
        let again = EliasFano::from_parts(
            ef.len(),
            universe,
            ef.low_words().to_vec(),
            ef.high_words().to_vec(),
        )
        .unwrap();
        assert_eq!(again, ef);
    }

    #[test]
    fn empty_sequence_has_no_successor() {
        let ef = EliasFano::new(&[], 100);
        assert_eq!(ef.successor(0), None);
        assert!(!ef.any_in(0, 99));
        check(&[], 0);
        check(&[], 1);
    }

    #[test]
    fn successor_at_the_edges() {
        check(&[0], 1);
        check(&[0, 99], 100);
        check(&[3, 5, 9, 10, 14], 16);
        check(&[u64::MAX - 1], u64::MAX);
        check(&[0, 1, 2, 3, 4, 5, 6, 7], 8); // dense: ℓ = 0
        check(&[7], 1 << 40); // one value, 40 low bits
    }

    #[test]
    fn successor_across_many_zero_samples() {
        // Sparse and dense stretches, enough buckets for several sampled zeros.
        let mut values: Vec<u64> = (0..2_000u64).map(|i| i * i * 37 % 1_000_003).collect();
        values.sort_unstable();
        values.dedup();
        check(&values, 1_000_003);
        let dense: Vec<u64> = (0..3_000).collect();
        check(&dense, 3_000);
    }

    #[test]
    fn duplicates_are_refused_when_decoding() {
        // The writer never codes a duplicate; a decoder given one says so.
        let ef = EliasFano::new(&[4, 5], 8);
        let mut high = ef.high_words().to_vec();
        let low = ef.low_words().to_vec();
        // Values 4 and 5 with ℓ = 2: highs 1 and 1, lows 0 and 1. Make the lows equal.
        let dup_low = vec![low[0] & !(0b11 << 2)];
        assert!(EliasFano::from_parts(2, 8, dup_low, high.clone()).is_err());
        high[0] |= 1 << 20;
        assert!(EliasFano::from_parts(2, 8, low, high).is_err());
    }

    #[test]
    fn select_in_word_finds_every_set_bit() {
        for x in [1u64, 0x8000_0000_0000_0000, u64::MAX, 0xF0F0_0000_1234_5678] {
            let mut expect = Vec::new();
            for b in 0..64 {
                if x >> b & 1 == 1 {
                    expect.push(b);
                }
            }
            for (k, &b) in expect.iter().enumerate() {
                assert_eq!(select_in_word(x, k as u64), b, "{x:#x} k {k}");
            }
        }
    }

    #[test]
    fn any_in_is_successor_bounded() {
        let ef = EliasFano::new(&[10, 20, 30], 64);
        assert!(ef.any_in(10, 10));
        assert!(ef.any_in(0, 10));
        assert!(!ef.any_in(11, 19));
        assert!(ef.any_in(21, 63) && !ef.any_in(31, 63));
        assert!(!ef.any_in(5, 4));
    }
}
