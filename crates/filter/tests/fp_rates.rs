//! False-positive rates measured against the models, and the classic bars of LevelDB's
//! and RocksDB's bloom tests.
//!
//! What σ means here. A rate measured over `q` absent keys on *one* filter differs from
//! the model for two reasons: the binomial sampling of the queries,
//! `σ_q = sqrt(p (1 - p) / q)`, and the filter itself, whose rate depends on how its
//! keys happened to fill its bits (`σ_f`, the spread between filters of the same shape
//! built from different keys: `sizing::cache_local_false_positive_spread` and
//! `sizing::standard_false_positive_spread`, derived in their docs and checked
//! against measurement by the ignored test `filter_to_filter_spread_matches_the_model`).
//! Each bound below is `z · sqrt(σ_q² + σ_f²)`, so a correct implementation fails it
//! with probability about 0.3% (z = 3). Measured at 20,000 keys and 10 bits/key, σ_f
//! is 0.0070 (standard) and 0.0123 (cache-local) percentage points, as large as σ_q
//! over 2·10^6 queries; it shrinks as `1/sqrt(keys)`. Seeds (key prefixes) are fixed,
//! so a run is reproducible, and each rate is checked on three of them.

use bloomkv_filter::sizing::{
    cache_local_false_positive_rate, cache_local_false_positive_spread, false_positive_rate,
    standard_false_positive_spread,
};
use bloomkv_filter::{BloomFilter, BloomLayout, BloomPolicy, FilterPolicy, FilterReader, KeyHash};

/// SplitMix64: a tiny, well-mixed generator for reproducible synthetic hashes.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn hash(&mut self) -> KeyHash {
        KeyHash::from_halves(self.next(), self.next())
    }
}

/// Present keys are `"{seed}:key:" + i`, absent ones `"{seed}:absent:" + i`: never equal.
fn present(seed: u32, i: u64) -> Vec<u8> {
    format!("{seed}:key:{i:016}").into_bytes()
}

fn absent(seed: u32, i: u64) -> Vec<u8> {
    format!("{seed}:absent:{i:016}").into_bytes()
}

const SEEDS: [u32; 3] = [1, 2, 3];

fn build(policy: &BloomPolicy, seed: u32, n: u64) -> Box<dyn FilterReader> {
    let mut b = policy.new_builder();
    for i in 0..n {
        b.add_key(&present(seed, i));
    }
    policy.open_reader(&b.finish()).expect("fresh block opens")
}

fn measured_fp(reader: &dyn FilterReader, seed: u32, queries: u64) -> f64 {
    let hits = (0..queries)
        .filter(|&i| reader.may_contain(&absent(seed, i)))
        .count();
    hits as f64 / queries as f64
}

/// Binomial sampling σ of a rate `p` measured over `q` queries.
fn sigma(p: f64, q: u64) -> f64 {
    (p * (1.0 - p) / q as f64).sqrt()
}

/// Sampling and filter-to-filter σ combined.
fn total_sigma(p: f64, q: u64, filter_sigma: f64) -> f64 {
    (sigma(p, q).powi(2) + filter_sigma.powi(2)).sqrt()
}

#[test]
fn standard_layout_matches_the_formula_at_5_10_15_bits_per_key() {
    let n = 50_000;
    let q = 200_000;
    for bpk in [5.0, 10.0, 15.0] {
        let policy = BloomPolicy::standard(bpk).unwrap();
        for seed in SEEDS {
            let reader = build(&policy, seed, n);
            let info = reader.info();
            let (m, k) = (info.num_bits, info.num_probes);
            let expected = false_positive_rate(m, n, k).unwrap();
            let s = total_sigma(
                expected,
                q,
                standard_false_positive_spread(m, n, k).unwrap(),
            );
            let got = measured_fp(reader.as_ref(), seed, q);
            assert!(
                (got - expected).abs() <= 3.0 * s,
                "bpk {bpk} seed {seed}: measured {got:.5}, formula {expected:.5}, 3σ = {:.5}",
                3.0 * s
            );
            // No false negatives, while we are here.
            assert!((0..n).all(|i| reader.may_contain(&present(seed, i))));
        }
    }
}

