//! Helpers shared by the store's integration tests (each test file uses some).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::Bound;

use bloomkv_kv::{Db, WriteBatch};
use rand::rngs::StdRng;
use rand::Rng;

/// A scan's items as owned pairs; panics on an error item (the tests want none).
pub fn collect(
    scan: impl Iterator<Item = bloomkv_kv::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan.map(|kv| {
        let (k, v) = kv.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

/// Puts `k` = `v` in the store and in its model alike.
pub fn put(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: Vec<u8>, v: Vec<u8>) {
    db.put(&k, &v).unwrap();
    model.insert(k, v);
}

/// Deletes `k` from the store and from its model alike.
pub fn delete(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: Vec<u8>) {
    db.delete(&k).unwrap();
    model.remove(&k);
}

/// A batch of 1–7 random puts and deletes (three in ten), written to the store and
/// applied to its model alike.
pub fn random_batch(
    db: &Db,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut StdRng,
    key: impl Fn(&mut StdRng) -> Vec<u8>,
    value: impl Fn(&mut StdRng) -> Vec<u8>,
) {
    let mut batch = WriteBatch::new();
    for _ in 0..rng.gen_range(1..8) {
        let k = key(rng);
        if rng.gen_bool(0.3) {
            batch.delete(&k);
            model.remove(&k);
        } else {
            let v = value(rng);
            batch.put(&k, &v);
            model.insert(k, v);
        }
    }
    db.write(batch).unwrap();
}

/// A random scan bound over keys drawn by `key`: unbounded one time in five, else
/// included or excluded.
pub fn random_bound(rng: &mut StdRng, key: impl Fn(&mut StdRng) -> Vec<u8>) -> Bound<Vec<u8>> {
    match rng.gen_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(key(rng)),
        _ => Bound::Excluded(key(rng)),
    }
}

/// Whether `k` lies within `lo .. hi`.
pub fn in_range(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    use std::ops::RangeBounds;
    fn slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        b.as_ref().map(Vec::as_slice)
    }
    RangeBounds::<[u8]>::contains(&(slice(lo), slice(hi)), k)
}
