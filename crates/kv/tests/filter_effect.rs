//! The filter's effect, seen through the store's counters.
//!
//! Ten tables whose key ranges all overlap (keys interleaved, one flush each, no
//! compaction), so the key-range check cannot help and only the filter can.

use bloomkv_kv::{Db, DbStats, FilterKind, Options};

const TABLES: usize = 10;
const KEYS_PER_TABLE: usize = 2000;
const LOOKUPS: usize = 2000;

fn present(i: usize) -> String {
    format!("key{:016}", 2 * i)
}

fn absent(i: usize) -> String {
    format!("key{:016}", 2 * i + 1)
}

/// Loads `TABLES` overlapping tables: table `t` holds keys `i` with `i % TABLES == t`.
fn load(filter: FilterKind) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        filter,
        disable_auto_compaction: true,
        memtable_size: 64 << 20,
        // Each filter "maybe" must cost its read: no block cache.
        block_cache_size: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for t in 0..TABLES {
        for j in 0..KEYS_PER_TABLE {
            let i = j * TABLES + t;
            db.put(present(i), format!("value{i}")).unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    // Tables open on first use; opened now, their reads are not the lookups'.
    assert_eq!(db.open_tables().unwrap(), TABLES);
    assert_eq!(db.stats().tables_per_level[0], TABLES);
    (dir, db)
}

fn delta(after: &DbStats, before: &DbStats) -> DbStats {
    DbStats {
        gets: after.gets - before.gets,
        table_probes: after.table_probes - before.table_probes,
        filter_checks: after.filter_checks - before.filter_checks,
        filter_negatives: after.filter_negatives - before.filter_negatives,
        filter_positives: after.filter_positives - before.filter_positives,
        filter_true_positives: after.filter_true_positives - before.filter_true_positives,
        data_block_reads: after.data_block_reads - before.data_block_reads,
        ..DbStats::default()
    }
}

fn absent_lookups(db: &Db) -> DbStats {
    let before = db.stats();
    let total = KEYS_PER_TABLE * TABLES;
    for n in 0..LOOKUPS {
        // Spread over the range, always between two present keys and inside every
        // table's key range (the first and last few keys are not in all of them).
        let i = TABLES + (n * 7919) % (total - 2 * TABLES);
        assert_eq!(db.get(absent(i)).unwrap(), None);
    }
    delta(&db.stats(), &before)
}

fn present_lookups(db: &Db) -> DbStats {
    let before = db.stats();
    let total = KEYS_PER_TABLE * TABLES;
    for n in 0..LOOKUPS {
        let i = (n * 7919) % total;
        let v = db.get(present(i)).unwrap();
        assert_eq!(v.as_deref(), Some(format!("value{i}").as_bytes()));
    }
    delta(&db.stats(), &before)
}

fn absent_keys_skip_nearly_every_table(filter: FilterKind) {
    let (_dir, db) = load(filter);
    let d = absent_lookups(&db);
    assert_eq!(
        d.table_probes,
        (LOOKUPS * TABLES) as u64,
        "every table's range covers every key"
    );
    assert_eq!(d.filter_checks, d.table_probes);
    let useful = d.filter_negatives as f64 / d.filter_checks as f64;
    assert!(useful >= 0.98, "filter negatives {useful:.4} of checks");
    let reads_per_table_per_get = d.data_block_reads as f64 / (LOOKUPS * TABLES) as f64;
    assert!(
        reads_per_table_per_get < 0.0125,
        "{reads_per_table_per_get:.5} reads per table per get"
    );
    // Every positive on an absent key is a false positive and costs exactly one read.
    assert_eq!(d.filter_true_positives, 0);
    assert_eq!(d.data_block_reads, d.filter_positives);
}

#[test]
fn absent_keys_skip_nearly_every_table_cache_local() {
    absent_keys_skip_nearly_every_table(FilterKind::CacheLocalBloom);
}

#[test]
fn absent_keys_skip_nearly_every_table_standard() {
    absent_keys_skip_nearly_every_table(FilterKind::StandardBloom);
}

#[test]
fn present_keys_read_about_one_block() {
    for filter in [FilterKind::CacheLocalBloom, FilterKind::StandardBloom] {
        let (_dir, db) = load(filter.clone());
        let d = present_lookups(&db);
        let per_get = d.data_block_reads as f64 / LOOKUPS as f64;
        assert!(
            per_get <= 1.2,
            "{filter:?}: {per_get:.3} data-block reads per present get"
        );
        assert_eq!(d.filter_true_positives, LOOKUPS as u64);
    }
}

#[test]
fn without_a_filter_absent_keys_read_one_block_per_table() {
    let (_dir, db) = load(FilterKind::None);
    let d = absent_lookups(&db);
    assert_eq!(d.filter_checks, 0);
    assert_eq!(d.data_block_reads, (LOOKUPS * TABLES) as u64);
    assert_eq!(db.stats().filter_memory_bytes, 0);
}

#[test]
fn ribbon_absent_keys_read_under_two_hundredths_of_a_block_per_get() {
    const N: usize = 10_000;
    let (_dir, db) = load(FilterKind::Ribbon);
    let infos = db.table_infos();
    assert!(infos.iter().all(|t| t.filter_policy == "bloomkv.Ribbon"));
    let before = db.stats();
    let total = KEYS_PER_TABLE * TABLES;
    for n in 0..N {
        let i = TABLES + (n * 7919) % (total - 2 * TABLES);
        assert_eq!(db.get(absent(i)).unwrap(), None);
    }
    let d = delta(&db.stats(), &before);
    // About 0.13% FP per table: ~0.013 reads per get, ~130 in all (σ ≈ 11).
    let per_get = d.data_block_reads as f64 / N as f64;
    assert!(per_get < 0.02, "{per_get:.4} reads per absent get");
    assert_eq!(d.data_block_reads, d.filter_positives);
    let p = present_lookups(&db);
    assert_eq!(p.filter_true_positives, LOOKUPS as u64, "no false negative");
}

#[test]
fn bloom_and_ribbon_tables_are_each_read_with_their_own_filter() {
    let dir = tempfile::tempdir().unwrap();
    let open = |filter: FilterKind| {
        Db::open(
            dir.path(),
            Options {
                filter,
                disable_auto_compaction: true,
                block_cache_size: 0,
                ..Options::default()
            },
        )
        .unwrap()
    };
    let write = |db: &Db, from: usize| {
        for i in from..from + 1000 {
            db.put(present(i), format!("value{i}")).unwrap();
        }
        db.flush().unwrap();
    };
    let db = open(FilterKind::CacheLocalBloom);
    write(&db, 0);
    db.close().unwrap();
    let db = open(FilterKind::Ribbon);
    write(&db, 1000);
    db.close().unwrap();
    // Back to Bloom: both tables open with their own filters.
    let db = open(FilterKind::CacheLocalBloom);
    let mut names: Vec<String> = db
        .table_infos()
        .iter()
        .map(|t| format!("{} {}", t.filter_policy, t.filter_state))
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names[0].starts_with("bloomkv.BloomFilter.cache-local"),
        "{names:?}"
    );
    assert!(names[1].starts_with("bloomkv.Ribbon"), "{names:?}");
    assert!(db.table_infos().iter().all(|t| t.filter.is_some()));
    assert_eq!(db.stats().filter_unknown_policy, 0);
    assert_eq!(db.stats().filter_corrupt, 0);
    for i in 0..2000 {
        assert_eq!(
            db.get(present(i)).unwrap().as_deref(),
            Some(format!("value{i}").as_bytes())
        );
    }
}
