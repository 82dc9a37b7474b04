//! Bit layouts: where the `k` probes of a key land in the bit array.
//!
//! A layout turns one [`KeyHash`] into `k` bit positions. Two are offered, and the
//! filter block records which one built it:
//!
//! **Standard** — the textbook: probe `i` is bit `fastrange(h1 + i·h2, m)` anywhere in
//! the `m`-bit array. Its false-positive rate is the formula
//! `(1 - e^{-kn/m})^k`, plus what double hashing adds when `h2` makes the probes
//! cluster ([`double_hashing_excess`](crate::sizing) in `sizing.rs`: negligible at 10
//! bits per key, dominant past ~25 in small filters); a lookup of a present key
//! touches up to `k` cache lines.
//!
//! ```text
//!  bits: |....1.........1.....................1..........1.........1...|
//!             ^probe 0  ^probe 3              ^probe 1   ^probe 4  ^probe 2
//! ```
//!
//! **Cache-local** — RocksDB's FastLocalBloom idea: `h1` picks one 512-bit (64-byte)
//! line, and all `k` probes fall inside it, each taking the top 9 bits of a remixed
//! `h2`. A lookup costs one cache miss whatever `k` is. Lines hold a varying number of
//! keys, so at equal bits the false-positive rate is a little higher (0.97% against
//! 0.82% at 10 bits per key); see
//! [`cache_local_false_positive_rate`](crate::sizing::cache_local_false_positive_rate).
//!
//! ```text
//!  lines: | line 0 (512 b) | line 1 (512 b) | ... | line L-1 |
//!                            ^ fastrange(h1, L)
//!  probe j: bit (h2 · G^j) >> 55 of that line     (G = 2^64 / golden ratio, odd)
//! ```

use crate::hash::{fastrange64, KeyHash};
use crate::sizing::{self, CACHE_LINE_BITS, MAX_NUM_BITS};

/// The most probes a filter block may declare: the standard layout's optimum at ~43
/// bits per key (its builder clamps there), and what the cache-local layout used above
/// 37 bits/key before its table was recomputed; such blocks still open.
pub const MAX_PROBES: u32 = 30;

/// Where a key's probes land: anywhere in the array, or inside one 64-byte line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum BloomLayout {
    /// Probes spread over the whole array; matches the textbook formula.
    Standard,
    /// All probes of a key inside one 64-byte cache line: one cache miss per lookup.
    #[default]
    CacheLocal,
}

impl BloomLayout {
    /// The layout's short name, as shown by [`FilterInfo::layout`](crate::FilterInfo).
    pub const fn name(self) -> &'static str {
        match self {
            BloomLayout::Standard => "standard",
            BloomLayout::CacheLocal => "cache-local",
        }
    }

    /// The id stored in the filter block trailer (format contract: 0 and 1).
    pub const fn id(self) -> u8 {
        match self {
            BloomLayout::Standard => 0,
            BloomLayout::CacheLocal => 1,
        }
    }

    /// The layout with trailer id `id`, if there is one.
    pub const fn from_id(id: u8) -> Option<BloomLayout> {
        match id {
            0 => Some(BloomLayout::Standard),
            1 => Some(BloomLayout::CacheLocal),
            _ => None,
        }
    }

    /// The array size is a multiple of this many bits: a `u64` word, or a 512-bit line.
    pub const fn granularity_bits(self) -> u64 {
        match self {
            BloomLayout::Standard => 64,
            BloomLayout::CacheLocal => CACHE_LINE_BITS,
        }
    }

    /// Probes per key at `bits_per_key`, clamped to `1..=MAX_PROBES`.
    ///
    /// Standard: `round(bits_per_key · ln 2)`, the formula's optimum (7 at 10 bits/key).
    /// Cache-local: from [`CACHE_LOCAL_PROBES`], the exact line model's best `k` (6 at 10
    /// bits/key; measurements agree).
    pub fn num_probes(self, bits_per_key: f64) -> u32 {
        let k = match self {
            BloomLayout::Standard => (bits_per_key * std::f64::consts::LN_2).round(),
            BloomLayout::CacheLocal => {
                let millibits = (bits_per_key * 1000.0).round();
                CACHE_LOCAL_PROBES
                    .iter()
                    .find(|&&(limit, _)| millibits <= f64::from(limit))
                    .map_or(f64::from(CACHE_LOCAL_MAX_PROBES), |&(_, k)| f64::from(k))
            }
        };
        // NaN clamps to NaN and casts to 0; max(1) below catches it.
        (k.clamp(1.0, f64::from(MAX_PROBES)) as u32).max(1)
    }

    /// Bits of the array for `num_keys` keys: `ceil(num_keys · bits_per_key)` rounded
    /// up to the layout's granularity, at least one word or line. Even an empty table
    /// gets a (zero) array, so its reader needs no special case and says "absent".
    pub fn num_bits(self, num_keys: u64, bits_per_key: f64) -> u64 {
        let g = self.granularity_bits();
        let raw = (num_keys as f64 * bits_per_key).ceil();
        let raw = if raw.is_finite() && raw > 0.0 {
            (raw as u64).min(MAX_NUM_BITS)
        } else {
            0
        };
        raw.div_ceil(g).max(1) * g
    }

    /// The false-positive rate this layout is expected to have with these sizes:
    /// the standard formula, or the cache-local model (binomial line loads, exact
    /// occupancy per line).
    pub fn estimated_fp_rate(self, num_bits: u64, num_keys: u64, num_probes: u32) -> f64 {
        match self {
            BloomLayout::Standard => {
                let (m, n) = (num_bits as f64, num_keys as f64);
                (sizing::standard_fp(m, n, f64::from(num_probes))
                    + sizing::double_hashing_excess(m, n, num_probes))
                .min(1.0)
            }
            BloomLayout::CacheLocal => {
                let lines = (num_bits / CACHE_LINE_BITS).max(1);
                sizing::cache_local_fp(lines, num_keys, num_probes).0
            }
        }
    }
}

