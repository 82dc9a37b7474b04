//! Repeated runs: in which order the stores go, and how their times are summed up.
//!
//! A shared machine drifts: another build starts, the page cache fills, the CPU
//! clocks down. Run every store once, then every store again, and a drift lands on
//! all of them alike; run one store five times, then the next, and it lands on one.
//! So each of the `runs` rounds visits every store once, and the order rotates by one
//! place per round, so no store is always first (after a quiet start) or always last:
//!
//! ```text
//! round 0:  a b c d
//! round 1:  b c d a
//! round 2:  c d a b
//! ```
//!
//! A row's time is then the median of its rounds, with the smallest and largest (and
//! the quartiles) beside it: the spread says how far one round can be trusted.

use serde::Serialize;

/// The order of `stores` stores in each of `runs` rounds: round `r` starts at store
/// `r mod stores` and goes on in list order, wrapping around.
pub fn run_order(stores: usize, runs: usize) -> Vec<Vec<usize>> {
    (0..runs)
        .map(|r| (0..stores).map(|i| (i + r) % stores.max(1)).collect())
        .collect()
}

/// Median, quartiles and range of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Samples summed up.
    pub n: usize,
    /// The middle sample (the mean of the two middle ones for an even count).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// First quartile (linear interpolation between order statistics).
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
}

impl Spread {
    /// Sums up `samples`; `None` if there are none or one is not a number.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Spread {
            n: s.len(),
            median: quantile(&s, 0.5),
            min: s[0],
            max: s[s.len() - 1],
            q1: quantile(&s, 0.25),
            q3: quantile(&s, 0.75),
        })
    }

    /// `max - min` as a share of the median (0 for a zero median).
    pub fn relative_range(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median
        }
    }
}

/// The `q`-quantile of sorted, non-empty `s`: the value at position `q · (n − 1)`,
/// interpolated between the two samples around it.
fn quantile(s: &[f64], q: f64) -> f64 {
    let pos = q * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_visits_every_store_once_and_the_start_rotates() {
        let plan = run_order(4, 6);
        assert_eq!(plan.len(), 6);
        for (r, round) in plan.iter().enumerate() {
            let mut seen = round.clone();
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1, 2, 3], "round {r}");
            // Rotation: round r starts at store r mod 4, and list order is kept.
            assert_eq!(round[0], r % 4);
            for w in round.windows(2) {
                assert_eq!(w[1], (w[0] + 1) % 4);
            }
        }
        assert_eq!(plan[1], vec![1, 2, 3, 0]);
        // Over four rounds every store takes every position exactly once.
        for store in 0..4 {
            let mut positions: Vec<usize> = plan[..4]
                .iter()
                .map(|round| round.iter().position(|&s| s == store).unwrap())
                .collect();
            positions.sort_unstable();
            assert_eq!(positions, vec![0, 1, 2, 3], "store {store}");
        }
    }

    #[test]
    fn one_store_or_no_rounds() {
        assert_eq!(run_order(1, 3), vec![vec![0], vec![0], vec![0]]);
        assert!(run_order(3, 0).is_empty());
        assert_eq!(run_order(0, 2), vec![Vec::<usize>::new(), Vec::new()]);
    }

    #[test]
    fn median_and_spread_of_fixed_samples() {
        // Odd count: the middle one, whatever the input order.
        let s = Spread::of(&[5.0, 1.0, 3.0, 9.0, 7.0]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (5, 5.0, 1.0, 9.0));
        // Quartiles at positions 1 and 3 of the sorted five.
        assert_eq!((s.q1, s.q3), (3.0, 7.0));
        assert!((s.relative_range() - 8.0 / 5.0).abs() < 1e-12);

        // Even count: the mean of the two middle ones; quartiles interpolated at
        // positions 0.75 and 2.25 of [1, 2, 4, 8].
        let s = Spread::of(&[8.0, 2.0, 4.0, 1.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert!((s.q1 - 1.75).abs() < 1e-12);
        assert!((s.q3 - 5.0).abs() < 1e-12);

        let one = Spread::of(&[42.0]).unwrap();
        assert_eq!(
            (one.median, one.min, one.max, one.q1, one.q3),
            (42.0, 42.0, 42.0, 42.0, 42.0)
        );
    }

    #[test]
    fn no_samples_or_nan_give_none() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]), None);
    }
}
