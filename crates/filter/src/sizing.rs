//! Sizing math: how many bits and hash functions a Bloom filter needs, and what
//! false-positive rate it then has.
//!
//! After `n` insertions of `k` probes each into `m` bits, a given bit is still zero with
//! probability `(1 - 1/m)^{kn} ≈ e^{-kn/m}`. A key that was never inserted passes all
//! `k` probes with probability
//!
//! ```text
//! P = (1 - e^{-kn/m})^k                       false_positive_rate(m, n, k)
//! k = (m / n) ln 2   minimises P              optimal_num_hashes(m, n)
//! m = -n ln P / (ln 2)^2   bits for a target  optimal_num_bits(n, p)
//! ```
//!
//! At the optimum half the bits are set and each key costs `-log2(P) / ln 2 ≈ 1.44
//! log2(1/P)` bits: 9.59 bits per key for 1%, 14.38 for 0.1%. All sizes are `u64`, so a
//! filter of more than 2^32 bits (hundreds of millions of keys) is sized correctly.
//!
//! The cache-local layout (all probes of a key in one 512-bit line) follows a different
//! curve: the number of keys landing in a line varies (binomially), and crowded lines
//! cost more false positives than uncrowded ones save.
//! [`cache_local_false_positive_rate`] averages each load's exact false-positive rate
//! (from the line's occupancy distribution) over that distribution.
//!
//! Every function checks its arguments and returns [`FilterError::InvalidArgument`]
//! for zero sizes, rates outside `(0, 1)` and NaN, instead of producing a nonsense size.

use crate::error::FilterError;
use crate::line_model::{filter_fp, max_load, LineModel};

/// The largest bit count any sizing function returns: 2^48 bits (32 TiB of filter).
/// Far beyond memory, but small enough that byte and word counts never overflow.
pub const MAX_NUM_BITS: u64 = 1 << 48;

/// Bits of one cache line in the cache-local layout (64 bytes).
pub const CACHE_LINE_BITS: u64 = 512;

fn invalid(msg: String) -> FilterError {
    FilterError::InvalidArgument(msg)
}

/// Bits needed for `n` items at false-positive rate `p`: `ceil(-n ln p / (ln 2)^2)`.
///
/// Errors when `n == 0`, when `p` is not strictly between 0 and 1 (NaN included), or
/// when the answer would exceed [`MAX_NUM_BITS`].
///
/// ```
/// use bloomkv_filter::sizing::optimal_num_bits;
/// assert_eq!(optimal_num_bits(1000, 0.01)?, 9586);
/// assert!(optimal_num_bits(0, 0.01).is_err());
/// assert!(optimal_num_bits(1000, 1.0).is_err());
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
pub fn optimal_num_bits(n: u64, p: f64) -> Result<u64, FilterError> {
    if n == 0 {
        return Err(invalid("expected item count must be at least 1".into()));
    }
    check_rate(p)?;
    let ln2 = std::f64::consts::LN_2;
    let bits = (-(n as f64) * p.ln() / (ln2 * ln2)).ceil();
    if !bits.is_finite() || bits > MAX_NUM_BITS as f64 {
        return Err(invalid(format!(
            "{n} items at rate {p} need {bits} bits, more than the maximum {MAX_NUM_BITS}"
        )));
    }
    Ok((bits as u64).max(1))
}

/// The bits and hash functions of a standalone filter for `n` items at rate `p`
/// with at most `max_k` hash functions: the optimal pair, or, when the optimal count
/// is above `max_k`, `max_k` functions and the bits they need for `p` (the formula
/// solved for `m`: `⌈−k·n / ln(1 − p^{1/k})⌉`), more than the optimum's.
pub(crate) fn standalone_shape(n: u64, p: f64, max_k: u32) -> Result<(u64, u32), FilterError> {
    let m = optimal_num_bits(n, p)?;
    let k = optimal_num_hashes(m, n)?;
    if k <= max_k {
        return Ok((m, k));
    }
    let kf = f64::from(max_k);
    let bits = (-kf * n as f64 / (-p.powf(1.0 / kf)).ln_1p()).ceil();
    if !bits.is_finite() || bits > MAX_NUM_BITS as f64 {
        return Err(invalid(format!(
            "{n} items at rate {p} need {bits} bits with {max_k} hash functions, more \
             than the maximum {MAX_NUM_BITS}"
        )));
    }
    Ok((bits as u64, max_k))
}

