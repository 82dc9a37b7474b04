//! The benchmark's counting on a small store: exact for no filter, bounded for filters.

use bloomkv_bench::{
    load, lookup_keys, os_read_disagreements, run_phase, run_prefix_phases, BenchStore,
    BloomkvStore, FilterSetting, NoProgress, Phase, Row, Workload,
};

/// `/proc/self/io` counts the whole process: the tests of this file run one at a time,
/// so no other test's reads land in a phase the OS cross-check looks at.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

fn workload() -> Workload {
    Workload {
        keys: 20_000,
        tables: 5,
        lookups: 4_000,
        ..Workload::default()
    }
}

/// The workload loaded into a store with `setting`'s filters and no block cache.
fn loaded(dir: &tempfile::TempDir, setting: FilterSetting) -> BloomkvStore {
    let mut store = BloomkvStore::create_with_cache(dir.path().join("s"), setting, 10.0, 0)
        .expect("create the store");
    load(&mut store, &workload(), &NoProgress).expect("load the store");
    store
}

#[test]
fn without_a_filter_every_covering_table_is_read_exactly_once() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let w = workload();
    let store = loaded(&dir, FilterSetting::None);
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
    let _serial = one_at_a_time();
    for setting in [FilterSetting::Standard, FilterSetting::CacheLocal] {
        let dir = tempfile::tempdir().unwrap();
        let w = workload();
        let store = loaded(&dir, setting);
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

/// The run's cross-check against the OS: where `/proc/self/io` exists, the OS's read
/// syscalls during a phase equal the store's count of table reads, and a row where
/// they differ is reported.
#[test]
fn the_os_counts_the_reads_the_store_counts() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let w = workload();
    let store = loaded(&dir, FilterSetting::None);
    let r = run_phase(&store, &w, Phase::Present, &NoProgress).unwrap();
    let mut row = Row::new("none", Phase::Present, &r, &store.filter_shape(), w.keys);
    if row.os_read_syscalls.is_none() {
        return; // no /proc/self/io here: nothing to compare
    }
    assert!(row.data_block_reads > 0);
    assert_eq!(
        os_read_disagreements(std::slice::from_ref(&row)),
        Vec::<String>::new()
    );
    row.data_block_reads += 1;
    let warned = os_read_disagreements(&[row]);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("the OS counted"), "{warned:?}");
}

/// `--threads` reaches the scan phases: two threads make the same scans as one, so with
/// no block cache (whose hits depend on the order) every count is the same.
#[test]
fn scan_phases_on_two_threads_count_what_one_thread_counts() {
    let _serial = one_at_a_time();
    let rows = |threads: usize| {
        let w = Workload {
            keys: 4_000,
            tables: 4,
            lookups: 500,
            cache_mib: 0,
            threads,
            ..Workload::default()
        };
        let work = bloomkv_bench::WorkDir::new(None).unwrap();
        run_prefix_phases(&w, &work, 400, &NoProgress).unwrap().0
    };
    let (one, two) = (rows(1), rows(2));
    assert_eq!(one.len(), 4);
    for (a, b) in one.iter().zip(&two) {
        assert_eq!((a.threads, b.threads), (1, 2));
        let counts = |r: &bloomkv_bench::PrefixRow| {
            (
                r.extractor.clone(),
                r.phase,
                r.scans,
                r.keys_found,
                r.data_block_reads,
                r.prefix_checks,
                r.tables_skipped,
            )
        };
        assert_eq!(counts(a), counts(b));
    }
}
