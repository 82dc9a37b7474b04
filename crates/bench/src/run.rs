//! The `bench` command: runs the workload on each filter setting, prints the table,
//! writes the JSON report and the charts.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use bloomkv_filter::{BloomLayout, BloomPolicy, FilterPolicy, KeyHash};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{
    compare_to_baseline, key, load, lookup_keys, print_leveled, print_prefix_table,
    print_range_table, print_scale, print_table, render_leveled_svg, render_range_svg,
    render_savings_svg, render_sweep_svg, run_leveled, run_phase, run_prefix_phases,
    run_range_phases, run_scale, run_store, run_store_batched, time_range_filter, Allocation,
    BenchError, BenchStore, BloomkvStore, FilterSetting, LeveledSettings, Phase, Progress, Report,
    SweepPoint, WorkDir, Workload, MAX_BATCH,
};
use crate::prefix::GROUP as PREFIX_GROUP;
use crate::report::Machine;

/// Flags of `bloomkv bench` (and of `cargo bench --bench disk_io_savings`).
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Keys to load.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Tables to spread them over (each spans the whole key range).
    #[arg(long, default_value_t = 10)]
    pub tables: u32,
    /// Lookups per phase (absent keys, then present keys).
    #[arg(long, default_value_t = 200_000)]
    pub lookups: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Filter bits per key for both Bloom layouts.
    #[arg(long, default_value_t = 10.0)]
    pub bits_per_key: f64,
    /// Where the stores live (default: a temporary directory, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write every figure as JSON here, and the SVG chart(s) beside it.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also sweep bits per key 1..=20 for both layouts, and the probe count at
    /// `--bits-per-key` (one store per point: takes several minutes at the defaults).
    #[arg(long)]
    pub sweep: bool,
    /// Drop the table files from the OS page cache before each lookup and scan phase.
    /// A phase's counted reads are then device reads only while it touches few pages
    /// twice (r random reads over P pages repeat about r / 2P of the time): keep
    /// `--lookups` small (2,000 at a million keys). The rows' device bytes and device
    /// reads per lookup show how many were.
    #[arg(long)]
    pub cold: bool,
    /// Seed of the load order and of the lookup keys.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Filters of the flat shape's rows: any of none, standard, cache-local, ribbon,
    /// comma-separated.
    #[arg(long, default_value = "none,standard,cache-local,ribbon")]
    pub filters: String,
    /// `flat`: `--tables` overlapping tables, compaction off (the default); `leveled`:
    /// a tree built by the store's own compaction, measured under each
    /// `--allocation` (`bloomkv bench`: levels sized from the bottom up, ×10 apart,
    /// 64 KiB tables, per level; bloomkv-peers: every store with 2 MiB memtables and
    /// 1 MiB tables); `scale`: the store's default sizes, loaded in random order with
    /// compaction on (`bloomkv bench`: then load, amplification, warm and cold opens,
    /// the first gets after a cold open, warm gets and memory, with and without a
    /// metadata budget — a quarter of the metadata, or `--metadata-budget-bytes`;
    /// bloomkv-peers: each store at its defaults, the timed fill, then absent and
    /// present gets).
    #[arg(long, default_value = "flat")]
    pub shape: String,
    /// Filter allocations for the leveled shape: any of uniform, monkey,
    /// no-last-level, adaptive, comma-separated; `NAME+ribbon` builds Ribbon filters instead of
    /// the cache-local Bloom, `NAME@BITS` gives one its own memory budget in bits per
    /// key (`monkey@8`: Monkey with 80% of uniform's memory at 10).
    #[arg(long, default_value = "uniform,monkey,no-last-level")]
    pub allocation: String,
    /// Prefix scans per prefix phase (absent, present; with and without a prefix
    /// extractor; flat shape); 0 skips the prefix phases.
    #[arg(long, default_value_t = 20_000)]
    pub prefix_scans: u64,
    /// Threads that run each lookup and scan phase at once over the same store, each
    /// taking an equal share of the phase's keys (the snapshot and full-scan timings
    /// stay on one thread).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// MiB of bloomkv's block cache (decoded data blocks); 0 turns it off, so every
    /// data block a lookup needs is read from its file. The default, 8, is bloomkv's
    /// own (`Options::default()`). `bloomkv bench` only: bloomkv-peers gives each row
    /// its own cache and refuses the flag.
    #[arg(long, default_value_t = 8)]
    pub cache_mib: usize,
    /// Compression of bloomkv's data blocks: none or lz4. The values are half
    /// random, half repeated bytes, so LZ4 has something to do but not everything.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Page-align the data blocks of the flat shape's stores (the main rows;
    /// `Options::block_align`, table format version 5, the store's default).
    /// `--block-align false` lays them back to back, so that runs with and without can
    /// be compared: times, and with `--cold` the device bytes a lookup fetches ("dev
    /// KiB/lkp"). The leveled, prefix and range phases keep the default.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub block_align: bool,
    /// Range scans per range phase (empty and non-empty, each length, with and
    /// without a range filter; flat shape); 0, the default, skips the range phases.
    /// Their rows also go to `<json>-range.json`.
    #[arg(long, default_value_t = 0)]
    pub range_scans: u64,
    /// Range filter bits per key in the range phases.
    #[arg(long, default_value_t = 16.0)]
    pub range_bits_per_key: f64,
    /// Longest range (in ids) the range filter answers in the range phases.
    #[arg(long, default_value_t = 64)]
    pub range_max_len: u64,
    /// Also look the flat shape's keys up N at a time with `multi_get`: rows with
    /// `"batch": N` beside the single-get rows (`"batch": 1`), the same keys, figures
    /// per key. Unless `--cold`, an unmeasured pass of gets warms the caches first, so
    /// both kinds of row meet the same cache (with `--cold`, give `--cache-mib 0`).
    /// 0, the default, runs no batched phases.
    #[arg(long, default_value_t = 0)]
    pub multi_get: usize,
    /// How the absent lookups pick their keys: `uniform` (the default) or
    /// `zipf:THETA` — YCSB's scrambled Zipfian of skew THETA (0 < THETA, THETA ≠ 1;
    /// YCSB's is 0.99) over the absent ids, so a few keys are asked again and again
    /// and the hot ones lie all over the key range. Rows record it (`absent_skew`).
    #[arg(long, default_value = "uniform")]
    pub absent_skew: String,
    /// Absent lookups made, unmeasured, before the absent phase: the first draws of
    /// the stream the phase then continues (rows record it: `absent_warmup`).
    #[arg(long, default_value_t = 0)]
    pub absent_warmup: u64,
    /// Memory for learned negatives in bloomkv's stores (`Options::learned_memory`),
    /// in bits per loaded key; 0, the default, learns nothing. Rows record the bytes
    /// apart from the filters' (`learned_bytes`, `learned_bits_per_key`).
    #[arg(long, default_value_t = 0.0)]
    pub learned_bits_per_key: f64,
    /// A cap on every leveled store's filter memory in bytes
    /// (`Options::filter_memory_budget`; under `adaptive` its learned negatives count
    /// too). Rows record it (`filter_budget_bytes`). Leveled shape only.
    #[arg(long)]
    pub filter_budget_bytes: Option<usize>,
    /// A cap on bloomkv's index and filter memory in bytes (`Options::metadata_budget`):
    /// tables are written with partitioned index and filter, and partitions are read
    /// on demand through a cache of at most this many bytes, their reads counted with
    /// the lookups'. Rows record it and the bytes held (`metadata_budget_bytes`,
    /// `metadata_bytes`); a line per store prints reads per lookup beside them.
    #[arg(long)]
    pub metadata_budget_bytes: Option<usize>,
    /// Leveled shape: load half the keys, settle, run the `--absent-warmup` lookups,
    /// reopen and load the rest, so the tables written after the warm-up are built
    /// knowing the lookups (probe statistics change only new tables' bits); the
    /// measured phase then has its own warm-up. Rows record it and the share of keys
    /// in tables written after the warm-up.
    #[arg(long)]
    pub grow_after_warmup: bool,
}

