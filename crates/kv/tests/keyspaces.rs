//! Keyspaces: several key spaces in one store, sharing one log.
//!
//! * A model test: random puts, deletes, range deletes and batches across three
//!   keyspaces (each with its own filter and memtable settings), with flushes,
//!   compactions, reopens, snapshots, drops and re-creations, checked against one
//!   `BTreeMap` per keyspace by gets, scans both ways and `multi_get`.
//! * Batches across keyspaces are seen whole by concurrent snapshot readers; they
//!   survive whole an I/O error or a power loss at every file operation of a workload
//!   that also makes and drops keyspaces, and a SIGKILL of a process writing them.
//! * A checkpoint taken while a writer runs holds every keyspace at one point.
//! * An idle keyspace does not keep the logs alive; a dropped keyspace's files go; a
//!   batch naming a dropped keyspace is refused before anything is written.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan};
use bloomkv_kv::fs::mem::{DirOps, MemFileSystem, UnsyncedData};
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Db, FilterKind, Keyspace, Options, Snapshot, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The names used, with the options each keyspace is made with ("default" is the
/// store's own).
fn made_with(name: &str) -> Options {
    match name {
        "ribbon" => Options {
            filter: FilterKind::Ribbon,
            memtable_size: 8 << 10,
            ..Options::default()
        },
        "nofilter" => Options {
            filter: FilterKind::None,
            memtable_size: 16 << 10,
            l0_compaction_trigger: 2,
            ..Options::default()
        },
        _ => Options::default(),
    }
}

fn root_options(fs: Option<Arc<dyn FileSystem>>) -> Options {
    let mut o = Options {
        memtable_size: 12 << 10,
        l0_compaction_trigger: 3,
        target_file_size: 16 << 10,
        ..Options::default()
    };
    if let Some(fs) = fs {
        o.file_system = fs;
    }
    o
}

const NAMES: [&str; 3] = ["default", "ribbon", "nofilter"];

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:04}", rng.gen_range(0..600)).into_bytes()
}

