//! `bloomkv-peers ycsb`: the workloads users run, YCSB's A–F and existence checks (X),
//! on bloomkv, fjall and redb (and RocksDB with `--features rocksdb`), side by side.
//!
//! ```text
//! for each of --runs rounds (the store order rotates by one per round):
//!   for each store × setting:
//!     open fresh ─▶ load --records (timed alone) ─▶ a, b, c, d, e, f, x for --seconds each ─▶ close, remove
//! ```
//!
//! The parts, one concept per file: [`generator`] (uniform, scrambled Zipfian,
//! latest), [`workload`] (the operation mixes), [`record`] (keys and self-describing
//! values), [`stores`] (the adapters and exactly how each store is set), [`runner`]
//! (load, timed operations into HDR histograms), [`verify`] (what a read may return
//! while writers run), [`report`] (rows, medians, ratios, tables) and [`chart`].

pub mod chart;
pub mod generator;
pub mod record;
pub mod report;
pub mod runner;
pub mod stores;
pub mod verify;
pub mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bloomkv_bench::{BenchError, WorkDir};

use crate::environment::Environment;
use crate::plan::run_order;
use report::{LoadRow, Ratio, SettingRow, YcsbReport, YcsbRow};
use runner::{RunConfig, StoreRun};
use stores::Setting;
use workload::Workload;

/// The command line of `bloomkv-peers ycsb`.
#[derive(Debug, Clone, clap::Args)]
pub struct YcsbArgs {
    /// Records loaded into each store before its workloads.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Seconds each workload runs.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Operations per thread per workload instead of --seconds (a fixed amount of work).
    #[arg(long)]
    pub ops: Option<u64>,
    /// Threads of the load and of every workload.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Stores, comma-separated: bloomkv, fjall, redb, rocksdb (with --features rocksdb).
    #[arg(long, default_value = "bloomkv,fjall,redb")]
    pub stores: String,
    /// Settings, comma-separated: defaults (each store's own), equal (same cache,
    /// no compression, 10 filter bits per key).
    #[arg(long, default_value = "defaults,equal")]
    pub settings: String,
    /// Workloads in the order they run on each store: a–f, x, or `all`.
    #[arg(long, default_value = "all")]
    pub workloads: String,
    /// Rounds over every store and setting; rows report the median of the rounds.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Bytes of every value (YCSB data).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// The records: `ycsb` (hashed ids, generated values) or `tpch` (TPC-H line items:
    /// `lineitem/<order>/<line>` keys, dbgen's row text as values).
    #[arg(long, default_value = "ycsb")]
    pub data: String,
    /// MiB of TPC-H's text pool (`--data tpch`; dbgen's is 300).
    #[arg(long, default_value_t = 300)]
    pub tpch_pool_mib: usize,
    /// Seed of every thread's generator.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Log and check the reads and writes of one record in this many (1: all).
    #[arg(long, default_value_t = 64)]
    pub verify_every: u64,
    /// Directory for the stores (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write the report as JSON here, and the latency chart beside it (`.svg`).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl YcsbArgs {
    /// The stores asked for.
    pub fn store_list(&self) -> Result<Vec<String>, BenchError> {
        let list: Vec<String> = self
            .stores
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        for s in &list {
            if !stores::STORES.contains(&s.as_str()) {
                return Err(format!(
                    "unknown store {s:?}: expected {}",
                    stores::STORES.join(", ")
                )
                .into());
            }
            #[cfg(not(feature = "rocksdb"))]
            if s == "rocksdb" {
                return Err("the rocksdb store needs `--features rocksdb`".into());
            }
        }
        Ok(list)
    }

    fn validate(&self) -> Result<(), BenchError> {
        if self.records == 0 {
            return Err("--records must be at least 1".into());
        }
        if self.threads == 0 || self.runs == 0 {
            return Err("--threads and --runs must be at least 1".into());
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) && self.ops.is_none() {
            return Err("--seconds must be a positive number".into());
        }
        if self.value_size < record::HEADER_LEN {
            return Err(format!(
                "--value-size must be at least {} (the value's id and version)",
                record::HEADER_LEN
            )
            .into());
        }
        Ok(())
    }
}

