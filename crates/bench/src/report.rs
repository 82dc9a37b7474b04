//! The benchmark's results: one row per (filter, phase), a printed table, and JSON.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{FilterShape, LearnedFigures, Phase, PhaseResult, Workload};

/// One (filter, phase) measurement: every figure the table and the JSON show.
/// Read back from a result file to redraw its chart (`examples/redraw_chart.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Store and filter.
    pub filter: String,
    /// Which keys were looked up.
    pub phase: Phase,
    /// Lookups made.
    pub lookups: u64,
    /// Lookups that found their key.
    pub found: u64,
    /// Tables whose key range covered a lookup.
    pub table_probes: Option<u64>,
    /// Filter said "absent": table reads avoided.
    pub filter_negatives: Option<u64>,
    /// Filter said "maybe".
    pub filter_positives: Option<u64>,
    /// Reads of table files during the phase (the store's count).
    pub data_block_reads: u64,
    /// `data_block_reads / lookups`.
    pub reads_per_lookup: f64,
    /// Reads avoided relative to the no-filter store in the same phase, in %.
    pub reads_avoided_pct: Option<f64>,
    /// False positives / filter checks of keys the table did not hold.
    pub observed_fp: Option<f64>,
    /// The formula's rate for the tables' actual bits, keys and probes.
    pub formula_fp: Option<f64>,
    /// Wall-clock nanoseconds per lookup.
    pub ns_per_lookup: f64,
    /// Filter bits in memory per key.
    pub filter_bits_per_key: f64,
    /// Filter memory in MiB.
    pub filter_mib: f64,
    /// Probes per key.
    pub filter_probes: u32,
    /// The OS's read syscalls during the phase (`/proc/self/io` syscr).
    pub os_read_syscalls: Option<u64>,
    /// Bytes the OS fetched from the device during the phase.
    pub os_read_bytes: Option<u64>,
    /// Reads the machine's disks completed during the phase (machine-wide,
    /// `/proc/diskstats`; absent from files written before it was recorded).
    #[serde(default)]
    pub os_device_reads: Option<u64>,
    /// Threads that ran the phase at once.
    pub threads: usize,
    /// Lookups per second of wall-clock time, all threads together.
    pub lookups_per_sec: f64,
    /// Data blocks served from the block cache during the phase (bloomkv only).
    pub block_cache_hits: Option<u64>,
    /// Bytes of the store's table files on disk (where the store can tell; absent
    /// from files written before it was recorded).
    #[serde(default)]
    pub table_bytes: Option<u64>,
    /// Keys per lookup call: 1 for `get`, N for the `--multi-get N` rows (whose
    /// figures are per key all the same).
    #[serde(default = "one")]
    pub batch: usize,
    /// Milliseconds of the reopen before the phase's lookups (the store opening its
    /// tables from disk), where measured.
    #[serde(default)]
    pub open_ms: Option<f64>,
    /// Of `data_block_reads`, those made through io_uring: not read syscalls, so the
    /// OS's count is `data_block_reads - uring_reads` (batched rows of a build with
    /// bloomkv's `io-uring` feature; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uring_reads: Option<u64>,
    /// How the phase's keys were drawn: `"uniform"`, or `"zipf:THETA"` for absent keys
    /// drawn with `--absent-skew` (files written before it say nothing: uniform).
    #[serde(default = "uniform")]
    pub absent_skew: String,
    /// Absent lookups made, unmeasured, before the phase (`--absent-warmup`).
    #[serde(default)]
    pub absent_warmup: u64,
    /// Bytes of learned negatives the store held after the phase (bloomkv with
    /// `--learned-bits-per-key`), apart from the filters' `filter_mib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_bytes: Option<u64>,
    /// `learned_bytes` in bits per loaded key, beside `filter_bits_per_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_bits_per_key: Option<f64>,
    /// Data-block reads learned negatives skipped during the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_skips: Option<u64>,
    /// Bytes of index and filter the store held after the phase
    /// (`DbStats::metadata_bytes`; bloomkv only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_bytes: Option<u64>,
    /// `Options::metadata_budget` of the store (`--metadata-budget-bytes`), if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_budget_bytes: Option<u64>,
}

