//! `repair`: a store whose manifest is gone or damaged, whose table fails its
//! checksums, or whose log is damaged mid-way is rebuilt from every table and record
//! that verifies. After it, every key whose data verified reads its newest value, no key
//! reads a value that was never written for it, a failing table is moved aside (not
//! deleted), and a second repair changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bloomkv_kv::{repair, Db, Error, Options};

/// Every value each key ever had (`None`: deleted), oldest first, and where the newest
/// one lives.
#[derive(Default)]
struct History(BTreeMap<String, Vec<Option<String>>>);

impl History {
    fn set(&mut self, k: &str, v: Option<&str>) {
        self.0
            .entry(k.to_string())
            .or_default()
            .push(v.map(str::to_string));
    }

    fn newest(&self, k: &str) -> Option<String> {
        self.0.get(k).and_then(|h| h.last().cloned().flatten())
    }

    fn ever(&self, k: &str, v: &Option<String>) -> bool {
        v.is_none() || self.0.get(k).is_some_and(|h| h.contains(v))
    }
}

fn options() -> Options {
    Options {
        sync_writes: true,
        disable_auto_compaction: true,
        ..Options::default()
    }
}

fn put(db: &Db, h: &mut History, k: &str, v: &str) {
    db.put(k, v).unwrap();
    h.set(k, Some(v));
}

fn del(db: &Db, h: &mut History, k: &str) {
    db.delete(k).unwrap();
    h.set(k, None);
}

/// A store with data on three levels of age: a compacted run (L1), an L0 table that
/// overwrites and deletes some of it, and a log of unflushed writes on top.
fn fixture(dir: &Path) -> History {
    let mut h = History::default();
    let db = Db::open(dir, options()).unwrap();
    for i in 0..200 {
        put(&db, &mut h, &format!("key{i:03}"), &format!("old{i}"));
    }
    db.compact().unwrap();
    for i in (0..200).step_by(3) {
        put(&db, &mut h, &format!("key{i:03}"), &format!("mid{i}"));
    }
    for i in (1..200).step_by(7) {
        del(&db, &mut h, &format!("key{i:03}"));
    }
    db.flush().unwrap();
    for i in (0..200).step_by(5) {
        put(&db, &mut h, &format!("key{i:03}"), &format!("new{i}"));
    }
    del(&db, &mut h, "key003");
    db.close().unwrap();
    h
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Every file in the directory with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walk(dir) {
        let bytes = std::fs::read(&e).unwrap();
        out.insert(e, bytes);
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

/// Reads every key: `exact` keys must read their newest value; every other key must
/// read a value it once had (or nothing); a scan must show no key never written.
fn check(dir: &Path, h: &History, exact: &dyn Fn(&str) -> bool, what: &str) -> usize {
    let db = Db::open(dir, options()).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    let mut right = 0;
    for k in h.0.keys() {
        let got = db
            .get(k)
            .unwrap()
            .map(|v| String::from_utf8(v.to_vec()).unwrap());
        if exact(k) {
            assert_eq!(got, h.newest(k), "{what}: key {k}");
        } else {
            assert!(
                h.ever(k, &got),
                "{what}: key {k} reads {got:?}, never written"
            );
        }
        right += (got == h.newest(k)) as usize;
    }
    for item in db.scan::<&str, _>(..) {
        let (k, _) = item.unwrap();
        let k = String::from_utf8(k.to_vec()).unwrap();
        assert!(h.0.contains_key(&k), "{what}: invented key {k}");
    }
    db.close().unwrap();
    right
}

/// Repairing again finds nothing to do and changes no byte.
fn assert_second_repair_is_a_no_op(dir: &Path) {
    let before = snapshot(dir);
    let report = repair(dir, options()).unwrap();
    assert!(!report.repaired, "{report}");
    assert_eq!(snapshot(dir), before, "a second repair changed files");
}

#[test]
fn a_store_that_needs_no_repair_is_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let h = fixture(dir.path());
    assert_second_repair_is_a_no_op(dir.path());
    check(dir.path(), &h, &|_| true, "untouched");
}

#[test]
fn manifest_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let h = fixture(dir.path());
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    assert!(Db::open(dir.path(), options()).is_err());
    let report = repair(dir.path(), options()).unwrap();
    assert!(report.repaired);
    assert!(report.problems[0].contains("missing"), "{report}");
    assert_eq!(report.tables_kept.len(), 2, "{report}");
    assert!(report.wal_records > 0);
    assert!(report.tables_moved_aside.is_empty());
    check(dir.path(), &h, &|_| true, "manifest deleted");
    assert_second_repair_is_a_no_op(dir.path());
}

#[test]
fn manifest_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let h = fixture(dir.path());
    let m = dir.path().join("MANIFEST");
    let bytes = std::fs::read(&m).unwrap();
    std::fs::write(&m, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(
        Db::open(dir.path(), options()),
        Err(Error::Corruption { .. })
    ));
    let report = repair(dir.path(), options()).unwrap();
    assert!(report.problems[0].contains("damaged"), "{report}");
    check(dir.path(), &h, &|_| true, "manifest truncated");
    assert_second_repair_is_a_no_op(dir.path());
}

