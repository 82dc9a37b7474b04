//! Criterion micro-benchmarks of the store: `put` throughput (sync off), and `get` of
//! present and absent keys with 10 overlapping tables of 1e6 keys in all (16-byte-ish
//! keys `key{2i:016}`, 100-byte values, 10 bits/key), for each filter layout.
//!
//! `cargo bench --bench store` (set `BLOOMKV_BENCH_KEYS` to change the 1e6 default).

use std::hint::black_box;
use std::time::Duration;

use bloomkv_bench::{key, load, BenchStore, BloomkvStore, FilterSetting, NoProgress, Workload};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn keys() -> u64 {
    std::env::var("BLOOMKV_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn gets(c: &mut Criterion) {
    let n = keys();
    let w = Workload {
        keys: n,
        tables: 10,
        ..Workload::default()
    };
    for setting in [FilterSetting::CacheLocal, FilterSetting::Standard] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = BloomkvStore::create(dir.path().join("db"), setting, 10.0).unwrap();
        load(&mut store, &w, &NoProgress).unwrap();
        assert_eq!(store.tables(), 10);
        let db = store.db().unwrap();
        let mut group = c.benchmark_group(format!("get/{}", setting.name().replace(' ', "-")));
        group.throughput(Throughput::Elements(1));
        let mut rng = StdRng::seed_from_u64(1);
        group.bench_function("absent", |b| {
            b.iter_batched(
                || key(2 * rng.gen_range(0..n) + 1),
                |k| black_box(db.get(k).unwrap()),
                BatchSize::SmallInput,
            )
        });
        group.bench_function("present", |b| {
            b.iter_batched(
                || key(2 * rng.gen_range(0..n)),
                |k| black_box(db.get(k).unwrap()),
                BatchSize::SmallInput,
            )
        });
        group.finish();
        let s = db.stats();
        println!(
            "{}: {} gets, {} data-block reads, {} filter negatives",
            setting.name(),
            s.gets,
            s.data_block_reads,
            s.filter_negatives
        );
    }
}

fn puts(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default()).unwrap();
    let value = [b'v'; 100];
    let mut i = 0u64;
    let mut group = c.benchmark_group("put");
    group.throughput(Throughput::Elements(1));
    group.bench_function("sync-off/100B", |b| {
        b.iter(|| {
            i += 1;
            db.put(key(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8), value)
                .unwrap()
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = gets, puts
}
criterion_main!(benches);
