//! Known-answer vectors: fixed inputs and the exact hashes and bytes they must produce.
//!
//! A filter's bytes outlive the code that wrote them. If a change to hashing, probe
//! placement or framing slipped through, every table written before it would answer
//! "absent" for keys it holds. These tests pin the formats from outside the code that
//! computes them: the expected values are literals captured from the writer, never
//! recomputed with the crate's own functions.
//!
//! * `KeyHash::of` (XXH3-128) and `KeyHash::murmur3` on fixed keys;
//! * filter blocks written by today's builders (length, first payload bytes, and the
//!   whole 24-byte trailer, whose CRC covers every payload byte);
//! * blocks written before the cache-local probe table was recomputed
//!   (`fixtures/filter_blocks_v1.txt`): each must still open and give exactly the same
//!   answers, recorded as the count and CRC of the absent queries it lets through;
//! * standalone frames: the version-1 rule (still read) and the version-2 rule;
//! * Ribbon blocks (filter-block format version 3): length, first solution bytes, and
//!   the 40-byte header and trailer, whose CRC covers the solution;
//! * Ribbon blocks written before version 3, with 128-bit rows
//!   (`fixtures/ribbon_blocks_v2.txt`, format version 2): whole blocks that must still
//!   open and answer exactly as they did, as the Bloom blocks above;
//! * Ribbon blocks of version 3 as the builder wrote them before version 4 became the
//!   default (`fixtures/ribbon_blocks_v3.txt`): the same promise;
//! * bumped Ribbon blocks (format version 4): length, first solution bytes, and the
//!   last 32 bytes (header and trailer, whose CRC covers the whole block).

use bloomkv_filter::{
    filter_block, open_filter_block, BloomFilter, BloomPolicy, CountingBloomFilter, FilterError,
    FilterPolicy, KeyHash, RibbonPolicy,
};

mod common;
use common::{ribbon_v2_blocks, unhex};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key(i: u64) -> Vec<u8> {
    format!("kav:{i}").into_bytes()
}

#[test]
fn key_hashes_are_pinned() {
    let k24 = [0x5Au8; 24];
    let k100: Vec<u8> = (0..100u8).collect();
    // (key, KeyHash::of, KeyHash::murmur3), each as (h1, h2) with h2 forced odd.
    type Halves = (u64, u64);
    let cases: [(&[u8], Halves, Halves); 5] = [
        (
            b"",
            (0x6001_c324_468d_497f, 0x99aa_06d3_0147_98d9),
            (0x0000_0000_0000_0000, 0x0000_0000_0000_0001),
        ),
        (
            b"a",
            (0xe6c6_32b6_1e96_4e1f, 0xa96f_af70_5af1_6835),
            (0x8555_5565_f659_7889, 0xe6b5_3a48_510e_895b),
        ),
        (
            b"bloomkv",
            (0xd13f_f3f4_50cd_e760, 0xe8fe_e8c2_8cb5_0f3d),
            (0xa4f9_f16a_a575_f3c9, 0xa034_c19f_1683_61cd),
        ),
        (
            &k24,
            (0x0b48_7c2f_eee4_c6c5, 0xd1e0_7344_d4d7_3d8f),
            (0x3f62_69f0_9499_6cf1, 0xdce7_196a_d65c_e8bd),
        ),
        (
            &k100,
            (0x29b2_0ba5_f03e_c01e, 0xda95_ef16_fd95_66f3),
            (0xb06f_9999_c140_51ca, 0x0fbd_6d93_c834_0799),
        ),
    ];
    for (k, of, mm) in cases {
        let h = KeyHash::of(k);
        assert_eq!((h.h1, h.h2), of, "KeyHash::of({k:?})");
        let h = KeyHash::murmur3(k);
        assert_eq!((h.h1, h.h2), mm, "KeyHash::murmur3({k:?})");
    }
}