#[test]
fn one_table_corrupted_is_moved_aside_and_the_rest_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let h = fixture(dir.path());
    // The newer (L0) table: the one with the higher number.
    let tables = files(dir.path(), "sst");
    let bad = tables.last().unwrap().clone();
    let original = std::fs::read(&bad).unwrap();
    let mut bytes = original.clone();
    bytes[40] ^= 0x01; // inside its first data block
    std::fs::write(&bad, &bytes).unwrap();

    let report = repair(dir.path(), options()).unwrap();
    assert_eq!(report.tables_moved_aside.len(), 1, "{report}");
    let moved = &report.tables_moved_aside[0];
    assert_eq!(
        moved.to,
        dir.path().join("lost").join(bad.file_name().unwrap())
    );
    assert_eq!(
        std::fs::read(&moved.to).unwrap(),
        bytes,
        "moved, not deleted"
    );
    assert!(!bad.exists());

    // Keys the damaged table never held a newest version for read exactly; the
    // others read some value they had (the one the older table holds), never an
    // invented one.
    let in_bad_table = |k: &str| {
        let i: usize = k[3..].parse().unwrap();
        i.is_multiple_of(3) || i % 7 == 1
    };
    let in_log = |k: &str| {
        let i: usize = k[3..].parse().unwrap();
        i.is_multiple_of(5) || i == 3
    };
    let right = check(
        dir.path(),
        &h,
        &|k| !in_bad_table(k) || in_log(k),
        "one table corrupted",
    );
    assert!(right >= 200 - 200 / 3 - 200 / 7 - 2, "{right} keys right");
    assert_second_repair_is_a_no_op(dir.path());
}

#[test]
fn a_log_corrupted_mid_way_keeps_every_valid_record() {
    let dir = tempfile::tempdir().unwrap();
    let h = fixture(dir.path());
    let wal = files(dir.path(), "wal").pop().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[50] ^= 0x01; // inside an early record, with valid records after it
    std::fs::write(&wal, &bytes).unwrap();
    assert!(matches!(
        Db::open(dir.path(), options()),
        Err(Error::Corruption { .. })
    ));
    let report = repair(dir.path(), options()).unwrap();
    assert!(report.repaired);
    assert_eq!(report.wal_dropped.len(), 1, "{report}");
    assert!(report.tables_moved_aside.is_empty());
    // Every record but the damaged one is back: at most one key is not exact.
    let right = check(dir.path(), &h, &|_| false, "log corrupted");
    assert!(
        right >= h.0.len() - 1,
        "{right} of {} keys right",
        h.0.len()
    );
    assert_second_repair_is_a_no_op(dir.path());
}

#[test]
fn a_missing_table_is_reported_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let h = fixture(dir.path());
    let tables = files(dir.path(), "sst");
    std::fs::remove_file(&tables[0]).unwrap(); // the compacted run
    let report = repair(dir.path(), options()).unwrap();
    assert_eq!(report.tables_missing.len(), 1, "{report}");
    // What the newer table and the log hold is exact.
    let newer = |k: &str| {
        let i: usize = k[3..].parse().unwrap();
        i.is_multiple_of(3) || i % 7 == 1 || i.is_multiple_of(5)
    };
    check(dir.path(), &h, &newer, "a table missing");
    assert_second_repair_is_a_no_op(dir.path());
}

#[test]
fn repair_refuses_a_directory_without_a_store_and_a_locked_one() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        repair(dir.path(), options()),
        Err(Error::InvalidArgument(_))
    ));
    let db = Db::open(dir.path(), options()).unwrap();
    assert!(matches!(
        repair(dir.path(), options()),
        Err(Error::Locked(_))
    ));
    drop(db);
    let keys: BTreeSet<PathBuf> = walk(dir.path()).into_iter().collect();
    assert!(!keys.iter().any(|p| p.ends_with("lost")));
}

/// Point-in-time recovery drops the valid records after mid-log damage; the writes
/// made after it must not take their sequence numbers. The damaged log's deletion is
/// lost to a power loss (it was never made durable), the manifest is later damaged,
/// and repair replays every log from the start: the new writes, acknowledged and
/// synced, must still win over the dropped ones. (When the new writes reused the
/// dropped records' numbers, repair kept the dropped values and refused the new
/// records as stale.)
#[test]
fn writes_after_point_in_time_recovery_outrank_the_records_it_dropped() {
    use bloomkv_kv::fs::mem::{DirOps, UnsyncedData};
    use bloomkv_kv::fs::FileSystem;
    use bloomkv_kv::WalRecovery;

    // Sequence numbers 1..=5; one flipped bit in the third record ("c"), valid
    // records after it.
    let records = [
        ("a", "1"),
        ("b", "1"),
        ("c", "1"),
        ("x", "old"),
        ("y", "old"),
    ];
    let pit = PointInTimeStore::new(&records, 2);
    let db = Db::open(PIT_DIR, pit.options(WalRecovery::PointInTime)).unwrap();
    assert_eq!(db.get("x").unwrap(), None, "x was dropped with the damage");
    db.put("x", "new").unwrap();
    db.put("y", "new").unwrap();
    // The process dies (a clean close would leave its mark durably, which syncs the
    // directory and with it the log's deletion).
    std::mem::forget(db);
    pit.mem.power_loss(UnsyncedData::Lose, DirOps::Lose);
    assert!(
        pit.mem.exists(&pit.wal),
        "the damaged log's deletion was lost"
    );
    pit.repair_and_expect_new();
}

