//! Snapshots, versions in tables, and what compaction keeps for them.

use std::ops::Bound;
use std::path::Path;

use bloomkv_kv::{Db, Options, WriteBatch};

fn options() -> Options {
    Options {
        disable_auto_compaction: true,
        block_size: 256,
        ..Options::default()
    }
}

fn value(db_value: Option<bytes::Bytes>) -> Option<String> {
    db_value.map(|v| String::from_utf8(v.to_vec()).unwrap())
}

fn keys(
    scan: impl Iterator<Item = bloomkv_kv::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<String> {
    scan.map(|kv| String::from_utf8(kv.unwrap().0.to_vec()).unwrap())
        .collect()
}

#[test]
fn a_snapshot_reads_the_store_as_it_was_through_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..300 {
        db.put(format!("k{i:03}"), "v1").unwrap();
    }
    db.flush().unwrap();
    db.delete("k007").unwrap();
    let s1 = db.snapshot();
    for i in (0..300).step_by(2) {
        db.put(format!("k{i:03}"), "v2").unwrap();
    }
    db.delete("k010").unwrap();
    db.put("new", "x").unwrap();
    let s2 = db.snapshot();
    db.delete("k020").unwrap();
    let check = |db: &Db| {
        assert_eq!(value(s1.get("k000").unwrap()).as_deref(), Some("v1"));
        assert_eq!(value(s1.get("k007").unwrap()), None);
        assert_eq!(value(s1.get("k010").unwrap()).as_deref(), Some("v1"));
        assert_eq!(value(s1.get("new").unwrap()), None);
        assert_eq!(value(s2.get("k000").unwrap()).as_deref(), Some("v2"));
        assert_eq!(value(s2.get("k010").unwrap()), None);
        assert_eq!(value(s2.get("k020").unwrap()).as_deref(), Some("v2"));
        assert_eq!(value(s2.get("new").unwrap()).as_deref(), Some("x"));
        assert_eq!(value(db.get("k020").unwrap()), None);
        assert_eq!(s1.scan::<&str, _>(..).count(), 299);
        assert_eq!(s2.scan::<&str, _>(..).count(), 299);
        assert_eq!(db.scan::<&str, _>(..).count(), 298);
        let s1_values: Vec<_> = s1.scan("k000".."k004").map(|kv| kv.unwrap().1).collect();
        assert_eq!(s1_values, vec!["v1"; 4]);
    };
    check(&db);
    db.flush().unwrap();
    check(&db);
    db.compact().unwrap();
    check(&db);
    // Once both are gone, a compaction keeps only the newest versions.
    drop((s1, s2));
    db.compact().unwrap();
    assert_eq!(db.scan::<&str, _>(..).count(), 298);
}

#[test]
fn a_scan_is_a_point_in_time_view() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..500 {
        db.put(format!("k{i:03}"), "old").unwrap();
    }
    db.flush().unwrap();
    let mut scan = db.scan::<&str, _>(..);
    let first = scan.next().unwrap().unwrap();
    // Writes, a flush and a compaction after the scan started change nothing it sees.
    for i in 0..500 {
        db.put(format!("k{i:03}"), "new").unwrap();
    }
    db.put("k000a", "inserted").unwrap();
    db.delete("k499").unwrap();
    db.compact().unwrap();
    let rest: Vec<_> = scan.map(|kv| kv.unwrap()).collect();
    assert_eq!(first.1, "old");
    assert_eq!(rest.len(), 499);
    assert!(rest.iter().all(|(_, v)| v == "old"));
}