fn one() -> usize {
    1
}

fn uniform() -> String {
    "uniform".into()
}

impl Row {
    /// Builds a row from a phase's measurements.
    pub fn new(label: &str, phase: Phase, r: &PhaseResult, shape: &FilterShape, keys: u64) -> Row {
        let c = &r.counters;
        let reads = c.data_block_reads.or(r.os.map(|o| o.syscalls)).unwrap_or(0);
        let has_filter = shape.bits > 0;
        let observed_fp = match (
            c.filter_positives,
            c.filter_true_positives,
            c.filter_negatives,
        ) {
            (Some(p), Some(tp), Some(n)) if has_filter => {
                let fp = p.saturating_sub(tp);
                (fp + n > 0).then(|| fp as f64 / (fp + n) as f64)
            }
            _ => None,
        };
        Row {
            filter: label.to_string(),
            phase,
            lookups: r.lookups,
            found: r.found,
            table_probes: c.table_probes,
            filter_negatives: c.filter_negatives.filter(|_| has_filter),
            filter_positives: c.filter_positives.filter(|_| has_filter),
            data_block_reads: reads,
            reads_per_lookup: reads as f64 / r.lookups.max(1) as f64,
            reads_avoided_pct: None,
            observed_fp,
            formula_fp: has_filter.then_some(shape.formula_fp),
            ns_per_lookup: r.nanos as f64 / r.lookups.max(1) as f64,
            filter_bits_per_key: shape.bits as f64 / keys.max(1) as f64,
            filter_mib: shape.bits as f64 / 8.0 / (1024.0 * 1024.0),
            filter_probes: shape.probes,
            os_read_syscalls: r.os.map(|o| o.syscalls),
            os_read_bytes: r.os.map(|o| o.device_bytes),
            os_device_reads: r.os.and_then(|o| o.device_reads),
            threads: r.threads,
            lookups_per_sec: r.lookups as f64 / (r.nanos.max(1) as f64 / 1e9),
            block_cache_hits: c.block_cache_hits,
            table_bytes: None,
            batch: 1,
            open_ms: None,
            uring_reads: None,
            absent_skew: uniform(),
            absent_warmup: 0,
            learned_bytes: None,
            learned_bits_per_key: None,
            learned_skips: None,
            metadata_bytes: None,
            metadata_budget_bytes: None,
        }
    }

    /// Records how the phase's keys were drawn (`w`'s absent skew and warm-up, for an
    /// absent row) and the store's learned negatives before and after it.
    pub fn record_learning(
        &mut self,
        w: &Workload,
        before: Option<LearnedFigures>,
        after: Option<LearnedFigures>,
    ) {
        if self.phase == Phase::Absent {
            self.absent_skew = w.absent_skew_name();
            self.absent_warmup = w.absent_warmup;
        }
        if let (Some(before), Some(after)) = (before, after) {
            if after.bytes > 0 {
                self.learned_bytes = Some(after.bytes);
                self.learned_bits_per_key = Some(after.bytes as f64 * 8.0 / w.keys.max(1) as f64);
                self.learned_skips = Some(after.skips.saturating_sub(before.skips));
            }
        }
    }
}

/// One point of a sweep over bits per key or probes.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// `"standard"` or `"cache-local"`.
    pub layout: String,
    /// Filter bits per key.
    pub bits_per_key: f64,
    /// Probes per key.
    pub probes: u32,
    /// Measured false-positive rate.
    pub observed_fp: f64,
    /// The formula's rate.
    pub formula_fp: f64,
    /// Table reads per absent lookup (store sweep), or `None` (filter-only sweep).
    pub reads_per_lookup: Option<f64>,
    /// Nanoseconds per absent lookup.
    pub ns_per_lookup: f64,
}

