//! The Ribbon policy as a table sees it: no false negatives for any key set, the
//! false-positive rate its own shape predicts, the memory it was given, and a Bloom
//! block whenever Ribbon cannot (or should not) be built.
//!
//! σ in the rate test is binomial sampling only: a Ribbon block's rate for absent keys
//! is `2^-cols` per query, exactly, whatever keys built it (an absent key's fingerprint
//! is independent of its row and of the solution), so filters of one shape do not
//! spread. Large scales are ignored tests; run them with
//! `cargo test --release -p bloomkv-filter --test ribbon -- --ignored`.

use bloomkv_filter::{
    filter_block, open_filter_block, BloomPolicy, FilterError, FilterPolicy, FilterReader, KeyHash,
    RibbonOutcome, RibbonPolicy, BUMPED_MIN_KEYS, BUMPED_RIBBON_FORMAT_VERSION,
    RIBBON_FORMAT_VERSION,
};
use proptest::prelude::*;

/// SplitMix64: reproducible synthetic key hashes.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn hash(&mut self) -> KeyHash {
        KeyHash::from_halves(self.next(), self.next())
    }
}

fn build_hashes(policy: &RibbonPolicy, hashes: &[KeyHash]) -> Vec<u8> {
    let mut b = policy.new_builder();
    for &h in hashes {
        b.add_hash(h);
    }
    b.finish()
}

fn random_hashes(seed: u64, n: usize) -> Vec<KeyHash> {
    let mut rng = SplitMix(seed);
    (0..n).map(|_| rng.hash()).collect()
}

/// The policy writing version-3 blocks (standard Ribbon), as builds before version 4.
fn standard(bpk: f64) -> RibbonPolicy {
    RibbonPolicy::new(bpk)
        .unwrap()
        .with_format_version(RIBBON_FORMAT_VERSION)
        .unwrap()
}

