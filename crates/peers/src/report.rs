//! The comparison's results over several runs: per row the median and spread of the
//! time, the counts beside it, the JSON file and the printed tables.
//!
//! Counts (reads, read syscalls, filter negatives) repeat from run to run to within a
//! few reads; times do not, on a shared machine. So every row carries the median of
//! its runs and their range (and quartiles in the JSON), and the counts' medians.

use std::fmt::Write as _;

use bloomkv_bench::{Phase, Row, Workload};
use serde::Serialize;

use crate::environment::Environment;
use crate::fill::{levels_text, FillResult};
use crate::plan::Spread;
use crate::ratios::Ratio;

/// How one row's store was set up.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    /// The row label.
    pub store: String,
    /// The filter, in words.
    pub filter: String,
    /// Block cache in bytes.
    pub cache_bytes: usize,
    /// Whether that is the store's own default.
    pub default_cache: bool,
    /// Anything else that differs from the store's defaults.
    pub notes: String,
}

/// One row (store, phase) over all runs.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Store and setup.
    pub store: String,
    /// Which keys were looked up.
    pub phase: Phase,
    /// Runs summed up.
    pub runs: usize,
    /// Nanoseconds per lookup over the runs.
    pub ns_per_lookup: Spread,
    /// Table reads per lookup (the store's count, else the OS's read syscalls).
    pub reads_per_lookup: Spread,
    /// The OS's read syscalls per lookup.
    pub os_read_syscalls_per_lookup: Option<Spread>,
    /// Bytes the OS fetched from the device per lookup (non-zero with `--cold`).
    pub os_device_bytes_per_lookup: Option<Spread>,
    /// Reads the machine's disks completed per lookup (machine-wide count: on a
    /// quiet machine, the phase's). Beside the counted reads it says how many of
    /// those the device served and how many the page cache did.
    pub os_device_reads_per_lookup: Option<Spread>,
    /// Block cache hits per lookup, where the store counts them.
    pub cache_hits_per_lookup: Option<Spread>,
    /// Filter negatives per lookup, where the store counts them.
    pub filter_negatives_per_lookup: Option<Spread>,
    /// Median share of reads avoided against the baseline row, in %.
    pub reads_avoided_pct: Option<f64>,
    /// Median observed false-positive rate, where the store counts positives.
    pub observed_fp: Option<f64>,
    /// The formula's rate for the filters built.
    pub formula_fp: Option<f64>,
    /// Filter memory in MiB.
    pub filter_mib: f64,
    /// Filter bits per key.
    pub filter_bits_per_key: f64,
    /// Tables per level once settled (leveled shape), e.g. `L0 2 · L1 4 · L2 30`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub levels: Option<String>,
}

/// One store's fills over all runs.
#[derive(Debug, Clone, Serialize)]
pub struct FillSummary {
    /// Store and setup.
    pub store: String,
    /// Runs summed up.
    pub runs: usize,
    /// Nanoseconds per `put`, until the last one returned.
    pub ns_per_put: Spread,
    /// Milliseconds from the last `put` until settled.
    pub settle_ms: Spread,
    /// Milliseconds from the first `put` until settled.
    pub total_ms: Spread,
    /// Tables per level once settled, in the last run.
    pub levels: String,
}

/// Every row of one run, in the order the run went.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// The run, from 0.
    pub run: usize,
    /// Store labels in the order they ran.
    pub order: Vec<String>,
    /// Lookup rows.
    pub rows: Vec<Row>,
    /// Timed fills.
    pub fills: Vec<FillResult>,
}

/// The `--json` file.
#[derive(Debug, Clone, Serialize)]
pub struct PeersReport {
    /// The commit measured and whether the tree was clean (`null` without git).
    #[serde(flatten)]
    pub provenance: bloomkv_bench::Provenance,
    /// The command line that produced it.
    pub command: String,
    /// Machine, commit and file system.
    pub environment: Environment,
    /// The workload's parameters.
    pub workload: Workload,
    /// `flat` or `leveled`.
    pub shape: String,
    /// Runs (rounds over all stores).
    pub runs: usize,
    /// Whether fjall was built with its `metrics` feature.
    pub fjall_metrics: bool,
    /// A counted run (fjall's metrics, RocksDB's statistics on): its times carry the
    /// counters' cost and are not the figures.
    pub counted: bool,
    /// Each row's setup.
    pub settings: Vec<Setting>,
    /// Per row and phase: medians and spreads over the runs.
    pub summary: Vec<Summary>,
    /// Per store: the timed fill over the runs.
    pub fill: Vec<FillSummary>,
    /// One row per (store, phase) in the flat report's form (the chart is drawn from
    /// these): the median time and median read count, the other counts the first
    /// run's (`summary` holds their medians).
    pub rows: Vec<Row>,
    /// Every pair of rows compared: the median of the per-run time ratios with its
    /// 95% interval ([`crate::ratios`]).
    pub ratios: Vec<Ratio>,
    /// How `ratios`' intervals are made.
    pub ratio_interval: &'static str,
    /// The targets, judged on the intervals.
    pub targets: Vec<Target>,
    /// Every run as it happened.
    pub run_records: Vec<RunRecord>,
}

