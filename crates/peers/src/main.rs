//! `bloomkv-peers`: the disk-I/O savings workload on bloomkv and its peers, in one run.
//!
//! ```text
//! cargo run --release -p bloomkv-peers [-- --runs 15 --json PATH]
//! cargo run --release -p bloomkv-peers -- --shape leveled    # the leveled shape
//! cargo run --release -p bloomkv-peers -- --shape scale --keys 10000000 --runs 1  # defaults
//! cargo run --release -p bloomkv-peers --features rocksdb     # adds RocksDB rows
//! cargo run --release -p bloomkv-peers -- --fill-only          # the timed fill alone
//! cargo run --release -p bloomkv-peers -- --no-fill --lz4-rows  # adds LZ4 twins
//! cargo run --release -p bloomkv-peers -- --no-fill --multi-get 32  # adds batched twins
//! cargo run --release -p bloomkv-peers --features fjall-metrics -- --counted  # the counts
//! ```
//!
//! Every store (row) is loaded, queried and removed once per run; the runs go round
//! all stores in an order that rotates by one place per run. The figures are the
//! ratios between rows taken run by run (`ratios`), with their 95% intervals.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use bloomkv::kv::{FilterAllocation, FilterKind, Options};
use bloomkv_bench::{
    compare_to_baseline, render_savings_svg, run_store, Allocation, AllocationRun, Bar, BenchArgs,
    BenchError, BenchStore, BloomkvStore, FilterSetting, Phase, Row, WorkDir, Workload,
};
use bloomkv_peers::bloomkv_auto::BloomkvSetup;
use bloomkv_peers::environment::Environment;
use bloomkv_peers::fill::{self, levels_text, AutoStore, FillResult};
use bloomkv_peers::multi::multi_label;
use bloomkv_peers::plan::run_order;
use bloomkv_peers::ratios::{all_ratios, print_ratios, Ratio, Verdict};
use bloomkv_peers::report::{self, PeersReport, RunRecord, Setting};
use bloomkv_peers::{
    check_lookups, fjall_store, open_auto, CacheSize, FjallFilter, FjallStore, Labeled, Layout,
    CACHE_ALL, FJALL_DEFAULT_CACHE,
};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};

/// The rows' baseline for "reads avoided": bloomkv without filters.
const BASELINE: &str = "bloomkv no filter";

/// The row the time ratios are taken against.
const REFERENCE: &str = "fjall";

