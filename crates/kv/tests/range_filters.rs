//! Range filters in the store: a scan with both bounds set skips the tables whose range
//! filter rules its range out, never a table that holds a key in it, whether the scan
//! walks forwards, backwards or through a snapshot; tables without a range filter
//! (older, or damaged) are scanned as before.
//!
//! The skip-rate test's allowance: at `B` bits per key a table says "maybe" for an
//! empty range of `l` mapped keys with probability at most `p = l / 2^(B−2)`, so among
//! `N` table checks at most `N·p + 4·sqrt(N·p) + 1` say "maybe" (binomial standard
//! deviation, fixed keys and ranges).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use bloomkv_kv::sstable::Table;
use bloomkv_kv::{Counters, Db, DbStats, Options, RangeFilterOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;
use common::collect;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(range: bool) -> Options {
    Options {
        disable_auto_compaction: true,
        range_filter: range.then(RangeFilterOptions::default),
        ..Options::default()
    }
}

/// A key whose mapped integer (within a table holding ids spread over more than
/// 65,536) is `id` itself: "r" then the id as 8 big-endian bytes.
fn key(id: u64) -> Vec<u8> {
    let mut k = b"r".to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn want(model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Ten overlapping tables, as the benchmark's flat shape: table `t` holds ids
/// `(10·i + t)·100`, so every id not a multiple of 100 is absent from all of them.
fn ten_tables(dir: &Path, range: bool) -> (Db, Model) {
    let db = Db::open(dir, options(range)).unwrap();
    let mut model = BTreeMap::new();
    for t in 0..10u64 {
        for i in 0..1000u64 {
            let k = key((10 * i + t) * 100);
            let v = format!("v{t}.{i}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().num_tables(), 10);
    (db, model)
}

fn delta(after: &DbStats, before: &DbStats) -> (u64, u64, u64) {
    (
        after.range_filter_checks - before.range_filter_checks,
        after.range_filter_negatives - before.range_filter_negatives,
        after.data_block_reads - before.data_block_reads,
    )
}

#[test]
fn short_empty_scans_skip_almost_every_table_and_scans_with_keys_skip_none() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = ten_tables(dir.path(), true);
    let mut rng = StdRng::seed_from_u64(13);
    for len in [1u64, 16, 64] {
        let before = db.stats();
        const SCANS: u64 = 300;
        for s in 0..SCANS {
            // Half start right after a stored key (the correlated case), half anywhere
            // in a gap; all inside every table's key range.
            let base = rng.gen_range(1..9_000u64) * 100;
            let a = if s % 2 == 0 {
                base + 1
            } else {
                base + rng.gen_range(1..=100 - len)
            };
            let (lo, hi) = (key(a), key(a + len - 1));
            assert!(collect(db.scan(lo..=hi)).is_empty());
        }
        let (checks, negatives, reads) = delta(&db.stats(), &before);
        assert_eq!(checks, 10 * SCANS, "every table asked once per scan");
        let n = checks as f64;
        let p = len as f64 / 16384.0;
        let allowed = n * p + 4.0 * (n * p).sqrt() + 1.0;
        assert!(
            ((checks - negatives) as f64) <= allowed,
            "length {len}: {} of {checks} tables said maybe, allowed {allowed:.1}",
            checks - negatives
        );
        // A table skipped is a table not read: reads come only from the "maybe"s.
        assert!(reads <= 2 * (checks - negatives), "{reads} reads");
    }
    // Ranges holding keys: every table holding one is read, so the answers are whole.
    let before = db.stats();
    for _ in 0..200 {
        let a = rng.gen_range(0..10_000u64 * 100);
        let len = rng.gen_range(1..=300);
        let (lo, hi) = (Bound::Included(key(a)), Bound::Excluded(key(a + len)));
        assert_eq!(
            collect(db.scan::<Vec<u8>, _>((lo.clone(), hi.clone()))),
            want(&model, &lo, &hi)
        );
        assert_eq!(
            collect(db.scan::<Vec<u8>, _>((lo.clone(), hi.clone())).rev()),
            want(&model, &lo, &hi).into_iter().rev().collect::<Vec<_>>()
        );
    }
    assert!(db.stats().range_filter_checks > before.range_filter_checks);
}

#[test]
fn scans_with_an_open_end_do_not_ask_the_range_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = ten_tables(dir.path(), true);
    let lo = key(50_001);
    let got = collect(db.scan(lo.clone()..));
    assert_eq!(got.len(), model.range(lo.clone()..).count());
    let got = collect(db.scan(..=lo.clone()));
    assert_eq!(got.len(), model.range(..=lo).count());
    assert_eq!(db.stats().range_filter_checks, 0);
}

#[test]
fn tables_without_a_range_filter_are_scanned_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = ten_tables(dir.path(), false);
    db.close().unwrap();
    // Reopened with range filters on: the old tables have none and are read.
    let db = Db::open(dir.path(), options(true)).unwrap();
    for id in [0u64, 50_001, 999_901] {
        let (lo, hi) = (key(id), key(id + 16));
        let got = collect(db.scan(lo.clone()..=hi.clone()));
        assert_eq!(
            got,
            want(&model, &Bound::Included(lo), &Bound::Included(hi))
        );
    }
    assert_eq!(db.stats().range_filter_checks, 0);
    assert!(db.stats().data_block_reads > 0);
    // A new table beside them gets one; only it is asked.
    for id in [500_005u64, 600_005] {
        db.put(key(id), b"new").unwrap();
        model.insert(key(id), b"new".to_vec());
    }
    db.flush().unwrap();
    let (lo, hi) = (key(550_001), key(550_016));
    assert!(collect(db.scan(lo..=hi)).is_empty());
    assert_eq!(db.stats().range_filter_checks, 1);
    let (lo, hi) = (key(500_000), key(500_010));
    assert_eq!(
        collect(db.scan(lo.clone()..=hi.clone())),
        want(&model, &Bound::Included(lo), &Bound::Included(hi))
    );
}

/// The handle of a table's range filter block, from its properties.
fn range_block(path: &Path) -> (usize, usize) {
    let fs = bloomkv_kv::fs::OsFileSystem;
    let file = bloomkv_kv::fs::FileSystem::open_random(&fs, path).unwrap();
    let table = Table::open(
        file,
        path.to_path_buf(),
        std::sync::Arc::new(Counters::default()),
        &[],
    )
    .unwrap();
    let h = table.properties().range_filter.expect("a range filter");
    (h.offset as usize, h.size as usize)
}

#[test]
fn a_corrupt_range_filter_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = ten_tables(dir.path(), true);
    let tables: Vec<_> = db.table_infos().into_iter().map(|t| t.path).collect();
    db.close().unwrap();
    for path in &tables {
        let (offset, size) = range_block(path);
        let mut bytes = std::fs::read(path).unwrap();
        bytes[offset + size / 2] ^= 0x5a;
        std::fs::write(path, bytes).unwrap();
    }
    let db = Db::open(dir.path(), options(true)).unwrap();
    for id in (0..1_000_000u64).step_by(99_991) {
        let (lo, hi) = (key(id), key(id + 200));
        assert_eq!(
            collect(db.scan(lo.clone()..=hi.clone())),
            want(&model, &Bound::Included(lo), &Bound::Included(hi))
        );
    }
    // Counted as each table is opened, by the first scan that reaches it (every
    // table's range holds every scan's).
    assert_eq!(db.stats().range_filter_corrupt, 10);
    assert_eq!(
        db.stats().range_filter_checks,
        0,
        "no range filter left to ask"
    );
    let info = bloomkv_kv::inspect(dir.path()).unwrap();
    assert!(info
        .tables
        .iter()
        .all(|t| t.range_filter_state.starts_with("CORRUPT")));
    // `verify` reports the damage too.
    assert!(!bloomkv_kv::verify(dir.path()).unwrap().problems.is_empty());
}

#[test]
fn inspect_shows_the_range_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = ten_tables(dir.path(), true);
    db.close().unwrap();
    let info = bloomkv_kv::inspect(dir.path()).unwrap();
    for t in &info.tables {
        let r = t.range_filter.as_ref().expect("loaded");
        assert_eq!((r.keys, r.max_range_len), (1000, 64));
        assert!(
            r.bits_per_key > 16.0 && r.bits_per_key < 17.0,
            "{}",
            r.bits_per_key
        );
    }
    let text = info.to_string();
    assert!(text.contains("range filter (grafite)"), "{text}");
}

#[test]
fn bad_range_filter_options_are_refused() {
    for (bits_per_key, max_range_len) in [(2.0, 64), (16.0, 0), (f64::NAN, 64)] {
        let options = Options {
            range_filter: Some(RangeFilterOptions {
                bits_per_key,
                max_range_len,
            }),
            ..Options::default()
        };
        assert!(options.validate().is_err());
    }
}

/// One random short range: ids near each other, each end included or excluded.
fn random_range(rng: &mut StdRng) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let a = rng.gen_range(0..3_200u64);
    let b = a + rng.gen_range(0..80u64);
    let lo = if rng.gen_bool(0.8) {
        Bound::Included(key(a))
    } else {
        Bound::Excluded(key(a))
    };
    // Never both ends excluded at one key: the model (BTreeMap) refuses that range.
    let hi = if rng.gen_bool(0.5) || b == a {
        Bound::Included(key(b))
    } else {
        Bound::Excluded(key(b))
    };
    (lo, hi)
}