/// Hash functions minimising the false-positive rate of `m` bits holding `n` items:
/// `round(m / n * ln 2)`, at least 1.
///
/// Errors when `m == 0` or `n == 0`.
///
/// ```
/// use bloomkv_filter::sizing::optimal_num_hashes;
/// assert_eq!(optimal_num_hashes(9586, 1000)?, 7);
/// assert_eq!(optimal_num_hashes(10, 1000)?, 1);
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
pub fn optimal_num_hashes(m: u64, n: u64) -> Result<u32, FilterError> {
    if m == 0 {
        return Err(invalid("bit count must be at least 1".into()));
    }
    if n == 0 {
        return Err(invalid("item count must be at least 1".into()));
    }
    let k = (m as f64 / n as f64 * std::f64::consts::LN_2).round();
    // u32::MAX would only be reached at absurd bits per item; clamp instead of wrapping.
    Ok(k.clamp(1.0, f64::from(u32::MAX)) as u32)
}

/// False-positive rate of `m` bits holding `n` items probed `k` times:
/// `(1 - e^{-kn/m})^k`. An empty filter (`n == 0`) has rate 0.
///
/// Errors when `m == 0` or `k == 0`.
///
/// ```
/// use bloomkv_filter::sizing::false_positive_rate;
/// let p = false_positive_rate(10_000_000, 1_000_000, 7)?;
/// assert!((p - 0.00819).abs() < 0.00001);
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
pub fn false_positive_rate(m: u64, n: u64, k: u32) -> Result<f64, FilterError> {
    if m == 0 {
        return Err(invalid("bit count must be at least 1".into()));
    }
    if k == 0 {
        return Err(invalid("hash count must be at least 1".into()));
    }
    Ok(standard_fp(m as f64, n as f64, f64::from(k)))
}

/// `(1 - e^{-kn/m})^k` without argument checks, for callers whose sizes are valid.
pub(crate) fn standard_fp(m: f64, n: f64, k: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    (1.0 - (-k * n / m).exp()).powf(k)
}

/// What double hashing adds to the standard layout's rate, on top of the formula
/// [`standard_fp`] (which assumes `k` independent probes).
///
/// Probe `i` is bit `fastrange(h1 + i·h2, m)`: the fraction `t = h2 / 2^64` steps
/// around the array. When `t` lies within `1/(k·m)` of a fraction `a/d` with `d < k`
/// (in lowest terms; there are `φ(d)` of them, Euler's totient), the `k` probes fall
/// in `d` clusters each narrower than a bit, so the key sets and tests only `d` bits
/// and a query passes with probability `f^d` instead of `f^k`, `f = 1 − e^{−kn/m}`
/// the share of bits set. Each fraction is hit with probability `2/(k·m)`, so
///
/// ```text
///   excess ≈ 2/(k·m) · Σ_{d=1}^{k−1} φ(d) · f^d        (≈ 2.7/(k·m) at the optimal k)
/// ```
///
/// Negligible at the default 10 bits per key in a table's worth of keys (4e-8 at a
/// million keys, against 8e-3), it dominates once the formula falls below it: at 30
/// bits per key over 1,000 keys (`k` = 21, `m` = 30,016) the formula says 5.5e-7 and
/// this adds 4.4e-6; measured, 5.1e-6 (`tests/fp_rates.rs`).
///
/// The sum stops once its terms can no longer matter (`φ(d) ≤ d`, and `d·f^d` only
/// falls past `d = 1/(1 − f)`), and after [`MAX_EXCESS_TERMS`] terms in any case, so
/// any `k` costs at most that many totients: only a filter far from its optimal
/// probe count and nearly full has terms left there.
pub(crate) fn double_hashing_excess(m: f64, n: f64, k: u32) -> f64 {
    if n <= 0.0 || k < 2 || m <= 0.0 {
        return 0.0;
    }
    let f = 1.0 - (-f64::from(k) * n / m).exp();
    let (mut sum, mut power) = (0.0f64, 1.0f64);
    for d in 1..k.min(MAX_EXCESS_TERMS) {
        power *= f;
        let bound = power * f64::from(d);
        if f64::from(d) * (1.0 - f) >= 1.0 && bound <= sum * 1e-17 {
            break;
        }
        sum += f64::from(totient(d)) * power;
    }
    (2.0 / (f64::from(k) * m) * sum).min(1.0)
}

