//! A store under `Options::metadata_budget`: its tables are written with partitioned
//! index and filter (format version 8), and it answers exactly as a `BTreeMap` does —
//! gets, batched gets, scans both ways, snapshots — while the partitions it holds stay
//! within the budget; a store of older tables opens beside new partitioned ones.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use bloomkv_kv::{inspect, verify, Db, DbStats, Options};
use common::{collect, in_range, random_batch, random_bound};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(budget: usize) -> Options {
    Options {
        metadata_budget: Some(budget),
        block_size: 256,
        memtable_size: 64 << 20,
        disable_auto_compaction: true,
        block_cache_size: 0,
        ..Options::default()
    }
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:05}", rng.gen_range(0..4000)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let n = rng.gen_range(8..48);
    (0..n).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// The budget holds: the partitions held never exceed it, and all metadata held
/// never exceeds it plus the live tables' top levels.
fn check_budget(stats: &DbStats, budget: usize) {
    assert!(
        stats.metadata_cache_bytes <= budget as u64,
        "partitions held {} over the budget {budget}",
        stats.metadata_cache_bytes
    );
    assert!(
        stats.metadata_bytes <= budget as u64 + stats.metadata_top_level_bytes,
        "metadata {} over the budget {budget} plus top levels {}",
        stats.metadata_bytes,
        stats.metadata_top_level_bytes
    );
}

/// Gets (present and absent), a batched get, a scan both ways and a snapshot taken
/// earlier, each against its model.
fn check(db: &Db, model: &Model, snap: &(bloomkv_kv::Snapshot, Model), rng: &mut StdRng) {
    let mut asked = Vec::new();
    for _ in 0..40 {
        let k = key(rng);
        assert_eq!(
            db.get(&k).unwrap().map(|v| v.to_vec()),
            model.get(&k).cloned(),
            "get {}",
            String::from_utf8_lossy(&k)
        );
        asked.push(k);
    }
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get(&asked)
        .unwrap()
        .into_iter()
        .map(|v| v.map(|v| v.to_vec()))
        .collect();
    let want: Vec<Option<Vec<u8>>> = asked.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(got, want);
    let (lo, hi) = (random_bound(rng, key), random_bound(rng, key));
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| in_range(k, &lo, &hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let range = (lo.clone(), hi.clone());
    assert_eq!(collect(db.scan(range.clone())), want);
    let mut back = want.clone();
    back.reverse();
    assert_eq!(collect(db.scan(range.clone()).rev()), back);
    let (snapshot, then) = snap;
    let want: Vec<(Vec<u8>, Vec<u8>)> = then
        .iter()
        .filter(|(k, _)| in_range(k, &lo, &hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(collect(snapshot.scan(range.clone())), want);
    let mut back = want;
    back.reverse();
    assert_eq!(collect(snapshot.scan(range).rev()), back);
    for _ in 0..20 {
        let k = key(rng);
        assert_eq!(
            snapshot.get(&k).unwrap().map(|v| v.to_vec()),
            then.get(&k).cloned()
        );
    }
}

/// Hundreds of flushed tables under `budget`, then one compaction and a reopen: every
/// read agrees with the model throughout, and the budget holds after every check.
fn model_run(budget: usize, seed: u64) -> DbStats {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut db = Db::open(dir.path(), options(budget)).unwrap();
    let mut snap = (db.snapshot(), model.clone());
    for round in 0..200 {
        for _ in 0..30 {
            random_batch(&db, &mut model, &mut rng, key, value);
        }
        if round % 17 == 3 {
            // A range tombstone now and then: version 8 tables carry them too.
            let (a, b) = (key(&mut rng), key(&mut rng));
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            if a < b {
                db.delete_range(&a, &b).unwrap();
                model.retain(|k, _| !(k >= &a && k < &b));
            }
        }
        db.flush().unwrap();
        if round % 20 == 19 {
            check(&db, &model, &snap, &mut rng);
            check_budget(&db.stats(), budget);
            snap = (db.snapshot(), model.clone());
        }
    }
    assert!(db.table_infos().len() >= 200);
    assert!(db.table_infos().iter().all(|t| t.format_version == 8));
    db.compact().unwrap();
    check(&db, &model, &snap, &mut rng);
    check_budget(&db.stats(), budget);
    drop(snap);
    db.close().unwrap();
    db = Db::open(dir.path(), options(budget)).unwrap();
    let snap = (db.snapshot(), model.clone());
    check(&db, &model, &snap, &mut rng);
    let stats = db.stats();
    check_budget(&stats, budget);
    assert!(stats.metadata_top_level_bytes > 0);
    assert!(stats.metadata_cache_misses > 0, "partitions were read");
    assert!(
        stats.coarse_filter_negatives > 0,
        "the coarse filters answered"
    );
    assert_eq!(stats.metadata_partition_failures, 0);
    stats
}

#[test]
fn a_tiny_budget_over_hundreds_of_tables_answers_as_a_btreemap() {
    model_run(4 << 10, 7);
}

#[test]
fn a_budget_that_holds_some_partitions_answers_as_a_btreemap_and_keeps_them() {
    let stats = model_run(256 << 10, 8);
    assert!(stats.metadata_cache_hits > 0, "{stats:?}");
    assert!(stats.metadata_cache_bytes > 0);
}

/// The budget turned on over a store of format version 1 tables (written before any
/// of this existed): old and new tables are read side by side, and compaction
/// rewrites them all partitioned.
#[test]
fn a_store_of_old_tables_opens_beside_partitioned_ones() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store_v1");
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let db = Db::open(dir.path(), options(8 << 10)).unwrap();
    let old: Model = collect(db.scan::<&[u8], _>(..)).into_iter().collect();
    assert!(old.len() > 100, "{}", old.len());
    assert!(db.table_infos().iter().all(|t| t.format_version == 1));
    let mut model = old.clone();
    let mut rng = StdRng::seed_from_u64(9);
    let key = |rng: &mut StdRng| format!("k{:03}", rng.gen_range(0..260)).into_bytes();
    for _ in 0..3 {
        for _ in 0..40 {
            random_batch(&db, &mut model, &mut rng, key, value);
        }
        db.flush().unwrap();
    }
    let versions: Vec<u32> = db.table_infos().iter().map(|t| t.format_version).collect();
    assert!(
        versions.contains(&1) && versions.contains(&8),
        "{versions:?}"
    );
    let all = |db: &Db| -> Vec<(Vec<u8>, Vec<u8>)> { collect(db.scan::<&[u8], _>(..)) };
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(all(&db), want);
    let mut back = want.clone();
    back.reverse();
    assert_eq!(collect(db.scan::<&[u8], _>(..).rev()), back);
    for i in 0..270 {
        let k = format!("k{i:03}").into_bytes();
        assert_eq!(
            db.get(&k).unwrap().map(|v| v.to_vec()),
            model.get(&k).cloned()
        );
    }
    let snap = db.snapshot();
    db.compact().unwrap();
    assert!(db.table_infos().iter().all(|t| t.format_version == 8));
    assert_eq!(all(&db), want);
    assert_eq!(collect(snap.scan::<&[u8], _>(..)), want);
    let lo = Bound::Included(b"k050".to_vec());
    let hi = Bound::Excluded(b"k150".to_vec());
    let part: Vec<_> = want
        .iter()
        .filter(|(k, _)| in_range(k, &lo, &hi))
        .cloned()
        .rev()
        .collect();
    assert_eq!(collect(db.scan((lo, hi)).rev()), part);
    check_budget(&db.stats(), 8 << 10);
    drop(snap);
    db.close().unwrap();
    // The tools read partitioned tables too: every partition checked, none reported.
    let report = verify(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    let info = inspect(dir.path()).unwrap();
    assert!(info.tables.iter().all(|t| t.partitions > 0), "{info}");
    assert!(
        info.to_string().contains("partitions, read on demand"),
        "{info}"
    );
}

/// Without a budget nothing changes: tables keep the format they had before it.
#[test]
fn without_a_budget_tables_keep_their_whole_index_and_filter() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:04}"), "v").unwrap();
    }
    db.flush().unwrap();
    assert!(db.table_infos().iter().all(|t| t.format_version < 8));
    let stats = db.stats();
    assert_eq!(stats.metadata_top_level_bytes, 0);
    assert_eq!(stats.metadata_cache_bytes, 0);
    assert!(stats.metadata_bytes > 0);
}