#[derive(Debug, Parser)]
#[command(
    name = "bloomkv-peers",
    version,
    about = "The bloomkv disk-I/O savings workload on bloomkv, fjall (and RocksDB with \
             --features rocksdb), side by side, over several interleaved runs"
)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
    /// Runs: each goes round every store once, starting one store later than the
    /// run before; rows report the median and range of their runs, ratios the median
    /// of the per-run ratios with a 95% interval (6 runs at least for one).
    #[arg(long, default_value_t = 15)]
    runs: usize,
    /// A counted run: RocksDB with its statistics on (needs fjall's counters too:
    /// build with `--features fjall-metrics`). Its times carry the counters' cost and
    /// are not the figures; the timed run is the one without.
    #[arg(long)]
    counted: bool,
    /// Only these rows (labels as the settings table prints them, comma-separated),
    /// in list order; every row when not given. For runs that must fit a time budget:
    /// `--rows "bloomkv cache-local,bloomkv ribbon,fjall,fjall 8M,rocksdb"`.
    #[arg(long)]
    rows: Option<String>,
    /// Leave out the timed fill (flat shape only).
    #[arg(long, conflicts_with = "fill_only")]
    no_fill: bool,
    /// Run the timed fill alone (flat shape only): its rows, none of the gets.
    #[arg(long)]
    fill_only: bool,
    /// Add LZ4 twins of the main flat rows (bloomkv cache-local, fjall, RocksDB), so
    /// that each store's cost of compression is a ratio within one run.
    #[arg(long, conflicts_with = "fill_only")]
    lz4_rows: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// YCSB's workloads A–F and existence checks (X) on every store, with latency
    /// percentiles (see `bloomkv_peers::ycsb`).
    Ycsb(bloomkv_peers::ycsb::YcsbArgs),
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let result = Cli::from_arg_matches(&matches)
        .map_err(BenchError::from)
        .and_then(|cli| match &cli.command {
            Some(Command::Ycsb(args)) => bloomkv_peers::ycsb::main(args),
            None => ignored_flags(&cli, &matches).and_then(|()| run(&cli)),
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bloomkv-peers: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What one unit of a run measured.
enum Output {
    Rows(Vec<Row>),
    Fill(FillResult),
    Leveled(FillResult, Vec<Row>),
}

/// A flag `bloomkv-peers` or the chosen shape does not use, given on the command
/// line: an error, not silence.
fn ignored_flags(cli: &Cli, m: &ArgMatches) -> Result<(), BenchError> {
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    let refuse = |ids: &[&str], why: &str| -> Result<(), BenchError> {
        match ids.iter().find(|id| given(id)) {
            Some(id) => Err(format!("--{} {why}", id.replace('_', "-")).into()),
            None => Ok(()),
        }
    };
    refuse(
        &[
            "prefix_scans",
            "range_scans",
            "range_bits_per_key",
            "range_max_len",
            "sweep",
        ],
        "is bloomkv bench's alone: bloomkv-peers runs point lookups and fills",
    )?;
    refuse(
        &["cache_mib"],
        "is bloomkv bench's: bloomkv-peers gives every row its own cache (each store's \
         default, and rows at 8, 32 and 512 MiB)",
    )?;
    if cli.bench.shape != "flat" {
        refuse(
            &[
                "lz4_rows",
                "compression",
                "filters",
                "tables",
                "block_align",
                "multi_get",
            ],
            "is the flat shape's: the leveled and scale shapes build their own tables",
        )?;
    }
    if cli.bench.shape != "leveled" {
        refuse(&["allocation"], "is the leveled shape's")?;
    }
    if cli.fill_only {
        refuse(
            &[
                "filters",
                "lookups",
                "threads",
                "block_align",
                "multi_get",
                "cold",
            ],
            "is about lookups: --fill-only runs none",
        )?;
    }
    if cli.bench.multi_get == 1 {
        return Err("--multi-get 1 is the single-get rows; give 2 or more (0: none)".into());
    }
    Ok(())
}

/// Opens a flat-shape store.
type FlatMaker = Box<dyn Fn(PathBuf, &Workload) -> Result<Box<dyn BenchStore>, BenchError>>;
/// Opens a store with compaction on.
type AutoMaker = Box<dyn Fn(PathBuf, &Workload, Layout) -> Result<AutoStore, BenchError>>;

/// How the runs time and count.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// RocksDB's statistics on (`--counted`).
    counted: bool,
    /// Batch size of the multi-get twins (0: none).
    multi_get: usize,
}

/// One store of the comparison: a row label, how it is set up, and what is run on it.
struct Unit {
    label: String,
    setting: Setting,
    job: Job,
}

enum Job {
    /// The flat shape: load into `--tables` tables, reopen, both phases.
    Flat(FlatMaker),
    /// The timed fill at the store's defaults.
    Fill(AutoMaker),
    /// The leveled shape: fill with small level budgets, settle, both phases.
    Leveled(AutoMaker),
    /// The scale shape: fill at the store's defaults, settle, both phases.
    Scale(AutoMaker),
}

impl Job {
    /// A store with compaction on: the leveled shape's or the fill's.
    fn auto(leveled: bool, make: AutoMaker) -> Job {
        if leveled {
            Job::Leveled(make)
        } else {
            Job::Fill(make)
        }
    }
}

/// A flat row's notes, with its compression when it has one.
fn flat_notes(notes: &str, lz4: bool) -> String {
    if lz4 {
        format!("{notes}; LZ4 data blocks")
    } else {
        notes.to_string()
    }
}

fn setting(store: &str, filter: &str, cache: CacheSize, default: usize, notes: &str) -> Setting {
    Setting {
        store: store.into(),
        filter: filter.into(),
        cache_bytes: cache.bytes(default),
        default_cache: cache == CacheSize::Default,
        notes: notes.into(),
    }
}

fn bloomkv_default_cache() -> usize {
    Options::default().block_cache_size
}

fn flat_bloomkv(label: &str, filter: FilterSetting, cache: CacheSize, lz4: bool) -> Unit {
    let l = label.to_string();
    let name = match filter {
        FilterSetting::None => "none".to_string(),
        f => format!("{}, 10 bits/key (--bits-per-key)", f.name()),
    };
    Unit {
        label: label.into(),
        setting: setting(
            label,
            &name,
            cache,
            bloomkv_default_cache(),
            &flat_notes("flat: compaction off", lz4),
        ),
        job: Job::Flat(Box::new(move |dir: PathBuf, w: &Workload| {
            let store = BloomkvStore::create_with(
                dir,
                filter,
                w.bits_per_key,
                cache.bytes(bloomkv_default_cache()),
                if lz4 { "lz4" } else { "none" },
                w.block_align,
            )?;
            Ok(Box::new(Labeled::new(l.clone(), store)) as Box<dyn BenchStore>)
        })),
    }
}

fn fjall_filter_name(filter: FjallFilter) -> String {
    match filter {
        FjallFilter::None => "none".into(),
        FjallFilter::BitsPerKey(_) => "Bloom, --bits-per-key on every level".into(),
        FjallFilter::Default => {
            "fjall's default: L0 for 0.01% FP (~19 bits/key), 10 bits/key below".into()
        }
    }
}

fn flat_fjall(label: &str, filter: FjallFilter, cache: CacheSize, lz4: bool) -> Unit {
    let l = label.to_string();
    Unit {
        label: label.into(),
        setting: setting(
            label,
            &fjall_filter_name(filter),
            cache,
            FJALL_DEFAULT_CACHE,
            &flat_notes(
                "flat: L0 trigger 255; filter and index blocks pinned on every level",
                lz4,
            ),
        ),
        job: Job::Flat(Box::new(move |dir: PathBuf, w: &Workload| {
            let filter = match filter {
                FjallFilter::BitsPerKey(_) => FjallFilter::BitsPerKey(w.bits_per_key),
                f => f,
            };
            Ok(Box::new(FjallStore::create_compressed(
                l.clone(),
                dir,
                filter,
                cache,
                Layout::Flat,
                lz4,
            )?) as Box<dyn BenchStore>)
        })),
    }
}

/// What a RocksDB row's notes say of its statistics.
#[cfg(feature = "rocksdb")]
fn rocksdb_statistics(counted: bool) -> &'static str {
    if counted {
        "statistics on (ExceptTimers): a counted run"
    } else {
        "statistics off"
    }
}

