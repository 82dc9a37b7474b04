//! How gets scale from one thread to two over one store, measured so that other load on
//! the machine disturbs the figures as little as possible.
//!
//! Builds the benchmark's flat store once (`KEYS` keys over 10 overlapping tables),
//! then alternates one-thread and two-thread rounds of the same gets. Each round
//! reports wall-clock throughput and the CPU time each thread spent per get (from
//! `/proc/thread-self/schedstat`, in nanoseconds): with nothing shared written on the
//! read path, a get costs a thread the same CPU time whether or not another thread
//! reads at the same moment. Ratios are of medians over the rounds.
//!
//! ```text
//! cargo run --release --example read_threads -- [keys] [gets per round] [rounds] [cache MiB]
//! ```

use std::time::Instant;

use bloomkv::bench::{load, lookup_keys, BloomkvStore, FilterSetting, NoProgress, Phase, Workload};
use bloomkv::kv::Db;

/// CPU nanoseconds this thread has run (Linux), or 0 where unknown.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs `keys` split over `threads` threads; returns (gets per second, CPU ns per get).
fn round(db: &Db, keys: &[[u8; 19]], threads: usize) -> (f64, f64) {
    let share = keys.len().div_ceil(threads);
    let started = Instant::now();
    let cpu: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = keys
            .chunks(share)
            .map(|part| {
                s.spawn(move || {
                    let c0 = thread_cpu_ns();
                    let mut found = 0usize;
                    for k in part {
                        found += usize::from(db.get(k).unwrap().is_some());
                    }
                    std::hint::black_box(found);
                    thread_cpu_ns() - c0
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let secs = started.elapsed().as_secs_f64();
    (keys.len() as f64 / secs, cpu as f64 / keys.len() as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let keys_n = args.first().copied().unwrap_or(1_000_000);
    let gets = args.get(1).copied().unwrap_or(400_000);
    let rounds = args.get(2).copied().unwrap_or(7);
    let cache_mib = args.get(3).copied().unwrap_or(8) as usize;
    let w = Workload {
        keys: keys_n,
        ..Workload::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut store = BloomkvStore::create_with_cache(
        dir.path().join("db"),
        FilterSetting::CacheLocal,
        10.0,
        cache_mib << 20,
    )
    .unwrap();
    load(&mut store, &w, &NoProgress).unwrap();
    let db = store.db().unwrap();
    let lookups = Workload { lookups: gets, ..w };
    let absent = lookup_keys(&lookups, Phase::Absent);
    let present = lookup_keys(&lookups, Phase::Present);
    for (name, keys) in [("absent", &absent), ("present", &present)] {
        let (mut t1, mut t2, mut c1, mut c2) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let (a, b) = round(db, keys, 1);
            let (c, d) = round(db, keys, 2);
            t1.push(a);
            c1.push(b);
            t2.push(c);
            c2.push(d);
        }
        let (t1, t2, c1, c2) = (median(t1), median(t2), median(c1), median(c2));
        println!(
            "{name:8} 1 thread {:>9.0} gets/s {c1:>6.0} cpu-ns/get | 2 threads {:>9.0} gets/s \
             {c2:>6.0} cpu-ns/get | wall ratio {:.2}x, cpu-per-get ratio {:.2}",
            t1,
            t2,
            t2 / t1,
            c2 / c1
        );
    }
}
