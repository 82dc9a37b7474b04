//! The benchmark's counting on a small store: exact for no filter, bounded for filters.

use bloomkv::bench::{
    load, lookup_keys, run_phase, BenchStore, BloomkvStore, FilterSetting, NoProgress, Phase,
    Workload,
};

fn workload() -> Workload {
    Workload {
        keys: 20_000,
        tables: 5,
        lookups: 4_000,
        ..Workload::default()
    }
}

#[test]
fn without_a_filter_every_covering_table_is_read_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload();
    let mut store =
        BloomkvStore::create_with_cache(dir.path().join("s"), FilterSetting::None, 10.0, 0)
            .unwrap();
    load(&mut store, &w, &NoProgress).unwrap();
    assert_eq!(store.tables(), 5);
    // Expected reads: for each absent key, the tables whose key range covers it.
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = store
        .db()
        .unwrap()
        .table_infos()
        .into_iter()
        .map(|t| (t.smallest.to_vec(), t.largest.to_vec()))
        .collect();
    let expected: u64 = lookup_keys(&w, Phase::Absent)
        .iter()
        .map(|k| {
            ranges
                .iter()
                .filter(|(lo, hi)| lo[..] <= k[..] && k[..] <= hi[..])
                .count() as u64
        })
        .sum();
    let r = run_phase(&store, &w, Phase::Absent, &NoProgress).unwrap();
    assert_eq!(r.found, 0);
    assert_eq!(r.counters.table_probes, Some(expected));
    assert_eq!(r.counters.data_block_reads, Some(expected));
    // (The OS's count is compared in `crates/kv/tests/os_read_count.rs`, a test binary
    // of its own: here the other test's reads would be counted too.)
}

#[test]
fn with_filters_absent_lookups_read_about_one_percent() {
    for setting in [FilterSetting::Standard, FilterSetting::CacheLocal] {
        let dir = tempfile::tempdir().unwrap();
        let w = workload();
        let mut store =
            BloomkvStore::create_with_cache(dir.path().join("s"), setting, 10.0, 0).unwrap();
        load(&mut store, &w, &NoProgress).unwrap();
        let shape = store.filter_shape();
        let r = run_phase(&store, &w, Phase::Absent, &NoProgress).unwrap();
        assert_eq!(r.found, 0);
        let c = r.counters;
        let checks = c.table_probes.unwrap();
        let positives = c.filter_positives.unwrap();
        assert_eq!(c.filter_true_positives, Some(0));
        assert_eq!(
            c.data_block_reads,
            Some(positives),
            "one read per false positive"
        );
        // Binomial bound: mean n·p, 4 standard deviations either side.
        let (n, p) = (checks as f64, shape.formula_fp);
        let sigma = (n * p * (1.0 - p)).sqrt();
        let fp = positives as f64;
        assert!(
            (fp - n * p).abs() <= 4.0 * sigma,
            "{setting:?}: {fp} false positives of {n} checks, formula {p}"
        );
        let present = run_phase(&store, &w, Phase::Present, &NoProgress).unwrap();
        assert_eq!(present.found, w.lookups, "{setting:?}: no false negatives");
    }
}
