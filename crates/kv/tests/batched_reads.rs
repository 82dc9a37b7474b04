//! The batched read path (`multi_get`) counts, fails and fails open as a loop of gets
//! would: every per-key counter equal, a read failing inside a batch fails the call
//! and nothing else, a damaged filter inside a batch costs only speed.

use std::path::Path;
use std::sync::Arc;

use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Db, DbStats, Error, FilterKind, LevelStats, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The counters a key's lookup decides, over an interval: every one of them must come
/// out the same whether the keys are asked one by one or in a batch.
#[derive(Debug, PartialEq)]
struct PerKey {
    gets: u64,
    memtable_hits: u64,
    table_probes: u64,
    filter_checks: u64,
    filter_negatives: u64,
    filter_positives: u64,
    filter_true_positives: u64,
    levels: Vec<LevelStats>,
}

fn per_key(after: &DbStats, before: &DbStats) -> PerKey {
    PerKey {
        gets: after.gets - before.gets,
        memtable_hits: after.memtable_hits - before.memtable_hits,
        table_probes: after.table_probes - before.table_probes,
        filter_checks: after.filter_checks - before.filter_checks,
        filter_negatives: after.filter_negatives - before.filter_negatives,
        filter_positives: after.filter_positives - before.filter_positives,
        filter_true_positives: after.filter_true_positives - before.filter_true_positives,
        levels: after
            .levels
            .iter()
            .zip(&before.levels)
            .map(|(a, b)| LevelStats {
                table_probes: a.table_probes - b.table_probes,
                filter_negatives: a.filter_negatives - b.filter_negatives,
                filter_positives: a.filter_positives - b.filter_positives,
                filter_true_positives: a.filter_true_positives - b.filter_true_positives,
            })
            .collect(),
    }
}

/// A store with tables on L0 and on deeper levels, overwrites and deletes across them,
/// and some keys still in the memtable.
fn layered_store(dir: &Path, filter: FilterKind) -> Db {
    let options = Options {
        filter,
        bits_per_key: 4.0, // false positives enough to exercise the reads after them
        disable_auto_compaction: true,
        memtable_size: 1 << 20,
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for round in 0..5u32 {
        for _ in 0..1_500 {
            let k = key(rng.gen_range(0..4_000));
            if rng.gen_range(0..6) == 0 {
                db.delete(&k).unwrap();
            } else {
                db.put(&k, format!("v{round}-{}", rng.gen::<u16>()))
                    .unwrap();
            }
        }
        db.flush().unwrap();
        if round == 1 {
            db.compact().unwrap();
        }
    }
    for i in 0..50 {
        db.put(key(i * 7), "in memory").unwrap();
    }
    let shape = db.stats().tables_per_level;
    assert!(shape[0] >= 3, "L0 tables: {shape:?}");
    assert!(
        shape[1..].iter().sum::<usize>() >= 1,
        "deeper tables: {shape:?}"
    );
    db
}

fn batch(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| key(rng.gen_range(0..8_000))).collect()
}

#[test]
fn a_batch_counts_every_per_key_decision_as_a_loop_of_gets() {
    for filter in [
        FilterKind::Ribbon,
        FilterKind::CacheLocalBloom,
        FilterKind::StandardBloom,
        FilterKind::None,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = layered_store(dir.path(), filter.clone());
        let mut rng = StdRng::seed_from_u64(5);
        let old = db.snapshot();
        // Newer versions over the snapshot's, so that its reads meet tables holding
        // only versions too new for it.
        for i in 0..400 {
            db.put(key(i * 3), "newer").unwrap();
        }
        db.flush().unwrap();
        for n in [1, 7, 32, 257, 3_000] {
            let keys = batch(&mut rng, n);
            let s0 = db.stats();
            let one_by_one: Vec<_> = keys.iter().map(|k| db.get(k).unwrap()).collect();
            let s1 = db.stats();
            let batched = db.multi_get(&keys).unwrap();
            let s2 = db.stats();
            assert_eq!(batched, one_by_one, "{filter:?} n={n}");
            assert_eq!(per_key(&s2, &s1), per_key(&s1, &s0), "{filter:?} n={n}: Db");
            assert_eq!(s2.multi_gets - s1.multi_gets, 1);
            assert_eq!(s2.multi_get_keys - s1.multi_get_keys, n as u64);

            let s0 = db.stats();
            let one_by_one: Vec<_> = keys.iter().map(|k| old.get(k).unwrap()).collect();
            let s1 = db.stats();
            let batched = old.multi_get(&keys).unwrap();
            let s2 = db.stats();
            assert_eq!(batched, one_by_one, "{filter:?} n={n}: snapshot");
            assert_eq!(
                per_key(&s2, &s1),
                per_key(&s1, &s0),
                "{filter:?} n={n}: snapshot"
            );
        }
        // A large batch shares blocks between its keys: fewer block lookups than keys
        // that reached a data block.
        let keys: Vec<Vec<u8>> = (0..4_000).map(key).collect();
        let s0 = db.stats();
        db.multi_get(&keys).unwrap();
        let s1 = db.stats();
        assert!(
            s1.multi_get_shared_blocks > s0.multi_get_shared_blocks
                && s1.multi_get_lookups_saved - s0.multi_get_lookups_saved
                    >= s1.multi_get_shared_blocks - s0.multi_get_shared_blocks,
            "{filter:?}: {s1:?}"
        );
    }
}

