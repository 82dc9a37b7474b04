//! The range filter as a table sees it: never a false negative for any key set and
//! any range, a false-positive rate within Grafite's `l / 2^(B−2)` bound for uniform,
//! clustered and correlated queries, the memory it was given, and every damaged
//! block refused.
//!
//! Rate tests use fixed seeds. Their allowance is the binomial standard deviation of
//! the number of false positives among `N` empty queries at the bound's rate `p`:
//! observed ≤ `N·p + 4·sqrt(N·p·(1−p)) + 1`. The bound is on the expectation over
//! the hash seed, and a fixed filter's queries are not independent draws, so the
//! tests use many keys (the rate then concentrates) and a fixed seed.

use std::collections::BTreeSet;
use std::ops::Bound;

use bloomkv_filter::{FilterError, RangeFilterBuilder, RangeFilterReader};
use proptest::prelude::*;

/// SplitMix64: reproducible synthetic keys and queries.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// A byte key whose mapped integer is `x`: a one-byte prefix, then `x` big-endian.
fn key(x: u64) -> Vec<u8> {
    let mut k = b"k".to_vec();
    k.extend_from_slice(&x.to_be_bytes());
    k
}

fn build(keys: &[Vec<u8>], bits_per_key: f64, max_len: u64) -> RangeFilterReader {
    let mut b = RangeFilterBuilder::new(bits_per_key, max_len).unwrap();
    for k in keys {
        b.add_key(k);
    }
    RangeFilterReader::open(&b.finish()).unwrap()
}

