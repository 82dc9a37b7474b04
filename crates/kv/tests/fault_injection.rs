//! Fault injection at every file operation of a workload.
//!
//! A fixed workload of more than 1,000 store operations (puts, deletes, batches, gets,
//! scans, flushes, compactions and a reopen) runs on an in-memory file system behind a
//! [`FaultFileSystem`]. A first run counts its file operations; then the workload is
//! re-run once per operation with that operation failing, for each kind of fault:
//!
//! * `Error`: the operation returns an I/O error;
//! * `ShortWrite`: an append writes half its bytes, then errors (appends only);
//! * `NoSpace`: from the chosen append on, the disk is full (every create and append
//!   fails) until the run ends; no temp file may be left, and the checks then run on
//!   the same files with space freed (appends only);
//! * `PowerLoss`: the operation and everything after it fail, then the file system
//!   forgets what was not durable (unsynced bytes, or a random prefix of them;
//!   directory entries not synced) and the store is reopened — sometimes crashing a
//!   second time during that recovery.
//!
//! After each run the checks are: no panic; every call either returned an error or
//! had its effect; a reopen on the surviving files succeeds; every acknowledged write
//! (synced, with `sync_writes`) is there; no read ever returns a value that was never
//! written for that key or that a later acknowledged write replaced. Without
//! `sync_writes`, the state after a power loss must be exactly the state after some
//! prefix of the acknowledged operations, at least up to the last flush.
//!
//! A second family of sweeps fails the power during recovery itself: at every file
//! operation of a recovery open (a kept log, and a damaged tail flushed to a table)
//! and of `repair` (no manifest, a damaged table), and, in the `#[ignore]` version,
//! again at every operation of the recovery or repair that follows.
//!
//! The default run sweeps a share of the failure points; the `#[ignore]` tests sweep
//! every one (`cargo test --release -p bloomkv-kv --test fault_injection -- --ignored`).

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
use bloomkv_kv::fs::mem::{DirOps, MemFileSystem, UnsyncedData};
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Db, Error, Options, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/db";
const KEYS: u32 = 150;

type Key = Vec<u8>;
type Value = Option<Vec<u8>>;

#[derive(Debug, Clone)]
enum Step {
    Write(Vec<(Key, Value)>),
    /// A batch of these puts and deletes, then a range delete of `key(a)..key(b)`.
    WriteRange(Vec<(Key, Value)>, u32, u32),
    Get(Key),
    Scan,
    Flush,
    Compact,
    Reopen,
}

fn key(i: u32) -> Key {
    format!("key{i:04}").into_bytes()
}

/// The fixed workload: 1,060 writes, gets, scans, 3 flushes, 2 compactions, a reopen.
fn workload() -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(5);
    let mut steps = Vec::new();
    let writes = |steps: &mut Vec<Step>, n: usize, rng: &mut StdRng| {
        for _ in 0..n {
            let len = rng.gen_range(1..4);
            let ops: Vec<(Key, Value)> = (0..len)
                .map(|_| {
                    let k = key(rng.gen_range(0..KEYS));
                    let v = (rng.gen_range(0..100) >= 15).then(|| {
                        let mut v = format!("v{}-", steps.len()).into_bytes();
                        v.extend(std::iter::repeat_n(b'x', rng.gen_range(0..40)));
                        v
                    });
                    (k, v)
                })
                .collect();
            // Mostly single puts and deletes; some batches of two or three.
            let ops = if rng.gen_bool(0.85) {
                ops[..1].to_vec()
            } else {
                ops
            };
            steps.push(Step::Write(ops));
            if rng.gen_bool(0.33) {
                steps.push(Step::Get(key(rng.gen_range(0..KEYS))));
            }
            if rng.gen_bool(0.01) {
                steps.push(Step::Scan);
            }
        }
    };
    writes(&mut steps, 300, &mut rng);
    // Range deletes in batches beside a put and a delete: in the memtable and its log
    // here, then in tables (flushed, compacted, reopened) as the workload goes on.
    let range = |steps: &mut Vec<Step>, a: u32, b: u32| {
        let ops = vec![(key(a), Some(b"before".to_vec())), (key(b + 1), None)];
        steps.push(Step::WriteRange(ops, a, b));
    };
    range(&mut steps, 10, 30);
    steps.push(Step::Flush);
    writes(&mut steps, 300, &mut rng);
    range(&mut steps, 60, 75);
    steps.push(Step::Flush);
    steps.push(Step::Compact);
    writes(&mut steps, 200, &mut rng);
    steps.push(Step::Reopen);
    writes(&mut steps, 200, &mut rng);
    steps.push(Step::Flush);
    range(&mut steps, 100, 140);
    writes(&mut steps, 60, &mut rng);
    steps.push(Step::Compact);
    steps
}

