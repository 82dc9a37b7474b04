//! Properties that hold for arbitrary inputs: no false negatives, round trips, and
//! counting removals that never hide other items.

use bloomkv_filter::{
    open_filter_block, BloomFilter, BloomLayout, BloomPolicy, CountingBloomFilter, FilterPolicy,
    KeyHash,
};
use proptest::prelude::*;

fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..300)
}

fn layouts() -> impl Strategy<Value = BloomLayout> {
    prop_oneof![Just(BloomLayout::Standard), Just(BloomLayout::CacheLocal)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn filter_blocks_have_no_false_negatives(
        keys in keys(),
        layout in layouts(),
        bits_per_key in 1.0f64..30.0,
    ) {
        let policy = BloomPolicy::with_layout(bits_per_key, layout).unwrap();
        let mut builder = policy.new_builder();
        for k in &keys {
            builder.add_key(k);
        }
        let block = builder.finish();
        // Either policy opens the block; the trailer names the layout.
        for opener in [BloomPolicy::standard(10.0).unwrap(), BloomPolicy::cache_local(10.0).unwrap()] {
            let reader = opener.open_reader(&block).unwrap();
            prop_assert_eq!(reader.info().layout, layout.name());
            for k in &keys {
                prop_assert!(reader.may_contain(k));
                prop_assert!(reader.may_contain_hash(KeyHash::of(k)));
            }
        }
    }

    #[test]
    fn bloom_filter_has_no_false_negatives_and_round_trips(
        keys in keys(),
        num_bits in 1u64..5_000,
        num_hashes in 1u32..12,
    ) {
        let mut f = BloomFilter::new(num_bits, num_hashes).unwrap();
        for k in &keys {
            f.insert(k);
        }
        for k in &keys {
            prop_assert!(f.contains(k));
        }
        prop_assert_eq!(f.len(), keys.len() as u64);
        let back = BloomFilter::from_bytes(&f.to_bytes()).unwrap();
        prop_assert_eq!(&back, &f);
        for k in &keys {
            prop_assert!(back.contains(k));
        }
    }

    #[test]
    fn counting_remove_never_hides_other_items(
        keys in prop::collection::hash_set(prop::collection::vec(any::<u8>(), 1..16), 1..200),
        remove_mask in prop::collection::vec(any::<bool>(), 200),
        num_counters in 16u64..2_000,
        num_hashes in 1u32..8,
    ) {
        let keys: Vec<_> = keys.into_iter().collect();
        let mut f = CountingBloomFilter::new(num_counters, num_hashes).unwrap();
        for k in &keys {
            f.insert(k);
        }
        let (removed, kept): (Vec<_>, Vec<_>) =
            keys.iter().enumerate().partition(|(i, _)| remove_mask[*i]);
        for (_, k) in &removed {
            prop_assert!(f.remove(k), "an inserted item can always be removed");
        }
        for (_, k) in &kept {
            prop_assert!(f.contains(k), "removal hid another item");
        }
        prop_assert_eq!(f.len(), kept.len() as u64);
        let back = CountingBloomFilter::from_bytes(&f.to_bytes()).unwrap();
        prop_assert_eq!(back, f);
    }

    #[test]
    fn random_bytes_never_panic_any_decoder(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        // Results are irrelevant here; only the absence of panics matters.
        let _ = BloomFilter::from_bytes(&bytes);
        let _ = CountingBloomFilter::from_bytes(&bytes);
        let _ = open_filter_block(&bytes);
        let _ = bloomkv_filter::filter_block::decode(&bytes);
    }

    #[test]
    fn resealed_trailers_open_exactly_when_valid(
        lines in 1usize..4,
        version in prop_oneof![4 => Just(1u8), 1 => any::<u8>()],
        layout in prop_oneof![2 => Just(0u8), 2 => Just(1u8), 1 => any::<u8>()],
        k in prop_oneof![4 => 1u8..=30, 1 => any::<u8>()],
        reserved in prop_oneof![4 => Just(0u8), 1 => any::<u8>()],
        keys_pick in 0u8..4,
        keys_random in any::<u64>(),
        bits_ok in prop::bool::weighted(0.8),
        bits_random in any::<u64>(),
    ) {
        // Trailer fields behind a *valid* checksum, each drawn from its valid range
        // often and from all values otherwise, so both branches below are reached
        // (about a quarter of the cases open).
        let payload_bits = lines as u64 * 512;
        let num_keys = match keys_pick {
            0 => 0,
            1 => keys_random % (payload_bits + 1),
            2 => payload_bits,
            _ => keys_random,
        };
        let num_bits = if bits_ok { payload_bits } else { bits_random };
        let mut block = vec![0xA5u8; lines * 64];
        block.extend_from_slice(&[version, layout, k, reserved]);
        block.extend_from_slice(&num_keys.to_le_bytes());
        block.extend_from_slice(&num_bits.to_le_bytes());
        let crc = crc32(&block);
        block.extend_from_slice(&crc.to_le_bytes());
        let valid = version == 1
            && layout <= 1
            && (1..=30).contains(&k)
            && reserved == 0
            && num_bits == payload_bits
            && num_keys <= num_bits;
        match open_filter_block(&block) {
            Ok(reader) => {
                prop_assert!(valid);
                let info = reader.info();
                prop_assert_eq!(info.num_bits, payload_bits);
                prop_assert_eq!(info.num_keys, num_keys);
                prop_assert!((0.0..=1.0).contains(&info.estimated_fp_rate));
                let _ = reader.may_contain(b"x");
            }
            Err(_) => prop_assert!(!valid),
        }
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    // Bitwise CRC-32 (IEEE), independent of the crate's checksum code.
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn empty_table_block_is_valid_and_says_absent() {
    for policy in [
        BloomPolicy::standard(10.0).unwrap(),
        BloomPolicy::cache_local(10.0).unwrap(),
    ] {
        let block = policy.new_builder().finish();
        let reader = policy.open_reader(&block).unwrap();
        let info = reader.info();
        assert_eq!(info.num_keys, 0);
        assert_eq!(info.fill_ratio, 0.0);
        assert_eq!(info.estimated_fp_rate, 0.0);
        for i in 0..1000u32 {
            assert!(!reader.may_contain(&i.to_le_bytes()));
        }
    }
}

#[test]
fn filter_block_round_trip_reports_its_parameters() {
    for (policy, probes, granularity) in [
        (BloomPolicy::standard(10.0).unwrap(), 7, 64),
        (BloomPolicy::cache_local(10.0).unwrap(), 6, 512),
    ] {
        let mut b = policy.new_builder();
        for i in 0..1000u32 {
            b.add_key(&i.to_be_bytes());
        }
        let block = b.finish();
        let info = policy.open_reader(&block).unwrap().info();
        assert_eq!(info.num_keys, 1000);
        assert_eq!(info.num_probes, probes);
        assert_eq!(info.num_bits % granularity, 0);
        assert!(info.num_bits >= 10_000 && info.num_bits < 10_000 + granularity);
        // Expected fill: 1 - e^{-kn/m}.
        let fill = 1.0 - (-f64::from(probes) * 1000.0 / info.num_bits as f64).exp();
        assert!(
            (info.fill_ratio - fill).abs() < 0.02,
            "{} vs {fill}",
            info.fill_ratio
        );
        assert_eq!(block.len() as u64, info.num_bits / 8 + 24);
        // Building again from the same keys gives the same bytes.
        let mut again = policy.new_builder();
        for i in 0..1000u32 {
            again.add_key(&i.to_be_bytes());
        }
        assert_eq!(again.finish(), block);
    }
}

/// Bytes are little-endian and layout-fixed: this block must never change, or tables
/// written earlier would be misread.
#[test]
fn filter_block_bytes_are_stable() {
    let policy = BloomPolicy::standard(10.0).unwrap();
    let mut b = policy.new_builder();
    b.add_key(b"bloomkv");
    let block = b.finish();
    assert_eq!(block.len(), 64 / 8 + 24);
    let h = KeyHash::of(b"bloomkv");
    let mut word = 0u64;
    let mut x = h.h1;
    for _ in 0..7 {
        let bit = ((u128::from(x) * 64) >> 64) as u64;
        word |= 1 << bit;
        x = x.wrapping_add(h.h2);
    }
    assert_eq!(&block[..8], &word.to_le_bytes());
    assert_eq!(&block[8..12], &[1, 0, 7, 0]); // version, layout, probes, reserved
    assert_eq!(&block[12..20], &1u64.to_le_bytes()); // num_keys
    assert_eq!(&block[20..28], &64u64.to_le_bytes()); // num_bits
    assert_eq!(&block[28..32], &crc32(&block[..28]).to_le_bytes());
}