fn scan_all(
    it: impl Iterator<Item = bloomkv_kv::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Gets, a forward and a reverse scan of a random range, and a `multi_get`, all
/// against `model`.
fn check(ks: &Keyspace, snap: Option<&Snapshot>, model: &Model, rng: &mut StdRng, when: &str) {
    let mut keys: Vec<Vec<u8>> = (0..20).map(|_| key(rng)).collect();
    keys.extend(model.keys().take(3).cloned());
    for k in &keys {
        let got = match snap {
            Some(s) => s.get(k),
            None => ks.get(k),
        }
        .unwrap()
        .map(|v| v.to_vec());
        assert_eq!(
            got.as_ref(),
            model.get(k),
            "{when}: get {:?} in {}",
            String::from_utf8_lossy(k),
            ks.name()
        );
    }
    let got = match snap {
        Some(s) => s.multi_get(&keys),
        None => ks.multi_get(&keys),
    }
    .unwrap();
    for (k, v) in keys.iter().zip(got) {
        assert_eq!(
            v.map(|v| v.to_vec()).as_ref(),
            model.get(k),
            "{when}: multi_get in {}",
            ks.name()
        );
    }
    let (mut a, mut b) = (key(rng), key(rng));
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range::<[u8], _>((Bound::Included(&a[..]), Bound::Excluded(&b[..])))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let range = a.clone()..b.clone();
    let (fwd, back) = match snap {
        Some(s) => (
            scan_all(s.scan(range.clone())),
            scan_all(s.scan(range).rev()),
        ),
        None => (
            scan_all(ks.scan(range.clone())),
            scan_all(ks.scan(range).rev()),
        ),
    };
    assert_eq!(fwd, want, "{when}: scan in {}", ks.name());
    let mut back = back;
    back.reverse();
    assert_eq!(back, want, "{when}: reverse scan in {}", ks.name());
}

fn handles(db: &Db) -> Vec<Keyspace> {
    NAMES
        .iter()
        .map(|n| db.keyspace(n, made_with(n)).unwrap())
        .collect()
}

fn run_model(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = Db::open(dir.path(), root_options(None)).unwrap();
    let mut ks = handles(&db);
    let mut models: Vec<Model> = vec![Model::new(); NAMES.len()];
    // A snapshot with a copy of every keyspace's model at its moment.
    let mut snaps: Vec<(Snapshot, Vec<Model>)> = Vec::new();
    for step in 0..steps {
        let when = format!("seed {seed}, step {step}");
        match rng.gen_range(0..100) {
            0..=49 => {
                let i = rng.gen_range(0..NAMES.len());
                let k = key(&mut rng);
                let v = format!("v{step}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
                ks[i].put(&k, &v).unwrap();
                models[i].insert(k, v);
            }
            50..=59 => {
                let i = rng.gen_range(0..NAMES.len());
                let k = key(&mut rng);
                ks[i].delete(&k).unwrap();
                models[i].remove(&k);
            }
            60..=62 => {
                let i = rng.gen_range(0..NAMES.len());
                let (mut a, mut b) = (key(&mut rng), key(&mut rng));
                if a == b {
                    continue;
                }
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                ks[i].delete_range(&a, &b).unwrap();
                models[i].retain(|k, _| !(a <= *k && *k < b));
            }
            63..=77 => {
                // A batch across keyspaces: the same key in each, and a delete.
                let mut batch = WriteBatch::new();
                let k = key(&mut rng);
                let gone = key(&mut rng);
                for (i, handle) in ks.iter().enumerate() {
                    let v = format!("batch{step}-{i}").into_bytes();
                    batch.put_in(handle, &k, &v);
                    models[i].insert(k.clone(), v);
                    if rng.gen_bool(0.5) {
                        batch.delete_in(handle, &gone);
                        models[i].remove(&gone);
                    }
                }
                db.write(batch).unwrap();
            }
            78..=82 => ks[rng.gen_range(0..NAMES.len())].flush().unwrap(),
            83..=84 => ks[rng.gen_range(0..NAMES.len())].compact().unwrap(),
            85..=88 => {
                let at = rng.gen_range(0..NAMES.len());
                snaps.push((ks[at].snapshot(), models.clone()));
                if snaps.len() > 3 {
                    snaps.remove(0);
                }
            }
            89..=90 => {
                // Drop a named keyspace and make it again: empty.
                let i = rng.gen_range(1..NAMES.len());
                db.drop_keyspace(NAMES[i]).unwrap();
                assert!(
                    ks[i].put("late", "write").is_err(),
                    "{when}: a dropped keyspace took a write"
                );
                ks[i] = db.keyspace(NAMES[i], made_with(NAMES[i])).unwrap();
                models[i].clear();
                // Snapshots of the old keyspace are not comparable any more.
                snaps.clear();
            }
            91..=92 => {
                snaps.clear();
                ks.clear();
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                db = Db::open(dir.path(), root_options(None)).unwrap();
                assert_eq!(db.keyspace_names(), ["nofilter", "ribbon"], "{when}");
                ks = handles(&db);
            }
            _ => {
                for (i, handle) in ks.iter().enumerate() {
                    check(handle, None, &models[i], &mut rng, &when);
                }
                for (snap, at) in &snaps {
                    for (i, handle) in ks.iter().enumerate() {
                        let s = snap.in_keyspace(handle).unwrap();
                        check(
                            handle,
                            Some(&s),
                            &at[i],
                            &mut rng,
                            &format!("{when}, snapshot"),
                        );
                    }
                }
            }
        }
    }
    for (i, handle) in ks.iter().enumerate() {
        check(handle, None, &models[i], &mut rng, "end");
    }
}

#[test]
fn random_operations_on_three_keyspaces_match_a_model_per_keyspace() {
    for seed in 0..3 {
        run_model(seed, 1500);
    }
}

#[test]
fn keyspaces_keep_their_own_settings_and_data_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let r = db.keyspace("ribbon", made_with("ribbon")).unwrap();
        let n = db.keyspace("nofilter", made_with("nofilter")).unwrap();
        for i in 0..500 {
            r.put(format!("r{i:04}"), "x").unwrap();
            n.put(format!("n{i:04}"), "y").unwrap();
        }
        r.flush().unwrap();
        n.flush().unwrap();
        r.put("unflushed", "1").unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let r = db.keyspace("ribbon", Options::default()).unwrap();
    let n = db.keyspace("nofilter", Options::default()).unwrap();
    assert_eq!(r.get("unflushed").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(r.get("n0001").unwrap(), None);
    assert_eq!(n.get("n0001").unwrap().as_deref(), Some(&b"y"[..]));
    assert_eq!(
        db.get("r0001").unwrap(),
        None,
        "the default keyspace holds neither"
    );
    // Each keyspace's tables carry the filter it was made with, not the options
    // given to the reopen.
    let kinds = |ks: &Keyspace| -> Vec<String> {
        ks.table_infos()
            .iter()
            .map(|t| t.filter_policy.clone())
            .collect()
    };
    let r_kinds = kinds(&r);
    let n_kinds = kinds(&n);
    assert!(!r_kinds.is_empty() && !n_kinds.is_empty());
    assert!(
        r_kinds.iter().all(|k| k.to_lowercase().contains("ribbon")),
        "{r_kinds:?}"
    );
    assert!(
        n_kinds.iter().all(|k| k.is_empty() || k == "none"),
        "{n_kinds:?}"
    );
}

#[test]
fn batches_across_keyspaces_are_seen_whole_by_concurrent_readers() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_size: 8 << 10,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
    let a = db.keyspace("a", options.clone()).unwrap();
    let b = db.keyspace("b", options).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, a, b, done) = (db.clone(), a.clone(), b.clone(), done.clone());
            std::thread::spawn(move || {
                let mut last = 0u64;
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    let snap = db.snapshot();
                    let read = |ks: &Keyspace| -> Option<u64> {
                        snap.in_keyspace(ks)
                            .unwrap()
                            .get("counter")
                            .unwrap()
                            .map(|v| std::str::from_utf8(&v).unwrap().parse().unwrap())
                    };
                    let (in_a, in_b, in_default) = (
                        read(&a),
                        read(&b),
                        snap.get("counter")
                            .unwrap()
                            .map(|v| std::str::from_utf8(&v).unwrap().parse::<u64>().unwrap()),
                    );
                    assert_eq!(in_a, in_b, "half a batch seen");
                    assert_eq!(in_a, in_default, "half a batch seen");
                    let now = in_a.unwrap_or(0);
                    assert!(now >= last, "went back from {last} to {now}");
                    last = now;
                    reads += 1;
                }
                (last, reads)
            })
        })
        .collect();
    let pad = "p".repeat(200);
    for i in 1..=3000u64 {
        let mut batch = WriteBatch::new();
        batch.put_in(&a, "counter", i.to_string());
        batch.put_in(&b, "counter", i.to_string());
        batch.put("counter", i.to_string());
        batch.put_in(&a, format!("pad{i}"), &pad);
        db.write(batch).unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        let (last, reads) = r.join().unwrap();
        assert!(reads > 0);
        assert!(last <= 3000);
    }
    assert_eq!(b.get("counter").unwrap().as_deref(), Some(&b"3000"[..]));
    assert!(
        a.stats().tables_per_level.iter().sum::<usize>() > 0,
        "a flushed meanwhile"
    );
}