fn seed_of(block: &[u8]) -> u32 {
    let h = block.len() - 40;
    u32::from_le_bytes(block[h..h + 4].try_into().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any key set, duplicates and empty keys included, at any bits per key: every
    /// key added is found, whether the block came out Ribbon or Bloom.
    #[test]
    fn no_false_negatives(
        keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..2_000),
        dup_every in 1usize..8,
        bits_per_key in 1.0f64..24.0,
    ) {
        let policy = RibbonPolicy::new(bits_per_key).unwrap();
        let mut b = policy.new_builder();
        for (i, k) in keys.iter().enumerate() {
            b.add_key(k);
            if i % dup_every == 0 {
                b.add_key(&keys[i / 2]); // a repeat, not adjacent to its first copy
            }
        }
        let block = b.finish();
        let reader = policy.open_reader(&block).unwrap();
        for k in &keys {
            prop_assert!(reader.may_contain(k));
            prop_assert!(reader.may_contain_hash(KeyHash::of(k)));
        }
        let info = reader.info();
        prop_assert!((0.0..=1.0).contains(&info.estimated_fp_rate));
    }

    /// Random bytes behind a Ribbon trailer and a valid checksum: open or refuse,
    /// never panic; what opens answers lookups.
    #[test]
    fn resealed_ribbon_trailers_never_panic(
        words in 0usize..40,
        header in prop::array::uniform16(any::<u8>()),
        r in prop_oneof![3 => 1u8..12, 1 => any::<u8>()],
        coeff_words in prop_oneof![3 => Just(2u8), 1 => any::<u8>()],
        num_keys in prop_oneof![1u64..2000, any::<u64>()],
        bits_ok in prop::bool::weighted(0.8),
        small_upper in 0u64..8,
    ) {
        let mut block: Vec<u8> = (0..words * 16).map(|i| (i * 37) as u8).collect();
        let mut h = header;
        if small_upper < 6 {
            h[4..8].fill(0);
            h[8..16].copy_from_slice(&small_upper.to_le_bytes());
        }
        block.extend_from_slice(&h);
        block.extend_from_slice(&[2, 2, r, coeff_words]);
        block.extend_from_slice(&num_keys.to_le_bytes());
        let bits = if bits_ok { words as u64 * 128 } else { num_keys };
        block.extend_from_slice(&bits.to_le_bytes());
        let crc = crc32fast::hash(&block);
        block.extend_from_slice(&crc.to_le_bytes());
        match open_filter_block(&block) {
            Ok(reader) => {
                let info = reader.info();
                prop_assert_eq!(info.layout, "ribbon");
                prop_assert_eq!(info.num_bits, words as u64 * 128);
                prop_assert!(info.num_keys <= info.num_bits);
                prop_assert!((0.0..=1.0).contains(&info.estimated_fp_rate));
                for i in 0..50u32 {
                    let _ = reader.may_contain(&i.to_le_bytes());
                    reader.prefetch_hash(KeyHash::of(&i.to_le_bytes()));
                }
            }
            Err(FilterError::Corrupt(_)) => {}
            Err(e) => prop_assert!(false, "wrong error kind {e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Bumped blocks (version 4) made up from parts, mostly plausible, some not,
    /// behind a valid checksum: open or refuse, never panic; what opens answers
    /// lookups and reports a rate in [0, 1].
    #[test]
    fn resealed_bumped_blocks_never_panic(
        rows in prop::collection::vec((0u64..6, 0u64..4, prop_oneof![3 => 1u8..6, 1 => any::<u8>()]), 0..6),
        layers_byte in prop_oneof![3 => Just(None), 1 => any::<u8>().prop_map(Some)],
        extra_words in prop_oneof![3 => Just(0i64), 1 => -2i64..3],
        num_keys in prop_oneof![1u64..500, any::<u64>()],
        bumps_wrong in prop::bool::weighted(0.1),
        r0 in prop_oneof![3 => Just(None), 1 => any::<u8>().prop_map(Some)],
    ) {
        let count = rows.len();
        let mut words = 0i64;
        for (l, &(blocks, upper, r)) in rows.iter().enumerate() {
            let last = l + 1 == count;
            words += (blocks * u64::from(r) + upper) as i64;
            if !last {
                words += blocks.div_ceil(32) as i64;
            }
        }
        let words = (words + extra_words).max(0) as usize;
        let mut block: Vec<u8> = (0..words * 8).map(|i| (i * 131 + 7) as u8).collect();
        for (l, &(blocks, upper, r)) in rows.iter().enumerate() {
            block.extend_from_slice(&blocks.to_le_bytes());
            block.extend_from_slice(&upper.to_le_bytes());
            block.push(r);
            block.push(u8::from((l + 1 < count) != bumps_wrong));
            block.extend_from_slice(&[0; 6]);
        }
        block.extend_from_slice(&5u32.to_le_bytes());
        block.extend_from_slice(&[layers_byte.unwrap_or(count as u8), 0, 0, 0]);
        let r = r0.unwrap_or_else(|| rows.first().map_or(0, |x| x.2));
        block.extend_from_slice(&[4, 2, r, 1]);
        block.extend_from_slice(&num_keys.to_le_bytes());
        block.extend_from_slice(&(words as u64 * 64).to_le_bytes());
        let crc = crc32fast::hash(&block);
        block.extend_from_slice(&crc.to_le_bytes());
        match open_filter_block(&block) {
            Ok(reader) => {
                let info = reader.info();
                prop_assert_eq!(info.layout, "ribbon");
                prop_assert!((0.0..=1.0).contains(&info.estimated_fp_rate));
                for i in 0..50u32 {
                    let _ = reader.may_contain(&i.to_le_bytes());
                    reader.prefetch_hash(KeyHash::of(&i.to_le_bytes()));
                }
                if let Some(p) = reader.ribbon_probe() {
                    let mut c = 1u64;
                    let _ = bloomkv_filter::RibbonProbe::first_maybe(&[p], &mut c, KeyHash::of(b"x"));
                }
            }
            Err(FilterError::Corrupt(_)) => {}
            Err(e) => prop_assert!(false, "wrong error kind {e}"),
        }
    }
}

#[test]
fn one_key_empty_keys_and_64_kib_keys() {
    let policy = RibbonPolicy::new(10.0).unwrap();
    let big: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 64 * 1024]).collect();
    let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
    keys.extend(big.iter().cloned());
    keys.extend((0..3000u32).map(|i| i.to_le_bytes().to_vec()));
    let mut b = policy.new_builder();
    for k in &keys {
        b.add_key(k);
    }
    let reader = policy.open_reader(&b.finish()).unwrap();
    assert_eq!(reader.info().layout, "ribbon");
    for k in &keys {
        assert!(reader.may_contain(k));
    }
    // One key: too small for Ribbon to beat Bloom in 10 bits, so a Bloom block.
    let mut b = policy.new_builder();
    b.add_key(b"only");
    let reader = policy.open_reader(&b.finish()).unwrap();
    assert_eq!(reader.info().layout, "cache-local");
    assert!(reader.may_contain(b"only"));
}

#[test]
fn an_empty_table_gets_a_block_that_says_absent() {
    let policy = RibbonPolicy::new(10.0).unwrap();
    let block = policy.new_builder().finish();
    let reader = policy.open_reader(&block).unwrap();
    assert_eq!(reader.info().num_keys, 0);
    assert_eq!(reader.info().estimated_fp_rate, 0.0);
    assert!((0..1000u32).all(|i| !reader.may_contain(&i.to_le_bytes())));
}

/// Tables from 1 to 3,000 keys: each gets whichever block predicts fewer false
/// positives within its budget, and small ones fall back to Bloom.
#[test]
fn small_tables_choose_the_better_filter() {
    let policy = RibbonPolicy::new(10.0).unwrap();
    let mut layouts = Vec::new();
    for n in [1usize, 2, 10, 50, 100, 200, 300, 500, 1000, 3000] {
        let hashes = random_hashes(n as u64, n);
        let reader = policy.open_reader(&build_hashes(&policy, &hashes)).unwrap();
        assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)), "{n}");
        let info = reader.info();
        layouts.push(info.layout);
        if info.layout == "ribbon" {
            assert!(
                info.estimated_fp_rate < 0.0097,
                "{n}: {}",
                info.estimated_fp_rate
            );
        }
    }
    assert_eq!(layouts[0], "cache-local");
    assert_eq!(*layouts.last().unwrap(), "ribbon");
}

