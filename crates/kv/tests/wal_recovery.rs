//! The four `WalRecovery` modes against damaged logs, trial by trial.
//!
//! Each trial writes a store (some keys in a table, the rest in the log, all synced),
//! damages its logs one way, and opens it under one mode:
//!
//! * tails of the newest log: random bytes (1..4 KiB), bytes that look like a record
//!   header with a wrong checksum, a valid header whose length runs past the end of
//!   the file, zeros, and the records of a stale older log (from a record boundary or
//!   from the middle of a record);
//! * a damaged record in the middle of the newest log, valid records after it;
//! * a damaged record in an older log that a newer one follows;
//! * a tail crafted with a thousand-odd verifying record headers, each claiming the rest
//!   of the file (the scan stops searching it rather than checksum the rest of the
//!   file at each: so it cannot tell a torn tail, and the default mode refuses it).
//!
//! Checked: whether the store opens (as the mode's documentation says), what every
//! acknowledged key reads, the byte counts the report and `DbStats` give, and that a
//! write acknowledged after recovery survives a power loss right after it (the next
//! open must also find the logs clean: the damaged log was never written after).
//!
//! The SIGKILL trials do the same with a child process on real files: it opens the
//! damaged store, writes synced keys and is killed at a random moment.
//!
//! Default run: 112 trials and 4 kills. `#[ignore]` tests: 2,400 trials (2,000 of them
//! damaged tails) and 120 kills (`cargo test -p bloomkv-kv --test wal_recovery --
//! --ignored --nocapture`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use bloomkv_kv::fs::mem::{DirOps, MemFileSystem, UnsyncedData};
use bloomkv_kv::fs::{FileSystem, OsFileSystem};
use bloomkv_kv::wal::{encode_record, WalWriter};
use bloomkv_kv::{Db, Error, Options, WalRecovery, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/db";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    RandomTail,
    HeaderLikeTail,
    LengthPastEnd,
    ZeroTail,
    StaleTail,
    MidLog,
    OlderLog,
    VerifyingHeaders,
}

const TAILS: [Damage; 5] = [
    Damage::RandomTail,
    Damage::HeaderLikeTail,
    Damage::LengthPastEnd,
    Damage::ZeroTail,
    Damage::StaleTail,
];

impl Damage {
    fn is_tail(self) -> bool {
        TAILS.contains(&self)
    }
}

/// What a trial wrote: the acknowledged value of every key, and the keys of each log
/// record (in order) so a dropped record's key can be told.
struct Written {
    model: BTreeMap<String, String>,
    /// Per log file, the key of each record in order.
    logs: Vec<(PathBuf, Vec<String>)>,
    last_seq: u64,
}

fn options(fs: Arc<dyn FileSystem>, mode: WalRecovery) -> Options {
    Options {
        sync_writes: true,
        wal_recovery: mode,
        file_system: fs,
        ..Options::default()
    }
}

fn wal_of(fs: &dyn FileSystem, dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| dir.join(n))
        .collect();
    v.sort();
    v
}

/// Writes a store: `tabled` keys flushed to a table, then `logged` keys left in the log.
/// With `two_logs`, a second log continues the first, as a store that froze its
/// memtable and crashed before the flush leaves it.
fn write_store(fs: Arc<dyn FileSystem>, dir: &Path, rng: &mut StdRng, two_logs: bool) -> Written {
    let db = Db::open(dir, options(fs.clone(), WalRecovery::default())).unwrap();
    let mut model = BTreeMap::new();
    let mut seq = 0;
    let tabled = rng.gen_range(0..30);
    for i in 0..tabled {
        let (k, v) = (format!("t{i:03}"), format!("table{i}"));
        db.put(&k, &v).unwrap();
        model.insert(k, v);
        seq += 1;
    }
    db.flush().unwrap();
    let logged = rng.gen_range(4..40);
    let mut keys = Vec::new();
    for i in 0..logged {
        let (k, v) = (format!("w{i:03}"), format!("log{i}-{}", rng.gen::<u16>()));
        db.put(&k, &v).unwrap();
        model.insert(k.clone(), v);
        keys.push(k);
        seq += 1;
    }
    db.close().unwrap();
    let first = wal_of(fs.as_ref(), dir).pop().unwrap();
    let mut logs = vec![(first.clone(), keys)];
    if two_logs {
        let number: u64 = first
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let path = dir.join(format!("{:06}.wal", number + 1));
        let mut w = WalWriter::new(fs.create(&path).unwrap());
        let mut keys = Vec::new();
        for i in 0..rng.gen_range(3..10) {
            seq += 1;
            let (k, v) = (format!("x{i:03}"), format!("newer{i}"));
            let mut b = WriteBatch::new();
            b.put(&k, &v);
            w.add_record(&b.encode(seq).unwrap()).unwrap();
            model.insert(k.clone(), v);
            keys.push(k);
        }
        w.sync().unwrap();
        fs.sync_dir(dir).unwrap();
        logs.push((path, keys));
    }
    Written {
        model,
        logs,
        last_seq: seq,
    }
}

