//! Hand-written SVG charts of the benchmark's results (no plotting dependency).
//!
//! A [`Panel`] is one chart: a plotting area with a linear x axis and a linear or
//! logarithmic y axis, ticks, series drawn as bars or lines, and a legend. A figure is
//! panels side by side in one `<svg>`.

use std::fmt::Write as _;

use super::{Phase, Row, SweepPoint};

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 320.0;
const MARGIN_L: f64 = 70.0;
const MARGIN_R: f64 = 20.0;
const MARGIN_T: f64 = 40.0;
const MARGIN_B: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860",
];

/// One chart within a figure.
struct Panel {
    title: String,
    x_label: String,
    y_label: String,
    x_min: f64,
    x_max: f64,
    y_min: f64,
    y_max: f64,
    log_y: bool,
    body: String,
    legend: Vec<(String, &'static str, bool)>,
}

impl Panel {
    fn new(
        title: &str,
        x_label: &str,
        y_label: &str,
        x: (f64, f64),
        y: (f64, f64),
        log_y: bool,
    ) -> Panel {
        Panel {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_min: x.0,
            x_max: x.1,
            y_min: y.0,
            y_max: y.1,
            log_y,
            body: String::new(),
            legend: Vec::new(),
        }
    }

    fn px(&self, x: f64) -> f64 {
        let w = PANEL_W - MARGIN_L - MARGIN_R;
        MARGIN_L + (x - self.x_min) / (self.x_max - self.x_min).max(f64::MIN_POSITIVE) * w
    }

    fn py(&self, y: f64) -> f64 {
        let h = PANEL_H - MARGIN_T - MARGIN_B;
        let t = if self.log_y {
            let y = y.max(self.y_min);
            (y.log10() - self.y_min.log10()) / (self.y_max.log10() - self.y_min.log10())
        } else {
            (y - self.y_min) / (self.y_max - self.y_min).max(f64::MIN_POSITIVE)
        };
        PANEL_H - MARGIN_B - t.clamp(0.0, 1.0) * h
    }

    fn line(&mut self, name: &str, color: &'static str, dashed: bool, points: &[(f64, f64)]) {
        if points.is_empty() {
            return;
        }
        let path: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", self.px(x), self.py(y)))
            .collect();
        let dash = if dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let _ = writeln!(
            self.body,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            path.join(" ")
        );
        if !dashed {
            for &(x, y) in points {
                let _ = writeln!(
                    self.body,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"/>",
                    self.px(x),
                    self.py(y)
                );
            }
        }
        self.legend.push((name.into(), color, dashed));
    }

    /// Bars at integer x positions 0..n, labelled below, value printed above.
    fn bars(&mut self, labels: &[String], series: &[(&str, &'static str, Vec<f64>)]) {
        let groups = labels.len().max(1) as f64;
        let slot = (PANEL_W - MARGIN_L - MARGIN_R) / groups;
        let bar = slot * 0.7 / series.len().max(1) as f64;
        for (g, label) in labels.iter().enumerate() {
            let x0 = MARGIN_L + slot * g as f64 + slot * 0.15;
            for (s, (_, color, values)) in series.iter().enumerate() {
                let Some(&v) = values.get(g) else { continue };
                if !v.is_finite() || v <= 0.0 && self.log_y {
                    continue;
                }
                let top = self.py(v);
                let x = x0 + bar * s as f64;
                let _ = writeln!(
                    self.body,
                    "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\"/>",
                    bar * 0.95,
                    (PANEL_H - MARGIN_B - top).max(0.0)
                );
                let _ = writeln!(
                    self.body,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
                    x + bar * 0.475,
                    top - 3.0,
                    short(v)
                );
            }
            let _ = writeln!(
                self.body,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                MARGIN_L + slot * (g as f64 + 0.5),
                PANEL_H - MARGIN_B + 16.0,
                escape(label)
            );
        }
        for (name, color, _) in series {
            self.legend.push(((*name).into(), color, false));
        }
    }

    fn render(&self, offset_x: f64, x_ticks: bool) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "<g transform=\"translate({offset_x:.0},0)\">");
        let (left, right) = (MARGIN_L, PANEL_W - MARGIN_R);
        let (top, bottom) = (MARGIN_T, PANEL_H - MARGIN_B);
        let _ = writeln!(
            s,
            "<text x=\"{:.0}\" y=\"22\" font-size=\"14\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>",
            PANEL_W / 2.0,
            escape(&self.title)
        );
        // y ticks: decades on a log axis, five steps on a linear one.
        let ticks: Vec<f64> = if self.log_y {
            let (lo, hi) = (
                self.y_min.log10().floor() as i32,
                self.y_max.log10().ceil() as i32,
            );
            (lo..=hi)
                .map(|e| 10f64.powi(e))
                .filter(|v| *v >= self.y_min && *v <= self.y_max)
                .collect()
        } else {
            nice_ticks(self.y_min, self.y_max)
        };
        for v in ticks {
            let y = self.py(v);
            let _ = writeln!(
                s,
                "<line x1=\"{left}\" x2=\"{right}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{:.0}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
                left - 4.0,
                y + 3.0,
                short(v)
            );
        }
        if x_ticks {
            let span = self.x_max - self.x_min;
            let step = if span > 12.0 { 2.0 } else { 1.0 };
            let mut x = self.x_min;
            while x <= self.x_max + 1e-9 {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.0}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
                    self.px(x),
                    bottom + 14.0,
                    short(x)
                );
                x += step;
            }
        }
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{bottom}\" stroke=\"#333\"/>\
             <line x1=\"{left}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"#333\"/>"
        );
        s.push_str(&self.body);
        let _ = writeln!(
            s,
            "<text x=\"{:.0}\" y=\"{:.0}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            (left + right) / 2.0,
            PANEL_H - 22.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            "<text transform=\"translate(16,{:.0}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            (top + bottom) / 2.0,
            escape(&self.y_label)
        );
        for (i, (name, color, dashed)) in self.legend.iter().enumerate() {
            let y = top + 8.0 + 14.0 * i as f64;
            let dash = if *dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "<line x1=\"{:.0}\" x2=\"{:.0}\" y1=\"{y:.0}\" y2=\"{y:.0}\" stroke=\"{color}\" stroke-width=\"3\"{dash}/>\
                 <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"10\">{}</text>",
                right - 150.0,
                right - 130.0,
                right - 125.0,
                y + 3.0,
                escape(name)
            );
        }
        s.push_str("</g>\n");
        s
    }
}

