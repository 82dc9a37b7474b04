//! An open that does not read the tables (issue 39, item 2).
//!
//! `Db::open` builds its version from the manifest alone and opens each table the
//! first time a lookup, scan or compaction reaches it. Checked here:
//!
//! * an open of a store of thousands of tables opens no table file (the fault file
//!   system records the paths opened for random access) and performs a handful of
//!   file operations, however many tables there are;
//! * every read path then answers as a `BTreeMap` model does, through tables opened
//!   on the way: get, multi_get, scans both ways, snapshots, and a compaction;
//! * a table damaged or swapped since the manifest named it fails the first read that
//!   reaches it with `Corruption` naming the file, not the open; a missing one (seen
//!   in the directory's listing, which open reads anyway) fails the open;
//! * a store whose manifest is version 1 (no data sizes) still opens and reads, and
//!   the next manifest written records them;
//! * `verify` and `inspect`, which read every table on purpose, still do.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bloomkv_kv::fs::fault::{FaultFileSystem, OpKind};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::manifest::{ManifestState, TableMeta};
use bloomkv_kv::{Db, Error, FilterKind, Options};
use common::{collect, in_range, random_bound};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/db";

/// Tiny tables, so that a few thousand keys make thousands of them; no automatic
/// compaction, so the shape is the one built; few open files, so the table cache
/// closes and reopens files while the model runs.
fn options(fs: Arc<dyn FileSystem>, filter: FilterKind) -> Options {
    Options {
        filter,
        memtable_size: 64 * 1024,
        block_size: 128,
        target_file_size: 256,
        disable_auto_compaction: true,
        l0_compaction_trigger: 8,
        max_open_files: 32,
        file_system: fs,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("v{round}-{i}-{}", "x".repeat((i % 13) as usize)).into_bytes()
}

const KEYS: u32 = 12_000;

/// A store of thousands of tables on `mem`: every key written and compacted to the
/// bottom, then three L0 tables overwriting and deleting some (L0 newest first). Its
/// model, and the number of tables.
fn build(mem: &MemFileSystem, filter: FilterKind) -> (BTreeMap<Vec<u8>, Vec<u8>>, usize) {
    let db = Db::open(DIR, options(Arc::new(mem.clone()), filter)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    db.flush().unwrap();
    db.compact().unwrap();
    for round in 1..=3 {
        for i in (round..KEYS).step_by(97) {
            if i % 5 == 0 {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(key(i), value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
        db.flush().unwrap();
    }
    let tables: usize = db.stats().tables_per_level.iter().sum();
    assert_eq!(db.stats().tables_per_level[0], 3, "three L0 tables");
    db.close().unwrap();
    (model, tables)
}

/// Opens the store on `mem`, recording every file operation of the open; also how
/// many table files it opened (other files, such as SETTINGS, are opened for random
/// access too, and a table file not opened was not read).
fn open_counted(mem: &MemFileSystem, filter: FilterKind) -> (Db, Vec<OpKind>, usize) {
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    fs.record();
    let db = Db::open(DIR, options(Arc::new(fs.clone()), filter)).unwrap();
    let tables = fs
        .take_opened()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .count();
    (db, fs.take_log(), tables)
}

fn count(log: &[OpKind], kind: OpKind) -> usize {
    log.iter().filter(|k| **k == kind).count()
}

/// Every read path against the model, with fixed seeds.
fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Every key, present or not, by get.
    for i in 0..KEYS + 50 {
        let got = db.get(key(i)).unwrap().map(|v| v.to_vec());
        assert_eq!(got.as_ref(), model.get(&key(i)), "get {i}");
    }
    // Batches of random keys by multi_get.
    for _ in 0..40 {
        let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..200))
            .map(|_| key(rng.gen_range(0..KEYS + 50)))
            .collect();
        let got = db.multi_get(&keys).unwrap();
        for (k, v) in keys.iter().zip(got) {
            assert_eq!(v.map(|v| v.to_vec()).as_ref(), model.get(k), "multi_get");
        }
    }
    // Random ranges, forward and backward.
    let rkey = |rng: &mut StdRng| key(rng.gen_range(0..KEYS + 50));
    for _ in 0..30 {
        let lo = random_bound(&mut rng, rkey);
        let hi = random_bound(&mut rng, rkey);
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|(k, _)| in_range(k, &lo, &hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let range = (lo.clone(), hi.clone());
        if matches!((&lo, &hi), (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) if a > b)
        {
            continue; // an inverted range: not a scan the API accepts
        }
        assert_eq!(collect(db.scan::<Vec<u8>, _>(range.clone())), want);
        let mut back = collect(db.scan::<Vec<u8>, _>(range).rev());
        back.reverse();
        assert_eq!(back, want);
    }
}

#[test]
fn open_reads_no_table_and_every_read_path_opens_tables_on_first_use() {
    let mem = MemFileSystem::new();
    let (mut model, tables) = build(&mem, FilterKind::Ribbon);
    assert!(tables >= 1_500, "{tables} tables");

    let (db, log, opened) = open_counted(&mem, FilterKind::Ribbon);
    eprintln!(
        "open of {tables} tables: {} file operations ({} open_random, {} read_exact_at, \
         {} read_all), {opened} table files opened",
        log.len(),
        count(&log, OpKind::OpenRandom),
        count(&log, OpKind::ReadAt),
        count(&log, OpKind::ReadAll),
    );
    assert_eq!(opened, 0, "a table file was opened");
    // What is left is a handful of small files, not a count that grows with tables.
    assert!(log.len() < 40, "{} file operations", log.len());
    let stats = db.stats();
    assert_eq!(stats.data_block_reads, 0);
    assert_eq!(stats.open_table_files, 0);
    assert_eq!(stats.filter_memory_bytes, 0, "no filter in memory yet");
    assert_eq!((stats.metadata_bytes, stats.opened_tables), (0, 0));
    assert_eq!(stats.tables_per_level.iter().sum::<usize>(), tables);

    // One get reads only the tables on its path: L0's three (the first get opens
    // them all for their side-by-side Ribbon probes) and at most one per deeper level.
    let before = db.stats().data_block_reads;
    assert_eq!(
        db.get(key(5_001)).unwrap().map(|v| v.to_vec()).as_ref(),
        model.get(&key(5_001))
    );
    let levels = db
        .stats()
        .tables_per_level
        .iter()
        .filter(|&&n| n > 0)
        .count() as u64;
    let reads = db.stats().data_block_reads - before;
    assert!(
        reads <= 3 * 3 + (levels - 1) * 3,
        "{reads} reads for one get"
    );
    let opened = db.stats().opened_tables;
    assert!(
        (3..=2 + levels).contains(&opened),
        "{opened} tables opened by one get"
    );
    assert!(db.stats().metadata_bytes > 0);

    // A snapshot taken now keeps its view while later writes change the store.
    let snap = db.snapshot();
    let frozen = model.clone();
    for i in (0..KEYS).step_by(31) {
        db.put(key(i), value(i, 9)).unwrap();
        model.insert(key(i), value(i, 9));
    }
    check_all(&db, &model, 1);
    for i in (0..KEYS).step_by(7) {
        let got = snap.get(key(i)).unwrap().map(|v| v.to_vec());
        assert_eq!(got.as_ref(), frozen.get(&key(i)), "snapshot get {i}");
    }
    let lo = key(3_000);
    let want: Vec<_> = frozen
        .range(lo.clone()..key(3_500))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(collect(snap.scan(lo.clone()..key(3_500))), want);
    let mut back = collect(snap.scan(lo..key(3_500)).rev());
    back.reverse();
    assert_eq!(back, want);

    // A compaction reads its inputs through the same lazy handles.
    db.flush().unwrap();
    db.compact().unwrap();
    check_all(&db, &model, 2);
    drop(snap);
    let live: usize = db.stats().tables_per_level.iter().sum();
    db.close().unwrap();
    let on_disk = mem
        .paths()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .count();
    assert_eq!(on_disk, live, "retired tables are deleted, opened or not");

    // Reopened after the compaction: again nothing read, everything right.
    let (db, _, opened) = open_counted(&mem, FilterKind::Ribbon);
    assert_eq!(opened, 0);
    check_all(&db, &model, 3);
}

/// With the default cache-local Bloom filter (no side-by-side Ribbon probes in L0:
/// each L0 table is opened by the first get its range covers) the same holds.
#[test]
fn lazy_tables_with_bloom_filters_answer_as_the_model() {
    let mem = MemFileSystem::new();
    let (model, _) = build(&mem, FilterKind::default());
    let (db, _, opened) = open_counted(&mem, FilterKind::default());
    assert_eq!(opened, 0);
    check_all(&db, &model, 4);
}

/// The L0 table numbers and one deeper table's path.
fn some_tables(db: &Db) -> (Vec<std::path::PathBuf>, std::path::PathBuf) {
    let infos = db.table_infos();
    let l0 = infos
        .iter()
        .filter(|t| t.level == 0)
        .map(|t| t.path.clone())
        .collect();
    let deep = infos.iter().find(|t| t.level > 0).unwrap().path.clone();
    (l0, deep)
}

#[test]
fn a_table_damaged_since_the_manifest_fails_the_read_that_reaches_it() {
    let mem = MemFileSystem::new();
    let (model, _) = build(&mem, FilterKind::default());
    let db = Db::open(DIR, options(Arc::new(mem.clone()), FilterKind::default())).unwrap();
    let (_, deep) = some_tables(&db);
    let (first, last) = {
        let infos = db.table_infos();
        let t = infos.iter().find(|t| t.path == deep).unwrap();
        (t.smallest.to_vec(), t.largest.to_vec())
    };
    db.close().unwrap();

    // A missing table is seen in the directory's listing: the open fails, naming it.
    let fs = mem.deep_copy();
    fs.remove(&deep).unwrap();
    match Db::open(DIR, options(Arc::new(fs), FilterKind::default())) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, deep),
        other => panic!("open without a live table gave {:?}", other.map(|_| ())),
    }

    for damage in ["footer", "swapped"] {
        let fs = mem.deep_copy();
        let mut bytes = fs.file_bytes(&deep).unwrap();
        match damage {
            "footer" => {
                let n = bytes.len();
                bytes[n - 3] ^= 0x40;
                fs.set_file_bytes(&deep, bytes);
            }
            _ => {
                // Another table's bytes under this one's name: sound, but not the
                // table the manifest records.
                let other = mem
                    .paths()
                    .into_iter()
                    .find(|p| p.extension().is_some_and(|e| e == "sst") && *p != deep)
                    .unwrap();
                fs.set_file_bytes(&deep, mem.file_bytes(&other).unwrap());
            }
        }
        let db = Db::open(DIR, options(Arc::new(fs.clone()), FilterKind::default()))
            .unwrap_or_else(|e| panic!("{damage}: open read a table: {e}"));
        // Keys elsewhere are answered.
        let elsewhere = if first.as_slice() > key(0).as_slice() {
            key(0)
        } else {
            key(KEYS - 1)
        };
        assert!(elsewhere.as_slice() < first.as_slice() || elsewhere.as_slice() > last.as_slice());
        assert_eq!(
            db.get(&elsewhere).unwrap().map(|v| v.to_vec()).as_ref(),
            model.get(&elsewhere),
            "{damage}"
        );
        // A key in the damaged table's range fails, naming the file, and so does a
        // scan through it; it fails again on the next try (nothing is cached).
        for _ in 0..2 {
            match db.get(&first) {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, deep, "{damage}"),
                other => panic!("{damage}: get in a damaged table gave {other:?}"),
            }
        }
        let scanned: Vec<_> = db.scan(first.clone()..=last.clone()).collect();
        assert!(
            matches!(scanned.first(), Some(Err(Error::Corruption { file, .. })) if *file == deep),
            "{damage}: {scanned:?}"
        );
        assert_eq!(scanned.len(), 1, "{damage}: the error ends the scan");
    }
}

