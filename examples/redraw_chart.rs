//! Redraws the chart of a result file (`bloomkv bench --json`, its `-range.json`, or
//! `bloomkv-peers --json`) from its rows, without running anything: for when the
//! chart code changes and the committed figures should follow.
//!
//! ```text
//! cargo run --release --example redraw_chart -- docs/results/peers.json [more.json ...]
//! ```
//!
//! Each `FILE.json` gets its `FILE.svg` rewritten.

use bloomkv_bench::{render_range_svg, render_savings_svg, RangeRow, Row};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        return Err("usage: redraw_chart FILE.json [FILE.json ...]".into());
    }
    for file in files {
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
        let svg = std::path::Path::new(&file).with_extension("svg");
        if report.get("filter_times").is_some() {
            let rows = range_rows(&report)?;
            std::fs::write(&svg, render_range_svg(&rows))?;
            println!("{file}: {} range rows -> {}", rows.len(), svg.display());
            continue;
        }
        let rows: Vec<Row> = serde_json::from_value(
            report
                .get("rows")
                .cloned()
                .ok_or_else(|| format!("{file}: no \"rows\""))?,
        )?;
        std::fs::write(&svg, render_savings_svg(&rows))?;
        println!("{file}: {} rows -> {}", rows.len(), svg.display());
    }
    Ok(())
}

/// The rows of a range-scan report (`RangeRow` names its phase with a `&'static str`,
/// so it is read field by field).
fn range_rows(report: &serde_json::Value) -> Result<Vec<RangeRow>, Box<dyn std::error::Error>> {
    let rows = report["rows"].as_array().ok_or("no \"rows\"")?;
    rows.iter()
        .map(|r| {
            let num = |k: &str| r[k].as_f64().ok_or_else(|| format!("row lacks {k}: {r}"));
            let int = |k: &str| r[k].as_u64().ok_or_else(|| format!("row lacks {k}: {r}"));
            Ok(RangeRow {
                filter: r["filter"].as_str().ok_or("row lacks filter")?.to_string(),
                phase: match r["phase"].as_str() {
                    Some("empty") => "empty",
                    Some("non-empty") => "non-empty",
                    other => return Err(format!("unknown phase {other:?}").into()),
                },
                range_len: int("range_len")?,
                scans: int("scans")?,
                keys_found: int("keys_found")?,
                data_block_reads: int("data_block_reads")?,
                reads_per_scan: num("reads_per_scan")?,
                filter_checks: int("filter_checks")?,
                tables_skipped: int("tables_skipped")?,
                observed_fp: r["observed_fp"].as_f64(),
                fp_bound: r["fp_bound"].as_f64(),
                // Files from before the field ran every scan on one thread.
                threads: r["threads"].as_u64().map_or(1, |t| t as usize),
                ns_per_scan: num("ns_per_scan")?,
                filter_bits_per_key: num("filter_bits_per_key")?,
            })
        })
        .collect()
}