/// Every key the same (and pairs repeated out of order): banding finds the repeats
/// implied, so the table still gets a Ribbon filter on the first seed.
#[test]
fn duplicate_keys_do_not_break_construction() {
    let policy = RibbonPolicy::new(10.0).unwrap();
    let distinct = random_hashes(5, 2000);
    let mut with_dups = Vec::new();
    for round in 0..3 {
        for (i, &h) in distinct.iter().enumerate() {
            if (i + round) % 2 == 0 {
                with_dups.push(h);
            }
        }
    }
    with_dups.extend_from_slice(&distinct);
    let block = build_hashes(&policy, &with_dups);
    let reader = policy.open_reader(&block).unwrap();
    assert_eq!(reader.info().layout, "ribbon");
    assert_eq!(
        policy.construction_outcome(&with_dups).1,
        RibbonOutcome::Bumped { seed: 0 }
    );
    assert!(distinct.iter().all(|&h| reader.may_contain_hash(h)));
    // The same as a version-3 block.
    let v3 = standard(10.0);
    let block = build_hashes(&v3, &with_dups);
    assert_eq!(seed_of(&block), 0);
    let reader = v3.open_reader(&block).unwrap();
    assert!(distinct.iter().all(|&h| reader.may_contain_hash(h)));
}

/// Fewer slots than keys, with the keys repeated (not next to each other): the repeats
/// band as implied equations, but a block may not hold more keys than slots, so the
/// builder writes the Bloom fallback instead of a block no reader would open.
#[test]
fn more_keys_than_slots_never_make_a_block_that_will_not_open() {
    for (distinct, rounds, bpk) in [(200u32, 3, 10.0), (63, 2, 16.0)] {
        let policy = RibbonPolicy::new(bpk)
            .unwrap()
            .with_slots_per_key(0.5)
            .unwrap();
        let mut b = policy.new_builder();
        for _ in 0..rounds {
            for i in 0..distinct {
                b.add_key(&i.to_le_bytes());
            }
        }
        let block = b.finish();
        let reader = open_filter_block(&block)
            .unwrap_or_else(|e| panic!("{distinct} keys x {rounds}: the block must open: {e}"));
        assert!((0..distinct).all(|i| reader.may_contain(&i.to_le_bytes())));
    }
}