/// A version-1 manifest (written before data sizes were recorded): open opens its
/// tables to learn them, as every open did before, reads right, and the next
/// manifest it writes is version 2, after which open reads no table.
#[test]
fn a_store_with_a_version_1_manifest_opens_and_upgrades() {
    let mem = MemFileSystem::new();
    let (mut model, tables) = build(&mem, FilterKind::default());
    let manifest = Path::new(DIR).join("MANIFEST");
    let state = ManifestState::decode(&mem.file_bytes(&manifest).unwrap(), &manifest).unwrap();
    let old: Vec<TableMeta> = state
        .tables()
        .iter()
        .map(|t| TableMeta {
            data_size: None,
            ..t.clone()
        })
        .collect();
    let old = ManifestState::new(
        state.next_file_number(),
        state.last_sequence(),
        state.wal_number(),
        old,
    );
    let bytes = old.encode();
    assert_eq!(bytes[8..12], 1u32.to_le_bytes(), "a version-1 manifest");
    mem.set_file_bytes(&manifest, bytes);

    let (db, log, opened) = open_counted(&mem, FilterKind::default());
    eprintln!(
        "open of {tables} tables, each opened at open (as every open did before): {} file \
         operations ({} open_random, {} read_exact_at, {} read_all)",
        log.len(),
        count(&log, OpKind::OpenRandom),
        count(&log, OpKind::ReadAt),
        count(&log, OpKind::ReadAll),
    );
    assert_eq!(opened, tables, "each table opened once");
    check_all(&db, &model, 5);
    db.put(key(1), "new").unwrap();
    model.insert(key(1), b"new".to_vec());
    db.flush().unwrap();
    db.close().unwrap();
    assert_eq!(
        mem.file_bytes(&manifest).unwrap()[8..12],
        2u32.to_le_bytes()
    );

    let (db, _, opened) = open_counted(&mem, FilterKind::default());
    assert_eq!(opened, 0);
    check_all(&db, &model, 6);
}