/// The bytes of a record sequence an older log would have held: sequences 1..=n.
fn stale_log(n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for s in 1..=n {
        let mut b = WriteBatch::new();
        b.put(format!("w{:03}", s % 7), format!("stale{s}"));
        encode_record(&b.encode(s).unwrap(), &mut out);
    }
    out
}

/// Record boundaries of a clean log.
fn ends(log: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < log.len() {
        off = bloomkv_kv::wal::check_record(log, off).unwrap();
        out.push(off);
    }
    out
}

/// Damages the store's logs; returns (which log, the record index hit (for mid-log
/// damage), the tail bytes appended).
fn damage(
    fs: &dyn FileSystem,
    w: &Written,
    kind: Damage,
    rng: &mut StdRng,
) -> (usize, Option<usize>, u64) {
    let read = |p: &Path| fs.read_all(p).unwrap();
    let write = |p: &Path, bytes: &[u8]| {
        let mut f = fs.create(p).unwrap();
        f.append(bytes).unwrap();
        f.sync().unwrap();
    };
    let newest = w.logs.len() - 1;
    let (path, _) = &w.logs[newest];
    let mut bytes = read(path);
    let tail: Vec<u8> = match kind {
        Damage::RandomTail => (0..rng.gen_range(1..=4096)).map(|_| rng.gen()).collect(),
        Damage::HeaderLikeTail => {
            // crc, a plausible length, type FULL, a wrong header checksum, then data.
            let mut h = rng.gen::<u32>().to_le_bytes().to_vec();
            h.extend_from_slice(&rng.gen_range(1u32..200).to_le_bytes());
            h.push(1);
            let good = crc32fast::hash(&h);
            h.extend_from_slice(&(good ^ rng.gen_range(1..u32::MAX)).to_le_bytes());
            h.extend((0..rng.gen_range(0..300)).map(|_| rng.gen::<u8>()));
            h
        }
        Damage::LengthPastEnd => {
            let payload: Vec<u8> = (0..rng.gen_range(0..100)).map(|_| rng.gen()).collect();
            let mut h = crc32fast::hash(&payload).to_le_bytes().to_vec();
            let claimed = payload.len() as u32 + rng.gen_range(1..100_000);
            h.extend_from_slice(&claimed.to_le_bytes());
            h.push(1);
            let hcrc = crc32fast::hash(&h);
            h.extend_from_slice(&hcrc.to_le_bytes());
            h.extend_from_slice(&payload);
            h
        }
        Damage::ZeroTail => vec![0; rng.gen_range(1..=4096)],
        Damage::VerifyingHeaders => {
            // Enough that checksumming each claimed payload (about half the run on
            // average) passes the scan's bound, four times the log plus 1 MiB: at
            // 600 headers, 2.3 MB. (Fewer are searched to the end: a torn tail.)
            let count = rng.gen_range(600..1500);
            let len = count * 13 + rng.gen_range(0..4096);
            let mut run = vec![0u8; len];
            for i in 0..count {
                let mut h = rng.gen::<u32>().to_le_bytes().to_vec();
                h.extend_from_slice(&((len - 13 * i - 13) as u32).to_le_bytes());
                h.push(1);
                let hcrc = crc32fast::hash(&h);
                h.extend_from_slice(&hcrc.to_le_bytes());
                run[13 * i..13 * i + 13].copy_from_slice(&h);
            }
            run
        }
        Damage::StaleTail => {
            let old = stale_log(w.last_seq.max(1));
            let from = if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(0..old.len())
            };
            old[from..].to_vec()
        }
        Damage::MidLog | Damage::OlderLog => {
            let which = if kind == Damage::OlderLog { 0 } else { newest };
            let (path, keys) = &w.logs[which];
            let mut bytes = read(path);
            let e = ends(&bytes);
            // A record with at least two valid records after it, in the newest log;
            // any record of the older log.
            let hi = if kind == Damage::MidLog {
                keys.len() - 2
            } else {
                keys.len()
            };
            let rec = rng.gen_range(0..hi);
            let start = if rec == 0 { 0 } else { e[rec - 1] };
            let at = rng.gen_range(start..e[rec]);
            bytes[at] ^= rng.gen_range(1..=255u8);
            write(path, &bytes);
            return (which, Some(rec), 0);
        }
    };
    bytes.extend_from_slice(&tail);
    write(path, &bytes);
    (newest, None, tail.len() as u64)
}

