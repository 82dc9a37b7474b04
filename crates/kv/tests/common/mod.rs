//! Helpers shared by the store's integration tests (each test file uses some).
#![allow(dead_code)]

use std::collections::BTreeMap;

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
