//! What LZ4 data blocks save on disk and cost a get, side by side in one run.
//!
//! Two stores of the same keys with half-compressible 100-byte values (50 random
//! bytes, 50 repeated), one raw and one LZ4, both compacted and read with a block cache
//! of `cache MiB` (default 0: none, so every present get reads and, for LZ4,
//! decompresses one block; the cache holds decoded blocks, so a hit costs both stores
//! the same), with data blocks of `block size` bytes before compression (default
//! 4096, the store's). Rounds alternate between the stores; the ratio is of medians.
//! The time each store took to load and compact is printed too: what compression costs
//! a write (one run each, raw first, so read it as a rough figure).
//!
//! ```text
//! cargo run --release --example compression_cost -- [keys] [gets per round] [rounds] [cache MiB] [block size] [compression]
//! ```
//!
//! `compression` is the second store's (default `lz4`; `zstd`, `zstd(N)`: ZSTD blocks
//! against raw ones).

use std::time::Instant;

use bloomkv::kv::{Compression, Db, Options};

/// The benchmark's own values: half random bytes, half one byte repeated.
fn value(i: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(100);
    bloomkv_bench::fill_value(&mut v, i, 100);
    v
}

fn key(i: u64) -> String {
    format!("key{i:016}")
}

fn table_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let second: Compression = match args.get(5) {
        Some(c) => c.parse().expect("a compression: lz4, zstd, zstd(N)"),
        None => Compression::Lz4,
    };
    args.truncate(5);
    let args: Vec<u64> = args.iter().map(|a| a.parse().expect("numbers")).collect();
    let n = args.first().copied().unwrap_or(500_000);
    let gets = args.get(1).copied().unwrap_or(200_000);
    let rounds = args.get(2).copied().unwrap_or(7);
    let cache_mib = args.get(3).copied().unwrap_or(0) as usize;
    let block_size = args
        .get(4)
        .map_or(Options::default().block_size, |&b| b as usize);
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut write_secs = Vec::new();
    let stores: Vec<Db> = [Compression::None, second]
        .into_iter()
        .zip(&dirs)
        .map(|(compression, dir)| {
            let started = Instant::now();
            let db = Db::open(
                dir.path(),
                Options {
                    compression,
                    block_size,
                    block_cache_size: cache_mib << 20,
                    ..Options::default()
                },
            )
            .unwrap();
            for i in 0..n {
                db.put(key(i), value(i)).unwrap();
            }
            db.compact().unwrap();
            write_secs.push(started.elapsed().as_secs_f64());
            db
        })
        .collect();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let keys: Vec<String> = (0..gets)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            key(state % n)
        })
        .collect();
    let mut ns = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (s, db) in stores.iter().enumerate() {
            let started = Instant::now();
            for k in &keys {
                assert!(db.get(k).unwrap().is_some());
            }
            ns[s].push(started.elapsed().as_nanos() as f64 / keys.len() as f64);
        }
    }
    let [raw_ns, lz4_ns] = ns.map(median);
    let (raw_b, lz4_b) = (table_bytes(dirs[0].path()), table_bytes(dirs[1].path()));
    println!(
        "{n} keys, {block_size}-byte blocks, {cache_mib} MiB block cache: bytes on disk raw {raw_b}, {second} {lz4_b} ({:.3}x); \
         present get raw {raw_ns:.0} ns, {second} {lz4_ns:.0} ns ({:.3}x); \
         load and compact raw {:.2} s, {second} {:.2} s",
        lz4_b as f64 / raw_b as f64,
        lz4_ns / raw_ns,
        write_secs[0],
        write_secs[1],
    );
}
