//! The suite's rows, their medians over runs, the tables it prints and the JSON it
//! writes.
//!
//! A row is one workload on one store at one setting in one run:
//!
//! ```text
//! {store, setting, workload, records, threads, seconds, ops_per_sec,
//!  read_p50_us, read_p99_us, read_p999_us, update_p99_us, max_us, ops, kinds: [...]}
//! ```
//!
//! `read_*` are over every get (present and, in X, absent keys), `null` where the
//! workload has none (E); `update_p99_us` over updates and inserts, `null` where there
//! are none (C, and F, whose writes are inside its read-modify-writes: see `kinds`);
//! `max_us` the slowest operation of any kind. `kinds` gives count, p50, p99, p99.9
//! and max per operation kind, and `all` over every operation. The summary row of a
//! store and workload holds the median of its runs for every field but `max_us`,
//! which is the largest of any run, with ops/s's spread beside it.

use serde::Serialize;

use super::runner::{Latencies, LoadResult, WorkloadResult};
use super::stores::Setting;
use super::workload::{Op, OP_KINDS};
use crate::plan::Spread;

/// Latency of one kind of operation, in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KindLatency {
    /// `read`, `read_absent`, `update`, `insert`, `scan`, `rmw` or `all`.
    pub kind: String,
    /// Operations of this kind.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Slowest.
    pub max_us: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl KindLatency {
    fn of(kind: &str, h: &Latencies) -> KindLatency {
        KindLatency {
            kind: kind.into(),
            count: h.len(),
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// One workload on one store at one setting: a run's, or the median of the runs.
#[derive(Debug, Clone, Serialize)]
pub struct YcsbRow {
    /// `bloomkv`, `fjall`, `redb`, `rocksdb`.
    pub store: String,
    /// `defaults` or `equal`.
    pub setting: String,
    /// `a` … `f`, `x`.
    pub workload: String,
    /// Records loaded.
    pub records: u64,
    /// Threads.
    pub threads: usize,
    /// Wall seconds the workload ran.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Gets' median, µs.
    pub read_p50_us: Option<f64>,
    /// Gets' 99th percentile, µs.
    pub read_p99_us: Option<f64>,
    /// Gets' 99.9th percentile, µs.
    pub read_p999_us: Option<f64>,
    /// Updates' and inserts' 99th percentile, µs.
    pub update_p99_us: Option<f64>,
    /// The slowest operation, µs.
    pub max_us: f64,
    /// Operations done.
    pub ops: u64,
    /// Reads checked against the write log.
    pub reads_verified: usize,
    /// Latency per kind of operation (kinds with operations), then `all`.
    pub kinds: Vec<KindLatency>,
    /// The run (per-run rows) or `None` (summary rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<usize>,
    /// ops/s over the runs (summary rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_per_sec_spread: Option<Spread>,
}

impl YcsbRow {
    /// The row of one run's result.
    pub fn of(
        store: &str,
        setting: Setting,
        records: u64,
        threads: usize,
        run: usize,
        r: &WorkloadResult,
    ) -> YcsbRow {
        let merged = |kinds: &[Op]| -> Option<Latencies> {
            let mut h = super::runner::new_histogram();
            for k in kinds {
                // Histograms of equal bounds always add.
                h.add(&r.latencies[k.index()]).ok()?;
            }
            (!h.is_empty()).then_some(h)
        };
        let reads = merged(&[Op::Read, Op::ReadAbsent]);
        let writes = merged(&[Op::Update, Op::Insert]);
        let all = merged(&OP_KINDS);
        let mut kinds: Vec<KindLatency> = OP_KINDS
            .iter()
            .filter(|k| r.count(**k) > 0)
            .map(|k| KindLatency::of(k.name(), &r.latencies[k.index()]))
            .collect();
        if let Some(all) = &all {
            kinds.push(KindLatency::of("all", all));
        }
        YcsbRow {
            store: store.into(),
            setting: setting.name().into(),
            workload: r.workload.to_string(),
            records,
            threads,
            seconds: r.seconds,
            ops_per_sec: r.ops_per_sec(),
            read_p50_us: reads.as_ref().map(|h| us(h.value_at_quantile(0.5))),
            read_p99_us: reads.as_ref().map(|h| us(h.value_at_quantile(0.99))),
            read_p999_us: reads.as_ref().map(|h| us(h.value_at_quantile(0.999))),
            update_p99_us: writes.as_ref().map(|h| us(h.value_at_quantile(0.99))),
            max_us: all.as_ref().map(|h| us(h.max())).unwrap_or(0.0),
            ops: r.ops,
            reads_verified: r.reads_verified,
            kinds,
            run: Some(run),
            ops_per_sec_spread: None,
        }
    }

    /// The row's key: store, setting, workload.
    pub fn unit(&self) -> (&str, &str, &str) {
        (&self.store, &self.setting, &self.workload)
    }
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.collect();
    Spread::of(&v).map(|s| s.median)
}

fn median_opt(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Option<Vec<f64>> = values.collect();
    v.and_then(|v| median(v.into_iter()))
}

/// The summary of runs of one unit: medians, the largest max, ops/s's spread.
/// `None` for no runs.
pub fn summarize(runs: &[&YcsbRow]) -> Option<YcsbRow> {
    let first = runs.first()?;
    let ops_per_sec = Spread::of(&runs.iter().map(|r| r.ops_per_sec).collect::<Vec<_>>())?;
    let kinds = first
        .kinds
        .iter()
        .map(|k| {
            let same = || {
                runs.iter()
                    .filter_map(move |r| r.kinds.iter().find(|x| x.kind == k.kind))
            };
            KindLatency {
                kind: k.kind.clone(),
                count: median(same().map(|x| x.count as f64)).unwrap_or(0.0) as u64,
                p50_us: median(same().map(|x| x.p50_us)).unwrap_or(0.0),
                p99_us: median(same().map(|x| x.p99_us)).unwrap_or(0.0),
                p999_us: median(same().map(|x| x.p999_us)).unwrap_or(0.0),
                max_us: same().map(|x| x.max_us).fold(0.0, f64::max),
            }
        })
        .collect();
    Some(YcsbRow {
        store: first.store.clone(),
        setting: first.setting.clone(),
        workload: first.workload.clone(),
        records: first.records,
        threads: first.threads,
        seconds: median(runs.iter().map(|r| r.seconds))?,
        ops_per_sec: ops_per_sec.median,
        read_p50_us: median_opt(runs.iter().map(|r| r.read_p50_us)),
        read_p99_us: median_opt(runs.iter().map(|r| r.read_p99_us)),
        read_p999_us: median_opt(runs.iter().map(|r| r.read_p999_us)),
        update_p99_us: median_opt(runs.iter().map(|r| r.update_p99_us)),
        max_us: runs.iter().map(|r| r.max_us).fold(0.0, f64::max),
        ops: median(runs.iter().map(|r| r.ops as f64))? as u64,
        reads_verified: runs.iter().map(|r| r.reads_verified).sum(),
        kinds,
        run: None,
        ops_per_sec_spread: Some(ops_per_sec),
    })
}

/// One load phase.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRow {
    /// The store.
    pub store: String,
    /// Its setting.
    pub setting: String,
    /// The run (per-run rows) or `None` (summary rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<usize>,
    /// Records written.
    pub records: u64,
    /// Wall seconds (median over runs in a summary).
    pub seconds: f64,
    /// Records per second (median over runs in a summary).
    pub ops_per_sec: f64,
    /// Records per second over the runs (summary rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_per_sec_spread: Option<Spread>,
}

impl LoadRow {
    /// The row of one load.
    pub fn of(store: &str, setting: Setting, run: usize, l: &LoadResult) -> LoadRow {
        LoadRow {
            store: store.into(),
            setting: setting.name().into(),
            run: Some(run),
            records: l.records,
            seconds: l.seconds,
            ops_per_sec: l.ops_per_sec,
            ops_per_sec_spread: None,
        }
    }

    /// The summary of several loads of one store and setting.
    pub fn summarize(runs: &[&LoadRow]) -> Option<LoadRow> {
        let first = runs.first()?;
        let spread = Spread::of(&runs.iter().map(|r| r.ops_per_sec).collect::<Vec<_>>())?;
        Some(LoadRow {
            store: first.store.clone(),
            setting: first.setting.clone(),
            run: None,
            records: first.records,
            seconds: median(runs.iter().map(|r| r.seconds))?,
            ops_per_sec: spread.median,
            ops_per_sec_spread: Some(spread),
        })
    }
}

/// A ratio of one row's ops/s to another store's at the same setting and workload,
/// over the runs: `row / versus` per run, then the median and a 95% interval.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ratio {
    /// `store setting` of the numerator, e.g. `bloomkv equal`.
    pub row: String,
    /// The denominator's store.
    pub versus: String,
    /// The workload (`load` for the load phase).
    pub phase: String,
    /// The median of the per-run ratios.
    pub median: f64,
    /// A 95% interval for the ratio: Student's t over the logs of the per-run
    /// ratios; `None` with fewer than two runs.
    pub ci95: Option<[f64; 2]>,
    /// Runs that gave a ratio.
    pub runs: usize,
}

/// Two-sided 97.5% Student t quantiles for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The ratio summary of per-run ratios (positive, finite ones kept).
pub fn ratio_of(row: &str, versus: &str, phase: &str, per_run: &[f64]) -> Option<Ratio> {
    let r: Vec<f64> = per_run
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    let med = Spread::of(&r)?.median;
    let ci95 = (r.len() >= 2).then(|| {
        let logs: Vec<f64> = r.iter().map(|x| x.ln()).collect();
        let n = logs.len() as f64;
        let mean = logs.iter().sum::<f64>() / n;
        let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let t = T975[(r.len() - 2).min(T975.len() - 1)];
        let half = t * (var / n).sqrt();
        [(mean - half).exp(), (mean + half).exp()]
    });
    Some(Ratio {
        row: row.into(),
        versus: versus.into(),
        phase: phase.into(),
        median: med,
        ci95,
        runs: r.len(),
    })
}

/// Each store's settings, as the report states them.
#[derive(Debug, Clone, Serialize)]
pub struct SettingRow {
    /// The store.
    pub store: String,
    /// `defaults` or `equal`.
    pub setting: String,
    /// How it is set, in words.
    pub how: String,
}

/// The whole report `--json` writes.
#[derive(Debug, Clone, Serialize)]
pub struct YcsbReport {
    /// The command line.
    pub command: String,
    /// Machine and commit.
    pub environment: crate::environment::Environment,
    /// Records loaded per store.
    pub records: u64,
    /// Threads.
    pub threads: usize,
    /// Seconds per workload, as asked.
    pub seconds: f64,
    /// Runs.
    pub runs: usize,
    /// Value bytes (YCSB data).
    pub value_size: usize,
    /// The records: `ycsb` or `tpch`.
    pub data: String,
    /// How every store is set.
    pub settings: Vec<SettingRow>,
    /// Load phases: medians.
    pub load: Vec<LoadRow>,
    /// Workloads: medians (`max_us`: the largest).
    pub rows: Vec<YcsbRow>,
    /// ops/s ratios of bloomkv to each other store, per setting and phase.
    pub ratios: Vec<Ratio>,
    /// Every run's rows, in the order they ran.
    pub run_rows: Vec<YcsbRow>,
    /// Every run's loads.
    pub run_loads: Vec<LoadRow>,
}

fn fmt_us(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if v >= 1000.0 => format!("{:.1} ms", v / 1000.0),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

fn fmt_ops(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0} k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

/// The tables: per setting, a row per workload and store.
pub fn print_tables(rows: &[YcsbRow], loads: &[LoadRow], runs: usize) -> String {
    let mut out = String::new();
    let mut settings: Vec<&str> = rows.iter().map(|r| r.setting.as_str()).collect();
    settings.dedup();
    settings.sort_unstable();
    settings.dedup();
    for setting in settings {
        out.push_str(&format!(
            "\n{setting} settings, median of {runs} run(s) (ops/s range in brackets; max: the slowest of any run)\n\n"
        ));
        out.push_str("| workload | store | ops/s | read p50 µs | read p99 | read p99.9 | update p99 | max |\n");
        out.push_str("|---|---|---:|---:|---:|---:|---:|---:|\n");
        for l in loads.iter().filter(|l| l.setting == setting) {
            let (lo, hi) = l
                .ops_per_sec_spread
                .map(|s| (s.min, s.max))
                .unwrap_or((l.ops_per_sec, l.ops_per_sec));
            out.push_str(&format!(
                "| load | {} | {} [{}–{}] | | | | | |\n",
                l.store,
                fmt_ops(l.ops_per_sec),
                fmt_ops(lo),
                fmt_ops(hi)
            ));
        }
        for r in rows.iter().filter(|r| r.setting == setting) {
            let (lo, hi) = r
                .ops_per_sec_spread
                .map(|s| (s.min, s.max))
                .unwrap_or((r.ops_per_sec, r.ops_per_sec));
            let scan = r.kinds.iter().find(|k| k.kind == "scan");
            let rmw = r.kinds.iter().find(|k| k.kind == "rmw");
            let update = r
                .update_p99_us
                .or(rmw.map(|k| k.p99_us))
                .map(|v| {
                    if r.update_p99_us.is_none() {
                        format!("{} (rmw)", fmt_us(Some(v)))
                    } else {
                        fmt_us(Some(v))
                    }
                })
                .unwrap_or_else(|| "—".into());
            let (p50, p99, p999) = match (r.read_p50_us, scan) {
                (None, Some(s)) => (
                    format!("{} (scan)", fmt_us(Some(s.p50_us))),
                    format!("{} (scan)", fmt_us(Some(s.p99_us))),
                    format!("{} (scan)", fmt_us(Some(s.p999_us))),
                ),
                _ => (
                    fmt_us(r.read_p50_us),
                    fmt_us(r.read_p99_us),
                    fmt_us(r.read_p999_us),
                ),
            };
            out.push_str(&format!(
                "| {} | {} | {} [{}–{}] | {p50} | {p99} | {p999} | {update} | {} |\n",
                r.workload,
                r.store,
                fmt_ops(r.ops_per_sec),
                fmt_ops(lo),
                fmt_ops(hi),
                fmt_us(Some(r.max_us)),
            ));
        }
    }
    out
}

/// The ratios as a table.
pub fn print_ratios(ratios: &[Ratio]) -> String {
    let mut out = String::from("\n| row | versus | phase | ops/s ratio (median) | 95% interval |\n|---|---|---|---:|---|\n");
    for r in ratios {
        let ci = r
            .ci95
            .map(|[lo, hi]| format!("{lo:.2}–{hi:.2}"))
            .unwrap_or_else(|| "—".into());
        out.push_str(&format!(
            "| {} | {} | {} | {:.2}× | {ci} |\n",
            r.row, r.versus, r.phase, r.median
        ));
    }
    out
}
