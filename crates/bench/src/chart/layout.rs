//! The charts' layout engine: a [`Panel`] is one chart, a plotting area with a linear
//! x axis and a linear or logarithmic y axis, ticks, series drawn as bars or lines, and
//! a legend; [`figure`] lays panels out two to a row in one `<svg>`. It knows nothing of
//! the benchmark: `figures.rs` decides what goes into which panel.
//!
//! Labels never collide, by construction rather than by luck: every piece of text is
//! placed as a box whose width is estimated from its length (a generous 0.62 em per
//! character, wider than Helvetica's average), and the layout makes room for it. The
//! legend sits below the plot, never over it; category labels turn vertical when they
//! do not fit their slot, even split over two lines; a bar's value label turns
//! vertical when it is wider than the bar; a panel grows wider when its bars would be
//! too narrow for their labels, and the y axis leaves headroom for the labels over the
//! tallest bar. [`Panel::boxes`] keeps every box, so the tests check the promise: here
//! on the engine's own cases, in `figures.rs` on each figure with the longest names.

use std::fmt::Write as _;

/// The smallest panel width; a panel with many bars grows.
const PANEL_W: f64 = 460.0;
/// The plotting area's height.
const PLOT_H: f64 = 220.0;
const MARGIN_L: f64 = 70.0;
const MARGIN_R: f64 = 20.0;
/// Room for the title above the plot.
const MARGIN_T: f64 = 40.0;
/// The series colours, in order.
pub(super) const COLORS: [&str; 6] = [
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
pub(super) struct Panel {
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
    pub(super) fn new(
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

    /// How many category labels sit under the axis.
    #[cfg(test)]
    pub(super) fn category_count(&self) -> usize {
        self.categories.len()
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

    pub(super) fn line(
        &mut self,
        name: &str,
        color: &'static str,
        dashed: bool,
        points: &[(f64, f64)],
    ) {
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
    pub(super) fn bars(&mut self, labels: &[String], series: &[(&str, &'static str, Vec<f64>)]) {
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
pub(super) fn figure(title: &str, panels: &[(Panel, bool)]) -> String {
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

/// Every text box of every panel lies inside its panel and touches no other.
#[cfg(test)]
pub(super) fn assert_no_collisions(panels: &[(Panel, bool)]) {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn ticks_are_round_steps_within_the_range() {
        assert_eq!(nice_ticks(0.0, 100.0), [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(nice_ticks(0.0, 7.0), [0.0, 2.0, 4.0, 6.0]);
        assert_eq!(nice_ticks(15.0, 65.0), [20.0, 30.0, 40.0, 50.0, 60.0]);
        // An empty or broken range still gets one tick.
        assert_eq!(nice_ticks(5.0, 5.0), [5.0]);
        assert_eq!(nice_ticks(0.0, f64::NAN), [0.0]);
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(1234.4), "1234");
        assert_eq!(short(12.0), "12");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(0.05), "0.05");
        assert_eq!(short(0.0973), "0.0973");
        assert_eq!(short(0.0001), "1e-4");
        assert_eq!(escape("a<b & c>"), "a&lt;b &amp; c&gt;");
    }

    /// A log axis puts each decade at the same height.
    #[test]
    fn a_log_axis_spaces_decades_evenly() {
        let panel = Panel::new("t", "x", "y", (0.0, 1.0), (0.001, 1.0), true);
        for (v, want) in [
            (0.001, 0.0),
            (0.01, 1.0 / 3.0),
            (0.1, 2.0 / 3.0),
            (1.0, 1.0),
        ] {
            assert!(
                (panel.frac(v) - want).abs() < 1e-9,
                "{v}: {}",
                panel.frac(v)
            );
        }
        // Values under the axis sit on it.
        assert_eq!(panel.frac(0.0), 0.0);
    }

    /// Ten bars of one series leave slots of 37 px: labels of five characters fit on
    /// one line, two words of four go on two, one word of ten turns every label
    /// vertical; none of them collides.
    #[test]
    fn category_labels_wrap_then_turn_vertical() {
        let layout = |labels: &[&str]| {
            let mut panel = Panel::new("t", "x", "y", (0.0, 1.0), (0.0, 1.0), false);
            let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
            panel.bars(&labels, &[("s", COLORS[0], vec![1.0; labels.len()])]);
            let lines = match panel.category_layout() {
                CategoryLayout::Lines(lines) => Some(lines.iter().map(Vec::len).max().unwrap_or(0)),
                CategoryLayout::Vertical => None,
            };
            assert_no_collisions(&[(panel, false)]);
            lines
        };
        assert_eq!(layout(&["ab cd"; 10]), Some(1));
        assert_eq!(layout(&["abcd efgh"; 10]), Some(2));
        let mut mixed = ["abcd efgh"; 10];
        mixed[3] = "abcdefghij";
        assert_eq!(layout(&mixed), None);
    }

    /// Legend entries that do not fit one row start another, and the panel grows.
    #[test]
    fn the_legend_wraps_into_rows() {
        let mut panel = Panel::new("t", "x", "y", (0.0, 1.0), (0.0, 1.0), false);
        let one_row = panel.height();
        for (i, color) in COLORS.iter().take(5).enumerate() {
            let name = format!("a long series name {i}");
            panel.line(&name, color, false, &[(0.0, 0.5), (1.0, 0.7)]);
        }
        let rows = panel.legend_layout().last().map_or(0, |&(_, row)| row + 1);
        assert_eq!(rows, 3);
        assert_eq!(panel.height(), one_row + 14.0 * 3.0);
        assert_no_collisions(&[(panel, true)]);
    }
}