#[cfg(feature = "rocksdb")]
fn flat_rocksdb(label: &str, filter: bool, cache: CacheSize, lz4: bool, counted: bool) -> Unit {
    let l = label.to_string();
    Unit {
        label: label.into(),
        setting: setting(
            label,
            if filter {
                "set_bloom_filter(--bits-per-key, false)"
            } else {
                "none"
            },
            cache,
            bloomkv_peers::ROCKSDB_DEFAULT_CACHE,
            &flat_notes(
                &format!("flat: auto-compaction off; {}", rocksdb_statistics(counted)),
                lz4,
            ),
        ),
        job: Job::Flat(Box::new(move |dir: PathBuf, w: &Workload| {
            let bpk = filter.then_some(w.bits_per_key);
            Ok(Box::new(bloomkv_peers::RocksDbStore::create_compressed(
                l.clone(),
                dir,
                bpk,
                cache,
                Layout::Flat,
                lz4,
                counted,
            )?) as Box<dyn BenchStore>)
        })),
    }
}

fn auto_bloomkv(label: &str, run: AllocationRun, leveled: bool) -> Unit {
    let l = label.to_string();
    let allocation = run.allocation;
    let (alloc, no_last) = match allocation {
        Allocation::Uniform => (FilterAllocation::Uniform, false),
        Allocation::Monkey => (FilterAllocation::Monkey, false),
        Allocation::NoLastLevel => (FilterAllocation::Uniform, true),
        Allocation::Adaptive => (FilterAllocation::Adaptive, false),
    };
    let make: AutoMaker = Box::new(move |dir: PathBuf, w: &Workload, layout: Layout| {
        let setup = BloomkvSetup {
            filter: if run.ribbon {
                FilterKind::Ribbon
            } else {
                FilterKind::CacheLocalBloom
            },
            bits_per_key: run.bits_per_key.unwrap_or(w.bits_per_key),
            allocation: alloc,
            no_last_level_filter: no_last,
            cache: CacheSize::Default,
        };
        Ok(AutoStore::Bloomkv(Box::new(open_auto(
            l.clone(),
            dir,
            setup,
            layout,
        )?)))
    });
    Unit {
        label: label.into(),
        setting: setting(
            label,
            &format!(
                "{}, {}",
                if run.ribbon {
                    "Ribbon"
                } else {
                    "cache-local Bloom"
                },
                run.label()
            ),
            CacheSize::Default,
            bloomkv_default_cache(),
            if leveled {
                "compaction on; memtable 2 MiB, tables 1 MiB, L1 256 KiB"
            } else {
                "Options::default()"
            },
        ),
        job: Job::auto(leveled, make),
    }
}

