//! The benchmark's figures: which of its rows go into which panels, and how each
//! figure is titled and scaled. The layout itself (axes, ticks, labels, legend) is
//! `layout.rs`.

use super::layout::{figure, Panel, COLORS};
use crate::leveled::{LevelRow, LeveledRow};
use crate::range::{RangeRow, RANGE_LENGTHS};
use crate::{Phase, Row, SweepPoint};

/// Reads per absent lookup for each store, observed vs formula FP, and time per
/// lookup.
pub fn render_savings_svg(rows: &[Row]) -> String {
    figure("bloomkv disk-I/O savings", &savings_panels(rows))
}

fn savings_panels(rows: &[Row]) -> Vec<(Panel, bool)> {
    let absent: Vec<&Row> = rows.iter().filter(|r| r.phase == Phase::Absent).collect();
    let labels: Vec<String> = absent.iter().map(|r| r.filter.clone()).collect();
    let reads: Vec<f64> = absent.iter().map(|r| r.reads_per_lookup).collect();
    let mut left = Panel::new(
        "Table reads per absent-key lookup",
        "store and filter",
        "reads per lookup (log scale)",
        (0.0, 1.0),
        (0.001, 1.0),
        true,
    );
    left.bars(&labels, &[("reads per lookup", COLORS[0], reads)]);

    let filtered: Vec<&Row> = absent
        .iter()
        .copied()
        .filter(|r| r.observed_fp.is_some())
        .collect();
    let fp_labels: Vec<String> = filtered.iter().map(|r| r.filter.clone()).collect();
    let observed: Vec<f64> = filtered
        .iter()
        .map(|r| r.observed_fp.unwrap_or(0.0) * 100.0)
        .collect();
    let formula: Vec<f64> = filtered
        .iter()
        .map(|r| r.formula_fp.unwrap_or(0.0) * 100.0)
        .collect();
    let mut right = Panel::new(
        "False-positive rate: observed vs formula",
        "store and filter",
        "false positives (%)",
        (0.0, 1.0),
        (0.0, 1.0),
        false,
    );
    right.bars(
        &fp_labels,
        &[
            ("observed", COLORS[1], observed),
            ("formula", COLORS[2], formula),
        ],
    );

    let ns = |phase: Phase| -> Vec<f64> {
        labels
            .iter()
            .map(|label| {
                rows.iter()
                    .find(|r| r.phase == phase && &r.filter == label)
                    .map_or(f64::NAN, |r| r.ns_per_lookup)
            })
            .collect()
    };
    // Log scale: a store without filters is ten to fifty times slower on absent keys
    // and would flatten every other bar.
    let mut time = Panel::new(
        "Time per lookup",
        "store and filter",
        "ns per lookup (log scale)",
        (0.0, 1.0),
        (100.0, 1.0),
        true,
    );
    time.bars(
        &labels,
        &[
            ("absent keys", COLORS[0], ns(Phase::Absent)),
            ("present keys", COLORS[3], ns(Phase::Present)),
        ],
    );
    vec![(time, false), (left, false), (right, false)]
}

/// The leveled shape: each level's filter bits per key and observed false-positive
/// rate under each allocation; reads per absent get and time per lookup in total.
pub fn render_leveled_svg(rows: &[LeveledRow]) -> String {
    figure("bloomkv filters per level", &leveled_panels(rows))
}