/// At high bits per key in a small filter, double hashing's clusters (probes that
/// fall on a few bits when `h2` is near a fraction with a small denominator) pass more
/// absent keys than the formula says: the layout's estimate adds them
/// (`sizing::double_hashing_excess`), and the measured rate matches the estimate and
/// not the bare formula (once reported as the filter's rate: 9× too low at 30 bits
/// per key over 1,000 keys). Query hashes are drawn at random, as keys' hashes are.
#[test]
fn standard_layout_at_25_and_30_bits_per_key_matches_its_estimate_not_the_formula() {
    for (bpk, n, q) in [(25.0, 1_000u64, 10_000_000u64), (30.0, 1_000, 20_000_000)] {
        let policy = BloomPolicy::standard(bpk).unwrap();
        for seed in [1u64, 2] {
            let mut rng = SplitMix(seed);
            let mut b = policy.new_builder();
            for _ in 0..n {
                b.add_hash(rng.hash());
            }
            let reader = policy.open_reader(&b.finish()).unwrap();
            let info = reader.info();
            let (m, k) = (info.num_bits, info.num_probes);
            let formula = false_positive_rate(m, n, k).unwrap();
            let estimate = info.estimated_fp_rate;
            let hits = (0..q)
                .filter(|_| reader.may_contain_hash(rng.hash()))
                .count();
            let got = hits as f64 / q as f64;
            let spread = standard_false_positive_spread(m, n, k).unwrap();
            let bound = 3.0 * total_sigma(estimate, q, spread);
            assert!(
                (got - estimate).abs() <= bound,
                "{bpk} bits/key seed {seed}: measured {got:.3e}, estimate {estimate:.3e} ± {bound:.1e}"
            );
            assert!(
                got - formula > 3.0 * total_sigma(formula, q, spread),
                "{bpk} bits/key seed {seed}: measured {got:.3e} is within reach of the \
                 formula's {formula:.3e}: the case is not made"
            );
        }
    }
}

#[test]
fn cache_local_layout_matches_its_model_at_5_10_15_bits_per_key() {
    let n = 50_000;
    let q = 200_000;
    for bpk in [5.0, 10.0, 15.0] {
        let policy = BloomPolicy::cache_local(bpk).unwrap();
        for seed in SEEDS {
            let reader = build(&policy, seed, n);
            let info = reader.info();
            let (m, k) = (info.num_bits, info.num_probes);
            let expected = cache_local_false_positive_rate(m, n, k).unwrap();
            assert_eq!(info.estimated_fp_rate, expected);
            let s = total_sigma(
                expected,
                q,
                cache_local_false_positive_spread(m, n, k).unwrap(),
            );
            let got = measured_fp(reader.as_ref(), seed, q);
            assert!(
                (got - expected).abs() <= 3.0 * s,
                "bpk {bpk} seed {seed}: measured {got:.5}, model {expected:.5}, 3σ = {:.5}",
                3.0 * s
            );
            if bpk == 10.0 {
                assert!(got <= 0.0105, "cache-local at 10 bits/key: {got}");
            }
            assert!((0..n).all(|i| reader.may_contain(&present(seed, i))));
        }
    }
}

#[test]
fn cache_local_at_10_bits_per_key_matches_its_model_at_scale() {
    // One million keys, two million absent queries: σ_q ≈ 0.0069 and σ_f ≈ 0.0017
    // percentage points. The exact model says 0.966%; the bar is 1.0%.
    let policy = BloomPolicy::cache_local(10.0).unwrap();
    let mut b = policy.new_builder();
    let mut rng = SplitMix(7);
    for _ in 0..1_000_000 {
        b.add_hash(rng.hash());
    }
    let reader = policy.open_reader(&b.finish()).unwrap();
    let q = 2_000_000u64;
    let hits = (0..q)
        .filter(|_| reader.may_contain_hash(rng.hash()))
        .count();
    let fp = hits as f64 / q as f64;
    let info = reader.info();
    let model = info.estimated_fp_rate;
    assert!((model - 0.00966).abs() < 0.00002, "{model}");
    let spread =
        cache_local_false_positive_spread(info.num_bits, info.num_keys, info.num_probes).unwrap();
    let bound = 3.0 * total_sigma(model, q, spread);
    assert!((fp - model).abs() <= bound, "measured {fp}, model {model}");
    assert!(fp <= 0.010, "cache-local FP at 10 bits/key: {fp}");
}

#[test]
fn standalone_filter_matches_the_formula() {
    for (n, p) in [(20_000u64, 0.01), (20_000, 0.001), (5_000, 0.05)] {
        for seed in SEEDS {
            let mut f = BloomFilter::with_rate(n, p).unwrap();
            for i in 0..n {
                f.insert(present(seed, i));
            }
            let q = 200_000;
            let hits = (0..q).filter(|&i| f.contains(absent(seed, i))).count();
            let got = hits as f64 / q as f64;
            let expected = f.estimated_fp_rate();
            let spread = standard_false_positive_spread(f.num_bits(), n, f.num_hashes()).unwrap();
            let bound = 3.0 * total_sigma(expected, q, spread);
            assert!(
                (got - expected).abs() <= bound,
                "n {n} p {p} seed {seed}: measured {got:.5}, formula {expected:.5}"
            );
            assert!((0..n).all(|i| f.contains(present(seed, i))));
        }
    }
}

