//! Bumping: a Ribbon filter whose slots are nearly all used, by sending the keys that
//! would not fit to a smaller filter behind it (bumped Ribbon, "BuRR": Dillinger,
//! Hübschle-Schneider, Sanders & Walzer, "Fast succinct retrieval and approximate
//! membership using Ribbon", 2022).
//!
//! A standard Ribbon filter with 64-bit rows needs 5–14% more slots than keys for
//! banding to succeed (`ribbon::shape`); every spare slot costs the bits it stores, and
//! that slack is most of what separates version 3 from the `2^-b` bound
//! (docs/notes/2026-12-05-ribbon-bound.md). Bumping gives a layer no spare slots (one
//! per key) and lets each 64-slot bucket refuse the keys it cannot take, recording only a
//! 2-bit threshold per bucket:
//!
//! ```text
//!  layer 0   slots = 64·B ≈ n           buckets of 64 start slots, left to right
//!    bucket i: insert its keys from the highest start offset down;
//!              an insert contradicts at offset o  ->  t = smallest of
//!              THRESHOLDS = {0, 16, 32, 64} above o; undo the bucket's inserts at
//!              offsets < t; those keys are *bumped*; code i = index of t
//!  layer 1   the bumped keys, new hashing, the same again (≈ 1% of n)
//!  layer 2   ...                                      (≈ 0.01% of n)
//!  last      a standard Ribbon layer, slack as version 3's; no bumping
//! ```
//!
//! A query computes its layer-0 start `s`, reads the 2-bit code of bucket `s / 64`,
//! and if `s % 64 < THRESHOLDS[code]` asks the next layer instead; otherwise it is the
//! version-3 query. An absent key meets one layer's columns whichever layer answers,
//! so its rate stays `2^-cols`, and most queries (about 99%) never leave layer 0.
//!
//! Undoing is exact: an insert writes one empty slot and never changes a stored row,
//! and the keys inserted last in a bucket (the lowest offsets) are the ones undone, so
//! clearing their slots restores the band as it was. Whether a set of equations is
//! consistent does not depend on the order of insertion, so once the keys at offsets
//! `≥ o` contradict, every threshold `≤ o` would too: one pass per bucket finds the
//! lowest threshold that works.

use super::band::{Band, Insert};
use super::hash::{layer_salt, ribbon_hash, ribbon_hash_layer, seed_salt, RibbonHash, ROW_BITS};
use super::shape::{slot_factor, Shape, MAX_COLUMNS};
use super::solve::back_substitute;
use crate::hash::KeyHash;

/// Bucket thresholds, by 2-bit code: keys whose start offset in their bucket is below
/// the threshold are bumped (format contract of version 4).
pub(crate) const THRESHOLDS: [u64; 4] = [0, 16, 32, 64];

/// Layers at most, the last one standard (format contract: a reader refuses more).
pub(crate) const MAX_LAYERS: usize = 4;

/// Slots per key of a bumping layer (`ribbon_bump_sweep` measured the choice).
pub(crate) const BUMP_SLOTS_PER_KEY: f64 = 1.0;

/// Below this many keys a layer is the standard last one: bumping would save a few
/// slots and cost a layer's fixed 63-slot tail.
pub(crate) const MIN_BUMP_KEYS: usize = 1024;

/// Extra slots per key of the last layer beyond version 3's rule: it holds about 1% of
/// the keys or fewer, so its slack costs little (0.2% of the slots), and more slack
/// makes its banding (the one step that can fail) fail about never.
const LAST_EXTRA_SLOTS: f64 = 0.15;

/// The salt of `layer`'s hashing for `seed`.
pub(crate) fn salt(seed: u32, layer: usize) -> u64 {
    if layer == 0 {
        seed_salt(seed)
    } else {
        layer_salt(seed, layer as u32)
    }
}

/// The key's equation in `layer`: version 3's in layer 0, a mixed one after
/// (`ribbon::hash::ribbon_hash_layer`).
#[inline(always)]
pub(crate) fn equation(hash: KeyHash, layer: usize, salt: u64, num_starts: u64) -> RibbonHash<u64> {
    if layer == 0 {
        ribbon_hash(hash, salt, num_starts)
    } else {
        ribbon_hash_layer(hash, salt, num_starts)
    }
}