fn leveled_panels(rows: &[LeveledRow]) -> Vec<(Panel, bool)> {
    let mut levels: Vec<usize> = rows
        .iter()
        .flat_map(|r| r.per_level.iter().map(|l| l.level))
        .collect();
    levels.sort_unstable();
    levels.dedup();
    let level_labels: Vec<String> = levels.iter().map(|l| format!("L{l}")).collect();
    let per_level = |f: &dyn Fn(&LevelRow) -> f64| -> Vec<(&str, &'static str, Vec<f64>)> {
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let values = levels
                    .iter()
                    .map(|&level| {
                        r.per_level
                            .iter()
                            .find(|l| l.level == level)
                            .map_or(f64::NAN, f)
                    })
                    .collect();
                (r.allocation.as_str(), COLORS[i % COLORS.len()], values)
            })
            .collect()
    };
    let mut bits = Panel::new(
        "Filter bits per key, by level",
        "level",
        "bits per key",
        (0.0, 1.0),
        (0.0, 1.0),
        false,
    );
    bits.bars(&level_labels, &per_level(&|l| l.filter_bits_per_key));
    let mut fp = Panel::new(
        "Observed false positives, by level",
        "level",
        "false positives (%, log)",
        (0.0, 1.0),
        (0.001, 1.0),
        true,
    );
    fp.bars(&level_labels, &per_level(&|l| l.observed_fp * 100.0));

    let alloc_labels: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} ({:.2} MiB)",
                r.allocation,
                r.filter_bytes as f64 / (1 << 20) as f64
            )
        })
        .collect();
    let mut reads = Panel::new(
        "Table reads per absent get",
        "allocation (filter memory)",
        "reads per get (log)",
        (0.0, 1.0),
        (0.001, 1.0),
        true,
    );
    reads.bars(
        &alloc_labels,
        &[(
            "absent keys",
            COLORS[0],
            rows.iter().map(|r| r.absent_reads_per_lookup).collect(),
        )],
    );
    let mut time = Panel::new(
        "Time per lookup",
        "allocation (filter memory)",
        "ns per lookup",
        (0.0, 1.0),
        (0.0, 1.0),
        false,
    );
    time.bars(
        &alloc_labels,
        &[
            (
                "absent keys",
                COLORS[0],
                rows.iter().map(|r| r.absent_ns_per_lookup).collect(),
            ),
            (
                "present keys",
                COLORS[3],
                rows.iter().map(|r| r.present_ns_per_lookup).collect(),
            ),
        ],
    );
    vec![(bits, false), (fp, false), (reads, false), (time, false)]
}

/// The range scans: block reads per empty scan (log scale) by range length, one bar
/// per store.
pub fn render_range_svg(rows: &[RangeRow]) -> String {
    figure(
        "bloomkv range scans over 10 overlapping tables",
        &[(range_panel(rows), false)],
    )
}

fn range_panel(rows: &[RangeRow]) -> Panel {
    let mut stores: Vec<&str> = Vec::new();
    for r in rows {
        if !stores.contains(&r.filter.as_str()) {
            stores.push(&r.filter);
        }
    }
    let labels: Vec<String> = RANGE_LENGTHS
        .iter()
        .map(|&l| format!("{l} {}", if l == 1 { "id" } else { "ids" }))
        .collect();
    let series: Vec<(&str, &'static str, Vec<f64>)> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let values = RANGE_LENGTHS
                .iter()
                .map(|len| {
                    rows.iter()
                        .find(|r| r.filter == *store && r.range_len == *len && r.phase == "empty")
                        .map_or(f64::NAN, |r| r.reads_per_scan)
                })
                .collect();
            (*store, COLORS[i % COLORS.len()], values)
        })
        .collect();
    let mut panel = Panel::new(
        "Block reads per empty range scan",
        "ids per range, over 10 overlapping tables",
        "reads per scan (log)",
        (0.0, 1.0),
        (1e-4, 1.0),
        true,
    );
    panel.bars(&labels, &series);
    panel
}

/// FP and reads per lookup against bits per key; FP and time against probes.
pub fn render_sweep_svg(bits: &[SweepPoint], probes: &[SweepPoint]) -> String {
    figure("bloomkv filter sweeps", &sweep_panels(bits, probes))
}

