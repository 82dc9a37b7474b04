//! What a get costs when every block it needs is already in the block cache.
//!
//! Builds the benchmark's flat store (`KEYS` keys in 10 overlapping tables, values half
//! random, restart interval 16) in `DIR` — or reopens it if `DIR` exists, so two builds
//! of the store can be compared on the very same files — with a block cache of
//! `CACHE` MiB (default 512: larger than the data). Two passes over every key fill the
//! cache; then `ROUNDS` rounds of 400,000 present and 400,000 absent gets in random
//! order are timed, and the medians (and fastest rounds) printed with the table reads
//! the timed rounds made (0 when the cache holds everything).
//!
//! ```text
//! cargo run --release --example point_get -- [DIR] [KEYS] [ROUNDS] [CACHE]
//! ```
//!
//! Compare two builds by alternating them over one `DIR` (the timings of a shared
//! machine drift; alternation keeps the drift out of the ratio).

use std::path::PathBuf;
use std::time::Instant;

use bloomkv::bench::{key, load, lookup_keys, BloomkvStore, NoProgress, Phase, Workload};
use bloomkv::kv::{Db, Options};

const GETS: usize = 400_000;

fn median_and_min(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scratch = tempfile::tempdir()?;
    let dir = args
        .first()
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().join("db"));
    let keys: u64 = args.get(1).map_or(Ok(1_000_000), |a| a.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(5), |a| a.parse())?;
    let cache_mib: usize = args.get(3).map_or(Ok(512), |a| a.parse())?;
    let options = Options {
        block_cache_size: cache_mib << 20,
        disable_auto_compaction: true,
        memtable_size: 1 << 30,
        ..Options::default()
    };
    // The benchmark's own workload: its load order and its lookup keys (random,
    // present ones even, absent ones odd).
    let w = Workload {
        keys,
        lookups: GETS as u64,
        ..Workload::default()
    };
    if !dir.exists() {
        let mut store = BloomkvStore::with_options("point_get", dir.clone(), options.clone())?;
        load(&mut store, &w, &NoProgress)?;
    }
    let db = Db::open(&dir, options)?;

    let present = lookup_keys(&w, Phase::Present);
    let absent = lookup_keys(&w, Phase::Absent);
    for _ in 0..2 {
        for i in 0..keys {
            std::hint::black_box(db.get(key(2 * i))?);
        }
    }

    let before = db.stats();
    let (mut p, mut a) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (keys, times, want) in [(&present, &mut p, true), (&absent, &mut a, false)] {
            let started = Instant::now();
            for k in keys {
                if db.get(k)?.is_some() != want {
                    return Err(format!("get {:?}: expected found = {want}", k).into());
                }
            }
            times.push(started.elapsed().as_nanos() as f64 / keys.len() as f64);
        }
    }
    let after = db.stats();
    let ((pm, pmin), (am, amin)) = (median_and_min(p), median_and_min(a));
    println!(
        "present {pm:.0} ns/get (fastest round {pmin:.0}), absent {am:.0} ns/get (fastest {amin:.0}); \
         timed rounds: {} table reads, {} cache hits",
        after.data_block_reads - before.data_block_reads,
        after.block_cache_hits - before.block_cache_hits
    );
    Ok(())
}
