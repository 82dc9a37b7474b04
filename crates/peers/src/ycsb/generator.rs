//! Request distributions: which record an operation asks for.
//!
//! YCSB names three, and so does this suite:
//!
//! ```text
//! uniform              every record alike
//! scrambled Zipfian    rank r has weight 1/(r+1)^0.99; rank → record by an FNV hash,
//!                      so the hot records lie all over the key range, not at its start
//! latest               Zipfian over age: the newest acknowledged insert is rank 0
//! ```
//!
//! The Zipfian sampler is exact: rejection-inversion (Hörmann and Derflinger, "Rejection-
//! inversion to generate variates from monotone discrete distributions", 1996), O(1)
//! per draw and O(1) to resize, so "latest" follows a growing record count without
//! recomputing ζ(n). (YCSB's own generator uses Gray et al.'s closed-form approximation,
//! whose ranks past the second are only close to the formula.) The sampler lives in
//! `bloomkv_bench::zipf`, shared with `bloomkv bench --absent-skew`.

pub use bloomkv_bench::zipf::{fnv64, zeta, SplitMix64, Zipfian, ZIPF_THETA};

/// How an operation picks its record among `count` (the records loaded and the
/// inserts acknowledged so far).
#[derive(Debug, Clone)]
pub enum Chooser {
    /// Uniform over `0..count`.
    Uniform,
    /// Zipfian rank, scattered by `fnv64(rank) mod count` (YCSB's scrambled Zipfian).
    ScrambledZipfian(Zipfian),
    /// `count − 1 − rank`: the newest records are the hottest (YCSB's skewed latest).
    Latest(Zipfian),
}

impl Chooser {
    /// The chooser of `kind` over `count` records.
    pub fn new(kind: Distribution, count: u64) -> Self {
        match kind {
            Distribution::Uniform => Chooser::Uniform,
            Distribution::Zipfian => Chooser::ScrambledZipfian(Zipfian::new(count, ZIPF_THETA)),
            Distribution::Latest => Chooser::Latest(Zipfian::new(count, ZIPF_THETA)),
        }
    }

    /// A record id in `0..count` (`count` ≥ 1).
    pub fn next(&mut self, count: u64, rng: &mut SplitMix64) -> u64 {
        let count = count.max(1);
        match self {
            Chooser::Uniform => rng.below(count),
            Chooser::ScrambledZipfian(z) => {
                z.resize(count);
                fnv64(z.sample(rng)) % count
            }
            Chooser::Latest(z) => {
                z.resize(count);
                count - 1 - z.sample(rng)
            }
        }
    }
}

/// The request distributions YCSB's workloads name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Every record alike.
    Uniform,
    /// Scrambled Zipfian, θ = 0.99.
    Zipfian,
    /// Skewed towards the newest inserts.
    Latest,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_reference_construction() {
        // FNV-1a of eight zero bytes, computed by hand from the definition.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        assert_eq!(fnv64(0), h);
        assert_ne!(fnv64(1), fnv64(2));
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = SplitMix64::new(7);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(rng.below(n) < n);
            }
        }
        assert_eq!(rng.below(0), 0);
    }

    #[test]
    fn zipfian_of_one_rank_is_always_zero() {
        let z = Zipfian::new(1, ZIPF_THETA);
        let mut rng = SplitMix64::new(1);
        assert!((0..1000).all(|_| z.sample(&mut rng) == 0));
    }
}