/// Today's builders: (layout, keys, bits/key, block length, first payload bytes,
/// trailer). Keys are `"kav:{i}"`.
const BLOCKS: &[(&str, u64, f64, usize, &str, &str)] = &[
    (
        "standard",
        0,
        10.0,
        32,
        "0000000000000000",
        "01000700000000000000000040000000000000002684a42d",
    ),
    (
        "standard",
        1,
        10.0,
        32,
        "4040000102080810",
        "010007000100000000000000400000000000000029d2bec2",
    ),
    (
        "standard",
        3,
        10.0,
        32,
        "c248400147198810",
        "0100070003000000000000004000000000000000c31ec081",
    ),
    (
        "standard",
        100,
        10.0,
        152,
        "e95a4e344b1d8471836cf5dfbb0cd997",
        "0100070064000000000000000004000000000000e0fba2e4",
    ),
    (
        "standard",
        1000,
        10.0,
        1280,
        "a19706520e8275f76a4d1651538a1822",
        "01000700e80300000000000040270000000000009f813bb1",
    ),
    (
        "standard",
        1000,
        5.0,
        656,
        "15d1136d6a940b05b2b071572f280a24",
        "01000300e803000000000000c013000000000000cdfe5c5c",
    ),
    (
        "standard",
        300,
        20.0,
        776,
        "310f3ef57fb996b6a3983f2997d88ad5",
        "01000e002c010000000000008017000000000000aaae95cc",
    ),
    (
        "cache-local",
        0,
        10.0,
        88,
        "00000000000000000000000000000000",
        "0101060000000000000000000002000000000000c4fcaa5f",
    ),
    (
        "cache-local",
        1,
        10.0,
        88,
        "00000000000002000000000000000000",
        "01010600010000000000000000020000000000003aa19053",
    ),
    (
        "cache-local",
        3,
        10.0,
        88,
        "00000000004002100000002000000000",
        "010106000300000000000000000200000000000088875d4f",
    ),
    (
        "cache-local",
        100,
        10.0,
        152,
        "e5087844eec9abe8744b5e5571d247eb",
        "01010600640000000000000000040000000000009f69043f",
    ),
    (
        "cache-local",
        1000,
        10.0,
        1304,
        "39008d29b7445712fc6f16aff715aaf1",
        "01010600e8030000000000000028000000000000dd5e956c",
    ),
    (
        "cache-local",
        1000,
        5.0,
        664,
        "0d82bb21f7415752c40e148fdb1b80e1",
        "01010300e8030000000000000014000000000000845702c1",
    ),
    (
        "cache-local",
        300,
        20.0,
        792,
        "3322b07bb34db75b7e4f3618375302bb",
        "01010b002c010000000000000018000000000000e02d916b",
    ),
];

fn policy(layout: &str, bpk: f64) -> BloomPolicy {
    match layout {
        "standard" => BloomPolicy::standard(bpk).unwrap(),
        _ => BloomPolicy::cache_local(bpk).unwrap(),
    }
}

#[test]
fn filter_block_bytes_are_pinned() {
    for &(layout, n, bpk, len, head, trailer) in BLOCKS {
        let mut b = policy(layout, bpk).new_builder();
        for i in 0..n {
            b.add_key(&key(i));
        }
        let block = b.finish();
        let what = format!("{layout} {n} keys at {bpk} bits/key");
        assert_eq!(block.len(), len, "{what}: length");
        let t = block.len() - filter_block::TRAILER_LEN;
        assert_eq!(hex(&block[..head.len() / 2]), head, "{what}: payload head");
        assert_eq!(hex(&block[t..]), trailer, "{what}: trailer");
    }
}