/// The 2-bit code of bucket `i` in a layer's packed codes (32 buckets per word).
#[inline(always)]
pub(crate) fn code(codes: &[u64], i: u64) -> usize {
    let word = codes.get((i / 32) as usize).copied().unwrap_or(0);
    ((word >> ((i % 32) * 2)) & 3) as usize
}

/// One banded layer: its band, its blocks, and (bumping layers) its bucket codes.
#[derive(Debug)]
pub(crate) struct BandedLayer {
    pub band: Band,
    pub blocks: u64,
    pub codes: Option<Vec<u64>>,
    /// Keys offered to the layer (read by the tests and the sweep).
    #[allow(dead_code)]
    pub keys: usize,
}

/// A key's equation and its index among the layer's keys, for sorting.
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    start: u64,
    coeff: u64,
    fingerprint: u32,
    index: u32,
}

/// Bands `keys` into a bumping layer of `blocks` blocks; returns it and the keys it
/// bumped.
fn band_bumping(
    keys: &[KeyHash],
    layer: usize,
    seed: u32,
    blocks: u64,
) -> (BandedLayer, Vec<KeyHash>) {
    let slots = blocks * ROW_BITS;
    let num_starts = slots - (ROW_BITS - 1);
    let salt = salt(seed, layer);
    // Counting sort by bucket ascending, offset descending: the insertion order. The
    // equations are computed twice (a multiply each) rather than buffered, which
    // would cost 24 more bytes per key at the build's peak.
    let rank = |start: u64| (start / ROW_BITS) * ROW_BITS + (ROW_BITS - 1 - start % ROW_BITS);
    let mut first = vec![0u32; slots as usize + 1];
    for &h in keys {
        first[rank(equation(h, layer, salt, num_starts).start) as usize + 1] += 1;
    }
    for i in 1..first.len() {
        first[i] += first[i - 1];
    }
    let mut sorted = vec![Row::default(); keys.len()];
    for (index, &h) in keys.iter().enumerate() {
        let e = equation(h, layer, salt, num_starts);
        let at = &mut first[rank(e.start) as usize];
        sorted[*at as usize] = Row {
            start: e.start,
            coeff: e.coeff,
            fingerprint: e.fingerprint,
            index: index as u32,
        };
        *at += 1;
    }
    drop(first);

    let mut band = Band::new(slots as usize);
    let mut codes = vec![0u64; blocks.div_ceil(32) as usize];
    let mut bumped = Vec::new();
    let mut stored: Vec<(usize, u64)> = Vec::with_capacity(2 * ROW_BITS as usize);
    let mut at = 0;
    while at < sorted.len() {
        let bucket = sorted[at].start / ROW_BITS;
        let end = at
            + sorted[at..]
                .iter()
                .position(|r| r.start / ROW_BITS != bucket)
                .unwrap_or(sorted.len() - at);
        stored.clear();
        let mut threshold = 0;
        let mut code_of_bucket = 0;
        for r in &sorted[at..end] {
            let offset = r.start % ROW_BITS;
            match band.insert(r.start as usize, r.coeff, r.fingerprint) {
                Insert::Stored(slot) => stored.push((slot, offset)),
                Insert::Implied => {}
                Insert::Contradiction => {
                    // THRESHOLDS ends with 64 > every offset.
                    code_of_bucket = THRESHOLDS.iter().position(|&t| t > offset).unwrap_or(3);
                    threshold = THRESHOLDS[code_of_bucket];
                    while let Some(&(slot, o)) = stored.last() {
                        if o >= threshold {
                            break;
                        }
                        band.clear(slot);
                        stored.pop();
                    }
                    break;
                }
            }
        }
        if code_of_bucket > 0 {
            codes[(bucket / 32) as usize] |= (code_of_bucket as u64) << ((bucket % 32) * 2);
            bumped.extend(
                sorted[at..end]
                    .iter()
                    .filter(|r| r.start % ROW_BITS < threshold)
                    .map(|r| keys[r.index as usize]),
            );
        }
        at = end;
    }
    let layer = BandedLayer {
        band,
        blocks,
        codes: Some(codes),
        keys: keys.len(),
    };
    (layer, bumped)
}

