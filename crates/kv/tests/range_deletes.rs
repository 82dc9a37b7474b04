//! `delete_range`: one range tombstone hides every key of `[start, end)` from gets,
//! `multi_get`, scans both ways and snapshots taken after it, wherever the tombstone and
//! the keys live (memtable, L0, deeper levels), through flushes, compactions, a log
//! replay and a reopen; tables written before it still open beside the new ones; a
//! damaged tombstone block is reported, never read around; compaction at the bottom
//! drops the tombstones and what they hid.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv_kv::fs::{FileSystem, OsFileSystem};
use bloomkv_kv::sstable::Table;
use bloomkv_kv::{Counters, Db, Error, FilterKind, Options, WriteBatch};

fn key(i: u32) -> String {
    format!("key{i:05}")
}

fn options(filter: FilterKind) -> Options {
    Options {
        filter,
        // Ribbon filters on L0 too, whose tables a get then asks side by side.
        bloom_before_level: 0,
        disable_auto_compaction: true,
        ..Options::default()
    }
}

fn get(db: &Db, i: u32) -> Option<String> {
    db.get(key(i))
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

fn scan_keys(db: &Db, rev: bool) -> Vec<String> {
    let scan = db.scan::<&str, _>(..);
    let mut keys: Vec<String> = if rev {
        scan.rev()
            .map(|kv| String::from_utf8(kv.unwrap().0.to_vec()).unwrap())
            .collect()
    } else {
        scan.map(|kv| String::from_utf8(kv.unwrap().0.to_vec()).unwrap())
            .collect()
    };
    if rev {
        keys.reverse();
    }
    keys.retain(|k| k.starts_with("key"));
    keys
}

/// Every read path agrees that exactly the keys of `0..n` outside `hidden` are there.
fn check(db: &Db, n: u32, hidden: impl Fn(u32) -> bool, when: &str) {
    let want: Vec<String> = (0..n).filter(|&i| !hidden(i)).map(key).collect();
    for i in 0..n {
        assert_eq!(get(db, i).is_some(), !hidden(i), "{when}: get {}", key(i));
    }
    let keys: Vec<String> = (0..n).map(key).collect();
    let many = db.multi_get(&keys).unwrap();
    for (i, v) in many.iter().enumerate() {
        assert_eq!(
            v.is_some(),
            !hidden(i as u32),
            "{when}: multi_get {}",
            key(i as u32)
        );
    }
    assert_eq!(scan_keys(db, false), want, "{when}: scan");
    assert_eq!(scan_keys(db, true), want, "{when}: reverse scan");
}

/// The key a tombstone hides is really in an older table, whose filter says "maybe"
/// for it (the key is there: no filter can say "no"). The tombstone must win wherever
/// it lives: memtable, an L0 table above the key's L0 table (every filter kind, Ribbon
/// included, whose L0 tables are otherwise asked side by side), above the key at the
/// bottom, and in the key's own table once a snapshot makes compaction keep both.
#[test]
fn a_range_tombstone_hides_a_key_whose_table_filter_says_maybe_at_every_level() {
    for filter in [
        FilterKind::StandardBloom,
        FilterKind::CacheLocalBloom,
        FilterKind::Ribbon,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(filter.clone())).unwrap();
        let n = 200;
        for i in 0..n {
            db.put(key(i), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
        // Another L0 table above, so the key's table is not the newest. (Tables of a
        // few hundred keys: a Ribbon filter that small still has the layout whose
        // L0 filters a get asks side by side.)
        for i in 0..n {
            db.put(format!("other{i}"), "x").unwrap();
        }
        db.flush().unwrap();
        let hidden = |i: u32| (50..150).contains(&i);
        let before = db.snapshot();
        db.delete_range(key(50), key(150)).unwrap();
        for i in 0..n {
            db.put(format!("zz{i}"), "x").unwrap();
        }
        check(
            &db,
            n,
            hidden,
            &format!("{filter:?}, tombstone in the memtable"),
        );

        // The tombstone's table holds no entry for these keys: its filter says "no"
        // for them, and that must not end the search as "absent below".
        db.flush().unwrap();
        let stats = db.stats();
        assert_eq!(stats.tables_per_level[0], 3);
        let answers = stats.range_del_answers;
        check(&db, n, hidden, &format!("{filter:?}, tombstone in L0"));
        let stats = db.stats();
        // A get and a multi_get per hidden key: each answered by the tombstone, with
        // no table below it asked.
        assert_eq!(stats.range_del_answers - answers, 2 * 100, "{filter:?}");
        // The key is really in the older table, and its filter says "maybe".
        let held = stats.filter_true_positives;
        assert_eq!(
            before.get(key(70)).unwrap().as_deref(),
            Some(&b"v70"[..]),
            "{filter:?}"
        );
        assert_eq!(db.stats().filter_true_positives, held + 1, "{filter:?}");

        // Compacted with the snapshot held: the key's version and the tombstone go
        // to the bottom together, in one table.
        db.compact().unwrap();
        check(&db, n, hidden, &format!("{filter:?}, both at the bottom"));
        assert_eq!(before.get(key(70)).unwrap().as_deref(), Some(&b"v70"[..]));
        assert!(
            db.stats().range_tombstones >= 1,
            "{filter:?}: kept for the snapshot"
        );

        // A fresh tombstone above keys at the bottom.
        db.delete_range(key(0), key(10)).unwrap();
        db.flush().unwrap();
        let hidden2 = |i: u32| hidden(i) || i < 10;
        check(
            &db,
            n,
            hidden2,
            &format!("{filter:?}, tombstone above the bottom"),
        );

        // Released: the bottom compaction drops the tombstones and what they hid.
        drop(before);
        db.compact().unwrap();
        check(&db, n, hidden2, &format!("{filter:?}, compacted"));
        let stats = db.stats();
        assert_eq!(
            stats.range_tombstones, 0,
            "{filter:?}: dropped at the bottom"
        );
        let entries: u64 = bloomkv_kv::inspect(dir.path())
            .unwrap()
            .tables
            .iter()
            .map(|t| t.entries)
            .sum();
        assert_eq!(
            entries,
            3 * u64::from(n) - 110,
            "{filter:?}: the hidden keys are gone"
        );
        drop(db);
        let db = Db::open(dir.path(), options(filter.clone())).unwrap();
        check(&db, n, hidden2, &format!("{filter:?}, reopened"));
    }
}

/// A range delete in a batch between puts, replayed from the log after a reopen that
/// did not flush: the batch's order holds (a put before it in the batch is deleted, a
/// put after it is not).
#[test]
fn a_batch_with_a_range_delete_replays_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        // Recovered writes stay in the memtable, backed by their log.
        memtable_size: 1 << 20,
        ..options(FilterKind::StandardBloom)
    };
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        for i in 0..20 {
            db.put(key(i), "old").unwrap();
        }
        let mut batch = WriteBatch::new();
        batch.put(key(5), "before");
        batch.delete_range(key(3), key(8));
        batch.put(key(6), "after");
        batch.delete(key(15));
        db.write(batch).unwrap();
        // Dropped without a flush: the writes live only in the log.
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    let hidden = |i: u32| (3..8).contains(&i) && i != 6 || i == 15;
    let want: Vec<String> = (0..20).filter(|&i| !hidden(i)).map(key).collect();
    assert_eq!(scan_keys(&db, false), want);
    assert_eq!(get(&db, 6).as_deref(), Some("after"));
    assert_eq!(get(&db, 5), None);
    assert!(db.stats().range_tombstones >= 1);
    db.flush().unwrap();
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(scan_keys(&db, true), want);
}

