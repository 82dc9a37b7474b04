//! Hand-written SVG charts of the benchmark's results (no plotting dependency).
//!
//! A [`Panel`] is one chart: a plotting area with a linear x axis and a linear or
//! logarithmic y axis, ticks, series drawn as bars or lines, and a legend. A figure is
//! panels laid out two to a row in one `<svg>`.
//!
//! Labels never collide, by construction rather than by luck: every piece of text is
//! placed as a box whose width is estimated from its length (a generous 0.62 em per
//! character, wider than Helvetica's average), and the layout makes room for it. The
//! legend sits below the plot, never over it; category labels turn vertical when they
//! do not fit their slot, even split over two lines; a bar's value label turns vertical when it is wider than the
//! bar; a panel grows wider when its bars would be too narrow for their labels, and
//! the y axis leaves headroom for the labels over the tallest bar. [`Panel::boxes`]
//! keeps every box, so the tests check the promise on the longest names.
//!
//! Why not a plotting crate: `plotters` needs a font backend to measure text (its
//! `ttf` feature links the system's fontconfig and FreeType, its `ab_glyph` feature
//! wants a font file embedded in the binary), and it would not keep labels apart
//! either: that is layout work the chart has to do anyway. The charts here are a few
//! hundred lines of plain SVG with no dependency.

use std::fmt::Write as _;

use super::leveled::LeveledRow;
use super::range::{RangeRow, RANGE_LENGTHS};
use super::{Phase, Row, SweepPoint};

/// The smallest panel width; a panel with many bars grows.
const PANEL_W: f64 = 460.0;
/// The plotting area's height.
const PLOT_H: f64 = 220.0;
const MARGIN_L: f64 = 70.0;
const MARGIN_R: f64 = 20.0;
/// Room for the title above the plot.
const MARGIN_T: f64 = 40.0;
const COLORS: [&str; 6] = [
    "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860",
];
/// Font sizes.
const TICK_FONT: f64 = 10.0;
const LABEL_FONT: f64 = 11.0;
const AXIS_FONT: f64 = 12.0;
const TITLE_FONT: f64 = 14.0;
/// Estimated width of one character, in em (Helvetica averages ~0.55).
const CHAR_EM: f64 = 0.62;
/// Space kept between neighbouring pieces of text.
const GAP: f64 = 2.0;

/// Estimated width of `text` set at `font` px.
fn text_width(text: &str, font: f64) -> f64 {
    text.chars().count() as f64 * font * CHAR_EM
}

/// Where one piece of text lies (panel coordinates, y downwards).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextBox {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
    pub text: String,
}

#[cfg(test)]
impl TextBox {
    fn overlaps(&self, other: &TextBox) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }
}

/// Category labels: one or two lines each, or all turned vertical.
enum CategoryLayout {
    Lines(Vec<Vec<String>>),
    Vertical,
}

/// Distance between two lines of a wrapped label.
const LINE_H: f64 = 14.0;