/// Every bound kind at both ends, forwards vs backwards, over memtable and tables with
/// overwritten and deleted keys: backwards is forwards reversed, and a walk from both
/// ends meeting anywhere yields each key once.
#[test]
fn reverse_scans_equal_forward_scans_reversed_for_every_bound_kind() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..400u32 {
        db.put(format!("k{i:03}"), format!("a{i}")).unwrap();
    }
    db.flush().unwrap();
    for i in (0..400u32).step_by(3) {
        db.put(format!("k{i:03}"), format!("b{i}")).unwrap();
    }
    for i in (0..400u32).step_by(7) {
        db.delete(format!("k{i:03}")).unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    for i in (0..400u32).step_by(5) {
        db.put(format!("k{i:03}"), format!("c{i}")).unwrap(); // memtable only
    }
    db.delete("k399").unwrap();
    let probes = [
        "", "k000", "k001", "k007", "k150", "k151", "k398", "k399", "k5",
    ];
    let bounds = |k: &str| {
        [
            Bound::Included(k.to_string()),
            Bound::Excluded(k.to_string()),
            Bound::Unbounded,
        ]
    };
    let mut checked = 0;
    for a in probes {
        for b in probes {
            for lo in bounds(a) {
                for hi in bounds(b) {
                    let range = (lo.clone(), hi.clone());
                    for (name, fwd, back) in [
                        (
                            "db",
                            keys(db.scan::<String, _>(range.clone())),
                            keys(db.scan::<String, _>(range.clone()).rev()),
                        ),
                        (
                            "snapshot",
                            keys(snap.scan::<String, _>(range.clone())),
                            keys(snap.scan::<String, _>(range.clone()).rev()),
                        ),
                    ] {
                        let mut reversed = back.clone();
                        reversed.reverse();
                        assert_eq!(fwd, reversed, "{name} {range:?}");
                        checked += fwd.len();
                    }
                    // Alternating ends: every key once, in the right place.
                    let fwd = keys(db.scan::<String, _>(range.clone()));
                    let mut scan = db.scan::<String, _>(range.clone());
                    let (mut front, mut back) = (Vec::new(), Vec::new());
                    let mut from_front = true;
                    loop {
                        let item = if from_front {
                            scan.next()
                        } else {
                            scan.next_back()
                        };
                        let Some(kv) = item else { break };
                        let k = String::from_utf8(kv.unwrap().0.to_vec()).unwrap();
                        if from_front {
                            front.push(k)
                        } else {
                            back.push(k)
                        }
                        from_front = !from_front;
                    }
                    assert!(scan.next().is_none() && scan.next_back().is_none());
                    back.reverse();
                    front.extend(back);
                    assert_eq!(front, fwd, "alternating {range:?}");
                }
            }
        }
    }
    assert!(checked > 10_000, "the ranges were not empty: {checked}");
}

fn table_bytes(db: &Db) -> u64 {
    db.table_infos().iter().map(|t| t.file_size).sum()
}

#[test]
fn a_dropped_snapshot_lets_compaction_reclaim_old_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let big = "x".repeat(200);
    for i in 0..500 {
        db.put(format!("k{i:03}"), &big).unwrap();
    }
    let snap = db.snapshot();
    for round in 0..3 {
        let mut batch = WriteBatch::new();
        for i in 0..500 {
            batch.put(format!("k{i:03}"), format!("{round}{big}"));
        }
        db.write(batch).unwrap();
        db.flush().unwrap();
    }
    db.compact().unwrap();
    let held = table_bytes(&db);
    // The snapshot's version of every key survived the compaction...
    assert_eq!(snap.get("k123").unwrap().unwrap(), big.as_bytes());
    drop(snap);
    db.compact().unwrap();
    let released = table_bytes(&db);
    // ...and with it dropped, one version per key remains instead of two.
    assert!(
        released * 10 < held * 6,
        "held {held} bytes, released {released} bytes"
    );
    assert_eq!(
        db.get("k123").unwrap().unwrap(),
        format!("2{big}").as_bytes()
    );
}

#[test]
fn snapshots_are_send_sync_clone_and_released_by_the_last_clone() {
    fn assert_traits<T: Send + Sync + Clone>() {}
    assert_traits::<bloomkv_kv::Snapshot>();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put("k", "a").unwrap();
    let snap = db.snapshot();
    let clone = snap.clone();
    drop(snap);
    db.put("k", "b").unwrap();
    db.compact().unwrap();
    let reader = std::thread::spawn(move || clone.get("k").unwrap());
    assert_eq!(reader.join().unwrap().unwrap(), "a");
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A store whose tables were written in table format version 1 (one version per key)
/// opens, reads, takes new writes and compacts old and new tables together.
#[test]
fn a_store_written_in_format_version_1_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store_v1"),
        dir.path(),
    );
    let db = Db::open(dir.path(), options()).unwrap();
    let infos = db.table_infos();
    assert_eq!(infos.len(), 2);
    let expect = |i: u32| -> Option<String> {
        if i.is_multiple_of(5) {
            None
        } else if i.is_multiple_of(2) {
            Some(format!("new-{i}"))
        } else {
            Some(format!("old-{i}"))
        }
    };
    let want: Vec<(String, String)> = (0..200u32)
        .filter_map(|i| expect(i).map(|v| (format!("k{i:03}"), v)))
        .collect();
    let all = |db: &Db| -> Vec<(String, String)> {
        db.scan::<&str, _>(..)
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (
                    String::from_utf8(k.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(all(&db), want);
    let mut rev = all(&db);
    rev.reverse();
    let back: Vec<(String, String)> = db
        .scan::<&str, _>(..)
        .rev()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect();
    assert_eq!(back, rev);
    for i in 0..200u32 {
        assert_eq!(value(db.get(format!("k{i:03}")).unwrap()), expect(i));
    }
    let snap = db.snapshot();
    db.put("k001", "newest").unwrap();
    db.compact().unwrap();
    assert_eq!(value(snap.get("k001").unwrap()).as_deref(), Some("old-1"));
    assert_eq!(value(db.get("k001").unwrap()).as_deref(), Some("newest"));
    assert_eq!(value(db.get("k005").unwrap()), None);
    drop(snap);
    db.close().unwrap();
}
