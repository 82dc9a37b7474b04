//! The read path as `docs/ARCHITECTURE.md` draws it, checked step by step against a
//! real get's `DbStats` deltas: a memtable hit probes no table; a key outside every
//! table's range is not counted; each covering table is one probe and one filter
//! check; a "maybe" looks in the block cache first, where a hit costs no read and a
//! miss costs exactly one; a present key is one true positive; a tombstone is a true
//! positive that answers `None`; and the observed false-positive rate is
//! `(positives − true positives) / (that + negatives)`.

use bloomkv_filter::BloomLayout;
use bloomkv_kv::{Db, DbStats, Options};

/// Keys per table: big enough that the filter's rate is the model's.
const PER_TABLE: u64 = 2_000;

fn key(i: u64) -> String {
    format!("k{i:06}")
}

fn options() -> Options {
    Options {
        disable_auto_compaction: true,
        block_cache_size: 4 << 20,
        ..Options::default()
    }
}

/// The read path's counters, as differences between two `stats()` copies.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Delta {
    gets: u64,
    memtable_hits: u64,
    table_probes: u64,
    filter_checks: u64,
    filter_negatives: u64,
    filter_positives: u64,
    filter_true_positives: u64,
    block_cache_hits: u64,
    block_cache_misses: u64,
    data_block_reads: u64,
    l0_table_probes: u64,
}

fn delta(before: &DbStats, after: &DbStats) -> Delta {
    Delta {
        gets: after.gets - before.gets,
        memtable_hits: after.memtable_hits - before.memtable_hits,
        table_probes: after.table_probes - before.table_probes,
        filter_checks: after.filter_checks - before.filter_checks,
        filter_negatives: after.filter_negatives - before.filter_negatives,
        filter_positives: after.filter_positives - before.filter_positives,
        filter_true_positives: after.filter_true_positives - before.filter_true_positives,
        block_cache_hits: after.block_cache_hits - before.block_cache_hits,
        block_cache_misses: after.block_cache_misses - before.block_cache_misses,
        data_block_reads: after.data_block_reads - before.data_block_reads,
        l0_table_probes: after.levels[0].table_probes - before.levels[0].table_probes,
    }
}

/// One get and what it counted.
fn get(db: &Db, k: &str) -> (Option<Vec<u8>>, Delta) {
    let before = db.stats();
    let v = db.get(k).unwrap().map(|v| v.to_vec());
    (v, delta(&before, &db.stats()))
}

/// The picture's arithmetic, true of every get that reaches the tables: every probe
/// is a filter check (all tables here have a filter), every check says "no" or
/// "maybe", every "maybe" looks in the block cache, and only a miss reads.
fn assert_picture(d: &Delta) {
    assert_eq!(d.gets, 1, "{d:?}");
    assert_eq!(d.filter_checks, d.table_probes, "{d:?}");
    assert_eq!(
        d.filter_negatives + d.filter_positives,
        d.filter_checks,
        "{d:?}"
    );
    assert_eq!(
        d.block_cache_hits + d.block_cache_misses,
        d.filter_positives,
        "{d:?}"
    );
    assert_eq!(d.data_block_reads, d.block_cache_misses, "{d:?}");
    assert!(d.filter_true_positives <= d.filter_positives, "{d:?}");
    assert_eq!(
        d.l0_table_probes, d.table_probes,
        "all tables are in L0: {d:?}"
    );
}

