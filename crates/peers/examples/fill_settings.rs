//! The timed fill of `bloomkv-peers`, on bloomkv under a few option sets and on fjall
//! at its defaults, alternating in one process: what each setting costs a writer, and
//! why bloomkv's defaults are RocksDB's sizes (64 MiB memtable and tables, 256 MiB
//! level base, dynamic levels) rather than LevelDB's.
//!
//! Each round fills a fresh store per row with the workload's `KEYS` keys in its
//! shuffled order (`bloomkv_peers::fill::fill`: compaction on, sync off, settled at
//! the end) and removes it. The medians over `ROUNDS` rounds are printed with each
//! row's settled time as a share of fjall's, and for bloomkv how long writes waited
//! for compaction (`DbStats::write_stall_micros`) and how many bytes its tables took
//! to write in all (flushes and compactions: the write amplification).
//!
//! ```text
//! cargo run --release -p bloomkv-peers --example fill_settings -- [KEYS] [ROUNDS] [ONLY]
//! ```
//!
//! `ONLY` keeps just the rows whose name contains one of its comma-separated parts
//! (`fjall,defaults`, ...).

use bloomkv::kv::Options;
use bloomkv_bench::{BenchError, BloomkvStore, Workload};
use bloomkv_peers::fill::{fill, levels_text, AutoStore};
use bloomkv_peers::{CacheSize, FjallFilter, FjallStore, Layout};

mod common;
use common::{median, Args};

/// One bloomkv row: a name and how it changes `Options::default()`.
struct Setting {
    name: &'static str,
    tweak: fn(&mut Options),
}

const SETTINGS: &[Setting] = &[
    Setting {
        name: "bloomkv defaults",
        tweak: |_| {},
    },
    Setting {
        name: "bloomkv 4 MiB memtable",
        tweak: |o| {
            o.memtable_size = 4 << 20;
        },
    },
    Setting {
        name: "bloomkv LevelDB's sizes",
        // The defaults until they became RocksDB's: LevelDB's memtable, table and
        // level-1 sizes, its L0 triggers, fixed level budgets.
        tweak: |o| {
            o.memtable_size = 4 << 20;
            o.max_immutable_memtables = 2;
            o.target_file_size = 2 << 20;
            o.level1_max_bytes = 8 << 20;
            o.level0_slowdown_writes_trigger = 8;
            o.level0_stop_writes_trigger = 12;
            o.dynamic_level_bytes = false;
        },
    },
];

/// What a row measured in one round.
struct Sample {
    us_per_put: f64,
    total_s: f64,
    stall_s: f64,
    written_mib: f64,
    levels: String,
}

fn run_bloomkv(
    setting: &Setting,
    w: &Workload,
    dir: &std::path::Path,
) -> Result<Sample, BenchError> {
    let mut options = Options::default();
    (setting.tweak)(&mut options);
    let store = BloomkvStore::with_options(setting.name, dir.to_path_buf(), options)?;
    let mut auto = AutoStore::Bloomkv(Box::new(store));
    let filled = fill(&mut auto, w)?;
    let AutoStore::Bloomkv(store) = &auto else {
        return Err("not a bloomkv store".into());
    };
    let stats = store.db().ok_or("store is closed")?.stats();
    Ok(Sample {
        us_per_put: filled.ns_per_put / 1000.0,
        total_s: filled.total_ms / 1000.0,
        stall_s: stats.write_stall_micros as f64 / 1e6,
        written_mib: (stats.flush_bytes_written + stats.compaction_bytes_written) as f64
            / (1 << 20) as f64,
        levels: levels_text(&filled.levels),
    })
}

fn run_fjall(w: &Workload, dir: &std::path::Path) -> Result<Sample, BenchError> {
    let store = FjallStore::create(
        "fjall",
        dir.to_path_buf(),
        FjallFilter::Default,
        CacheSize::Default,
        Layout::Defaults,
    )?;
    let mut auto = AutoStore::Fjall(Box::new(store));
    let filled = fill(&mut auto, w)?;
    Ok(Sample {
        us_per_put: filled.ns_per_put / 1000.0,
        total_s: filled.total_ms / 1000.0,
        stall_s: f64::NAN,
        written_mib: f64::NAN,
        levels: levels_text(&filled.levels),
    })
}

fn main() -> Result<(), BenchError> {
    let args = Args::from_env();
    let (keys, rounds) = (
        args.number(0, 1_000_000)?,
        args.number(1, 3)?.max(1) as usize,
    );
    let w = Workload {
        keys,
        ..Workload::default()
    };
    let only = args.text(2).unwrap_or_default();
    let rows = SETTINGS.len() + 1;
    let name = |row: usize| SETTINGS.get(row).map_or("fjall (defaults)", |s| s.name);
    let mut samples: Vec<Vec<Sample>> = (0..rows).map(|_| Vec::new()).collect();
    let work = tempfile::tempdir()?;
    for round in 0..rounds {
        // The order rotates by one row per round, so no row always runs first.
        for i in 0..rows {
            let row = (i + round) % rows;
            if !only.split(',').any(|part| name(row).contains(part)) {
                continue;
            }
            let dir = work.path().join(format!("r{round}-{row}"));
            let sample = match SETTINGS.get(row) {
                Some(s) => run_bloomkv(s, &w, &dir)?,
                None => run_fjall(&w, &dir)?,
            };
            std::fs::remove_dir_all(&dir)?;
            eprintln!(
                "round {round}: {:<34} {:.2} µs/put, {:.2} s settled",
                name(row),
                sample.us_per_put,
                sample.total_s
            );
            samples[row].push(sample);
        }
    }
    let fjall_total = median(samples[rows - 1].iter().map(|s| s.total_s).collect());
    let fjall_total = if fjall_total.is_nan() {
        1.0
    } else {
        fjall_total
    };
    println!(
        "{keys} keys, {} B values, {rounds} rounds, medians",
        w.value_size
    );
    println!(
        "{:<34} {:>9} {:>10} {:>7} {:>9} {:>12}  levels (last round)",
        "row", "µs/put", "settled s", "×fjall", "stall s", "written MiB"
    );
    for (row, s) in samples.iter().enumerate() {
        if s.is_empty() {
            continue;
        }
        let total = median(s.iter().map(|x| x.total_s).collect());
        println!(
            "{:<34} {:>9.2} {:>10.2} {:>7.2} {:>9.2} {:>12.0}  {}",
            name(row),
            median(s.iter().map(|x| x.us_per_put).collect()),
            total,
            total / fjall_total,
            median(s.iter().map(|x| x.stall_s).collect()),
            median(s.iter().map(|x| x.written_mib).collect()),
            s.last().map_or("", |x| x.levels.as_str()),
        );
    }
    Ok(())
}
