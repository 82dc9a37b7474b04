//! The exact false-positive model of a cache-local filter: one 512-bit line, then many.
//!
//! A cache-local filter is `L` independent little Bloom filters of `m = 512` bits. A key
//! lands in one line and sets `k` bits there, each a uniformly random position (repeats
//! possible); a query picks one line and tests `k` random positions of it.
//!
//! **One line.** After `t` probes into `m` bits, the number of set bits `X_t` follows
//! the occupancy distribution, built one probe at a time with only additions of
//! positive numbers (no alternating sums, so it stays exact at any `k`):
//!
//! ```text
//!  P(X_{t+1} = x) = P(X_t = x) · x/m  +  P(X_t = x-1) · (m-x+1)/m
//!  f(i) = P(a query passes | the line holds i keys) = E[(X_{k·i} / m)^k]
//! ```
//!
//! **Many lines.** The number of keys in the query's line is Binomial(`n`, `1/L`)
//! (exact, also for filters of one or a few lines, where a Poisson approximation
//! overstates the rate: 0.951% against an exact 0.841% for 51 keys in one line), so
//!
//! ```text
//!  FP = Σ_i  C(n, i) (1/L)^i (1 - 1/L)^{n-i} · f(i)
//! ```
//!
//! **Bounded work for any input.** A line is full once its bits are all set; after
//! `t ≥ 48·m` probes the chance that any bit is still zero is below `m·e^{-48}` ≈ 1e-18,
//! so `f(i) = 1` from `i = ⌈48·m / k⌉` on. The sum stops there, or 12 standard
//! deviations plus 30 above the mean load, whichever is first; any remaining tail is
//! counted as passing. So the model costs at most ~25,000 steps of ≤ 512 additions,
//! whatever `n`, `L` and `k` (even `n = u64::MAX` in one line).
//!
//! **Spread between filters.** Two filters built from different keys with the same
//! shape do not have the same rate: each line's fill varies. A given filter's rate is
//! the mean over its lines of `g = (ones/m)^k`. The loads of the lines always add up
//! to `n`, so the part of `g` that moves linearly with the load cancels between lines;
//! treating the loads as independent Poisson(λ) variables conditioned on their sum
//! gives the variance across filters
//!
//! ```text
//!  Var[rate] = ( Var[g] - Cov[g, load]^2 / λ ) / L
//! ```
//!
//! (without the correction the spread would be overstated about 2.4 times at 10
//! bits/key). Statistical tests add it to the sampling σ.

/// Bits in one cache line.
const M: usize = 512;

/// Probes after which a line counts as full (see the module docs).
const FULL_AFTER_PROBES: u64 = 48 * M as u64;

/// Occupancy cells below this probability are dropped (they can no longer matter).
const NEGLIGIBLE: f64 = 1e-280;

/// `f(i)` and its second moment `E[(X_{k·i}/m)^{2k}]` for `i = 0, 1, ...`, computed
/// once per probe count and reused for any number of loads.
#[derive(Debug, Clone)]
pub(crate) struct LineModel {
    /// `pass[i]` = f(i); beyond the end, a full line: 1.
    pass: Vec<f64>,
    /// `pass2[i]` = E[(X/m)^{2k}] for a line of `i` keys.
    pass2: Vec<f64>,
    /// Keys from which a line counts as full (`f = 1`).
    full_at: u64,
}

impl LineModel {
    /// The model for `k` probes per key, tabulated for `0..=max_keys` keys per line
    /// (fewer if the line is full sooner). `k = 0` is treated as 1.
    pub(crate) fn new(k: u32, max_keys: u64) -> LineModel {
        let k = k.max(1);
        let full_at = FULL_AFTER_PROBES.div_ceil(u64::from(k));
        let last = max_keys.min(full_at.saturating_sub(1));
        // (x/m)^k and (x/m)^{2k} for every occupancy x.
        let kf = f64::from(k);
        let q: Vec<f64> = (0..=M).map(|x| (x as f64 / M as f64).powf(kf)).collect();
        let mut occ = vec![0.0f64; M + 1];
        occ[0] = 1.0;
        let (mut lo, mut hi) = (0usize, 0usize);
        let cap = usize::try_from(last).unwrap_or(usize::MAX - 1);
        let mut pass = Vec::with_capacity(cap.min(1 << 16) + 1);
        let mut pass2 = Vec::with_capacity(cap.min(1 << 16) + 1);
        let mut i = 0u64;
        loop {
            let (mut s1, mut s2) = (0.0, 0.0);
            for x in lo..=hi {
                s1 += occ[x] * q[x];
                s2 += occ[x] * q[x] * q[x];
            }
            // f rises with the load; near 1, rounding must not make it dip.
            let floor1 = pass.last().copied().unwrap_or(0.0);
            let floor2 = pass2.last().copied().unwrap_or(0.0);
            pass.push(s1.clamp(floor1, 1.0));
            pass2.push(s2.clamp(floor2, 1.0));
            if i >= last {
                break;
            }
            // One more key: k more probes (bounded: k·last < FULL_AFTER_PROBES + k).
            for _ in 0..k {
                let top = (hi + 1).min(M);
                for x in (lo.max(1)..=top).rev() {
                    let stay = occ[x] * x as f64 / M as f64;
                    let grow = occ[x - 1] * (M - x + 1) as f64 / M as f64;
                    occ[x] = stay + grow;
                }
                if lo == 0 {
                    occ[0] = 0.0;
                    lo = 1;
                }
                hi = top;
                while lo < hi && occ[lo] < NEGLIGIBLE {
                    occ[lo] = 0.0;
                    lo += 1;
                }
                while hi > lo && occ[hi] < NEGLIGIBLE {
                    occ[hi] = 0.0;
                    hi -= 1;
                }
            }
            i += 1;
        }
        LineModel {
            pass,
            pass2,
            full_at,
        }
    }