#[test]
fn an_idle_keyspace_does_not_keep_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_size: 4 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let idle = db.keyspace("idle", options).unwrap();
    idle.put("once", "1").unwrap();
    idle.flush().unwrap();
    for i in 0..3000 {
        db.put(format!("k{i:05}"), "v".repeat(100)).unwrap();
    }
    db.flush().unwrap();
    let logs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".wal")
        })
        .count();
    assert!(logs <= 3, "{logs} logs kept");
    assert_eq!(idle.get("once").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_dropped_keyspace_leaves_nothing_and_its_name_can_be_used_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let old = db.keyspace("temp", Options::default()).unwrap();
    let keep = db.keyspace("keep", Options::default()).unwrap();
    old.put("k", "old").unwrap();
    old.flush().unwrap();
    old.put("unflushed", "x").unwrap();
    let old_dir = old.path().to_path_buf();
    assert!(old_dir.exists());
    db.drop_keyspace("temp").unwrap();
    assert!(!old_dir.exists(), "its directory is gone");
    assert!(db.drop_keyspace("temp").is_err(), "dropped twice");
    assert!(db.drop_keyspace("default").is_err());
    // A batch naming the dropped keyspace is refused whole.
    let mut batch = WriteBatch::new();
    batch.put_in(&keep, "k", "v");
    batch.put_in(&old, "k", "v");
    assert!(db.write(batch).is_err());
    assert_eq!(
        keep.get("k").unwrap(),
        None,
        "half of a refused batch was applied"
    );
    let new = db.keyspace("temp", Options::default()).unwrap();
    assert_ne!(new.id(), old.id(), "a number is never given twice");
    assert_eq!(new.get("k").unwrap(), None);
    db.close().unwrap();
    // Handles hold the store (and its lock) as snapshots do.
    drop((old, keep, new));
    // The dropped keyspace's writes are in the log; they are not replayed anywhere.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let new = db.keyspace("temp", Options::default()).unwrap();
    assert_eq!(new.get("unflushed").unwrap(), None);
    assert_eq!(db.get("unflushed").unwrap(), None);
    assert_eq!(db.keyspace_names(), ["keep", "temp"]);
}