/// Cache-local probe counts: `(upper limit in millibits per key, k)`, first match wins;
/// above the last limit, [`CACHE_LOCAL_MAX_PROBES`].
///
/// Computed from the exact line model
/// ([`cache_local_false_positive_rate`](crate::sizing::cache_local_false_positive_rate),
/// many lines): each limit is the crossover where `k + 1` probes start to beat `k`,
/// rounded so that the switch happens inside the millibit that holds the crossover
/// (bits per key are rounded to millibits before the lookup). So `k` is the model's
/// best at every millibit from 1 to 100 bits per key, and the false-positive rate never
/// rises as bits grow (tests in this module check both; the derivation is the ignored
/// test `derive_cache_local_probe_table`). Measurements agree: at 10 bits/key k=6
/// measured 0.972% and k=7 0.966% against a model of 0.966% / 0.968% (the
/// `probe_table` test in `tests/fp_rates.rs`, run with `--ignored`).
///
/// The counts sit below the standard layout's optimum at high bits per key (9 at 16
/// instead of 11, 23 at 100 instead of 69): crowded lines fill up faster with extra
/// probes. They agree with RocksDB's `FastLocalBloomImpl::ChooseNumProbes`
/// (`util/bloom_impl.h`, chosen by its authors' measurements) at 5, 10 and 20 bits/key
/// (3, 6 and 11), but not everywhere: below 25 bits/key their switch points differ by
/// up to 0.9 bits per key, so at 14.0 bits/key this table says 9 and RocksDB's 8, at 21.5 it
/// says 12 and RocksDB's 11 (`tests/probe_table_vs_rocksdb.rs` lists every range where
/// they differ); above ~25 bits/key they part further, and this table, unlike the one
/// it replaces, has no jump to 30 probes at 37 bits/key (which made 37.001 bits/key
/// 5.4x worse than 37.000). Blocks record their `k`, so blocks written with the old
/// table read exactly as before.
pub const CACHE_LOCAL_PROBES: &[(u32, u32)] = &[
    (2_082, 1),
    (3_584, 2),
    (5_104, 3),
    (6_673, 4),
    (8_317, 5),
    (10_058, 6),
    (11_921, 7),
    (13_932, 8),
    (16_123, 9),
    (18_527, 10),
    (21_185, 11),
    (24_140, 12),
    (27_445, 13),
    (31_161, 14),
    (35_360, 15),
    (40_126, 16),
    (45_558, 17),
    (51_774, 18),
    (58_915, 19),
    (67_148, 20),
    (76_673, 21),
    (87_732, 22),
    (100_000, 23),
];

/// The cache-local probe count above the table (beyond the accepted 100 bits/key),
/// RocksDB's cap: in a 512-bit line, more probes stop paying.
pub const CACHE_LOCAL_MAX_PROBES: u32 = 24;

/// Golden-ratio multiplier (`2^64 / φ`, odd): a bijection on `u64` that moves low-bit
/// entropy into the top bits, where the next probe reads its 9-bit position.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// One 64-byte line of a cache-local filter, aligned so that it *is* one cache line
/// (an unaligned 64-byte read would straddle two).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Line(pub(crate) [u64; 8]);

