//! Ribbon at its bound: the bumped Ribbon block (format version 4) against the
//! standard one (version 3) and the cache-local Bloom filter, same run, same keys.
//!
//! For 10^4 keys (the filter in cache), 10^5 and 10^6 keys at 10 bits per key it
//! prints each filter's real bits per key (whole block) and false-positive rate over
//! 2^20 absent keys, then times:
//!
//! * `build/<n>/<filter>`: adding `n` key hashes and `finish` (ns per key);
//! * `miss/<n>/<filter>` and `hit/<n>/<filter>`: one `may_contain_hash` (the store's
//!   path: the key is hashed once per get, so hashing is not timed), cycling through
//!   2^20 precomputed hashes of absent or present keys.
//!
//! The targets read off one run: version 4's miss and hit at 10^4 keys within 1.5× the
//! cache-local Bloom's, its build within 4×.
//!
//! Run: `cargo bench -p bloomkv-filter --bench ribbon_bound` (a few minutes), or one
//! group, e.g. `cargo bench -p bloomkv-filter --bench ribbon_bound -- '(hit|miss)/1e4'`.

use std::time::Duration;

use bloomkv_filter::{
    BloomPolicy, FilterPolicy, FilterReader, KeyHash, RibbonPolicy, RIBBON_FORMAT_VERSION,
};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// Number of query hashes cycled through (a power of two).
const QUERIES: usize = 1 << 20;

/// SplitMix64: reproducible random hashes.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn hashes(seed: u64, n: usize) -> Vec<KeyHash> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|_| KeyHash::from_halves(rng.next(), rng.next()))
        .collect()
}

fn contenders() -> Vec<(&'static str, Box<dyn FilterPolicy>)> {
    vec![
        (
            "cache-local",
            Box::new(BloomPolicy::cache_local(10.0).expect("valid")),
        ),
        (
            "ribbon v3",
            Box::new(
                RibbonPolicy::new(10.0)
                    .and_then(|p| p.with_format_version(RIBBON_FORMAT_VERSION))
                    .expect("valid"),
            ),
        ),
        (
            "ribbon v4",
            Box::new(RibbonPolicy::new(10.0).expect("valid")),
        ),
    ]
}

fn build(policy: &dyn FilterPolicy, keys: &[KeyHash]) -> Vec<u8> {
    let mut b = policy.new_builder();
    for &h in keys {
        b.add_hash(h);
    }
    b.finish()
}

fn bench_size(c: &mut Criterion, n: usize, label: &str, absent: &[KeyHash]) {
    let present = hashes(1 + n as u64, n);
    let hits: Vec<KeyHash> = (0..QUERIES).map(|i| present[i % n]).collect();
    println!("\n== {n} keys at 10 bits/key, {QUERIES} absent queries ==");
    println!("{:<14} {:>9} {:>9}", "filter", "bits/key", "FP %");
    let mut readers: Vec<(&str, Box<dyn FilterReader>)> = Vec::new();
    let policies = contenders();
    for (name, policy) in &policies {
        let block = build(policy.as_ref(), &present);
        let reader = policy.open_reader(&block).expect("fresh block");
        assert!(present.iter().all(|&h| reader.may_contain_hash(h)));
        let fp = absent
            .iter()
            .filter(|&&h| reader.may_contain_hash(h))
            .count() as f64
            / absent.len() as f64;
        println!(
            "{name:<14} {:>9.3} {:>9.4}",
            block.len() as f64 * 8.0 / n as f64,
            fp * 100.0
        );
        readers.push((name, reader));
    }

    let mut g = c.benchmark_group(format!("build/{label}"));
    g.throughput(Throughput::Elements(n as u64));
    if n >= 1_000_000 {
        g.sample_size(10);
    }
    for (name, policy) in &policies {
        g.bench_function(*name, |b| {
            b.iter_batched(
                || (),
                |()| build(policy.as_ref(), &present),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();

    for (what, queries) in [("miss", absent), ("hit", &hits[..])] {
        let mut g = c.benchmark_group(format!("{what}/{label}"));
        g.throughput(Throughput::Elements(1));
        for (name, reader) in &readers {
            g.bench_function(*name, |b| {
                let mut i = 0usize;
                b.iter(|| {
                    let h = queries[i];
                    i = (i + 1) & (QUERIES - 1);
                    reader.may_contain_hash(black_box(h))
                })
            });
        }
        g.finish();
    }
}

fn filters(c: &mut Criterion) {
    let absent = hashes(0xABCD, QUERIES);
    bench_size(c, 10_000, "1e4", &absent);
    bench_size(c, 100_000, "1e5", &absent);
    bench_size(c, 1_000_000, "1e6", &absent);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = filters
}
criterion_main!(benches);