fn auto_fjall(label: &str, filter: FjallFilter, leveled: bool) -> Unit {
    let l = label.to_string();
    let make: AutoMaker = Box::new(move |dir: PathBuf, w: &Workload, layout: Layout| {
        let filter = match filter {
            FjallFilter::BitsPerKey(_) => FjallFilter::BitsPerKey(w.bits_per_key),
            f => f,
        };
        Ok(AutoStore::Fjall(Box::new(FjallStore::create(
            l.clone(),
            dir,
            filter,
            CacheSize::Default,
            layout,
        )?)))
    });
    Unit {
        label: label.into(),
        setting: setting(
            label,
            &fjall_filter_name(filter),
            CacheSize::Default,
            FJALL_DEFAULT_CACHE,
            if leveled {
                "compaction on; memtable 2 MiB, tables 1 MiB (L1 = 4 tables' worth), default pinning"
            } else {
                "defaults (compression off)"
            },
        ),
        job: Job::auto(leveled, make),
    }
}

#[cfg(feature = "rocksdb")]
fn auto_rocksdb(label: &str, leveled: bool, counted: bool) -> Unit {
    let l = label.to_string();
    let make: AutoMaker = Box::new(move |dir: PathBuf, w: &Workload, layout: Layout| {
        Ok(AutoStore::RocksDb(Box::new(
            bloomkv_peers::RocksDbStore::create(
                l.clone(),
                dir,
                Some(w.bits_per_key),
                CacheSize::Default,
                layout,
                counted,
            )?,
        )))
    });
    Unit {
        label: label.into(),
        setting: setting(
            label,
            "set_bloom_filter(--bits-per-key, false), every level",
            CacheSize::Default,
            bloomkv_peers::ROCKSDB_DEFAULT_CACHE,
            &format!(
                "{}; {}",
                if leveled {
                    "compaction on; write buffer 2 MiB, tables 1 MiB, L1 256 KiB (dynamic level bytes, its default)"
                } else {
                    "defaults (compression off)"
                },
                rocksdb_statistics(counted)
            ),
        ),
        job: Job::auto(leveled, make),
    }
}

/// Which of the flat shape's units a run has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parts {
    /// The gets and the fill.
    All,
    /// The gets only (`--no-fill`).
    Gets,
    /// The fill only (`--fill-only`).
    Fill,
}