/// LevelDB's `bloom_test` VaryingLengths, also in RocksDB: every filter of 1 to 10,000
/// keys (lengths 1..10 step 1, ..100 step 10, ..1000 step 100, ..10000 step 1000)
/// has at most 2% false positives at 10 bits per key, and "mediocre" filters (above
/// 1.25%) are at most a fifth as many as good ones.
fn varying_lengths(policy: BloomPolicy) {
    fn next_length(len: u64) -> u64 {
        match len {
            0..10 => len + 1,
            10..100 => len + 10,
            100..1000 => len + 100,
            _ => len + 1000,
        }
    }
    let (mut good, mut mediocre) = (0, 0);
    let mut len = 1;
    while len <= 10_000 {
        let mut b = policy.new_builder();
        for i in 0..len as u32 {
            b.add_key(&i.to_le_bytes());
        }
        let reader = policy.open_reader(&b.finish()).unwrap();
        let bytes = reader.memory_bytes() as u64;
        assert!(
            bytes <= len * 10 / 8 + 64 + 8,
            "{len} keys use {bytes} bytes"
        );
        for i in 0..len as u32 {
            assert!(reader.may_contain(&i.to_le_bytes()), "false negative");
        }
        let fp = (0..10_000u32)
            .filter(|i| reader.may_contain(&(i + 1_000_000_000).to_le_bytes()))
            .count() as f64
            / 10_000.0;
        assert!(fp <= 0.02, "{} with {len} keys: {fp}", policy.name());
        if fp > 0.0125 {
            mediocre += 1;
        } else {
            good += 1;
        }
        len = next_length(len);
    }
    assert!(
        mediocre * 5 <= good,
        "{}: {mediocre} mediocre against {good} good",
        policy.name()
    );
}

#[test]
fn varying_lengths_standard() {
    varying_lengths(BloomPolicy::standard(10.0).unwrap());
}

#[test]
fn varying_lengths_cache_local() {
    varying_lengths(BloomPolicy::cache_local(10.0).unwrap());
}

/// RocksDB's bar: the mean false-positive rate over 100 filters of random sizes lies
/// in [0.8%, 1.1%] at 10 bits per key. Sizes are drawn from [20,000, 40,000) keys so
/// that rounding the array up to a whole word or line changes bits per key by less
/// than 0.03.
#[test]
fn mean_fp_over_random_sizes_is_about_one_percent() {
    for policy in [
        BloomPolicy::standard(10.0).unwrap(),
        BloomPolicy::cache_local(10.0).unwrap(),
    ] {
        let mut rng = SplitMix(42);
        let mut total = 0.0;
        for _ in 0..100 {
            let n = 20_000 + rng.next() % 20_000;
            let mut b = policy.new_builder();
            for _ in 0..n {
                b.add_hash(rng.hash());
            }
            let reader = policy.open_reader(&b.finish()).unwrap();
            let q = 20_000;
            let hits = (0..q)
                .filter(|_| reader.may_contain_hash(rng.hash()))
                .count();
            total += hits as f64 / q as f64;
        }
        let mean = total / 100.0;
        assert!(
            (0.008..=0.011).contains(&mean),
            "{}: mean FP {mean}",
            policy.name()
        );
    }
}