#[test]
fn bad_names_and_foreign_keyspaces_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("one"), Options::default()).unwrap();
    let other = Db::open(dir.path().join("two"), Options::default()).unwrap();
    for bad in ["", ".x", "a/b", "with space"] {
        assert!(db.keyspace(bad, Options::default()).is_err(), "{bad:?}");
    }
    let theirs = other.keyspace("x", Options::default()).unwrap();
    assert!(db.snapshot().in_keyspace(&theirs).is_err());
    // A number this store never gave.
    let mut batch = WriteBatch::new();
    batch.put_in(&theirs, "k", "v");
    assert!(db.write(batch).is_err());
    // A read-only open cannot make one, but reads the ones there are.
    theirs.put("k", "v").unwrap();
    other.close().unwrap();
    let ro = Db::open(
        dir.path().join("two"),
        Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(ro.keyspace("new", Options::default()).is_err());
    let x = ro.keyspace("x", Options::default()).unwrap();
    assert_eq!(x.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(x.put("k", "w").is_err());
}

// ---- power loss at every file operation ----

const DIR: &str = "/db";

/// Synced writes; flushes only where the workload asks, so that every run makes the
/// same file operations in the same order (no background work to race).
fn fault_options(fs: &FaultFileSystem) -> Options {
    Options {
        sync_writes: true,
        disable_auto_compaction: true,
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    }
}

/// What the workload did: each cross-keyspace batch acknowledged (its number), and
/// whether the drop of "gone" was acknowledged.
#[derive(Default, Debug)]
struct Done {
    batches: u64,
    dropped: bool,
}

/// Makes "a" and "gone", writes batches across default, "a" and "gone", flushes,
/// drops "gone", writes more. Stops at the first error.
fn workload(fs: &FaultFileSystem) -> Done {
    let mut done = Done::default();
    let Ok(db) = Db::open(DIR, fault_options(fs)) else {
        return done;
    };
    let run = |done: &mut Done| -> bloomkv_kv::Result<()> {
        let a = db.keyspace("a", Options::default())?;
        let gone = db.keyspace("gone", Options::default())?;
        for i in 1..=60u64 {
            let mut batch = WriteBatch::new();
            let v = format!("{i}-{}", "z".repeat(80));
            batch.put(format!("k{}", i % 7), &v);
            batch.put_in(&a, format!("k{}", i % 7), &v);
            if !done.dropped {
                batch.put_in(&gone, format!("k{}", i % 7), &v);
            }
            db.write(batch)?;
            done.batches = i;
            if i == 20 {
                a.flush()?;
            }
            if i == 30 {
                db.flush()?;
            }
            if i == 40 {
                db.drop_keyspace("gone")?;
                done.dropped = true;
            }
        }
        Ok(())
    };
    let _ = run(&mut done);
    done
}

fn verify_after(mem: &MemFileSystem, done: &Done, when: &str) {
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, fault_options(&fs)).unwrap_or_else(|e| panic!("{when}: reopen: {e}"));
    let names = db.keyspace_names();
    let a = names
        .iter()
        .any(|n| n == "a")
        .then(|| db.keyspace("a", Options::default()).unwrap());
    for k in 0..7 {
        let key = format!("k{k}");
        let d = db.get(&key).unwrap();
        // Whole batches: "a" (if it exists) equals the default keyspace, key by key.
        if let Some(a) = &a {
            assert_eq!(a.get(&key).unwrap(), d, "{when}: half a batch in {key}");
        }
        if names.iter().any(|n| n == "gone") && !done.dropped {
            let g = db.keyspace("gone", Options::default()).unwrap();
            assert_eq!(
                g.get(&key).unwrap(),
                d,
                "{when}: half a batch in gone/{key}"
            );
        }
    }
    // Every acknowledged (synced) batch is there: the last one's key holds it or a later one.
    if done.batches > 0 {
        let i = done.batches;
        let v = db
            .get(format!("k{}", i % 7))
            .unwrap()
            .expect("acknowledged batch lost");
        let n: u64 = std::str::from_utf8(&v)
            .unwrap()
            .split('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(n >= i, "{when}: batch {i} acknowledged, {n} found");
        assert!(a.is_some(), "{when}: keyspace a lost");
    }
    if done.dropped {
        assert!(
            !names.iter().any(|n| n == "gone"),
            "{when}: a dropped keyspace came back"
        );
    }
    // Nothing of a keyspace the list does not name is left.
    let dirs: Vec<String> = mem
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("keyspace-"))
        .collect();
    assert!(dirs.len() <= names.len(), "{when}: {dirs:?} for {names:?}");
    db.put("after", "fault").unwrap();
    db.close().unwrap();
}

