//! The per-level filter plan: how many filter bits per key each level's new tables get.
//!
//! An absent key is checked once per L1.. level (and once per L0 table), so each level
//! adds its false-positive rate `pᵢ` to the expected wasted reads of an absent get,
//! `Σ wᵢ·pᵢ` (`wᵢ` = tables probed there: L0's table count; below, the share of the
//! key space the level's tables cover, since a key outside every table's range is
//! never checked). But the levels
//! differ a hundredfold in size: a bit per key spent on the deepest level costs ten
//! times more memory than on the level above. Monkey (Dayan, Athanassoulis, Idreos,
//! SIGMOD 2017) shows that at a fixed memory the sum is smallest when each level's
//! false-positive rate is proportional to its share of the keys, so small upper levels
//! get many bits and the big last level fewer:
//!
//! ```text
//!   level   keys      uniform 10 b/k      Monkey, same memory
//!   L1        1 %     10.0  (0.97 %)      ~19   (~0.01 %)
//!   L2        9 %     10.0  (0.97 %)      ~14   (~0.1 %)
//!   L3       90 %     10.0  (0.97 %)      ~9.3  (~1.3 %)
//!   wasted reads per absent get:  0.029      ~0.014
//! ```
//!
//! The plan is computed with each level's own policy model (cache-local or standard
//! Bloom, or the Ribbon shape a 100,000-key table gets, `MODEL_KEYS`), so it works for
//! any mix. It solves "minimise `Σ wᵢ f(bᵢ)` subject to
//! `Σ nᵢ bᵢ = M`" greedily: starting from no filter anywhere, it repeatedly buys the
//! step of 1/20 bit per key with the best reduction of wasted reads per bit of memory,
//! until uniform's memory `M = bits_per_key · Σ nᵢ` is spent. The models are convex
//! enough in `b` for the greedy order to reach the optimum within a step; a level
//! whose best share would be under one bit per key gets no filter at all.
//!
//! The plan is recomputed every time a table is built, for the tree the level budgets
//! describe: the live tree with the compaction's inputs moved to their output level,
//! and every level above the deepest counted at most at its budget (compaction soon
//! brings it back there). A table keeps the filter it was built with until compaction
//! rewrites it, so a settled tree's filters reflect the plans of the moments its
//! tables were written; with `Options::dynamic_level_bytes` the levels keep their
//! ten-to-one ratios as the tree grows, and so do the plans. On a real tree the gain
//! is smaller than the table above, because the upper levels cover only part of the
//! key space (the benchmark's L3 and L4 are asked by 2.5% and 23% of absent gets):
//! `docs/notes/2026-12-monkey-on-a-real-tree.md`. `optimize_filters_for_hits` (RocksDB's name) gives
//! the deepest non-empty level no filter: lookups for keys that exist mostly end
//! there anyway. Monkey then splits only what Uniform spends on the other levels.

use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};

use bloomkv_filter::sizing::cache_local_false_positive_rate;
use bloomkv_filter::{BloomLayout, BloomPolicy, FilterPolicy, RibbonPolicy};

use crate::compaction;
use crate::error::{Error, Result};
pub use crate::options::FilterAllocation;
use crate::options::{FilterKind, Options};
use crate::types::NUM_LEVELS;
use crate::version::{TableHandle, Version};

/// Step of the greedy search, in bits per key.
const STEP: f64 = 0.05;
/// The most bits per key Monkey gives a level (false positives are ~1e-5 there, and
/// more bits buy little against the reads a present key costs anyway), and where the
/// models' cached grid ends. Above it a model is evaluated directly, and a store asking
/// for more bits per key than this gets Uniform's plan whatever its allocation.
const MAX_BITS: f64 = 30.0;
/// A filter needs at least this many bits per key (the Bloom policies' minimum).
const MIN_BITS: f64 = 1.0;
/// Keys the models assume per table; the Bloom models barely depend on it, Ribbon's
/// a little (its slots per key grow with the table).
const MODEL_KEYS: u64 = 100_000;