/// How the cache-local probe counts were chosen: for each bits-per-key, the measured
/// false-positive rate of every `k` near the model's optimum (10^6 synthetic keys,
/// 2·10^7 absent queries per cell). The chosen `k` must be within noise of the best
/// measured one, i.e. within 3σ of it, σ being the spread of a difference of two
/// filters' measured rates (sampling and filter-to-filter, each twice). Slow in debug
/// builds; run with
/// `cargo test --release -p bloomkv-filter --test fp_rates -- --ignored --nocapture`.
#[test]
#[ignore]
fn probe_table() {
    let n = 1_000_000u64;
    let q = 20_000_000u64;
    let mut rng = SplitMix(2024);
    for tenths in [
        20u32, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 180, 200,
    ] {
        let bpk = f64::from(tenths) / 10.0;
        let chosen = BloomLayout::CacheLocal.num_probes(bpk);
        let mut row = Vec::new();
        for k in chosen.saturating_sub(2).max(1)..=chosen + 2 {
            let (fp, model) = measure_cache_local(bpk, n, k, q, &mut rng);
            row.push((k, fp, model));
        }
        let best = row
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .copied()
            .unwrap();
        let chosen_fp = row.iter().find(|r| r.0 == chosen).unwrap().1;
        print!(
            "bpk {bpk:>4}: chosen k={chosen:>2}, best measured k={:>2} |",
            best.0
        );
        for (k, fp, model) in &row {
            print!(" k={k}: {:.4}% (model {:.4}%)", fp * 100.0, model * 100.0);
        }
        println!();
        let lines = (n as f64 * bpk / 512.0).ceil() as u64;
        let spread = cache_local_false_positive_spread(lines * 512, n, best.0).unwrap();
        let diff_sigma = total_sigma(best.1, q, spread) * std::f64::consts::SQRT_2;
        assert!(
            chosen_fp <= best.1 + 3.0 * diff_sigma,
            "bpk {bpk}: chosen k={chosen} measured {chosen_fp}, best k={} {}",
            best.0,
            best.1
        );
    }
}

/// Builds a cache-local block from `n` random hashes at `bpk` with `k` probes, and
/// returns its rate measured over `q` random hashes beside the model's.
fn measure_cache_local(bpk: f64, n: u64, k: u32, q: u64, rng: &mut SplitMix) -> (f64, f64) {
    let policy = BloomPolicy::cache_local(bpk)
        .unwrap()
        .with_num_probes(k)
        .unwrap();
    let mut b = policy.new_builder();
    for _ in 0..n {
        b.add_hash(rng.hash());
    }
    let reader = policy.open_reader(&b.finish()).unwrap();
    let info = reader.info();
    let model = cache_local_false_positive_rate(info.num_bits, n, k).unwrap();
    let hits = (0..q)
        .filter(|_| reader.may_contain_hash(rng.hash()))
        .count();
    (hits as f64 / q as f64, model)
}

/// Checks the derived filter-to-filter spread against measurement: 200 filters of
/// 20,000 keys each (fresh random keys per filter) at 10 bits per key, each measured
/// over 2·10^6 absent keys. The standard deviation of the measured rates must agree
/// with `sqrt(σ_q² + σ_f²)` within 15% (its standard error from 200 samples is 5%),
/// which is exactly what the bounds of the tests above rely on. Run with
/// `cargo test --release -p bloomkv-filter --test fp_rates -- --ignored --nocapture`.
#[test]
#[ignore]
fn filter_to_filter_spread_matches_the_model() {
    let (n, q, filters) = (20_000u64, 2_000_000u64, 200);
    for policy in [
        BloomPolicy::standard(10.0).unwrap(),
        BloomPolicy::cache_local(10.0).unwrap(),
    ] {
        let mut rng = SplitMix(99);
        let mut rates = Vec::new();
        let (mut model, mut spread) = (0.0, 0.0);
        for _ in 0..filters {
            let mut b = policy.new_builder();
            for _ in 0..n {
                b.add_hash(rng.hash());
            }
            let reader = policy.open_reader(&b.finish()).unwrap();
            let info = reader.info();
            model = info.estimated_fp_rate;
            spread = match policy.layout() {
                BloomLayout::Standard => {
                    standard_false_positive_spread(info.num_bits, n, info.num_probes)
                }
                BloomLayout::CacheLocal => {
                    cache_local_false_positive_spread(info.num_bits, n, info.num_probes)
                }
            }
            .unwrap();
            let hits = (0..q)
                .filter(|_| reader.may_contain_hash(rng.hash()))
                .count();
            rates.push(hits as f64 / q as f64);
        }
        let mean = rates.iter().sum::<f64>() / filters as f64;
        let var = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (filters - 1) as f64;
        let between = (var - sigma(mean, q).powi(2)).max(0.0).sqrt();
        let predicted = total_sigma(model, q, spread);
        println!(
            "{}: mean {:.5}% (model {:.5}%); σ of measured rates {:.5}% (predicted {:.5}%); \
             between filters {:.5}% (model {:.5}%)",
            policy.name(),
            mean * 100.0,
            model * 100.0,
            var.sqrt() * 100.0,
            predicted * 100.0,
            between * 100.0,
            spread * 100.0
        );
        assert!(
            (var.sqrt() / predicted - 1.0).abs() <= 0.15,
            "{}: measured σ {}, predicted {predicted}",
            policy.name(),
            var.sqrt()
        );
    }
}