/// Two overlapping L0 tables: the older holds the even keys, the newer the odd ones.
fn two_tables() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for parity in [0, 1] {
        for i in (parity..2 * PER_TABLE).step_by(2) {
            db.put(key(i), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().tables_per_level[0], 2);
    (dir, db)
}

#[test]
fn a_memtable_hit_probes_no_table() {
    let (_dir, db) = two_tables();
    db.put("k000010", "new").unwrap();
    let (v, d) = get(&db, "k000010");
    assert_eq!(v.as_deref(), Some(&b"new"[..]));
    assert_eq!(
        d,
        Delta {
            gets: 1,
            memtable_hits: 1,
            ..Delta::default()
        }
    );
}

#[test]
fn a_key_outside_every_range_is_not_counted() {
    let (_dir, db) = two_tables();
    for k in ["a", "k9", "z"] {
        let (v, d) = get(&db, k);
        assert_eq!(v, None);
        assert_eq!(
            d,
            Delta {
                gets: 1,
                ..Delta::default()
            },
            "{k}"
        );
    }
}

/// A present key: both tables cover it, the newer (odd keys) is asked first and does
/// not hold it, the older does: one true positive and, the first time, one block-cache
/// miss and one read for it; asked again, the same block is a cache hit and no read.
#[test]
fn a_present_key_is_one_true_positive_and_a_second_get_is_a_cache_hit() {
    let (_dir, db) = two_tables();
    let mut cache_hits_seen = 0;
    for i in (2..2 * PER_TABLE).step_by(2).take(200) {
        let k = key(i);
        let (v, first) = get(&db, &k);
        assert_eq!(v, Some(format!("v{i}").into_bytes()));
        assert_picture(&first);
        assert_eq!(first.memtable_hits, 0);
        assert_eq!(first.table_probes, 2, "{k}: both tables cover it");
        assert_eq!(first.filter_true_positives, 1, "{k}");
        // The newer table's answer: "no", or a false positive that also reads.
        assert_eq!(first.filter_positives, 1 + (1 - first.filter_negatives));

        let (again, second) = get(&db, &k);
        assert_eq!(again, v);
        assert_picture(&second);
        assert_eq!(
            second.filter_positives, first.filter_positives,
            "same answers"
        );
        assert_eq!(
            second.block_cache_misses, 0,
            "{k}: its blocks are cached now"
        );
        assert_eq!(second.data_block_reads, 0, "{k}: a cache hit is no read");
        assert_eq!(second.block_cache_hits, second.filter_positives);
        cache_hits_seen += second.block_cache_hits;
    }
    assert!(cache_hits_seen >= 200);
}

/// Absent keys inside both tables' ranges: no true positive, every "maybe" is a false
/// one, and the observed rate is the counter formula and within binomial noise of the
/// cache-local model for these tables.
#[test]
fn absent_keys_count_false_positives_by_the_formula() {
    let (_dir, db) = two_tables();
    let queries = 20_000u64;
    let start = db.stats();
    for i in 0..queries {
        // "k000123x…" sorts between k000123 and k000124: inside both tables' ranges
        // ([k000000, k003998] and [k000001, k003999]) for k000001..=k003997.
        let span = 2 * PER_TABLE - 3;
        let k = format!("{}x{}", key(1 + i % span), i / span);
        let (v, d) = get(&db, &k);
        assert_eq!(v, None);
        assert_picture(&d);
        assert_eq!(d.table_probes, 2);
        assert_eq!(d.filter_true_positives, 0, "{k}");
    }
    let s = db.stats();
    let d = delta(&start, &s);
    let false_positives = d.filter_positives - d.filter_true_positives;
    let formula = false_positives as f64 / (false_positives + d.filter_negatives) as f64;
    let observed_total = s.observed_fp_rate();
    assert_eq!(
        s.false_positives(),
        s.filter_positives - s.filter_true_positives
    );
    // Over this test's gets alone (stats began at zero for this store's gets except
    // the fills, which do no gets), the two agree exactly.
    assert!(
        (formula - observed_total).abs() < 1e-12,
        "{formula} {observed_total}"
    );
    // Reads per absent get = tables × FP (each false positive reads or hits the cache).
    let checks = 2 * queries;
    assert_eq!(d.filter_checks, checks);
    let layout = BloomLayout::CacheLocal;
    let bits = layout.num_bits(PER_TABLE, 10.0);
    let model = layout.estimated_fp_rate(bits, PER_TABLE, layout.num_probes(10.0));
    // Sampling noise of `checks` queries, plus the spread between filters of two
    // tables of 2,000 keys (a few lines each way): allowed as 30% of the rate.
    let n = checks as f64;
    let sigma = (n * model * (1.0 - model)).sqrt();
    let expected = n * model;
    assert!(
        (false_positives as f64 - expected).abs() <= 4.0 * sigma + 0.3 * expected,
        "{false_positives} false positives of {checks} checks, model {model}"
    );
}

/// A deleted key: the newest table holds its tombstone, the filter says "maybe" (it is
/// a key the table holds), the read finds the tombstone and the get stops there.
#[test]
fn a_tombstone_is_a_true_positive_that_answers_none() {
    let (_dir, db) = two_tables();
    db.delete(key(42)).unwrap();
    db.flush().unwrap();
    let (v, d) = get(&db, &key(42));
    assert_eq!(v, None);
    assert_picture(&d);
    assert_eq!(
        d.table_probes, 1,
        "the tombstone's table is newest and answers"
    );
    assert_eq!(d.filter_positives, 1);
    assert_eq!(d.filter_true_positives, 1);
    assert_eq!(d.data_block_reads, 1);
}
