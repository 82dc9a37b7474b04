//! Reads never go backwards: a reader that has seen a value never afterwards sees an
//! older one (or none), while a writer overwrites the same keys, memtables freeze and
//! flush, and compactions run. And a write batch is seen whole or not at all.
//!
//! Every key also holds an old value in a table, so a read that misses the newest
//! version in a memtable would find that old value and be caught.
//!
//! `BLOOMKV_FRESH_SECS` sets how long the writer runs (default 4 s). For the
//! ten-million-read figure: `BLOOMKV_FRESH_SECS=20 cargo test --release -p bloomkv-kv
//! --test fresh_reads -- --nocapture`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bloomkv_kv::{Db, Options, WriteBatch};

/// Keys written one `put` at a time.
const SINGLE: [&str; 4] = ["s0", "s1", "s2", "s3"];
/// Keys written together in one batch per round: a scan must see them equal.
const BATCHED: [&str; 4] = ["b0", "b1", "b2", "b3"];

fn value(n: u64) -> Vec<u8> {
    // The counter first, then padding so memtables fill and flush often.
    let mut v = n.to_be_bytes().to_vec();
    v.resize(200, b'.');
    v
}

fn counter(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[..8]);
    u64::from_be_bytes(b)
}

fn seconds() -> u64 {
    std::env::var("BLOOMKV_FRESH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}

#[derive(Default)]
struct Tally {
    reads: AtomicU64,
    violations: AtomicU64,
}

#[test]
fn reads_never_go_backwards_and_batches_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options {
                // Small memtables: freezes, flushes and compactions all through the run.
                memtable_size: 64 << 10,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    // Old values, flushed into a table: a read that skips the memtable finds these.
    for k in SINGLE.iter().chain(&BATCHED) {
        db.put(k, value(0)).unwrap();
    }
    db.flush().unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let first_violation = Arc::new(std::sync::Mutex::new(None::<String>));

    let mut readers = Vec::new();
    // Two point readers over every key.
    for r in 0..2 {
        let (db, done, tally, first) = (
            db.clone(),
            done.clone(),
            tally.clone(),
            first_violation.clone(),
        );
        readers.push(thread::spawn(move || {
            let keys: Vec<&str> = SINGLE.iter().chain(&BATCHED).copied().collect();
            let mut seen = vec![0u64; keys.len()];
            let mut i = r;
            while !done.load(Ordering::Relaxed) {
                i = (i + 1) % keys.len();
                let got = db.get(keys[i]).unwrap();
                tally.reads.fetch_add(1, Ordering::Relaxed);
                let problem = match got {
                    None => Some(format!("{} missing after {}", keys[i], seen[i])),
                    Some(v) if counter(&v) < seen[i] => Some(format!(
                        "{} went back from {} to {}",
                        keys[i],
                        seen[i],
                        counter(&v)
                    )),
                    Some(v) => {
                        seen[i] = counter(&v);
                        None
                    }
                };
                if let Some(p) = problem {
                    tally.violations.fetch_add(1, Ordering::Relaxed);
                    first.lock().unwrap().get_or_insert(p);
                }
            }
        }));
    }
    // One scanning reader: every key present, never older, batched keys all equal.
    {
        let (db, done, tally, first) = (
            db.clone(),
            done.clone(),
            tally.clone(),
            first_violation.clone(),
        );
        readers.push(thread::spawn(move || {
            let mut seen_single = [0u64; 4];
            let mut seen_batch = 0u64;
            while !done.load(Ordering::Relaxed) {
                let rows: Vec<(bytes::Bytes, bytes::Bytes)> =
                    db.scan::<&str, _>(..).collect::<Result<_, _>>().unwrap();
                tally.reads.fetch_add(rows.len() as u64, Ordering::Relaxed);
                let mut problem = None;
                let batch: Vec<u64> = rows
                    .iter()
                    .filter(|(k, _)| k.starts_with(b"b"))
                    .map(|(_, v)| counter(v))
                    .collect();
                let single: Vec<u64> = rows
                    .iter()
                    .filter(|(k, _)| k.starts_with(b"s"))
                    .map(|(_, v)| counter(v))
                    .collect();
                if batch.len() != 4 || single.len() != 4 {
                    problem = Some(format!("scan saw {} + {} keys", batch.len(), single.len()));
                } else if batch.iter().any(|&n| n != batch[0]) {
                    problem = Some(format!("half a batch: {batch:?}"));
                } else if batch[0] < seen_batch {
                    problem = Some(format!("batch went back from {seen_batch} to {}", batch[0]));
                } else {
                    seen_batch = batch[0];
                    for (i, &n) in single.iter().enumerate() {
                        if n < seen_single[i] {
                            problem = Some(format!("s{i} went back in a scan"));
                        }
                        seen_single[i] = seen_single[i].max(n);
                    }
                }
                if let Some(p) = problem {
                    tally.violations.fetch_add(1, Ordering::Relaxed);
                    first.lock().unwrap().get_or_insert(p);
                }
            }
        }));
    }

    let deadline = Instant::now() + Duration::from_secs(seconds());
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        db.put(SINGLE[(n % 4) as usize], value(n)).unwrap();
        if n.is_multiple_of(4) {
            let mut batch = WriteBatch::new();
            for k in BATCHED {
                batch.put(k, value(n));
            }
            db.write(batch).unwrap();
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let reads = tally.reads.load(Ordering::Relaxed);
    let violations = tally.violations.load(Ordering::Relaxed);
    let stats = db.stats();
    println!(
        "{n} writes, {reads} reads, {violations} stale or missing, {} flushes' worth of tables, stalls {}",
        stats.num_tables(),
        stats.write_stalls
    );
    assert_eq!(
        violations,
        0,
        "first violation: {:?}",
        first_violation.lock().unwrap()
    );
    // The run must have exercised something: many reads and many memtable rotations.
    assert!(reads > 10_000, "only {reads} reads");
    assert!(n > 1_000, "only {n} writes");
}