/// Whether the set holds a key in `start ..` `end`.
fn truth(set: &BTreeSet<Vec<u8>>, start: &[u8], end: Bound<&[u8]>) -> bool {
    let end = match end {
        Bound::Included(e) if e < start => return false,
        Bound::Excluded(e) if e <= start => return false,
        Bound::Included(e) => Bound::Included(e.to_vec()),
        Bound::Excluded(e) => Bound::Excluded(e.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    set.range((Bound::Included(start.to_vec()), end))
        .next()
        .is_some()
}

/// A query bound near a stored key: the key, a prefix of it, it with a byte added, or
/// it with its last byte moved up or down.
fn near(k: &[u8], how: u8, byte: u8) -> Vec<u8> {
    let mut v = k.to_vec();
    match how % 5 {
        0 => {}
        1 => v.truncate(v.len() / 2),
        2 => v.push(byte),
        3 => {
            if let Some(last) = v.last_mut() {
                *last = last.wrapping_add(1 + byte % 3);
            }
        }
        _ => {
            if let Some(last) = v.last_mut() {
                *last = last.wrapping_sub(1 + byte % 3);
            }
        }
    }
    v
}

fn key_set() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // A long shared prefix (or none), then short suffixes over a small alphabet so
    // keys collide after the 8 mapped bytes, are shorter than 8 bytes, or are empty.
    (
        prop::collection::vec(any::<u8>(), 0..24),
        prop::collection::vec(prop::collection::vec(0u8..4, 0..12), 1..200),
    )
        .prop_map(|(prefix, suffixes)| {
            suffixes
                .into_iter()
                .map(|s| {
                    let mut k = prefix.clone();
                    k.extend(s);
                    k
                })
                .collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Byte keys with long shared prefixes, short keys, duplicates, merged keys; any
    /// bits per key and maximum length (tiny universes make hashed ranges wrap, huge
    /// `L` lets ranges reach `r`): every range that holds a key says "maybe".
    #[test]
    fn no_false_negatives_for_byte_keys(
        keys in key_set(),
        bits_per_key in 3.0f64..24.0,
        max_len in prop::sample::select(vec![1u64, 2, 16, 1 << 20, 1 << 50, u64::MAX]),
        queries in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(),
            any::<u8>(), any::<u8>(), any::<u8>(), 0u8..3), 64),
        seed in any::<u64>(),
    ) {
        let mut b = RangeFilterBuilder::new(bits_per_key, max_len).unwrap().with_seed(seed);
        // Sorted, as a table adds them, and once each in reverse too: order is free.
        let mut sorted = keys.clone();
        sorted.sort();
        for k in sorted.iter().rev() {
            b.add_key(k);
        }
        let reader = RangeFilterReader::open(&b.finish()).unwrap();
        let set: BTreeSet<Vec<u8>> = keys.iter().cloned().collect();
        let stored: Vec<&Vec<u8>> = set.iter().collect();
        // L ≤ r: a longer block would alias its own keys r apart.
        let stats = reader.stats();
        prop_assert!(stats.max_range_len <= stats.reduced_universe);
        prop_assert!(stats.max_range_len == max_len || stats.max_range_len == stats.reduced_universe);
        for k in &stored {
            prop_assert!(reader.may_contain_range(k, Bound::Included(k)));
        }
        for (i, j, how_a, how_b, byte, end_kind) in queries {
            let (i, j) = (i.index(stored.len()), j.index(stored.len()));
            let (i, j) = (i.min(j), i.max(j));
            let start = near(stored[i], how_a, byte);
            let end = near(stored[j], how_b, byte.rotate_left(3));
            let end = match end_kind {
                0 => Bound::Included(&end[..]),
                1 => Bound::Excluded(&end[..]),
                _ => Bound::Unbounded,
            };
            if truth(&set, &start, end) {
                prop_assert!(reader.may_contain_range(&start, end),
                    "false negative for {:?} .. {:?}", start, end);
            }
        }
    }

    /// Integer keys in a small universe, so that ranges of every length, touching the
    /// set's ends, crossing block boundaries and wrapping in hash space, hold keys.
    #[test]
    fn no_false_negatives_for_every_range_length(
        xs in prop::collection::btree_set(0u64..4_096, 1..64),
        bits_per_key in 3.0f64..16.0,
        max_len in 1u64..300,
        seed in any::<u64>(),
        starts in prop::collection::vec(0u64..4_200, 16),
    ) {
        // Keys in a window of 4096 integers, plus 0 and 2^64 − 1 so that the set's
        // common prefix is "k" alone and a key's mapped integer is x itself.
        let base = 1u64 << 40;
        let xs: BTreeSet<u64> = xs.into_iter().map(|x| base + x).chain([0, u64::MAX]).collect();
        let mut b = RangeFilterBuilder::new(bits_per_key, max_len).unwrap().with_seed(seed);
        for &x in &xs {
            b.add_key(&key(x));
        }
        let reader = RangeFilterReader::open(&b.finish()).unwrap();
        prop_assert_eq!(reader.stats().prefix_len, 1);
        let window = xs.range(base..).next().copied().unwrap_or(base)..=base + 4_096;
        let (lo, hi) = (*window.start(), *xs.range(window.clone()).next_back().unwrap_or(&base));
        let starts = starts.into_iter().map(|s| base + s);
        for a in starts.chain([lo, hi, lo - 1, hi + 1]) {
            for len in 1..=(max_len + 2).min(400) {
                let b_ = a + len - 1;
                let holds = xs.range(a..=b_).next().is_some();
                let (ka, kb) = (key(a), key(b_));
                prop_assert_eq!(reader.map_key(&ka), a);
                if holds {
                    prop_assert!(reader.may_contain_range(&ka, Bound::Included(&kb)));
                    prop_assert!(reader.may_contain_mapped(a, b_));
                }
                if xs.range(a..b_).next().is_some() {
                    prop_assert!(reader.may_contain_range(&ka, Bound::Excluded(&kb)));
                }
            }
        }
    }

    /// Random bytes under a valid magic, version and checksum: refused without a
    /// panic (random sizes essentially never agree with the bytes; the blocks that
    /// do open are in `damaged_real_blocks_open_or_refuse_and_never_panic`).
    #[test]
    fn random_blocks_are_refused_without_panic(
        header in prop::collection::vec(any::<u8>(), 48..=48),
        body in prop::collection::vec(any::<u8>(), 0..200),
        small in 0u32..300,
    ) {
        let mut block = b"BKVR\x01\x01\x00\x00".to_vec();
        block.extend_from_slice(&header);
        block[48..52].copy_from_slice(&small.to_le_bytes());
        block.extend_from_slice(&body);
        let crc = crc32fast_hash(&block);
        block.extend_from_slice(&crc.to_le_bytes());
        if let Ok(r) = RangeFilterReader::open(&block) {
            let _ = r.may_contain_range(b"a", Bound::Included(b"b"));
            let _ = r.stats();
        }
    }
}

/// Real blocks damaged under a fresh checksum, so only the block's own validation can
/// object: bytes of the Elias–Fano words changed (most such blocks still open: their
/// sizes agree), or a header count, universe, block length or seed replaced. Each is
/// opened or refused, never a panic; an opened one answers ranges and reports stats
/// without a panic. At least a third open, so the query path is exercised (a random
/// header, the proptest above, essentially never opens).
#[test]
fn damaged_real_blocks_open_or_refuse_and_never_panic() {
    let mut rng = SplitMix(0xDA3A6E);
    let (mut opened, trials) = (0, 3_000);
    for t in 0..trials {
        let n = 1 + rng.below(300) as usize;
        let keys: Vec<Vec<u8>> = (0..n).map(|_| key(rng.next() >> 1)).collect();
        let mut b = RangeFilterBuilder::new(8.0 + rng.below(10) as f64, 1 + rng.below(64)).unwrap();
        for k in &keys {
            b.add_key(k);
        }
        let mut block = b.finish();
        let body_end = block.len() - 4;
        let s = u32::from_le_bytes(block[48..52].try_into().unwrap()) as usize;
        let g = u32::from_le_bytes(block[52..56].try_into().unwrap()) as usize;
        let words = 56 + s + g;
        if t % 4 == 0 {
            // A header field: n, r, L or seed, replaced.
            let field = 16 + 8 * rng.below(4) as usize;
            let value = match rng.below(3) {
                0 => rng.next(),
                1 => rng.below(1 << 12),
                _ => u64::from_le_bytes(block[field..field + 8].try_into().unwrap()) ^ 1,
            };
            block[field..field + 8].copy_from_slice(&value.to_le_bytes());
        } else if words < body_end {
            for _ in 0..1 + rng.below(4) {
                let at = words + rng.below((body_end - words) as u64) as usize;
                block[at] = rng.next() as u8;
            }
        }
        let crc = crc32fast_hash(&block[..body_end]);
        block[body_end..].copy_from_slice(&crc.to_le_bytes());
        if let Ok(r) = RangeFilterReader::open(&block) {
            opened += 1;
            for _ in 0..20 {
                let (a, len) = (rng.next() >> 1, rng.below(100));
                let (lo, hi) = (key(a), key(a.saturating_add(len)));
                let _ = r.may_contain_range(&lo, Bound::Included(&hi));
                let _ = r.may_contain_range(&lo, Bound::Excluded(&hi));
                let _ = r.may_contain_range(&lo, Bound::Unbounded);
            }
            let _ = r.stats();
        }
    }
    eprintln!("{opened} of {trials} damaged blocks opened and answered");
    assert!(
        opened * 3 >= trials,
        "only {opened} of {trials} damaged blocks opened: the query path is barely reached"
    );
}

/// CRC-32 (IEEE) bit by bit, so the test does not share the crate's dependency.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Key sets of the rate tests, as mapped integers (sorted, distinct).
fn uniform_keys(rng: &mut SplitMix, n: usize) -> Vec<u64> {
    let s: BTreeSet<u64> = (0..n).map(|_| rng.next() >> 1).collect();
    s.into_iter().collect()
}

/// 20 dense clusters: runs of keys at most 400 apart, far from each other.
fn clustered_keys(rng: &mut SplitMix, n: usize) -> Vec<u64> {
    let mut s = BTreeSet::new();
    while s.len() < n {
        let base = rng.next() >> 2;
        let mut x = base;
        for _ in 0..n / 20 {
            x += 1 + rng.below(400);
            s.insert(x);
        }
    }
    s.into_iter().collect()
}

#[derive(Debug, Clone, Copy)]
enum Queries {
    /// Starts uniform over the set's key range.
    Uniform,
    /// Starts near a random stored key (within 4096), so inside the clusters.
    Near,
    /// Starts right after a stored key: the adversarial case for trie-based filters.
    Correlated,
}

/// Runs up to `trials` empty queries of length `len`, returns (false positives,
/// queries). Correlated queries take each stored key once, in order, so no query is
/// counted twice; the others draw fresh starts.
fn measure(
    reader: &RangeFilterReader,
    xs: &[u64],
    kind: Queries,
    len: u64,
    trials: usize,
    rng: &mut SplitMix,
) -> (u64, u64) {
    let set: BTreeSet<u64> = xs.iter().copied().collect();
    let (lo, hi) = (xs[0], xs[xs.len() - 1]);
    let (mut fp, mut empty) = (0u64, 0u64);
    for t in 0..trials * 4 {
        if empty == trials as u64 {
            break;
        }
        let a = match kind {
            Queries::Uniform => lo + rng.below(hi - lo),
            Queries::Near => {
                let near = xs[rng.below(xs.len() as u64) as usize];
                near.saturating_sub(2048) + rng.below(4096)
            }
            Queries::Correlated => match xs.get(t) {
                Some(x) => x + 1,
                None => break,
            },
        };
        let b = a + len - 1;
        if a < lo || b > hi || set.range(a..=b).next().is_some() {
            continue; // not an empty range inside the set's span
        }
        empty += 1;
        if reader.may_contain_range(&key(a), Bound::Included(&key(b))) {
            fp += 1;
        }
    }
    (fp, empty)
}

fn check_rates(bits_per_key: f64) {
    let n = 10_000;
    let mut rng = SplitMix(0xB10C_0000 + bits_per_key as u64);
    for (name, xs) in [
        ("uniform", uniform_keys(&mut rng, n)),
        ("clustered", clustered_keys(&mut rng, n)),
    ] {
        let keys: Vec<Vec<u8>> = xs.iter().map(|&x| key(x)).collect();
        let reader = build(&keys, bits_per_key, 64);
        for kind in [Queries::Uniform, Queries::Near, Queries::Correlated] {
            for len in [1u64, 16, 64] {
                let p = len as f64 / (bits_per_key - 2.0).exp2();
                assert!(reader.fp_bound(len) <= p * 1.000_001, "bound {p}");
                let (fp, trials) = measure(&reader, &xs, kind, len, 10_000, &mut rng);
                assert!(
                    trials >= 2_000,
                    "{name} {kind:?}: only {trials} empty ranges"
                );
                let t = trials as f64;
                eprintln!(
                    "{bits_per_key} bits/key, {name} keys, {kind:?} queries, length {len}: \
                     {fp}/{trials} = {:.5} (bound {p:.5})",
                    fp as f64 / t
                );
                let allowed = t * p + 4.0 * (t * p * (1.0 - p)).sqrt() + 1.0;
                assert!(
                    (fp as f64) <= allowed,
                    "{name} keys, {kind:?} queries of length {len} at {bits_per_key} bits/key: \
                     {fp} false positives in {trials}, allowed {allowed:.1} (bound {p})"
                );
            }
        }
    }
}

#[test]
fn false_positives_within_the_bound_at_12_bits_per_key() {
    check_rates(12.0);
}

#[test]
fn false_positives_within_the_bound_at_16_bits_per_key() {
    check_rates(16.0);
}

#[test]
fn the_rate_test_can_fail() {
    // The same measurement against a filter at 3 bits/key (bound l/2) and length 64:
    // every empty range is "maybe", far above the 16-bits/key allowance.
    let mut rng = SplitMix(1);
    let xs = uniform_keys(&mut rng, 2_000);
    let keys: Vec<Vec<u8>> = xs.iter().map(|&x| key(x)).collect();
    let reader = build(&keys, 3.0, 64);
    let (fp, trials) = measure(&reader, &xs, Queries::Uniform, 64, 2_000, &mut rng);
    let p = 64.0 / 16384.0;
    let t = trials as f64;
    assert!(fp as f64 > t * p + 4.0 * (t * p).sqrt() + 1.0);
}

#[test]
fn memory_is_the_bits_per_key_asked_for() {
    // B bits per key: log2(r/n) = B − 2 low bits plus about 2 high bits, plus the
    // header and the two boundary keys.
    let mut rng = SplitMix(7);
    let xs = uniform_keys(&mut rng, 20_000);
    let keys: Vec<Vec<u8>> = xs.iter().map(|&x| key(x)).collect();
    for bpk in [8.0, 12.0, 16.0] {
        let s = build(&keys, bpk, 64).stats();
        assert_eq!(s.keys, xs.len() as u64);
        // Two keys may share a hash, stored once: about n²/2r = n·2^-(B−1) pairs, a
        // count with (binomial, nearly Poisson) standard deviation about its root.
        let merged = (s.keys - s.stored_hashes) as f64;
        let mean = s.keys as f64 * (1.0 - bpk).exp2();
        assert!(
            merged <= mean + 4.0 * mean.sqrt() + 1.0,
            "{merged} merged, mean {mean}"
        );
        assert_eq!(s.max_range_len, 64);
        assert!(
            s.bits_per_key > bpk - 0.1 && s.bits_per_key < bpk + 0.1,
            "{bpk}: {}",
            s.bits_per_key
        );
    }
}

#[test]
fn ranges_outside_the_set_or_too_long_are_answered_without_a_search() {
    let keys: Vec<Vec<u8>> = [100u64, 200, 300].iter().map(|&x| key(x)).collect();
    let r = build(&keys, 16.0, 64);
    // Before the smallest and after the largest: certain "no".
    assert!(!r.may_contain_range(&key(0), Bound::Included(&key(99))));
    assert!(!r.may_contain_range(&key(0), Bound::Excluded(&key(100))));
    assert!(!r.may_contain_range(&key(301), Bound::Included(&key(10_000))));
    assert!(!r.may_contain_range(b"z", Bound::Unbounded));
    // Touching the ends.
    assert!(r.may_contain_range(&key(0), Bound::Included(&key(100))));
    assert!(r.may_contain_range(&key(300), Bound::Included(&key(10_000))));
    // Open end, or longer than L: "maybe".
    assert!(r.may_contain_range(&key(150), Bound::Unbounded));
    assert!(r.may_contain_range(&key(101), Bound::Included(&key(199))));
    assert_eq!(r.fp_bound(65), 1.0);
    // Empty ranges.
    assert!(!r.may_contain_range(&key(200), Bound::Excluded(&key(200))));
    assert!(!r.may_contain_range(&key(201), Bound::Included(&key(200))));
}

#[test]
fn an_empty_builder_writes_a_block_that_holds_nothing() {
    let b = RangeFilterBuilder::new(12.0, 64).unwrap();
    let r = RangeFilterReader::open(&b.finish()).unwrap();
    assert!(!r.may_contain_range(b"", Bound::Unbounded));
    assert_eq!(r.stats().keys, 0);
}

#[test]
fn bad_arguments_are_refused() {
    for (bpk, len) in [(2.9, 64), (40.1, 64), (f64::NAN, 64), (12.0, 0)] {
        assert!(matches!(
            RangeFilterBuilder::new(bpk, len),
            Err(FilterError::InvalidArgument(_))
        ));
    }
}

fn sample_block() -> Vec<u8> {
    let mut b = RangeFilterBuilder::new(10.0, 16).unwrap();
    for x in [3u64, 70, 71, 5_000, 90_000] {
        b.add_key(&key(x));
    }
    b.finish()
}

#[test]
fn every_byte_flip_is_refused() {
    let block = sample_block();
    for i in 0..block.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut bad = block.clone();
            bad[i] ^= mask;
            let err = RangeFilterReader::open(&bad).unwrap_err();
            assert!(matches!(err, FilterError::Corrupt(_)), "byte {i}: {err}");
        }
    }
}

