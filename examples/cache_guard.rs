//! A Bloom filter guarding a slow backend against cache penetration.
//!
//! A cache in front of a database answers hot keys; a key the cache lacks goes to the
//! database. A flood of requests for keys that exist nowhere (a bug, a scraper, an
//! attack) misses the cache every time and lands on the database every time: "cache
//! penetration". A Bloom filter of the keys that exist, consulted first, turns away
//! almost all of them: only its false positives (about 1% at 10 bits/key) get through.
//!
//! Here the backend is a bloomkv store whose every lookup also pays a fixed delay, like
//! a network round trip. `cargo run --release --example cache_guard [-- --keys N --requests R]`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bloomkv::{BloomFilter, Db, Options};

/// The slow system of record: a store plus a fixed round-trip delay per call.
struct Backend {
    db: Db,
    delay: Duration,
    calls: u64,
}

impl Backend {
    fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, bloomkv::Error> {
        self.calls += 1;
        std::thread::sleep(self.delay);
        Ok(self.db.get(key)?.map(|v| v.to_vec()))
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keys = arg("--keys", 100_000);
    let requests = arg("--requests", 20_000);
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;

    // The keys that exist, in the backend and in the guard.
    let mut guard = BloomFilter::with_rate(keys, 0.01)?;
    for i in 0..keys {
        let key = format!("user:{i}");
        db.put(&key, format!("profile of user {i}"))?;
        guard.insert(&key);
    }
    db.flush()?;
    let mut backend = Backend {
        db,
        delay: Duration::from_micros(20),
        calls: 0,
    };
    println!(
        "guard: {} keys, {} bits ({:.1} KiB), {} hashes, estimated FP {:.3}%",
        keys,
        guard.num_bits(),
        guard.num_bits() as f64 / 8192.0,
        guard.num_hashes(),
        guard.estimated_fp_rate() * 100.0
    );

    // A flood of requests for keys that do not exist.
    let flood: Vec<String> = (0..requests)
        .map(|i| format!("user:{}", keys + i * 7 + 1))
        .collect();

    for guarded in [false, true] {
        let mut cache: HashMap<String, Option<Vec<u8>>> = HashMap::new();
        backend.calls = 0;
        let started = Instant::now();
        let mut turned_away = 0u64;
        for key in &flood {
            if cache.contains_key(key) {
                continue;
            }
            if guarded && !guard.contains(key) {
                turned_away += 1; // certainly absent: the backend is never asked
                continue;
            }
            let value = backend.get(key)?;
            // A cache that stored negative answers would fill with attack keys; like
            // most caches this one stores only hits.
            if value.is_some() {
                cache.insert(key.clone(), value);
            }
        }
        println!(
            "{:<14} {requests} absent-key requests -> {} backend calls, {} turned away by the filter, {:.0} ms",
            if guarded { "with guard:" } else { "without guard:" },
            backend.calls,
            turned_away,
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
