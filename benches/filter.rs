//! Filter micro-benchmarks: build (ns/key), hit and miss lookups (ns/op, hashing
//! included) with 24-byte keys at 10 bits per key, for a cache-resident filter (10^4
//! keys), a mid-sized one (10^5) and a DRAM-sized one (10^7 keys); bloomkv's two Bloom
//! layouts and its Ribbon filter beside fastbloom (with foldhash), the bloomfilter
//! crate and xorf's BinaryFuse8. Before timing, each filter's measured false-positive
//! rate, bits per key and peak transient build memory (bytes per key, counted by a
//! wrapping allocator) are printed, so the speed numbers can be read against what each
//! filter buys; then the Ribbon filter's rate at a few bits per key around 1% (10^6
//! keys).
//!
//! A `hash/24B` group times the two hashes the crate uses (MurmurHash3 x64_128 and
//! XXH3-128) on 24-byte keys: the number behind using XXH3 for filter blocks.
//!
//! Run: `cargo bench --bench filter` (several minutes; short criterion settings), or
//! one group, e.g. `cargo bench --bench filter -- 'miss/1e7'`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bloomkv::murmur3::murmur3_x64_128;
use bloomkv::{BloomPolicy, FilterPolicy, FilterReader, KeyHash, RibbonPolicy};

/// The system allocator, counting live and peak heap bytes, so a filter's transient
/// build memory can be measured (peak during the build minus live before it).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are
// only statistics. Measured reason: without it there is no way to report transient
// build memory, one of the Ribbon filter's costs.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};

type Key = [u8; 24];

/// Number of distinct query keys cycled through (a power of two).
const QUERIES: usize = 1 << 20;

/// SplitMix64: reproducible random keys.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn key(&mut self) -> Key {
        let mut k = [0u8; 24];
        for chunk in k.chunks_exact_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
        k
    }
}

fn keys(seed: u64, n: usize) -> Vec<Key> {
    let mut rng = SplitMix(seed);
    (0..n).map(|_| rng.key()).collect()
}

/// The contenders, behind one interface for the timing loops.
trait Contender {
    fn name(&self) -> &'static str;
    fn build(&self, keys: &[Key]) -> Box<dyn Lookup>;
}

trait Lookup {
    fn contains(&self, key: &Key) -> bool;
    fn bits(&self) -> u64;
}

struct Ours(Box<dyn FilterPolicy>, &'static str);

impl Contender for Ours {
    fn name(&self) -> &'static str {
        self.1
    }
    fn build(&self, keys: &[Key]) -> Box<dyn Lookup> {
        let mut b = self.0.new_builder();
        for k in keys {
            b.add_key(k);
        }
        let block = b.finish();
        Box::new(OurReader(self.0.open_reader(&block).expect("fresh block")))
    }
}

struct OurReader(Box<dyn FilterReader>);

impl Lookup for OurReader {
    #[inline]
    fn contains(&self, key: &Key) -> bool {
        self.0.may_contain(key)
    }
    fn bits(&self) -> u64 {
        self.0.info().num_bits
    }
}

struct FastBloom;

impl Contender for FastBloom {
    fn name(&self) -> &'static str {
        "fastbloom+foldhash"
    }
    fn build(&self, keys: &[Key]) -> Box<dyn Lookup> {
        let mut f = fastbloom::BloomFilter::with_num_bits(keys.len() * 10)
            .hasher(foldhash::fast::FixedState::with_seed(7))
            .expected_items(keys.len());
        for k in keys {
            f.insert(k);
        }
        Box::new(f)
    }
}

impl Lookup for fastbloom::BloomFilter<foldhash::fast::FixedState> {
    #[inline]
    fn contains(&self, key: &Key) -> bool {
        fastbloom::BloomFilter::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.num_bits() as u64
    }
}

struct BloomfilterCrate;

impl Contender for BloomfilterCrate {
    fn name(&self) -> &'static str {
        "bloomfilter"
    }
    fn build(&self, keys: &[Key]) -> Box<dyn Lookup> {
        let bytes = keys.len() * 10 / 8;
        let mut f = bloomfilter::Bloom::new(bytes, keys.len()).expect("valid size");
        for k in keys {
            f.set(k);
        }
        Box::new(BloomfilterLookup(f, bytes as u64 * 8))
    }
}

struct BloomfilterLookup(bloomfilter::Bloom<Key>, u64);

impl Lookup for BloomfilterLookup {
    #[inline]
    fn contains(&self, key: &Key) -> bool {
        self.0.check(key)
    }
    fn bits(&self) -> u64 {
        self.1
    }
}

struct Fuse;

const FUSE_HASH: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(11);

impl Contender for Fuse {
    fn name(&self) -> &'static str {
        "xorf BinaryFuse8"
    }
    fn build(&self, keys: &[Key]) -> Box<dyn Lookup> {
        let hashes: Vec<u64> = keys.iter().map(|k| FUSE_HASH.hash_one(k)).collect();
        Box::new(xorf::BinaryFuse8::try_from(&hashes).expect("fuse build"))
    }
}

impl Lookup for xorf::BinaryFuse8 {
    #[inline]
    fn contains(&self, key: &Key) -> bool {
        xorf::Filter::contains(self, &FUSE_HASH.hash_one(key))
    }
    fn bits(&self) -> u64 {
        self.fingerprints.len() as u64 * 8
    }
}

