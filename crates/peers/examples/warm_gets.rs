//! bloomkv and fjall side by side with their block caches already full: what a get
//! costs when no read reaches a file.
//!
//! Both stores get the flat shape (`KEYS` keys in 10 tables, 10 bits/key Bloom
//! filters, no compression) and a block cache of `CACHE` MiB each; two passes over
//! every key warm both. Then `ROUNDS` rounds alternate the stores, each round timing
//! 400,000 present and 400,000 absent gets in random order, and the medians are
//! printed with bloomkv's time as a share of fjall's. Alternating in one process keeps
//! the machine's drift out of the ratio.
//!
//! ```text
//! cargo run --release -p bloomkv-peers --example warm_gets -- [KEYS] [ROUNDS] [CACHE] [FILTER] [BITS]
//! ```
//!
//! `FILTER` (`cache-local`, the default, or another of the benchmark's `--filters`
//! names) and `BITS` (default 10) change bloomkv's filters only; fjall keeps its 10
//! bits/key Bloom filters. They answer what fewer false positives would buy an absent
//! get: `cache-local 24` gives filters whose false positives almost never cost a read
//! (about 0.02% of probes instead of 1%) at the same one cache line per probe — a
//! bound for any filter as fast as a cache-local Bloom probe, not a fair row. The
//! table reads bloomkv's absent gets made are printed beside the times.

use std::time::Instant;

use bloomkv_bench::{
    key, load, lookup_keys, BenchError, BenchStore, BloomkvStore, FilterSetting, NoProgress, Phase,
    Workload,
};
use bloomkv_peers::{CacheSize, FjallFilter, FjallStore, Layout};

mod common;
use common::{median, Args};

const GETS: usize = 400_000;

/// Nanoseconds per get over `keys`, each expected to be found or not as `want` says.
fn timed(store: &dyn BenchStore, keys: &[[u8; 19]], want: bool) -> Result<f64, BenchError> {
    let started = Instant::now();
    for k in keys {
        if store.get(k)? != want {
            return Err(format!("{}: get {k:?} should give found = {want}", store.label()).into());
        }
    }
    Ok(started.elapsed().as_nanos() as f64 / keys.len() as f64)
}

fn main() -> Result<(), BenchError> {
    let args = Args::from_env();
    let (keys, rounds, cache_mib) = (
        args.number(0, 1_000_000)?,
        args.number(1, 5)?,
        args.number(2, 512)? as usize,
    );
    let filter = match FilterSetting::parse_list(args.text(3).unwrap_or("cache-local"))?[..] {
        [one] => one,
        _ => return Err("FILTER is one filter name".into()),
    };
    let bits = args.number(4, 10)? as f64;
    let w = Workload {
        keys,
        ..Workload::default()
    };
    let dir = tempfile::tempdir()?;
    let mut bloomkv =
        BloomkvStore::create_with_cache(dir.path().join("bloomkv"), filter, bits, cache_mib << 20)?;
    load(&mut bloomkv, &w, &NoProgress)?;
    let mut fjall = FjallStore::create(
        "fjall",
        dir.path().join("fjall"),
        FjallFilter::BitsPerKey(10.0),
        CacheSize::Bytes(cache_mib << 20),
        Layout::Flat,
    )?;
    load(&mut fjall, &w, &NoProgress)?;
    let stores: [&dyn BenchStore; 2] = [&bloomkv, &fjall];

    let lookups = Workload {
        lookups: GETS as u64,
        ..w
    };
    let present = lookup_keys(&lookups, Phase::Present);
    let absent = lookup_keys(&lookups, Phase::Absent);
    let everything: Vec<_> = (0..keys).map(|i| key(2 * i)).collect();
    for store in stores {
        for _ in 0..2 {
            timed(store, &everything, true)?;
        }
    }

    // [store][present, absent] -> one time per round
    let mut times = [[vec![], vec![]], [vec![], vec![]]];
    let mut absent_reads = 0;
    for _ in 0..rounds {
        for (store, t) in stores.iter().zip(&mut times) {
            t[0].push(timed(*store, &present, true)?);
            let before = bloomkv.counters().data_block_reads.unwrap_or(0);
            t[1].push(timed(*store, &absent, false)?);
            // bloomkv's reads only (fjall counts its own only with its `metrics`
            // feature, off here); fjall's rounds leave bloomkv's count unchanged.
            absent_reads += bloomkv.counters().data_block_reads.unwrap_or(0) - before;
        }
    }
    println!(
        "{keys} keys, {cache_mib} MiB block caches, {rounds} alternating rounds (medians); \
         bloomkv: {} at {bits} bits/key, {:.4} table reads per absent get",
        filter.name(),
        absent_reads as f64 / (rounds * absent.len() as u64) as f64
    );
    for (phase, i) in [("present", 0), ("absent", 1)] {
        let (b, f) = (median(times[0][i].clone()), median(times[1][i].clone()));
        println!(
            "{phase:8} bloomkv {b:>6.0} ns   fjall {f:>6.0} ns   bloomkv/fjall {:.2}",
            b / f
        );
    }
    Ok(())
}