/// Parses `--absent-skew`: `uniform` is `None`, `zipf:THETA` is `Some(THETA)`.
pub fn parse_absent_skew(s: &str) -> Result<Option<f64>, BenchError> {
    if s == "uniform" {
        return Ok(None);
    }
    let theta = s
        .strip_prefix("zipf:")
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t > 0.0 && *t != 1.0 && *t < 10.0)
        .ok_or_else(|| {
            format!(
                "--absent-skew takes uniform or zipf:THETA (0 < THETA < 10, THETA ≠ 1), got {s:?}"
            )
        })?;
    Ok(Some(theta))
}

impl BenchArgs {
    /// The workload these flags describe.
    pub fn workload(&self) -> Workload {
        Workload {
            keys: self.keys,
            tables: self.tables,
            lookups: self.lookups,
            value_size: self.value_size,
            bits_per_key: self.bits_per_key,
            cold: self.cold,
            seed: self.seed,
            threads: self.threads,
            cache_mib: self.cache_mib,
            compression: self.compression.clone(),
            block_align: self.block_align,
            // Checked by `validate`; a bad one reads as uniform here.
            absent_skew: parse_absent_skew(&self.absent_skew).ok().flatten(),
            absent_warmup: self.absent_warmup,
            learned_bits_per_key: self.learned_bits_per_key,
        }
    }

