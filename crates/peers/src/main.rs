//! `bloomkv-peers`: the disk-I/O savings workload on bloomkv and its peers, in one run.
//!
//! ```text
//! cargo run --release -p bloomkv-peers [-- --keys N --tables T --lookups L --json PATH]
//! cargo run --release -p bloomkv-peers --features rocksdb     # adds RocksDB rows
//! ```

use std::process::ExitCode;
use std::time::Instant;

use bloomkv::bench::{
    compare_to_baseline, print_table, render_savings_svg, run_stores, BenchArgs, BenchError,
    BenchStore, BloomkvStore, FilterSetting, Machine, Phase, Report, Row, WorkDir, Workload,
};
use bloomkv_peers::{check_lookups, fjall_store, FjallStore, Labeled};
use clap::Parser;

/// The rows' baseline for "reads avoided": bloomkv without filters.
const BASELINE: &str = "bloomkv no filter";

#[derive(Debug, Parser)]
#[command(
    name = "bloomkv-peers",
    version,
    about = "The bloomkv disk-I/O savings workload on bloomkv, fjall (and RocksDB with \
             --features rocksdb), side by side"
)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli.bench) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bloomkv-peers: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One store of the comparison: its name (also its directory) and how to open it.
type Maker = Box<dyn Fn(&WorkDir, &Workload) -> Result<Box<dyn BenchStore>, BenchError>>;

fn stores() -> Vec<(&'static str, Maker)> {
    let bloomkv = |label: &'static str, setting: FilterSetting| -> (&'static str, Maker) {
        (
            label,
            Box::new(move |work: &WorkDir, w: &Workload| {
                let dir = work.store_dir(&label.replace(' ', "-"))?;
                let store = BloomkvStore::create_with_cache(
                    dir,
                    setting,
                    w.bits_per_key,
                    w.cache_mib << 20,
                )?;
                Ok(Box::new(Labeled::new(label, store)) as Box<dyn BenchStore>)
            }),
        )
    };
    let fjall = |label: &'static str, filter: bool| -> (&'static str, Maker) {
        (
            label,
            Box::new(move |work: &WorkDir, w: &Workload| {
                let dir = work.store_dir(&label.replace(' ', "-"))?;
                let bpk = filter.then_some(w.bits_per_key);
                Ok(Box::new(FjallStore::create(label, dir, bpk)?) as Box<dyn BenchStore>)
            }),
        )
    };
    #[allow(unused_mut)]
    let mut list = vec![
        bloomkv(BASELINE, FilterSetting::None),
        bloomkv("bloomkv standard", FilterSetting::Standard),
        bloomkv("bloomkv cache-local", FilterSetting::CacheLocal),
        bloomkv("bloomkv ribbon", FilterSetting::Ribbon),
        fjall("fjall no filter", false),
        fjall("fjall", true),
    ];
    #[cfg(feature = "rocksdb")]
    {
        let rocksdb = |label: &'static str, filter: bool| -> (&'static str, Maker) {
            (
                label,
                Box::new(move |work: &WorkDir, w: &Workload| {
                    let dir = work.store_dir(&label.replace(' ', "-"))?;
                    let bpk = filter.then_some(w.bits_per_key);
                    Ok(
                        Box::new(bloomkv_peers::RocksDbStore::create(label, dir, bpk)?)
                            as Box<dyn BenchStore>,
                    )
                }),
            )
        };
        list.push(rocksdb("rocksdb no filter", false));
        list.push(rocksdb("rocksdb", true));
    }
    list
}

fn run(args: &BenchArgs) -> Result<(), BenchError> {
    args.validate()?;
    if args.sweep {
        return Err(
            "--sweep is bloomkv's alone: run `cargo run --release -- bench --sweep`".into(),
        );
    }
    if args.tables > fjall_store::MAX_TABLES {
        return Err(format!(
            "--tables {} is more than fjall takes with compaction held off ({}): it stalls \
             writes at 20 L0 tables",
            args.tables,
            fjall_store::MAX_TABLES
        )
        .into());
    }
    let w = args.workload();
    let work = WorkDir::new(args.dir.clone())?;
    println!("bloomkv and peers: {w}, 8 MiB block cache for peers");
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut tables = Vec::new();
    // One store at a time: each is loaded, queried and closed before the next opens.
    for (name, make) in stores() {
        let mut store = [make(&work, &w)?];
        let store_rows = run_stores(&mut store, &w, BASELINE)?;
        let found = store[0].tables();
        tables.push(format!("{name}: {found}"));
        if found != w.tables as usize {
            return Err(format!(
                "{name} has {found} tables after reopen, expected {}: compaction was not held off",
                w.tables
            )
            .into());
        }
        rows.extend(store_rows);
    }
    compare_to_baseline(&mut rows, BASELINE);
    println!("tables after reopen: {}", tables.join(", "));
    print!("{}", print_table(&rows));
    print!("{}", versus(&rows));
    check_lookups(&rows)?;

    if let Some(path) = &args.json {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let svg = path.with_extension("svg");
        std::fs::write(&svg, render_savings_svg(&rows))?;
        let report = Report {
            machine: Machine::here(),
            workload: w,
            rows,
            bits_sweep: Vec::new(),
            probe_sweep: Vec::new(),
            leveled: Vec::new(),
            prefix_rows: Vec::new(),
            version_times: None,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {} and {}", path.display(), svg.display());
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Time and OS read syscalls per lookup of every store, and each filtered store's time
/// against fjall's.
fn versus(rows: &[Row]) -> String {
    let find =
        |filter: &str, phase: Phase| rows.iter().find(|r| r.filter == filter && r.phase == phase);
    let mut out = String::from(
        "\nper lookup           absent µs  absent syscr  present µs  present syscr  absent vs fjall  present vs fjall\n",
    );
    let per = |r: Option<&Row>| -> (String, String) {
        match r {
            Some(r) => (
                format!("{:.2}", r.ns_per_lookup / 1000.0),
                r.os_read_syscalls
                    .map(|s| format!("{:.3}", s as f64 / r.lookups.max(1) as f64))
                    .unwrap_or_else(|| "n/a".into()),
            ),
            None => ("-".into(), "-".into()),
        }
    };
    let ratio = |r: Option<&Row>, base: Option<&Row>| -> String {
        match (r, base) {
            (Some(r), Some(b)) if b.ns_per_lookup > 0.0 => {
                format!("{:.2}x", r.ns_per_lookup / b.ns_per_lookup)
            }
            _ => "-".into(),
        }
    };
    let mut seen: Vec<&str> = Vec::new();
    for r in rows {
        if seen.contains(&r.filter.as_str()) {
            continue;
        }
        seen.push(&r.filter);
        let (a, p) = (
            find(&r.filter, Phase::Absent),
            find(&r.filter, Phase::Present),
        );
        let (a_us, a_sc) = per(a);
        let (p_us, p_sc) = per(p);
        out.push_str(&format!(
            "{:<19}  {:>9}  {:>12}  {:>10}  {:>13}  {:>15}  {:>16}\n",
            r.filter,
            a_us,
            a_sc,
            p_us,
            p_sc,
            ratio(a, find("fjall", Phase::Absent)),
            ratio(p, find("fjall", Phase::Present)),
        ));
    }
    out
}
