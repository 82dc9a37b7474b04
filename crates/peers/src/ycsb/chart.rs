//! The latency chart: percentile bars per workload and store, on a log scale.
//!
//! One panel per setting; in each, a line per workload and store, drawn from the
//! median operation (p50) to the slowest (max) over every kind of operation, with ticks
//! at p99 and p99.9 and the ops/s written at the right:
//!
//! ```text
//! a  bloomkv  ├──────┼──┼────────────┤   812 k ops/s
//!    fjall        ├───────┼─────┼─────────────┤   ...
//!    1 µs     10 µs    100 µs    1 ms    10 ms    100 ms
//! ```
//!
//! Plain SVG written by hand; the benchmark crate's chart layout engine draws other
//! figures and is private to it.

use std::fmt::Write;

use super::report::YcsbRow;

const ROW_H: f64 = 16.0;
const LEFT: f64 = 120.0;
const PLOT_W: f64 = 560.0;
const RIGHT: f64 = 110.0;
const LO_US: f64 = 0.1;
const HI_US: f64 = 1_000_000.0;

fn x_of(us: f64) -> f64 {
    let l = us.clamp(LO_US, HI_US).log10();
    LEFT + (l - LO_US.log10()) / (HI_US.log10() - LO_US.log10()) * PLOT_W
}

fn store_colour(store: &str) -> &'static str {
    match store {
        "bloomkv" => "#1f77b4",
        "fjall" => "#ff7f0e",
        "redb" => "#2ca02c",
        "rocksdb" => "#d62728",
        _ => "#555555",
    }
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart of summary `rows` (the `all` kind of each).
pub fn render_latency_svg(rows: &[YcsbRow]) -> String {
    let mut settings: Vec<&str> = rows.iter().map(|r| r.setting.as_str()).collect();
    settings.sort_unstable();
    settings.dedup();
    let mut body = String::new();
    let mut y = 40.0;
    for setting in &settings {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{y}" font-weight="bold">{} settings: latency of every operation, p50 ├ p99 ┼ p99.9 ┼ max ┤ (µs, log scale)</text>"#,
            esc(setting)
        );
        y += 10.0;
        let top = y;
        let mut last_workload = "";
        for r in rows.iter().filter(|r| r.setting == *setting) {
            let Some(all) = r.kinds.iter().find(|k| k.kind == "all") else {
                continue;
            };
            y += ROW_H;
            if r.workload != last_workload {
                y += 4.0;
                let _ = writeln!(
                    body,
                    r#"<text x="10" y="{y}" font-weight="bold">{}</text>"#,
                    esc(&r.workload)
                );
                last_workload = &r.workload;
            }
            let c = store_colour(&r.store);
            let (x50, x99, x999, xmax) = (
                x_of(all.p50_us),
                x_of(all.p99_us),
                x_of(all.p999_us),
                x_of(all.max_us),
            );
            let mid = y - 4.0;
            let _ = writeln!(
                body,
                r#"<text x="30" y="{y}" fill="{c}">{}</text><line x1="{x50:.1}" y1="{mid}" x2="{xmax:.1}" y2="{mid}" stroke="{c}" stroke-width="2"/>"#,
                esc(&r.store)
            );
            for (x, h) in [(x50, 5.0), (x99, 4.0), (x999, 4.0), (xmax, 5.0)] {
                let _ = writeln!(
                    body,
                    r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"/>"#,
                    mid - h,
                    mid + h
                );
            }
            let _ = writeln!(
                body,
                r#"<text x="{:.1}" y="{y}" fill="{c}">{:.0} k ops/s</text>"#,
                LEFT + PLOT_W + 10.0,
                r.ops_per_sec / 1000.0
            );
        }
        y += 10.0;
        // Decades: gridlines and labels.
        let mut d = LO_US;
        while d <= HI_US * 1.0001 {
            let x = x_of(d);
            let label = if d < 1.0 {
                format!("{d} µs")
            } else if d < 1000.0 {
                format!("{d:.0} µs")
            } else if d < 1_000_000.0 {
                format!("{:.0} ms", d / 1000.0)
            } else {
                format!("{:.0} s", d / 1_000_000.0)
            };
            let _ = writeln!(
                body,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{y}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="10">{label}</text>"##,
                y + 12.0
            );
            d *= 10.0;
        }
        y += 40.0;
    }
    let width = LEFT + PLOT_W + RIGHT;
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#
    )
}