std::thread_local! {
    /// Whether this thread's runs let the store flush and compact on its own.
    static BACKGROUND: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn options(fs: &FaultFileSystem, sync_writes: bool) -> Options {
    let deterministic = Options {
        sync_writes,
        // Large enough that only the workload's own flushes write tables, so the
        // sequence of file operations is the same on every run.
        memtable_size: 1 << 20,
        disable_auto_compaction: true,
        block_size: 512,
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    };
    if BACKGROUND.with(|b| b.get()) {
        // Small memtables and an eager compaction trigger: the background thread
        // flushes and compacts on its own, at moments no run repeats exactly.
        Options {
            memtable_size: 4 * 1024,
            disable_auto_compaction: false,
            l0_compaction_trigger: 2,
            level1_max_bytes: 16 * 1024,
            target_file_size: 8 * 1024,
            ..deterministic
        }
    } else {
        deterministic
    }
}

/// What each key may read as: the last acknowledged value, plus the values of writes
/// that returned an error (they may or may not have happened).
#[derive(Debug, Default, Clone)]
struct Allowed(BTreeMap<Key, Vec<Value>>);

impl Allowed {
    fn acked(&mut self, k: &Key, v: &Value) {
        self.0.insert(k.clone(), vec![v.clone()]);
    }

    fn maybe(&mut self, k: &Key, v: &Value) {
        self.0
            .entry(k.clone())
            .or_insert_with(|| vec![None])
            .push(v.clone());
    }

    fn check(&self, k: &Key, got: &Value, when: &str) {
        let none = vec![None];
        let allowed = self.0.get(k).unwrap_or(&none);
        assert!(
            allowed.contains(got),
            "{when}: key {} reads {:?}, allowed {:?}",
            String::from_utf8_lossy(k),
            got.as_deref().map(String::from_utf8_lossy),
            allowed
                .iter()
                .map(|v| v.as_deref().map(String::from_utf8_lossy))
                .collect::<Vec<_>>()
        );
    }
}

/// What one run of the workload did.
#[derive(Default)]
struct Outcome {
    allowed: Allowed,
    /// The writes that were acknowledged, in order (for the prefix check).
    acked: Vec<Vec<(Key, Value)>>,
    /// A write that returned an error (the first one, when the run stopped at it).
    failed: Option<Vec<(Key, Value)>>,
    /// Acknowledged writes that a later successful flush, compaction or close made
    /// durable even without `sync_writes`.
    durable: usize,
    errors: usize,
}

fn as_value(got: Result<Option<bytes::Bytes>, Error>) -> Option<Value> {
    got.ok().map(|v| v.map(|b| b.to_vec()))
}

/// Runs `steps`; stops early when the power is gone or the store cannot reopen.
fn run(fs: &FaultFileSystem, steps: &[Step], sync: bool) -> Outcome {
    let mut out = Outcome::default();
    let Ok(mut db) = Db::open(DIR, options(fs, sync)) else {
        out.errors += 1;
        return out;
    };
    for (i, step) in steps.iter().enumerate() {
        if fs.powered_off() {
            break;
        }
        let when = format!("step {i} ({step:?})");
        match step {
            Step::Write(_) | Step::WriteRange(..) => {
                let mut batch = WriteBatch::new();
                let (ops, range) = match step {
                    Step::WriteRange(ops, a, b) => (ops, Some((*a, *b))),
                    Step::Write(ops) => (ops, None),
                    _ => unreachable!(),
                };
                for (k, v) in ops {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    };
                }
                // To the checks, a range delete is a delete of every key it covers
                // (the workload's keys are `key(0..KEYS)`), after the batch's other ops.
                let mut ops = ops.clone();
                if let Some((a, b)) = range {
                    batch.delete_range(key(a), key(b));
                    ops.extend((a..b).map(|i| (key(i), None)));
                }
                let ops = &ops;
                match db.write(batch) {
                    Ok(()) => {
                        ops.iter().for_each(|(k, v)| out.allowed.acked(k, v));
                        out.acked.push(ops.clone());
                    }
                    Err(_) => {
                        out.errors += 1;
                        ops.iter().for_each(|(k, v)| out.allowed.maybe(k, v));
                        if out.failed.is_none() {
                            out.failed = Some(ops.clone());
                        }
                        if !sync {
                            // Without fsync the order of later writes against this one
                            // after a crash is not defined: stop, as a crashed
                            // program would.
                            break;
                        }
                    }
                }
            }
            Step::Get(k) => match as_value(db.get(k)) {
                Some(v) => out.allowed.check(k, &v, &when),
                None => out.errors += 1,
            },
            Step::Scan => {
                for item in db.scan::<&[u8], _>(..) {
                    match item {
                        Ok((k, v)) => out.allowed.check(&k.to_vec(), &Some(v.to_vec()), &when),
                        Err(_) => {
                            out.errors += 1;
                            break;
                        }
                    }
                }
            }
            Step::Flush | Step::Compact => {
                let r = if matches!(step, Step::Flush) {
                    db.flush()
                } else {
                    db.compact()
                };
                match r {
                    Ok(()) if out.failed.is_none() => out.durable = out.acked.len(),
                    Ok(()) => {}
                    Err(_) => out.errors += 1,
                }
            }
            Step::Reopen => {
                match db.close() {
                    Ok(()) if out.failed.is_none() => out.durable = out.acked.len(),
                    Ok(()) => {}
                    Err(_) => out.errors += 1,
                }
                match Db::open(DIR, options(fs, sync)) {
                    Ok(d) => db = d,
                    Err(_) => {
                        out.errors += 1;
                        return out;
                    }
                }
            }
        }
    }
    drop(db);
    out
}