/// A target ("at most this many times that row") and how its interval reads.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// The ratio it is judged on.
    pub ratio: Ratio,
    /// The limit.
    pub at_most: f64,
    /// Met when the whole 95% interval is within the limit.
    pub verdict: crate::ratios::Verdict,
}

/// What [`PeersReport::ratio_interval`] says.
pub const RATIO_INTERVAL: &str = "median of per-run ratios; 95% interval from order statistics \
     [x(k), x(n+1-k)], k the largest with 1 - 2 P(Binomial(n, 1/2) <= k-1) >= 0.95 (below 6 runs \
     the full range, its coverage in `coverage`)";

fn spread_of(values: impl Iterator<Item = f64>) -> Option<Spread> {
    Spread::of(&values.collect::<Vec<_>>())
}

fn median_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Option<Vec<f64>> = values.collect();
    Spread::of(&v?).map(|s| s.median)
}

/// Sums up the runs' rows per (store, phase), in the order of the first run's
/// `labels`; `levels` gives a store's tables per level where known.
pub fn summarize(
    records: &[RunRecord],
    labels: &[String],
    levels: &dyn Fn(&str) -> Option<String>,
) -> Vec<Summary> {
    let mut out = Vec::new();
    for label in labels {
        for phase in [Phase::Absent, Phase::Present] {
            let rows: Vec<&Row> = records
                .iter()
                .flat_map(|r| &r.rows)
                .filter(|r| &r.filter == label && r.phase == phase)
                .collect();
            let Some(first) = rows.first() else {
                continue;
            };
            let per = |v: u64, r: &Row| v as f64 / r.lookups.max(1) as f64;
            let opt_spread = |f: &dyn Fn(&Row) -> Option<u64>| -> Option<Spread> {
                let v: Option<Vec<f64>> = rows.iter().map(|r| f(r).map(|v| per(v, r))).collect();
                Spread::of(&v?)
            };
            let (Some(ns), Some(reads)) = (
                spread_of(rows.iter().map(|r| r.ns_per_lookup)),
                spread_of(rows.iter().map(|r| r.reads_per_lookup)),
            ) else {
                continue;
            };
            out.push(Summary {
                store: label.clone(),
                phase,
                runs: rows.len(),
                ns_per_lookup: ns,
                reads_per_lookup: reads,
                os_read_syscalls_per_lookup: opt_spread(&|r| r.os_read_syscalls),
                os_device_bytes_per_lookup: opt_spread(&|r| r.os_read_bytes),
                os_device_reads_per_lookup: opt_spread(&|r| r.os_device_reads),
                cache_hits_per_lookup: opt_spread(&|r| r.block_cache_hits),
                filter_negatives_per_lookup: opt_spread(&|r| r.filter_negatives),
                reads_avoided_pct: median_of(rows.iter().map(|r| r.reads_avoided_pct)),
                observed_fp: median_of(rows.iter().map(|r| r.observed_fp)),
                formula_fp: first.formula_fp,
                filter_mib: first.filter_mib,
                filter_bits_per_key: first.filter_bits_per_key,
                levels: levels(label),
            });
        }
    }
    out
}

/// The median row of each summary, in the flat report's form: the first run's row
/// with the median time and read count.
pub fn median_rows(records: &[RunRecord], summary: &[Summary]) -> Vec<Row> {
    summary
        .iter()
        .filter_map(|s| {
            let mut row = records
                .iter()
                .flat_map(|r| &r.rows)
                .find(|r| r.filter == s.store && r.phase == s.phase)?
                .clone();
            row.ns_per_lookup = s.ns_per_lookup.median;
            row.lookups_per_sec = 1e9 / s.ns_per_lookup.median.max(f64::MIN_POSITIVE);
            row.reads_per_lookup = s.reads_per_lookup.median;
            row.data_block_reads = (s.reads_per_lookup.median * row.lookups as f64).round() as u64;
            row.reads_avoided_pct = s.reads_avoided_pct;
            row.observed_fp = s.observed_fp;
            Some(row)
        })
        .collect()
}

/// Sums up the fills per store, in the order of `labels`.
pub fn summarize_fills(records: &[RunRecord], labels: &[String]) -> Vec<FillSummary> {
    labels
        .iter()
        .filter_map(|label| {
            let fills: Vec<&FillResult> = records
                .iter()
                .flat_map(|r| &r.fills)
                .filter(|f| &f.store == label)
                .collect();
            Some(FillSummary {
                store: label.clone(),
                runs: fills.len(),
                ns_per_put: spread_of(fills.iter().map(|f| f.ns_per_put))?,
                settle_ms: spread_of(fills.iter().map(|f| f.settle_ms))?,
                total_ms: spread_of(fills.iter().map(|f| f.total_ms))?,
                levels: levels_text(&fills.last()?.levels),
            })
        })
        .collect()
}