/// How each store is set, in words, for the report.
pub fn describe(store: &str, setting: Setting) -> String {
    match (store, setting) {
        ("bloomkv", Setting::Defaults) => "Options::default(): 8 MiB block cache, no compression, cache-local Bloom 10 bits/key, sync_writes false".into(),
        ("bloomkv", Setting::Equal) => "Options::default() with a 32 MiB block cache (no compression, Bloom 10 bits/key, sync_writes false)".into(),
        ("fjall", Setting::Defaults) => "Database::builder + KeyspaceCreateOptions::default(): 32 MiB cache, LZ4 from L2, Bloom 0.01% FP on L0 and 10 bits/key below, journal not fsynced per write".into(),
        ("fjall", Setting::Equal) => "32 MiB cache, no compression, Bloom 10 bits/key on every level, filter and index blocks pinned on every level".into(),
        ("redb", Setting::Defaults) => "Builder::new(): 1 GiB page cache; every write transaction commits with Durability::None (one durable commit after the load)".into(),
        ("redb", Setting::Equal) => "32 MiB page cache; Durability::None commits (one durable commit after the load); no filters or compression (a B-tree)".into(),
        ("rocksdb", Setting::Defaults) => "Options::default() with create_if_missing: 32 MiB block cache, no filter, Snappy only if built in (this build has LZ4 alone, so none), WAL not fsynced".into(),
        ("rocksdb", Setting::Equal) => "32 MiB LRU block cache, no compression, Bloom 10 bits/key, WAL not fsynced".into(),
        _ => String::new(),
    }
}

