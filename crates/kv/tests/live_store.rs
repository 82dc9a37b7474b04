//! Reading a store another process is writing: read-only opens, `inspect` and
//! `verify` see a consistent store (or say it is busy), never a false corruption.
//!
//! The "other process" is a writer thread with its own `Db`: to the file system it is
//! the same thing, files rotated under the readers by flushes and compactions.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bloomkv_kv::fs::fault::{FaultFileSystem, OpKind};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{inspect, verify, Db, Error, Options};

fn key(i: u64) -> String {
    format!("key{i:08}")
}

fn value(i: u64) -> String {
    format!("value{i}-{}", "v".repeat(60))
}

fn small_tree() -> Options {
    Options {
        memtable_size: 16 << 10,
        target_file_size: 32 << 10,
        level1_max_bytes: 64 << 10,
        ..Options::default()
    }
}

fn read_only() -> Options {
    Options {
        read_only: true,
        ..Options::default()
    }
}

#[test]
fn tools_and_read_only_opens_beside_a_writer_see_no_false_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let writer = Db::open(&path, small_tree()).unwrap();
    writer.put(key(0), value(0)).unwrap();
    writer.flush().unwrap();
    let acked = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (acked, stop) = (acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 1;
            // Capped so the tree stays under `max_open_files` tables: a read-only open
            // keeps every table it read open, and so readable after the writer deletes it.
            while !stop.load(Ordering::Relaxed) && i < 60_000 {
                writer.put(key(i), value(i)).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
                if i % 64 == 0 {
                    std::thread::yield_now();
                }
            }
            writer.close().unwrap();
        })
    };

    let (mut verified, mut busy, mut opened) = (0, 0, 0);
    for round in 0..20 {
        let report = verify(&path).unwrap();
        assert!(report.problems.is_empty(), "round {round}: {report}");
        if report.settled {
            verified += 1;
        } else {
            busy += 1;
        }
        match inspect(&path) {
            Ok(info) => assert!(!info.tables.is_empty()),
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::ResourceBusy => busy += 1,
            Err(e) => panic!("round {round}: inspect: {e}"),
        }
        // Every write acknowledged before the read-only open is there.
        let n = acked.load(Ordering::Acquire);
        let db = Db::open(&path, read_only()).unwrap();
        for i in (0..n).step_by(((n / 200) as usize).max(1)) {
            assert_eq!(
                db.get(key(i)).unwrap().as_deref(),
                Some(value(i).as_bytes()),
                "round {round}: {} of {n}",
                key(i)
            );
        }
        assert!(matches!(db.put("x", "y"), Err(Error::ReadOnly(_))));
        opened += 1;
    }
    let written_meanwhile = acked.load(Ordering::Acquire);
    stop.store(true, Ordering::Relaxed);
    handle.join().unwrap();
    eprintln!("{verified} verified, {busy} busy, {written_meanwhile} writes during the rounds");
    assert_eq!(opened, 20);
    assert!(verified >= 10, "{verified} verified, {busy} busy");
    // And once the writer is gone: everything verifies.
    assert!(verify(&path).unwrap().is_clean());
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_read_only_open_creates_changes_and_locks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_tree()).unwrap();
    for i in 0..2000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.wait_for_compaction().unwrap();
    for i in 2000..2100 {
        db.put(key(i), value(i)).unwrap(); // only in the log
    }
    db.close().unwrap();
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let before: Vec<(String, Vec<u8>)> = names(dir.path())
        .into_iter()
        .filter(|n| !n.ends_with("lost"))
        .map(|n| {
            let bytes = std::fs::read(dir.path().join(&n)).unwrap();
            (n, bytes)
        })
        .collect();

    // Two read-only openers beside each other and beside a writer.
    let a = Db::open(dir.path(), read_only()).unwrap();
    let b = Db::open(dir.path(), read_only()).unwrap();
    for i in 0..2100 {
        assert_eq!(a.get(key(i)).unwrap().as_deref(), Some(value(i).as_bytes()));
    }
    assert_eq!(b.scan::<&str, _>(..).count(), 2100);
    assert!(matches!(a.put("k", "v"), Err(Error::ReadOnly(_))));
    assert!(matches!(a.delete("k"), Err(Error::ReadOnly(_))));
    assert!(matches!(a.flush(), Err(Error::ReadOnly(_))));
    assert!(matches!(a.compact(), Err(Error::ReadOnly(_))));
    a.close().unwrap();
    drop(b);
    let after: Vec<(String, Vec<u8>)> = names(dir.path())
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.path().join(&n)).unwrap();
            (n, bytes)
        })
        .collect();
    assert_eq!(before, after, "not a byte changed, no LOCK created");

    let writer = Db::open(dir.path(), small_tree()).unwrap();
    let c = Db::open(dir.path(), read_only()).unwrap();
    writer.put("new", "1").unwrap();
    assert_eq!(c.get(key(7)).unwrap().as_deref(), Some(value(7).as_bytes()));
    assert_eq!(
        c.get("new").unwrap(),
        None,
        "the store as it was when opened"
    );
}

#[test]
fn a_read_only_open_performs_no_write_operation_at_all() {
    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let options = Options {
        file_system: Arc::new(fs.clone()),
        ..small_tree()
    };
    let db = Db::open("/db", options.clone()).unwrap();
    for i in 0..1000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    db.put("tail", "in the log").unwrap();
    drop(db);

    fs.record();
    let db = Db::open(
        "/db",
        Options {
            read_only: true,
            ..options.clone()
        },
    )
    .unwrap();
    assert_eq!(db.get("tail").unwrap().as_deref(), Some(&b"in the log"[..]));
    assert_eq!(
        db.get(key(500)).unwrap().as_deref(),
        Some(value(500).as_bytes())
    );
    assert!(db.put("x", "y").is_err());
    db.close().unwrap();
    let ops = fs.take_log();
    assert!(!ops.is_empty());
    let reads = [
        OpKind::OpenRandom,
        OpKind::ReadAll,
        OpKind::ReadAt,
        OpKind::Len,
        OpKind::List,
    ];
    for op in &ops {
        assert!(reads.contains(op), "a read-only open did {op:?}: {ops:?}");
    }

    // A directory with no store is refused, and nothing is created in it.
    mem.create_dir_all(Path::new("/empty")).unwrap();
    let e = Db::open(
        "/empty",
        Options {
            read_only: true,
            ..options
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert_eq!(mem.list(Path::new("/empty")).unwrap(), Vec::<String>::new());
}