/// How a text is anchored at its point.
#[derive(Clone, Copy)]
enum Anchor {
    Start,
    Middle,
    End,
}

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
    width: f64,
    body: String,
    boxes: Vec<TextBox>,
    legend: Vec<(String, &'static str, bool)>,
    /// Category labels under the axis: (centre x, slot width, text).
    categories: Vec<(f64, f64, String)>,
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
            width: PANEL_W,
            body: String::new(),
            boxes: Vec::new(),
            legend: Vec::new(),
            categories: Vec::new(),
        }
    }

    fn px(&self, x: f64) -> f64 {
        let w = self.width - MARGIN_L - MARGIN_R;
        MARGIN_L + (x - self.x_min) / (self.x_max - self.x_min).max(f64::MIN_POSITIVE) * w
    }

    /// The fraction of the plot's height at which `y` lies (0 bottom, 1 top).
    fn frac(&self, y: f64) -> f64 {
        let t = if self.log_y {
            let y = y.max(self.y_min);
            (y.log10() - self.y_min.log10()) / (self.y_max.log10() - self.y_min.log10())
        } else {
            (y - self.y_min) / (self.y_max - self.y_min).max(f64::MIN_POSITIVE)
        };
        t.clamp(0.0, 1.0)
    }

    fn py(&self, y: f64) -> f64 {
        MARGIN_T + PLOT_H - self.frac(y) * PLOT_H
    }

    /// Writes a text and records its box. `vertical` texts read bottom to top, their
    /// anchor at the point's y.
    #[allow(clippy::too_many_arguments)]
    fn text(
        out: &mut String,
        boxes: &mut Vec<TextBox>,
        x: f64,
        y: f64,
        font: f64,
        anchor: Anchor,
        vertical: bool,
        extra: &str,
        text: &str,
    ) {
        let w = text_width(text, font);
        let (lo, hi) = match anchor {
            Anchor::Start => (0.0, w),
            Anchor::Middle => (-w / 2.0, w / 2.0),
            Anchor::End => (-w, 0.0),
        };
        let anchor_name = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        if vertical {
            // Rotated -90° about (x, y): the text runs upwards from y - lo to y - hi,
            // its glyphs' height to the left of x (the baseline).
            boxes.push(TextBox {
                x0: x - font,
                y0: y - hi,
                x1: x + 0.25 * font,
                y1: y - lo,
                text: text.into(),
            });
            let _ = writeln!(
                out,
                "<text transform=\"translate({x:.1},{y:.1}) rotate(-90)\" font-size=\"{font}\" text-anchor=\"{anchor_name}\"{extra}>{}</text>",
                escape(text)
            );
        } else {
            boxes.push(TextBox {
                x0: x + lo,
                y0: y - font,
                x1: x + hi,
                y1: y + 0.25 * font,
                text: text.into(),
            });
            let _ = writeln!(
                out,
                "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{font}\" text-anchor=\"{anchor_name}\"{extra}>{}</text>",
                escape(text)
            );
        }
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

    /// Grouped bars, one group per label, each value printed over its bar. Sets the
    /// panel's width (bars at least wide enough for a vertical value label) and the
    /// top of its y range (room for the labels over the tallest bar).
    fn bars(&mut self, labels: &[String], series: &[(&str, &'static str, Vec<f64>)]) {
        let groups = labels.len().max(1) as f64;
        let per_group = series.len().max(1) as f64;
        // Bars take 70% of a slot; a bar must hold a vertical label and a gap.
        let min_bar = TICK_FONT * 1.25 + GAP;
        let min_slot = (min_bar * per_group / 0.7).max(LABEL_FONT * 1.25 + GAP);
        self.width = self
            .width
            .max(MARGIN_L + MARGIN_R + groups * min_slot)
            .ceil();
        let slot = (self.width - MARGIN_L - MARGIN_R) / groups;
        let bar = slot * 0.7 / per_group;
        // Headroom: the longest value label must fit between the tallest bar and the
        // top of the plot.
        let values = || series.iter().flat_map(|s| s.2.iter().copied());
        let top_value = values()
            .filter(|v| v.is_finite() && (*v > 0.0 || !self.log_y))
            .fold(f64::MIN_POSITIVE, f64::max);
        let longest = values()
            .map(|v| {
                let w = text_width(&short(v), TICK_FONT);
                if w > bar * 0.95 {
                    w
                } else {
                    TICK_FONT
                }
            })
            .fold(0.0, f64::max);
        let keep = ((PLOT_H - longest - 2.0 * GAP - 3.0) / PLOT_H).clamp(0.2, 1.0);
        if self.log_y {
            let span = (top_value.log10() - self.y_min.log10()).max(0.1);
            self.y_max = 10f64.powf(self.y_min.log10() + span / keep);
        } else {
            self.y_max = (top_value - self.y_min) / keep + self.y_min;
        }
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
                    (MARGIN_T + PLOT_H - top).max(0.0)
                );
                let value = short(v);
                let centre = x + bar * 0.475;
                if text_width(&value, TICK_FONT) <= bar * 0.95 {
                    Panel::text(
                        &mut self.body,
                        &mut self.boxes,
                        centre,
                        top - 3.0,
                        TICK_FONT,
                        Anchor::Middle,
                        false,
                        "",
                        &value,
                    );
                } else {
                    Panel::text(
                        &mut self.body,
                        &mut self.boxes,
                        centre + TICK_FONT * 0.4,
                        top - 3.0,
                        TICK_FONT,
                        Anchor::Start,
                        true,
                        "",
                        &value,
                    );
                }
            }
            self.categories
                .push((MARGIN_L + slot * (g as f64 + 0.5), slot, label.clone()));
        }
        for (name, color, _) in series {
            self.legend.push(((*name).into(), color, false));
        }
    }

    /// How the category labels fit under their slots: each on one line, each on at
    /// most two (split at a space), or else turned vertical.
    fn category_layout(&self) -> CategoryLayout {
        let fits = |text: &str, slot: f64| text_width(text, LABEL_FONT) + GAP <= slot;
        if self.categories.iter().all(|(_, slot, t)| fits(t, *slot)) {
            return CategoryLayout::Lines(
                self.categories.iter().map(|c| vec![c.2.clone()]).collect(),
            );
        }
        let wrapped: Option<Vec<Vec<String>>> = self
            .categories
            .iter()
            .map(|(_, slot, text)| {
                if fits(text, *slot) {
                    return Some(vec![text.clone()]);
                }
                // The split at a space that makes the longer line shortest.
                text.match_indices(' ')
                    .map(|(i, _)| (&text[..i], &text[i + 1..]))
                    .filter(|(a, b)| fits(a, *slot) && fits(b, *slot))
                    .min_by(|x, y| {
                        let w = |(a, b): &(&str, &str)| a.len().max(b.len());
                        w(x).cmp(&w(y))
                    })
                    .map(|(a, b)| vec![a.to_string(), b.to_string()])
            })
            .collect();
        match wrapped {
            Some(lines) => CategoryLayout::Lines(lines),
            None => CategoryLayout::Vertical,
        }
    }

    /// Legend entries placed in rows under the plot: (x, row) per entry.
    fn legend_layout(&self) -> Vec<(f64, usize)> {
        let (left, right) = (MARGIN_L, self.width - MARGIN_R);
        let mut placed = Vec::new();
        let (mut x, mut row) = (left, 0usize);
        for (name, _, _) in &self.legend {
            let w = 25.0 + text_width(name, TICK_FONT) + 12.0;
            if x > left && x + w > right {
                x = left;
                row += 1;
            }
            placed.push((x, row));
            x += w;
        }
        placed
    }

    /// Height of everything under the plot: category or tick labels, the axis
    /// label, the legend.
    fn height(&self) -> f64 {
        let labels = match self.category_layout() {
            CategoryLayout::Vertical => {
                self.categories
                    .iter()
                    .map(|(_, _, t)| text_width(t, LABEL_FONT))
                    .fold(0.0, f64::max)
                    + 8.0
            }
            CategoryLayout::Lines(lines) => {
                let most = lines.iter().map(Vec::len).max().unwrap_or(1).max(1);
                18.0 + LINE_H * (most - 1) as f64
            }
        };
        let legend_rows = self.legend_layout().last().map_or(0, |&(_, row)| row + 1);
        MARGIN_T + PLOT_H + labels + 22.0 + 14.0 * legend_rows as f64 + 8.0
    }

    /// The panel as SVG (panel coordinates) and every text box in it.
    fn render(&self, x_ticks: bool) -> (String, Vec<TextBox>) {
        let mut s = String::new();
        let mut boxes = self.boxes.clone();
        let (left, right) = (MARGIN_L, self.width - MARGIN_R);
        let (top, bottom) = (MARGIN_T, MARGIN_T + PLOT_H);
        Panel::text(
            &mut s,
            &mut boxes,
            self.width / 2.0,
            22.0,
            TITLE_FONT,
            Anchor::Middle,
            false,
            " font-weight=\"bold\"",
            &self.title,
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
                "<line x1=\"{left}\" x2=\"{right}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>"
            );
            Panel::text(
                &mut s,
                &mut boxes,
                left - 4.0,
                y + 3.0,
                TICK_FONT,
                Anchor::End,
                false,
                "",
                &short(v),
            );
        }
        if x_ticks {
            let span = self.x_max - self.x_min;
            let step = if span > 12.0 { 2.0 } else { 1.0 };
            let mut x = self.x_min;
            while x <= self.x_max + 1e-9 {
                Panel::text(
                    &mut s,
                    &mut boxes,
                    self.px(x),
                    bottom + 14.0,
                    TICK_FONT,
                    Anchor::Middle,
                    false,
                    "",
                    &short(x),
                );
                x += step;
            }
        }
        match self.category_layout() {
            CategoryLayout::Vertical => {
                for (x, _, text) in &self.categories {
                    Panel::text(
                        &mut s,
                        &mut boxes,
                        x + LABEL_FONT * 0.4,
                        bottom + 6.0,
                        LABEL_FONT,
                        Anchor::End,
                        true,
                        "",
                        text,
                    );
                }
            }
            CategoryLayout::Lines(lines) => {
                for ((x, _, _), lines) in self.categories.iter().zip(lines) {
                    for (i, line) in lines.iter().enumerate() {
                        Panel::text(
                            &mut s,
                            &mut boxes,
                            *x,
                            bottom + 16.0 + LINE_H * i as f64,
                            LABEL_FONT,
                            Anchor::Middle,
                            false,
                            "",
                            line,
                        );
                    }
                }
            }
        }
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{bottom}\" stroke=\"#333\"/>\
             <line x1=\"{left}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"#333\"/>"
        );
        s.push_str(&self.body);
        let legend = self.legend_layout();
        let legend_rows = legend.last().map_or(0, |&(_, row)| row + 1);
        let legend_top = self.height() - 8.0 - 14.0 * legend_rows as f64;
        Panel::text(
            &mut s,
            &mut boxes,
            (left + right) / 2.0,
            legend_top - 8.0,
            AXIS_FONT,
            Anchor::Middle,
            false,
            "",
            &self.x_label,
        );
        Panel::text(
            &mut s,
            &mut boxes,
            16.0,
            (top + bottom) / 2.0,
            AXIS_FONT,
            Anchor::Middle,
            true,
            "",
            &self.y_label,
        );
        for ((name, color, dashed), (x, row)) in self.legend.iter().zip(legend) {
            let y = legend_top + 7.0 + 14.0 * row as f64;
            let dash = if *dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "<line x1=\"{x:.0}\" x2=\"{:.0}\" y1=\"{y:.0}\" y2=\"{y:.0}\" stroke=\"{color}\" stroke-width=\"3\"{dash}/>",
                x + 20.0
            );
            Panel::text(
                &mut s,
                &mut boxes,
                x + 25.0,
                y + 3.0,
                TICK_FONT,
                Anchor::Start,
                false,
                "",
                name,
            );
        }
        (s, boxes)
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