/// As above, with the damage in the first record, so point-in-time recovery keeps
/// nothing, and a session between that writes nothing. The open still has to record
/// the numbers of the records it dropped: the next open counted on from the old
/// floor, the later writes took those numbers again, and repair with the dropped
/// log back kept its old values over them.
#[test]
fn numbers_dropped_by_point_in_time_recovery_stay_used_across_a_reopen_without_writes() {
    use bloomkv_kv::WalRecovery;

    let pit = PointInTimeStore::new(&[("a", "1"), ("x", "old"), ("y", "old")], 0);
    let db = Db::open(PIT_DIR, pit.options(WalRecovery::PointInTime)).unwrap();
    assert_eq!(db.get("x").unwrap(), None, "x was dropped with the damage");
    let first = db.snapshot().sequence_number();
    assert!(
        first >= 3,
        "new writes number above the dropped records: {first}"
    );
    db.close().unwrap();
    let db = Db::open(PIT_DIR, pit.options(WalRecovery::PointInTime)).unwrap();
    let second = db.snapshot().sequence_number();
    assert!(
        second >= first,
        "sequence went back across a reopen: {first} -> {second}"
    );
    db.put("x", "new").unwrap();
    db.put("y", "new").unwrap();
    db.close().unwrap();
    // The dropped log comes back (its deletion was never made durable).
    pit.mem.set_file_bytes(&pit.wal, pit.damaged.clone());
    pit.repair_and_expect_new();
}

const PIT_DIR: &str = "/db";

/// A store in memory whose one log holds `records` (sequence numbers from 1), closed,
/// with one bit flipped in record `damaged_record`.
struct PointInTimeStore {
    mem: bloomkv_kv::fs::mem::MemFileSystem,
    wal: PathBuf,
    damaged: Vec<u8>,
}

impl PointInTimeStore {
    fn new(records: &[(&str, &str)], damaged_record: usize) -> PointInTimeStore {
        use bloomkv_kv::wal::{scan_wal, Span};
        use bloomkv_kv::WalRecovery;

        let mem = bloomkv_kv::fs::mem::MemFileSystem::new();
        let mut store = PointInTimeStore {
            mem,
            wal: PathBuf::new(),
            damaged: Vec::new(),
        };
        let db = Db::open(PIT_DIR, store.options(WalRecovery::TolerateCorruptTail)).unwrap();
        for (k, v) in records {
            db.put(k, v).unwrap();
        }
        db.close().unwrap();
        let dir = Path::new(PIT_DIR);
        store.wal = store
            .mem
            .paths()
            .into_iter()
            .find(|p| p.parent() == Some(dir) && p.extension().is_some_and(|e| e == "wal"))
            .unwrap();
        let mut bytes = store.mem.file_bytes(&store.wal).unwrap();
        let spans: Vec<Span> = scan_wal(&bytes::Bytes::from(bytes.clone())).collect();
        bytes[spans[damaged_record].offset() as usize + 20] ^= 0x01;
        store.mem.set_file_bytes(&store.wal, bytes.clone());
        store.damaged = bytes;
        store
    }

    fn options(&self, mode: bloomkv_kv::WalRecovery) -> Options {
        Options {
            sync_writes: true,
            disable_auto_compaction: true,
            wal_recovery: mode,
            file_system: std::sync::Arc::new(self.mem.clone()),
            ..Options::default()
        }
    }

    /// Loses the manifest, repairs (every log there is replays) and expects the new
    /// writes of `x` and `y` to have won.
    fn repair_and_expect_new(&self) {
        use bloomkv_kv::WalRecovery;

        let dir = Path::new(PIT_DIR);
        self.mem
            .set_file_bytes(&dir.join("MANIFEST"), b"damaged".to_vec());
        let report = repair(dir, self.options(WalRecovery::TolerateCorruptTail)).unwrap();
        let db = Db::open(dir, self.options(WalRecovery::TolerateCorruptTail)).unwrap();
        for key in ["x", "y"] {
            assert_eq!(
                db.get(key).unwrap().as_deref(),
                Some(&b"new"[..]),
                "{key}; repair:\n{report}"
            );
        }
    }
}