    /// Checks the flags: counts above zero and within [`MAX_COUNT`], no more tables than
    /// keys, values within [`MAX_VALUE_SIZE`], sane bits per key; `--json`'s directory
    /// exists (it is not created).
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.keys == 0 || self.tables == 0 || self.lookups == 0 || self.threads == 0 {
            return Err(
                "--keys, --tables, --lookups and --threads must be greater than zero".into(),
            );
        }
        if !matches!(self.compression.as_str(), "none" | "lz4") {
            return Err(format!(
                "--compression must be none or lz4, got {:?}",
                self.compression
            )
            .into());
        }
        if !matches!(self.shape.as_str(), "flat" | "leveled" | "scale") {
            return Err(format!(
                "--shape must be flat, leveled or scale, got {:?}",
                self.shape
            )
            .into());
        }
        Allocation::parse_list(&self.allocation)?;
        FilterSetting::parse_list(&self.filters)?;
        parse_absent_skew(&self.absent_skew)?;
        if self.absent_warmup > MAX_COUNT {
            return Err(format!("--absent-warmup can be at most {MAX_COUNT}").into());
        }
        if !(0.0..=64.0).contains(&self.learned_bits_per_key) {
            return Err("--learned-bits-per-key must be in 0..=64".into());
        }
        crate::flags::shape_uses_every_flag(self)?;
        if self.keys > MAX_COUNT || self.lookups > MAX_COUNT {
            return Err(format!(
                "--keys and --lookups can be at most {MAX_COUNT} (the key lists are held in memory)"
            )
            .into());
        }
        if self.value_size > MAX_VALUE_SIZE {
            return Err(format!("--value-size can be at most {MAX_VALUE_SIZE}").into());
        }
        if let Some(path) = &self.json {
            if path.is_dir() {
                return Err(format!(
                    "--json {} is a directory; give a file name (e.g. {}/bench.json)",
                    path.display(),
                    path.display()
                )
                .into());
            }
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            if let Some(parent) = parent.filter(|p| !p.is_dir()) {
                return Err(format!(
                    "--json {}: directory {} does not exist",
                    path.display(),
                    parent.display()
                )
                .into());
            }
        }
        if self.threads as u64 > self.lookups {
            return Err(format!(
                "--threads ({}) cannot exceed --lookups ({}): each thread needs a share",
                self.threads, self.lookups
            )
            .into());
        }
        // The leveled shape's tables are compaction's, not `--tables`.
        if self.shape == "flat" && u64::from(self.tables) > self.keys {
            return Err("--tables cannot exceed --keys".into());
        }
        if self.range_scans > 0 && self.shape != "leveled" && self.keys < 3 {
            return Err(
                "--range-scans needs --keys of at least 3; give --range-scans 0 for fewer".into(),
            );
        }
        if self.range_scans > 0 {
            bloomkv_filter::RangeFilterBuilder::new(self.range_bits_per_key, self.range_max_len)
                .map_err(|e| format!("--range-bits-per-key / --range-max-len: {e}"))?;
        }
        // The store's own range (`Options::bits_per_key`): anything else would pass here
        // and fail only once the first store is built.
        if !(self.bits_per_key.is_finite() && (1.0..=100.0).contains(&self.bits_per_key)) {
            return Err(format!(
                "--bits-per-key must be in 1..=100, got {}",
                self.bits_per_key
            )
            .into());
        }
        if self.cache_mib > usize::MAX >> 20 {
            return Err(format!(
                "--cache-mib {} is more bytes than this machine can address",
                self.cache_mib
            )
            .into());
        }
        if self.multi_get > MAX_BATCH || (self.multi_get > 0 && self.shape != "flat") {
            return Err(format!(
                "--multi-get takes a batch of at most {MAX_BATCH} keys, on the flat shape"
            )
            .into());
        }
        if self.prefix_scans > 0 && self.shape != "leveled" && self.keys < PREFIX_GROUP {
            return Err(format!(
                "--prefix-scans needs --keys of at least {PREFIX_GROUP} (the keys go in \
                 groups of {PREFIX_GROUP} sharing a prefix); give --prefix-scans 0 for fewer"
            )
            .into());
        }
        Ok(())
    }
}