/// A number with a sensible number of digits for its size.
fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn range(s: &Spread) -> String {
    format!("{}–{}", num(s.min), num(s.max))
}

/// Counts per lookup: one value when the runs agree to 4 decimals, else the range.
fn count(s: &Spread) -> String {
    if (s.max - s.min) < 5e-5 {
        format!("{:.4}", s.median)
    } else {
        format!("{:.4} ({:.4}–{:.4})", s.median, s.min, s.max)
    }
}

fn opt_count(s: &Option<Spread>) -> String {
    s.as_ref().map(count).unwrap_or_else(|| "n/a".into())
}

/// Cells as aligned columns, the first `left` of them left-aligned, a rule under the
/// header.
pub(crate) fn aligned(cells: Vec<Vec<String>>, left: usize) -> String {
    let cols = cells.first().map(|r| r.len()).unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c < left {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

/// The lookup rows: counts first, then the median time with its range.
pub fn print_summary(summary: &[Summary], runs: usize) -> String {
    let mut header: Vec<String> = [
        "store",
        "phase",
        "reads/lkp",
        "OS syscr/lkp",
        "dev reads/lkp",
        "dev KiB/lkp",
        "cache hits/lkp",
        "avoided%",
        "FP obs",
        "filter MiB",
        "bits/key",
        "ns/lkp median",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.push(format!("min–max ({runs} runs)"));
    let mut cells = vec![header];
    for s in summary {
        cells.push(vec![
            s.store.clone(),
            s.phase.name().to_string(),
            count(&s.reads_per_lookup),
            opt_count(&s.os_read_syscalls_per_lookup),
            opt_count(&s.os_device_reads_per_lookup),
            s.os_device_bytes_per_lookup
                .map(|b| format!("{:.2}", b.median / 1024.0))
                .unwrap_or_else(|| "n/a".into()),
            opt_count(&s.cache_hits_per_lookup),
            s.reads_avoided_pct
                .map(|v| format!("{v:.2}%"))
                .unwrap_or_else(|| "-".into()),
            s.observed_fp
                .map(|v| format!("{:.3}%", v * 100.0))
                .unwrap_or_else(|| "-".into()),
            format!("{:.2}", s.filter_mib),
            format!("{:.2}", s.filter_bits_per_key),
            num(s.ns_per_lookup.median),
            range(&s.ns_per_lookup),
        ]);
    }
    let mut out = aligned(cells, 2);
    let levels: Vec<String> = summary
        .iter()
        .filter(|s| s.phase == Phase::Absent)
        .filter_map(|s| Some(format!("  {}: {}", s.store, s.levels.as_ref()?)))
        .collect();
    if !levels.is_empty() {
        out.push_str("tables per level once settled:\n");
        out.push_str(&levels.join("\n"));
        out.push('\n');
    }
    out
}

/// Each store's time per lookup, and its time against `reference`'s as the median
/// of the per-run ratios with their 95% interval (see [`crate::ratios`]), phase by
/// phase.
pub fn print_versus(summary: &[Summary], records: &[RunRecord], reference: &str) -> String {
    let find = |store: &str, phase: Phase| {
        summary
            .iter()
            .find(|s| s.store == store && s.phase == phase)
    };
    let mut cells = vec![vec![
        "per lookup (median µs; ratio: median of runs, 95% interval)".to_string(),
        "absent µs".into(),
        format!("vs {reference}"),
        "present µs".into(),
        format!("vs {reference}"),
    ]];
    let mut seen: Vec<&str> = Vec::new();
    for s in summary {
        if seen.contains(&s.store.as_str()) {
            continue;
        }
        seen.push(&s.store);
        let mut line = vec![s.store.clone()];
        for phase in [Phase::Absent, Phase::Present] {
            let me = find(&s.store, phase);
            line.push(
                me.map(|m| format!("{:.2}", m.ns_per_lookup.median / 1000.0))
                    .unwrap_or_else(|| "-".into()),
            );
            line.push(
                crate::ratios::lookup_ratio(records, &s.store, reference, phase)
                    .map(|r| format!("{:.2}x ({:.2}–{:.2})", r.median, r.ci95[0], r.ci95[1]))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        cells.push(line);
    }
    aligned(cells, 1)
}

/// With `--cold`: for each row, whether its counted reads were device reads — the
/// disks' reads per lookup within 10% of the counted ones — or partly the page
/// cache's (a phase that touched pages twice). One line per row.
pub fn print_cold_check(summary: &[Summary]) -> String {
    let mut out = String::from(
        "cold check (disks' reads, machine-wide, against the counted reads per lookup):\n",
    );
    for s in summary {
        let counted = s.reads_per_lookup.median;
        let line = match &s.os_device_reads_per_lookup {
            None => "the OS does not count device reads here".to_string(),
            Some(d) if counted == 0.0 => format!("{:.4} device reads, none counted", d.median),
            Some(d) => {
                let share = d.median / counted;
                let verdict = if (share - 1.0).abs() <= 0.1 {
                    "device reads"
                } else if share < 1.0 {
                    "partly served by the page cache"
                } else {
                    "more device reads than counted (readahead, or another reader)"
                };
                format!(
                    "{:.4} device / {:.4} counted = {:.2}: {verdict}",
                    d.median, counted, share
                )
            }
        };
        out.push_str(&format!("  {} {}: {line}\n", s.store, s.phase.name()));
    }
    out
}

/// The timed fills.
pub fn print_fills(fills: &[FillSummary], runs: usize) -> String {
    let mut cells = vec![vec![
        "fill (random order, compaction on, sync off)".to_string(),
        "µs/put median".into(),
        format!("min–max ({runs} runs)"),
        "settle ms median".into(),
        "total s median".into(),
        "min–max".into(),
        "tables per level".into(),
    ]];
    for f in fills {
        cells.push(vec![
            f.store.clone(),
            format!("{:.2}", f.ns_per_put.median / 1000.0),
            format!(
                "{:.2}–{:.2}",
                f.ns_per_put.min / 1000.0,
                f.ns_per_put.max / 1000.0
            ),
            num(f.settle_ms.median),
            format!("{:.2}", f.total_ms.median / 1000.0),
            format!(
                "{:.2}–{:.2}",
                f.total_ms.min / 1000.0,
                f.total_ms.max / 1000.0
            ),
            f.levels.clone(),
        ]);
    }
    aligned(cells, 1)
}

/// The settings table.
pub fn print_settings(settings: &[Setting]) -> String {
    let mut cells = vec![["store", "filter", "block cache", "other settings"]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
    for s in settings {
        cells.push(vec![
            s.store.clone(),
            s.filter.clone(),
            format!(
                "{} MiB{}",
                s.cache_bytes >> 20,
                if s.default_cache { " (default)" } else { "" }
            ),
            s.notes.clone(),
        ]);
    }
    aligned(cells, 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomkv_bench::{FilterShape, PhaseResult, StoreCounters};

    fn row(label: &str, phase: Phase, nanos: u128, reads: u64) -> Row {
        let result = PhaseResult {
            lookups: 100,
            found: if phase == Phase::Present { 100 } else { 0 },
            counters: StoreCounters {
                data_block_reads: Some(reads),
                ..StoreCounters::default()
            },
            os: None,
            nanos,
            threads: 1,
        };
        Row::new(label, phase, &result, &FilterShape::default(), 1000)
    }

    #[test]
    fn summaries_take_each_rows_median_and_range_over_the_runs() {
        // Three runs of one store: 100 lookups each, times 3, 1 and 2 µs per lookup
        // absent, reads 10, 12, 11.
        let records: Vec<RunRecord> = [(300_000u128, 10u64), (100_000, 12), (200_000, 11)]
            .iter()
            .enumerate()
            .map(|(run, &(nanos, reads))| RunRecord {
                run,
                order: vec!["s".into()],
                rows: vec![
                    row("s", Phase::Absent, nanos, reads),
                    row("s", Phase::Present, 2 * nanos, 100),
                ],
                fills: Vec::new(),
            })
            .collect();
        let summary = summarize(&records, &["s".into()], &|_| None);
        assert_eq!(summary.len(), 2);
        let a = &summary[0];
        assert_eq!((a.phase, a.runs), (Phase::Absent, 3));
        assert_eq!(a.ns_per_lookup.median, 2000.0);
        assert_eq!((a.ns_per_lookup.min, a.ns_per_lookup.max), (1000.0, 3000.0));
        assert!((a.reads_per_lookup.median - 0.11).abs() < 1e-12);
        assert_eq!(summary[1].ns_per_lookup.median, 4000.0);
        assert_eq!(count(&summary[1].reads_per_lookup), "1.0000");
        assert_eq!(count(&a.reads_per_lookup), "0.1100 (0.1000–0.1200)");

        let rows = median_rows(&records, &summary);
        assert_eq!(rows[0].ns_per_lookup, 2000.0);
        assert_eq!(rows[0].data_block_reads, 11);
        assert!((rows[0].lookups_per_sec - 500_000.0).abs() < 1e-6);

        let versus = print_versus(&summary, &records, "s");
        assert!(versus.contains("1.00x"), "{versus}");
    }
}