fn contenders() -> Vec<Box<dyn Contender>> {
    vec![
        Box::new(Ours(
            Box::new(BloomPolicy::standard(10.0).expect("valid")),
            "bloomkv standard",
        )),
        Box::new(Ours(
            Box::new(BloomPolicy::cache_local(10.0).expect("valid")),
            "bloomkv cache-local",
        )),
        Box::new(Ours(
            Box::new(RibbonPolicy::new(10.0).expect("valid")),
            "bloomkv ribbon",
        )),
        Box::new(FastBloom),
        Box::new(BloomfilterCrate),
        Box::new(Fuse),
    ]
}

fn bench_size(c: &mut Criterion, n: usize, present: &[Key], absent: &[Key]) {
    let label = match n {
        1_000_000.. => "1e7",
        100_000.. => "1e5",
        _ => "1e4",
    };
    let hits: Vec<Key> = (0..QUERIES).map(|i| present[i % n]).collect();
    println!("\n== {n} keys, 10 bits/key target, {QUERIES} absent queries ==");
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>13}",
        "filter", "bits/key", "FP %", "filter MB", "build B/key"
    );
    let mut built = Vec::new();
    for contender in contenders() {
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let filter = contender.build(&present[..n]);
        let transient = PEAK.load(Ordering::Relaxed) - before;
        let fp = absent.iter().filter(|k| filter.contains(k)).count() as f64 / absent.len() as f64;
        for k in present[..n].iter().step_by((n / 1000).max(1)) {
            assert!(filter.contains(k), "{}: false negative", contender.name());
        }
        println!(
            "{:<22} {:>9.2} {:>9.3} {:>9.2} {:>13.1}",
            contender.name(),
            filter.bits() as f64 / n as f64,
            fp * 100.0,
            filter.bits() as f64 / 8e6,
            transient as f64 / n as f64
        );
        built.push((contender, filter));
    }

    let mut g = c.benchmark_group(format!("build/{label}"));
    g.throughput(Throughput::Elements(n as u64));
    if n >= 1_000_000 {
        g.sample_size(10);
        g.measurement_time(Duration::from_secs(8));
    }
    for (contender, _) in &built {
        g.bench_function(contender.name(), |b| {
            b.iter_batched(
                || (),
                |()| contender.build(&present[..n]),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();

    for (what, queries) in [("hit", &hits), ("miss", &absent.to_vec())] {
        let mut g = c.benchmark_group(format!("{what}/{label}"));
        g.throughput(Throughput::Elements(1));
        for (contender, filter) in &built {
            g.bench_function(contender.name(), |b| {
                let mut i = 0usize;
                b.iter(|| {
                    let k = &queries[i];
                    i = (i + 1) & (QUERIES - 1);
                    filter.contains(black_box(k))
                })
            });
        }
        g.finish();
    }
}

fn filters(c: &mut Criterion) {
    let absent = keys(2, QUERIES);
    let present = keys(1, 10_000_000);
    ribbon_rates(&present, &absent);
    bench_size(c, 10_000, &present, &absent);
    bench_size(c, 100_000, &present, &absent);
    bench_size(c, 10_000_000, &present, &absent);
}

/// The Ribbon filter's measured rate (whole block, trailer included, as bits per key)
/// at a few settings around 1% and 0.1%, on 10^6 keys: where its 1% point lies.
fn ribbon_rates(present: &[Key], absent: &[Key]) {
    let n = 1_000_000;
    println!("\n== bloomkv ribbon, {n} keys: FP by bits per key ==");
    for bpk in [6.8, 6.9, 7.0, 7.1, 7.2, 8.0, 10.0, 12.0] {
        let policy = RibbonPolicy::new(bpk).expect("valid");
        let mut b = policy.new_builder();
        for k in &present[..n] {
            b.add_key(k);
        }
        let block = b.finish();
        let reader = policy.open_reader(&block).expect("fresh block");
        let fp = absent.iter().filter(|k| reader.may_contain(&k[..])).count() as f64
            / absent.len() as f64;
        println!(
            "  {bpk:>5.1} bits/key set, {:>6.3} spent: FP {:.4}% (model {:.4}%)",
            block.len() as f64 * 8.0 / n as f64,
            fp * 100.0,
            reader.info().estimated_fp_rate * 100.0
        );
    }
}

fn hashes(c: &mut Criterion) {
    let ks = keys(3, 1 << 12);
    let mut g = c.benchmark_group("hash/24B");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("murmur3_x64_128", |b| {
        b.iter(|| {
            i = (i + 1) & (ks.len() - 1);
            murmur3_x64_128(black_box(&ks[i]), 0)
        })
    });
    g.bench_function("xxh3_128 (KeyHash::of)", |b| {
        b.iter(|| {
            i = (i + 1) & (ks.len() - 1);
            KeyHash::of(black_box(&ks[i]))
        })
    });
    g.bench_function("foldhash u64", |b| {
        b.iter(|| {
            i = (i + 1) & (ks.len() - 1);
            FUSE_HASH.hash_one(black_box(&ks[i]))
        })
    });
    g.finish();
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
    targets = hashes, filters
}
criterion_main!(benches);
