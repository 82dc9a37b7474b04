//! Readers holding snapshots while a writer commits batches and background flushes and
//! compactions run: no reader may see half a batch, a write from after its snapshot, or
//! a snapshot that changes under it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use bloomkv_kv::{Db, Options, WriteBatch};

const GROUP: usize = 40;

fn options() -> Options {
    Options {
        memtable_size: 16 * 1024,
        l0_compaction_trigger: 2,
        level1_max_bytes: 64 * 1024,
        target_file_size: 8 * 1024,
        block_size: 512,
        ..Options::default()
    }
}

fn group_key(i: usize) -> String {
    format!("g{i:03}")
}

/// What one read of the group through a snapshot saw: the round of each key (0 if
/// absent), from a get per key, a forward scan and a reverse scan.
fn read_group(snap: &bloomkv_kv::Snapshot) -> [Vec<u64>; 3] {
    let round = |v: &[u8]| {
        std::str::from_utf8(v)
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let gets = (0..GROUP)
        .map(|i| snap.get(group_key(i)).unwrap().map_or(0, |v| round(&v)))
        .collect();
    let fwd = snap
        .scan("g".."h")
        .map(|kv| round(&kv.unwrap().1))
        .collect();
    let mut back: Vec<u64> = snap
        .scan("g".."h")
        .rev()
        .map(|kv| round(&kv.unwrap().1))
        .collect();
    back.reverse();
    [gets, fwd, back]
}

#[test]
fn readers_holding_snapshots_never_see_half_a_batch_or_a_later_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    // Round r writes r to every key of the group in one batch, plus filler that keeps
    // flushes and compactions busy.
    let committed = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, committed, started, stop) =
            (db.clone(), committed.clone(), started.clone(), stop.clone());
        thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Acquire) || round < 300 {
                round += 1;
                let mut batch = WriteBatch::new();
                for i in 0..GROUP {
                    batch.put(group_key(i), format!("{round}:{}", "v".repeat(40)));
                }
                for j in 0..20 {
                    batch.put(format!("f{:06}", (round * 20 + j) % 5000), "x".repeat(64));
                }
                started.store(round, Ordering::Release);
                db.write(batch).unwrap();
                committed.store(round, Ordering::Release);
                if round >= 3000 {
                    break;
                }
            }
        })
    };
    let anomalies = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let after_writes = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (db, committed, started, anomalies, reads, after_writes) = (
                db.clone(),
                committed.clone(),
                started.clone(),
                anomalies.clone(),
                reads.clone(),
                after_writes.clone(),
            );
            thread::spawn(move || {
                for _ in 0..40 {
                    let low = committed.load(Ordering::Acquire);
                    let snap = db.snapshot();
                    let high = started.load(Ordering::Acquire);
                    let first = read_group(&snap);
                    // Let writes, flushes and compactions pass, then read again.
                    thread::sleep(std::time::Duration::from_millis(5));
                    let again = read_group(&snap);
                    let seen = first[0].first().copied().unwrap_or(0);
                    // A snapshot from before the first batch sees no group key: every
                    // get answers absent (round 0) and the scans are empty.
                    let whole = first.iter().chain(again.iter()).enumerate().all(|(i, r)| {
                        let is_scan = i % 3 != 0;
                        (is_scan && seen == 0 && r.is_empty())
                            || (r.len() == GROUP && r.iter().all(|&v| v == seen))
                    });
                    let in_time = low <= seen && seen <= high;
                    if !whole || !in_time {
                        anomalies.fetch_add(1, Ordering::Relaxed);
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                    if seen > 0 {
                        after_writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    assert_eq!(reads.load(Ordering::Relaxed), 120);
    // The test means something only if most snapshots saw batches being written.
    let seen_writes = after_writes.load(Ordering::Relaxed);
    assert!(
        seen_writes >= 60,
        "only {seen_writes} of 120 snapshots saw a batch"
    );
    assert_eq!(
        anomalies.load(Ordering::Relaxed),
        0,
        "half batches or later writes seen"
    );
    let stats = db.stats();
    assert!(stats.num_tables() > 0, "flushes ran during the test");
}
