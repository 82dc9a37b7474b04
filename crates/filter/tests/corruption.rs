//! Damaged bytes are refused: every single-byte change and every truncation of a
//! serialized filter or filter block fails to decode with `FilterError::Corrupt`.
//!
//! CRC-32 detects every error confined to 32 consecutive bits, so every one-byte
//! change must be caught; a truncation changes the length, which the decoders check
//! against the sizes in the header or trailer.

use bloomkv_filter::{
    filter_block, open_filter_block, BloomFilter, BloomPolicy, CountingBloomFilter, FilterError,
    FilterPolicy, RibbonPolicy, BUMPED_RIBBON_FORMAT_VERSION, RIBBON128_FORMAT_VERSION,
};

mod common;
use common::ribbon_v2_blocks;

fn assert_all_damage_refused<T: std::fmt::Debug>(
    what: &str,
    good: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, FilterError>,
) {
    assert!(decode(good).is_ok(), "{what}: the undamaged bytes decode");
    let mut bytes = good.to_vec();
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            bytes[i] ^= flip;
            match decode(&bytes) {
                Err(FilterError::Corrupt(_)) => {}
                other => panic!("{what}: byte {i} ^ {flip:#x} accepted: {other:?}"),
            }
            bytes[i] ^= flip;
        }
    }
    for len in 0..good.len() {
        match decode(&good[..len]) {
            Err(FilterError::Corrupt(_)) => {}
            other => panic!("{what}: truncation to {len} bytes accepted: {other:?}"),
        }
    }
    // Extra bytes at the end are damage too.
    let mut longer = good.to_vec();
    longer.push(0);
    assert!(decode(&longer).is_err(), "{what}: trailing byte accepted");
}

#[test]
fn damaged_bloom_filters_are_refused() {
    let mut f = BloomFilter::with_rate(50, 0.01).unwrap();
    for i in 0..50u32 {
        f.insert(i.to_le_bytes());
    }
    assert_all_damage_refused("bloom", &f.to_bytes(), BloomFilter::from_bytes);
    // A size that is not a multiple of 64: slack bits must stay zero.
    let f = BloomFilter::new(70, 3).unwrap();
    assert_all_damage_refused("bloom 70 bits", &f.to_bytes(), BloomFilter::from_bytes);
}

#[test]
fn damaged_counting_filters_are_refused() {
    let mut f = CountingBloomFilter::with_rate(40, 0.02).unwrap();
    for i in 0..40u32 {
        f.insert(i.to_le_bytes());
    }
    assert_all_damage_refused("counting", &f.to_bytes(), CountingBloomFilter::from_bytes);
}

#[test]
fn damaged_filter_blocks_are_refused() {
    for policy in [
        BloomPolicy::standard(10.0).unwrap(),
        BloomPolicy::cache_local(10.0).unwrap(),
    ] {
        let mut b = policy.new_builder();
        for i in 0..100u32 {
            b.add_key(&i.to_le_bytes());
        }
        let block = b.finish();
        assert_all_damage_refused(policy.name(), &block, open_filter_block);
        let empty = policy.new_builder().finish();
        assert_all_damage_refused("empty", &empty, open_filter_block);
    }
}

#[test]
fn damaged_ribbon_blocks_are_refused() {
    for (n, bpk) in [(600u32, 10.0), (2000, 7.3), (1500, 20.0)] {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let mut b = policy.new_builder();
        for i in 0..n {
            b.add_key(&i.to_le_bytes());
        }
        let block = b.finish();
        let reader = open_filter_block(&block).unwrap();
        assert_eq!(reader.info().layout, "ribbon", "{n} keys at {bpk}");
        assert_all_damage_refused("ribbon", &block, open_filter_block);
    }
    // Blocks of format version 2 (128-bit rows), still read: the first fixture block.
    let block = ribbon_v2_blocks().swap_remove(0);
    assert_eq!(
        filter_block::format_version(&block),
        Some(RIBBON128_FORMAT_VERSION)
    );
    assert_all_damage_refused("ribbon v2", &block, open_filter_block);
    // Blocks of format version 3 as written before version 4: the first fixture block.
    let line = include_str!("fixtures/ribbon_blocks_v3.txt")
        .lines()
        .next()
        .unwrap();
    let block = common::unhex(line.rsplit(' ').next().unwrap());
    assert_all_damage_refused("ribbon v3", &block, open_filter_block);
}

/// Bumped blocks (format version 4), two and three layers: every one-byte change and
/// every truncation is refused, so a store reads such a table without its filter.
#[test]
fn damaged_bumped_ribbon_blocks_are_refused() {
    for (n, bpk) in [(4_096u32, 10.0), (6_000, 7.1)] {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let mut b = policy.new_builder();
        for i in 0..n {
            b.add_key(&i.to_le_bytes());
        }
        let block = b.finish();
        assert_eq!(
            filter_block::format_version(&block),
            Some(BUMPED_RIBBON_FORMAT_VERSION)
        );
        assert_all_damage_refused("bumped ribbon", &block, open_filter_block);
    }
}

#[test]
fn a_filter_of_one_kind_is_not_read_as_the_other() {
    let bloom = BloomFilter::new(128, 2).unwrap().to_bytes();
    let counting = CountingBloomFilter::new(32, 2).unwrap().to_bytes();
    assert!(matches!(
        CountingBloomFilter::from_bytes(&bloom),
        Err(FilterError::Corrupt(_))
    ));
    assert!(matches!(
        BloomFilter::from_bytes(&counting),
        Err(FilterError::Corrupt(_))
    ));
    assert!(open_filter_block(&bloom).is_err());
}

#[test]
fn a_header_claiming_a_huge_size_is_refused_before_allocating() {
    // A valid checksum over a header that claims 2^48 bits but carries 8 bytes.
    let mut bytes = BloomFilter::new(64, 1).unwrap().to_bytes();
    bytes[12..20].copy_from_slice(&(1u64 << 48).to_le_bytes());
    let n = bytes.len();
    let crc = crc32fast::hash(&bytes[..n - 4]);
    bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
    let err = BloomFilter::from_bytes(&bytes).unwrap_err();
    assert!(
        matches!(&err, FilterError::Corrupt(m) if m.contains("payload")),
        "{err}"
    );
}