#[test]
fn bad_ranges_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(FilterKind::StandardBloom)).unwrap();
    db.put("b", "1").unwrap();
    for (start, end) in [("b", "b"), ("c", "a")] {
        assert!(matches!(
            db.delete_range(start, end),
            Err(Error::InvalidArgument(_))
        ));
    }
    let long = vec![b'z'; bloomkv_kv::MAX_KEY_LEN + 1];
    assert!(matches!(
        db.delete_range("a", &long),
        Err(Error::InvalidArgument(_))
    ));
    // A refused batch changes nothing, and the store goes on.
    let mut batch = WriteBatch::new();
    batch.delete("b");
    batch.delete_range("x", "a");
    assert!(db.write(batch).is_err());
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"1"[..]));
    db.delete_range("a", "c").unwrap();
    assert_eq!(db.get("b").unwrap(), None);
}

fn tables(dir: &Path) -> Vec<PathBuf> {
    let mut t: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    t.sort();
    t
}

fn open_table(path: &Path) -> Table {
    let fs = OsFileSystem;
    Table::open(
        fs.open_random(path).unwrap(),
        path.to_path_buf(),
        Arc::new(Counters::default()),
        &[],
    )
    .unwrap()
}

/// A damaged range tombstone block makes its table fail to open with `Corruption`
/// naming the file: the keys it deletes never silently come back. `verify` finds it.
#[test]
fn a_damaged_tombstone_block_is_corruption_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options(FilterKind::StandardBloom)).unwrap();
        for i in 0..100 {
            db.put(key(i), "v").unwrap();
        }
        db.flush().unwrap();
        db.delete_range(key(10), key(20)).unwrap();
        db.flush().unwrap();
        assert_eq!(get(&db, 15), None);
    }
    let newest = tables(dir.path()).pop().unwrap();
    let table = open_table(&newest);
    assert_eq!(table.properties().format_version, 7);
    let handle = table.properties().range_dels.expect("a tombstone block");
    assert_eq!(table.range_dels().map(|r| r.count()), Some(1));
    drop(table);
    let mut bytes = std::fs::read(&newest).unwrap();
    bytes[handle.offset as usize + 2] ^= 0x40;
    std::fs::write(&newest, &bytes).unwrap();

    let db = Db::open(dir.path(), options(FilterKind::StandardBloom)).unwrap();
    match db.get(key(15)) {
        Err(Error::Corruption { file, reason }) => {
            assert_eq!(file, newest);
            assert!(reason.contains("range tombstone block"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(db.scan::<&str, _>(..).any(|kv| kv.is_err()));
    drop(db);
    let report = bloomkv_kv::verify(dir.path()).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.file == newest && p.what.contains("range tombstone block")),
        "{:?}",
        report.problems
    );
}

/// Tables written before version 7 (the format version 1 fixture store) open and read
/// beside version 7 tables holding tombstones over their keys; the tombstones hide
/// them, through a reopen and a compaction.
#[test]
fn old_tables_open_beside_tables_with_range_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store_v1");
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let opts = || options(FilterKind::StandardBloom);
    let db = Db::open(dir.path(), opts()).unwrap();
    let all: Vec<(bytes::Bytes, bytes::Bytes)> =
        db.scan::<&str, _>(..).collect::<Result<_, _>>().unwrap();
    assert!(all.len() >= 4, "{}", all.len());
    let (start, end) = (all[1].0.clone(), all[all.len() - 2].0.clone());
    db.delete_range(&start, &end).unwrap();
    db.flush().unwrap();
    let versions: Vec<u32> = bloomkv_kv::inspect(dir.path())
        .unwrap()
        .tables
        .iter()
        .map(|t| t.format_version)
        .collect();
    assert!(
        versions.contains(&7) && versions.iter().any(|&v| v < 7),
        "{versions:?}"
    );
    let want: Vec<(bytes::Bytes, bytes::Bytes)> = all
        .iter()
        .filter(|(k, _)| !(start <= *k && *k < end))
        .cloned()
        .collect();
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    let got: Vec<(bytes::Bytes, bytes::Bytes)> =
        db.scan::<&str, _>(..).collect::<Result<_, _>>().unwrap();
    assert_eq!(got, want);
    for (k, v) in &all {
        let hidden = start <= *k && *k < end;
        assert_eq!(db.get(k).unwrap().as_ref(), (!hidden).then_some(v));
    }
    db.compact().unwrap();
    let got: Vec<(bytes::Bytes, bytes::Bytes)> =
        db.scan::<&str, _>(..).collect::<Result<_, _>>().unwrap();
    assert_eq!(got, want);
    assert_eq!(db.stats().range_tombstones, 0);
}