/// A snapshot's get that meets a table holding only newer versions of its key: the
/// filter's "maybe" was right (the table holds the key), so it is a true positive,
/// not a false one.
#[test]
fn a_table_holding_only_newer_versions_is_a_true_positive() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        disable_auto_compaction: true,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    db.put("k", "old").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot();
    db.put("k", "new").unwrap();
    db.flush().unwrap();
    for batched in [false, true] {
        let before = db.stats();
        let got = if batched {
            snap.multi_get(["k"]).unwrap().remove(0)
        } else {
            snap.get("k").unwrap()
        };
        let after = db.stats();
        assert_eq!(got.as_deref(), Some(&b"old"[..]));
        let d = per_key(&after, &before);
        assert_eq!(d.filter_positives, 2, "both tables said maybe");
        assert_eq!(d.filter_true_positives, 2, "and both hold the key");
        assert_eq!(d.levels[0].filter_true_positives, 2);
    }
}

fn mem_options(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        block_cache_size: 0, // every batch reads its blocks
        block_size: 512,
        disable_auto_compaction: true,
        ..Options::default()
    }
}

/// Three overlapping tables in an in-memory file system, reopened so that every table
/// is opened from its file.
fn fault_store(fs: &FaultFileSystem) -> (Db, Vec<Vec<u8>>, Vec<Option<bytes::Bytes>>) {
    let dir = Path::new("/db");
    let db = Db::open(dir, mem_options(fs)).unwrap();
    for t in 0..3u32 {
        for i in (t..3_000).step_by(3) {
            db.put(key(i), format!("value {i} of table {t}")).unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let db = Db::open(dir, mem_options(fs)).unwrap();
    let keys: Vec<Vec<u8>> = (0..200).map(|i| key(i * 29 % 6_000)).collect();
    let want: Vec<_> = keys.iter().map(|k| db.get(k).unwrap()).collect();
    assert!(want.iter().flatten().count() > 50);
    (db, keys, want)
}

#[test]
fn a_read_failing_inside_a_batch_fails_the_call_and_later_calls_succeed() {
    let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
    let (db, keys, want) = fault_store(&fs);
    let before = db.stats().data_block_reads;
    assert_eq!(db.multi_get(&keys).unwrap(), want);
    let reads = db.stats().data_block_reads - before;
    assert!(reads > 20, "{reads} reads");
    // Tables missing several blocks of the batch had their reads issued together.
    let overlapped = db.stats().multi_get_overlapped_reads;
    assert!(
        overlapped > 1 && overlapped <= reads,
        "{overlapped} of {reads}"
    );
    // Fail the first, a middle and the last read of the batch.
    for at in [1, reads / 2, reads] {
        fs.set_plan(FaultPlan::nth(at, &[OpKind::ReadAt], Fault::Error));
        let err = db.multi_get(&keys).unwrap_err();
        assert!(matches!(err, Error::Io(_)), "read {at}: {err:?}");
        assert!(fs.fired(), "read {at} was not reached");
        fs.set_plan(FaultPlan::none());
        assert_eq!(db.multi_get(&keys).unwrap(), want, "after read {at} failed");
        let snap = db.snapshot();
        assert_eq!(snap.multi_get(&keys).unwrap(), want);
    }
}

#[test]
fn a_corrupt_filter_inside_a_batch_fails_open_and_is_counted() {
    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let (db, keys, want) = fault_store(&fs);
    db.close().unwrap();
    // Damage one table's filter block: a byte in its middle (the footer's second
    // handle; docs/FORMAT.md).
    let table = mem
        .paths()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    let mut bytes = mem.file_bytes(&table).unwrap();
    let footer = bytes.len() - 64;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let (offset, len) = (u64_at(footer + 16), u64_at(footer + 24));
    assert!(len > 16, "filter block of {len} bytes");
    bytes[offset + len / 2] ^= 0x40;
    mem.set_file_bytes(&table, bytes);

    let db = Db::open(Path::new("/db"), mem_options(&fs)).unwrap();
    db.open_tables().unwrap();
    assert_eq!(
        db.stats().filter_corrupt,
        1,
        "counted when the table opened"
    );
    let before = db.stats();
    assert_eq!(db.multi_get(&keys).unwrap(), want, "no answer changed");
    let after = db.stats();
    // Two tables asked their filters, the damaged one was read without: fewer filter
    // checks than table probes.
    assert!(after.filter_checks - before.filter_checks < after.table_probes - before.table_probes);
    // And the batch still counts as the loop of gets.
    let one_by_one: Vec<_> = keys.iter().map(|k| db.get(k).unwrap()).collect();
    assert_eq!(one_by_one, want);
    assert_eq!(per_key(&db.stats(), &after), per_key(&after, &before));
    let _ = fs.list(Path::new("/db"));
}