    /// f(i): the chance a query passes a line holding `i` keys.
    pub(crate) fn pass(&self, i: u64) -> f64 {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.pass.get(i))
            .copied()
            .unwrap_or(1.0)
    }

    fn pass2(&self, i: u64) -> f64 {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.pass2.get(i))
            .copied()
            .unwrap_or(1.0)
    }

    /// Keys per line beyond which this model needs no table (the line is full).
    pub(crate) fn full_at(&self) -> u64 {
        self.full_at
    }
}

/// The largest load worth summing for `n` keys over `lines` lines: the mean plus
/// 12 standard deviations plus 30, at most `n`.
pub(crate) fn max_load(lines: u64, keys: u64) -> u64 {
    let mean = keys as f64 / lines.max(1) as f64;
    let hi = (mean + 12.0 * mean.sqrt() + 30.0).ceil();
    if hi >= keys as f64 {
        keys
    } else {
        hi as u64
    }
}

/// Expected false-positive rate and the standard deviation of the rate between
/// filters of this shape: `keys` keys over `lines` 512-bit lines, probed per `model`.
pub(crate) fn filter_fp(model: &LineModel, lines: u64, keys: u64) -> (f64, f64) {
    if keys == 0 {
        return (0.0, 0.0);
    }
    let lines = lines.max(1);
    if lines == 1 {
        // Every key is in the one line: no load to average over.
        let p = model.pass(keys);
        let var = (model.pass2(keys) - p * p).max(0.0);
        return (p, var.sqrt());
    }
    let hi = max_load(lines, keys);
    // Beyond `full_at` keys a line passes every query: stop summing there.
    let last = hi.min(model.full_at());
    let p = 1.0 / lines as f64;
    let n = keys as f64;
    let ln_odds = p.ln() - (-p).ln_1p();
    let mut ln_pmf = n * (-p).ln_1p(); // ln P(load = 0)
    let (mut mass, mut m1, mut m2, mut load_g) = (0.0, 0.0, 0.0, 0.0);
    let mut i = 0u64;
    loop {
        let pmf = ln_pmf.exp();
        let g = model.pass(i);
        mass += pmf;
        m1 += pmf * g;
        m2 += pmf * model.pass2(i);
        load_g += pmf * i as f64 * g;
        if i >= last {
            break;
        }
        ln_pmf += ((n - i as f64) / (i as f64 + 1.0)).ln() + ln_odds;
        i += 1;
    }
    if last < hi {
        // The loads above `last` fill their line: every query there passes.
        let tail = (1.0 - mass).max(0.0);
        m1 += tail;
        m2 += tail;
    }
    let m1 = m1.clamp(0.0, 1.0);
    let lambda = n * p;
    let cov = load_g - lambda * m1;
    let var = (m2 - m1 * m1 - cov * cov / lambda).max(0.0) / lines as f64;
    (m1, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_one_probe_passes_one_bit_in_512() {
        let m = LineModel::new(1, 4);
        assert!((m.pass(1) - 1.0 / 512.0).abs() < 1e-15);
        assert_eq!(m.pass(0), 0.0);
    }

    #[test]
    fn two_probes_of_one_key_by_cases() {
        // The key sets 2 bits w.p. (m-1)/m, else 1; a query of 2 independent probes
        // passes w.p. (x/m)^2.
        let mf = 512.0f64;
        let exact = (mf - 1.0) / mf * (2.0 / mf).powi(2) + 1.0 / mf * (1.0 / mf).powi(2);
        assert!((LineModel::new(2, 1).pass(1) - exact).abs() < 1e-15);
    }

    #[test]
    fn ten_bits_per_key_with_six_probes_is_0_966_percent() {
        // 512 / 10 = 51.2 keys per line on average, many lines.
        let model = LineModel::new(6, 400);
        let lines = 1u64 << 20;
        let (fp, _) = filter_fp(&model, lines, lines * 512 / 10);
        assert!((fp - 0.00966).abs() < 0.00001, "{fp}");
    }

    #[test]
    fn one_line_uses_its_exact_load() {
        // 51 keys, all in the only line: f(51), not the Poisson average (0.951%).
        let model = LineModel::new(6, 100);
        let (fp, _) = filter_fp(&model, 1, 51);
        assert!((fp - 0.00841).abs() < 0.00001, "{fp}");
        assert_eq!(fp, model.pass(51));
    }

    #[test]
    fn pass_rate_rises_with_keys_and_reaches_one() {
        for k in [1u32, 6, 24, 30] {
            let model = LineModel::new(k, u64::MAX);
            let mut last = 0.0;
            for i in 0..model.full_at().min(3000) {
                let p = model.pass(i);
                assert!(p >= last && p <= 1.0, "k {k} i {i}");
                last = p;
            }
            assert!(model.pass(model.full_at()) == 1.0);
            assert!(model.pass(model.full_at() - 1) > 1.0 - 1e-12, "k {k}");
        }
    }
}
