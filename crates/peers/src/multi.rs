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
//! way (`bloomkv_bench::run_multi_get_phase`, the phase `bloomkv bench --multi-get` runs).

/// The label of a row's multi-get twin.
pub fn multi_label(label: &str, batch: usize) -> String {
    format!("{label} multi-get {batch}")
}

#[cfg(test)]
mod tests {
    use bloomkv_bench::{
        load, run_multi_get_phase, BenchStore, FilterSetting, NoProgress, Phase, Workload,
    };

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
                    run_multi_get_phase(store.as_ref(), &w, Phase::Absent, batch, &NoProgress)
                        .unwrap();
                let present =
                    run_multi_get_phase(store.as_ref(), &w, Phase::Present, batch, &NoProgress)
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
