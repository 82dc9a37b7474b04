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
//! cargo run --release --example point_get -- [DIR] [KEYS] [ROUNDS] [CACHE] [PHASES] [FILTER]
//! ```
//!
//! `FILTER` is the filter a new `DIR`'s tables get: `cache-local` (the default, the
//! store's default) or `ribbon`; a `DIR` that exists keeps the filters it was built with.
//!
//! `PHASES` is `both` (the default), `present` or `absent`: `present` or `absent` runs
//! only that phase's rounds (and `absent` skips the warm-up passes, which read the
//! present keys' blocks), so a profile (`perf record`) of the run shows that phase's
//! get alone.
//!
//! Compare two builds by alternating them over one `DIR` (the timings of a shared
//! machine drift; alternation keeps the drift out of the ratio).

use std::path::PathBuf;
use std::time::Instant;

use bloomkv::kv::{Db, FilterKind, Options};
use bloomkv_bench::{key, load, lookup_keys, BloomkvStore, NoProgress, Phase, Workload};

const GETS: usize = 400_000;

/// "`name` M ns/get (fastest round F)" for the rounds in `v`, or nothing if none ran.
fn summary(name: &str, mut v: Vec<f64>) -> Option<String> {
    v.sort_by(f64::total_cmp);
    let (median, fastest) = (v.get(v.len() / 2)?, v.first()?);
    Some(format!(
        "{name} {median:.0} ns/get (fastest round {fastest:.0})"
    ))
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
    let phases = args.get(4).map_or("both", String::as_str);
    let (run_present, run_absent) = match phases {
        "both" => (true, true),
        "present" => (true, false),
        "absent" => (false, true),
        other => return Err(format!("PHASES is both, present or absent, not {other:?}").into()),
    };
    let filter = match args.get(5).map_or("cache-local", String::as_str) {
        "cache-local" => FilterKind::CacheLocalBloom,
        "ribbon" => FilterKind::Ribbon,
        other => return Err(format!("FILTER is cache-local or ribbon, not {other:?}").into()),
    };
    let options = Options {
        filter,
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
    let warm_ups = if run_present { 2 } else { 0 };
    for _ in 0..warm_ups {
        for i in 0..keys {
            std::hint::black_box(db.get(key(2 * i))?);
        }
    }

    let before = db.stats();
    let (mut p, mut a) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (keys, times, want) in [(&present, &mut p, true), (&absent, &mut a, false)] {
            let run = if want { run_present } else { run_absent };
            if !run {
                continue;
            }
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
    let phases: Vec<String> = [summary("present", p), summary("absent", a)]
        .into_iter()
        .flatten()
        .collect();
    println!(
        "{}; timed rounds: {} table reads, {} cache hits",
        phases.join(", "),
        after.data_block_reads - before.data_block_reads,
        after.block_cache_hits - before.block_cache_hits
    );
    Ok(())
}