/// A compaction whose output splits into several tables carries a snapshot-protected
/// tombstone into each of them, clipped to its range: the outputs' ranges stay
/// disjoint, every hidden key stays hidden, and the snapshot still sees them all.
#[test]
fn a_split_compaction_clips_the_tombstone_to_each_output() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        target_file_size: 8 * 1024,
        ..options(FilterKind::StandardBloom)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let n = 2000;
    for i in 0..n {
        db.put(key(i), format!("value-{i:05}-{}", "x".repeat(20)))
            .unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    db.delete_range(key(100), key(1900)).unwrap();
    db.delete_range(key(1000), key(1950)).unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    let info = bloomkv_kv::inspect(dir.path()).unwrap();
    let bottom: Vec<_> = info.tables.iter().filter(|t| t.level > 0).collect();
    assert!(bottom.len() >= 4, "{} outputs", bottom.len());
    let carrying = bottom.iter().filter(|t| t.range_tombstones > 0).count();
    assert!(carrying >= 3, "{carrying} outputs carry tombstones");
    for w in bottom.windows(2) {
        assert!(w[0].largest < w[1].smallest, "outputs overlap");
    }
    check(
        &db,
        n,
        |i| (100..1950).contains(&i),
        "after the split compaction",
    );
    for i in (0..n).step_by(37) {
        assert!(snap.get(key(i)).unwrap().is_some(), "snapshot {}", key(i));
    }
    assert_eq!(snap.scan::<&str, _>(..).count(), n as usize);
}