/// Bands `keys` into a standard last layer; `None` if this seed's system is singular.
fn band_last(
    keys: &[KeyHash],
    layer: usize,
    seed: u32,
    slots_per_key: Option<f64>,
) -> Option<BandedLayer> {
    if keys.is_empty() {
        return Some(BandedLayer {
            band: Band::new(0),
            blocks: 0,
            codes: None,
            keys: 0,
        });
    }
    let n = keys.len() as u64;
    let factor = slots_per_key.unwrap_or_else(|| slot_factor(n) + LAST_EXTRA_SLOTS);
    let blocks = ((n as f64 * factor).ceil() as u64)
        .div_ceil(ROW_BITS)
        .max(1);
    let slots = blocks * ROW_BITS;
    let num_starts = slots - (ROW_BITS - 1);
    let salt = salt(seed, layer);
    let mut band = Band::new(slots as usize);
    for &h in keys {
        let e = equation(h, layer, salt, num_starts);
        if !band.add(e.start as usize, e.coeff, e.fingerprint) {
            return None;
        }
    }
    Some(BandedLayer {
        band,
        blocks,
        codes: None,
        keys: keys.len(),
    })
}

/// Bands every key into layers with `seed`: bumping layers while enough keys remain,
/// then a standard last one. `None` if the last layer's banding fails (then another
/// seed is tried) or there are more keys than a bucket's `u32` indices reach.
///
/// `last_slots_per_key` replaces the last layer's measured slots per key (tests and
/// experiments starve it to see construction fail).
pub(crate) fn band_layers(
    keys: &[KeyHash],
    seed: u32,
    last_slots_per_key: Option<f64>,
) -> Option<Vec<BandedLayer>> {
    band_layers_at(keys, seed, BUMP_SLOTS_PER_KEY, last_slots_per_key)
}

/// [`band_layers`] with `slots_per_key` slots per key in each bumping layer.
fn band_layers_at(
    keys: &[KeyHash],
    seed: u32,
    slots_per_key: f64,
    last_slots_per_key: Option<f64>,
) -> Option<Vec<BandedLayer>> {
    u32::try_from(keys.len()).ok()?;
    let mut layers = Vec::with_capacity(MAX_LAYERS);
    let mut owned: Vec<KeyHash>;
    let mut rest: &[KeyHash] = keys;
    while layers.len() + 1 < MAX_LAYERS && rest.len() >= MIN_BUMP_KEYS {
        let blocks = ((rest.len() as f64 * slots_per_key / ROW_BITS as f64).round() as u64).max(1);
        let (layer, bumped) = band_bumping(rest, layers.len(), seed, blocks);
        layers.push(layer);
        owned = bumped;
        rest = &owned;
    }
    layers.push(band_last(rest, layers.len(), seed, last_slots_per_key)?);
    Some(layers)
}

/// Splits `budget_bits` of solution over the layers' blocks: every block gets `r` or
/// `r + 1` columns, the `r + 1` ones spread over the layers in proportion to their
/// blocks (the rest to the first layer that has room). `None` if not one column fits.
pub(crate) fn shapes(layers: &[BandedLayer], budget_bits: f64) -> Option<Vec<Shape>> {
    if !budget_bits.is_finite() || budget_bits < 0.0 {
        return None;
    }
    let total: u64 = layers.iter().map(|l| l.blocks).sum();
    if total == 0 {
        return None;
    }
    let words = (budget_bits / ROW_BITS as f64).floor() as u64;
    let (mut lower, mut extra) = (words / total, words % total);
    if lower == 0 {
        return None;
    }
    if lower >= u64::from(MAX_COLUMNS) {
        lower = u64::from(MAX_COLUMNS) - 1;
        extra = 0;
    }
    let mut shapes: Vec<Shape> = layers
        .iter()
        .map(|l| Shape {
            width: ROW_BITS,
            blocks: l.blocks,
            lower_cols: lower as u32,
            upper_blocks: (u128::from(extra) * u128::from(l.blocks) / u128::from(total)) as u64,
        })
        .collect();
    let mut left = extra - shapes.iter().map(|s| s.upper_blocks).sum::<u64>();
    for s in shapes.iter_mut() {
        let room = s.blocks.saturating_sub(1).saturating_sub(s.upper_blocks);
        let give = room.min(left);
        s.upper_blocks += give;
        left -= give;
    }
    Some(shapes)
}