/// With fewer slots than distinct keys no seed could succeed, and the builder does not
/// try: the table gets the Bloom fallback, with no false negative. With slightly too
/// few slots for comfort, some tables need a second seed, recorded in the block.
#[test]
fn construction_failure_retries_then_falls_back_to_bloom() {
    let hashes = random_hashes(11, 5000);
    let starved = standard(10.0).with_slots_per_key(0.9).unwrap();
    let block = build_hashes(&starved, &hashes);
    let reader = starved.open_reader(&block).unwrap();
    assert_eq!(reader.info().layout, "cache-local");
    assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)));
    // Still about 10 bits per key.
    assert!((block.len() * 8) as f64 / 5000.0 < 10.6);

    // 1.04 slots per key at 20,000 keys (64-bit rows): a good share of seeds fail.
    let tight = standard(10.0).with_slots_per_key(1.04).unwrap();
    let mut seeds = Vec::new();
    for table in 0..12u64 {
        let hashes = random_hashes(100 + table, 20_000);
        let block = build_hashes(&tight, &hashes);
        let reader = tight.open_reader(&block).unwrap();
        assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)));
        if reader.info().layout == "ribbon" {
            seeds.push(seed_of(&block));
        }
    }
    println!("seeds used: {seeds:?}");
    assert!(
        seeds.iter().any(|&s| s > 0),
        "no table needed a retry: {seeds:?}"
    );
    assert!(
        seeds.len() >= 6,
        "most tables still get a Ribbon filter: {seeds:?}"
    );
    assert!(seeds.iter().all(|&s| s < 4));
}

/// A bumped build whose last layer cannot band (starved of slots) retries with other
/// seeds, then writes a version-3 block, and if that cannot band either (the same
/// setting starves it), a Bloom block: every path holds every key, and the outcome
/// says which was taken. (The step from version 4 to a version-3 block that works is
/// the unit test `policy::tests::a_failed_bumped_build_writes_version_3`.)
#[test]
fn a_bumped_build_that_fails_falls_back_to_standard_then_bloom() {
    let hashes = random_hashes(12, 20_000);
    // Last layer at 0.5 slots per key: bumping cannot succeed; version 3 with the
    // same setting cannot either (fewer slots than keys).
    let starved = RibbonPolicy::new(10.0)
        .unwrap()
        .with_slots_per_key(0.5)
        .unwrap();
    let (block, outcome) = starved.construction_outcome(&hashes);
    assert_eq!(outcome, RibbonOutcome::Bloom);
    let reader = open_filter_block(&block).unwrap();
    assert_eq!(reader.info().layout, "cache-local");
    assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)));
    assert_eq!(
        build_hashes(&starved, &hashes),
        block,
        "finish writes the same"
    );

    // Last layer at 1.3 slots per key: ample, so the bumped block is taken.
    let ample = RibbonPolicy::new(10.0)
        .unwrap()
        .with_slots_per_key(1.3)
        .unwrap();
    let (_, outcome) = ample.construction_outcome(&hashes);
    assert!(
        matches!(outcome, RibbonOutcome::Bumped { .. }),
        "{outcome:?}"
    );
}

