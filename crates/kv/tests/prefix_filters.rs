//! Prefix filters: a prefix scan skips the tables whose filter rules the prefix out, and
//! never one that holds it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomkv_kv::{Db, DbStats, FixedPrefix, Options, PrefixExtractor};

mod common;
use common::collect;
use proptest::prelude::*;

fn options(prefix: Option<usize>) -> Options {
    Options {
        disable_auto_compaction: true,
        prefix_extractor: prefix.map(|n| Arc::new(FixedPrefix::new(n)) as Arc<dyn PrefixExtractor>),
        ..Options::default()
    }
}

fn with_prefix(model: &BTreeMap<Vec<u8>, Vec<u8>>, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn delta(after: &DbStats, before: &DbStats) -> (u64, u64, u64) {
    (
        after.prefix_checks - before.prefix_checks,
        after.prefix_negatives - before.prefix_negatives,
        // Block lookups: reads, and hits on blocks an earlier scan's seek kept.
        (after.data_block_reads + after.block_cache_hits)
            - (before.data_block_reads + before.block_cache_hits),
    )
}

/// Ten overlapping tables (each holds every tenth user), as the benchmark's flat shape.
fn ten_tables(dir: &Path, prefix: Option<usize>) -> (Db, BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open(dir, options(prefix)).unwrap();
    let mut model = BTreeMap::new();
    for table in 0..10u32 {
        for user in (table..2000).step_by(10) {
            for field in ["mail", "name"] {
                // Even users only: odd ones are absent prefixes inside every key range.
                let k = format!("u{:05}:{field}", user * 2).into_bytes();
                let v = format!("{field} of {user}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().num_tables(), 10);
    (db, model)
}

#[test]
fn absent_prefixes_skip_every_table_and_present_ones_skip_none_that_hold_them() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = ten_tables(dir.path(), Some(6));
    let before = db.stats();
    const ABSENT: u64 = 500;
    // Odd numbers from 21 to 1019: inside every table's key range.
    for user in 10..10 + ABSENT {
        let prefix = format!("u{:05}", user * 2 + 1);
        assert!(collect(db.scan_prefix(&prefix)).is_empty());
    }
    let (checks, negatives, lookups) = delta(&db.stats(), &before);
    assert_eq!(
        checks,
        10 * ABSENT,
        "every table's filter asked once per scan"
    );
    // At 10 bits per filter entry (two keys and one prefix per user) the false-positive
    // rate is below 2%: 5000 checks, mean <= 100, sigma <= 9.9; six sigma above the
    // mean allows at most 160 tables read.
    assert!(
        checks - negatives <= 160,
        "{} false positives",
        checks - negatives
    );
    assert_eq!(
        lookups,
        checks - negatives,
        "a table passed by the filter costs one block lookup"
    );

    let before = db.stats();
    for user in (0..2000).step_by(37) {
        let prefix = format!("u{:05}", user * 2);
        let got = collect(db.scan_prefix(&prefix));
        assert_eq!(got, with_prefix(&model, prefix.as_bytes()));
        assert_eq!(got.len(), 2);
        let mut back = collect(db.scan_prefix(&prefix).rev());
        back.reverse();
        assert_eq!(back, got);
    }
    let (checks, negatives, _) = delta(&db.stats(), &before);
    assert!(checks > 0 && negatives < checks);
    // A scan whose bounds share the prefix is filtered too.
    let before = db.stats();
    assert!(collect(db.scan("u00101:a".."u00101:z")).is_empty());
    let (checks, negatives, _) = delta(&db.stats(), &before);
    assert_eq!(checks, 10);
    assert!(negatives >= 8);
    // A prefix shorter than the extractor's is outside its domain: no filter asked.
    let before = db.stats();
    assert_eq!(collect(db.scan_prefix("u0001")).len(), 10); // u00010 .. u00018
    assert_eq!(delta(&db.stats(), &before).0, 0);
}

#[test]
fn tables_written_with_another_extractor_are_scanned_without_their_prefix_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = ten_tables(dir.path(), Some(6));
    db.close().unwrap();
    for other in [Some(5), None] {
        let db = Db::open(dir.path(), options(other)).unwrap();
        for user in [0u32, 2, 3, 1998] {
            let prefix = format!("u{user:05}");
            let got = collect(db.scan_prefix(&prefix));
            assert_eq!(got, with_prefix(&model, prefix.as_bytes()));
        }
        assert_eq!(
            db.stats().prefix_checks,
            0,
            "{other:?}: no filter of another extractor"
        );
        assert!(db.stats().data_block_reads > 0);
        db.close().unwrap();
    }
    // The same extractor again: the filters answer once more.
    let db = Db::open(dir.path(), options(Some(6))).unwrap();
    assert!(collect(db.scan_prefix("u01003")).is_empty());
    assert_eq!(db.stats().prefix_checks, 10);
}

#[test]
fn a_corrupt_filter_fails_open_for_prefix_scans() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = ten_tables(dir.path(), Some(6));
    let tables: Vec<_> = db.table_infos().into_iter().map(|t| t.path).collect();
    db.close().unwrap();
    // Damage the filter block of every table: the footer says where it is.
    for path in &tables {
        let mut bytes = std::fs::read(path).unwrap();
        let footer = bytes.len() - 64;
        let at = |i: usize| {
            u64::from_le_bytes(
                bytes[footer + 8 * i..footer + 8 * i + 8]
                    .try_into()
                    .unwrap(),
            ) as usize
        };
        let (offset, size) = (at(2), at(3));
        assert!(size > 0, "the table has a filter");
        bytes[offset + size / 2] ^= 0x5a;
        std::fs::write(path, bytes).unwrap();
    }
    let db = Db::open(dir.path(), options(Some(6))).unwrap();
    for user in (0..4000).step_by(97) {
        let prefix = format!("u{user:05}");
        assert_eq!(
            collect(db.scan_prefix(&prefix)),
            with_prefix(&model, prefix.as_bytes())
        );
    }
    // Counted as each table is opened, by the first scan that reaches it (every
    // table's range holds every prefix asked).
    assert_eq!(db.stats().filter_corrupt, 10);
    assert_eq!(db.stats().prefix_checks, 0, "no filter left to ask");
}

/// RocksDB's "capped" prefix: the first 3 bytes, or the whole key if shorter. It keeps
/// the extractor's contract, but a prefix scan for a shorter prefix than 3 bytes must
/// not ask the filter about it: the tables hold `abc` and `abd`, not `ab`.
#[derive(Debug)]
struct Capped3;

impl PrefixExtractor for Capped3 {
    fn name(&self) -> &str {
        "test.Capped.3"
    }

    fn in_domain(&self, _key: &[u8]) -> bool {
        true
    }

    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        &key[..key.len().min(3)]
    }

    fn covers_extensions(&self, prefix: &[u8]) -> bool {
        prefix.len() >= 3
    }
}

#[test]
fn a_prefix_the_extractor_does_not_cover_reads_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        prefix_extractor: Some(Arc::new(Capped3)),
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    db.put("abc1", "x").unwrap();
    db.put("abd2", "y").unwrap();
    db.put("zzz", "z").unwrap();
    db.flush().unwrap();
    db.put("abd3", "w").unwrap();
    db.flush().unwrap();
    let want = vec![
        (b"abc1".to_vec(), b"x".to_vec()),
        (b"abd2".to_vec(), b"y".to_vec()),
        (b"abd3".to_vec(), b"w".to_vec()),
    ];
    let snapshot = db.snapshot();
    assert_eq!(collect(db.scan_prefix("ab")), want);
    assert_eq!(collect(snapshot.scan_prefix("ab")), want);
    let mut reversed = want.clone();
    reversed.reverse();
    assert_eq!(collect(db.scan_prefix("ab").rev()), reversed);
    assert_eq!(db.stats().prefix_checks, 0, "no filter asked about `ab`");
    // A prefix as long as the cap is covered, and the filters are asked: both tables
    // hold `abd`; the one whose key range spans `abe` (`abc1..zzz`) is skipped by its
    // filter (the other, `abd3` alone, by its range).
    assert_eq!(collect(db.scan_prefix("abd")), want[1..].to_vec());
    let before = db.stats().prefix_negatives;
    assert_eq!(collect(db.scan_prefix("abe")), Vec::new());
    assert_eq!(db.stats().prefix_negatives - before, 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random keys over a tiny alphabet (so prefixes are shared and keys shorter than
    /// the prefix are common), written across several tables, overwritten and deleted;
    /// random prefixes of every length: every prefix scan, both ways and through a
    /// snapshot, equals the model.
    #[test]
    fn prefix_scans_never_skip_a_table_that_holds_the_prefix(
        prefix_len in 1usize..4,
        batches in prop::collection::vec(
            prop::collection::vec((prop::collection::vec(0u8..3, 0..6), any::<bool>()), 1..40),
            1..6,
        ),
        probes in prop::collection::vec(prop::collection::vec(0u8..3, 0..5), 1..20),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(Some(prefix_len))).unwrap();
        let mut model = BTreeMap::new();
        for (n, batch) in batches.iter().enumerate() {
            for (key, delete) in batch {
                if *delete {
                    db.delete(key).unwrap();
                    model.remove(key);
                } else {
                    let v = format!("{n}").into_bytes();
                    db.put(key, &v).unwrap();
                    model.insert(key.clone(), v);
                }
            }
            db.flush().unwrap();
        }
        let snap = db.snapshot();
        db.put([0u8, 0, 0], "after").unwrap();
        for probe in &probes {
            let want = with_prefix(&model, probe);
            prop_assert_eq!(&collect(snap.scan_prefix(probe)), &want);
            let mut back = collect(snap.scan_prefix(probe).rev());
            back.reverse();
            prop_assert_eq!(&back, &want);
        }
        model.insert(vec![0, 0, 0], b"after".to_vec());
        for probe in &probes {
            prop_assert_eq!(collect(db.scan_prefix(probe)), with_prefix(&model, probe));
        }
    }
}