/// The answers of one recorded block over 20,000 absent queries `"absent:{i}"`: how
/// many pass, and the CRC of their indices as little-endian `u32`s.
fn absent_answers(reader: &dyn bloomkv_filter::FilterReader) -> (usize, u32) {
    let pass: Vec<u32> = (0..20_000u32)
        .filter(|i| reader.may_contain(format!("absent:{i}").as_bytes()))
        .collect();
    let bytes: Vec<u8> = pass.iter().flat_map(|i| i.to_le_bytes()).collect();
    (pass.len(), crc32fast::hash(&bytes))
}

/// Blocks written before this crate recomputed its cache-local probe table (and before
/// any other change since): they open, hold their keys, and answer every absent query
/// exactly as they did when written.
#[test]
fn blocks_written_earlier_still_answer_identically() {
    let seen = check_fixture_blocks(include_str!("fixtures/filter_blocks_v1.txt"));
    assert_eq!(seen, 12);
}

/// Ribbon blocks with 128-bit rows (filter-block format version 2), written before
/// version 3 narrowed the rows: the same promise.
#[test]
fn ribbon_blocks_of_version_2_still_answer_identically() {
    let fixtures = include_str!("fixtures/ribbon_blocks_v2.txt");
    assert_eq!(check_fixture_blocks(fixtures), 3);
    for block in ribbon_v2_blocks() {
        assert_eq!(
            filter_block::format_version(&block),
            Some(bloomkv_filter::RIBBON128_FORMAT_VERSION)
        );
    }
}

/// Ribbon blocks of version 3 (64-bit rows), written before version 4 became the
/// default: the same promise.
#[test]
fn ribbon_blocks_of_version_3_still_answer_identically() {
    let fixtures = include_str!("fixtures/ribbon_blocks_v3.txt");
    assert_eq!(check_fixture_blocks(fixtures), 3);
    for line in fixtures.lines().filter(|l| !l.is_empty()) {
        let block = unhex(line.rsplit(' ').next().unwrap());
        assert_eq!(
            filter_block::format_version(&block),
            Some(bloomkv_filter::RIBBON_FORMAT_VERSION)
        );
    }
}

/// Bumped Ribbon blocks (format version 4) of keys `"kav:{i}"` as written today:
/// (keys, bits/key, length, first solution bytes, last 32 bytes).
const BUMPED_BLOCKS: &[(u64, f64, usize, &str, &str)] = &[
    (
        5000,
        10.0,
        6248,
        "ee91297712bf96ad9df85145e381eb6b",
        "0000000002000000040209018813000000000000c0c000000000000016b7d60c",
    ),
    (
        8000,
        7.1,
        7096,
        "089d967af4de6f1a95e3e8decd0831da",
        "000000000200000004020601401f00000000000040db000000000000ce4626f4",
    ),
    (
        20000,
        16.0,
        40000,
        "fe248479985480091488d013307fc93c",
        "000000000200000004020f01204e00000000000080df040000000000f7c61a70",
    ),
];

#[test]
fn bumped_ribbon_block_bytes_are_pinned() {
    for &(n, bpk, len, head, tail) in BUMPED_BLOCKS {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let mut b = policy.new_builder();
        for i in 0..n {
            b.add_key(&key(i));
        }
        let block = b.finish();
        let what = format!("bumped ribbon {n} keys at {bpk} bits/key");
        assert_eq!(block.len(), len, "{what}: length");
        assert_eq!(hex(&block[..16]), head, "{what}: solution head");
        assert_eq!(hex(&block[len - 32..]), tail, "{what}: header and trailer");
        assert_eq!(
            filter_block::format_version(&block),
            Some(bloomkv_filter::BUMPED_RIBBON_FORMAT_VERSION)
        );
        let reader = open_filter_block(&block).unwrap();
        assert!((0..n).all(|i| reader.may_contain(&key(i))), "{what}");
    }
}

