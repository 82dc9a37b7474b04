//! Time ratios between rows, taken run by run: the comparison's figures.
//!
//! The runs are interleaved (every store once per run, the order rotating), so a
//! drift of the machine lands on every store of a run alike and cancels in a ratio
//! of two rows *of the same run*. Dividing one row's median by another's mixes runs
//! and lets that drift back in. So a comparison is the median of the per-run ratios
//! `row / versus`, with a 95% interval for that median:
//!
//! ```text
//! run        0     1     2     3     4   …
//! row      1.2   0.9   1.4   1.1   1.0        µs per lookup
//! versus   2.4   2.0   2.2   2.6   1.9
//! ratio    0.50  0.45  0.64  0.42  0.53       → median, interval from order statistics
//! ```
//!
//! **The interval** is distribution-free, from order statistics: with `n` ratios
//! sorted, `[x(k), x(n+1−k)]` covers the true median with probability
//! `1 − 2·P(B ≤ k−1)`, `B ~ Binomial(n, ½)` (each ratio falls below the median with
//! probability ½, independently from run to run). `k` is the largest with coverage
//! ≥ 95%; no bootstrap, no seed, nothing assumed about the shape of the spread. Below
//! six runs no pair of order statistics reaches 95% (`1 − 2·2⁻⁵ = 93.75%` at five):
//! the interval is then the full range and its `coverage` says what it is worth.
//! With 15 runs it is `[x(4), x(12)]` (96.5%).
//!
//! **A target** ("≤ 0.5× fjall") is met when the interval's upper end is within it,
//! missed when its lower end is beyond it, and undecided otherwise — never judged on
//! the median alone.

use bloomkv_bench::Phase;
use serde::Serialize;

use crate::report::RunRecord;

/// One pair of rows compared over the runs that have both.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    /// The row whose time is divided.
    pub row: String,
    /// The row it is divided by.
    pub versus: String,
    /// `absent`, `present`, or for fills `put` (time per put) and `settled` (first
    /// put until settled).
    pub phase: String,
    /// Median of the per-run ratios.
    pub median: f64,
    /// The 95% interval of that median, `[low, high]` (order statistics).
    pub ci95: [f64; 2],
    /// Runs that had both rows.
    pub runs: usize,
    /// What the interval covers: ≥ 0.95 from six runs on, less below.
    pub coverage: f64,
}

/// How a target reads on an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The whole interval is within the target (and the interval is a 95% one).
    Met,
    /// The whole interval is beyond the target.
    Missed,
    /// The interval straddles the target, or covers less than 95%.
    Undecided,
}

impl Verdict {
    /// The verdict in words.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "missed",
            Verdict::Undecided => "undecided",
        }
    }
}

impl Ratio {
    /// Whether "at most `limit` times `versus`" holds on the interval.
    pub fn at_most(&self, limit: f64) -> Verdict {
        if self.ci95[1] <= limit && self.coverage >= 0.95 {
            Verdict::Met
        } else if self.ci95[0] > limit {
            Verdict::Missed
        } else {
            Verdict::Undecided
        }
    }
}

/// `P(B ≤ j)` for `B ~ Binomial(n, ½)`.
fn binomial_half_cdf(n: usize, j: usize) -> f64 {
    // C(n, i) / 2ⁿ, built up term by term in floating point (exact enough for the
    // run counts a comparison has; no overflow: each term is at most 1).
    let mut term = 0.5f64.powi(n as i32);
    let mut sum = 0.0;
    for i in 0..=j.min(n) {
        sum += term;
        term = term * (n - i) as f64 / (i + 1) as f64;
    }
    sum
}

/// The median of `samples` and its order-statistics interval: `(median, [low, high],
/// coverage)`; `None` for no samples or a NaN.
pub fn median_interval(samples: &[f64]) -> Option<(f64, [f64; 2], f64)> {
    if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    // The largest k (1-based) whose interval [x(k), x(n+1-k)] still covers ≥ 95%.
    let mut k = 1;
    while k < n.div_ceil(2) && 1.0 - 2.0 * binomial_half_cdf(n, k) >= 0.95 {
        k += 1;
    }
    let coverage = 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    Some((median, [s[k - 1], s[n - k]], coverage))
}