/// Reads every key of `model` from `db`; `exact(key)` keys must match, the others must
/// read their value or nothing.
fn check_keys(db: &Db, model: &BTreeMap<String, String>, exact: &dyn Fn(&str) -> bool, when: &str) {
    for (k, v) in model {
        let got = db
            .get(k)
            .unwrap()
            .map(|b| String::from_utf8(b.to_vec()).unwrap());
        if exact(k) {
            assert_eq!(got.as_ref(), Some(v), "{when}: key {k}");
        } else {
            assert!(
                got.is_none() || got.as_ref() == Some(v),
                "{when}: key {k} = {got:?}"
            );
        }
    }
    for item in db.scan::<&str, _>(..) {
        let (k, _) = item.unwrap();
        let k = String::from_utf8(k.to_vec()).unwrap();
        assert!(
            model.contains_key(&k) || k.starts_with("after"),
            "{when}: invented key {k}"
        );
    }
}

/// Figures of a run of trials.
#[derive(Debug, Default)]
struct Tally {
    trials: usize,
    tail_trials: usize,
    opened: usize,
    refused: usize,
    bytes_dropped: u64,
}

fn trial(t: u64, kind: Damage, mode: WalRecovery, tally: &mut Tally) {
    let mut rng = StdRng::seed_from_u64(t);
    let mem = MemFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let dir = Path::new(DIR);
    let w = write_store(fs.clone(), dir, &mut rng, kind == Damage::OlderLog);
    let (log, record, tail_len) = damage(fs.as_ref(), &w, kind, &mut rng);
    let when = format!("trial {t}: {kind:?} under {mode}");
    tally.trials += 1;
    tally.tail_trials += kind.is_tail() as usize;

    let opened = Db::open(dir, options(fs.clone(), mode));
    let refuses = match (mode, kind) {
        (WalRecovery::AbsoluteConsistency, _) => true,
        (WalRecovery::TolerateCorruptTail, k) => !k.is_tail(),
        _ => false,
    };
    let db = match opened {
        Err(Error::Corruption { file, reason }) if refuses => {
            assert_eq!(file, w.logs[log].0, "{when}: names the damaged log");
            assert!(reason.contains("offset"), "{when}: {reason}");
            tally.refused += 1;
            return;
        }
        Err(e) => panic!("{when}: open failed: {e}"),
        Ok(_) if refuses => panic!("{when}: opened, but the mode refuses this damage"),
        Ok(db) => db,
    };
    tally.opened += 1;
    let report = db.recovery_report().clone();
    assert_eq!(
        db.stats().wal_tail_bytes_dropped,
        report.bytes_dropped(),
        "{when}"
    );
    assert!(
        !report.is_clean() && !report.kept_in_memtable,
        "{when}: {report}"
    );
    tally.bytes_dropped += report.bytes_dropped();

    // Which keys must read exactly.
    let (damaged_keys, lost_after): (Vec<String>, Vec<String>) = match record {
        None => (Vec::new(), Vec::new()),
        Some(rec) => {
            let keys = &w.logs[log].1;
            let mut later: Vec<String> = keys[rec + 1..].to_vec();
            for (_, k) in &w.logs[log + 1..] {
                later.extend(k.iter().cloned());
            }
            (vec![keys[rec].clone()], later)
        }
    };
    if kind.is_tail() {
        assert_eq!(report.bytes_dropped(), tail_len, "{when}: {report}");
    }
    let exact = |k: &str| {
        let hit = damaged_keys.iter().any(|d| d == k);
        let after = lost_after.iter().any(|d| d == k);
        match mode {
            WalRecovery::PointInTime => !hit && !after,
            _ => !hit,
        }
    };
    check_keys(&db, &w.model, &exact, &when);
    if mode == WalRecovery::PointInTime && record.is_some() {
        // Nothing from the damaged record on is replayed.
        for k in damaged_keys.iter().chain(&lost_after) {
            assert_eq!(
                db.get(k).unwrap(),
                None,
                "{when}: {k} after the point in time"
            );
        }
    }

    // A write acknowledged after recovery survives a power loss right after it, and
    // the next open finds clean logs: the damaged one was retired, not appended to.
    db.put(format!("after{t}"), "x").unwrap();
    let crashed = mem.deep_copy();
    crashed.power_loss(UnsyncedData::Lose, DirOps::Lose);
    drop(db);
    let db = Db::open(dir, options(Arc::new(crashed), mode))
        .unwrap_or_else(|e| panic!("{when}: reopen after power loss: {e}"));
    assert!(
        db.recovery_report().is_clean(),
        "{when}: {}",
        db.recovery_report()
    );
    assert_eq!(
        db.get(format!("after{t}")).unwrap().as_deref(),
        Some(&b"x"[..]),
        "{when}"
    );
    check_keys(&db, &w.model, &exact, &format!("{when}, after power loss"));
}

