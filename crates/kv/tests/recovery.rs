//! Recovery from the WAL: what a crash mid-append leaves behind is dropped, nothing else;
//! a log is appended to again only when the last session closed it cleanly.

use std::path::{Path, PathBuf};

use bloomkv_kv::{Db, Error, Options};

fn wal_files(dir: &Path) -> Vec<PathBuf> {
    let mut wals: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    wals.sort();
    wals
}

/// Writes keys 0..n, one batch each, and closes without flushing: all of it is in the WAL.
fn write_keys(dir: &Path, n: usize) {
    let db = Db::open(
        dir,
        Options {
            sync_writes: true,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..n {
        db.put(format!("key{i:03}"), format!("value{i}")).unwrap();
    }
    db.close().unwrap();
}

fn present(db: &Db, n: usize) -> usize {
    (0..n)
        .filter(|i| db.get(format!("key{i:03}")).unwrap().is_some())
        .count()
}

#[test]
fn torn_wal_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 50);
    let wal = wal_files(dir.path()).pop().unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    // Cut the last record short, as a crash in the middle of its append would.
    let file = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    file.set_len(len - 3).unwrap();
    drop(file);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 50), 49, "only the torn last write is lost");
    assert_eq!(db.get("key048").unwrap().as_deref(), Some(&b"value48"[..]));
    assert_eq!(db.get("key049").unwrap(), None);
    // The recovered writes are now in a table; writes continue in a fresh WAL.
    db.put("after", "crash").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 50), 49);
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"crash"[..]));
}

#[test]
fn zero_filled_wal_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 20);
    let wal = wal_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]); // the file grew, its data never arrived
    std::fs::write(&wal, bytes).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 20), 20);
}

#[test]
fn corruption_in_the_middle_of_the_wal_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 20);
    let wal = wal_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[30] ^= 0x01; // inside an early record, with good records after it
    std::fs::write(&wal, bytes).unwrap();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, wal),
        other => panic!("expected Corruption naming the WAL, got {other:?}"),
    }
}

fn count_files(dir: &Path, ext: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|e| e == ext)
        })
        .count()
}

#[test]
fn a_hundred_short_lived_opens_share_one_log_and_leave_no_tables() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..100 {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        // From the second open on, the previous runs' log is kept, not flushed.
        assert_eq!(db.recovery_report().kept_in_memtable, i > 0, "open {i}");
        db.put(format!("key{i:03}"), format!("value{i}")).unwrap();
        db.close().unwrap();
    }
    assert_eq!(count_files(dir.path(), "wal"), 1, "one log for every run");
    assert!(
        count_files(dir.path(), "sst") <= 2,
        "at most a handful of tables"
    );
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 100), 100);
    assert_eq!(db.stats().num_tables(), count_files(dir.path(), "sst"));
    // A flush retires the log the runs shared; everything is still there after it.
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 100), 100);
    assert_eq!(db.stats().num_tables(), 1);
}

/// Writes `log` by hand: one record per `(seq, key, value)`, as a store that froze its
/// memtable and stopped before flushing it would leave the newer log.
fn write_log(path: &Path, records: &[(u64, &str, &str)]) {
    let fs = bloomkv_kv::fs::OsFileSystem;
    let mut w =
        bloomkv_kv::wal::WalWriter::new(bloomkv_kv::fs::FileSystem::create(&fs, path).unwrap());
    for (seq, k, v) in records {
        let mut b = bloomkv_kv::WriteBatch::new();
        b.put(k, v);
        w.add_record(&b.encode(*seq).unwrap()).unwrap();
    }
    w.sync().unwrap();
}

fn wal_number(path: &Path) -> u64 {
    path.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

/// Leaves the mark a clean close would leave for `log` as it is now (`CLOSED`, drawn in
/// docs/FORMAT.md): the newest log's number and length, and their CRC-32.
fn mark_closed(dir: &Path, log: &Path) {
    let mut mark = wal_number(log).to_le_bytes().to_vec();
    mark.extend_from_slice(&std::fs::metadata(log).unwrap().len().to_le_bytes());
    let crc = crc32fast::hash(&mark);
    mark.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.join("CLOSED"), mark).unwrap();
}

#[test]
fn several_logs_backing_one_kept_memtable_are_retired_together() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 3); // seq 1..3 in one log
    let first = wal_files(dir.path()).pop().unwrap();
    let second = dir
        .path()
        .join(format!("{:06}.wal", wal_number(&first) + 1));
    write_log(&second, &[(4, "key001", "newer"), (5, "extra", "x")]);
    // The store that wrote the newer log closed cleanly.
    mark_closed(dir.path(), &second);

    let db = Db::open(dir.path(), Options::default()).unwrap();
    let report = db.recovery_report().clone();
    assert!(report.kept_in_memtable, "{report}");
    assert!(!dir.path().join("CLOSED").exists(), "open removes the mark");
    assert_eq!(report.wals.len(), 2);
    assert_eq!(report.records_replayed(), 5);
    db.put("after", "open").unwrap(); // appended to the newer log
    db.close().unwrap();
    assert_eq!(wal_files(dir.path()), vec![first.clone(), second.clone()]);

    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("key001").unwrap().as_deref(), Some(&b"newer"[..]));
    assert_eq!(db.get("key002").unwrap().as_deref(), Some(&b"value2"[..]));
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"open"[..]));
    // The flush writes both logs' data to a table; only then are both retired.
    db.flush().unwrap();
    let left = wal_files(dir.path());
    assert!(
        !left.contains(&first) && !left.contains(&second),
        "{left:?}"
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 3), 3);
    assert_eq!(db.get("key001").unwrap().as_deref(), Some(&b"newer"[..]));
    assert_eq!(db.get("extra").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"open"[..]));
}