/// Expected false-positive rate of a filter of `kind` at `bits_per_key`; 1.0 for no
/// filter. Custom policies have no model here and are planned like the cache-local
/// Bloom (the store's default).
pub(crate) fn model_fp(kind: &FilterKind, bits_per_key: f64) -> f64 {
    if bits_per_key > MAX_BITS {
        return evaluate_model(kind, bits_per_key);
    }
    let curve = curve(kind);
    curve[grid(bits_per_key.max(0.0)).min(curve.len() - 1)]
}

/// The model itself, evaluated (see [`model_fp`], which reads it off a cached grid).
fn evaluate_model(kind: &FilterKind, bits_per_key: f64) -> f64 {
    if bits_per_key < MIN_BITS {
        return 1.0;
    }
    let m = (bits_per_key * MODEL_KEYS as f64).ceil() as u64;
    let fp = match kind {
        FilterKind::None => Ok(1.0),
        FilterKind::Ribbon => Ok(ribbon_model(bits_per_key)),
        FilterKind::StandardBloom => BloomPolicy::standard(bits_per_key)
            .map(|p| BloomLayout::Standard.estimated_fp_rate(m, MODEL_KEYS, p.num_probes()))
            .map_err(|_| ()),
        FilterKind::CacheLocalBloom | FilterKind::Custom(_) => {
            BloomPolicy::cache_local(bits_per_key)
                .map_err(|_| ())
                .and_then(|p| {
                    let lines = m.div_ceil(512).max(1);
                    cache_local_false_positive_rate(lines * 512, MODEL_KEYS, p.num_probes())
                        .map_err(|_| ())
                })
        }
    };
    fp.unwrap_or(1.0).clamp(0.0, 1.0)
}

/// A Ribbon block's own predicted rate at `bits_per_key` for a table of
/// [`MODEL_KEYS`] keys: its shape (slots, result columns) decides, not a formula, and
/// Ribbon's slots per key grow with the table, so the shape is the one that many keys
/// get (read off the policy, no block built).
fn ribbon_model(bits_per_key: f64) -> f64 {
    RibbonPolicy::new(bits_per_key).map_or(1.0, |policy| policy.expected_fp_rate(MODEL_KEYS))
}

/// One level as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelLoad {
    /// Keys on the level (live tables plus the one being written).
    pub keys: u64,
    /// Tables an absent lookup probes there, on average: L0's table count; on deeper
    /// levels the level's coverage, the share of the key space its tables' ranges
    /// cover (1.0 for a level spanning it all; see `loads`).
    pub probes: f64,
}

/// The bits per key each level's new tables get (`None`: no filter) and the expected
/// false-positive rate that buys.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterPlan {
    /// Per level, L0 first.
    pub bits_per_key: Vec<Option<f64>>,
    /// Per level, the model's false-positive rate at those bits (1.0 without filter).
    pub expected_fp: Vec<f64>,
}

impl FilterPlan {
    /// Expected wasted reads of an absent get: `Σ probesᵢ · fpᵢ` over levels with keys.
    pub fn expected_wasted_reads(&self, loads: &[LevelLoad]) -> f64 {
        loads
            .iter()
            .zip(&self.expected_fp)
            .filter(|(l, _)| l.keys > 0)
            .map(|(l, fp)| l.probes * fp)
            .sum()
    }

    /// Filter bits the plan spends on `loads`.
    pub fn total_bits(&self, loads: &[LevelLoad]) -> f64 {
        loads
            .iter()
            .zip(&self.bits_per_key)
            .map(|(l, b)| l.keys as f64 * b.unwrap_or(0.0))
            .sum()
    }
}

/// Computes the plan for a tree whose levels hold `loads`, each level built with the
/// filter kind `kinds[level]`, spending what `Uniform` spends.
pub fn plan(
    allocation: FilterAllocation,
    bits_per_key: f64,
    optimize_filters_for_hits: bool,
    kinds: &[FilterKind],
    loads: &[LevelLoad],
) -> FilterPlan {
    plan_within(
        allocation,
        bits_per_key,
        optimize_filters_for_hits,
        kinds,
        loads,
        None,
    )
}

