//! What a batched lookup (`multi_get`) costs per key against a loop of gets when every
//! block is already in the block cache.
//!
//! Builds the benchmark's flat store (`KEYS` keys in 10 overlapping tables, Ribbon
//! filters) in `DIR` — or reopens it if `DIR` exists, so two builds can be compared on
//! the very same files — with a block cache of 512 MiB (larger than the data). Two
//! passes of gets over every present key fill the cache; then `ROUNDS` rounds, each
//! timing the benchmark's present and absent lookup keys (200,000 of each) once as a
//! loop of gets and once in batches of `BATCH`, interleaved so that the drift of a
//! shared machine falls on both alike. Printed: the median ns per key of each, the
//! median of the per-round ratios batch / loop, and the table reads of the timed
//! rounds (0 when the cache holds everything).
//!
//! ```text
//! cargo run --release --example multi_get_warm -- [DIR] [KEYS] [ROUNDS] [BATCH] [PHASES] [KINDS]
//! ```
//!
//! `PHASES` is `both` (the default), `present` or `absent`; `KINDS` is `both` (the
//! default), `get` or `batch`: one phase and one kind alone make a profile
//! (`perf record`, `perf stat`) of that path alone.

use std::path::PathBuf;
use std::time::Instant;

use bloomkv::kv::{Db, FilterKind, Options};
use bloomkv_bench::{key, load, lookup_keys, BloomkvStore, NoProgress, Phase, Workload};

const LOOKUPS: u64 = 200_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scratch = tempfile::tempdir()?;
    let dir = args
        .first()
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().join("db"));
    let keys: u64 = args.get(1).map_or(Ok(1_000_000), |a| a.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(7), |a| a.parse())?;
    let batch: usize = args.get(3).map_or(Ok(32), |a| a.parse())?;
    let phases = args.get(4).map_or("both", String::as_str);
    let kinds = args.get(5).map_or("both", String::as_str);
    let (present_on, absent_on) = match phases {
        "both" => (true, true),
        "present" => (true, false),
        "absent" => (false, true),
        other => return Err(format!("PHASES is both, present or absent, not {other:?}").into()),
    };
    let (get_on, batch_on) = match kinds {
        "both" => (true, true),
        "get" => (true, false),
        "batch" => (false, true),
        other => return Err(format!("KINDS is both, get or batch, not {other:?}").into()),
    };
    let options = Options {
        filter: FilterKind::Ribbon,
        block_cache_size: 512 << 20,
        disable_auto_compaction: true,
        memtable_size: 1 << 30,
        ..Options::default()
    };
    let w = Workload {
        keys,
        lookups: LOOKUPS,
        ..Workload::default()
    };
    if !dir.exists() {
        let mut store = BloomkvStore::with_options("multi_get", dir.clone(), options.clone())?;
        load(&mut store, &w, &NoProgress)?;
    }
    let db = Db::open(&dir, options)?;
    let present = lookup_keys(&w, Phase::Present);
    let absent = lookup_keys(&w, Phase::Absent);
    if present_on {
        for _ in 0..2 {
            for i in 0..keys {
                std::hint::black_box(db.get(key(2 * i))?);
            }
        }
    } else {
        for k in &absent {
            std::hint::black_box(db.get(k)?);
        }
    }

    let before = db.stats();
    for (name, keys, want, on) in [
        ("present", &present, true, present_on),
        ("absent", &absent, false, absent_on),
    ] {
        if !on {
            continue;
        }
        let (mut loop_ns, mut batch_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which kind goes first, so neither always follows the other.
            let mut order = [true, false];
            if round % 2 == 1 {
                order.reverse();
            }
            let (mut l, mut b) = (f64::NAN, f64::NAN);
            for single in order {
                if (single && !get_on) || (!single && !batch_on) {
                    continue;
                }
                let started = Instant::now();
                let mut found = 0usize;
                if single {
                    for k in keys.iter() {
                        found += usize::from(db.get(k)?.is_some());
                    }
                } else {
                    for chunk in keys.chunks(batch) {
                        found += db.multi_get(chunk)?.iter().flatten().count();
                    }
                }
                let ns = started.elapsed().as_nanos() as f64 / keys.len() as f64;
                let expected = if want { keys.len() } else { 0 };
                if found != expected {
                    return Err(format!("{name}: found {found}, expected {expected}").into());
                }
                if single {
                    l = ns;
                } else {
                    b = ns;
                }
            }
            loop_ns.push(l);
            batch_ns.push(b);
            ratios.push(b / l);
        }
        println!(
            "{name}: loop {:.0} ns/key, batch of {batch} {:.0} ns/key, batch/loop {:.3} (median of {rounds} rounds)",
            median(loop_ns),
            median(batch_ns),
            median(ratios)
        );
    }
    let after = db.stats();
    println!(
        "timed rounds: {} table reads, {} cache hits",
        after.data_block_reads - before.data_block_reads,
        after.block_cache_hits - before.block_cache_hits
    );
    Ok(())
}