/// `verify` and `inspect` read every live table on purpose (they check each block
/// and describe each filter); a store opened lazily is the same store to them.
#[test]
fn verify_and_inspect_read_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        file_system: Arc::new(bloomkv_kv::fs::OsFileSystem),
        ..options(
            Arc::new(bloomkv_kv::fs::OsFileSystem),
            FilterKind::default(),
        )
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..2_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    let tables: usize = db.stats().tables_per_level.iter().sum();
    db.close().unwrap();
    assert!(tables > 100, "{tables}");

    let report = bloomkv_kv::verify(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    let info = bloomkv_kv::inspect(dir.path()).unwrap();
    assert_eq!(info.tables.len(), tables);

    // A table whose manifest record no longer matches it (here: cut short, which
    // also breaks its blocks) is damage to verify, as it is to the first read.
    let victim = &info.tables[tables / 2].path;
    let bytes = std::fs::read(victim).unwrap();
    std::fs::write(victim, &bytes[..bytes.len() - 1]).unwrap();
    let report = bloomkv_kv::verify(dir.path()).unwrap();
    assert!(
        report.problems.iter().any(|p| p.file == *victim),
        "{report}"
    );
    // The store still opens (nothing is read) and answers outside that table (key 0
    // is in the first table, the victim in the middle).
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(
        db.get(key(0)).unwrap().map(|v| v.to_vec()),
        Some(value(0, 0))
    );
}