fn trials(tails: u64, others: u64) -> Tally {
    let mut tally = Tally::default();
    for t in 0..tails {
        let kind = TAILS[(t / 4) as usize % TAILS.len()];
        trial(t, kind, WalRecovery::ALL[t as usize % 4], &mut tally);
    }
    for t in 0..others {
        let kind =
            [Damage::MidLog, Damage::OlderLog, Damage::VerifyingHeaders][(t / 4) as usize % 3];
        trial(
            tails + t,
            kind,
            WalRecovery::ALL[t as usize % 4],
            &mut tally,
        );
    }
    eprintln!(
        "{} trials ({} damaged tails): {} opened, {} refused as their mode documents, \
         {} bytes dropped in all; 0 wrong answers, 0 acknowledged writes lost",
        tally.trials, tally.tail_trials, tally.opened, tally.refused, tally.bytes_dropped
    );
    tally
}

#[test]
fn every_mode_against_every_kind_of_damage() {
    let t = trials(80, 32);
    // The default mode opens every damaged-tail trial it met.
    assert_eq!(t.opened + t.refused, t.trials);
}

#[test]
#[ignore = "2,400 trials: about a minute"]
fn two_thousand_damaged_tails_and_four_hundred_mid_log_trials() {
    let t = trials(2000, 400);
    assert_eq!(t.tail_trials, 2000);
}

// ---- SIGKILL after recovery ----

const CHILD_ENV: &str = "BLOOMKV_WAL_RECOVERY_CHILD";
const MARK: &str = "#ack ";

/// The child: opens the damaged store under the given mode, then writes synced keys
/// forever, acknowledging each.
#[test]
fn recovery_child_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, mode) = spec.split_once('|').unwrap();
    let mode = WalRecovery::ALL[mode.parse::<usize>().unwrap()];
    let db = Db::open(dir, options(Arc::new(OsFileSystem), mode)).expect("child open");
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        db.put(format!("after{i:06}"), format!("v{i}"))
            .expect("put");
        writeln!(out, "{MARK}{i}").unwrap();
        out.flush().unwrap();
    }
}

fn kill_trial(t: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(1000 + t);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fs: Arc<dyn FileSystem> = Arc::new(OsFileSystem);
    let w = write_store(fs.clone(), dir, &mut rng, false);
    let kind = TAILS[t as usize % TAILS.len()];
    let (_, _, tail_len) = damage(fs.as_ref(), &w, kind, &mut rng);
    // The modes that open a damaged tail.
    let mode_index = [0usize, 1, 3][(t / 5) as usize % 3];
    let mode = WalRecovery::ALL[mode_index];
    let acks_wanted = rng.gen_range(1..200);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "recovery_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{}|{mode_index}", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = 0usize;
    let mut killed = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(at) = line.find(MARK) {
            let i: usize = line[at + MARK.len()..].trim().parse().unwrap();
            acked = acked.max(i + 1);
            if !killed && acked >= acks_wanted {
                child.kill().unwrap(); // SIGKILL
                killed = true;
            }
        }
    }
    if !killed {
        child.kill().unwrap();
    }
    child.wait().unwrap();
    let when = format!("kill trial {t}: {kind:?} under {mode}, {acked} acknowledged");
    assert!(acked > 0, "{when}: the child acknowledged nothing");
    let db = Db::open(dir, options(fs, mode)).unwrap_or_else(|e| panic!("{when}: {e}"));
    check_keys(&db, &w.model, &|_| true, &when);
    for i in 0..acked {
        assert_eq!(
            db.get(format!("after{i:06}")).unwrap().as_deref(),
            Some(format!("v{i}").as_bytes()),
            "{when}: acknowledged write {i} lost (tail of {tail_len} bytes)"
        );
    }
    acked
}

fn kill_trials(n: u64) {
    let acked: usize = (0..n).map(kill_trial).sum();
    eprintln!(
        "{n} SIGKILLs after recovering a damaged tail: {acked} writes acknowledged after \
         recovery, 0 lost, 0 wrong answers"
    );
}

#[test]
fn writes_acknowledged_after_recovery_survive_sigkill() {
    kill_trials(4);
}

#[test]
#[ignore = "120 kills: about half a minute"]
fn writes_acknowledged_after_recovery_survive_120_sigkills() {
    kill_trials(120);
}
