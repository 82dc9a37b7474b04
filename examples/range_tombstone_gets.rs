//! What a get costs below N range tombstones that do not cover its key.
//!
//! Builds one store per N in 0, 1, 10, 100: the same `KEYS` present keys (even ids) in
//! ten overlapping tables, and then N `delete_range`s over gaps between keys (each
//! `[key(2j) 01, key(2j) 02)`, which holds no key), spread over the whole key range: a
//! third in each of two newer L0 tables, the rest in the memtable. Every get therefore
//! passes the tombstones' tables and memtable (their key ranges cover it) and asks
//! their tombstones before their filters. Then `ROUNDS` rounds, each timing `GETS`
//! present and `GETS` absent gets (odd ids) in random order on every store in turn
//! (interleaved, so the drift of a shared machine falls on all of them alike), and
//! prints per N the median ns per get, its ratio to N = 0, and the counts per get:
//! tables probed, data-block reads, tombstone answers (0: none covers a key asked).
//!
//! ```text
//! cargo run --release --example range_tombstone_gets -- [KEYS] [GETS] [ROUNDS]
//! ```
//!
//! The issue's targets: old gets keep their speed (N = 0 against a build without range
//! deletes, within ±3%), and a get below 100 tombstones costs at most 1.2× one below none.

use std::time::Instant;

use bloomkv::kv::{Db, Options};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

const TOMBSTONES: [u64; 4] = [0, 1, 10, 100];

fn key(i: u64) -> String {
    format!("user{i:012}")
}

fn build(dir: &std::path::Path, keys: u64, n: u64) -> bloomkv::kv::Result<Db> {
    let db = Db::open(
        dir,
        Options {
            disable_auto_compaction: true,
            memtable_size: 1 << 30,
            block_cache_size: 256 << 20,
            ..Options::default()
        },
    )?;
    // Ten overlapping tables: table t holds the present ids 2i with i % 10 == t.
    for t in 0..10 {
        for i in (t..keys).step_by(10) {
            db.put(key(2 * i), format!("value-{i:012}-{}", "x".repeat(80)))?;
        }
        db.flush()?;
    }
    // N tombstones over gaps spread evenly across the key range, none covering a key.
    let gap = |j: u64| {
        let k = key(2 * (j * keys / n.max(1)));
        (format!("{k}\u{1}"), format!("{k}\u{2}"))
    };
    for j in 0..n {
        let (start, end) = gap(j);
        db.delete_range(start, end)?;
        if j + 1 == n / 3 || j + 1 == 2 * n / 3 {
            db.flush()?;
        }
    }
    Ok(db)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keys: u64 = args.first().map_or(Ok(200_000), |a| a.parse())?;
    let gets: usize = args.get(1).map_or(Ok(200_000), |a| a.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(5), |a| a.parse())?;
    let scratch = tempfile::tempdir()?;
    let stores: Vec<(u64, Db)> = TOMBSTONES
        .iter()
        .map(|&n| Ok((n, build(&scratch.path().join(format!("n{n}")), keys, n)?)))
        .collect::<bloomkv::kv::Result<_>>()?;
    let mut rng = StdRng::seed_from_u64(41);
    let mut present: Vec<String> = (0..gets as u64).map(|i| key(2 * (i % keys))).collect();
    let mut absent: Vec<String> = (0..gets as u64).map(|i| key(2 * (i % keys) + 1)).collect();
    present.shuffle(&mut rng);
    absent.shuffle(&mut rng);
    // Warm every store's caches once.
    for (_, db) in &stores {
        for k in present.iter().chain(&absent) {
            std::hint::black_box(db.get(k)?);
        }
    }
    let mut times = vec![(Vec::new(), Vec::new()); stores.len()];
    let mut counts = vec![[0u64; 3]; stores.len()];
    for _ in 0..rounds {
        for (s, (_, db)) in stores.iter().enumerate() {
            let before = db.stats();
            for (phase, asked) in [&present, &absent].into_iter().enumerate() {
                let start = Instant::now();
                for k in asked {
                    let got = db.get(k)?;
                    assert_eq!(got.is_some(), phase == 0, "{k}");
                }
                let ns = start.elapsed().as_nanos() as f64 / asked.len() as f64;
                if phase == 0 {
                    times[s].0.push(ns);
                } else {
                    times[s].1.push(ns);
                }
            }
            let after = db.stats();
            counts[s][0] += after.table_probes - before.table_probes;
            counts[s][1] += after.data_block_reads - before.data_block_reads;
            counts[s][2] += after.range_del_answers - before.range_del_answers;
        }
    }
    let base = (median(times[0].0.clone()), median(times[0].1.clone()));
    println!(
        "{keys} keys in 10 tables, {gets} present + {gets} absent gets per round, {rounds} rounds"
    );
    println!("tombstones  present ns/get (×N=0)  absent ns/get (×N=0)  probes/get  reads/get  tombstone answers");
    let per_get = (2 * gets * rounds) as f64;
    for (s, (n, db)) in stores.iter().enumerate() {
        let (p, a) = (median(times[s].0.clone()), median(times[s].1.clone()));
        println!(
            "{n:>10}  {p:>8.0} ({:>4.2})           {a:>8.0} ({:>4.2})         {:>6.2}      {:>6.3}     {}",
            p / base.0,
            a / base.1,
            counts[s][0] as f64 / per_get,
            counts[s][1] as f64 / per_get,
            counts[s][2],
        );
        assert_eq!(db.stats().range_tombstones, *n, "tombstones laid");
    }
    Ok(())
}
