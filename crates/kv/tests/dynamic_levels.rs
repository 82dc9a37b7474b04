//! Dynamic level sizing (`Options::dynamic_level_bytes`): levels are sized from the
//! bottom up, L0 compacts into the base level, and nothing is lost on the way —
//! including when a store written under fixed budgets is reopened this way.

use std::collections::BTreeMap;

use bloomkv_kv::{Db, Options, NUM_LEVELS};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

fn options(dynamic: bool) -> Options {
    Options {
        memtable_size: 16 * 1024,
        block_size: 512,
        target_file_size: 8 * 1024,
        l0_compaction_trigger: 2,
        // Fixed budgets: 4 KiB, 40 KiB, ... Dynamic: a base of at least 1 KiB, so
        // about 350 KiB of data gets targets of 350, 35 and 3.5 KiB.
        level1_max_bytes: if dynamic { 1024 } else { 4 * 1024 },
        dynamic_level_bytes: dynamic,
        block_cache_size: 0,
        ..Options::default()
    }
}

/// Writes every key of `keys` (shuffled) with a value naming `round`.
fn write_round(
    db: &Db,
    keys: &[u32],
    round: u32,
    seed: u64,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let mut order = keys.to_vec();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    for k in order {
        let key = format!("key{k:08}").into_bytes();
        let value = format!("round {round} of key {k} {}", "x".repeat(24)).into_bytes();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(v.as_slice()),
            "key {}",
            String::from_utf8_lossy(k)
        );
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<&[u8], _>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(scanned.len(), model.len());
}

/// File bytes per level.
fn level_bytes(db: &Db) -> Vec<u64> {
    let mut bytes = vec![0u64; NUM_LEVELS];
    for t in db.table_infos() {
        bytes[t.level] += t.file_size;
    }
    bytes
}

/// The levels below L0 that hold data form one run ending at the last level, and each
/// is within its target: a tenth of the level below it (file bytes include index and
/// filter, hence the slack).
fn assert_bottom_up_shape(bytes: &[u64]) -> usize {
    let first = (1..NUM_LEVELS)
        .find(|&l| bytes[l] > 0)
        .expect("data below L0");
    for (l, &b) in bytes.iter().enumerate().skip(first) {
        assert!(
            b > 0,
            "L{l} is empty between L{first} and the last level: {bytes:?}"
        );
    }
    let bottom = bytes[NUM_LEVELS - 1] as f64;
    for (l, &b) in bytes.iter().enumerate().take(NUM_LEVELS - 1).skip(first) {
        let target = bottom / 10f64.powi((NUM_LEVELS - 1 - l) as i32);
        assert!(
            b as f64 <= target * 1.5,
            "L{l} holds {b} bytes, over its target {target:.0}: {bytes:?}"
        );
    }
    NUM_LEVELS - first
}

#[test]
fn levels_are_sized_from_the_bottom_up() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    let keys: Vec<u32> = (0..6000).collect();
    let mut model = BTreeMap::new();
    // Two rounds: the second overwrites every key, so a newer version that ended up
    // under an older one would show.
    write_round(&db, &keys, 1, 1, &mut model);
    write_round(&db, &keys, 2, 2, &mut model);
    db.wait_for_compaction().unwrap();
    check(&db, &model);
    let bytes = level_bytes(&db);
    // The base level (3.5 KiB here) is often compacted empty again right after L0
    // lands in it, so at least the last two levels hold data.
    let levels = assert_bottom_up_shape(&bytes);
    assert!(levels >= 2, "only {levels} level below L0: {bytes:?}");
    drop(db);
    let db = Db::open(dir.path(), options(true)).unwrap();
    check(&db, &model);
}

#[test]
fn a_store_with_fixed_budgets_reopens_with_dynamic_sizing() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<u32> = (0..3000).collect();
    let mut model = BTreeMap::new();
    {
        let db = Db::open(dir.path(), options(false)).unwrap();
        write_round(&db, &keys, 1, 3, &mut model);
        db.wait_for_compaction().unwrap();
        let bytes = level_bytes(&db);
        assert!(
            bytes[1..NUM_LEVELS - 1].iter().any(|&b| b > 0) && bytes[NUM_LEVELS - 1] == 0,
            "fixed budgets should fill from the top and leave the last level empty: {bytes:?}"
        );
    }
    let db = Db::open(dir.path(), options(true)).unwrap();
    check(&db, &model);
    write_round(&db, &keys, 2, 4, &mut model);
    db.wait_for_compaction().unwrap();
    check(&db, &model);
    assert_bottom_up_shape(&level_bytes(&db));
}

/// `compact()` on a store whose data is all in L0 writes one sorted run on the
/// deepest level, as its docs say. It once wrote L1, which dynamic sizing gives no
/// budget while deeper levels are empty, so the background then moved each table
/// down one level at a time: 44 more compactions here, each rewriting its table.
#[test]
fn compact_of_l0_alone_writes_the_bottom_level_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            disable_auto_compaction: true,
            ..options(true)
        },
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let keys: Vec<u32> = (0..1_000).collect();
    write_round(&db, &keys, 0, 7, &mut model);
    db.flush().unwrap();
    assert_eq!(db.stats().tables_per_level[0], db.table_infos().len());
    db.compact().unwrap();
    assert_eq!(db.stats().compactions, 1);
    db.wait_for_compaction().unwrap();
    let stats = db.stats();
    assert_eq!(stats.compactions, 1, "the data moved again: {stats:?}");
    let per_level = &stats.tables_per_level;
    assert!(per_level[NUM_LEVELS - 1] > 0, "{per_level:?}");
    assert_eq!(
        per_level.iter().sum::<usize>(),
        per_level[NUM_LEVELS - 1],
        "{per_level:?}"
    );
    check(&db, &model);
}