/// The most terms [`double_hashing_excess`] sums.
const MAX_EXCESS_TERMS: u32 = 1 << 16;

/// Euler's totient: how many of `1..=d` share no factor with `d` (1 for `d` = 1),
/// from `d`'s prime factors.
fn totient(d: u32) -> u32 {
    let (mut rest, mut phi) = (d, d);
    let mut p = 2;
    while p * p <= rest {
        if rest.is_multiple_of(p) {
            while rest.is_multiple_of(p) {
                rest /= p;
            }
            phi -= phi / p;
        }
        p += 1;
    }
    if rest > 1 {
        phi -= phi / rest;
    }
    phi
}

/// Expected false-positive rate of the cache-local layout: `num_bits` split into
/// 512-bit lines, `num_keys` keys spread over the lines, `k` probes per key, all inside
/// the key's line.
///
/// The number of keys in the query's line is Binomial(`n`, `1/L`) for `L` lines, and a
/// line holding `i` keys passes a query with probability `f(i) = E[(X/512)^k]`, `X` the
/// bits its `k·i` probes set; so
///
/// ```text
/// P = Σ_i  C(n, i) L^{-i} (1 - 1/L)^{n-i}  ·  f(i)
/// ```
///
/// Both parts are computed exactly (the line's occupancy distribution, not the
/// textbook `(1 - (1 - 1/512)^{k i})^k`, which ignores the variance of a small array's
/// fill; and binomial loads, not Poisson ones, which overstate a filter of few lines).
/// At 10 bits per key and `k = 6` this is 0.966%, against 0.82% for the standard layout
/// at its best `k = 7`: the price of touching one cache line per lookup. (RocksDB's
/// `util/bloom_impl.h` quotes 0.9535% as the "theoretical best" for these settings and
/// says its own implementation yields about 0.957%; the textbook per-line formula
/// `(1 - (1 - 1/512)^{k i})^k` averaged over binomial loads gives 0.9576%, and 0.9536%
/// with `e^{-k i / 512}` in place of `(1 - 1/512)^{k i}` (`docs/GUIDE.md`, section 4,
/// computes both). This model
/// counts what an implementation that may repeat a bit within a key's probes does;
/// bloomkv's filters measure 0.93–0.97%, within noise of it.)
///
/// Finishes in bounded time for every input, `u64::MAX` keys included: a line that
/// has taken `48 · 512` probes is full to within 1e-18, so no load beyond that is
/// summed (see the `line_model` source).
///
/// Errors when `num_bits` is not a positive multiple of 512 or `k == 0`.
///
/// ```
/// use bloomkv_filter::sizing::cache_local_false_positive_rate;
/// let p = cache_local_false_positive_rate(512 * 100_000, 5_120_000, 6)?;
/// assert!((p - 0.00966).abs() < 0.00002, "{p}");
/// // A hostile size still answers at once: one line cannot help.
/// assert_eq!(cache_local_false_positive_rate(512, u64::MAX, 6)?, 1.0);
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
pub fn cache_local_false_positive_rate(
    num_bits: u64,
    num_keys: u64,
    k: u32,
) -> Result<f64, FilterError> {
    check_cache_local(num_bits, k)?;
    Ok(cache_local_fp(num_bits / CACHE_LINE_BITS, num_keys, k).0)
}