#[test]
fn a_fault_at_every_operation_of_batches_across_keyspaces_and_a_drop() {
    let total = {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        fs.record();
        let done = workload(&fs);
        assert_eq!(done.batches, 60);
        fs.take_log().len() as u64
    };
    eprintln!("{total} file operations, each failed by a power loss and by an I/O error");
    for fault in [Fault::PowerLoss, Fault::Error] {
        for at in 1..=total {
            let mem = MemFileSystem::new();
            let fs = FaultFileSystem::new(Arc::new(mem.clone()));
            fs.set_plan(FaultPlan::nth(at, &[], fault));
            let done = workload(&fs);
            assert!(fs.fired(), "operation {at} of {total} never ran");
            if fault == Fault::PowerLoss {
                let data = if at % 2 == 0 {
                    UnsyncedData::Lose
                } else {
                    UnsyncedData::KeepPrefix(at)
                };
                let dir_ops = if at % 3 == 0 {
                    DirOps::Keep
                } else {
                    DirOps::Lose
                };
                mem.power_loss(data, dir_ops);
            }
            // After an error, the program restarts on the same files.
            verify_after(
                &mem,
                &done,
                &format!("{fault:?} at operation {at} of {total}"),
            );
        }
    }
}

#[test]
fn a_keyspace_handle_that_outlives_the_store_holds_the_lock_and_takes_no_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("k", Options::default()).unwrap();
    ks.put("a", "1").unwrap();
    db.close().unwrap();
    assert!(ks.put("b", "2").is_err(), "a write after close");
    assert_eq!(
        ks.get("a").unwrap().as_deref(),
        Some(&b"1"[..]),
        "reads go on"
    );
    assert!(
        matches!(
            Db::open(dir.path(), Options::default()),
            Err(bloomkv_kv::Error::Locked(_))
        ),
        "the handle holds the directory"
    );
    drop(ks);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("k", Options::default()).unwrap();
    assert_eq!(ks.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(ks.get("b").unwrap(), None);
    // The clean close left its mark: the log was kept, not flushed.
    assert!(db.recovery_report().kept_in_memtable);
}