/// Every key of the recovered store, read with `get` and with one full scan, which
/// must agree.
fn read_all(db: &Db, when: &str) -> BTreeMap<Key, Vec<u8>> {
    let scanned: BTreeMap<Key, Vec<u8>> = db
        .scan::<&[u8], _>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{when}: scan after reopen: {e}"));
    for i in 0..KEYS {
        let k = key(i);
        let got = db
            .get(&k)
            .unwrap_or_else(|e| panic!("{when}: get after reopen: {e}"))
            .map(|b| b.to_vec());
        assert_eq!(
            got.as_ref(),
            scanned.get(&k),
            "{when}: get and scan disagree"
        );
    }
    assert!(
        scanned.keys().all(|k| k.starts_with(b"key")),
        "{when}: stray key"
    );
    scanned
}

/// Opens the surviving files (with no fault), checks them against `out`, and checks
/// the store still takes writes.
fn verify(mem: &MemFileSystem, out: &Outcome, sync: bool, when: &str) {
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(&fs, sync))
        .unwrap_or_else(|e| panic!("{when}: reopen after the fault failed: {e}"));
    let state = read_all(&db, when);
    if sync {
        for i in 0..KEYS {
            let k = key(i);
            out.allowed.check(&k, &state.get(&k).cloned(), when);
        }
    } else {
        check_prefix(&state, out, when);
    }
    db.put("after", "fault").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"fault"[..]));
    db.close().unwrap();
}

/// The recovered state is the state after some prefix of the acknowledged writes (plus
/// possibly the one that failed), and that prefix includes every write made durable.
fn check_prefix(state: &BTreeMap<Key, Vec<u8>>, out: &Outcome, when: &str) {
    let mut model: BTreeMap<Key, Vec<u8>> = BTreeMap::new();
    // Keys where the model and the recovered state differ.
    let mut diff: usize = state.len();
    let differs = |model: &BTreeMap<Key, Vec<u8>>, k: &Key| model.get(k) != state.get(k);
    let mut matches = Vec::new();
    if diff == 0 {
        matches.push(0);
    }
    let writes = out.acked.iter().chain(out.failed.iter());
    for (n, ops) in writes.enumerate() {
        for (k, v) in ops {
            let before = differs(&model, k);
            match v {
                Some(v) => model.insert(k.clone(), v.clone()),
                None => model.remove(k),
            };
            let after = differs(&model, k);
            diff = diff + after as usize - before as usize;
        }
        if diff == 0 {
            matches.push(n + 1);
        }
    }
    assert!(
        matches.iter().any(|&n| n >= out.durable),
        "{when}: recovered state is no prefix of the acknowledged writes at or after the \
         last durable point {} (prefixes matching: {matches:?}; {} acknowledged)",
        out.durable,
        out.acked.len()
    );
}