/// The most keys or lookups a run takes: the load order and each phase's keys are
/// lists in memory (8 and 19 bytes per entry).
pub const MAX_COUNT: u64 = 100_000_000;

/// The largest `--value-size` (the store's own limit is 64 MiB).
pub const MAX_VALUE_SIZE: usize = 1 << 20;

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub struct Bar(ProgressBar);

impl Bar {
    /// A bar that hides itself when stderr is not a terminal.
    pub fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        let style = ProgressStyle::with_template("{msg:>32} [{bar:30}] {pos}/{len} {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        Bar(bar)
    }
}

impl Default for Bar {
    fn default() -> Self {
        Bar::new()
    }
}

impl Progress for Bar {
    fn start(&self, message: &str, len: u64) {
        self.0.reset();
        self.0.set_length(len);
        self.0.set_position(0);
        self.0.set_message(message.to_string());
    }

    fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    fn finish(&self) {
        self.0.set_position(self.0.length().unwrap_or(0));
    }
}

/// Standard output for the run's printout. When its reader goes away (`bench ... |
/// head`), a run that writes `--json` files carries on without printing, so the files
/// it was asked for are still written; a run without them stops at the closed pipe.
struct Stdout {
    keep_going: bool,
    closed: bool,
}

impl Stdout {
    fn attempt<T>(
        &mut self,
        done: T,
        op: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        if self.closed {
            return Ok(done);
        }
        match op() {
            Err(e) if self.keep_going && e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(done)
            }
            r => r,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.attempt(buf.len(), || std::io::stdout().write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.attempt((), || std::io::stdout().flush())
    }
}

/// Runs the benchmark as `args` say; prints to stdout; returns the report.
pub fn run(args: &BenchArgs) -> Result<Report, BenchError> {
    args.validate()?;
    let w = args.workload();
    let work = WorkDir::new(args.dir.clone())?;
    let bar = Bar::new();
    let mut out = Stdout {
        keep_going: args.json.is_some(),
        closed: false,
    };
    if args.shape == "scale" {
        writeln!(
            out,
            "bloomkv at scale: {} keys ({}-byte keys, {}-byte values) in random order, the \
             store's default sizes, compaction on; {} bits/key, {} MiB block cache; {} absent \
             + {} present lookups on {} thread(s)",
            w.keys,
            crate::KEY_LEN,
            w.value_size,
            w.bits_per_key,
            w.cache_mib,
            w.lookups,
            w.lookups,
            w.threads
        )?;
    } else {
        writeln!(out, "bloomkv disk-I/O savings: {w}")?;
    }
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut leveled = Vec::new();
    let mut scale = Vec::new();
    let (mut prefix_rows, mut version_times) = (Vec::new(), None);
    if args.shape == "scale" {
        // This is the `bloomkv` executable: it runs the fresh processes too.
        let exe = std::env::current_exe().ok();
        scale = run_scale(&w, args.metadata_budget_bytes, exe.as_deref(), &work, &bar)?;
        bar.0.finish_and_clear();
        write!(out, "{}", print_scale(&scale))?;
    } else if args.shape == "leveled" {
        let allocations = Allocation::parse_list(&args.allocation)?;
        let settings = LeveledSettings {
            filter_budget_bytes: args.filter_budget_bytes,
            metadata_budget_bytes: args.metadata_budget_bytes,
            grow_after_warmup: args.grow_after_warmup,
        };
        leveled = run_leveled(&w, &allocations, settings, &work, &bar)?;
        bar.0.finish_and_clear();
        write!(out, "{}", print_leveled(&leveled))?;
        for r in &leveled {
            if let (Some(bytes), Some(_)) = (r.metadata_bytes, r.metadata_budget_bytes) {
                writeln!(
                    out,
                    "metadata {}: {bytes} bytes held (budget {}), reads per get: absent {:.4}, present {:.4}",
                    r.allocation,
                    r.metadata_budget_bytes.unwrap_or(0),
                    r.absent_reads_per_lookup,
                    r.present_reads_per_lookup
                )?;
            }
        }
    } else {
        for setting in FilterSetting::parse_list(&args.filters)? {
            let dir = work.store_dir(&setting.name().replace(' ', "-"))?;
            let mut store = BloomkvStore::create_with(
                dir,
                setting,
                w.bits_per_key,
                w.cache_mib << 20,
                &w.compression,
                w.block_align,
            )?;
            store.set_learned_memory(w.learned_memory());
            store.set_metadata_budget(args.metadata_budget_bytes)?;
            let first = rows.len();
            if args.multi_get > 0 {
                rows.extend(run_store_batched(&mut store, &w, args.multi_get, &bar)?);
            } else {
                rows.extend(run_store(&mut store, &w, &bar)?);
            }
            for row in &mut rows[first..] {
                row.metadata_budget_bytes = args.metadata_budget_bytes.map(|b| b as u64);
            }
        }
        compare_to_baseline(&mut rows, FilterSetting::None.name());
        bar.0.finish_and_clear();
        write!(out, "{}", print_table(&rows))?;
        write!(out, "{}", crate::print_learning(&rows))?;
        write!(out, "{}", print_disk_bytes(&rows, &w))?;
        for r in rows.iter().filter(|r| r.metadata_budget_bytes.is_some()) {
            writeln!(
                out,
                "metadata {} {:?}: {} bytes held (budget {}), {:.4} reads per lookup",
                r.filter,
                r.phase,
                r.metadata_bytes.unwrap_or(0),
                r.metadata_budget_bytes.unwrap_or(0),
                r.reads_per_lookup
            )?;
        }
        check_lookups(&rows)?;
        for line in os_read_disagreements(&rows) {
            writeln!(out, "{line}")?;
        }
        if args.prefix_scans > 0 {
            (prefix_rows, version_times) = run_prefix_phases(&w, &work, args.prefix_scans, &bar)?;
            bar.0.finish_and_clear();
            write!(
                out,
                "{}",
                print_prefix_table(&prefix_rows, version_times.as_ref())
            )?;
        }
        if args.range_scans > 0 {
            let range = bloomkv_kv::RangeFilterOptions {
                bits_per_key: args.range_bits_per_key,
                max_range_len: args.range_max_len,
            };
            let range_rows = run_range_phases(&w, &work, args.range_scans, range, &bar)?;
            let times = time_range_filter(&w, range, args.range_scans.max(100_000))?;
            bar.0.finish_and_clear();
            write!(out, "{}", print_range_table(&range_rows, Some(&times)))?;
            if let Some(path) = &args.json {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("bench");
                let range_json = path.with_file_name(format!("{stem}-range.json"));
                let provenance = crate::Provenance::here();
                let both = serde_json::json!({
                    "commit": provenance.commit,
                    "clean": provenance.clean,
                    "rows": range_rows,
                    "filter_times": times,
                });
                std::fs::write(&range_json, serde_json::to_string_pretty(&both)?)?;
                let range_svg = range_json.with_extension("svg");
                std::fs::write(&range_svg, render_range_svg(&range_rows))?;
                writeln!(
                    out,
                    "wrote {} and {}",
                    range_json.display(),
                    range_svg.display()
                )?;
            }
        }
    }

    let (bits_sweep, probe_sweep) = if args.sweep {
        (sweep_bits(&w, &work, &bar)?, sweep_probes(&w, &bar)?)
    } else {
        (Vec::new(), Vec::new())
    };
    bar.0.finish_and_clear();
    if args.sweep {
        write!(out, "{}", print_sweep(&bits_sweep, &probe_sweep))?;
    }
    let report = Report {
        provenance: crate::Provenance::here(),
        machine: Machine::here(),
        workload: w,
        rows,
        bits_sweep,
        probe_sweep,
        leveled,
        scale,
        prefix_rows,
        version_times,
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        if report.rows.is_empty() {
            writeln!(out, "wrote {}", path.display())?;
        } else {
            let svg = path.with_extension("svg");
            // The chart shows the single-get rows; the batched ones are in the table.
            let single: Vec<_> = report
                .rows
                .iter()
                .filter(|r| r.batch == 1)
                .cloned()
                .collect();
            std::fs::write(&svg, render_savings_svg(&single))?;
            writeln!(out, "wrote {} and {}", path.display(), svg.display())?;
        }
        if !report.leveled.is_empty() {
            // The leveled shape alone: its chart is the JSON's own `.svg`.
            let leveled_svg = if report.rows.is_empty() {
                path.with_extension("svg")
            } else {
                path.with_file_name(format!(
                    "{}-leveled.svg",
                    path.file_stem().and_then(|s| s.to_str()).unwrap_or("bench")
                ))
            };
            std::fs::write(&leveled_svg, render_leveled_svg(&report.leveled))?;
            writeln!(out, "wrote {}", leveled_svg.display())?;
        }
        if args.sweep {
            let sweep_svg = path.with_file_name(format!(
                "{}-sweep.svg",
                path.file_stem().and_then(|s| s.to_str()).unwrap_or("bench")
            ));
            std::fs::write(
                &sweep_svg,
                render_sweep_svg(&report.bits_sweep, &report.probe_sweep),
            )?;
            writeln!(out, "wrote {}", sweep_svg.display())?;
        }
    }
    writeln!(out, "done in {:.1} s", started.elapsed().as_secs_f64())?;
    Ok(report)
}

/// One line: each store's table bytes on disk, against the raw size of what was
/// loaded (keys and values, no overhead).
pub fn print_disk_bytes(rows: &[super::Row], w: &Workload) -> String {
    let raw = w.keys * (super::KEY_LEN + w.value_size) as u64;
    let mut parts = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.phase == super::Phase::Absent && r.batch == 1)
    {
        if let Some(bytes) = r.table_bytes {
            parts.push(format!(
                "{} {:.1} MiB ({:.2}×)",
                r.filter,
                bytes as f64 / (1 << 20) as f64,
                bytes as f64 / raw.max(1) as f64
            ));
        }
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "table bytes on disk ({} compression; keys + values loaded: {:.1} MiB): {}\n",
        w.compression,
        raw as f64 / (1 << 20) as f64,
        parts.join(", ")
    )
}