#[test]
fn a_checkpoint_taken_while_a_writer_runs_holds_every_keyspace_at_one_point() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_size: 16 << 10,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path().join("live"), options.clone()).unwrap());
    let a = db.keyspace("a", options.clone()).unwrap();
    let b = db
        .keyspace(
            "b",
            Options {
                filter: FilterKind::Ribbon,
                ..options
            },
        )
        .unwrap();
    let writer = {
        let (db, a, b) = (db.clone(), a.clone(), b.clone());
        std::thread::spawn(move || {
            for i in 1..=4000u64 {
                let mut batch = WriteBatch::new();
                batch.put("counter", i.to_string());
                batch.put_in(&a, "counter", i.to_string());
                batch.put_in(&b, "counter", i.to_string());
                batch.put_in(&b, format!("item{i:05}"), "x".repeat(50));
                db.write(batch).unwrap();
            }
        })
    };
    // Wait until the writer is well under way, then copy.
    let counter = |db: &Db| -> u64 {
        db.get("counter")
            .unwrap()
            .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap())
    };
    while counter(&db) < 1000 {
        std::thread::yield_now();
    }
    let copy = db.checkpoint(dir.path().join("copy")).unwrap();
    writer.join().unwrap();
    assert!(copy.linked + copy.copied > 0);

    let copied = Db::open(&copy.path, Options::default()).unwrap();
    assert_eq!(copied.keyspace_names(), ["a", "b"]);
    let (ca, cb) = (
        copied.keyspace("a", Options::default()).unwrap(),
        copied.keyspace("b", Options::default()).unwrap(),
    );
    let read = |v: Option<bytes::Bytes>| -> u64 {
        std::str::from_utf8(&v.unwrap()).unwrap().parse().unwrap()
    };
    let n = read(copied.get("counter").unwrap());
    assert_eq!(
        read(ca.get("counter").unwrap()),
        n,
        "half a batch in the copy"
    );
    assert_eq!(
        read(cb.get("counter").unwrap()),
        n,
        "half a batch in the copy"
    );
    assert!(
        (1000..4000).contains(&n),
        "the copy is of a moment during the writes: {n}"
    );
    // Exactly the writes up to that batch: every item up to n, none after.
    assert_eq!(
        cb.scan::<&str, _>(.."itemz")
            .filter(|kv| kv.as_ref().unwrap().0.starts_with(b"item"))
            .count() as u64,
        n
    );
    assert_eq!(cb.get(format!("item{:05}", n + 1)).unwrap(), None);
    // The source went on and holds everything.
    assert_eq!(read(b.get("counter").unwrap()), 4000);
}

// ---- SIGKILL while batches across keyspaces are written ----

const CHILD_ENV: &str = "BLOOMKV_KEYSPACE_CRASH_CHILD";
const MARK: &str = "#acked ";

fn crash_options() -> Options {
    Options {
        sync_writes: true,
        memtable_size: 16 << 10,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

/// The child: writes batches across three keyspaces forever, each one key (`k{i % 50}`)
/// set to `i` in all three, and prints `#acked i` once `write` returned.
#[test]
fn keyspace_crash_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // a normal test run: nothing to do
    };
    let db = Db::open(&dir, crash_options()).expect("child open");
    let a = db.keyspace("a", crash_options()).expect("a");
    let b = db
        .keyspace(
            "b",
            Options {
                filter: FilterKind::Ribbon,
                ..crash_options()
            },
        )
        .expect("b");
    let start: u64 = db
        .get("last")
        .expect("get")
        .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap());
    let mut out = std::io::stdout().lock();
    for i in start + 1.. {
        let key = format!("k{}", i % 50);
        let v = format!("{i}");
        let mut batch = WriteBatch::new();
        batch.put(&key, &v);
        batch.put("last", &v);
        batch.put_in(&a, &key, &v);
        batch.put_in(&b, &key, &v);
        db.write(batch).expect("write");
        use std::io::Write;
        writeln!(out, "{MARK}{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn batches_across_keyspaces_survive_sigkill_whole() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(41);
    let mut acked_total = 0u64;
    for round in 0..4 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "keyspace_crash_child_entry",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let wanted = acked_total + rng.gen_range(200..600);
        let mut acked = acked_total;
        let mut killed = false;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let Some(at) = line.find(MARK) else { continue };
            acked = line[at + MARK.len()..].trim().parse().unwrap();
            if !killed && acked >= wanted {
                child.kill().unwrap(); // SIGKILL
                killed = true;
            }
        }
        child.wait().unwrap();
        assert!(killed, "round {round}: the child stopped on its own");
        let db = Db::open(dir.path(), crash_options()).unwrap();
        let a = db.keyspace("a", Options::default()).unwrap();
        let b = db.keyspace("b", Options::default()).unwrap();
        let last: u64 = std::str::from_utf8(&db.get("last").unwrap().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            last >= acked,
            "round {round}: batch {acked} was acknowledged (synced), {last} recovered"
        );
        for k in 0..50 {
            let key = format!("k{k}");
            let d = db.get(&key).unwrap();
            assert_eq!(
                a.get(&key).unwrap(),
                d,
                "round {round}: half a batch in a/{key}"
            );
            assert_eq!(
                b.get(&key).unwrap(),
                d,
                "round {round}: half a batch in b/{key}"
            );
        }
        acked_total = last;
    }
}

// ---- repair ----