/// The ratio `row / versus` over `samples` of `(row, versus)` pairs, one per run
/// (pairs with a zero or non-finite divisor are left out).
pub fn ratio_of(row: &str, versus: &str, phase: &str, samples: &[(f64, f64)]) -> Option<Ratio> {
    let ratios: Vec<f64> = samples
        .iter()
        .filter(|(_, b)| b.is_finite() && *b > 0.0)
        .map(|(a, b)| a / b)
        .collect();
    let (median, ci95, coverage) = median_interval(&ratios)?;
    Some(Ratio {
        row: row.into(),
        versus: versus.into(),
        phase: phase.into(),
        median,
        ci95,
        runs: ratios.len(),
        coverage,
    })
}

/// The lookup-time ratio of `row` to `versus` in `phase`, run by run.
pub fn lookup_ratio(records: &[RunRecord], row: &str, versus: &str, phase: Phase) -> Option<Ratio> {
    let samples: Vec<(f64, f64)> = records
        .iter()
        .filter_map(|r| {
            let find = |label: &str| {
                r.rows
                    .iter()
                    .find(|x| x.filter == label && x.phase == phase)
                    .map(|x| x.ns_per_lookup)
            };
            Some((find(row)?, find(versus)?))
        })
        .collect();
    ratio_of(row, versus, phase.name(), &samples)
}