/// With the default settings a bumped build does not fail: over 200 tables of 4,096
/// to 24,000 keys (fixed seeds), every one gets a version-4 block on its first seed
/// or a later one, none falls back. (The last layer holds a few hundred keys with
/// 15% more slack than version 3 gives a table that size.)
#[test]
fn bumped_construction_does_not_fail_with_default_settings() {
    let policy = RibbonPolicy::new(10.0).unwrap();
    let (mut retries, mut fallbacks) = (0, 0);
    for table in 0..200u64 {
        let n = BUMPED_MIN_KEYS as usize + (table as usize * 100);
        let (_, outcome) = policy.construction_outcome(&random_hashes(5_000 + table, n));
        match outcome {
            RibbonOutcome::Bumped { seed: 0 } => {}
            RibbonOutcome::Bumped { .. } => retries += 1,
            _ => fallbacks += 1,
        }
    }
    println!("retries {retries}/200, fallbacks {fallbacks}/200");
    assert_eq!(fallbacks, 0);
    assert!(retries <= 2, "{retries}");
}

/// The targets: at 10.0 bits per key (real memory, the whole block) a table of 10^5
/// keys lets through at most 0.15% of absent keys, and at 7.1 bits per key at most
/// 1.0%, measured over 10^6 absent keys (fixed seeds). The bound holds with margin
/// for sampling: the measured rate plus 3σ (σ = sqrt(p(1-p)/q), binomial) must stay
/// under the target, so a filter truly at the target fails this test more often than
/// not. And the test can fail: version-3 blocks of the same keys, measured the same
/// way, are shown to miss both targets by more than 3σ.
#[test]
fn fp_at_10_and_7_1_bits_per_key_meets_the_bound() {
    let n = 100_000;
    let q = 1_000_000u64;
    let hashes = random_hashes(77, n);
    for (bpk, target) in [(10.0, 0.0015), (7.1, 0.010)] {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let block = build_hashes(&policy, &hashes);
        assert_eq!(
            filter_block::format_version(&block),
            Some(BUMPED_RIBBON_FORMAT_VERSION)
        );
        let spent = (block.len() * 8) as f64 / n as f64;
        assert!(spent <= bpk && spent > bpk - 0.01, "{bpk}: spent {spent}");
        let reader = policy.open_reader(&block).unwrap();
        assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)));
        let mut rng = SplitMix(0xFEED);
        let hits = (0..q)
            .filter(|_| reader.may_contain_hash(rng.hash()))
            .count();
        let got = hits as f64 / q as f64;
        let sigma = (got * (1.0 - got) / q as f64).sqrt();
        println!(
            "{bpk} bits/key: FP {:.4}% (model {:.4}%), 3σ {:.4}%",
            got * 100.0,
            reader.info().estimated_fp_rate * 100.0,
            3.0 * sigma * 100.0
        );
        assert!(
            got + 3.0 * sigma <= target,
            "{bpk} bits/key: measured {got:.6} + 3σ {:.6} exceeds {target}",
            3.0 * sigma
        );
        // Version 3, the same keys and queries: the check above would refuse it.
        let v3 = standard(bpk);
        let reader = v3.open_reader(&build_hashes(&v3, &hashes)).unwrap();
        let mut rng = SplitMix(0xFEED);
        let hits = (0..q)
            .filter(|_| reader.may_contain_hash(rng.hash()))
            .count();
        let v3_got = hits as f64 / q as f64;
        let v3_sigma = (v3_got * (1.0 - v3_got) / q as f64).sqrt();
        assert!(
            v3_got - 3.0 * v3_sigma > target,
            "{bpk} bits/key: version 3 measured {v3_got:.6}, expected to miss {target}"
        );
    }
}