/// Checks each fixture line (`layout keys bits/key count crc block`): the block opens
/// with that layout and key count, holds its keys `"kav:{i}"`, and lets through the
/// same absent queries (their count and CRC). Returns the lines checked.
fn check_fixture_blocks(fixtures: &str) -> usize {
    let mut seen = 0;
    for line in fixtures.lines().filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(' ').collect();
        let (layout, n, bpk) = (f[0], f[1].parse::<u64>().unwrap(), f[2]);
        let (count, crc) = (
            f[3].parse::<usize>().unwrap(),
            u32::from_str_radix(f[4], 16).unwrap(),
        );
        let block = unhex(f[5]);
        let what = format!("{layout} {n} keys at {bpk} bits/key");
        let reader = open_filter_block(&block).unwrap_or_else(|e| panic!("{what}: {e}"));
        let info = reader.info();
        assert_eq!(info.layout, layout, "{what}");
        assert_eq!(info.num_keys, n, "{what}");
        assert!((0.0..=1.0).contains(&info.estimated_fp_rate), "{what}");
        for i in 0..n {
            assert!(reader.may_contain(&key(i)), "{what}: key {i} lost");
        }
        assert_eq!(absent_answers(reader.as_ref()), (count, crc), "{what}");
        seen += 1;
    }
    seen
}

/// A standalone filter serialized with version 1 of the frame (double hashing with
/// `h2 | 1`), including the empty item, whose probes all fell on bit 0 under that rule.
const BLOOM_V1: &str = "424b5646010100000300000064000000000000000b000000000000000138d060266083a8060a250301000000dc948f8f";
const BLOOM_V1_ANSWERS: &str = "00000000000000000001000000010000100000000000000000100000000000010000000000000000000001000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000010000000000000000000000";
const BLOOM_V1_ITEMS: [&str; 11] = [
    "", "apple", "banana", "cherry", "date", "elder", "fig", "grape", "honeydew", "kiwi", "lemon",
];
const COUNTING_V1: &str = "424b56460102000003000000280000000000000009000000000000000a1112000002010011100101000001011001000000000000cc48f309";
const COUNTING_V1_ANSWERS: &str = "00000000000000000001000000010000000001101000000000000000000001100000000000000000000100000000000000010000000000000000000000000000000000000000000000010000000000000010000000000100000000010000000000000000";
const COUNTING_V1_ITEMS: [&str; 9] = ["", "", "", "x", "y", "z", "w", "v", "u"];

fn answers(contains: impl Fn(&str) -> bool) -> String {
    (0..200)
        .map(|i| if contains(&format!("q{i}")) { '1' } else { '0' })
        .collect()
}

#[test]
fn version_1_standalone_frames_still_load_and_answer_as_before() {
    let bytes = unhex(BLOOM_V1);
    let f = BloomFilter::from_bytes(&bytes).unwrap();
    assert_eq!((f.num_bits(), f.num_hashes(), f.len()), (100, 3, 11));
    assert_eq!(f.count_ones(), 30);
    for item in BLOOM_V1_ITEMS {
        assert!(f.contains(item), "{item:?} lost");
    }
    assert_eq!(answers(|q| f.contains(q)), BLOOM_V1_ANSWERS);
    // Written back in its own version, byte for byte.
    assert_eq!(hex(&f.to_bytes()), BLOOM_V1);

    let bytes = unhex(COUNTING_V1);
    let c = CountingBloomFilter::from_bytes(&bytes).unwrap();
    assert_eq!((c.num_counters(), c.num_hashes(), c.len()), (40, 3, 9));
    assert_eq!((c.count_nonzero(), c.count_saturated()), (16, 0));
    for item in COUNTING_V1_ITEMS {
        assert!(c.contains(item), "{item:?} lost");
    }
    assert_eq!(answers(|q| c.contains(q)), COUNTING_V1_ANSWERS);
    assert_eq!(hex(&c.to_bytes()), COUNTING_V1);
}

#[test]
fn an_unknown_frame_version_is_refused() {
    let mut bytes = unhex(BLOOM_V1);
    bytes[4] = 9;
    let n = bytes.len();
    let crc = crc32fast::hash(&bytes[..n - 4]);
    bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        BloomFilter::from_bytes(&bytes),
        Err(FilterError::Corrupt(_))
    ));
}