/// Everything a run measured, with the machine and parameters: the `--json` file.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The commit measured and whether the tree was clean (`null` without git).
    #[serde(flatten)]
    pub provenance: super::Provenance,
    /// What ran and where.
    pub machine: Machine,
    /// The workload's parameters.
    pub workload: Workload,
    /// One record per (filter, phase).
    pub rows: Vec<Row>,
    /// bits_per_key 1..=20 for both layouts (with `--sweep`).
    pub bits_sweep: Vec<SweepPoint>,
    /// Probe count sweep at the workload's bits per key (with `--sweep`).
    pub probe_sweep: Vec<SweepPoint>,
    /// The leveled shape's runs, one per allocation (with `--shape leveled`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leveled: Vec<super::LeveledRow>,
    /// The scale shape's two stores, default and budgeted (with `--shape scale`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scale: Vec<super::ScaleRow>,
    /// Prefix-scan phases (empty with `--prefix-scans 0`).
    pub prefix_rows: Vec<super::PrefixRow>,
    /// Gets with a snapshot held and full scans both ways (with the prefix phases).
    pub version_times: Option<super::VersionTimes>,
}

/// The machine a report was measured on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Operating system.
    pub os: &'static str,
    /// CPU architecture.
    pub arch: &'static str,
    /// Logical CPUs.
    pub cpus: usize,
    /// CPU model, where the OS says.
    pub cpu_model: Option<String>,
    /// bloomkv's version.
    pub bloomkv_version: &'static str,
}

impl Machine {
    /// Describes this machine.
    pub fn here() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        });
        Machine {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            cpu_model,
            bloomkv_version: env!("CARGO_PKG_VERSION"),
        }
    }
}

fn opt_u(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into())
}

fn pct(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{:.*}%", digits, v * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// Renders the results as an aligned text table.
/// The absent rows' skew and learned negatives, one line each (nothing when every
/// row is uniform and learned nothing).
pub fn print_learning(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows.iter().filter(|r| r.phase == Phase::Absent) {
        if r.absent_skew == "uniform" && r.learned_bytes.is_none() {
            continue;
        }
        let _ = writeln!(
            out,
            "{} (batch {}): absent keys {} after {} warm-up lookups; {:.6} reads/lookup; \
             learned negatives {} bytes ({:.3} bits/key), {} reads skipped",
            r.filter,
            r.batch,
            r.absent_skew,
            r.absent_warmup,
            r.reads_per_lookup,
            r.learned_bytes.unwrap_or(0),
            r.learned_bits_per_key.unwrap_or(0.0),
            r.learned_skips.unwrap_or(0),
        );
    }
    out
}

pub fn print_table(rows: &[Row]) -> String {
    let header = [
        "filter",
        "phase",
        "batch",
        "lookups",
        "found",
        "probes",
        "avoided",
        "reads",
        "cache hits",
        "reads/lkp",
        "avoided%",
        "FP obs",
        "FP formula",
        "ns/lkp",
        "bits/key",
        "MiB",
        "OS syscr",
        "dev KiB/lkp",
        "dev reads/lkp",
        "threads",
        "lkp/s",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        cells.push(vec![
            r.filter.clone(),
            r.phase.name().to_string(),
            r.batch.to_string(),
            r.lookups.to_string(),
            r.found.to_string(),
            opt_u(r.table_probes),
            r.filter_negatives
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            r.data_block_reads.to_string(),
            opt_u(r.block_cache_hits),
            format!("{:.4}", r.reads_per_lookup),
            r.reads_avoided_pct
                .map(|v| format!("{v:.2}%"))
                .unwrap_or_else(|| "-".into()),
            pct(r.observed_fp, 3),
            pct(r.formula_fp, 3),
            format!("{:.0}", r.ns_per_lookup),
            format!("{:.2}", r.filter_bits_per_key),
            format!("{:.2}", r.filter_mib),
            opt_u(r.os_read_syscalls),
            r.os_read_bytes
                .map(|b| format!("{:.2}", b as f64 / r.lookups.max(1) as f64 / 1024.0))
                .unwrap_or_else(|| "-".into()),
            r.os_device_reads
                .map(|d| format!("{:.4}", d as f64 / r.lookups.max(1) as f64))
                .unwrap_or_else(|| "-".into()),
            r.threads.to_string(),
            format!("{:.0}", r.lookups_per_sec),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| cells.iter().map(|row| row[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            if c < 2 {
                let _ = write!(out, "{:<w$}  ", cell, w = widths[c]);
            } else {
                let _ = write!(out, "{:>w$}  ", cell, w = widths[c]);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}