/// A store with flushed and unflushed writes in the default keyspace and two named ones.
fn store_for_repair(dir: &Path) {
    let db = Db::open(dir, Options::default()).unwrap();
    let a = db.keyspace("a", Options::default()).unwrap();
    let b = db.keyspace("b", made_with("ribbon")).unwrap();
    for i in 0..300 {
        db.put(format!("d{i:03}"), "default").unwrap();
        a.put(format!("a{i:03}"), "flushed").unwrap();
        b.put(format!("b{i:03}"), "flushed").unwrap();
    }
    db.flush().unwrap();
    a.flush().unwrap();
    b.flush().unwrap();
    for i in 0..50 {
        a.put(format!("a{i:03}"), "unflushed").unwrap();
        db.put(format!("d{i:03}"), "unflushed").unwrap();
    }
    a.delete("a299").unwrap();
    drop((a, b));
    db.close().unwrap();
}

fn check_repaired(dir: &Path, a_name: &str, when: &str) {
    let db = Db::open(dir, Options::default()).unwrap();
    let a = db.keyspace(a_name, Options::default()).unwrap();
    let names = db.keyspace_names();
    let b_name = names.iter().find(|n| n.as_str() != a_name).unwrap().clone();
    let b = db.keyspace(&b_name, Options::default()).unwrap();
    let get = |ks: &Keyspace, k: &str| {
        ks.get(k)
            .unwrap()
            .map(|v| String::from_utf8(v.to_vec()).unwrap())
    };
    for i in 0..300 {
        let want = if i < 50 { "unflushed" } else { "flushed" };
        let want_a = (i != 299).then_some(want);
        assert_eq!(
            get(&a, &format!("a{i:03}")).as_deref(),
            want_a,
            "{when}: a{i:03}"
        );
        assert_eq!(
            get(&b, &format!("b{i:03}")).as_deref(),
            Some("flushed"),
            "{when}: b{i:03}"
        );
        let want_d = if i < 50 { "unflushed" } else { "default" };
        assert_eq!(
            db.get(format!("d{i:03}")).unwrap().as_deref(),
            Some(want_d.as_bytes()),
            "{when}: d{i:03}"
        );
        assert_eq!(
            get(&a, &format!("d{i:03}")),
            None,
            "{when}: a default key in a"
        );
    }
}

#[test]
fn repair_rebuilds_the_root_and_hands_each_keyspace_its_unflushed_writes() {
    let dir = tempfile::tempdir().unwrap();
    store_for_repair(dir.path());
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    let report = bloomkv_kv::repair(dir.path(), Options::default()).unwrap();
    assert!(report.repaired);
    let a = report.keyspaces.iter().find(|k| k.name == "a").unwrap();
    assert!(a.table_written.is_some(), "{report}");
    assert_eq!(a.entries_from_logs, 51, "{report}");
    check_repaired(dir.path(), "a", "root rebuilt");
    let again = bloomkv_kv::repair(dir.path(), Options::default()).unwrap();
    assert!(!again.repaired, "{again}");
    check_repaired(dir.path(), "a", "repaired twice");
}

#[test]
fn repair_rebuilds_a_keyspace_whose_manifest_is_gone_and_keeps_its_log_writes() {
    let dir = tempfile::tempdir().unwrap();
    store_for_repair(dir.path());
    let a_dir = dir.path().join("keyspace-000001");
    std::fs::remove_file(a_dir.join("MANIFEST")).unwrap();
    assert!(
        Db::open(dir.path(), Options::default()).is_err(),
        "opens without its manifest"
    );
    let report = bloomkv_kv::repair(dir.path(), Options::default()).unwrap();
    assert!(report.repaired, "{report}");
    check_repaired(dir.path(), "a", "keyspace rebuilt");
}

#[test]
fn repair_rebuilds_a_damaged_keyspace_list_from_the_directories() {
    let dir = tempfile::tempdir().unwrap();
    store_for_repair(dir.path());
    let list = dir.path().join("KEYSPACES");
    let mut bytes = std::fs::read(&list).unwrap();
    bytes[14] ^= 0x40;
    std::fs::write(&list, bytes).unwrap();
    assert!(
        Db::open(dir.path(), Options::default()).is_err(),
        "a damaged list is refused"
    );
    let report = bloomkv_kv::repair(dir.path(), Options::default()).unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("KEYSPACES")),
        "{report}"
    );
    check_repaired(dir.path(), "keyspace-000001", "list rebuilt");
}