/// The standard deviation of the false-positive rate *between* cache-local filters of
/// this shape built from different keys: `sqrt((Var[g] - Cov[g, load]^2 / λ) / L)`
/// for `g = (X/512)^k` over the line contents `X` of the model above (the correction
/// term: line loads always sum to `n`).
///
/// A test that measures one filter's rate over `q` absent keys sees this spread on top
/// of the binomial sampling noise `sqrt(p (1 - p) / q)`; an honest bound adds both.
/// At 10 bits per key and `k = 6` with 400 lines (20,000 keys) it is about 1.2% of
/// the rate (measured: 1.3%).
///
/// Errors as [`cache_local_false_positive_rate`].
pub fn cache_local_false_positive_spread(
    num_bits: u64,
    num_keys: u64,
    k: u32,
) -> Result<f64, FilterError> {
    check_cache_local(num_bits, k)?;
    Ok(cache_local_fp(num_bits / CACHE_LINE_BITS, num_keys, k).1)
}

/// The standard deviation of the false-positive rate between standard-layout (or
/// standalone) filters of `m` bits, `n` keys and `k` probes built from different keys.
///
/// A filter with `X` bits set passes a query with probability about `(X/m)^k`. `X`
/// after `t = k·n` uniform probes has variance
/// `m q + m(m-1) q_2 - m^2 q^2` with `q = (1-1/m)^t`, `q_2 = (1-2/m)^t`; the rate's
/// spread follows by the delta method: `k (E[X]/m)^{k-1} · σ_X / m`.
///
/// Errors when `m == 0` or `k == 0`.
pub fn standard_false_positive_spread(m: u64, n: u64, k: u32) -> Result<f64, FilterError> {
    if m == 0 {
        return Err(invalid("bit count must be at least 1".into()));
    }
    if k == 0 {
        return Err(invalid("hash count must be at least 1".into()));
    }
    if n == 0 {
        // No key, no bit set: every filter passes nothing (and `0 · ln 0` below is NaN).
        return Ok(0.0);
    }
    let (mf, t, kf) = (m as f64, k as f64 * n as f64, f64::from(k));
    let q = (t * (-1.0 / mf).ln_1p()).exp();
    let q2 = if m >= 2 {
        (t * (-2.0 / mf).ln_1p()).exp()
    } else {
        0.0
    };
    let var_x = (mf * q + mf * (mf - 1.0) * q2 - mf * mf * q * q).max(0.0);
    let fill = 1.0 - q;
    Ok(kf * fill.powf(kf - 1.0) * var_x.sqrt() / mf)
}

fn check_cache_local(num_bits: u64, k: u32) -> Result<(), FilterError> {
    if num_bits == 0 || !num_bits.is_multiple_of(CACHE_LINE_BITS) {
        return Err(invalid(format!(
            "cache-local bit count {num_bits} is not a positive multiple of {CACHE_LINE_BITS}"
        )));
    }
    if k == 0 {
        return Err(invalid("probe count must be at least 1".into()));
    }
    Ok(())
}

/// Rate and between-filter spread of `keys` keys over `lines` lines, `k` probes each.
pub(crate) fn cache_local_fp(lines: u64, keys: u64, k: u32) -> (f64, f64) {
    if keys == 0 {
        return (0.0, 0.0);
    }
    let model = LineModel::new(k, max_load(lines, keys));
    filter_fp(&model, lines, keys)
}