/// A present key not found is a false negative: the one thing a filter must never do
/// (and an absent key found means a store was set up wrong). Either fails the run.
pub fn check_lookups(rows: &[super::Row]) -> Result<(), BenchError> {
    for r in rows {
        let want = match r.phase {
            Phase::Absent => 0,
            Phase::Present => r.lookups,
        };
        if r.found != want {
            return Err(format!(
                "{} {}: found {} of {} lookups, expected {want}",
                r.filter,
                r.phase.name(),
                r.found,
                r.lookups
            )
            .into());
        }
    }
    Ok(())
}

/// A warning for each row whose read syscalls, as the OS counted them, differ from
/// the store's own count of table reads (the run's cross-check; on Linux with the
/// flat shape they agree to the read, and `.ci/run` reports any line this prints).
pub fn os_read_disagreements(rows: &[super::Row]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let os = r.os_read_syscalls?;
            let syscalls = r.data_block_reads - r.uring_reads.unwrap_or(0);
            (os != syscalls).then(|| {
                format!(
                    "warning: {} {}: the OS counted {os} read syscalls, the store {} table reads",
                    r.filter,
                    r.phase.name(),
                    r.data_block_reads
                )
            })
        })
        .collect()
}

/// Absent-key lookups through the store at bits_per_key 1..=20, both layouts.
fn sweep_bits(w: &Workload, work: &WorkDir, bar: &Bar) -> Result<Vec<SweepPoint>, BenchError> {
    let mut points = Vec::new();
    for setting in [
        FilterSetting::Standard,
        FilterSetting::CacheLocal,
        FilterSetting::Ribbon,
    ] {
        for bpk in 1..=20 {
            let mut wb = w.clone();
            wb.bits_per_key = f64::from(bpk);
            let dir = work.store_dir("sweep")?;
            // The run's cache, compression and block layout, as the main rows have.
            let mut store = BloomkvStore::create_with(
                dir,
                setting,
                wb.bits_per_key,
                wb.cache_mib << 20,
                &wb.compression,
                wb.block_align,
            )?;
            load(&mut store, &wb, bar)?;
            let shape = store.filter_shape();
            let r = run_phase(&store, &wb, Phase::Absent, bar)?;
            let c = r.counters;
            let fp = c.filter_positives.unwrap_or(0) - c.filter_true_positives.unwrap_or(0);
            let checks = fp + c.filter_negatives.unwrap_or(0);
            points.push(SweepPoint {
                layout: layout_name(setting).into(),
                bits_per_key: wb.bits_per_key,
                probes: shape.probes,
                observed_fp: fp as f64 / checks.max(1) as f64,
                formula_fp: shape.formula_fp,
                reads_per_lookup: Some(
                    c.data_block_reads.unwrap_or(0) as f64 / r.lookups.max(1) as f64,
                ),
                ns_per_lookup: r.nanos as f64 / r.lookups.max(1) as f64,
            });
            drop(store);
        }
    }
    Ok(points)
}