/// The stores of one run, in list order.
fn units(
    args: &BenchArgs,
    parts: Parts,
    lz4_rows: bool,
    counted: bool,
) -> Result<Vec<Unit>, BenchError> {
    let mut list = Vec::new();
    if args.shape == "scale" {
        // The fill's stores, each at its defaults, with the gets after the fill.
        let uniform = AllocationRun {
            allocation: Allocation::Uniform,
            bits_per_key: None,
            ribbon: false,
        };
        let scale = [
            auto_bloomkv("bloomkv", uniform, false),
            auto_fjall(REFERENCE, FjallFilter::Default, false),
        ]
        .into_iter();
        #[cfg(feature = "rocksdb")]
        let scale = scale.chain([auto_rocksdb("rocksdb", false, counted)]);
        for mut unit in scale {
            if let Job::Fill(make) = unit.job {
                unit.job = Job::Scale(make);
            }
            list.push(unit);
        }
        return Ok(list);
    }
    if args.shape == "leveled" {
        for a in Allocation::parse_list(&args.allocation)? {
            list.push(auto_bloomkv(&format!("bloomkv {}", a.label()), a, true));
        }
        list.push(auto_fjall("fjall own filters", FjallFilter::Default, true));
        list.push(auto_fjall("fjall", FjallFilter::BitsPerKey(0.0), true));
        #[cfg(feature = "rocksdb")]
        list.push(auto_rocksdb("rocksdb", true, counted));
        return Ok(list);
    }
    if parts != Parts::Fill {
        flat_units(args, lz4_rows, counted, &mut list)?;
    }
    if parts != Parts::Gets {
        let uniform = AllocationRun {
            allocation: Allocation::Uniform,
            bits_per_key: None,
            ribbon: false,
        };
        list.push(auto_bloomkv("bloomkv fill", uniform, false));
        list.push(auto_fjall("fjall fill", FjallFilter::Default, false));
        #[cfg(feature = "rocksdb")]
        list.push(auto_rocksdb("rocksdb fill", false, counted));
    }
    Ok(list)
}

/// The flat shape's get units: bloomkv's filters and caches, fjall's, RocksDB's. Every
/// row's data blocks are compressed as `--compression` says; `lz4_rows` adds LZ4
/// twins of the three main rows.
fn flat_units(
    args: &BenchArgs,
    lz4_rows: bool,
    counted: bool,
    list: &mut Vec<Unit>,
) -> Result<(), BenchError> {
    #[cfg(not(feature = "rocksdb"))]
    let _ = counted;
    let lz4 = args.compression == "lz4";
    let label = |f: FilterSetting| match f {
        FilterSetting::None => BASELINE.to_string(),
        FilterSetting::Standard => "bloomkv standard".into(),
        FilterSetting::CacheLocal => "bloomkv cache-local".into(),
        FilterSetting::Ribbon => "bloomkv ribbon".into(),
    };
    for f in FilterSetting::parse_list(&args.filters)? {
        list.push(flat_bloomkv(&label(f), f, CacheSize::Default, lz4));
    }
    list.push(flat_bloomkv(
        "bloomkv cache-local 32M",
        FilterSetting::CacheLocal,
        CacheSize::Bytes(FJALL_DEFAULT_CACHE),
        lz4,
    ));
    list.push(flat_bloomkv(
        "bloomkv cache-local 512M",
        FilterSetting::CacheLocal,
        CacheSize::Bytes(CACHE_ALL),
        lz4,
    ));
    if lz4_rows {
        list.push(flat_bloomkv(
            "bloomkv cache-local lz4",
            FilterSetting::CacheLocal,
            CacheSize::Default,
            true,
        ));
    }
    list.push(flat_fjall(
        "fjall no filter",
        FjallFilter::None,
        CacheSize::Default,
        lz4,
    ));
    list.push(flat_fjall(
        REFERENCE,
        FjallFilter::BitsPerKey(0.0),
        CacheSize::Default,
        lz4,
    ));
    // fjall at bloomkv's default cache: the two stores' present gets with equal
    // caches of the size the present-get target names (8 MiB), beside the main rows'
    // each-at-its-own-default.
    list.push(flat_fjall(
        "fjall 8M",
        FjallFilter::BitsPerKey(0.0),
        CacheSize::Bytes(Options::default().block_cache_size),
        lz4,
    ));
    list.push(flat_fjall(
        "fjall own filters",
        FjallFilter::Default,
        CacheSize::Default,
        lz4,
    ));
    list.push(flat_fjall(
        "fjall 512M",
        FjallFilter::BitsPerKey(0.0),
        CacheSize::Bytes(CACHE_ALL),
        lz4,
    ));
    if lz4_rows {
        list.push(flat_fjall(
            "fjall lz4",
            FjallFilter::BitsPerKey(0.0),
            CacheSize::Default,
            true,
        ));
    }
    #[cfg(feature = "rocksdb")]
    {
        list.push(flat_rocksdb(
            "rocksdb no filter",
            false,
            CacheSize::Default,
            lz4,
            counted,
        ));
        list.push(flat_rocksdb(
            "rocksdb",
            true,
            CacheSize::Default,
            lz4,
            counted,
        ));
        list.push(flat_rocksdb(
            "rocksdb 512M",
            true,
            CacheSize::Bytes(CACHE_ALL),
            lz4,
            counted,
        ));
        if lz4_rows {
            list.push(flat_rocksdb(
                "rocksdb lz4",
                true,
                CacheSize::Default,
                true,
                counted,
            ));
        }
    }
    Ok(())
}

