//! How long `Db::open` takes on a store of thousands of tables, warm and with the page
//! cache dropped, and what the first gets after it pay for opening tables.
//!
//! Builds the leveled benchmark's shape (64 KiB tables, a 64 KiB L1, levels sized from
//! the bottom, 2 MiB memtables) with `keys` records in random order, compaction on and
//! sync off, and closes it cleanly. Then, `rounds` times alternating: a warm open and a
//! cold one (every file of the store dropped from the page cache first), each timed
//! from outside and by `DbStats::open_micros`, followed by 10,000 present gets whose
//! reads (the table opens among them) are counted.
//!
//! ```text
//! cargo run --release --example open_time -- [keys] [rounds]
//! ```

mod common;

use std::path::Path;
use std::time::Instant;

use bloomkv::kv::fs::{FileSystem, OsFileSystem};
use bloomkv::kv::{Db, Options};
use common::{key, load_shuffled};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn options() -> Options {
    Options {
        memtable_size: 2 << 20,
        target_file_size: 64 << 10,
        level1_max_bytes: 64 << 10,
        dynamic_level_bytes: true,
        ..Options::default()
    }
}

/// Asks the OS to drop every file of `dir` from its page cache.
fn drop_pages(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.is_file() {
            OsFileSystem.open_random(&path)?.drop_cache()?;
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(3_000_000);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let root = tempfile::tempdir_in(std::env::current_dir()?)?;
    let dir = root.path().join("store");

    let db = Db::open(&dir, options())?;
    let started = Instant::now();
    load_shuffled(&db, keys, 7)?;
    let stats = db.stats();
    println!(
        "built {keys} keys in {:.1} s: {} tables ({:?} per level)",
        started.elapsed().as_secs_f64(),
        stats.num_tables(),
        stats.tables_per_level
    );
    db.close()?;

    let mut rng = StdRng::seed_from_u64(11);
    for round in 0..rounds {
        for cold in [false, true] {
            if cold {
                drop_pages(&dir)?;
            }
            let t = Instant::now();
            let db = Db::open(&dir, options())?;
            let open_ms = t.elapsed().as_secs_f64() * 1e3;
            let inner_ms = db.stats().open_micros as f64 / 1e3;
            let before = db.stats();
            let t = Instant::now();
            for _ in 0..10_000 {
                let i = rng.gen_range(0..keys);
                if db.get(key(i))?.is_none() {
                    return Err(format!("{} is missing", key(i)).into());
                }
            }
            let gets_ms = t.elapsed().as_secs_f64() * 1e3;
            let after = db.stats();
            println!(
                "round {round} {}: open {open_ms:.1} ms (open_micros {inner_ms:.1} ms); then \
                 10,000 present gets in {gets_ms:.0} ms, {:.2} reads each, {} tables opened",
                if cold { "cold" } else { "warm" },
                (after.data_block_reads - before.data_block_reads) as f64 / 10_000.0,
                after.opened_tables
            );
            db.close()?;
        }
    }
    Ok(())
}
