//! How long a checkpoint of a live store takes, and what open costs after it.
//!
//! Loads `keys` records (the benchmark's 100-byte values, random order) with automatic
//! compaction on and sync off, waits for compaction, then, while a second thread keeps
//! writing, takes `rounds` checkpoints into fresh directories on the same file system
//! (so tables are hard-linked) and times each. Every checkpoint is opened, its
//! `open_micros` read, and a sample of keys checked in it. About 9 M keys make 1 GB.
//!
//! ```text
//! cargo run --release --example checkpoint_time -- [keys] [rounds]
//! ```

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bloomkv::kv::{Db, Options};
use common::{key, load_shuffled};

fn dir_bytes(dir: &std::path::Path) -> std::io::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_file() {
            total += e.metadata()?.len();
        }
    }
    Ok(total)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(9_000_000);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let root = tempfile::tempdir_in(std::env::current_dir()?)?;
    let live = root.path().join("live");

    let db = Arc::new(Db::open(&live, Options::default())?);
    let started = Instant::now();
    load_shuffled(&db, keys, 7)?;
    let store_bytes = dir_bytes(&live)?;
    println!(
        "loaded {keys} keys in {:.1} s: {:.2} GiB on disk, {} tables",
        started.elapsed().as_secs_f64(),
        store_bytes as f64 / (1u64 << 30) as f64,
        db.stats().num_tables()
    );

    // A writer runs through every checkpoint.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || -> bloomkv::kv::Result<u64> {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                db.put(key(keys + n), "written during a checkpoint")?;
                n += 1;
            }
            Ok(n)
        })
    };
    for round in 0..rounds {
        let out = root.path().join(format!("copy{round}"));
        let t = Instant::now();
        let cp = db.checkpoint(&out)?;
        let took = t.elapsed();
        let copy = Db::open(&cp.path, Options::default())?;
        let open_us = copy.stats().open_micros;
        for i in (0..keys).step_by((keys / 1_000).max(1) as usize) {
            if copy.get(key(i))?.is_none() {
                return Err(format!("checkpoint {round} lacks {}", key(i)).into());
            }
        }
        println!(
            "checkpoint {round}: {:.1} ms, {} tables linked, {} copied, {:.2} GiB of tables, \
             sequence {}; its open took {open_us} µs",
            took.as_secs_f64() * 1e3,
            cp.linked,
            cp.copied,
            cp.table_bytes as f64 / (1u64 << 30) as f64,
            cp.sequence
        );
        copy.close()?;
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().map_err(|_| "writer panicked")??;
    println!("{written} writes ran beside the checkpoints");
    Ok(())
}