fn layout_name(setting: FilterSetting) -> &'static str {
    match setting {
        FilterSetting::CacheLocal => "cache-local",
        FilterSetting::Ribbon => "ribbon",
        _ => "standard",
    }
}

/// The source article's experiment: probe count k at fixed bits per key, one filter of
/// `keys` keys per layout and k, FP and time of absent-key queries (hashing included).
fn sweep_probes(w: &Workload, bar: &Bar) -> Result<Vec<SweepPoint>, BenchError> {
    let absent = lookup_keys(w, Phase::Absent);
    let mut points = Vec::new();
    for layout in [BloomLayout::Standard, BloomLayout::CacheLocal] {
        for k in 1..=14 {
            let policy = BloomPolicy::with_layout(w.bits_per_key, layout)?.with_num_probes(k)?;
            let mut builder = policy.new_builder();
            bar.start(&format!("probe sweep {} k={k}", layout.name()), w.keys);
            for i in 0..w.keys {
                builder.add_key(&key(2 * i));
            }
            let reader = policy.open_reader(&builder.finish())?;
            let info = reader.info();
            // FP over the workload's absent keys; time over at least a million queries
            // (the same keys again), so a run of 20,000 lookups still times well.
            let positives: u64 = absent
                .iter()
                .map(|k| u64::from(reader.may_contain_hash(KeyHash::of(k))))
                .sum();
            let rounds = 1_000_000usize.div_ceil(absent.len().max(1));
            let started = Instant::now();
            let mut sink = 0u64;
            for _ in 0..rounds {
                for k in &absent {
                    sink +=
                        u64::from(reader.may_contain_hash(KeyHash::of(std::hint::black_box(k))));
                }
            }
            let nanos = started.elapsed().as_nanos() / rounds as u128;
            std::hint::black_box(sink);
            bar.finish();
            points.push(SweepPoint {
                layout: layout.name().into(),
                bits_per_key: w.bits_per_key,
                probes: k,
                observed_fp: positives as f64 / absent.len().max(1) as f64,
                formula_fp: info.estimated_fp_rate,
                reads_per_lookup: None,
                ns_per_lookup: nanos as f64 / absent.len().max(1) as f64,
            });
        }
    }
    Ok(points)
}