fn fresh() -> (MemFileSystem, FaultFileSystem) {
    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    (mem, fs)
}

/// The number of file operations the workload performs (all kinds, and appends).
fn count_ops(steps: &[Step], sync: bool) -> (u64, u64) {
    let (_, fs) = fresh();
    fs.record();
    let out = run(&fs, steps, sync);
    assert_eq!(out.errors, 0, "the workload runs cleanly without faults");
    let log = fs.take_log();
    let appends = log.iter().filter(|k| **k == OpKind::Append).count() as u64;
    (log.len() as u64, appends)
}

/// Figures of one sweep, printed for docs/RELIABILITY.md.
#[derive(Debug, Default)]
struct Tally {
    points: u64,
    call_errors: usize,
}

fn one_point(steps: &[Step], sync: bool, fault: Fault, at: u64, tally: &mut Tally) {
    let (mem, fs) = fresh();
    let kinds: &[OpKind] = if matches!(fault, Fault::ShortWrite | Fault::NoSpace) {
        &[OpKind::Append]
    } else {
        &[]
    };
    fs.set_plan(FaultPlan::nth(at, kinds, fault));
    let out = run(&fs, steps, sync);
    let when = format!("{fault:?} at operation {at} (sync_writes = {sync})");
    assert!(fs.fired(), "{when}: the fault never fired");
    tally.points += 1;
    tally.call_errors += out.errors;
    match fault {
        Fault::PowerLoss => {
            let data = if at.is_multiple_of(2) {
                UnsyncedData::Lose
            } else {
                UnsyncedData::KeepPrefix(at)
            };
            let dir_ops = if at.is_multiple_of(3) {
                DirOps::Keep
            } else {
                DirOps::Lose
            };
            mem.power_loss(data, dir_ops);
            // Every other time, the power fails again while the store recovers.
            if at % 2 == 1 {
                let fs = FaultFileSystem::new(Arc::new(mem.clone()));
                fs.set_plan(FaultPlan::nth(1 + at % 37, &[], Fault::PowerLoss));
                drop(Db::open(DIR, options(&fs, sync)));
                mem.power_loss(UnsyncedData::Lose, DirOps::Lose);
            }
            verify(&mem, &out, sync, &when);
        }
        Fault::Panic => panic!("the sweep injects no panics"),
        Fault::Error | Fault::ShortWrite | Fault::NoSpace => {
            if fault == Fault::NoSpace {
                // A full disk leaves no temp file behind, even before any reopen.
                let names = mem.list(std::path::Path::new(DIR)).unwrap_or_default();
                let temps: Vec<&String> = names.iter().filter(|n| n.ends_with(".tmp")).collect();
                assert!(temps.is_empty(), "{when}: {temps:?}");
            }
            // The program restarts on the same files...
            let crashed = mem.deep_copy();
            verify(&mem, &out, sync, &format!("{when}, restart"));
            // ...or the machine loses power right after the fault.
            crashed.power_loss(UnsyncedData::Lose, DirOps::Lose);
            if sync {
                verify(&crashed, &out, sync, &format!("{when}, then power loss"));
            }
        }
    }
}

/// Sweeps `fault` over every `stride`-th operation (offset so different strides
/// cover different points).
fn sweep(sync: bool, fault: Fault, stride: u64) -> Tally {
    let steps = workload();
    let (ops, appends) = count_ops(&steps, sync);
    let points = if matches!(fault, Fault::ShortWrite | Fault::NoSpace) {
        appends
    } else {
        ops
    };
    let mut tally = Tally::default();
    let start = 1 + (points % stride.max(1)) / 2;
    let mut at = start;
    while at <= points {
        one_point(&steps, sync, fault, at, &mut tally);
        at += stride;
    }
    eprintln!(
        "{fault:?} (sync_writes = {sync}): {} of {points} failure points swept \
         ({ops} file operations, {appends} appends in the workload); {} calls returned \
         an error; 0 wrong answers",
        tally.points, tally.call_errors
    );
    tally
}

