//! Checkpoints: a copy taken while a writer runs opens and equals the store at the
//! sequence number it reports; a failure at any file operation of a checkpoint (an
//! error, or the power) leaves the source store whole and the copy either refused at
//! open or whole.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan};
use bloomkv_kv::fs::mem::{DirOps, MemFileSystem, UnsyncedData};
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Checkpoint, Db, Error, Options};

const KEYS: u64 = 97;

fn key(i: u64) -> String {
    format!("key{:04}", i % KEYS)
}

/// The value of the `i`th put (sequence number `i` in a fresh store): it names `i`.
fn value(i: u64) -> String {
    format!("seq{i:08}-{}", "v".repeat((i % 50) as usize))
}

/// The store after the puts `1..=seq`: each key's last value.
fn model(seq: u64) -> BTreeMap<String, String> {
    (1..=seq).map(|i| (key(i), value(i))).collect()
}

fn contents(db: &Db) -> BTreeMap<String, String> {
    db.scan::<&str, _>(..)
        .map(|r| {
            let (k, v) = r.unwrap();
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect()
}

fn small_tree() -> Options {
    Options {
        memtable_size: 32 << 10,
        target_file_size: 32 << 10,
        level1_max_bytes: 128 << 10,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

/// Checks that the copy at `ck` is the store after `ck.sequence` puts, by `get` and
/// by scan.
fn assert_copy_is_the_store_at_its_sequence(ck: &Checkpoint, options: Options) {
    let copy = Db::open(&ck.path, options).unwrap();
    let expected = model(ck.sequence);
    assert_eq!(contents(&copy), expected, "at sequence {}", ck.sequence);
    for k in 0..KEYS {
        let k = key(k);
        assert_eq!(
            copy.get(&k)
                .unwrap()
                .map(|v| String::from_utf8(v.to_vec()).unwrap()),
            expected.get(&k).cloned(),
            "{k} at sequence {}",
            ck.sequence
        );
    }
    // The copy is a store of its own: it takes writes and reopens.
    copy.put("after", "x").unwrap();
    copy.close().unwrap();
    let copy = Db::open(&ck.path, Options::default()).unwrap();
    assert_eq!(copy.get("after").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn a_checkpoint_taken_while_a_writer_runs_is_the_store_at_its_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("live"), small_tree()).unwrap());
    // How many puts have returned; the writer's i-th put gets sequence number i.
    let done = Arc::new(AtomicU64::new(0));
    let total = 30_000;
    let writer = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 1..=total {
                db.put(key(i), value(i)).unwrap();
                done.store(i, Ordering::Release);
            }
        })
    };
    let mut taken = Vec::new();
    for n in 0..4 {
        // Each checkpoint starts after at least a few thousand more puts.
        while done.load(Ordering::Acquire) < (n + 1) * 5_000 {
            std::thread::yield_now();
        }
        let before = done.load(Ordering::Acquire);
        let ck = db.checkpoint(dir.path().join(format!("ck{n}"))).unwrap();
        let after = done.load(Ordering::Acquire);
        // Every put that returned before the call is in it; none that started after.
        assert!(
            (before..=after + 1).contains(&ck.sequence),
            "sequence {} outside {before}..={}",
            ck.sequence,
            after + 1
        );
        assert_eq!(ck.linked + ck.copied, {
            let names = std::fs::read_dir(&ck.path).unwrap();
            names
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "sst")
                })
                .count()
        });
        taken.push(ck);
    }
    writer.join().unwrap();
    // The live store went on: flushes and compactions retired tables the copies hold.
    db.wait_for_compaction().unwrap();
    for ck in &taken {
        assert!(ck.linked > 0, "a temp directory links: {ck:?}");
        assert_copy_is_the_store_at_its_sequence(ck, small_tree());
    }
    assert_eq!(contents(&db), model(total));
}

#[test]
fn a_checkpoint_refuses_a_target_that_holds_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("live"), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("note"), "mine").unwrap();
    let err = db.checkpoint(&out).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(std::fs::read(out.join("note")).unwrap(), b"mine");
    // An empty directory is fine.
    std::fs::remove_file(out.join("note")).unwrap();
    let ck = db.checkpoint(&out).unwrap();
    assert_eq!(ck.sequence, 1);
}

#[test]
fn an_adaptive_stores_checkpoint_carries_its_probe_statistics() {
    use bloomkv_kv::probe_stats::ProbeStats;
    use bloomkv_kv::FilterAllocation;
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        filter_allocation: FilterAllocation::Adaptive,
        ..Options::default()
    };
    let db = Db::open(dir.path().join("live"), options()).unwrap();
    let k = |i: u64| format!("k{i:06}");
    for i in 0..2_000u64 {
        db.put(k(2 * i), "v").unwrap();
    }
    db.flush().unwrap();
    for i in 0..500u64 {
        assert_eq!(db.get(k(2 * i + 1)).unwrap(), None);
    }
    let out = dir.path().join("out");
    db.checkpoint(&out).unwrap();
    let fs = bloomkv_kv::fs::OsFileSystem;
    let copied = ProbeStats::read(&fs, &out)
        .unwrap()
        .expect("the checkpoint's PROBES");
    // Every absent get above was a lookup the statistics fold in.
    assert!(copied.lookups >= 500.0, "{copied:?}");
    db.close().unwrap();

    // The copy opens with them: its first flush plans from the learned weights, and
    // nothing is reported damaged.
    let copy = Db::open(&out, options()).unwrap();
    assert_eq!(copy.stats().probe_stats_damaged, 0);
    assert_eq!(copy.get(k(2)).unwrap().as_deref(), Some(&b"v"[..]));
    copy.close().unwrap();

    // Under the other allocations there is nothing to copy.
    let plain = Db::open(dir.path().join("plain"), Options::default()).unwrap();
    plain.put("k", "v").unwrap();
    plain.checkpoint(dir.path().join("plain-out")).unwrap();
    assert_eq!(
        ProbeStats::read(&fs, &dir.path().join("plain-out")).unwrap(),
        None
    );
}

