//! What the store-level timing examples share.

use bloomkv::kv::{Db, WriteBatch};
use rand::seq::SliceRandom;
use rand::{rngs::StdRng, SeedableRng};

/// The examples' key for record `i`.
pub fn key(i: u64) -> String {
    format!("key{i:016}")
}

/// Writes records `0..keys` (the benchmark's 100-byte values) in a random order fixed
/// by `seed`, in atomic batches of 1,000, then waits for compaction to finish.
pub fn load_shuffled(db: &Db, keys: u64, seed: u64) -> bloomkv::kv::Result<()> {
    let mut order: Vec<u64> = (0..keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let mut value = Vec::with_capacity(100);
    for chunk in order.chunks(1_000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            bloomkv_bench::fill_value(&mut value, i, 100);
            batch.put(key(i), &value);
        }
        db.write(batch)?;
    }
    db.wait_for_compaction()
}