// ---- standard layout: probes over the whole array ------------------------------------

/// Sets the `k` bits of `hash` in a standard array of `num_bits` bits (`words` holds at
/// least `ceil(num_bits / 64)` words). Returns whether any bit changed from 0 to 1.
#[inline]
pub(crate) fn standard_insert(words: &mut [u64], num_bits: u64, k: u32, hash: KeyHash) -> bool {
    let mut h = hash.h1;
    let mut changed = 0u64;
    for _ in 0..k {
        // Multiply-shift instead of `%`: one multiplication, no division.
        let bit = fastrange64(h, num_bits);
        let mask = 1u64 << (bit & 63);
        if let Some(w) = words.get_mut((bit >> 6) as usize) {
            changed |= !*w & mask;
            *w |= mask;
        }
        // Double hashing: the next probe is one odd step h2 further.
        h = h.wrapping_add(hash.h2);
    }
    changed != 0
}

/// Whether all `k` bits of `hash` are set in a standard array of `num_bits` bits.
#[inline]
pub(crate) fn standard_contains(words: &[u64], num_bits: u64, k: u32, hash: KeyHash) -> bool {
    let mut h = hash.h1;
    for _ in 0..k {
        let bit = fastrange64(h, num_bits);
        // Each probe may be a cache miss in a large filter: stop at the first zero,
        // which is where most absent keys end (half the bits are zero).
        match words.get((bit >> 6) as usize) {
            Some(w) if (w >> (bit & 63)) & 1 == 1 => {}
            // A missing word cannot happen for a consistent array; answering "may
            // contain" there keeps the filter failing open, never into a false negative.
            Some(_) => return false,
            None => return true,
        }
        h = h.wrapping_add(hash.h2);
    }
    true
}

// ---- cache-local layout: all probes in one 64-byte line ------------------------------

// Probes are independent 9-bit positions, so a key's k probes may repeat a bit (about
// 3% of keys at k = 6); such a key sets and tests fewer bits, which is why the exact
// model says 0.966% at 10 bits/key where the textbook per-line formula says 0.9576%.
// Drawing k *distinct* positions (skipping repeats) measured 0.960%, but building and
// comparing a 512-bit mask doubled the query time (7.6 -> 14.6 ns in cache, hashing
// included) and would add ~70 ns to a store lookup over ten tables. An arithmetic
// progression of positions (distinct by construction) measured worse, 1.085%, and one
// probe per 64-bit word 0.972%. Speed won: 1.2% more false positives is 0.0012 extra
// reads per table per absent lookup.

/// Sets the `k` bits of `hash` inside its line. `lines` must not be empty.
#[inline]
pub(crate) fn cache_local_insert(lines: &mut [Line], k: u32, hash: KeyHash) {
    let idx = fastrange64(hash.h1, lines.len() as u64) as usize;
    if let Some(line) = lines.get_mut(idx) {
        let mut h = hash.h2;
        for _ in 0..k {
            let bit = h >> 55; // top 9 bits: a position in 0..512
            line.0[(bit >> 6) as usize] |= 1u64 << (bit & 63);
            h = h.wrapping_mul(GOLDEN);
        }
    }
}

/// Whether all `k` bits of `hash` are set inside its line. `lines` must not be empty.
#[inline]
pub(crate) fn cache_local_contains(lines: &[Line], k: u32, hash: KeyHash) -> bool {
    // One multiply picks the line; this is the only memory access that can miss cache.
    let idx = fastrange64(hash.h1, lines.len() as u64) as usize;
    let Some(line) = lines.get(idx) else {
        return true; // unreachable for a non-empty array; fail open
    };
    let mut h = hash.h2;
    let mut all = 1u64;
    for _ in 0..k {
        // `h >> 55` < 512, so `bit >> 6` < 8: the compiler drops the bounds check.
        let bit = h >> 55;
        // No early exit: the line is already in L1, and AND-ing every probe avoids a
        // branch that a miss (about half the bits are zero) would mispredict.
        all &= line.0[(bit >> 6) as usize] >> (bit & 63);
        h = h.wrapping_mul(GOLDEN);
    }
    all & 1 == 1
}

/// Starts loading the line `hash` maps to into the cache, without waiting for it.
///
/// A store asking ten tables' filters about one key issues all ten loads first and
/// tests the lines after, so the ten cache misses overlap instead of queueing.
#[inline]
pub(crate) fn cache_local_prefetch(lines: &[Line], hash: KeyHash) {
    let idx = fastrange64(hash.h1, lines.len() as u64) as usize;
    if let Some(line) = lines.get(idx) {
        prefetch(line);
    }
}