/// Partitioned tables of an earlier build keep a cache-local Bloom coarse filter; new
/// ones keep a Ribbon. A store of the first (the fixture: 2,000 keys `key…` with even
/// numbers, written by `bloomkv bench --shape scale --keys 2000 --value-size 10` before
/// the change) opens, answers every get as its scan does, and its coarse filter turns
/// absent probes away, beside a new table whose coarse filter is a Ribbon.
#[test]
fn a_partitioned_table_with_a_bloom_coarse_filter_reads_beside_a_ribbon_one() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store_v8_bloom_coarse");
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let opts = Options {
        metadata_budget: Some(64 << 10),
        disable_auto_compaction: true,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let name = |n: u64| format!("key{n:016}").into_bytes();
    let old: Vec<(Vec<u8>, Vec<u8>)> = collect(db.scan::<&[u8], _>(..));
    let want: Vec<Vec<u8>> = (0..2000).map(|i| name(2 * i)).collect();
    assert_eq!(old.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), want);
    // New keys in between the old ones, flushed into a table of their own.
    for i in 0..2000u64 {
        db.put(name(4000 + 2 * i), b"new").unwrap();
    }
    db.flush().unwrap();
    let layouts: Vec<(u32, u64, &str)> = db
        .table_infos()
        .iter()
        .map(|t| {
            let layout = t.filter.as_ref().map_or("none", |f| f.layout);
            (t.format_version, t.partitions, layout)
        })
        .collect();
    assert_eq!(layouts.len(), 2, "{layouts:?}");
    assert!(
        layouts.iter().all(|&(v, p, _)| v == 8 && p > 0),
        "{layouts:?}"
    );
    let mut kinds: Vec<&str> = layouts.iter().map(|&(_, _, l)| l).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["cache-local", "ribbon"], "{layouts:?}");

    for (k, v) in &old {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    for i in 0..2000u64 {
        assert_eq!(
            db.get(name(4000 + 2 * i)).unwrap().as_deref(),
            Some(&b"new"[..])
        );
    }
    // Absent keys: the odd ones 1..=3997 probe the old table alone, 4001..=7997 the
    // new one alone (3999 and 7999 fall between or after the tables' ranges). The
    // coarse filters turn most away: a 5-bit cache-local Bloom lets about 10%
    // through, the Ribbon about 3%, so about 260 ± 16 (one binomial standard
    // deviation) of the 3,998 probes pass; a quarter passing is far outside that,
    // and so is a coarse filter that answers nothing.
    let before = db.stats().coarse_filter_negatives;
    for i in 0..4000u64 {
        assert_eq!(db.get(name(2 * i + 1)).unwrap(), None);
    }
    let probes = 2 * 1999;
    let turned_away = db.stats().coarse_filter_negatives - before;
    assert!(
        turned_away as f64 > 0.75 * probes as f64 && turned_away <= probes,
        "{turned_away} of {probes} probes turned away"
    );
    db.close().unwrap();
    let report = verify(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{report}");
}
