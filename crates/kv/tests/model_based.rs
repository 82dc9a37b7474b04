//! The store against a `BTreeMap`: thousands of random operations, several seeds.
//!
//! Every step is applied to both; every `get`, `multi_get` and `scan` (both ways) must
//! agree. Range deletes (alone, and in batches beside puts and deletes) are in the mix.
//! Reopens, flushes and compactions are mixed in, with a small memtable so background
//! flushes and automatic compactions happen on their own too.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use bloomkv_kv::{Db, FilterKind, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn options(filter: FilterKind) -> Options {
    let compression = if filter == FilterKind::CacheLocalBloom {
        bloomkv_kv::Compression::Lz4
    } else {
        bloomkv_kv::Compression::None
    };
    let dynamic_level_bytes = filter == FilterKind::StandardBloom;
    let block_align = filter != FilterKind::None;
    Options {
        filter,
        memtable_size: 16 * 1024,
        block_size: 512,
        l0_compaction_trigger: 3,
        level1_max_bytes: 64 * 1024,
        target_file_size: 16 * 1024,
        // A small block cache, so that blocks are evicted and read again; LZ4 blocks
        // on the cache-local runs (the snapshot run included), raw ones on the others.
        block_cache_size: 24 * 1024,
        compression,
        // The standard-Bloom run sizes its levels from the bottom up.
        dynamic_level_bytes,
        // Raw blocks page-aligned on the standard-Bloom run (eight 512-byte blocks to a
        // page), back to back on the unfiltered one.
        block_align,
        ..Options::default()
    }
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so overwrites and deletes of live keys are common; some keys
    // are prefixes of others, and the empty key is in play.
    let n: u32 = rng.gen_range(0..600);
    if n == 0 {
        Vec::new()
    } else if n.is_multiple_of(7) {
        format!("k{}", n / 7).into_bytes()
    } else {
        format!("k{n:04}").into_bytes()
    }
}

fn value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let len = rng.gen_range(0..64);
    let mut v = format!("v{step}-").into_bytes();
    v.extend(std::iter::repeat_n(b'x', len));
    v
}

fn check_scan(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut StdRng) {
    let mut a = key(rng);
    let mut b = key(rng);
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    let (lo, hi) = match rng.gen_range(0..4) {
        0 => (Bound::Included(a), Bound::Excluded(b)),
        1 => (Bound::Excluded(a), Bound::Included(b)),
        2 => (Bound::Unbounded, Bound::Included(b)),
        _ => (Bound::Included(a), Bound::Unbounded),
    };
    let (lo2, hi2) = (lo.clone(), hi.clone());
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan");
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range::<Vec<u8>, _>((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want, "scan disagrees with the model");
    let mut back: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<Vec<u8>, _>((lo2, hi2))
        .rev()
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("reverse scan");
    back.reverse();
    assert_eq!(back, want, "reverse scan disagrees with the model");
}

/// A random range `[a, b)`: mostly a few dozen neighbouring keys, sometimes any two.
fn range(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    if rng.gen_bool(0.8) {
        let n: u32 = rng.gen_range(1..600);
        let m = n + rng.gen_range(1..30);
        (
            format!("k{n:04}").into_bytes(),
            format!("k{m:04}").into_bytes(),
        )
    } else {
        let (mut a, mut b) = (key(rng), key(rng));
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        if a == b {
            b.push(b'~');
        }
        (a, b)
    }
}

fn remove_range(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, (a, b): &(Vec<u8>, Vec<u8>)) {
    model.retain(|k, _| !(a <= k && k < b));
}

/// A range delete, alone or in a batch between puts and deletes (applied in order).
fn delete_range(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut StdRng, step: usize) {
    let r = range(rng);
    if rng.gen_bool(0.5) {
        db.delete_range(&r.0, &r.1).unwrap();
        remove_range(model, &r);
        return;
    }
    let mut batch = bloomkv_kv::WriteBatch::new();
    for i in 0..rng.gen_range(1..6) {
        if i == 1 {
            batch.delete_range(&r.0, &r.1);
            remove_range(model, &r);
        }
        let k = key(rng);
        if rng.gen_bool(0.3) {
            batch.delete(&k);
            model.remove(&k);
        } else {
            let v = value(rng, step);
            batch.put(&k, &v);
            model.insert(k, v);
        }
    }
    if batch.len() == 1 {
        batch.delete_range(&r.0, &r.1);
        remove_range(model, &r);
    }
    db.write(batch).unwrap();
}

/// A `multi_get` of a few random keys (duplicates possible) against the model.
fn check_multi_get(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut StdRng, step: usize) {
    let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..12)).map(|_| key(rng)).collect();
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get(&keys)
        .unwrap()
        .into_iter()
        .map(|v| v.map(|b| b.to_vec()))
        .collect();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(got, want, "multi_get at step {step}");
}

fn run(seed: u64, steps: usize, filter: FilterKind) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut db = Db::open(dir.path(), options(filter.clone())).unwrap();
    for step in 0..steps {
        match rng.gen_range(0..100) {
            0..=39 => {
                let (k, v) = (key(&mut rng), value(&mut rng, step));
                common::put(&db, &mut model, k, v);
            }
            40..=46 => common::delete(&db, &mut model, key(&mut rng)),
            47..=49 => delete_range(&db, &mut model, &mut rng, step),
            50..=54 => {
                common::random_batch(&db, &mut model, &mut rng, key, |r| value(r, step));
            }
            55..=59 => check_multi_get(&db, &model, &mut rng, step),
            60..=84 => {
                let k = key(&mut rng);
                let got = db.get(&k).unwrap().map(|b| b.to_vec());
                assert_eq!(got, model.get(&k).cloned(), "get({k:?}) at step {step}");
            }
            85..=91 => check_scan(&db, &model, &mut rng),
            92..=94 => db.flush().unwrap(),
            95..=96 => db.compact().unwrap(),
            _ => {
                db.close().unwrap();
                db = Db::open(dir.path(), options(filter.clone())).unwrap();
            }
        }
    }
    // Everything, once more, after a final reopen.
    db.close().unwrap();
    let db = Db::open(dir.path(), options(filter)).unwrap();
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<&[u8], _>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(all, want);
}