/// [`plan`], spending at most `memory_bits` filter bits on `loads` (`None`: what
/// `Uniform` at `bits_per_key` spends; never more than that). Under a cap `Uniform`
/// scales every level's bits down alike (no filter once under one bit per key);
/// `Monkey` and `Adaptive` take bits off where they buy the fewest saved reads, which
/// with `Adaptive`'s measured weights is where lookups are rarest.
pub fn plan_within(
    allocation: FilterAllocation,
    bits_per_key: f64,
    optimize_filters_for_hits: bool,
    kinds: &[FilterKind],
    loads: &[LevelLoad],
    memory_bits: Option<f64>,
) -> FilterPlan {
    let levels = loads.len();
    // The level `optimize_filters_for_hits` leaves without a filter.
    let unfiltered = loads
        .iter()
        .rposition(|l| l.keys > 0)
        .filter(|_| optimize_filters_for_hits);
    let filtered_keys: f64 = (0..levels)
        .filter(|&l| {
            Some(l) != unfiltered
                && loads[l].keys > 0
                && !matches!(kinds.get(l), Some(FilterKind::None) | None)
        })
        .map(|l| loads[l].keys as f64)
        .sum();
    let uniform_memory = bits_per_key * filtered_keys;
    let memory = memory_bits.map_or(uniform_memory, |m| m.clamp(0.0, uniform_memory));
    // Uniform's bits per key within the memory.
    let uniform_bits = if filtered_keys > 0.0 && memory < uniform_memory {
        memory / filtered_keys
    } else {
        bits_per_key
    };
    let uniform_bits = (uniform_bits >= MIN_BITS).then_some(uniform_bits);
    let mut bits: Vec<Option<f64>> = kinds
        .iter()
        .map(|k| uniform_bits.filter(|_| !matches!(k, FilterKind::None)))
        .collect();
    bits.resize(levels, None);
    if let Some(d) = unfiltered {
        bits[d] = None;
    }
    // Above `MAX_BITS` Monkey would cap every level there and spend less memory than
    // Uniform for more false positives: Uniform is the plan.
    let split = matches!(
        allocation,
        FilterAllocation::Monkey | FilterAllocation::Adaptive
    );
    if split && bits_per_key <= MAX_BITS {
        // Monkey spends what Uniform spends on the same levels: not the memory of a
        // filter the deepest level does not get.
        let mut candidate = monkey(memory, uniform_bits, kinds, loads, unfiltered);
        if let Some(d) = unfiltered {
            candidate[d] = None;
        }
        // The greedy search works in steps and the models step with the probe count,
        // so on a tree where uniform is already (nearly) optimal it can land a hair
        // above it: then uniform is the plan.
        if wasted(&candidate, kinds, loads) <= wasted(&bits, kinds, loads) {
            bits = candidate;
        }
    }
    // Levels of one kind and setting share one figure (above `MAX_BITS` each is a
    // model evaluated afresh, not read off the cached grid).
    let mut known: Vec<(&FilterKind, f64, f64)> = Vec::new();
    let expected_fp = (0..levels)
        .map(|l| match bits[l] {
            Some(b) => match known.iter().find(|(k, kb, _)| *k == &kinds[l] && *kb == b) {
                Some(&(_, _, fp)) => fp,
                None => {
                    let fp = model_fp(&kinds[l], b);
                    known.push((&kinds[l], b, fp));
                    fp
                }
            },
            None => 1.0,
        })
        .collect();
    FilterPlan {
        bits_per_key: bits,
        expected_fp,
    }
}

fn wasted(bits: &[Option<f64>], kinds: &[FilterKind], loads: &[LevelLoad]) -> f64 {
    loads
        .iter()
        .enumerate()
        .filter(|(_, l)| l.keys > 0)
        .map(|(i, l)| l.probes * bits[i].map_or(1.0, |b| model_fp(&kinds[i], b)))
        .sum()
}

/// A candidate step: level `level` from `at` to `at + STEP` bits per key, buying
/// `gain` fewer wasted reads per bit of memory.
#[derive(PartialEq)]
struct Step {
    gain: f64,
    level: usize,
}

impl Eq for Step {}

impl PartialOrd for Step {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Step {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.gain
            .total_cmp(&other.gain)
            .then(other.level.cmp(&self.level))
    }
}