fn check_rate(p: f64) -> Result<(), FilterError> {
    // `!(0 < p < 1)` also catches NaN, which fails every comparison.
    if !(p > 0.0 && p < 1.0) {
        return Err(invalid(format!(
            "false-positive rate must be in (0, 1), got {p}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    /// Euler's totient for the first few numbers, and the double-hashing excess where
    /// its doc works it out: 4.4e-6 at 30 bits per key over 1,000 keys, nothing for one
    /// probe or no keys, and 4e-8 at 10 bits per key over a million.
    #[test]
    fn double_hashing_excess_is_as_derived() {
        let phi: Vec<u32> = (1..=12).map(totient).collect();
        assert_eq!(phi, [1, 1, 2, 2, 4, 2, 6, 4, 6, 4, 10, 4]);
        let e = double_hashing_excess(30_016.0, 1_000.0, 21);
        assert!((4.3e-6..4.5e-6).contains(&e), "{e}");
        assert_eq!(double_hashing_excess(30_016.0, 1_000.0, 1), 0.0);
        assert_eq!(double_hashing_excess(30_016.0, 0.0, 21), 0.0);
        let e = double_hashing_excess(1e7, 1e6, 7);
        assert!((3e-8..5e-8).contains(&e), "{e}");
    }
    use super::*;

    #[test]
    fn reproduces_the_documents_numbers() {
        // n = 1000, p = 1%: 9586 bits, 7 hashes.
        assert_eq!(optimal_num_bits(1000, 0.01), Ok(9586));
        assert_eq!(optimal_num_hashes(9586, 1000), Ok(7));
        // n = 10M URLs, p = 0.1%: ~17.1 MiB, k = 10.
        let m = optimal_num_bits(10_000_000, 0.001).unwrap();
        assert_eq!(m, 143_775_876);
        assert_eq!(optimal_num_hashes(m, 10_000_000), Ok(10));
        // 20 bits, 2 hashes, 10 items: ~40% FP.
        let p = false_positive_rate(20, 10, 2).unwrap();
        assert!((p - 0.399_576).abs() < 1e-6, "{p}");
        // 9.59 bits per key at 1%, 14.38 at 0.1%, 6.24 at 5% (n = 1e8).
        for (p, bpk) in [(0.01, 9.585), (0.001, 14.378), (0.05, 6.235)] {
            let m = optimal_num_bits(100_000_000, p).unwrap();
            assert!((m as f64 / 1e8 - bpk).abs() < 0.001, "{p}: {m}");
        }
    }

    #[test]
    fn sizes_beyond_32_bits() {
        // 1e10 items at 1%: ~9.6e10 bits, well past u32.
        let m = optimal_num_bits(10_000_000_000, 0.01).unwrap();
        assert!(m > u64::from(u32::MAX) * 20);
        assert_eq!(optimal_num_hashes(m, 10_000_000_000), Ok(7));
        assert!(optimal_num_bits(u64::MAX, 1e-9).is_err());
    }

    #[test]
    fn invalid_arguments_are_errors() {
        for p in [
            0.0,
            -0.1,
            1.0,
            1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert!(
                matches!(
                    optimal_num_bits(100, p),
                    Err(FilterError::InvalidArgument(_))
                ),
                "{p}"
            );
        }
        assert!(optimal_num_bits(0, 0.01).is_err());
        assert!(optimal_num_hashes(0, 10).is_err());
        assert!(optimal_num_hashes(10, 0).is_err());
        assert!(false_positive_rate(0, 10, 1).is_err());
        assert!(false_positive_rate(10, 10, 0).is_err());
        assert_eq!(false_positive_rate(10, 0, 3), Ok(0.0));
        assert!(cache_local_false_positive_rate(500, 10, 6).is_err());
        assert!(cache_local_false_positive_rate(0, 10, 6).is_err());
        assert!(cache_local_false_positive_rate(512, 10, 0).is_err());
    }

    #[test]
    fn optimum_k_minimises_the_formula() {
        for (m, n) in [
            (9586u64, 1000u64),
            (10_000, 1000),
            (5_000, 1000),
            (15_000, 1000),
        ] {
            let k = optimal_num_hashes(m, n).unwrap();
            let best = false_positive_rate(m, n, k).unwrap();
            for other in [k - 1, k + 1] {
                if other >= 1 {
                    assert!(false_positive_rate(m, n, other).unwrap() >= best);
                }
            }
        }
    }

    #[test]
    fn cache_local_costs_a_little_more_than_standard() {
        // 10 bits/key, k = 6: 0.966% (the textbook per-line formula would say 0.9576%).
        let p = cache_local_false_positive_rate(512 * 100_000, 5_120_000, 6).unwrap();
        assert!((p - 0.00966).abs() < 0.00001, "{p}");
        let std = standard_fp(10.0, 1.0, 7.0);
        assert!(p > std);
        assert_eq!(cache_local_fp(100, 0, 6), (0.0, 0.0));
    }

    /// The totient from prime factors, against its definition.
    #[test]
    fn totient_from_factors_matches_the_definition() {
        fn gcd(a: u32, b: u32) -> u32 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        for d in 1..3_000u32 {
            let by_definition = (1..=d).filter(|&a| gcd(a, d) == 1).count() as u32;
            assert_eq!(totient(d), by_definition, "{d}");
        }
    }

    /// The excess once summed every `d < k` with a totient costing `d` steps: at a
    /// probe count of `u32::MAX` it did not return. Stopping early changes nothing
    /// the full sum would say.
    #[test]
    fn the_double_hashing_excess_stops_early_without_changing_its_value() {
        let full = |m: f64, n: f64, k: u32| {
            let f = 1.0 - (-f64::from(k) * n / m).exp();
            let sum: f64 = (1..k)
                .map(|d| f64::from(totient(d)) * f.powi(d as i32))
                .sum();
            (2.0 / (f64::from(k) * m) * sum).min(1.0)
        };
        for (m, n, k) in [
            (30_016.0, 1_000.0, 21),
            (1e6, 1e5, 7),
            (1e7, 1e3, 2_000),
            (1e5, 1e4, 500),
            (64.0, 1.0, 64),
        ] {
            let (got, want) = (double_hashing_excess(m, n, k), full(m, n, k));
            assert!(
                (got - want).abs() <= want * 1e-12,
                "m {m} n {n} k {k}: {got} against {want}"
            );
        }
        let huge = double_hashing_excess((1u64 << 20) as f64, 1_000.0, u32::MAX);
        assert!((0.0..=1.0).contains(&huge), "{huge}");
    }

    #[test]
    fn the_spread_of_an_empty_filter_is_zero() {
        assert_eq!(standard_false_positive_spread(1, 0, 7).unwrap(), 0.0);
        assert_eq!(standard_false_positive_spread(1 << 20, 0, 1).unwrap(), 0.0);
    }

    /// Below about 1e-19 the optimal hash count passes `MAX_HASHES`: the count was
    /// capped but the bits stayed the optimum's, and 1e-30 came out as 3.5e-29.
    #[test]
    fn a_capped_hash_count_gets_the_bits_its_rate_needs() {
        let n = 1_000_000;
        for p in [1e-10, 1e-19, 1e-30, 1e-50, 1e-100] {
            let (m, k) = standalone_shape(n, p, 64).unwrap();
            assert!(k <= 64, "{p}: {k}");
            // The optimum itself lands within a rounding of `k` of the target.
            let rate = false_positive_rate(m, n, k).unwrap();
            assert!(rate <= p * 1.001, "{p}: {m} bits, {k} hashes give {rate}");
            if k == 64 {
                // Not oversized either: one percent fewer bits would miss the target.
                let fewer = false_positive_rate(m - m / 100, n, k).unwrap();
                assert!(fewer > p, "{p}: {m} bits is more than needed");
            }
        }
    }
}