#[test]
fn random_operations_match_a_btreemap_cache_local() {
    for seed in [1, 2, 3] {
        run(seed, 3000, FilterKind::CacheLocalBloom);
    }
}

#[test]
fn random_operations_match_a_btreemap_standard() {
    run(11, 3000, FilterKind::StandardBloom);
}

/// Ribbon filters in every L0 table: gets ask them side by side, stopping at a table
/// whose range tombstone covers the key.
#[test]
fn random_operations_match_a_btreemap_ribbon() {
    for seed in [31, 32] {
        run(seed, 3000, FilterKind::Ribbon);
    }
}

#[test]
fn random_operations_match_a_btreemap_without_filter() {
    run(21, 3000, FilterKind::None);
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn kv(
    items: impl Iterator<Item = bloomkv_kv::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    items
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan")
}

/// Reads through `snap` and compares with `model`, the model as the snapshot was taken:
/// a get, a forward and a reverse scan over random bounds, and a prefix scan.
fn check_snapshot(snap: &bloomkv_kv::Snapshot, model: &Model, rng: &mut StdRng, step: usize) {
    let keys: Vec<Vec<u8>> = (0..4).map(|_| key(rng)).collect();
    let got: Vec<Option<Vec<u8>>> = snap
        .multi_get(&keys)
        .unwrap()
        .into_iter()
        .map(|v| v.map(|b| b.to_vec()))
        .collect();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(got, want, "snapshot multi_get at step {step}");
    let k = key(rng);
    let got = snap.get(&k).unwrap().map(|b| b.to_vec());
    assert_eq!(
        got,
        model.get(&k).cloned(),
        "snapshot get({k:?}) at step {step}"
    );
    let mut a = key(rng);
    let mut b = key(rng);
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    let (lo, hi) = match rng.gen_range(0..4) {
        0 => (Bound::Included(a), Bound::Excluded(b)),
        1 => (Bound::Excluded(a), Bound::Included(b)),
        2 => (Bound::Unbounded, Bound::Included(b)),
        _ => (Bound::Included(a), Bound::Unbounded),
    };
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let range = (lo, hi);
    assert_eq!(
        kv(snap.scan::<Vec<u8>, _>(range.clone())),
        want,
        "snapshot scan at step {step}"
    );
    let mut back = kv(snap.scan::<Vec<u8>, _>(range).rev());
    back.reverse();
    assert_eq!(back, want, "snapshot reverse scan at step {step}");
    let source = key(rng);
    let prefix = &source[..rng.gen_range(0..6).min(source.len())];
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        kv(snap.scan_prefix(prefix)),
        want,
        "snapshot prefix scan at step {step}"
    );
}

/// The model keeps the store as of every live snapshot; snapshots are taken at random
/// steps and read much later, while writes, flushes and compactions (automatic ones
/// too) go on. A reopen releases them (a snapshot keeps the store open).
fn run_with_snapshots(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let opts = || Options {
        prefix_extractor: Some(std::sync::Arc::new(bloomkv_kv::FixedPrefix::new(3))),
        ..options(FilterKind::CacheLocalBloom)
    };
    let mut model: Model = BTreeMap::new();
    let mut snaps: Vec<(bloomkv_kv::Snapshot, Model)> = Vec::new();
    let mut db = Db::open(dir.path(), opts()).unwrap();
    let mut checks = 0;
    for step in 0..steps {
        match rng.gen_range(0..100) {
            0..=39 => {
                let (k, v) = (key(&mut rng), value(&mut rng, step));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=46 => {
                let k = key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            47..=49 => delete_range(&db, &mut model, &mut rng, step),
            50..=54 => {
                common::random_batch(&db, &mut model, &mut rng, key, |r| value(r, step));
            }
            55..=59 if snaps.len() < 5 => snaps.push((db.snapshot(), model.clone())),
            60..=62 if !snaps.is_empty() => {
                let i = rng.gen_range(0..snaps.len());
                snaps.swap_remove(i);
            }
            63..=84 if !snaps.is_empty() => {
                let i = rng.gen_range(0..snaps.len());
                let (snap, as_then) = &snaps[i];
                check_snapshot(snap, as_then, &mut rng, step);
                checks += 1;
            }
            85..=87 => {
                let k = key(&mut rng);
                let got = db.get(&k).unwrap().map(|b| b.to_vec());
                assert_eq!(got, model.get(&k).cloned(), "get({k:?}) at step {step}");
            }
            88..=89 => check_multi_get(&db, &model, &mut rng, step),
            90..=93 => check_scan(&db, &model, &mut rng),
            94..=95 => db.flush().unwrap(),
            96..=97 => db.compact().unwrap(),
            98 => {
                snaps.clear();
                db.close().unwrap();
                db = Db::open(dir.path(), opts()).unwrap();
            }
            _ => {}
        }
    }
    assert!(checks > steps / 20, "snapshots were read: {checks}");
    for (snap, as_then) in &snaps {
        check_snapshot(snap, as_then, &mut rng, steps);
    }
}

#[test]
fn random_operations_and_snapshots_match_a_model_of_every_version() {
    for seed in [31, 32] {
        run_with_snapshots(seed, 3000);
    }
}