/// Runs one unit in a fresh directory, removed afterwards.
fn run_unit(unit: &Unit, work: &WorkDir, w: &Workload, mode: Mode) -> Result<Output, BenchError> {
    let dir = work.store_dir(&unit.label.replace(' ', "-"))?;
    let out = match &unit.job {
        Job::Flat(make) => {
            let mut store = make(dir.clone(), w)?;
            let bar = Bar::new();
            let mut rows = run_store(store.as_mut(), w, &bar)?;
            if mode.multi_get > 0 {
                // The twin: the same store, keys and order, in batches, after a
                // reopen, so it starts with an empty block cache as the single
                // gets did.
                store.reopen()?;
                let shape = store.filter_shape();
                let label = multi_label(&unit.label, mode.multi_get);
                for phase in [Phase::Absent, Phase::Present] {
                    let result = bloomkv_bench::run_multi_get_phase(
                        store.as_ref(),
                        w,
                        phase,
                        mode.multi_get,
                        &bar,
                    )?;
                    let mut row = Row::new(&label, phase, &result, &shape, w.keys);
                    row.table_bytes = store.disk_bytes();
                    rows.push(row);
                }
            }
            let found = store.tables();
            if found != w.tables as usize {
                return Err(format!(
                    "{} has {found} tables after reopen, expected {}: compaction was not held off",
                    unit.label, w.tables
                )
                .into());
            }
            Output::Rows(rows)
        }
        Job::Fill(make) => {
            let mut store = make(dir.clone(), w, Layout::Defaults)?;
            Output::Fill(fill::fill(&mut store, w)?)
        }
        Job::Leveled(make) | Job::Scale(make) => {
            let layout = match unit.job {
                Job::Scale(_) => Layout::Defaults,
                _ => Layout::SmallLevels,
            };
            let mut store = make(dir.clone(), w, layout)?;
            let (filled, rows) = fill::run_leveled(&mut store, w)?;
            Output::Leveled(filled, rows)
        }
    };
    // The store is closed by now; its files go, so no run reads another's pages.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

fn run(cli: &Cli) -> Result<(), BenchError> {
    let args = &cli.bench;
    args.validate()?;
    if cli.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let fjall_metrics = cfg!(feature = "fjall-metrics");
    if cli.counted && !fjall_metrics {
        return Err("--counted needs fjall's counters: build with --features fjall-metrics".into());
    }
    // fjall's counters are compiled in or not: a build with them is a counted run.
    let mode = Mode {
        counted: cli.counted || fjall_metrics,
        multi_get: cli.bench.multi_get,
    };
    if args.shape == "flat" && args.tables > fjall_store::MAX_TABLES {
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
    let environment = Environment::here(&args.dir.clone().unwrap_or_else(std::env::temp_dir));
    if cli.fill_only && args.shape != "flat" {
        return Err(
            "--fill-only is the flat shape's (the leveled and scale shapes time their own fills)"
                .into(),
        );
    }
    let parts = if cli.fill_only {
        Parts::Fill
    } else if cli.no_fill {
        Parts::Gets
    } else {
        Parts::All
    };
    if args.compression == "lz4" && !(args.shape == "flat" && parts == Parts::Gets) {
        return Err(
            "--compression lz4 applies to the flat shape's gets: add --no-fill (the fill \
             and the leveled shape run every store uncompressed)"
                .into(),
        );
    }
    if cli.lz4_rows && args.shape != "flat" {
        return Err("--lz4-rows adds rows to the flat shape only".into());
    }
    if cli.lz4_rows && args.compression == "lz4" {
        return Err(
            "--lz4-rows adds LZ4 twins of raw rows: with --compression lz4 every row is \
             LZ4 already"
                .into(),
        );
    }
    let mut units = units(args, parts, cli.lz4_rows, mode.counted)?;
    if let Some(rows) = &cli.rows {
        units = pick_rows(units, rows)?;
    }
    println!(
        "bloomkv and peers, {} shape, {} run(s): {w}",
        args.shape, cli.runs
    );
    println!(
        "commit {}{}, {} ({} cores), {} GiB, kernel {}, {}",
        environment.commit.as_deref().unwrap_or("unknown"),
        match environment.clean {
            Some(false) => " (with uncommitted changes)",
            Some(true) => "",
            None => " (tree state unknown)",
        },
        environment.cpu_model,
        environment.cores,
        environment.memory_bytes.unwrap_or(0) >> 30,
        environment.kernel,
        environment.file_system
    );
    if mode.counted {
        println!(
            "a counted run (fjall's `metrics` feature, RocksDB's statistics): its times \
             include the counters' cost and are not the figures"
        );
    }
    let settings: Vec<Setting> = units.iter().map(|u| u.setting.clone()).collect();
    print!("{}", report::print_settings(&settings));

    let started = Instant::now();
    let mut records = Vec::new();
    let mut levels: Vec<(String, String)> = Vec::new();
    for (run, order) in run_order(units.len(), cli.runs).into_iter().enumerate() {
        let mut record = RunRecord {
            run,
            order: order.iter().map(|&i| units[i].label.clone()).collect(),
            rows: Vec::new(),
            fills: Vec::new(),
        };
        for &i in &order {
            match run_unit(&units[i], &work, &w, mode)? {
                Output::Rows(rows) => record.rows.extend(rows),
                Output::Fill(f) => record.fills.push(f),
                Output::Leveled(f, rows) => {
                    levels.retain(|(l, _)| l != &f.store);
                    levels.push((f.store.clone(), levels_text(&f.levels)));
                    record.fills.push(f);
                    record.rows.extend(rows);
                }
            }
        }
        compare_to_baseline(&mut record.rows, BASELINE);
        check_lookups(&record.rows)?;
        eprintln!(
            "run {} of {} done ({:.0} s so far)",
            run + 1,
            cli.runs,
            started.elapsed().as_secs_f64()
        );
        records.push(record);
    }

    let labels: Vec<String> = units
        .iter()
        .flat_map(|u| {
            let twin = (mode.multi_get > 0 && matches!(u.job, Job::Flat(_)))
                .then(|| multi_label(&u.label, mode.multi_get));
            std::iter::once(u.label.clone()).chain(twin)
        })
        .collect();
    let level_of = |label: &str| {
        levels
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, t)| t.clone())
    };
    let summary = report::summarize(&records, &labels, &level_of);
    let fills = report::summarize_fills(&records, &labels);
    if !summary.is_empty() {
        print!("{}", report::print_summary(&summary, cli.runs));
    }
    if summary.iter().any(|s| s.store == REFERENCE) {
        print!("{}", report::print_versus(&summary, &records, REFERENCE));
    }
    if !fills.is_empty() {
        print!("{}", report::print_fills(&fills, cli.runs));
    }
    if w.cold && !summary.is_empty() {
        print!("{}", report::print_cold_check(&summary));
    }
    let ratios = all_ratios(&records, &ratio_pairs(&labels, mode.multi_get));
    if !ratios.is_empty() {
        print!("{}", print_ratios(&ratios));
    }
    let targets = targets(&ratios);
    for t in &targets {
        println!(
            "target: {} {} ≤ {:.2}x {}: {} (median {:.2}x, 95% interval {:.2}–{:.2}x, {} runs)",
            t.ratio.row,
            t.ratio.phase,
            t.at_most,
            t.ratio.versus,
            t.verdict.name(),
            t.ratio.median,
            t.ratio.ci95[0],
            t.ratio.ci95[1],
            t.ratio.runs
        );
    }

    if let Some(path) = &args.json {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let rows = report::median_rows(&records, &summary);
        let report = PeersReport {
            provenance: bloomkv_bench::Provenance {
                commit: environment.commit.clone(),
                clean: environment.clean,
            },
            // The program by its name, not the path it was started from.
            command: std::iter::once("bloomkv-peers".to_string())
                .chain(std::env::args().skip(1))
                .collect::<Vec<_>>()
                .join(" "),
            environment,
            workload: w,
            shape: args.shape.clone(),
            runs: cli.runs,
            fjall_metrics,
            counted: mode.counted,
            settings,
            summary,
            fill: fills,
            rows,
            ratios,
            ratio_interval: report::RATIO_INTERVAL,
            targets,
            run_records: records,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        // The chart is of the gets' rows: a fill-only run has none.
        if args.shape == "flat" && !report.rows.is_empty() {
            let svg = path.with_extension("svg");
            std::fs::write(&svg, render_savings_svg(&report.rows))?;
            println!("wrote {} and {}", path.display(), svg.display());
        } else {
            println!("wrote {}", path.display());
        }
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The pairs of rows whose per-run time ratios a comparison reports: every row
/// against the reference (`fjall`), bloomkv's rows against RocksDB's, the pairs with
/// equal caches (8, 32, 512 MiB), the fills, and each multi-get twin against its own
/// single gets and against the other stores' twins. Pairs a run lacks are skipped.
fn ratio_pairs(labels: &[String], multi_get: usize) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut add = |a: &str, b: &str| {
        let pair = (a.to_string(), b.to_string());
        if a != b && !pairs.contains(&pair) {
            pairs.push(pair);
        }
    };
    let singles: Vec<&String> = labels
        .iter()
        .filter(|l| !l.contains(" multi-get "))
        .collect();
    for l in &singles {
        if !l.ends_with(" fill") {
            add(l, REFERENCE);
            if l.starts_with("bloomkv") {
                add(l, "rocksdb");
            }
        }
    }
    // Equal caches: the target's 8 MiB pair, 32 MiB, and everything cached.
    let equal = [
        ("bloomkv cache-local", "fjall 8M"),
        ("bloomkv cache-local 32M", "fjall"),
        ("bloomkv cache-local 32M", "rocksdb"),
        ("bloomkv cache-local 512M", "fjall 512M"),
        ("bloomkv cache-local 512M", "rocksdb 512M"),
        ("bloomkv cache-local lz4", "fjall lz4"),
        ("bloomkv cache-local lz4", "rocksdb lz4"),
        ("bloomkv fill", "fjall fill"),
        ("bloomkv fill", "rocksdb fill"),
    ];
    for (a, b) in equal {
        add(a, b);
    }
    if multi_get > 0 {
        for l in &singles {
            add(&multi_label(l, multi_get), l);
        }
        for (a, b) in equal.iter().take(5) {
            add(&multi_label(a, multi_get), &multi_label(b, multi_get));
        }
    }
    let present: Vec<&String> = labels.iter().collect();
    pairs.retain(|(a, b)| present.contains(&a) && present.contains(&b));
    pairs
}

/// The targets the comparison is judged on, each on its interval.
fn targets(ratios: &[Ratio]) -> Vec<report::Target> {
    // bloomkv's present get at most half fjall's, with equal 8 MiB caches.
    let wanted = [("bloomkv cache-local", "fjall 8M", "present", 0.5)];
    wanted
        .iter()
        .filter_map(|&(row, versus, phase, at_most)| {
            let ratio = ratios
                .iter()
                .find(|r| r.row == row && r.versus == versus && r.phase == phase)?;
            let verdict: Verdict = ratio.at_most(at_most);
            Some(report::Target {
                ratio: ratio.clone(),
                at_most,
                verdict,
            })
        })
        .collect()
}

/// The units named in `rows` (comma-separated labels), in the list's order; an
/// unknown or repeated label is an error.
fn pick_rows(mut units: Vec<Unit>, rows: &str) -> Result<Vec<Unit>, BenchError> {
    let mut picked = Vec::new();
    for name in rows.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(i) = units.iter().position(|u| u.label == name) else {
            let known: Vec<&str> = units.iter().map(|u| u.label.as_str()).collect();
            let taken = picked.iter().any(|u: &Unit| u.label == name);
            return Err(if taken {
                format!("--rows names {name:?} twice")
            } else {
                format!(
                    "--rows: no row {name:?} in this run (rows: {})",
                    known.join(", ")
                )
            }
            .into());
        };
        picked.push(units.remove(i));
    }
    if picked.is_empty() {
        return Err("--rows names no row".into());
    }
    Ok(picked)
}
