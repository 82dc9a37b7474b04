//! Skewed draws shared by the benchmarks: a seedable generator, YCSB's FNV scramble,
//! and an exact Zipfian sampler.
//!
//! `bloomkv bench --absent-skew zipf:THETA` draws its absent lookups from it, and
//! `bloomkv-peers ycsb` its request distributions, so both skews are the same
//! formula. The sampler is rejection-inversion (Hörmann and Derflinger,
//! "Rejection-inversion to generate variates from monotone discrete distributions",
//! 1996): exact, O(1) per draw and O(1) to resize.

/// SplitMix64: a small, fast, seedable generator; one per thread, so runs repeat.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform double in [0, 1) (53 random bits).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in [0, n) (multiply-shift; n = 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// FNV-1a over the eight little-endian bytes of `v` (YCSB's `fnvhash64`, which hashes
/// the same eight bytes one at a time).
pub fn fnv64(v: u64) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for b in v.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// YCSB's skew: θ = 0.99.
pub const ZIPF_THETA: f64 = 0.99;

/// A Zipfian distribution over ranks `0..n`: rank r drawn with probability
/// `(r+1)^−θ / ζ(n, θ)`, where `ζ(n, θ) = Σ_{i=1..n} i^−θ`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    theta: f64,
    n: u64,
    h_x1: f64,
    h_n: f64,
    s: f64,
}

impl Zipfian {
    /// The distribution over `n` ranks (at least one) with skew `theta` (> 0, ≠ 1).
    pub fn new(n: u64, theta: f64) -> Self {
        let mut z = Zipfian {
            theta,
            n: 0,
            h_x1: 0.0,
            h_n: 0.0,
            s: 0.0,
        };
        z.resize(n);
        z
    }

    /// Ranks in the distribution.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Changes the number of ranks (constant time).
    pub fn resize(&mut self, n: u64) {
        let n = n.max(1);
        if n == self.n {
            return;
        }
        self.n = n;
        self.h_x1 = self.h_integral(1.5) - 1.0;
        self.h_n = self.h_integral(n as f64 + 0.5);
        self.s = 2.0 - self.h_integral_inverse(self.h_integral(2.5) - self.h(2.0));
    }

    /// One rank in `0..n`.
    pub fn sample(&self, rng: &mut SplitMix64) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            // Accept at once where the hat is known to lie under the histogram (most
            // draws), else compare with the exact bar.
            if k as f64 - x <= self.s || u >= self.h_integral(k as f64 + 0.5) - self.h(k as f64) {
                return k - 1;
            }
        }
    }

    /// `x^−θ`.
    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// `∫_1^x t^−θ dt`, written so that it stays exact as θ → 1.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.theta) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, continuous at 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x − 1) / x`, continuous at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// `ζ(n, θ)`: the Zipfian's normalising sum (for tests and documentation).
pub fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| (i as f64).powf(-theta)).sum()
}