#[test]
fn every_truncation_and_extension_is_refused() {
    let block = sample_block();
    for len in 0..block.len() {
        assert!(
            RangeFilterReader::open(&block[..len]).is_err(),
            "length {len}"
        );
    }
    let mut longer = block.clone();
    longer.push(0);
    assert!(RangeFilterReader::open(&longer).is_err());
    assert!(RangeFilterReader::open(&block).is_ok());
}

/// A block with one stored hash whose header and words agree: universe `r`, `L`,
/// one key (`[0]` to `[0xFF; 8]`, all eight bytes mapped), the hash `value`. Its
/// Elias–Fano words are laid out as the writer lays them (`⌊log2 r⌋` low bits for one
/// value; high words for one value and the `(r − 1) >> low` buckets after it).
fn one_hash_block(r: u64, l: u64, value: u64) -> Vec<u8> {
    let low_bits = r.ilog2();
    let mut b = b"BKVR\x01\x01\x08\x00".to_vec();
    for v in [1u64, 1, r, l, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.push(0);
    b.extend_from_slice(&[0xFF; 8]);
    let mut low = vec![0u64; u64::from(low_bits).div_ceil(64) as usize];
    if let Some(w) = low.first_mut() {
        *w = value & ((1u64 << low_bits) - 1);
    }
    let mut high = vec![0u64; (2 + ((r - 1) >> low_bits)).div_ceil(64) as usize];
    let at = value >> low_bits;
    high[(at / 64) as usize] |= 1 << (at % 64);
    for w in low.iter().chain(&high) {
        b.extend_from_slice(&w.to_le_bytes());
    }
    let crc = crc32fast_hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// A universe above 2^63 never comes from a writer, and the hash `q + (x − jL)` and
/// the Elias–Fano positions overflow on one: such a block is refused, however well
/// its header and words agree. (Before the check, `r = L = u64::MAX` opened and its
/// first query near the top of the key space panicked in a debug build — a wrapped
/// sum, a possible false negative, in release — and `r = u64::MAX, L = 1` opened with
/// a high bit the writer could never set.) At exactly 2^63 it opens and answers.
#[test]
fn a_universe_above_two_to_the_63_is_refused() {
    for (r, l) in [
        (u64::MAX, u64::MAX),
        (u64::MAX, 1),
        ((1 << 63) + 1, 1 << 63),
    ] {
        let err = RangeFilterReader::open(&one_hash_block(r, l, 5)).unwrap_err();
        assert!(matches!(err, FilterError::Corrupt(_)), "r = {r}: {err}");
    }
    let top = RangeFilterReader::open(&one_hash_block(1 << 63, 1 << 63, 5)).unwrap();
    for x in [0u64, 5, u64::MAX - 1, u64::MAX] {
        let k = x.to_be_bytes();
        let _ = top.may_contain_range(&k, Bound::Included(&k[..]));
    }
}

#[test]
fn a_forged_header_with_a_valid_checksum_is_refused() {
    // Sizes that would ask for huge allocations, n > r, L = 0, keys out of order.
    let block = sample_block();
    let body = block.len() - 4;
    let forge = |at: usize, value: u64| {
        let mut b = block[..body].to_vec();
        b[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let crc = crc32fast_hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    };
    for (at, value) in [
        (8, 0),            // keys < n
        (16, u64::MAX),    // n
        (24, u64::MAX),    // r
        (24, 1),           // r < n
        (32, 0),           // L
        (32, u64::MAX),    // L > r
        (48, 0xFFFF_FFFF), // smallest length (and largest's low half)
        (16, 4),           // n disagrees with the words
    ] {
        let err = RangeFilterReader::open(&forge(at, value)).unwrap_err();
        assert!(matches!(err, FilterError::Corrupt(_)), "{at}: {err}");
    }
    // The mapped width (3 here): more than 8, or fewer bytes than the boundary keys hold.
    for width in [0u8, 2, 9, 255] {
        let mut b = block[..body].to_vec();
        b[6] = width;
        let crc = crc32fast_hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        assert!(RangeFilterReader::open(&b).is_err(), "width {width}");
    }
}