/// Bits per key is the memory spent: block bytes × 8 / keys, header and trailer
/// included, within 3% of the setting (and never above it).
fn memory_matches_bits_per_key(n: usize) {
    let hashes = random_hashes(n as u64 + 1, n);
    for bpk in [5.0, 8.0, 10.0, 15.0] {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let block = build_hashes(&policy, &hashes);
        let spent = (block.len() * 8) as f64 / n as f64;
        assert!(
            spent <= bpk && spent >= bpk * 0.97,
            "{n} keys at {bpk}: {spent}"
        );
        let reader = policy.open_reader(&block).unwrap();
        assert_eq!(reader.info().layout, "ribbon");
    }
}

#[test]
fn memory_within_3_percent_at_1e4_and_1e5_keys() {
    memory_matches_bits_per_key(10_000);
    memory_matches_bits_per_key(100_000);
}

#[test]
#[ignore]
fn memory_within_3_percent_at_1e6_keys() {
    memory_matches_bits_per_key(1_000_000);
}

/// The measured rate over `q` absent keys is within 3σ of the block's own model,
/// σ = sqrt(p (1 - p) / q) (binomial sampling; no spread between filters, see the
/// module docs). Also no false negatives.
fn rate_matches_model(n: usize, q: u64, seed: u64) {
    let hashes = random_hashes(seed, n);
    for bpk in [5.0, 8.0, 10.0, 15.0] {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let reader = policy.open_reader(&build_hashes(&policy, &hashes)).unwrap();
        let info = reader.info();
        assert_eq!(info.layout, "ribbon");
        assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)));
        let mut rng = SplitMix(seed ^ 0xABCD);
        let hits = (0..q)
            .filter(|_| reader.may_contain_hash(rng.hash()))
            .count();
        let got = hits as f64 / q as f64;
        let p = info.estimated_fp_rate;
        let sigma = (p * (1.0 - p) / q as f64).sqrt();
        assert!(
            (got - p).abs() <= 3.0 * sigma,
            "{n} keys at {bpk} bits/key: measured {got:.6}, model {p:.6}, 3σ {:.6}",
            3.0 * sigma
        );
    }
}

#[test]
fn rate_matches_the_blocks_model_at_5_8_10_15_bits_per_key() {
    rate_matches_model(20_000, 1_000_000, 21);
}

#[test]
#[ignore]
fn rate_matches_the_blocks_model_at_scale() {
    for seed in [1, 2, 3] {
        rate_matches_model(1_000_000, 10_000_000, seed);
    }
}

/// A store that switches policy keeps reading old tables: each block is opened by
/// its trailer, through either policy.
#[test]
fn ribbon_and_bloom_blocks_open_through_either_policy() {
    let hashes = random_hashes(3, 4000);
    let ribbon = RibbonPolicy::new(10.0).unwrap();
    let bloom = BloomPolicy::new(10.0).unwrap();
    let rb = build_hashes(&ribbon, &hashes);
    let mut b = bloom.new_builder();
    for &h in &hashes {
        b.add_hash(h);
    }
    let bb = b.finish();
    for opener in [&ribbon as &dyn FilterPolicy, &bloom] {
        let r: Box<dyn FilterReader> = opener.open_reader(&rb).unwrap();
        assert_eq!(r.info().layout, "ribbon");
        assert!(hashes.iter().all(|&h| r.may_contain_hash(h)));
        let r = opener.open_reader(&bb).unwrap();
        assert_eq!(r.info().layout, "cache-local");
        assert!(hashes.iter().all(|&h| r.may_contain_hash(h)));
    }
}

#[test]
fn invalid_settings_are_errors() {
    for bpk in [0.0, 0.99, 100.5, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            RibbonPolicy::new(bpk),
            Err(FilterError::InvalidArgument(_))
        ));
    }
    let p = RibbonPolicy::new(10.0).unwrap();
    for f in [0.0, -1.0, 16.5, f64::NAN] {
        assert!(p.with_slots_per_key(f).is_err());
    }
    assert_eq!(p.bits_per_key(), 10.0);
    assert_eq!(p.name(), "bloomkv.Ribbon");
}

