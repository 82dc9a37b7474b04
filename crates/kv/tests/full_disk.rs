//! A full disk: the store stops taking writes with a clear error, leaves no temp files
//! behind, keeps serving reads, and opens again with every acknowledged write once
//! space is freed.
//!
//! The disk is an in-memory file system behind a fault-injecting one whose
//! `Fault::NoSpace` makes every create and append fail with `StorageFull` from a chosen
//! append on, until the plan is reset ("space freed").

use std::path::Path;
use std::sync::Arc;

use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Db, Error, Options};

const DIR: &str = "/db";

fn opts(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        memtable_size: 8 << 10,
        target_file_size: 16 << 10,
        level1_max_bytes: 32 << 10,
        ..Options::default()
    }
}

fn temp_files(fs: &MemFileSystem) -> Vec<String> {
    fs.list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

fn value(i: u32) -> String {
    format!("value-{i:06}-{}", "x".repeat(40))
}

/// Writes until the disk fills at the `full_at`-th append; returns how many writes
/// were acknowledged.
fn fill(fs: &FaultFileSystem, full_at: u64) -> u32 {
    let db = Db::open(DIR, opts(fs)).unwrap();
    fs.set_plan(FaultPlan::nth(full_at, &[OpKind::Append], Fault::NoSpace));
    let mut acked = 0;
    let mut refused = None;
    for i in 0..20_000u32 {
        match db.put(format!("key{i:06}"), value(i)) {
            Ok(()) => acked = i + 1,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("the disk fills before 20,000 writes");
    assert!(
        matches!(e, Error::Io(_) | Error::Closed(_)),
        "a full disk is an I/O error: {e:?}"
    );
    assert!(e.to_string().contains("space"), "says why: {e}");
    // Refused from now on, with the same reason; reads go on.
    let again = db.put("one more", "x").unwrap_err();
    assert!(again.to_string().contains("space"), "{again}");
    for i in (0..acked).step_by(97) {
        assert_eq!(
            db.get(format!("key{i:06}")).unwrap().as_deref(),
            Some(value(i).as_bytes()),
            "reads go on after the disk filled"
        );
    }
    drop(db);
    acked
}

#[test]
fn a_full_disk_loses_no_acknowledged_write_and_leaves_no_temp_files() {
    // The disk fills at different points: in the log, in a flush, in a compaction.
    for full_at in [3, 40, 150, 400, 900, 1500] {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        let acked = fill(&fs, full_at);
        assert!(fs.fired(), "full_at {full_at}");
        assert_eq!(temp_files(&mem), Vec::<String>::new(), "full_at {full_at}");

        // Reopening while the disk is still full may fail, but never adds a temp file.
        for _ in 0..3 {
            if let Err(e) = Db::open(DIR, opts(&fs)) {
                assert!(matches!(e, Error::Io(_)), "full_at {full_at}: {e:?}");
            }
            assert_eq!(temp_files(&mem), Vec::<String>::new(), "full_at {full_at}");
        }

        // Space freed: the store opens with every acknowledged write. Failed builds
        // deleted their outputs at once, so none is left over to be moved aside.
        fs.set_plan(FaultPlan::none());
        let db = Db::open(DIR, opts(&fs)).unwrap();
        assert_eq!(
            db.recovery_report().tables_moved_aside,
            Vec::<std::path::PathBuf>::new(),
            "full_at {full_at}"
        );
        for i in 0..acked {
            assert_eq!(
                db.get(format!("key{i:06}")).unwrap().as_deref(),
                Some(value(i).as_bytes()),
                "full_at {full_at}: key{i:06} of {acked} acknowledged"
            );
        }
        db.put("after", "freed").unwrap();
        db.close().unwrap();
    }
}

#[test]
fn open_removes_stale_temp_files_before_it_writes_anything() {
    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let options = Options {
        memtable_size: 4 << 10,
        ..opts(&fs)
    };
    let db = Db::open(DIR, options.clone()).unwrap();
    db.put("flushed", "1").unwrap();
    db.flush().unwrap();
    drop(db);
    // More log than a memtable holds: the next open must write a table.
    let big = Options {
        memtable_size: 1 << 20,
        ..options.clone()
    };
    let db = Db::open(DIR, big).unwrap();
    for i in 0..200u32 {
        db.put(format!("key{i:06}"), value(i)).unwrap();
    }
    drop(db);
    // What earlier failed attempts on a full disk left behind.
    for name in ["000900.sst.tmp", "000901.sst.tmp", "MANIFEST.tmp"] {
        let mut f = fs.create(&Path::new(DIR).join(name)).unwrap();
        f.append(&[7u8; 4096]).unwrap();
    }

    // The disk is full from the first file the open creates.
    fs.set_plan(FaultPlan::nth(1, &[OpKind::Create], Fault::NoSpace));
    let e = Db::open(DIR, options.clone()).unwrap_err();
    assert!(matches!(e, Error::Io(_)), "{e:?}");
    assert_eq!(temp_files(&mem), Vec::<String>::new());

    fs.set_plan(FaultPlan::none());
    let db = Db::open(DIR, options).unwrap();
    assert_eq!(db.get("flushed").unwrap().as_deref(), Some(&b"1"[..]));
    for i in 0..200u32 {
        assert_eq!(
            db.get(format!("key{i:06}")).unwrap().as_deref(),
            Some(value(i).as_bytes())
        );
    }
}

#[test]
fn a_table_build_that_fills_the_disk_removes_its_temp_file_at_once() {
    // Fill the disk at each append of a flush: in the table's data, its filter, its
    // footer, or the manifest after it.
    let mut points = 0;
    for full_at in 1.. {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        let options = Options {
            memtable_size: 1 << 20,
            block_size: 256,
            ..opts(&fs)
        };
        let db = Db::open(DIR, options.clone()).unwrap();
        for i in 0..300u32 {
            db.put(format!("key{i:06}"), value(i)).unwrap();
        }
        fs.set_plan(FaultPlan::nth(full_at, &[OpKind::Append], Fault::NoSpace));
        let flushed = db.flush();
        if !fs.fired() {
            flushed.unwrap();
            break;
        }
        points += 1;
        let e = flushed.unwrap_err();
        assert!(e.to_string().contains("space"), "append {full_at}: {e}");
        // At once, before any reopen tidies up.
        assert_eq!(temp_files(&mem), Vec::<String>::new(), "append {full_at}");
        let sst = mem
            .list(Path::new(DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".sst"))
            .count();
        assert_eq!(
            sst, 0,
            "append {full_at}: a table no manifest names is gone"
        );
        drop(db);
        fs.set_plan(FaultPlan::none());
        let db = Db::open(DIR, options).unwrap();
        for i in 0..300u32 {
            assert_eq!(
                db.get(format!("key{i:06}")).unwrap().as_deref(),
                Some(value(i).as_bytes()),
                "append {full_at}"
            );
        }
    }
    eprintln!("the disk filled at {points} points of one flush");
    assert!(points >= 10, "the flush made {points} appends");
}

#[test]
fn a_compaction_that_fills_the_disk_removes_the_tables_it_wrote_at_once() {
    // Two overlapping tables merged into outputs of 8 KiB: the disk fills when the
    // compaction creates its second, third, ... output, after the ones before it were
    // written whole. None is in a manifest; each must go at once, not wait for the next
    // open to set it aside.
    let mut points = 0;
    for full_at in 2.. {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        let options = Options {
            disable_auto_compaction: true,
            memtable_size: 1 << 20,
            target_file_size: 8 << 10,
            ..opts(&fs)
        };
        let db = Db::open(DIR, options.clone()).unwrap();
        for round in 0..2u32 {
            for i in 0..600u32 {
                db.put(format!("key{i:06}"), value(round * 1000 + i))
                    .unwrap();
            }
            db.flush().unwrap();
        }
        let before = table_files(&mem);
        fs.set_plan(FaultPlan::nth(full_at, &[OpKind::Create], Fault::NoSpace));
        let compacted = db.compact();
        if !fs.fired() {
            compacted.unwrap();
            break;
        }
        points += 1;
        let e = compacted.unwrap_err();
        assert!(e.to_string().contains("space"), "create {full_at}: {e}");
        assert_eq!(
            table_files(&mem),
            before,
            "create {full_at}: only the compaction's inputs, still live, are left"
        );
        drop(db);
        fs.set_plan(FaultPlan::none());
        let db = Db::open(DIR, options).unwrap();
        assert!(
            db.recovery_report().tables_moved_aside.is_empty(),
            "create {full_at}: nothing left over for open to set aside"
        );
        for i in (0..600u32).step_by(7) {
            assert_eq!(
                db.get(format!("key{i:06}")).unwrap().as_deref(),
                Some(value(1000 + i).as_bytes()),
                "create {full_at}"
            );
        }
    }
    eprintln!("the disk filled at {points} output tables of one compaction");
    assert!(points >= 2, "the compaction wrote {points} + 1 tables");
}

/// An open that replays logs into a table and then cannot write the manifest naming
/// it (a full disk, or any error) deletes that table, as a failed flush does: each
/// such open once left it for the next open to move into `lost/`, where nothing ever
/// deletes it, one more copy per failed attempt. The logs are untouched, so the open
/// that succeeds replays them again and loses nothing.
#[test]
fn a_recovery_open_that_cannot_write_its_manifest_leaves_no_table() {
    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let options = opts(&fs);
    let db = Db::open(DIR, options.clone()).unwrap();
    for i in 0..100u32 {
        db.put(format!("key{i:06}"), value(i)).unwrap();
    }
    drop(db);
    // As after a crash: without the clean-close mark, open writes the logs to a table.
    mem.remove(&Path::new(DIR).join("CLOSED")).unwrap();
    let before = table_files(&mem);
    for fault in [Fault::Error, Fault::NoSpace, Fault::Error] {
        // Create 1 is the table's temporary file, create 2 the manifest's.
        fs.set_plan(FaultPlan::nth(2, &[OpKind::Create], fault));
        let e = Db::open(DIR, options.clone()).unwrap_err();
        assert!(fs.fired(), "{e}");
        assert_eq!(table_files(&mem), before, "{fault:?}: {e}");
        assert!(temp_files(&mem).is_empty(), "{fault:?}");
    }
    fs.set_plan(FaultPlan::none());
    let db = Db::open(DIR, options).unwrap();
    assert!(db.recovery_report().tables_moved_aside.is_empty());
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("key{i:06}")).unwrap().as_deref(),
            Some(value(i).as_bytes())
        );
    }
}

/// The table files in the store's directory, sorted.
fn table_files(fs: &MemFileSystem) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}