/// The model on the search grid (`i · STEP` bits per key), computed once per kind.
fn curve(kind: &FilterKind) -> &'static [f64] {
    static CACHE_LOCAL: OnceLock<Vec<f64>> = OnceLock::new();
    static STANDARD: OnceLock<Vec<f64>> = OnceLock::new();
    static NONE: OnceLock<Vec<f64>> = OnceLock::new();
    static RIBBON: OnceLock<Vec<f64>> = OnceLock::new();
    let (cell, kind) = match kind {
        FilterKind::Ribbon => (&RIBBON, FilterKind::Ribbon),
        FilterKind::StandardBloom => (&STANDARD, FilterKind::StandardBloom),
        FilterKind::None => (&NONE, FilterKind::None),
        FilterKind::CacheLocalBloom | FilterKind::Custom(_) => {
            (&CACHE_LOCAL, FilterKind::CacheLocalBloom)
        }
    };
    cell.get_or_init(|| {
        // The model is evaluated every quarter bit (it is not cheap) and interpolated
        // between, linearly in log(fp): the rate falls close to exponentially in b.
        const COARSE: usize = 5; // grid steps per evaluation
        let last = grid(MAX_BITS);
        let coarse: Vec<f64> = (0..=last.div_ceil(COARSE))
            .map(|j| evaluate_model(&kind, (j * COARSE) as f64 * STEP).max(1e-300))
            .collect();
        (0..=last)
            .map(|i| {
                let b = i as f64 * STEP;
                if b < MIN_BITS {
                    return 1.0;
                }
                let (j, r) = (i / COARSE, i % COARSE);
                if r == 0 {
                    return coarse[j];
                }
                if j + 1 >= coarse.len() || (j * COARSE) as f64 * STEP < MIN_BITS {
                    return evaluate_model(&kind, b);
                }
                let t = r as f64 / COARSE as f64;
                (coarse[j].ln() * (1.0 - t) + coarse[j + 1].ln() * t).exp()
            })
            .collect()
    })
}

/// The grid index of `bits` (rounded to the nearest step).
fn grid(bits: f64) -> usize {
    (bits / STEP).round() as usize
}

/// Monkey's split of `memory` bits over the levels with keys and a filter kind, `skip`
/// left out of the split; an empty level gets `empty_bits` (its first table re-plans).
fn monkey(
    memory: f64,
    empty_bits: Option<f64>,
    kinds: &[FilterKind],
    loads: &[LevelLoad],
    skip: Option<usize>,
) -> Vec<Option<f64>> {
    let levels = loads.len();
    let filtered =
        |l: usize| Some(l) != skip && loads[l].keys > 0 && !matches!(kinds[l], FilterKind::None);
    let mut budget = memory;
    let mut at = vec![0.0f64; levels];
    // The first step of a level jumps from "no filter" to the minimum filter size.
    let next_bits = |b: f64| if b < MIN_BITS { MIN_BITS } else { b + STEP };
    let curves: Vec<&[f64]> = kinds.iter().map(curve).collect();
    let gain = |l: usize, b: f64| {
        let nb = next_bits(b);
        if grid(nb) >= curves[l].len() {
            return None;
        }
        let saved = loads[l].probes * (curves[l][grid(b)] - curves[l][grid(nb)]);
        let cost = loads[l].keys as f64 * (nb - b);
        Some(saved / cost)
    };
    let mut heap = BinaryHeap::new();
    for l in (0..levels).filter(|&l| filtered(l)) {
        if let Some(g) = gain(l, 0.0) {
            heap.push(Step { gain: g, level: l });
        }
    }
    while let Some(Step { level, .. }) = heap.pop() {
        let nb = next_bits(at[level]);
        let cost = loads[level].keys as f64 * (nb - at[level]);
        if cost > budget {
            // This level's next step no longer fits; smaller levels' steps may.
            continue;
        }
        budget -= cost;
        // Kept on the grid, so repeated steps do not drift past the bounds.
        at[level] = (grid(nb) as f64 * STEP).min(MAX_BITS);
        if let Some(g) = gain(level, nb) {
            heap.push(Step { gain: g, level });
        }
    }
    (0..levels)
        .map(|l| {
            if !filtered(l) {
                // An empty level gets uniform's setting (its first table will re-plan).
                empty_bits.filter(|_| !matches!(kinds[l], FilterKind::None))
            } else {
                (at[l] >= MIN_BITS).then_some(at[l])
            }
        })
        .collect()
}