fn print_sweep(bits: &[SweepPoint], probes: &[SweepPoint]) -> String {
    let mut out = String::from("\nbits-per-key sweep (absent keys, through the store)\n");
    out.push_str("layout        bits/key  k   FP observed  FP formula  reads/lookup  ns/lookup\n");
    for p in bits {
        out.push_str(&format!(
            "{:<12}  {:>8}  {:>2}  {:>10.4}%  {:>9.4}%  {:>12.4}  {:>9.0}\n",
            p.layout,
            p.bits_per_key,
            p.probes,
            p.observed_fp * 100.0,
            p.formula_fp * 100.0,
            p.reads_per_lookup.unwrap_or(0.0),
            p.ns_per_lookup
        ));
    }
    out.push_str("\nprobe sweep (filter alone, absent keys, hashing included)\n");
    out.push_str("layout        bits/key   k  FP observed  FP formula  ns/query\n");
    for p in probes {
        out.push_str(&format!(
            "{:<12}  {:>8}  {:>2}  {:>10.4}%  {:>9.4}%  {:>8.1}\n",
            p.layout,
            p.bits_per_key,
            p.probes,
            p.observed_fp * 100.0,
            p.formula_fp * 100.0,
            p.ns_per_lookup
        ));
    }
    out
}

/// Runs the whole workload (load, reopen, both phases) on each of `stores` in turn and
/// fills `reads_avoided_pct` against the rows labelled `baseline`: how a program that
/// brings its own [`BenchStore`]s (bloomkv-peers) gets rows comparable to `bench`'s.
pub fn run_stores(
    stores: &mut [Box<dyn BenchStore>],
    w: &Workload,
    baseline: &str,
) -> Result<Vec<super::Row>, BenchError> {
    let bar = Bar::new();
    let mut rows = Vec::new();
    for store in stores.iter_mut() {
        rows.extend(run_store(store.as_mut(), w, &bar)?);
    }
    bar.0.finish_and_clear();
    compare_to_baseline(&mut rows, baseline);
    Ok(rows)
}