/// The store against a `BTreeMap`, with range filters on: puts, deletes, flushes,
/// compactions and reopens mixed with scans of random short ranges, forwards,
/// backwards and through snapshots (checked against the model of their moment).
fn run_model(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let opts = || Options {
        memtable_size: 8 * 1024,
        block_size: 256,
        l0_compaction_trigger: 3,
        level1_max_bytes: 32 * 1024,
        target_file_size: 8 * 1024,
        range_filter: Some(RangeFilterOptions {
            bits_per_key: 10.0,
            max_range_len: 64,
        }),
        ..Options::default()
    };
    let mut db = Db::open(dir.path(), opts()).unwrap();
    let mut model: Model = BTreeMap::new();
    let mut snaps: Vec<(bloomkv_kv::Snapshot, Model)> = Vec::new();
    let mut totals = (0u64, 0u64);
    for step in 0..steps {
        match rng.gen_range(0..100) {
            0..=34 => {
                // Ids in a small space (ranges often hold keys), a few odd shapes:
                // the empty key, "r" alone, and keys of another prefix.
                // Rare, as they widen a table's mapped bytes (see the key map).
                let k = match rng.gen_range(0..600) {
                    0 => Vec::new(),
                    1 => b"r".to_vec(),
                    2 => format!("s{}", rng.gen_range(0..50)).into_bytes(),
                    _ => key(rng.gen_range(0..3_300)),
                };
                let v = format!("v{step}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            35..=44 => {
                let k = key(rng.gen_range(0..3_300));
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            45..=79 => {
                let (lo, hi) = random_range(&mut rng);
                let range = (lo.clone(), hi.clone());
                let expect = want(&model, &lo, &hi);
                assert_eq!(
                    collect(db.scan::<Vec<u8>, _>(range.clone())),
                    expect,
                    "step {step}"
                );
                let back: Vec<_> = collect(db.scan::<Vec<u8>, _>(range).rev());
                assert_eq!(
                    back,
                    expect.into_iter().rev().collect::<Vec<_>>(),
                    "step {step}"
                );
            }
            80..=84 => {
                if let Some((snap, then)) = snaps.get(rng.gen_range(0..snaps.len().max(1))) {
                    let (lo, hi) = random_range(&mut rng);
                    assert_eq!(
                        collect(snap.scan::<Vec<u8>, _>((lo.clone(), hi.clone()))),
                        want(then, &lo, &hi),
                        "snapshot at step {step}"
                    );
                }
            }
            85..=87 => {
                snaps.push((db.snapshot(), model.clone()));
                if snaps.len() > 4 {
                    snaps.remove(0);
                }
            }
            88..=93 => db.flush().unwrap(),
            94..=96 => db.compact().unwrap(),
            _ => {
                snaps.clear();
                let s = db.stats(); // counters start again at each open
                totals = (
                    totals.0 + s.range_filter_checks,
                    totals.1 + s.range_filter_negatives,
                );
                db.close().unwrap();
                db = Db::open(dir.path(), opts()).unwrap();
            }
        }
    }
    let s = db.stats();
    let (checks, negatives) = (
        totals.0 + s.range_filter_checks,
        totals.1 + s.range_filter_negatives,
    );
    eprintln!("seed {seed}: {checks} range filter checks, {negatives} negatives");
    assert!(checks > 0, "the range filters were asked");
    assert!(negatives > 0, "and skipped some tables");
}

#[test]
fn random_operations_and_short_range_scans_match_a_btreemap() {
    for seed in [1, 2] {
        run_model(seed, 1_500);
    }
}
