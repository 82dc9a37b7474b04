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
//!
//! With `Options::dynamic_level_bytes` the budgets are set from the bottom up instead
//! (RocksDB's dynamic level sizing): the last level keeps whatever it holds, each
//! level above it a tenth of the one below, down to the *base level*, the highest
//! whose target is still at least `level1_max_bytes`. L0 compacts straight into the
//! base level; the levels above it stay empty:
//!
//! ```text
//!   static (fixed budgets)            dynamic (from the bottom)
//!   L1   256 KiB  ■                   L1..L2  empty
//!   L2   2.5 MiB  ■■                  L3   base: 120 KiB ■
//!   L3    25 MiB  ■■■■■■■             L4   1.2 MiB ■■
//!   L4   250 MiB  ■■■■■■■■ (93 MiB)   L5    12 MiB ■■■■■
//!                                     L6   120 MiB ■■■■■■■■■
//! ```
//!
//! Levels are then ten times apart at any data size (on the left the last two are
//! 3.7 apart), which is the shape Monkey's filter allocation assumes.

use std::sync::Arc;

use bytes::Bytes;

use crate::options::Options;
use crate::types::NUM_LEVELS;
use crate::version::{TableHandle, Version};

/// A chosen compaction: the input tables and the level the output goes to.
pub(crate) struct Pick {
    pub inputs: Vec<Arc<TableHandle>>,
    pub output_level: usize,
}

/// Each level's size target (bytes; L0 and the last level have none) and the base
/// level, the one L0 compacts into.
pub(crate) struct Targets {
    pub base: usize,
    pub bytes: [u64; NUM_LEVELS],
}

/// The level targets of `version` under `options` (see the module doc).
pub(crate) fn targets(version: &Version, options: &Options) -> Targets {
    let mut bytes = [u64::MAX; NUM_LEVELS];
    if !options.dynamic_level_bytes {
        for (level, b) in bytes.iter_mut().enumerate().skip(1) {
            *b = options.max_bytes_for_level(level);
        }
        return Targets { base: 1, bytes };
    }
    let bottom = NUM_LEVELS - 1;
    let largest = (1..NUM_LEVELS)
        .map(|l| version.level_bytes(l))
        .max()
        .unwrap_or(0);
    let mut base = bottom;
    let mut target = largest;
    for level in (1..bottom).rev() {
        target /= options.level_size_multiplier.max(2);
        if target < options.level1_max_bytes {
            break;
        }
        bytes[level] = target;
        base = level;
    }
    // Above the base nothing should stay: a target of 0 moves down whatever is there
    // (tables written under static sizing, or left when the data shrank).
    for b in &mut bytes[1..base] {
        *b = 0;
    }
    // But L0 must not skip a level that holds data: a newer version of a key has to
    // stay above an older one.
    let first_nonempty = (1..NUM_LEVELS).find(|&l| !version.level(l).is_empty());
    Targets {
        base: first_nonempty.map_or(base, |f| f.min(base)),
        bytes,
    }
}

/// How urgently `level` needs compaction; 1.0 or more means now.
pub(crate) fn score(version: &Version, options: &Options, level: usize) -> f64 {
    score_with(version, options, &targets(version, options), level)
}

fn score_with(version: &Version, options: &Options, targets: &Targets, level: usize) -> f64 {
    if level == 0 {
        return version.level(0).len() as f64 / options.l0_compaction_trigger as f64;
    }
    let bytes = version.level_bytes(level);
    match targets.bytes[level] {
        0 if bytes > 0 => f64::MAX,
        0 => 0.0,
        target => bytes as f64 / target as f64,
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
    let targets = targets(version, options);
    let (level, best) = (0..NUM_LEVELS - 1)
        .map(|level| (level, score_with(version, options, &targets, level)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if best < 1.0 {
        return None;
    }
    if level == 0 {
        let l0 = version.level(0);
        let smallest = l0.iter().map(|t| t.smallest()).min()?;
        let largest = l0.iter().map(|t| t.largest()).max()?;
        let mut inputs = l0.to_vec();
        inputs.extend(version.overlapping(targets.base, smallest, largest));
        return Some(Pick {
            inputs,
            output_level: targets.base,
        });
    }
    let tables = version.level(level);
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
