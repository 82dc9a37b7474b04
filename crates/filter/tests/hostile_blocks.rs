//! Blocks that pass their checksum but carry extreme trailer values: each one opens
//! (and then describes itself and answers lookups) or is refused with
//! `FilterError::Corrupt`, and nothing hangs or panics.
//!
//! The checksum only proves the bytes are the ones written, not that a sane writer
//! wrote them, so every trailer field is tried at its limits behind a valid CRC:
//! `num_keys` at 0, 1, `num_bits`, `num_bits + 1`, 2^36 and `u64::MAX`; `num_bits` at
//! 0, the payload's size and `u64::MAX`; `k` at 0, 1, 30, 31 and 255. The public rate
//! model is also called with such sizes directly.

use bloomkv_filter::sizing::{
    cache_local_false_positive_rate, cache_local_false_positive_spread, false_positive_rate,
    standard_false_positive_spread,
};
use bloomkv_filter::{open_filter_block, FilterError, KeyHash};

/// A block of `words` payload words (a fixed pattern) and a trailer of the given
/// fields, sealed with a correct CRC.
fn sealed(words: usize, layout: u8, k: u8, num_keys: u64, num_bits: u64) -> Vec<u8> {
    let mut b: Vec<u8> = (0..words as u64)
        .flat_map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 0x0101).to_le_bytes())
        .collect();
    b.extend_from_slice(&[1, layout, k, 0]);
    b.extend_from_slice(&num_keys.to_le_bytes());
    b.extend_from_slice(&num_bits.to_le_bytes());
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn extreme_trailer_values_open_or_are_refused() {
    let mut opened = 0;
    for (layout, words) in [(0u8, 1usize), (0, 16), (1, 8), (1, 64)] {
        let bits = words as u64 * 64;
        for k in [0u8, 1, 6, 30, 31, 255] {
            for num_keys in [0, 1, bits / 2, bits, bits + 1, 1 << 36, u64::MAX] {
                for num_bits in [0, bits, bits + 64, u64::MAX] {
                    let block = sealed(words, layout, k, num_keys, num_bits);
                    let valid = (1..=30).contains(&k) && num_bits == bits && num_keys <= bits;
                    match open_filter_block(&block) {
                        Ok(reader) => {
                            assert!(valid, "accepted k {k} keys {num_keys} bits {num_bits}");
                            let info = reader.info();
                            assert_eq!((info.num_keys, info.num_bits), (num_keys, bits));
                            assert_eq!(info.num_probes, u32::from(k));
                            let fp = info.estimated_fp_rate;
                            assert!((0.0..=1.0).contains(&fp), "rate {fp}");
                            if num_keys == 0 {
                                assert_eq!(fp, 0.0);
                            }
                            assert!((0.0..=1.0).contains(&info.fill_ratio));
                            let _ = reader.may_contain(b"some key");
                            reader.prefetch_hash(KeyHash::of(b"some key"));
                            opened += 1;
                        }
                        Err(FilterError::Corrupt(_)) => {
                            assert!(!valid, "refused a valid block: k {k} keys {num_keys}")
                        }
                        Err(e) => panic!("wrong error kind: {e}"),
                    }
                }
            }
        }
    }
    // 4 shapes x 3 valid k x 4 valid key counts.
    assert_eq!(opened, 48);
}

#[test]
fn one_line_claiming_every_key_is_refused_not_modelled_forever() {
    // The block the hang was reported with: one line, 2^36 or u64::MAX keys.
    for keys in [1u64 << 36, u64::MAX] {
        let block = sealed(8, 1, 6, keys, 512);
        assert!(matches!(
            open_filter_block(&block),
            Err(FilterError::Corrupt(m)) if m.contains("more keys than bits")
        ));
    }
}

/// The rate models answer for any sizes, and the answers are probabilities.
#[test]
fn rate_models_finish_for_any_u64() {
    let big_bits = u64::MAX - u64::MAX % 512;
    for (bits, keys) in [
        (512u64, u64::MAX),
        (512, 1 << 36),
        (512, 0),
        (512, 1),
        (1024, u64::MAX),
        (big_bits, u64::MAX),
        (big_bits, 1),
        (big_bits, big_bits),
        (512 << 20, u64::MAX / 3),
    ] {
        for k in [1u32, 6, 24, 30, 64, u32::MAX] {
            let p = cache_local_false_positive_rate(bits, keys, k).unwrap();
            assert!((0.0..=1.0).contains(&p), "{bits} {keys} {k}: {p}");
            let s = cache_local_false_positive_spread(bits, keys, k).unwrap();
            assert!((0.0..=1.0).contains(&s), "{bits} {keys} {k}: spread {s}");
            if keys >= 1 << 36 && bits <= 1024 {
                assert!(p > 0.999_999, "a flooded line passes everything: {p}");
            }
            let p = false_positive_rate(bits, keys, k).unwrap();
            assert!((0.0..=1.0).contains(&p));
            let s = standard_false_positive_spread(bits, keys, k).unwrap();
            assert!(s.is_finite() && s >= 0.0, "{bits} {keys} {k}: {s}");
        }
    }
}