/// The fill ratios of `row` to `versus`, run by run: time per put, and first put
/// until settled.
pub fn fill_ratios(records: &[RunRecord], row: &str, versus: &str) -> Vec<Ratio> {
    let pick = |f: &dyn Fn(&crate::fill::FillResult) -> f64| -> Vec<(f64, f64)> {
        records
            .iter()
            .filter_map(|r| {
                let find = |label: &str| r.fills.iter().find(|x| x.store == label).map(f);
                Some((find(row)?, find(versus)?))
            })
            .collect()
    };
    [
        ratio_of(row, versus, "put", &pick(&|f| f.ns_per_put)),
        ratio_of(row, versus, "settled", &pick(&|f| f.total_ms)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Every ratio of a comparison: each pair `(row, versus)` in both lookup phases and,
/// for fills, put and settled; pairs without common runs are left out.
pub fn all_ratios(records: &[RunRecord], pairs: &[(String, String)]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for (row, versus) in pairs {
        for phase in [Phase::Absent, Phase::Present] {
            out.extend(lookup_ratio(records, row, versus, phase));
        }
        out.extend(fill_ratios(records, row, versus));
    }
    out
}

/// The ratios as a table: median, interval and what it covers.
pub fn print_ratios(ratios: &[Ratio]) -> String {
    let mut out = String::from(
        "time ratios, run by run (median of per-run ratios; 95% interval from order statistics)\n",
    );
    let mut cells = vec![vec![
        "row".to_string(),
        "versus".into(),
        "phase".into(),
        "median".into(),
        "95% interval".into(),
        "covers".into(),
        "runs".into(),
    ]];
    for r in ratios {
        cells.push(vec![
            r.row.clone(),
            r.versus.clone(),
            r.phase.clone(),
            format!("{:.2}x", r.median),
            format!("{:.2}–{:.2}x", r.ci95[0], r.ci95[1]),
            format!("{:.1}%", r.coverage * 100.0),
            r.runs.to_string(),
        ]);
    }
    out.push_str(&crate::report::aligned(cells, 3));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomkv_bench::{FilterShape, PhaseResult, Row, StoreCounters};

    fn row(label: &str, phase: Phase, ns: f64) -> Row {
        let result = PhaseResult {
            lookups: 1000,
            found: if phase == Phase::Present { 1000 } else { 0 },
            counters: StoreCounters::default(),
            os: None,
            nanos: (ns * 1000.0) as u128,
            threads: 1,
        };
        Row::new(label, phase, &result, &FilterShape::default(), 1000)
    }

    fn records(a: &[f64], b: &[f64]) -> Vec<RunRecord> {
        a.iter()
            .zip(b)
            .enumerate()
            .map(|(run, (&x, &y))| RunRecord {
                run,
                order: vec!["a".into(), "b".into()],
                rows: vec![row("a", Phase::Present, x), row("b", Phase::Present, y)],
                fills: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn binomial_tail_and_coverage_at_known_run_counts() {
        // P(B ≤ 3) for n = 15: (1 + 15 + 105 + 455) / 32768.
        assert!((binomial_half_cdf(15, 3) - 576.0 / 32768.0).abs() < 1e-15);
        assert!((binomial_half_cdf(5, 0) - 1.0 / 32.0).abs() < 1e-15);
        assert!((binomial_half_cdf(4, 4) - 1.0).abs() < 1e-15);

        let samples: Vec<f64> = (1..=15).map(f64::from).collect();
        let (median, ci, coverage) = median_interval(&samples).unwrap();
        assert_eq!(median, 8.0);
        // k = 4: [x(4), x(12)], coverage 1 − 2·576/32768.
        assert_eq!(ci, [4.0, 12.0]);
        assert!((coverage - (1.0 - 1152.0 / 32768.0)).abs() < 1e-12);

        // Six runs: [x(1), x(6)] is the first interval to reach 95% (1 − 2/64).
        let (_, ci, coverage) = median_interval(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]).unwrap();
        assert_eq!(ci, [1.0, 6.0]);
        assert!((coverage - 0.96875).abs() < 1e-12);

        // Five: the full range, and it covers only 93.75%.
        let (median, ci, coverage) = median_interval(&[0.29, 0.74, 0.51, 0.42, 0.50]).unwrap();
        assert_eq!((median, ci), (0.50, [0.29, 0.74]));
        assert!((coverage - 0.9375).abs() < 1e-12);

        // 30 runs: k = 10, [x(10), x(21)] (P(B ≤ 9) = 0.0214 ≤ 0.025 < P(B ≤ 10)).
        let samples: Vec<f64> = (1..=30).map(f64::from).collect();
        let (_, ci, coverage) = median_interval(&samples).unwrap();
        assert_eq!(ci, [10.0, 21.0]);
        assert!((0.95..0.96).contains(&coverage), "{coverage}");

        assert_eq!(median_interval(&[]), None);
        assert_eq!(median_interval(&[1.0, f64::NAN]), None);
    }

    /// The audit's case: the medians of the two rows say "≤ 0.5×, met", the runs do
    /// not. Row a is fast in runs where b is fast too; a ratio of medians pairs a's
    /// fast run with b's slow one.
    #[test]
    fn medians_of_rows_say_met_but_the_per_run_ratios_do_not() {
        let a = [
            1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0,
        ];
        let b = [
            1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 2.1, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
        ];
        let median = |v: &[f64]| bloomkv_bench_median(v);
        let of_medians = median(&a) / median(&b);
        assert!(of_medians <= 0.5, "medians of rows: {of_medians}");

        let recs = records(&a, &b);
        let r = lookup_ratio(&recs, "a", "b", Phase::Present).unwrap();
        assert_eq!(r.runs, 15);
        // Per-run ratios: seven of 1/1.2, one of 1/2.1, seven of 0.5: median 0.5,
        // interval [x(4), x(12)] = [0.5, 0.833].
        assert!((r.median - 0.5).abs() < 1e-12, "{r:?}");
        assert!((r.ci95[0] - 0.5).abs() < 1e-12);
        assert!((r.ci95[1] - 1.0 / 1.2).abs() < 1e-12);
        assert_eq!(r.at_most(0.5), Verdict::Undecided);
        assert_eq!(r.at_most(0.9), Verdict::Met);
        assert_eq!(r.at_most(0.45), Verdict::Missed);

        // The same rows with b always twice a: met, on a tight interval.
        let b2: Vec<f64> = a.iter().map(|x| 2.0 * x).collect();
        let r = lookup_ratio(&records(&a, &b2), "a", "b", Phase::Present).unwrap();
        assert_eq!((r.median, r.ci95), (0.5, [0.5, 0.5]));
        assert_eq!(r.at_most(0.5), Verdict::Met);
        // Five runs never meet a target: their interval covers less than 95%.
        let r = lookup_ratio(&records(&a[..5], &b2[..5]), "a", "b", Phase::Present).unwrap();
        assert_eq!(r.at_most(0.5), Verdict::Undecided);
        // The absent phase has no rows: no ratio.
        assert_eq!(lookup_ratio(&recs, "a", "b", Phase::Absent), None);
    }

    fn bloomkv_bench_median(v: &[f64]) -> f64 {
        crate::plan::Spread::of(v).unwrap().median
    }

    #[test]
    fn runs_missing_a_row_are_left_out_and_the_table_prints_every_ratio() {
        let mut recs = records(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]);
        recs[1].rows.retain(|r| r.filter != "b");
        let ratios = all_ratios(&recs, &[("a".into(), "b".into())]);
        assert_eq!(ratios.len(), 1);
        assert_eq!((ratios[0].runs, ratios[0].median), (2, 0.5));
        let text = print_ratios(&ratios);
        assert!(
            text.contains("0.50x") && text.contains("0.50–0.50x"),
            "{text}"
        );
        assert!(text.contains("50.0%"), "{text}");
    }
}