fn sweep_panels(bits: &[SweepPoint], probes: &[SweepPoint]) -> Vec<(Panel, bool)> {
    let layouts = ["standard", "cache-local", "ribbon"];
    let series = |points: &[SweepPoint], layout: &str, f: &dyn Fn(&SweepPoint) -> (f64, f64)| {
        points
            .iter()
            .filter(|p| p.layout == layout)
            .map(f)
            .collect::<Vec<_>>()
    };
    let bmax = bits.iter().map(|p| p.bits_per_key).fold(1.0, f64::max);
    let mut fp = Panel::new(
        "FP rate vs bits per key",
        "bits per key",
        "false-positive rate",
        (1.0, bmax),
        (1e-6, 1.0),
        true,
    );
    let mut reads = Panel::new(
        "Table reads per absent lookup",
        "bits per key",
        "reads per lookup",
        (1.0, bmax),
        (1e-4, 20.0),
        true,
    );
    for (i, layout) in layouts.iter().enumerate() {
        let obs = series(bits, layout, &|p| (p.bits_per_key, p.observed_fp.max(1e-6)));
        let form = series(bits, layout, &|p| (p.bits_per_key, p.formula_fp.max(1e-6)));
        fp.line(&format!("{layout} observed"), COLORS[i], false, &obs);
        fp.line(&format!("{layout} formula"), COLORS[i], true, &form);
        let r = series(bits, layout, &|p| {
            (p.bits_per_key, p.reads_per_lookup.unwrap_or(0.0).max(1e-4))
        });
        reads.line(layout, COLORS[i], false, &r);
    }
    let kmax = probes
        .iter()
        .map(|p| f64::from(p.probes))
        .fold(2.0, f64::max);
    let mut kfp = Panel::new(
        "FP rate vs probes (10 bits/key)",
        "probes k",
        "false-positive rate",
        (1.0, kmax),
        (1e-3, 1.0),
        true,
    );
    let ns_max = probes.iter().map(|p| p.ns_per_lookup).fold(1.0, f64::max) * 1.2;
    let mut kns = Panel::new(
        "Lookup time vs probes",
        "probes k",
        "ns per absent lookup",
        (1.0, kmax),
        (0.0, ns_max),
        false,
    );
    for (i, layout) in layouts.iter().enumerate() {
        kfp.line(
            &format!("{layout} observed"),
            COLORS[i],
            false,
            &series(probes, layout, &|p| {
                (f64::from(p.probes), p.observed_fp.max(1e-3))
            }),
        );
        kfp.line(
            &format!("{layout} formula"),
            COLORS[i],
            true,
            &series(probes, layout, &|p| {
                (f64::from(p.probes), p.formula_fp.max(1e-3))
            }),
        );
        kns.line(
            layout,
            COLORS[i],
            false,
            &series(probes, layout, &|p| (f64::from(p.probes), p.ns_per_lookup)),
        );
    }
    vec![(fp, true), (reads, true), (kfp, true), (kns, true)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::layout::assert_no_collisions;
    use bloomkv_kv::LevelStats;

    fn row(filter: &str, phase: Phase, reads: f64, fp: Option<f64>, ns: f64) -> Row {
        Row {
            filter: filter.into(),
            phase,
            lookups: 200_000,
            found: 0,
            table_probes: None,
            filter_negatives: None,
            filter_positives: None,
            data_block_reads: (reads * 200_000.0) as u64,
            reads_per_lookup: reads,
            reads_avoided_pct: None,
            observed_fp: fp,
            formula_fp: fp.map(|f| f * 1.07),
            ns_per_lookup: ns,
            filter_bits_per_key: 10.0,
            filter_mib: 1.2,
            filter_probes: 6,
            os_read_syscalls: None,
            os_read_bytes: None,
            os_device_reads: None,
            threads: 1,
            lookups_per_sec: 1e9 / ns,
            block_cache_hits: None,
            table_bytes: None,
            batch: 1,
            open_ms: None,
            uring_reads: None,
            absent_skew: "uniform".into(),
            absent_warmup: 0,
            learned_bytes: None,
            learned_bits_per_key: None,
            learned_skips: None,
            metadata_bytes: None,
            metadata_budget_bytes: None,
        }
    }

    /// The peers' fourteen rows with their longest names, values from 0.0001 to
    /// thousands: the case whose labels collided before.
    #[test]
    fn savings_chart_labels_never_collide() {
        let names = [
            "bloomkv no filter",
            "bloomkv standard",
            "bloomkv cache-local",
            "bloomkv ribbon",
            "bloomkv cache-local 32 MiB cache",
            "fjall no filter",
            "fjall",
            "fjall default filter policy",
            "fjall 32 MiB cache",
            "rocksdb no filter",
            "rocksdb",
            "rocksdb ribbon",
            "rocksdb 32 MiB cache",
            "rocksdb cache holds everything",
        ];
        let mut rows = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let fp = (!name.contains("no filter")).then_some(0.0001 * (i as f64 + 1.0));
            let reads = if fp.is_some() { 0.09731 } else { 10.0 };
            rows.push(row(
                name,
                Phase::Absent,
                reads,
                fp,
                512.5 + 100.0 * i as f64,
            ));
            rows.push(row(name, Phase::Present, 1.04, fp, 4012.7 + i as f64));
        }
        assert_no_collisions(&savings_panels(&rows));
        // And with a single row, and none.
        assert_no_collisions(&savings_panels(&rows[..2]));
        assert_no_collisions(&savings_panels(&[]));
    }

    #[test]
    fn leveled_chart_labels_never_collide() {
        let level = |level: usize, bits: f64, fp: f64| LevelRow {
            allocation: "no-last-level".into(),
            level,
            tables: 12,
            keys: 123_456,
            filter_bits_per_key: bits,
            predicted_fp: fp,
            absent: LevelStats::default(),
            observed_fp: fp,
            probed_share: 0.5,
        };
        let rows: Vec<LeveledRow> = ["uniform", "monkey", "no-last-level"]
            .iter()
            .map(|&allocation| LeveledRow {
                shape: "leveled",
                allocation: allocation.into(),
                budget_bits_per_key: 10.0,
                levels: 5,
                filter_bytes: 1_234_567,
                absent_reads_per_lookup: 0.0158,
                present_reads_per_lookup: 1.0123,
                threads: 1,
                absent_ns_per_lookup: 1234.5,
                present_ns_per_lookup: 4567.8,
                per_level: (0..6)
                    .map(|l| level(l, 9.87 + l as f64, 0.0123 / (l as f64 + 1.0)))
                    .collect(),
                absent_skew: "uniform".into(),
                absent_warmup: 0,
                learned_bytes: 0,
                filter_budget_bytes: None,
                grown_after_warmup: false,
                keys_written_after_warmup: 0.0,
                metadata_bytes: None,
                metadata_budget_bytes: None,
            })
            .collect();
        assert_no_collisions(&leveled_panels(&rows));
    }

    #[test]
    fn range_chart_labels_never_collide() {
        let mut rows = Vec::new();
        for (filter, reads) in [("none", 10.06), ("prefix-8", 0.94), ("grafite", 0.0004)] {
            for &len in RANGE_LENGTHS.iter() {
                rows.push(RangeRow {
                    filter: filter.into(),
                    phase: "empty",
                    range_len: len,
                    scans: 10_000,
                    keys_found: 0,
                    data_block_reads: 1234,
                    reads_per_scan: reads * len as f64,
                    filter_checks: 100_000,
                    tables_skipped: 99_000,
                    observed_fp: Some(0.001),
                    fp_bound: Some(0.002),
                    threads: 1,
                    ns_per_scan: 12_345.6,
                    filter_bits_per_key: 16.0,
                });
            }
        }
        let panel = range_panel(&rows);
        assert_eq!(panel.category_count(), RANGE_LENGTHS.len());
        assert_no_collisions(&[(panel, false)]);
    }

    #[test]
    fn sweep_chart_labels_never_collide() {
        let mut points = Vec::new();
        for layout in ["standard", "cache-local", "ribbon"] {
            for b in 1..=20u32 {
                points.push(SweepPoint {
                    layout: layout.into(),
                    bits_per_key: f64::from(b),
                    probes: b.min(12),
                    observed_fp: 0.5f64.powi(b as i32),
                    formula_fp: 0.5f64.powi(b as i32),
                    reads_per_lookup: Some(0.1),
                    ns_per_lookup: 100.0 + f64::from(b),
                });
            }
        }
        assert_no_collisions(&sweep_panels(&points, &points));
    }
}
