//! The `--multi-get` rows: the same keys as the single-get rows, the same per-key
//! filter counts, no more reads, and the store's read count equal to the OS's.
//! (One test in its own binary: `/proc/self/io` counts the whole process.)

use bloomkv_bench::{
    load_timed, multi_get_rows, os_read_disagreements, run_store, run_store_batched, BenchStore,
    BloomkvStore, FilterSetting, NoProgress, Phase, Workload,
};

#[test]
fn batched_rows_count_as_the_single_rows_and_as_the_os() {
    let w = Workload {
        keys: 20_000,
        tables: 5,
        lookups: 4_000,
        cache_mib: 0, // every block a lookup needs is read: the reads are the OS's
        ..Workload::default()
    };
    for setting in [FilterSetting::Ribbon, FilterSetting::None] {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            BloomkvStore::create_with_cache(dir.path().join("s"), setting, 10.0, 0).unwrap();
        let single = run_store(&mut store, &w, &NoProgress).unwrap();
        let open_ms = single[0].open_ms;
        assert!(open_ms.is_some_and(|ms| ms >= 0.0), "{open_ms:?}");
        let batched = multi_get_rows(&store, &w, 32, open_ms, &NoProgress).unwrap();
        assert_eq!(batched.len(), 2);
        for (one, many) in single.iter().zip(&batched) {
            assert_eq!((one.batch, many.batch), (1, 32));
            assert_eq!(one.phase, many.phase);
            assert_eq!(many.open_ms, open_ms);
            assert_eq!((many.lookups, many.found), (one.lookups, one.found));
            let want_found = match one.phase {
                Phase::Absent => 0,
                Phase::Present => w.lookups,
            };
            assert_eq!(many.found, want_found, "{setting:?}");
            // Per key, the filters decide the same in a batch.
            assert_eq!(many.table_probes, one.table_probes, "{setting:?}");
            assert_eq!(many.filter_negatives, one.filter_negatives, "{setting:?}");
            assert_eq!(many.filter_positives, one.filter_positives, "{setting:?}");
            // A block shared by keys of one batch is read once.
            assert!(many.data_block_reads <= one.data_block_reads, "{setting:?}");
            assert!(many.data_block_reads > 0, "{setting:?} {:?}", many.phase);
            if many.os_read_syscalls.is_some() {
                assert_eq!(
                    os_read_disagreements(&batched),
                    Vec::<String>::new(),
                    "{setting:?}"
                );
                // Reads made through io_uring (bloomkv's `io-uring` feature) are not
                // read syscalls; without the feature there are none.
                let uring = many.uring_reads.unwrap_or(0);
                assert_eq!(many.os_read_syscalls, Some(many.data_block_reads - uring));
                if cfg!(not(feature = "io-uring")) {
                    assert_eq!(many.uring_reads, None);
                }
            }
        }
        // The default `multi_get` of a store without one is a loop of gets.
        let keys = bloomkv_bench::lookup_keys(&w, Phase::Present);
        assert_eq!(store.multi_get(&keys[..100]).unwrap(), 100);
        drop(store);
        // And `load_timed` measures a reopen of its own.
        let mut again =
            BloomkvStore::create_with_cache(dir.path().join("t"), setting, 10.0, 0).unwrap();
        assert!(load_timed(&mut again, &w, &NoProgress).unwrap() >= 0.0);
        // The whole run with batches: single rows, then batched rows, one reopen.
        let mut whole =
            BloomkvStore::create_with_cache(dir.path().join("u"), setting, 10.0, 1 << 20).unwrap();
        let small = Workload {
            keys: 5_000,
            lookups: 1_000,
            ..w.clone()
        };
        let rows = run_store_batched(&mut whole, &small, 7, &NoProgress).unwrap();
        let shape: Vec<_> = rows.iter().map(|r| (r.phase, r.batch)).collect();
        assert_eq!(
            shape,
            [
                (Phase::Absent, 1),
                (Phase::Present, 1),
                (Phase::Absent, 7),
                (Phase::Present, 7)
            ]
        );
        assert!(rows.iter().all(|r| r.open_ms == rows[0].open_ms));
        assert_eq!(rows[3].found, small.lookups);
    }
}