/// The planner's view of `version` when a table of `incoming` keys from the tables
/// `inputs` is about to be written to `level`.
///
/// The plan is for the tree the level budgets describe, not only the tree of the
/// moment: a table keeps its filter until compaction rewrites it, and a level above
/// the deepest is soon compacted back to its budget, so such a level counts at most
/// its budget's worth of keys (at the tree's average entry size). The inputs leave
/// their levels; L0 counts as many probes as it will have tables.
pub(crate) fn loads(
    version: &Version,
    options: &Options,
    level: usize,
    inputs: &[u64],
    incoming: u64,
) -> Vec<LevelLoad> {
    let (bytes, entries) = version.tables().fold((0u64, 0u64), |(b, e), (_, t)| {
        (b + t.record.data_size, e + t.record.entries)
    });
    let entry_bytes = if entries == 0 {
        1.0
    } else {
        bytes as f64 / entries as f64
    };
    let deepest = version.deepest_nonempty_level().max(level);
    let targets = compaction::targets(version, options);
    let deepest_tables = version.level(version.deepest_nonempty_level());
    (0..NUM_LEVELS)
        .map(|l| {
            let staying = version
                .level(l)
                .iter()
                .filter(|t| !inputs.contains(&t.number));
            let (mut keys, mut count) =
                staying.fold((0u64, 0usize), |(k, c), t| (k + t.entries(), c + 1));
            if l == level {
                keys += incoming;
                count += 1;
            }
            if l >= 1 && l < deepest && keys > 0 {
                let budget = (targets.bytes[l] as f64 / entry_bytes) as u64;
                keys = keys.min(budget.max(1));
            }
            let probes = if l == 0 {
                count.max(1) as f64
            } else {
                coverage(version, l, deepest_tables)
            };
            LevelLoad { keys, probes }
        })
        .collect()
}

/// The share of lookups whose key falls inside some table of `level`: a level that
/// compaction has filled only over part of the key space is probed only there. The
/// key space is measured in tables of the deepest level (which spans it all): each
/// one wholly inside a table of `level` counts 1, one it overlaps counts 1/2. A level
/// the measure cannot judge (the deepest itself, or a tree without one) counts 1.
fn coverage(version: &Version, level: usize, deepest: &[Arc<TableHandle>]) -> f64 {
    let tables = version.level(level);
    if deepest.len() < 8 || std::ptr::eq(tables, deepest) {
        return 1.0;
    }
    let covered: f64 = deepest
        .iter()
        .map(|d| {
            let inside = tables
                .iter()
                .any(|t| t.smallest() <= d.smallest() && d.largest() <= t.largest());
            if inside {
                1.0
            } else if tables.iter().any(|t| t.overlaps(d.smallest(), d.largest())) {
                0.5
            } else {
                0.0
            }
        })
        .sum();
    (covered / deepest.len() as f64).clamp(0.05, 1.0)
}

/// The filter kind each level's tables are built with: the configured one, except
/// that with `FilterKind::Ribbon`-style hybrids the levels above `bloom_before_level`
/// use the cache-local Bloom (cheap to build for short-lived flush output).
pub(crate) fn level_kinds(options: &Options) -> Vec<FilterKind> {
    (0..NUM_LEVELS)
        .map(|level| match options.filter {
            FilterKind::Ribbon if level < options.bloom_before_level => FilterKind::CacheLocalBloom,
            ref kind => kind.clone(),
        })
        .collect()
}