#[test]
fn the_workload_is_big_enough_and_deterministic() {
    let steps = workload();
    let store_ops = steps.len();
    assert!(store_ops >= 1000, "{store_ops} store operations");
    let (a, appends) = count_ops(&steps, true);
    let (b, _) = count_ops(&steps, true);
    assert_eq!(a, b, "the same workload performs the same file operations");
    assert!(
        a >= 2000 && appends >= 1000,
        "{a} file operations, {appends} appends"
    );
    let count = |f: fn(&Step) -> bool| steps.iter().filter(|s| f(s)).count();
    eprintln!(
        "workload: {store_ops} store operations ({} writes, {} gets, {} scans, {} flushes, \
         {} compactions, {} reopen), {a} file operations, {appends} appends",
        count(|s| matches!(s, Step::Write(_))),
        count(|s| matches!(s, Step::Get(_))),
        count(|s| matches!(s, Step::Scan)),
        count(|s| matches!(s, Step::Flush)),
        count(|s| matches!(s, Step::Compact)),
        count(|s| matches!(s, Step::Reopen)),
    );
}

#[test]
fn io_errors_at_a_share_of_the_points_lose_no_synced_write() {
    sweep(true, Fault::Error, 13);
}

#[test]
fn short_writes_at_a_share_of_the_points_lose_no_synced_write() {
    sweep(true, Fault::ShortWrite, 11);
}

#[test]
fn a_full_disk_at_a_share_of_the_appends_loses_no_synced_write() {
    sweep(true, Fault::NoSpace, 11);
}

#[test]
#[ignore = "full sweep: minutes; run with --release -- --ignored"]
fn a_full_disk_at_every_append_loses_no_synced_write() {
    sweep(true, Fault::NoSpace, 1);
}

#[test]
fn power_loss_at_a_share_of_the_points_loses_no_synced_write() {
    sweep(true, Fault::PowerLoss, 13);
}

#[test]
fn power_loss_without_sync_recovers_a_prefix_at_a_share_of_the_points() {
    sweep(false, Fault::PowerLoss, 17);
}

#[test]
#[ignore = "full sweep: minutes; run with --release -- --ignored"]
fn io_errors_at_every_point_lose_no_synced_write() {
    sweep(true, Fault::Error, 1);
}

#[test]
#[ignore = "full sweep: minutes; run with --release -- --ignored"]
fn short_writes_at_every_append_lose_no_synced_write() {
    sweep(true, Fault::ShortWrite, 1);
}

#[test]
#[ignore = "full sweep: minutes; run with --release -- --ignored"]
fn power_loss_at_every_point_loses_no_synced_write() {
    sweep(true, Fault::PowerLoss, 1);
}

#[test]
#[ignore = "full sweep: minutes; run with --release -- --ignored"]
fn power_loss_without_sync_at_every_point_recovers_a_prefix() {
    sweep(false, Fault::PowerLoss, 1);
}

/// Faults at random points while the background thread flushes and compacts on its
/// own: the operation numbers differ from run to run, so points are drawn at random.
fn background_faults(runs: u64) {
    BACKGROUND.with(|b| b.set(true));
    let steps = workload();
    let mut rng = StdRng::seed_from_u64(17);
    let mut fired = 0;
    for run_no in 0..runs {
        let fault = [Fault::Error, Fault::ShortWrite, Fault::PowerLoss][run_no as usize % 3];
        // About 3,700 operations per run, 1,150 of them appends.
        let at = if fault == Fault::ShortWrite {
            rng.gen_range(1..1150)
        } else {
            rng.gen_range(1..3700)
        };
        let (mem, fs) = fresh();
        let kinds: &[OpKind] = if fault == Fault::ShortWrite {
            &[OpKind::Append]
        } else {
            &[]
        };
        fs.set_plan(FaultPlan::nth(at, kinds, fault));
        let out = run(&fs, &steps, true);
        let when = format!("background run {run_no}: {fault:?} at operation {at}");
        fired += fs.fired() as u32;
        if fault == Fault::PowerLoss {
            mem.power_loss(UnsyncedData::KeepPrefix(at), DirOps::Lose);
        }
        verify(&mem, &out, true, &when);
    }
    eprintln!("background faults: {runs} runs, {fired} faults fired; 0 wrong answers");
}