/// The same items in frames of version 2 (k distinct probes from a mixed sequence),
/// the version new filters write.
const BLOOM_V2: &str = "424b5646020100000300000064000000000000000b000000000000000100a144c81418b105490a4003000000177901cc";
const BLOOM_V2_ANSWERS: &str = "00000000010000000000000000000000000000000000010000000000000000000000000000000000000001000000000000000000000000000000000000000000000000000000000000000000010000000000000010000000000000000000001000000000";
const COUNTING_V2: &str = "424b564602020000030000002800000000000000090000000000000013000004011002000001100012050000001200200000000026bc5695";
const COUNTING_V2_ANSWERS: &str = "00000000000000010000000000000001000000000000100000000000000000000000000000100001000100000000000000000000000000000000000000000000000001000000010000000000000000000000000000000000000000000000000000000000";

#[test]
fn version_2_standalone_frames_are_pinned() {
    let mut f = BloomFilter::new(100, 3).unwrap();
    for item in BLOOM_V1_ITEMS {
        f.insert(item);
    }
    assert_eq!(hex(&f.to_bytes()), BLOOM_V2);
    assert_eq!(f.count_ones(), 27);
    assert_eq!(answers(|q| f.contains(q)), BLOOM_V2_ANSWERS);
    assert_eq!(BloomFilter::from_bytes(&unhex(BLOOM_V2)).unwrap(), f);

    let mut c = CountingBloomFilter::new(40, 3).unwrap();
    for item in COUNTING_V1_ITEMS {
        c.insert(item);
    }
    assert_eq!(hex(&c.to_bytes()), COUNTING_V2);
    // "" three times: its three distinct counters hold 3 (rule 1 put 9 on one).
    assert_eq!((c.count_nonzero(), c.count_saturated()), (14, 0));
    assert_eq!(answers(|q| c.contains(q)), COUNTING_V2_ANSWERS);
    assert_eq!(
        CountingBloomFilter::from_bytes(&unhex(COUNTING_V2)).unwrap(),
        c
    );
}

/// Ribbon blocks of keys `"kav:{i}"` as written today for tables too small to bump
/// (filter-block format version 3):
/// (keys, bits/key, length, first solution bytes, header and trailer).
const RIBBON_BLOCKS: &[(u64, f64, usize, &str, &str)] = &[
    (
        1000,
        10.0,
        1248,
        "9a1f5725e85c8b31a2804447c502b26f",
        "00000000000000000f0000000000000003020801e803000000000000c02500000000000082996cd2",
    ),
    (
        3000,
        7.3,
        2736,
        "713692b16f9fd9eb19821820152d3862",
        "00000000000000002b0000000000000003020601b80b000000000000405400000000000012118e8f",
    ),
    (
        500,
        16.0,
        1000,
        "7b0d5d00931c1c92264d2adf7345202c",
        "0000000000000000000000000000000003020f01f401000000000000001e000000000000fdaff670",
    ),
];

#[test]
fn ribbon_block_bytes_are_pinned() {
    for &(n, bpk, len, head, tail) in RIBBON_BLOCKS {
        let policy = RibbonPolicy::new(bpk).unwrap();
        let mut b = policy.new_builder();
        for i in 0..n {
            b.add_key(&key(i));
        }
        let block = b.finish();
        let what = format!("ribbon {n} keys at {bpk} bits/key");
        assert_eq!(block.len(), len, "{what}: length");
        assert_eq!(hex(&block[..16]), head, "{what}: solution head");
        assert_eq!(hex(&block[len - 40..]), tail, "{what}: header and trailer");
        let reader = open_filter_block(&block).unwrap();
        assert!((0..n).all(|i| reader.may_contain(&key(i))), "{what}");
    }
}