/// Round tick values (steps of 1, 2 or 5 times a power of ten) covering `[lo, hi]`.
fn nice_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo) / 5.0;
    if raw <= 0.0 || !raw.is_finite() {
        return vec![lo];
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

fn short(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}").trim_end_matches(".0").to_string()
    } else if v.abs() >= 0.001 {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').to_string()
    } else {
        format!("{v:.0e}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Panels laid out two to a row in one `<svg>`.
fn figure(title: &str, panels: &[(Panel, bool)]) -> String {
    let cols = panels.len().clamp(1, 2);
    let rows = panels.len().div_ceil(cols);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{:.0}\" \
         font-family=\"Helvetica, Arial, sans-serif\">\n<title>{}</title>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        PANEL_W * cols as f64,
        PANEL_H * rows as f64,
        escape(title)
    );
    for (i, (panel, x_ticks)) in panels.iter().enumerate() {
        let (col, row) = (i % cols, i / cols);
        let _ = writeln!(
            s,
            "<g transform=\"translate(0,{:.0})\">",
            PANEL_H * row as f64
        );
        s.push_str(&panel.render(PANEL_W * col as f64, *x_ticks));
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

/// Reads per absent lookup for each filter, and observed vs formula FP.
pub fn render_savings_svg(rows: &[Row]) -> String {
    let absent: Vec<&Row> = rows.iter().filter(|r| r.phase == Phase::Absent).collect();
    let labels: Vec<String> = absent.iter().map(|r| r.filter.clone()).collect();
    let reads: Vec<f64> = absent.iter().map(|r| r.reads_per_lookup).collect();
    let y_max = reads.iter().cloned().fold(1.0, f64::max) * 2.0;
    let mut left = Panel::new(
        "Table reads per absent-key lookup",
        "filter",
        "reads per lookup (log scale)",
        (0.0, 1.0),
        (0.001, y_max),
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
    let fp_max = observed.iter().chain(&formula).cloned().fold(0.5, f64::max) * 1.3;
    let mut right = Panel::new(
        "False-positive rate: observed vs formula",
        "filter",
        "false positives (%)",
        (0.0, 1.0),
        (0.0, fp_max),
        false,
    );
    right.bars(
        &fp_labels,
        &[
            ("observed", COLORS[1], observed),
            ("formula", COLORS[2], formula),
        ],
    );
    figure("bloomkv disk-I/O savings", &[(left, false), (right, false)])
}

/// FP and reads per lookup against bits per key; FP and time against probes.
pub fn render_sweep_svg(bits: &[SweepPoint], probes: &[SweepPoint]) -> String {
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
    figure(
        "bloomkv filter sweeps",
        &[(fp, true), (reads, true), (kfp, true), (kns, true)],
    )
}