#[test]
fn faults_during_background_flushes_and_compactions_lose_no_synced_write() {
    background_faults(60);
}

#[test]
#[ignore = "a few minutes; run with --release -- --ignored"]
fn faults_during_background_work_many_runs() {
    background_faults(2000);
}

// ---- Power loss during recovery and during repair ----
//
// A store is built once (a table of `a` keys, a newer table of `b` keys that also
// overwrites some `a` keys, `c` keys left in the log, all synced) and put in one of four
// states. Then one operation runs with the power failing at its Nth file operation,
// for every N: a recovery open followed by one synced write and a close (the log kept,
// or, with a damaged tail, flushed to a table and replaced), or a `repair` (of a store
// whose manifest is gone, or one of whose tables is damaged). After the power loss the
// store must recover: opened directly after a recovery crash, or repaired again after
// a repair crash, every synced key reads right, the write after recovery is there if it
// was acknowledged, and a damaged table is still on disk (in place or under `lost/`).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    RecoverKeptLog,
    RecoverDamagedTail,
    RepairWithoutManifest,
    RepairDamagedTable,
}

/// The base store, its model, and the damaged table's bytes (if one was damaged).
fn phase_store(phase: Phase) -> (MemFileSystem, BTreeMap<Key, Vec<u8>>, Option<Vec<u8>>) {
    let (mem, fs) = fresh();
    let mut model = BTreeMap::new();
    let db = Db::open(DIR, options(&fs, true)).unwrap();
    let mut put = |db: &Db, k: String, v: String| {
        db.put(&k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    };
    for i in 0..40 {
        put(&db, format!("a{i:03}"), format!("a-old{i}"));
    }
    db.flush().unwrap();
    for i in 0..40 {
        put(&db, format!("b{i:03}"), format!("b{i}"));
        if i % 4 == 0 {
            put(&db, format!("a{i:03}"), format!("a-new{i}"));
        }
    }
    db.flush().unwrap();
    for i in 0..30 {
        put(&db, format!("c{i:03}"), format!("c{i}"));
    }
    db.close().unwrap();
    let dir = std::path::Path::new(DIR);
    let files = |ext: &str| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = mem
            .paths()
            .into_iter()
            .filter(|p| p.parent() == Some(dir) && p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    };
    let mut damaged = None;
    match phase {
        Phase::RecoverKeptLog => {}
        Phase::RecoverDamagedTail => {
            let wal = files("wal").pop().unwrap();
            let mut bytes = mem.file_bytes(&wal).unwrap();
            bytes.extend_from_slice(&[0x33; 50]);
            mem.set_file_bytes(&wal, bytes);
        }
        Phase::RepairWithoutManifest => {
            mem.remove(&dir.join("MANIFEST")).unwrap();
            mem.sync_dir(dir).unwrap();
        }
        Phase::RepairDamagedTable => {
            let table = files("sst")[0].clone(); // the `a` table
            let mut bytes = mem.file_bytes(&table).unwrap();
            bytes[30] ^= 0x04;
            mem.set_file_bytes(&table, bytes.clone());
            damaged = Some(bytes);
        }
    }
    (mem, model, damaged)
}

/// The operation a phase sweeps: `Some(true)` if a write after recovery was
/// acknowledged.
fn phase_op(phase: Phase, fs: &FaultFileSystem) -> bool {
    match phase {
        Phase::RecoverKeptLog | Phase::RecoverDamagedTail => {
            let Ok(db) = Db::open(DIR, options(fs, true)) else {
                return false;
            };
            let acked = db.put("after", "recovery").is_ok();
            let _ = db.close();
            acked
        }
        Phase::RepairWithoutManifest | Phase::RepairDamagedTable => {
            let _ = bloomkv_kv::repair(DIR, options(fs, true));
            false
        }
    }
}

fn phase_check(
    phase: Phase,
    mem: &MemFileSystem,
    model: &BTreeMap<Key, Vec<u8>>,
    damaged: &Option<Vec<u8>>,
    acked: bool,
    when: &str,
) {
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    if matches!(
        phase,
        Phase::RepairWithoutManifest | Phase::RepairDamagedTable
    ) {
        bloomkv_kv::repair(DIR, options(&fs, true))
            .unwrap_or_else(|e| panic!("{when}: repair after the power loss: {e}"));
        if let Some(bytes) = damaged {
            assert!(
                mem.paths()
                    .iter()
                    .any(|p| mem.file_bytes(p).as_ref() == Some(bytes)),
                "{when}: the damaged table was deleted"
            );
        }
    }
    let db = Db::open(DIR, options(&fs, true))
        .unwrap_or_else(|e| panic!("{when}: open after the power loss: {e}"));
    for (k, v) in model {
        let got = db.get(k).unwrap().map(|b| b.to_vec());
        // Only the damaged `a` table's own newest values may be lost to repair.
        let lost_ok = phase == Phase::RepairDamagedTable && k.starts_with(b"a");
        if lost_ok {
            assert!(
                got.is_none() || got.as_ref() == Some(v),
                "{when}: {k:?} = {got:?}"
            );
        } else {
            assert_eq!(
                got.as_ref(),
                Some(v),
                "{when}: key {}",
                String::from_utf8_lossy(k)
            );
        }
    }
    if acked {
        assert_eq!(
            db.get("after").unwrap().as_deref(),
            Some(&b"recovery"[..]),
            "{when}"
        );
    }
    db.close().unwrap();
}

/// The recovery that follows a crash (a repair, or an open and close), with the power
/// failing again at its `at`-th file operation.
fn crash_the_follow_up(phase: Phase, mem: &MemFileSystem, at: u64) -> bool {
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    fs.set_plan(FaultPlan::nth(at, &[], Fault::PowerLoss));
    match phase {
        Phase::RepairWithoutManifest | Phase::RepairDamagedTable => {
            let _ = bloomkv_kv::repair(DIR, options(&fs, true));
        }
        _ => {
            if let Ok(db) = Db::open(DIR, options(&fs, true)) {
                let _ = db.close();
            }
        }
    }
    mem.power_loss(UnsyncedData::KeepPrefix(at), DirOps::Lose);
    fs.fired()
}

/// Power loss at every `stride`-th file operation of a phase's operation; with
/// `second`, also at every point of the recovery (or repair) that follows it.
fn phase_sweep(phase: Phase, stride: u64, second: bool) -> u64 {
    let (base, model, damaged) = phase_store(phase);
    let ops = {
        let copy = base.deep_copy();
        let fs = FaultFileSystem::new(Arc::new(copy.clone()));
        fs.record();
        phase_op(phase, &fs);
        fs.take_log().len() as u64
    };
    let mut swept = 0;
    let mut at = 1;
    while at <= ops {
        let mem = base.deep_copy();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        fs.set_plan(FaultPlan::nth(at, &[], Fault::PowerLoss));
        let acked = phase_op(phase, &fs);
        let when = format!("{phase:?}: power loss at operation {at} of {ops}");
        assert!(fs.fired(), "{when}: never fired");
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
        if second {
            // Up to 80 points of the follow-up: more than any recovery here performs.
            for again in 1..=80 {
                let copy = mem.deep_copy();
                if !crash_the_follow_up(phase, &copy, again) {
                    break; // the follow-up finished before this point
                }
                let when = format!("{when}, then again at {again}");
                phase_check(phase, &copy, &model, &damaged, acked, &when);
                swept += 1;
            }
        }
        phase_check(phase, &mem, &model, &damaged, acked, &when);
        swept += 1;
        at += stride;
    }
    eprintln!(
        "{phase:?}: {ops} file operations, {swept} power losses swept (second crash \
         during the follow-up: {second}); 0 wrong answers"
    );
    swept
}

const PHASES: [Phase; 4] = [
    Phase::RecoverKeptLog,
    Phase::RecoverDamagedTail,
    Phase::RepairWithoutManifest,
    Phase::RepairDamagedTable,
];

#[test]
fn power_loss_during_recovery_and_repair_at_every_point() {
    for phase in PHASES {
        phase_sweep(phase, 1, false);
    }
}

#[test]
#[ignore = "every pair of points: a few minutes; run with --release -- --ignored"]
fn power_loss_during_recovery_and_repair_then_again_during_the_next_recovery() {
    for phase in PHASES {
        phase_sweep(phase, 1, true);
    }
}