/// Runs the suite as `args` says; prints progress to stderr. Returns the report.
pub fn run_suite(args: &YcsbArgs) -> Result<YcsbReport, BenchError> {
    args.validate()?;
    let store_names = args.store_list()?;
    let settings = Setting::parse_list(&args.settings)?;
    let workloads = Workload::parse_list(&args.workloads)?;
    let units: Vec<(String, Setting)> = settings
        .iter()
        .flat_map(|&s| store_names.iter().map(move |n| (n.clone(), s)))
        .collect();
    let work = WorkDir::new(args.dir.clone())?;
    let data = match args.data.as_str() {
        "ycsb" => record::Data::Ycsb,
        "tpch" => {
            // SF1 has 6,001,215 line items.
            let scale = (args.records as f64 * 1.05 / 6_000_000.0).max(0.01);
            let rows = crate::tpch::TpchRows::new(scale, args.tpch_pool_mib << 20)
                .rows(crate::tpch::Table::LineItem, args.records as usize);
            if (rows.len() as u64) < args.records {
                return Err(format!(
                    "TPC-H at scale {scale} gave {} line items, {} asked",
                    rows.len(),
                    args.records
                )
                .into());
            }
            record::Data::Tpch(std::sync::Arc::new(rows))
        }
        other => return Err(format!("unknown --data {other:?}: expected ycsb or tpch").into()),
    };
    let config = RunConfig {
        records: args.records,
        threads: args.threads,
        duration: Duration::from_secs_f64(if args.seconds.is_finite() && args.seconds > 0.0 {
            args.seconds
        } else {
            1.0
        }),
        ops_per_thread: args.ops,
        value_size: args.value_size,
        seed: args.seed,
        verify_every: args.verify_every,
        data: data.clone(),
    };
    let started = Instant::now();
    let mut run_rows = Vec::new();
    let mut run_loads = Vec::new();
    for (round, order) in run_order(units.len(), args.runs).into_iter().enumerate() {
        for i in order {
            let (name, setting) = &units[i];
            let dir = work.store_dir(&format!("ycsb-{name}-{}", setting.name()))?;
            let store = stores::open(name, &dir, *setting)?;
            {
                let run = StoreRun::new(store.as_ref(), config.clone());
                let load = run.load()?;
                run_loads.push(LoadRow::of(name, *setting, round, &load));
                for w in &workloads {
                    let result = run.run(w, round as u64)?;
                    run_rows.push(YcsbRow::of(
                        name,
                        *setting,
                        args.records,
                        args.threads,
                        round,
                        &result,
                    ));
                }
            }
            store.close()?;
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!(
                "run {}/{}: {name} ({}) done, {:.0} s so far",
                round + 1,
                args.runs,
                setting.name(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let mut rows = Vec::new();
    let mut load = Vec::new();
    let mut setting_rows = Vec::new();
    for (name, setting) in &units {
        setting_rows.push(SettingRow {
            store: name.clone(),
            setting: setting.name().into(),
            how: describe(name, *setting),
        });
        let loads: Vec<&LoadRow> = run_loads
            .iter()
            .filter(|l| &l.store == name && l.setting == setting.name())
            .collect();
        load.extend(LoadRow::summarize(&loads));
    }
    for (name, setting) in &units {
        for w in &workloads {
            let same: Vec<&YcsbRow> = run_rows
                .iter()
                .filter(|r| r.unit() == (name, setting.name(), &w.name.to_string()))
                .collect();
            rows.extend(report::summarize(&same));
        }
    }
    // Keep the tables grouped by setting, then workload, then store.
    rows.sort_by(|a, b| {
        (&a.setting, &a.workload)
            .cmp(&(&b.setting, &b.workload))
            .then_with(|| store_rank(&a.store).cmp(&store_rank(&b.store)))
    });
    let ratios = ratios(&run_rows, &run_loads, &store_names, &settings, &workloads);
    Ok(YcsbReport {
        command: std::iter::once("bloomkv-peers".to_string())
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" "),
        environment: Environment::here(&args.dir.clone().unwrap_or_else(std::env::temp_dir)),
        records: args.records,
        threads: args.threads,
        seconds: args.seconds,
        runs: args.runs,
        value_size: args.value_size,
        data: data.name().into(),
        settings: setting_rows,
        load,
        rows,
        ratios,
        run_rows,
        run_loads,
    })
}

fn store_rank(store: &str) -> usize {
    stores::STORES
        .iter()
        .position(|s| *s == store)
        .unwrap_or(usize::MAX)
}

/// bloomkv's ops/s over each other store's, per setting and phase, run by run.
fn ratios(
    rows: &[YcsbRow],
    loads: &[LoadRow],
    stores: &[String],
    settings: &[Setting],
    workloads: &[Workload],
) -> Vec<Ratio> {
    let mut out = Vec::new();
    if !stores.iter().any(|s| s == "bloomkv") {
        return out;
    }
    for setting in settings {
        let s = setting.name();
        for other in stores.iter().filter(|o| *o != "bloomkv") {
            let load_of = |store: &str, run: usize| {
                loads
                    .iter()
                    .find(|l| l.store == store && l.setting == s && l.run == Some(run))
                    .map(|l| l.ops_per_sec)
            };
            let runs: Vec<usize> = loads.iter().filter_map(|l| l.run).collect();
            let mut rounds = runs.clone();
            rounds.sort_unstable();
            rounds.dedup();
            let per_run: Vec<f64> = rounds
                .iter()
                .filter_map(|&r| Some(load_of("bloomkv", r)? / load_of(other, r)?))
                .collect();
            let row = format!("bloomkv {s}");
            out.extend(report::ratio_of(&row, other, "load", &per_run));
            for w in workloads {
                let name = w.name.to_string();
                let of = |store: &str, run: usize| {
                    rows.iter()
                        .find(|r| {
                            r.store == store
                                && r.setting == s
                                && r.workload == name
                                && r.run == Some(run)
                        })
                        .map(|r| r.ops_per_sec)
                };
                let per_run: Vec<f64> = rounds
                    .iter()
                    .filter_map(|&r| Some(of("bloomkv", r)? / of(other, r)?))
                    .collect();
                out.extend(report::ratio_of(&row, other, &name, &per_run));
            }
        }
    }
    out
}

/// `bloomkv-peers ycsb`: runs the suite, prints its tables, writes JSON and chart.
pub fn main(args: &YcsbArgs) -> Result<(), BenchError> {
    let started = Instant::now();
    println!(
        "YCSB suite: {} records, {} thread(s), {} per workload, {} run(s), stores {}, settings {}",
        args.records,
        args.threads,
        match args.ops {
            Some(n) => format!("{n} ops per thread"),
            None => format!("{} s", args.seconds),
        },
        args.runs,
        args.stores,
        args.settings
    );
    let report = run_suite(args)?;
    for s in &report.settings {
        println!("  {} {}: {}", s.store, s.setting, s.how);
    }
    print!(
        "{}",
        report::print_tables(&report.rows, &report.load, report.runs)
    );
    if !report.ratios.is_empty() {
        print!("{}", report::print_ratios(&report.ratios));
    }
    let verified: usize = report.rows.iter().map(|r| r.reads_verified).sum();
    println!("\nreads checked against the write log: {verified}, all consistent");
    if let Some(path) = &args.json {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        let svg = path.with_extension("svg");
        std::fs::write(&svg, chart::render_latency_svg(&report.rows))?;
        println!("wrote {} and {}", path.display(), svg.display());
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