/// The policy that builds a table for a level given the plan's bits per key.
pub(crate) fn policy_for(
    kind: &FilterKind,
    bits_per_key: Option<f64>,
) -> Result<Option<Arc<dyn FilterPolicy>>> {
    let Some(bits) = bits_per_key else {
        return Ok(None);
    };
    let to_err = |e: bloomkv_filter::FilterError| Error::InvalidArgument(e.to_string());
    let policy: Arc<dyn FilterPolicy> = match kind {
        FilterKind::None => return Ok(None),
        FilterKind::Custom(policy) => Arc::clone(policy),
        FilterKind::CacheLocalBloom => Arc::new(BloomPolicy::cache_local(bits).map_err(to_err)?),
        FilterKind::StandardBloom => Arc::new(BloomPolicy::standard(bits).map_err(to_err)?),
        FilterKind::Ribbon => Arc::new(RibbonPolicy::new(bits).map_err(to_err)?),
    };
    Ok(Some(policy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn loads(keys: &[u64]) -> Vec<LevelLoad> {
        keys.iter()
            .enumerate()
            .map(|(l, &k)| LevelLoad {
                keys: k,
                probes: if l == 0 { 2.0 } else { 1.0 },
            })
            .collect()
    }

    fn kinds(n: usize) -> Vec<FilterKind> {
        vec![FilterKind::CacheLocalBloom; n]
    }

    /// Above the grid's 30 bits per key Monkey once capped every level at 30 (the
    /// models read off the grid stopped there too, so uniform's 50 bits looked no
    /// better): 40% less memory than asked for and ~90× the wasted reads at 50 bits.
    /// Uniform is now the plan there, and its expected rate is the model's at 50 bits.
    #[test]
    fn above_thirty_bits_per_key_monkey_plans_as_uniform_and_the_rates_are_right() {
        let l = loads(&[0, 10_000, 100_000, 1_000_000]);
        for kind in [FilterKind::CacheLocalBloom, FilterKind::StandardBloom] {
            let k = vec![kind.clone(); 4];
            for bpk in [31.0, 50.0, 100.0] {
                let uniform = plan(FilterAllocation::Uniform, bpk, false, &k, &l);
                let monkey = plan(FilterAllocation::Monkey, bpk, false, &k, &l);
                assert_eq!(monkey, uniform, "{kind:?} at {bpk}");
                assert_eq!(uniform.bits_per_key[3], Some(bpk));
                let at = evaluate_model(&kind, bpk);
                assert_eq!(uniform.expected_fp[3], at, "{kind:?} at {bpk}");
                if bpk >= 50.0 {
                    assert!(
                        at < evaluate_model(&kind, 30.0) / 10.0,
                        "{kind:?} at {bpk}: {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_model_falls_as_bits_rise() {
        let mut last = 1.0;
        for i in 0..=(MAX_BITS / STEP) as u32 {
            let b = f64::from(i) * STEP;
            let fp = model_fp(&FilterKind::CacheLocalBloom, b);
            assert!(fp <= last + 1e-12, "{b}: {fp} > {last}");
            last = fp;
        }
        let at10 = model_fp(&FilterKind::CacheLocalBloom, 10.0);
        assert!((0.009..0.0100).contains(&at10), "{at10}");
        let std10 = model_fp(&FilterKind::StandardBloom, 10.0);
        assert!((0.0080..0.0084).contains(&std10), "{std10}");
    }

    #[test]
    fn monkey_on_a_ten_times_tree_halves_wasted_reads_at_equal_memory() {
        let l = loads(&[0, 10_000, 100_000, 1_000_000]);
        let k = kinds(4);
        let uniform = plan(FilterAllocation::Uniform, 10.0, false, &k, &l);
        let monkey = plan(FilterAllocation::Monkey, 10.0, false, &k, &l);
        let (u, m) = (
            uniform.expected_wasted_reads(&l),
            monkey.expected_wasted_reads(&l),
        );
        assert!(m < 0.6 * u, "monkey {m} vs uniform {u}: {monkey:?}");
        let (ub, mb) = (uniform.total_bits(&l), monkey.total_bits(&l));
        assert!((mb - ub).abs() <= 0.01 * ub, "memory {mb} vs {ub}");
        // Upper (smaller) levels get at least as many bits as deeper ones.
        let b: Vec<f64> = monkey.bits_per_key[1..]
            .iter()
            .map(|b| b.unwrap_or(0.0))
            .collect();
        assert!(b.windows(2).all(|w| w[0] >= w[1]), "{b:?}");
    }

    #[test]
    fn optimize_for_hits_drops_the_deepest_filter_only() {
        let l = loads(&[5_000, 10_000, 100_000, 0]);
        let p = plan(FilterAllocation::Uniform, 10.0, true, &kinds(4), &l);
        assert_eq!(
            p.bits_per_key,
            vec![Some(10.0), Some(10.0), None, Some(10.0)]
        );
        assert_eq!(p.expected_fp[2], 1.0);
    }

    /// With `optimize_filters_for_hits` Monkey once split the memory of the deepest
    /// level's filter too, then dropped that filter: the upper levels kept its bits,
    /// 55% more memory than Uniform on this tree (169.95M bits against 110M).
    #[test]
    fn monkey_with_hits_spends_no_more_than_uniform_with_hits() {
        let l = loads(&[0, 1_000_000, 10_000_000, 100_000_000]);
        let k = kinds(4);
        let uniform = plan(FilterAllocation::Uniform, 10.0, true, &k, &l);
        let monkey = plan(FilterAllocation::Monkey, 10.0, true, &k, &l);
        assert_eq!(monkey.bits_per_key[3], None);
        let (ub, mb) = (uniform.total_bits(&l), monkey.total_bits(&l));
        assert!(mb <= ub + 1.0, "memory {mb} vs uniform's {ub}: {monkey:?}");
        assert!(mb >= 0.99 * ub, "memory {mb} vs uniform's {ub}: {monkey:?}");
        let (u, m) = (
            uniform.expected_wasted_reads(&l),
            monkey.expected_wasted_reads(&l),
        );
        assert!(m <= u, "monkey {m} vs uniform {u}");
    }

    /// The leveled benchmark's tree (docs/notes/2026-12-monkey-on-a-real-tree.md):
    /// keys per level and the share of absent gets each level's tables cover.
    fn bench_tree() -> Vec<LevelLoad> {
        [
            (0, 1.0),
            (0, 1.0),
            (0, 1.0),
            (436, 0.025),
            (8_748, 0.23),
            (89_070, 0.86),
            (901_746, 1.0),
        ]
        .iter()
        .map(|&(keys, probes)| LevelLoad { keys, probes })
        .collect()
    }

    /// On uniform lookups the measured weights are the coverage Monkey's model
    /// computes (up to sampling noise); Adaptive then plans Monkey's split of the
    /// memory its learned negatives leave (1/256 of it while lookups do not repeat):
    /// within 5% of Monkey's wasted reads.
    #[test]
    fn adaptive_on_uniform_lookups_is_within_five_percent_of_monkey() {
        let model = bench_tree();
        let k = kinds(model.len());
        let monkey = plan(FilterAllocation::Monkey, 10.0, false, &k, &model);
        let uniform_bits = monkey
            .total_bits(&model)
            .max(plan(FilterAllocation::Uniform, 10.0, false, &k, &model).total_bits(&model));
        // Measured weights: the model's, each off by up to ±3% (sampling noise).
        for noise in [-0.03, 0.0, 0.03] {
            let measured: Vec<LevelLoad> = model
                .iter()
                .enumerate()
                .map(|(i, l)| LevelLoad {
                    keys: l.keys,
                    probes: l.probes * (1.0 + if i % 2 == 0 { noise } else { -noise }),
                })
                .collect();
            let share = crate::probe_stats::LEARNED_SHARE_PROBING;
            let adaptive = plan_within(
                FilterAllocation::Adaptive,
                10.0,
                false,
                &k,
                &measured,
                Some(uniform_bits * (1.0 - share)),
            );
            // Both judged on the true weights.
            let (a, m) = (
                adaptive.expected_wasted_reads(&model),
                monkey.expected_wasted_reads(&model),
            );
            assert!(a <= 1.05 * m, "noise {noise}: adaptive {a} vs monkey {m}");
            assert!(adaptive.total_bits(&model) <= uniform_bits * (1.0 - share) + 1.0);
        }
    }

    /// When lookups go where the model does not expect (here L5 and L6 asked by half
    /// the gets the model assumes, L3 by all), the measured weights move the bits
    /// there, and on those weights Adaptive wastes fewer reads than Monkey.
    #[test]
    fn adaptive_follows_measured_probes_where_the_model_is_wrong() {
        let model = bench_tree();
        let k = kinds(model.len());
        let mut measured = model.clone();
        measured[3].probes = 1.0;
        measured[5].probes = 0.4;
        measured[6].probes = 0.5;
        let monkey = plan(FilterAllocation::Monkey, 10.0, false, &k, &model);
        let adaptive = plan(FilterAllocation::Adaptive, 10.0, false, &k, &measured);
        let (a, m) = (
            adaptive.expected_wasted_reads(&measured),
            monkey.expected_wasted_reads(&measured),
        );
        // 0.00675 against 0.00698: the split is optimal for the weights it is given.
        assert!(a < 0.98 * m, "adaptive {a} vs monkey {m}");
        let (ab, mb) = (adaptive.total_bits(&model), monkey.total_bits(&model));
        assert!(ab <= mb * 1.01 + 1.0, "memory {ab} vs {mb}");
        assert!(adaptive.bits_per_key[3] > monkey.bits_per_key[3]);
    }

    /// Under a cap every allocation spends no more than it, and Monkey's split takes
    /// the bits off the largest level (where a bit buys least) first.
    #[test]
    fn a_memory_cap_is_respected_and_the_deepest_level_pays_first() {
        let l = bench_tree();
        let k = kinds(l.len());
        let full = plan(FilterAllocation::Uniform, 10.0, false, &k, &l).total_bits(&l);
        for allocation in [
            FilterAllocation::Uniform,
            FilterAllocation::Monkey,
            FilterAllocation::Adaptive,
        ] {
            for cap in [0.9, 0.5, 0.2, 0.05, 0.0] {
                let p = plan_within(allocation, 10.0, false, &k, &l, Some(full * cap));
                assert!(
                    p.total_bits(&l) <= full * cap + 1.0,
                    "{allocation:?} at {cap}: {} > {}",
                    p.total_bits(&l),
                    full * cap
                );
            }
        }
        let half = plan_within(
            FilterAllocation::Monkey,
            10.0,
            false,
            &k,
            &l,
            Some(full * 0.5),
        );
        let b = |l: usize| half.bits_per_key[l].unwrap_or(0.0);
        assert!(b(6) < 5.0 && b(5) > b(6) && b(3) > b(6), "{half:?}");
        // No memory: no filters.
        let none = plan_within(FilterAllocation::Uniform, 10.0, false, &k, &l, Some(0.0));
        assert!(none.bits_per_key.iter().all(Option::is_none), "{none:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn monkey_never_wastes_more_than_uniform_at_equal_memory(
            keys in proptest::collection::vec(0u64..2_000_000, 2..=5),
            l0_tables in 1u32..8,
            bpk in 2.0f64..20.0,
            hits in any::<bool>(),
        ) {
            let mut l = loads(&keys);
            l[0].probes = f64::from(l0_tables);
            let k = kinds(keys.len());
            let uniform = plan(FilterAllocation::Uniform, bpk, hits, &k, &l);
            let monkey = plan(FilterAllocation::Monkey, bpk, hits, &k, &l);
            let (ub, mb) = (uniform.total_bits(&l), monkey.total_bits(&l));
            prop_assert!(mb <= ub * 1.0 + 1.0, "overspent: {mb} > {ub}");
            // Unspent: at most the last step that did not fit, the minimum filter of
            // the largest level.
            let largest = *keys.iter().max().unwrap() as f64;
            prop_assert!(ub - mb <= largest * MIN_BITS + 1.0, "underspent: {mb} vs {ub}");
            let (u, m) = (uniform.expected_wasted_reads(&l), monkey.expected_wasted_reads(&l));
            prop_assert!(m <= u * 1.0001 + 1e-12, "monkey {m} > uniform {u}");
            for b in monkey.bits_per_key.iter().flatten() {
                prop_assert!((MIN_BITS..=MAX_BITS).contains(b));
            }
        }
    }
}