/// Panels laid out two to a row in one `<svg>`; a row is as tall as its tallest
/// panel, the figure as wide as its widest row.
fn figure(title: &str, panels: &[(Panel, bool)]) -> String {
    let rows: Vec<&[(Panel, bool)]> = panels.chunks(2).collect();
    let row_h: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().map(|(p, _)| p.height()).fold(0.0, f64::max))
        .collect();
    let width = rows
        .iter()
        .map(|r| r.iter().map(|(p, _)| p.width).sum::<f64>())
        .fold(0.0, f64::max);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" \
         font-family=\"Helvetica, Arial, sans-serif\">\n<title>{}</title>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        row_h.iter().sum::<f64>(),
        escape(title)
    );
    let mut y = 0.0;
    for (row, h) in rows.iter().zip(&row_h) {
        let mut x = 0.0;
        for (panel, x_ticks) in row.iter() {
            let _ = writeln!(s, "<g transform=\"translate({x:.0},{y:.0})\">");
            s.push_str(&panel.render(*x_ticks).0);
            s.push_str("</g>\n");
            x += panel.width;
        }
        y += h;
    }
    s.push_str("</svg>\n");
    s
}

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
    let per_level =
        |f: &dyn Fn(&super::leveled::LevelRow) -> f64| -> Vec<(&str, &'static str, Vec<f64>)> {
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
    use crate::leveled::LevelRow;
    use bloomkv_kv::LevelStats;

    /// Every text box of every panel lies inside its panel and touches no other.
    fn assert_no_collisions(panels: &[(Panel, bool)]) {
        for (panel, x_ticks) in panels {
            let (_, boxes) = panel.render(*x_ticks);
            let (w, h) = (panel.width, panel.height());
            for b in &boxes {
                assert!(
                    b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= w && b.y1 <= h,
                    "{:?} leaves panel {:?} ({w} x {h})",
                    b,
                    panel.title
                );
            }
            for (i, a) in boxes.iter().enumerate() {
                for b in &boxes[i + 1..] {
                    assert!(
                        !a.overlaps(b),
                        "in {:?}: {:?} overlaps {:?}",
                        panel.title,
                        a,
                        b
                    );
                }
            }
        }
    }

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
            threads: 1,
            lookups_per_sec: 1e9 / ns,
            block_cache_hits: None,
            table_bytes: None,
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
        assert_eq!(panel.categories.len(), RANGE_LENGTHS.len());
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

    /// The check itself can fail: two labels at one spot collide.
    #[test]
    fn the_collision_check_sees_a_collision() {
        let mut panel = Panel::new("t", "x", "y", (0.0, 1.0), (0.0, 1.0), false);
        let (mut out, mut boxes) = (String::new(), Vec::new());
        for _ in 0..2 {
            Panel::text(
                &mut out,
                &mut boxes,
                200.0,
                100.0,
                LABEL_FONT,
                Anchor::Middle,
                false,
                "",
                "label",
            );
        }
        panel.boxes = boxes;
        let result = std::panic::catch_unwind(|| assert_no_collisions(&[(panel, false)]));
        assert!(result.is_err());
    }
}
