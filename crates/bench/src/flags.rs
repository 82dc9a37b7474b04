//! Flags a shape does not use are errors, not silence.
//!
//! `bloomkv bench` runs one of two shapes, and each reads only some of the flags: the
//! leveled shape builds its own tables (no `--tables`, `--filters`, `--compression`,
//! `--block-align`) and runs no scans; the flat shape has no filter allocations; the
//! range filter's settings mean nothing without range scans. A flag set away from its
//! default where the run would not read it is refused, naming the flag, so a result
//! file never looks like it measured something it did not.

use super::{BenchArgs, BenchError};

/// The defaults the checks compare against (the flags' own defaults).
const DEFAULT_FILTERS: &str = "none,standard,cache-local,ribbon";
const DEFAULT_ALLOCATION: &str = "uniform,monkey,no-last-level";
const DEFAULT_TABLES: u32 = 10;
const DEFAULT_PREFIX_SCANS: u64 = 20_000;
const DEFAULT_RANGE_BITS: f64 = 16.0;
const DEFAULT_RANGE_MAX_LEN: u64 = 64;

/// The first flag `args` sets that its shape would ignore, as an error.
pub(crate) fn shape_uses_every_flag(args: &BenchArgs) -> Result<(), BenchError> {
    let leveled = args.shape == "leveled";
    let ignored: &[(bool, &str)] = &[
        (leveled && args.filters != DEFAULT_FILTERS, "--filters"),
        (leveled && args.tables != DEFAULT_TABLES, "--tables"),
        (leveled && args.compression != "none", "--compression"),
        (leveled && !args.block_align, "--block-align"),
        (
            leveled && args.prefix_scans != DEFAULT_PREFIX_SCANS,
            "--prefix-scans",
        ),
        (leveled && args.range_scans != 0, "--range-scans"),
        (
            !leveled && args.allocation != DEFAULT_ALLOCATION,
            "--allocation",
        ),
        (
            !leveled && args.filter_budget_bytes.is_some(),
            "--filter-budget-bytes",
        ),
        (!leveled && args.grow_after_warmup, "--grow-after-warmup"),
    ];
    if let Some((_, flag)) = ignored.iter().find(|(set, _)| *set) {
        let shape = if leveled { "leveled" } else { "flat" };
        return Err(format!("{flag} is not used by the {shape} shape").into());
    }
    let range_set = args.range_bits_per_key != DEFAULT_RANGE_BITS
        || args.range_max_len != DEFAULT_RANGE_MAX_LEN;
    if range_set && args.range_scans == 0 {
        return Err(
            "--range-bits-per-key and --range-max-len set the range phases: add --range-scans N"
                .into(),
        );
    }
    Ok(())
}
