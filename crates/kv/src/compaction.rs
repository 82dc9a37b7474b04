//! Compaction picking: which tables to merge next, and where the output goes.
//!
//! Each level gets a score, LevelDB's rule: L0 scores its table count over
//! `l0_compaction_trigger` (every L0 table is read by every lookup, so their number is
//! what hurts), a deeper level its bytes over its budget (`level1_max_bytes ×
//! multiplier^(n-1)`). The level with the highest score of at least 1 is compacted:
//!
//! ```text
//!   L0 (score 5/4 = 1.25)  ──all of L0 + overlapping L1──►  L1
//!   L1 (score 40 MiB/8 MiB = 5.0)  ◄── picked: one table, round robin through the
//!                                      key space, + its overlaps in L2 ──► L2
//! ```
//!
//! Choosing by score, not "L0 first", keeps an over-budget L1 from growing while L0
//! compactions keep rewriting all of it. The store compacts before it flushes while L0
//! is over its trigger, so L0 cannot outrun compaction (see `db.rs`, backpressure).

use std::sync::Arc;

use bytes::Bytes;

use crate::options::{Options, NUM_LEVELS};
use crate::version::{TableHandle, Version};

/// A chosen compaction: the input tables and the level the output goes to.
pub(crate) struct Pick {
    pub inputs: Vec<Arc<TableHandle>>,
    pub output_level: usize,
}

/// How urgently `level` needs compaction; 1.0 or more means now.
pub(crate) fn score(version: &Version, options: &Options, level: usize) -> f64 {
    if level == 0 {
        version.levels[0].len() as f64 / options.l0_compaction_trigger as f64
    } else {
        version.level_bytes(level) as f64 / options.max_bytes_for_level(level) as f64
    }
}

/// Whether L0 has reached its compaction trigger.
pub(crate) fn l0_over_trigger(version: &Version, options: &Options) -> bool {
    score(version, options, 0) >= 1.0
}

/// The most urgent compaction, if any level scores 1 or more. `compact_pointer[n]` is
/// where level `n`'s round robin resumes; it is advanced past the table picked.
pub(crate) fn pick(
    version: &Version,
    options: &Options,
    compact_pointer: &mut [Option<Bytes>],
) -> Option<Pick> {
    let (level, best) = (0..NUM_LEVELS - 1)
        .map(|level| (level, score(version, options, level)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if best < 1.0 {
        return None;
    }
    if level == 0 {
        let l0 = &version.levels[0];
        let smallest = l0.iter().map(|t| t.smallest()).min()?;
        let largest = l0.iter().map(|t| t.largest()).max()?;
        let mut inputs = l0.clone();
        inputs.extend(version.overlapping(1, smallest, largest));
        return Some(Pick {
            inputs,
            output_level: 1,
        });
    }
    let tables = &version.levels[level];
    let pointer = compact_pointer[level].clone();
    let chosen = tables
        .iter()
        .find(|t| pointer.as_deref().is_none_or(|p| t.smallest() > p))
        .or(tables.first())?
        .clone();
    compact_pointer[level] = Some(Bytes::copy_from_slice(chosen.largest()));
    let mut inputs = vec![chosen.clone()];
    inputs.extend(version.overlapping(level + 1, chosen.smallest(), chosen.largest()));
    Some(Pick {
        inputs,
        output_level: level + 1,
    })
}