#[test]
fn a_large_or_damaged_recovered_log_is_flushed_and_a_fresh_log_started() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 50);
    let small = Options {
        memtable_size: 64, // smaller than what the log holds
        ..Options::default()
    };
    let db = Db::open(dir.path(), small).unwrap();
    assert!(!db.recovery_report().kept_in_memtable);
    assert_eq!(db.stats().num_tables(), 1);
    db.close().unwrap();

    write_keys(dir.path(), 5);
    let wal = wal_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[7u8; 100]); // garbage after the last record
    std::fs::write(&wal, bytes).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let report = db.recovery_report().clone();
    assert!(!report.kept_in_memtable, "{report}");
    assert_eq!(report.bytes_dropped(), 100);
    assert_eq!(db.stats().wal_tail_bytes_dropped, 100);
    assert!(
        !wal_files(dir.path()).contains(&wal),
        "the damaged log is retired"
    );
    db.put("after", "damage").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(db.recovery_report().is_clean());
    assert_eq!(present(&db, 50), 50);
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"damage"[..]));
}

/// A store stopped without a clean close (here: its mark never written, as after a
/// crash or a failed close) may have read back, from the page cache, log bytes a
/// failed sync left off the device: its logs are written to a table and a fresh log
/// started, never appended to. A mark that is torn, forged or names another length
/// counts as none.
#[test]
fn a_log_is_appended_to_again_only_after_a_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 3);
    let log = wal_files(dir.path()).pop().unwrap();
    let good = std::fs::read(dir.path().join("CLOSED")).unwrap();
    assert_eq!(good.len(), 20);
    let len = std::fs::metadata(&log).unwrap().len();
    assert_eq!(&good[0..8], &wal_number(&log).to_le_bytes());
    assert_eq!(&good[8..16], &len.to_le_bytes());

    let mut bad_crc = good.clone();
    bad_crc[19] ^= 1;
    let mut other_len = good[0..8].to_vec();
    other_len.extend_from_slice(&(len - 1).to_le_bytes());
    let crc = crc32fast::hash(&other_len);
    other_len.extend_from_slice(&crc.to_le_bytes());
    let cases: [(&str, Option<Vec<u8>>); 4] = [
        ("no mark", None),
        ("a torn mark", Some(good[..12].to_vec())),
        ("a bad checksum", Some(bad_crc)),
        ("another length", Some(other_len)),
    ];
    for (what, mark) in cases {
        // The same log, as the clean close left it, each time.
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("MANIFEST"), copy.path().join("MANIFEST")).unwrap();
        std::fs::copy(&log, copy.path().join(log.file_name().unwrap())).unwrap();
        if let Some(bytes) = mark {
            std::fs::write(copy.path().join("CLOSED"), bytes).unwrap();
        }
        let db = Db::open(copy.path(), Options::default()).unwrap();
        let report = db.recovery_report().clone();
        assert!(!report.kept_in_memtable, "{what}: {report}");
        assert_eq!(db.stats().num_tables(), 1, "{what}: the log became a table");
        assert!(
            !wal_files(copy.path()).contains(&copy.path().join(log.file_name().unwrap())),
            "{what}: the old log is retired"
        );
        assert_eq!(present(&db, 3), 3, "{what}");
    }
    // With the clean close's own mark the log is kept.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(db.recovery_report().kept_in_memtable);
}

/// A sync of the log fails: the store stops taking writes, and its close fails and
/// leaves no mark. The next open must not append to that log — the kernel may have
/// dropped the failed bytes' pages while still serving them to replay — but write
/// what replay read to a table and start a fresh log, after which writes are durable
/// as usual.
#[test]
fn a_log_whose_sync_failed_is_never_appended_to_again() {
    use std::sync::Arc;

    use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
    use bloomkv_kv::fs::mem::MemFileSystem;
    use bloomkv_kv::fs::FileSystem;

    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let options = Options {
        file_system: Arc::new(fs.clone()),
        sync_writes: true,
        ..Options::default()
    };
    let db = Db::open("/db", options.clone()).unwrap();
    db.put("k1", "v1").unwrap();
    fs.set_plan(FaultPlan::nth(1, &[OpKind::Sync], Fault::Error));
    assert!(db.put("k2", "v2").is_err());
    assert!(
        db.put("k3", "v3").is_err(),
        "writes stop after a failed sync"
    );
    assert!(db.close().is_err(), "the close cannot sync the log either");
    fs.set_plan(FaultPlan::none());
    let failed_log = mem
        .list(Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".wal"))
        .unwrap();
    assert!(
        !mem.exists(Path::new("/db/CLOSED")),
        "no mark after the failure"
    );

    let db = Db::open("/db", options).unwrap();
    let report = db.recovery_report().clone();
    assert!(!report.kept_in_memtable, "{report}");
    let names = mem.list(Path::new("/db")).unwrap();
    assert!(
        !names.contains(&failed_log),
        "the failed log is retired: {names:?}"
    );
    assert_eq!(db.get("k1").unwrap().as_deref(), Some(&b"v1"[..]));
    db.put("k4", "v4").unwrap();
    db.close().unwrap();
}