/// Starts loading the word of the first probe of a standard filter into the cache.
#[inline]
pub(crate) fn standard_prefetch(words: &[u64], num_bits: u64, hash: KeyHash) {
    if let Some(word) = words.get((fastrange64(hash.h1, num_bits) >> 6) as usize) {
        prefetch(word);
    }
}

/// A cache hint: load the line holding `r`. It never faults and changes no state.
///
/// Measured with `cargo bench --bench store` (absent-key get, ten overlapping tables,
/// three interleaved runs each): 424–441 ns with this prefetch, 440–552 ns with a plain
/// load instead, 495–616 ns with neither. The intrinsic is the one `unsafe` in the
/// filter crate.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint to the cache; it reads nothing the program
        // sees and cannot fault, and `r` is a valid reference anyway. SSE, which it
        // needs, is part of every x86-64 target.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line_model::{filter_fp, LineModel};

    #[test]
    fn ids_round_trip_and_names_are_stable() {
        for layout in [BloomLayout::Standard, BloomLayout::CacheLocal] {
            assert_eq!(BloomLayout::from_id(layout.id()), Some(layout));
        }
        assert_eq!(BloomLayout::from_id(2), None);
        assert_eq!(BloomLayout::Standard.name(), "standard");
        assert_eq!(BloomLayout::CacheLocal.name(), "cache-local");
    }

    #[test]
    fn probe_counts() {
        assert_eq!(BloomLayout::Standard.num_probes(10.0), 7);
        assert_eq!(BloomLayout::CacheLocal.num_probes(10.0), 6);
        assert_eq!(BloomLayout::Standard.num_probes(0.1), 1);
        assert_eq!(BloomLayout::Standard.num_probes(1000.0), MAX_PROBES);
        assert_eq!(
            BloomLayout::CacheLocal.num_probes(1000.0),
            CACHE_LOCAL_MAX_PROBES
        );
        assert_eq!(BloomLayout::CacheLocal.num_probes(100.0), 23);
        assert_eq!(
            BloomLayout::CacheLocal.num_probes(f64::NAN),
            CACHE_LOCAL_MAX_PROBES
        );
        assert_eq!(BloomLayout::CacheLocal.num_probes(5.0), 3);
        assert_eq!(BloomLayout::CacheLocal.num_probes(20.0), 11);
        assert_eq!(BloomLayout::Standard.num_probes(f64::NAN), 1);
        let mut last = 0;
        for tenth in 10..=1000 {
            let k = BloomLayout::CacheLocal.num_probes(f64::from(tenth) / 10.0);
            assert!(k >= last, "probe count must not fall as bits grow");
            last = k;
        }
    }

    #[test]
    fn sizes_round_up_to_the_granularity() {
        assert_eq!(BloomLayout::Standard.num_bits(0, 10.0), 64);
        assert_eq!(BloomLayout::Standard.num_bits(7, 10.0), 128);
        assert_eq!(BloomLayout::Standard.num_bits(64, 10.0), 640);
        assert_eq!(BloomLayout::CacheLocal.num_bits(0, 10.0), 512);
        assert_eq!(BloomLayout::CacheLocal.num_bits(52, 10.0), 1024);
        assert_eq!(BloomLayout::CacheLocal.num_bits(1000, 10.0), 10_240);
        let huge = BloomLayout::Standard.num_bits(u64::MAX, 100.0);
        assert_eq!(huge, MAX_NUM_BITS);
    }

    #[test]
    fn standard_probes_reach_bits_beyond_2_pow_32() {
        // Index math only: a hash near 2^64 must map near the end of a 2^33-bit array.
        let m = 1u64 << 33;
        let words = (m / 64) as usize;
        assert_eq!(fastrange64(u64::MAX, m) >> 6, words as u64 - 1);
    }

    #[test]
    fn inserted_hashes_are_found_in_both_layouts() {
        let mut words = vec![0u64; 4];
        let mut lines = vec![Line::default(); 3];
        for i in 0..40u64 {
            let h = KeyHash::of(&i.to_le_bytes());
            standard_insert(&mut words, 250, 5, h);
            cache_local_insert(&mut lines, 6, h);
        }
        for i in 0..40u64 {
            let h = KeyHash::of(&i.to_le_bytes());
            assert!(standard_contains(&words, 250, 5, h));
            assert!(cache_local_contains(&lines, 6, h));
        }
        // Nothing beyond num_bits is ever set.
        assert_eq!(words[3] >> (250 - 192), 0);
    }

    /// The model's rate of `k` probes at `bpk` bits per key, for a filter of many
    /// lines (2^24: binomial loads there are Poisson to 7 digits).
    fn model_fp(models: &[LineModel], k: u32, bpk: f64) -> f64 {
        let lines = 1u64 << 24;
        let keys = (lines as f64 * 512.0 / bpk).round() as u64;
        filter_fp(&models[k as usize - 1], lines, keys).0
    }

    fn models() -> Vec<LineModel> {
        // 900 keys per line covers the loads summed at 1 bit per key (mean 512).
        (1..=CACHE_LOCAL_MAX_PROBES)
            .map(|k| LineModel::new(k, 900))
            .collect()
    }

    /// The switch from `k` to `k + 1` falls inside the millibit that holds the
    /// model's crossover: `k` is no worse at the bottom of that millibit and no better
    /// at its top. This is what makes the chosen rate monotone across a switch.
    #[test]
    fn cache_local_table_switches_at_the_model_crossovers() {
        let models = models();
        let mut last_k = 0;
        for pair in CACHE_LOCAL_PROBES.windows(2) {
            let ((limit, k), (_, next)) = (pair[0], pair[1]);
            assert_eq!(next, k + 1, "consecutive counts");
            assert!(k > last_k);
            last_k = k;
            let below = (f64::from(limit) - 0.5) / 1000.0;
            let above = (f64::from(limit) + 0.5) / 1000.0;
            assert!(
                model_fp(&models, k, below) <= model_fp(&models, next, below),
                "k={k} already beaten below {limit}"
            );
            assert!(
                model_fp(&models, k, above) >= model_fp(&models, next, above),
                "k={k} still best above {limit}"
            );
        }
    }

    /// At every tenth of a bit per key from 1 to 100, the table's `k` is the model's
    /// best among all `k <= 24`.
    #[test]
    fn cache_local_table_is_the_model_argmin() {
        let models = models();
        for tenths in 10..=1000u32 {
            let bpk = f64::from(tenths) / 10.0;
            let chosen = BloomLayout::CacheLocal.num_probes(bpk);
            let fp = model_fp(&models, chosen, bpk);
            // Only neighbours can win: the rate is unimodal in k. Checking all is
            // cheap enough at the tenths where it matters (near a switch).
            for k in chosen.saturating_sub(2).max(1)..=(chosen + 2).min(CACHE_LOCAL_MAX_PROBES) {
                assert!(
                    fp <= model_fp(&models, k, bpk),
                    "{bpk} bits/key: chosen k={chosen} loses to k={k}"
                );
            }
        }
    }

    /// More bits never mean more false positives: the model's rate at the table's `k`
    /// is non-increasing from 1 to 100 bits per key (every hundredth, and on both
    /// sides of every switch).
    #[test]
    fn cache_local_rate_is_monotone_in_bits_per_key() {
        let models = models();
        let mut points: Vec<f64> = (100..=10_000u32).map(|c| f64::from(c) / 100.0).collect();
        for &(limit, _) in CACHE_LOCAL_PROBES {
            for d in [-0.5001, -0.4999, 0.4999, 0.5001] {
                points.push((f64::from(limit) + d) / 1000.0);
            }
        }
        points.retain(|b| (1.0..=100.0).contains(b));
        points.sort_by(f64::total_cmp);
        let mut last = f64::INFINITY;
        for bpk in points {
            let fp = model_fp(&models, BloomLayout::CacheLocal.num_probes(bpk), bpk);
            assert!(fp <= last, "rate rises to {fp} at {bpk} bits/key");
            last = fp;
        }
    }

    /// How the table was derived: for each `k`, the crossover with `k + 1` found by
    /// bisection on the model, printed as table rows. Run with
    /// `cargo test --release -p bloomkv-filter --lib derive_cache_local_probe_table -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn derive_cache_local_probe_table() {
        let models = models();
        for k in 1..CACHE_LOCAL_MAX_PROBES {
            // k + 1 beats k somewhere in (1, 120) bits per key, once.
            let better = |b: f64| model_fp(&models, k + 1, b) < model_fp(&models, k, b);
            let (mut lo, mut hi) = (1.0f64, 120.0f64);
            if better(lo) || !better(hi) {
                println!("k={k}: no crossover in range");
                continue;
            }
            for _ in 0..60 {
                let mid = (lo + hi) / 2.0;
                if better(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            let millibits = (hi * 1000.0 - 0.5).ceil();
            println!("    ({millibits}, {k}), // crossover at {:.3} bits/key", hi);
        }
    }
}