/// Every layer's solution, in the shapes given (`shapes[i].blocks == layers[i].blocks`).
pub(crate) fn solve(layers: &[BandedLayer], shapes: &[Shape]) -> Vec<Vec<u64>> {
    layers
        .iter()
        .zip(shapes)
        .map(|(l, s)| {
            if l.blocks == 0 {
                Vec::new()
            } else {
                back_substitute(&l.band, s)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(seed: u64, n: usize) -> Vec<KeyHash> {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        (0..n)
            .map(|_| KeyHash::from_halves(next(), next()))
            .collect()
    }

    /// Every key lands in exactly one layer, and a key is in layer `l + 1` exactly when
    /// layer `l`'s code for its bucket bumps it: what a query will recompute.
    #[test]
    fn bumped_keys_are_exactly_those_the_codes_send_on() {
        let keys = hashes(7, 30_000);
        let layers = band_layers(&keys, 0, None).unwrap();
        assert!(layers.len() >= 2);
        let mut reaching: Vec<KeyHash> = keys.clone();
        for (l, layer) in layers.iter().enumerate() {
            assert_eq!(layer.keys, reaching.len(), "layer {l}");
            let Some(codes) = &layer.codes else {
                assert_eq!(l, layers.len() - 1);
                break;
            };
            let ns = layer.blocks * ROW_BITS - (ROW_BITS - 1);
            let salt = salt(0, l);
            reaching.retain(|&h| {
                let s = equation(h, l, salt, ns).start;
                s % ROW_BITS < THRESHOLDS[code(codes, s / ROW_BITS)]
            });
        }
        // Layer 0 holds most keys.
        assert!(layers[1].keys < keys.len() / 8, "{}", layers[1].keys);
    }

    #[test]
    fn shapes_spend_the_budget_without_passing_it() {
        let keys = hashes(9, 20_000);
        let layers = band_layers(&keys, 0, None).unwrap();
        let budget = 9.7 * 20_000.0;
        let shapes = shapes(&layers, budget).unwrap();
        let words: u64 = shapes.iter().map(|s| s.words()).sum();
        assert!((words * 64) as f64 <= budget);
        assert!((words * 64) as f64 > budget - 64.0 * shapes.len() as f64);
        for s in &shapes {
            assert!(s.upper_blocks < s.blocks.max(1));
        }
        assert!(super::shapes(&layers, 10.0).is_none());
    }

    /// How the bumping constants were chosen: for each table size and slots per key of
    /// a bumping layer, the slots per key over all layers, the share of keys each layer
    /// passes on, and how often the last layer fails. Run with
    /// `cargo test --release -p bloomkv-filter --lib ribbon_bump_sweep -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn ribbon_bump_sweep() {
        for (n, trials) in [
            (4_096usize, 40u64),
            (10_000, 40),
            (100_000, 10),
            (1_000_000, 4),
        ] {
            for alpha in [0.90, 0.93, 0.96, 0.98, 1.0, 1.02, 1.04] {
                let (mut slots, mut fails, mut passed) = (0u64, 0u32, vec![0usize; MAX_LAYERS]);
                for t in 0..trials {
                    let keys = hashes(1000 * n as u64 + t, n);
                    match band_layers_at(&keys, 0, alpha, None) {
                        None => fails += 1,
                        Some(layers) => {
                            for (l, layer) in layers.iter().enumerate() {
                                slots += layer.blocks * ROW_BITS;
                                passed[l] += layer.keys;
                            }
                        }
                    }
                }
                let ok = (trials - u64::from(fails)).max(1) as f64;
                let share: Vec<String> = passed
                    .iter()
                    .map(|&p| format!("{:.4}", p as f64 / ok / n as f64))
                    .collect();
                println!(
                    "n {n:>8} alpha {alpha:.2}: slots/key {:.4}  keys per layer {}  last fails {fails}/{trials}",
                    slots as f64 / ok / n as f64,
                    share.join(" ")
                );
            }
        }
    }
}