/// `RibbonPolicy::expected_fp_rate` (what the per-level planner asks, without building
/// a block) is the rate the block built for that many keys reports, Ribbon or Bloom
/// fallback alike; and it grows with the table, as Ribbon's slots per key do.
#[test]
fn the_expected_rate_without_a_block_is_the_built_blocks() {
    for bpk in [3.0, 8.0, 10.0, 15.0] {
        for policy in [standard(bpk), RibbonPolicy::new(bpk).unwrap()] {
            for n in [1usize, 10, 100, 1_000, 4_095, 4_096, 20_000] {
                let block = build_hashes(&policy, &random_hashes(n as u64, n));
                let built = policy.open_reader(&block).unwrap().info().estimated_fp_rate;
                let predicted = policy.expected_fp_rate(n as u64);
                // A bumped block's rate depends on how its keys bumped: the prediction
                // assumes the measured slots per key, and is within 12% of the block's
                // (a 1% error in slots is 2^(0.01·b) - 1 of the rate: 11% at 15 bits).
                let bumped =
                    filter_block::format_version(&block) == Some(BUMPED_RIBBON_FORMAT_VERSION);
                let tolerance = if bumped { 0.12 } else { 1e-12 };
                assert!(
                    (predicted - built).abs() <= tolerance * built.max(1e-300),
                    "{bpk} bits/key, {n} keys: predicted {predicted}, built {built}"
                );
            }
        }
        assert!(standard(bpk).expected_fp_rate(1_000_000) > standard(bpk).expected_fp_rate(4_096));
    }
}

/// A count of keys no block could hold is still a question with an answer: past
/// about 1.25e19 keys the shape's slot count overflowed (a panic in a debug build).
#[test]
fn the_expected_rate_of_an_absurd_key_count_is_a_rate() {
    let policy = bloomkv_filter::RibbonPolicy::new(10.0).unwrap();
    for n in [12_500_000_000_000_000_000u64, u64::MAX] {
        let rate = policy.expected_fp_rate(n);
        assert!((0.0..=1.0).contains(&rate), "{n}: {rate}");
    }
}

/// The numbers behind docs/notes/2026-12-05-ribbon-bound.md: for each table size and
/// bits per key, version 3's and version 4's real bits per key, measured rate over
/// 2·10^6 absent keys, and model rate, and how many of 20 key sets needed a retry or a
/// fallback. Run with
/// `cargo test --release -p bloomkv-filter --test ribbon bound_table -- --ignored --nocapture`.
#[test]
#[ignore]
fn bound_table() {
    let q = 2_000_000u64;
    for n in [10_000usize, 100_000, 1_000_000] {
        for bpk in [7.1, 10.0] {
            for (name, policy) in [
                ("v3", standard(bpk)),
                ("v4", RibbonPolicy::new(bpk).unwrap()),
            ] {
                let hashes = random_hashes(n as u64 ^ 0x5EED, n);
                let block = build_hashes(&policy, &hashes);
                let reader = policy.open_reader(&block).unwrap();
                let mut rng = SplitMix(0xFEED);
                let hits = (0..q)
                    .filter(|_| reader.may_contain_hash(rng.hash()))
                    .count();
                let got = hits as f64 / q as f64;
                let sigma = (got * (1.0 - got) / q as f64).sqrt();
                let sets = if n >= 1_000_000 { 4 } else { 20 };
                let not_first = (0..sets)
                    .filter(|&t| {
                        let hs = random_hashes(9_000 + t, n);
                        let (_, o) = policy.construction_outcome(&hs);
                        !matches!(
                            o,
                            RibbonOutcome::Bumped { seed: 0 } | RibbonOutcome::Standard { seed: 0 }
                        )
                    })
                    .count();
                println!(
                    "n {n:>8} {bpk:>4} b/key {name}: spent {:.4} b/key  FP {:.4}% ± {:.4}% (model {:.4}%)  retry/fallback {not_first}/{sets}",
                    (block.len() * 8) as f64 / n as f64,
                    got * 100.0,
                    sigma * 100.0,
                    reader.info().estimated_fp_rate * 100.0,
                );
            }
        }
    }
}