const DIR: &str = "/live";
const OUT: &str = "/copy";

/// A store on `fs` with `puts` puts (sequence numbers 1..=puts), some in tables,
/// the last ones only in its memtable and log. No background work, so every run
/// performs the same file operations in the same order.
fn source(fs: &FaultFileSystem, puts: u64) -> Db {
    let options = Options {
        file_system: Arc::new(fs.clone()),
        sync_writes: true,
        ..options_on(fs)
    };
    let db = Db::open(DIR, options).unwrap();
    for i in 1..=puts {
        db.put(key(i), value(i)).unwrap();
        if i % 150 == 0 {
            db.flush().unwrap();
        }
    }
    db
}

fn options_on(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        disable_auto_compaction: true,
        ..Options::default()
    }
}

/// As [`options_on`], for a store that must exist already.
fn existing_on(fs: &FaultFileSystem) -> Options {
    Options {
        create_if_missing: false,
        ..options_on(fs)
    }
}

/// After a failed checkpoint: the target has no manifest and does not open as a
/// store (unless nothing of it is left at all).
fn assert_incomplete(fs: &FaultFileSystem, at: u64) {
    let out = Path::new(OUT);
    assert!(
        !fs.exists(&out.join("MANIFEST")),
        "op {at}: a failed checkpoint left a MANIFEST"
    );
    if fs.exists(out) && !fs.list(out).unwrap().is_empty() {
        let names = fs.list(out).unwrap();
        let opened = Db::open(out, existing_on(fs));
        assert!(opened.is_err(), "op {at}: {names:?} opened as a store");
    }
}

#[test]
fn an_error_at_any_step_of_a_checkpoint_leaves_both_stores_sound() {
    let puts = 400;
    // Count the checkpoint's operations once.
    let ops = {
        let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
        let db = source(&fs, puts);
        fs.set_plan(FaultPlan::none());
        db.checkpoint(OUT).unwrap();
        fs.ops()
    };
    assert!(ops > 10, "{ops} operations");
    let mut failed = 0;
    for at in 1..=ops {
        let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
        let db = source(&fs, puts);
        fs.set_plan(FaultPlan::nth(at, &[], Fault::Error));
        let result = db.checkpoint(OUT);
        fs.set_plan(FaultPlan::none());
        match result {
            Ok(ck) => {
                assert_eq!(ck.sequence, puts);
                let copy = Db::open(OUT, existing_on(&fs)).unwrap();
                assert_eq!(contents(&copy), model(puts), "op {at}");
            }
            Err(_) => {
                failed += 1;
                assert_incomplete(&fs, at);
            }
        }
        // The source reads every write, now and after a reopen.
        assert_eq!(contents(&db), model(puts), "op {at}");
        drop(db);
        let db = Db::open(DIR, existing_on(&fs)).unwrap();
        assert_eq!(contents(&db), model(puts), "op {at}");
    }
    // Most operations matter: a sweep whose faults all go unnoticed tests nothing.
    assert!(
        failed * 2 > ops,
        "{failed} of {ops} faults failed the checkpoint"
    );
}

#[test]
fn a_power_loss_at_any_step_of_a_checkpoint_leaves_a_whole_copy_or_none() {
    let puts = 400;
    let ops = {
        let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
        let db = source(&fs, puts);
        fs.set_plan(FaultPlan::none());
        db.checkpoint(OUT).unwrap();
        fs.ops()
    };
    let mut whole = 0;
    for at in 1..=ops + 1 {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        let db = source(&fs, puts);
        fs.set_plan(FaultPlan::nth(at, &[], Fault::PowerLoss));
        let result = db.checkpoint(OUT);
        drop(db);
        mem.power_loss(UnsyncedData::Lose, DirOps::Lose);
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        // Every put was synced: the source has them all.
        let db = Db::open(DIR, existing_on(&fs)).unwrap();
        assert_eq!(contents(&db), model(puts), "op {at}");
        if fs.exists(&Path::new(OUT).join("MANIFEST")) {
            whole += 1;
            let copy = Db::open(OUT, existing_on(&fs)).unwrap();
            assert_eq!(contents(&copy), model(puts), "op {at}");
        } else {
            assert!(
                result.is_err(),
                "op {at}: success without a durable MANIFEST"
            );
            assert_incomplete(&fs, at);
        }
    }
    // Past the last operation the power never fails: at least that copy is whole.
    assert!(whole >= 1);
}
