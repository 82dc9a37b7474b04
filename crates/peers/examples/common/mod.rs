//! What the peers' examples share: their positional arguments and medians.

use bloomkv_bench::BenchError;

/// The program's arguments after its name.
pub struct Args(Vec<String>);

impl Args {
    /// The arguments this program was started with.
    pub fn from_env() -> Args {
        Args(std::env::args().skip(1).collect())
    }

    /// The text of argument `i` (from 0), if given.
    #[allow(dead_code)] // each example compiles this module; not every one reads text
    pub fn text(&self, i: usize) -> Option<&str> {
        self.0.get(i).map(String::as_str)
    }

    /// Argument `i` (from 0) as a number, or `default` when it is not given.
    pub fn number(&self, i: usize, default: u64) -> Result<u64, BenchError> {
        self.0
            .get(i)
            .map_or(Ok(default), |a| a.parse())
            .map_err(|e| format!("argument {}: {e}", i + 1).into())
    }
}

/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
