//! Flags a shape does not use are errors, not silence.
//!
//! `bloomkv bench` runs one of three shapes, and each reads only some of the flags: the
//! leveled and scale shapes build their own tables (no `--tables`, `--filters`,
//! `--compression`, `--block-align`) and run no scans; only the leveled shape has
//! filter allocations; the scale shape makes its own cold open (no `--cold`) and
//! learns nothing; the range filter's settings mean nothing without range scans. A
//! flag set away from its default where the run would not read it is refused, naming
//! the flag, so a result file never looks like it measured something it did not.

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
    let shape = args.shape.as_str();
    // The flat shape's table-building flags mean nothing where compaction builds the
    // tables; the leveled shape's allocation flags nothing outside it; the scale shape
    // runs the store's defaults, with its own cold open.
    let builds_own_tables = shape != "flat";
    let (leveled, scale) = (shape == "leveled", shape == "scale");
    let ignored: &[(bool, &str)] = &[
        (
            builds_own_tables && args.filters != DEFAULT_FILTERS,
            "--filters",
        ),
        (
            builds_own_tables && args.tables != DEFAULT_TABLES,
            "--tables",
        ),
        (
            builds_own_tables && args.compression != "none",
            "--compression",
        ),
        (builds_own_tables && !args.block_align, "--block-align"),
        (
            builds_own_tables && args.prefix_scans != DEFAULT_PREFIX_SCANS,
            "--prefix-scans",
        ),
        (builds_own_tables && args.range_scans != 0, "--range-scans"),
        (
            !leveled && args.allocation != DEFAULT_ALLOCATION,
            "--allocation",
        ),
        (
            !leveled && args.filter_budget_bytes.is_some(),
            "--filter-budget-bytes",
        ),
        (!leveled && args.grow_after_warmup, "--grow-after-warmup"),
        (scale && args.cold, "--cold"),
        (
            scale && args.learned_bits_per_key != 0.0,
            "--learned-bits-per-key",
        ),
        (scale && args.sweep, "--sweep"),
    ];
    if let Some((_, flag)) = ignored.iter().find(|(set, _)| *set) {
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
