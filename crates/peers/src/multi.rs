//! Batched point lookups side by side: each store's own way of asking for many keys.
//!
//! With `--multi-get N` every flat row gains a twin labelled `"<row> multi-get N"`:
//! on the same loaded store, after its single-get phases and a reopen (so its block
//! cache starts empty, as theirs did), the same absent and present keys in the same
//! order, handed over `N` at a time —
//!
//! ```text
//! bloomkv   Db::multi_get(batch)                  one call, one answer per key
//! RocksDB   batched_multi_get_cf_opt(batch)        its batched MultiGet
//! fjall     for key in batch { get(key) }          it has no multi-get
//! ```
//!
//! Times are per key, like the single-get rows', and the counts are taken the same
//! way ([`run_multi_phase`] mirrors `bloomkv_bench::run_phase`).

use std::time::Instant;

use bloomkv_bench::{
    in_shares, lookup_keys, BenchError, BenchStore, OsIo, OsReads, Phase, PhaseResult, Progress,
    StoreCounters, Workload, KEY_LEN,
};

/// `after − before`, counter by counter (`None` where either is).
fn minus(after: StoreCounters, before: StoreCounters) -> StoreCounters {
    let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
    StoreCounters {
        table_probes: d(after.table_probes, before.table_probes),
        filter_negatives: d(after.filter_negatives, before.filter_negatives),
        filter_positives: d(after.filter_positives, before.filter_positives),
        filter_true_positives: d(after.filter_true_positives, before.filter_true_positives),
        data_block_reads: d(after.data_block_reads, before.data_block_reads),
        block_cache_hits: d(after.block_cache_hits, before.block_cache_hits),
    }
}

/// The label of a row's multi-get twin.
pub fn multi_label(label: &str, batch: usize) -> String {
    format!("{label} multi-get {batch}")
}

/// One lookup phase in batches of `batch` keys: the same keys as the single-get
/// phase, the same counters and clock.
pub fn run_multi_phase(
    store: &dyn BenchStore,
    w: &Workload,
    phase: Phase,
    batch: usize,
    progress: &dyn Progress,
) -> Result<PhaseResult, BenchError> {
    let keys = lookup_keys(w, phase);
    let batches: Vec<&[[u8; KEY_LEN]]> = keys.chunks(batch.max(1)).collect();
    if w.cold {
        store.drop_caches();
    }
    progress.start(
        &format!("{} {} ×{batch}", store.label(), phase.name()),
        batches.len() as u64,
    );
    let cost = OsIo::self_cost();
    let before = store.counters();
    let os_before = OsIo::now();
    let started = Instant::now();
    let found = in_shares(&batches, w.threads, progress, |b| store.multi_get(b))?;
    let nanos = started.elapsed().as_nanos();
    let os_after = OsIo::now();
    let counters = minus(store.counters(), before);
    progress.finish();
    let os = match (os_before, os_after, cost) {
        (Some(b), Some(a), Some(c)) => Some(OsReads::between(b, a, c)),
        _ => None,
    };
    Ok(PhaseResult {
        lookups: keys.len() as u64,
        found,
        counters,
        os,
        nanos,
        threads: w.threads.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloomkv_bench::{load, FilterSetting, NoProgress};

    use crate::{CacheSize, FjallFilter, FjallStore, Labeled, Layout};
    use bloomkv_bench::BloomkvStore;

    /// Every store's batched phase finds exactly what its single gets find.
    #[test]
    fn batched_phases_find_what_single_gets_find() {
        let dir = tempfile::tempdir().unwrap();
        let w = Workload {
            keys: 3000,
            tables: 3,
            lookups: 500,
            ..Workload::default()
        };
        let bloomkv =
            BloomkvStore::create(dir.path().join("b"), FilterSetting::CacheLocal, 10.0).unwrap();
        let mut stores: Vec<Box<dyn BenchStore>> = vec![
            Box::new(Labeled::new("b", bloomkv)),
            Box::new(
                FjallStore::create(
                    "f",
                    dir.path().join("f"),
                    FjallFilter::BitsPerKey(10.0),
                    CacheSize::Default,
                    Layout::Flat,
                )
                .unwrap(),
            ),
        ];
        #[cfg(feature = "rocksdb")]
        stores.push(Box::new(
            crate::RocksDbStore::create(
                "r",
                dir.path().join("r"),
                Some(10.0),
                CacheSize::Default,
                Layout::Flat,
                false,
            )
            .unwrap(),
        ));
        for store in &mut stores {
            load(store.as_mut(), &w, &NoProgress).unwrap();
            for batch in [1, 7, 32, 500, 501] {
                let absent =
                    run_multi_phase(store.as_ref(), &w, Phase::Absent, batch, &NoProgress).unwrap();
                let present =
                    run_multi_phase(store.as_ref(), &w, Phase::Present, batch, &NoProgress)
                        .unwrap();
                assert_eq!(
                    (absent.lookups, absent.found),
                    (500, 0),
                    "{}",
                    store.label()
                );
                assert_eq!(
                    (present.lookups, present.found),
                    (500, 500),
                    "{}",
                    store.label()
                );
            }
        }
    }
}
