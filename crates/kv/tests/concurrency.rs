//! Readers and writers sharing one store through `Arc<Db>` while flushes and
//! compactions run in the background.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use bloomkv_kv::{Db, Error, Options};

fn options() -> Options {
    Options {
        memtable_size: 16 * 1024,
        l0_compaction_trigger: 2,
        level1_max_bytes: 64 * 1024,
        target_file_size: 16 * 1024,
        ..Options::default()
    }
}

#[test]
fn concurrent_readers_and_writers_agree_with_the_final_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    // Keys every reader can count on from the start.
    for i in 0..500 {
        db.put(format!("base{i:04}"), format!("base{i}")).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let db = db.clone();
            thread::spawn(move || {
                for round in 0..3 {
                    for i in 0..800 {
                        let key = format!("w{w}-{i:04}");
                        if round == 2 && i % 3 == 0 {
                            db.delete(&key).unwrap();
                        } else {
                            db.put(&key, format!("{key}:{round}")).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let db = db.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let i = (n * 31 + r) % 500;
                    let v = db.get(format!("base{i:04}")).unwrap();
                    assert_eq!(v.as_deref(), Some(format!("base{i}").as_bytes()));
                    let key = format!("w{}-{:04}", n % 3, n % 800);
                    if let Some(v) = db.get(&key).unwrap() {
                        assert!(v.starts_with(format!("{key}:").as_bytes()), "torn value");
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    db.flush().unwrap();
    for w in 0..3 {
        for i in 0..800 {
            let key = format!("w{w}-{i:04}");
            let want = (i % 3 != 0).then(|| format!("{key}:2"));
            let got = db
                .get(&key)
                .unwrap()
                .map(|b| String::from_utf8(b.to_vec()).unwrap());
            assert_eq!(got, want, "{key}");
        }
    }
    assert!(db.stats().num_tables() > 0);
}

#[test]
fn a_second_open_of_the_same_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked(_)) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().unwrap();
    // Released on close.
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn invalid_options_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for options in [
        Options {
            bits_per_key: f64::NAN,
            ..Options::default()
        },
        Options {
            bits_per_key: -1.0,
            ..Options::default()
        },
        Options {
            memtable_size: 0,
            ..Options::default()
        },
        Options {
            block_size: 0,
            ..Options::default()
        },
    ] {
        match Db::open(dir.path(), options) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn oversized_keys_are_refused_and_empty_keys_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let big = vec![b'k'; bloomkv_kv::MAX_KEY_LEN + 1];
    assert!(matches!(db.put(&big, "v"), Err(Error::InvalidArgument(_))));
    db.put("", "empty key").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("").unwrap().as_deref(), Some(&b"empty key"[..]));
    db.put("k", "").unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b""[..]));
}

/// Writers that each own a key range, readers that check every value they see is
/// well formed and never older than one they saw before, scans, and a thread that
/// flushes and compacts, all at once; then the store against the writers' model,
/// before and after a reopen.
#[test]
fn readers_writers_flushes_and_compactions_agree_with_a_model() {
    use std::collections::BTreeMap;

    const WRITERS: usize = 4;
    const KEYS: usize = 250;
    const ROUNDS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        memtable_size: 8 * 1024,
        block_size: 512,
        ..options()
    };
    let db = Arc::new(Db::open(dir.path(), opts()).unwrap());
    let key = |w: usize, i: usize| format!("w{w}-{i:03}");
    // Round r deletes the keys with i % 5 == r % 5 instead of writing them.
    let deleted_in = |i: usize, round: usize| round % 2 == 1 && i % 5 == round % 5;
    let stop = Arc::new(AtomicBool::new(false));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    for i in 0..KEYS {
                        if deleted_in(i, round) {
                            db.delete(key(w, i)).unwrap();
                        } else if i % 7 == 0 && i + 1 < KEYS && !deleted_in(i + 1, round) {
                            // Two keys in one atomic batch.
                            let mut b = bloomkv_kv::WriteBatch::new();
                            b.put(key(w, i), format!("{}:{round}", key(w, i)));
                            b.put(key(w, i + 1), format!("{}:{round}", key(w, i + 1)));
                            db.write(b).unwrap();
                        } else {
                            db.put(key(w, i), format!("{}:{round}", key(w, i))).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    let maintenance = {
        let (db, stop) = (db.clone(), stop.clone());
        thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if n % 3 == 2 {
                    db.compact().unwrap();
                } else {
                    db.flush().unwrap();
                }
                n += 1;
                thread::sleep(std::time::Duration::from_millis(5));
            }
            n
        })
    };
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (db, stop) = (db.clone(), stop.clone());
            thread::spawn(move || {
                // Per key: the newest round this reader knows the key has reached, and
                // whether that round deleted it. A `None` is checked too: it is only
                // allowed before the first write or for a deleting round not older
                // than what was already seen.
                let mut seen: BTreeMap<String, (usize, bool)> = BTreeMap::new();
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let i = (n * 13 + r * 31) % KEYS;
                    let k = key((n * 7 + r) % WRITERS, i);
                    match db.get(&k).unwrap() {
                        Some(v) => {
                            let v = String::from_utf8(v.to_vec()).unwrap();
                            let (vk, round) = v.split_once(':').expect("torn value");
                            assert_eq!(vk, k, "a value under the wrong key");
                            let round: usize = round.parse().unwrap();
                            if let Some(&(last, deleted)) = seen.get(&k) {
                                let ok = if deleted { round > last } else { round >= last };
                                assert!(ok, "{k}: read round {round} after {last} ({deleted})");
                            }
                            seen.insert(k.clone(), (round, false));
                        }
                        None => {
                            if let Some(&(last, deleted)) = seen.get(&k) {
                                let first = if deleted { last } else { last + 1 };
                                let d = (first..ROUNDS).find(|&d| deleted_in(i, d)).unwrap_or_else(
                                    || {
                                        panic!(
                                            "{k}: missing after round {last}, never deleted later"
                                        )
                                    },
                                );
                                seen.insert(k.clone(), (d, true));
                            }
                        }
                    }
                    if n.is_multiple_of(200) {
                        let mut prev: Option<Vec<u8>> = None;
                        for item in db.scan::<&str, _>(..) {
                            let (k, v) = item.unwrap();
                            assert!(prev.as_deref() < Some(&k[..]), "scan out of order");
                            assert!(v.starts_with(&k), "scan: value under the wrong key");
                            prev = Some(k.to_vec());
                        }
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let cycles = maintenance.join().unwrap();
    let reads: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(cycles > 0 && reads > 0);

    let model: BTreeMap<String, String> = (0..WRITERS)
        .flat_map(|w| (0..KEYS).map(move |i| (w, i)))
        .filter(|&(_, i)| !deleted_in(i, ROUNDS - 1))
        .map(|(w, i)| (key(w, i), format!("{}:{}", key(w, i), ROUNDS - 1)))
        .collect();
    let check = |db: &Db| {
        let all: BTreeMap<String, String> = db
            .scan::<&str, _>(..)
            .map(|r| {
                let (k, v) = r.unwrap();
                (
                    String::from_utf8(k.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect();
        assert_eq!(all, model);
        for w in 0..WRITERS {
            for i in 0..KEYS {
                let got = db.get(key(w, i)).unwrap();
                assert_eq!(got.as_deref(), model.get(&key(w, i)).map(|v| v.as_bytes()));
            }
        }
    };
    check(&db);
    let db = Arc::into_inner(db).expect("every thread is done");
    db.close().unwrap();
    check(&Db::open(dir.path(), opts()).unwrap());
}

/// Resident memory of this process, from /proc/self/status (Linux), in KiB.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Millions of operations with background flushes and compactions; memory must stay
/// bounded (the memtable limit holds) and the store must agree with a model at the end.
#[test]
#[ignore = "soak: a few million operations; run with --release -- --ignored"]
fn soak_of_millions_of_operations_keeps_memory_bounded() {
    use rand::{Rng, SeedableRng};

    let ops: usize = std::env::var("BLOOMKV_SOAK_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_000_000);
    const KEYS: u32 = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            memtable_size: 1 << 20,
            ..Options::default()
        },
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    // The last value written to each key (its step), or 0 for deleted/absent.
    let mut model = vec![0u64; KEYS as usize];
    let mut samples = Vec::new();
    let started = std::time::Instant::now();
    for step in 1..=ops as u64 {
        let k = rng.gen_range(0..KEYS);
        let key = format!("key{k:08}");
        match rng.gen_range(0..100) {
            0..=59 => {
                db.put(&key, format!("{step:012}-{}", "v".repeat(60)))
                    .unwrap();
                model[k as usize] = step;
            }
            60..=64 => {
                db.delete(&key).unwrap();
                model[k as usize] = 0;
            }
            _ => {
                let got = db.get(&key).unwrap();
                let want = model[k as usize];
                match got {
                    None => assert_eq!(want, 0, "{key} missing at step {step}"),
                    Some(v) => assert_eq!(&v[..12], format!("{want:012}").as_bytes()),
                }
            }
        }
        if step.is_multiple_of(100_000) {
            if let Some(rss) = rss_kib() {
                samples.push(rss);
            }
        }
    }
    let elapsed = started.elapsed();
    for (k, &want) in model.iter().enumerate() {
        let got = db.get(format!("key{k:08}")).unwrap();
        assert_eq!(got.is_some(), want != 0, "key{k:08} at the end");
    }
    let stats = db.stats();
    eprintln!(
        "soak: {ops} operations in {elapsed:?}; tables per level {:?}; RSS samples (MiB): {:?}",
        stats.tables_per_level,
        samples.iter().map(|k| k / 1024).collect::<Vec<_>>()
    );
    // After the first tenth (memtables filled, levels formed), resident memory may
    // not keep growing: the memtable limit and the stalls bound what is held.
    if samples.len() >= 4 {
        let warm = samples[samples.len() / 10];
        let peak = *samples.iter().max().unwrap();
        assert!(
            peak <= warm + 64 * 1024,
            "RSS grew from {} MiB to {} MiB",
            warm / 1024,
            peak / 1024
        );
    }
}

/// A get made while a thread exits, from another thread-local value's destructor (a
/// per-thread handle that reads once more on its way out), after the thread's own
/// reads: it answers as any get does, with and without compression.
#[test]
fn a_get_from_a_thread_local_destructor_answers() {
    use std::cell::RefCell;
    use std::sync::Mutex;

    type Answer = Arc<Mutex<Option<bloomkv_kv::Result<Option<Vec<u8>>>>>>;
    struct GetOnExit(Arc<Db>, Answer);
    impl Drop for GetOnExit {
        fn drop(&mut self) {
            let got = self.0.get("key000007").map(|v| v.map(|v| v.to_vec()));
            *self.1.lock().unwrap() = Some(got);
        }
    }
    thread_local! {
        static ON_EXIT: RefCell<Option<GetOnExit>> = const { RefCell::new(None) };
    }

    for compression in [bloomkv_kv::Compression::None, bloomkv_kv::Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            compression,
            block_cache_size: 0,
            ..Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), options).unwrap());
        for i in 0..100 {
            db.put(format!("key{i:06}"), [b'v'; 64]).unwrap();
        }
        db.flush().unwrap();
        let answer: Answer = Arc::default();
        let (db2, answer2) = (db.clone(), answer.clone());
        thread::spawn(move || {
            // Registered before the read path's own thread-locals, so it runs after
            // theirs are gone.
            ON_EXIT.with(|h| *h.borrow_mut() = Some(GetOnExit(db2.clone(), answer2)));
            assert!(db2.get("key000003").unwrap().is_some()); // reads a block
        })
        .join()
        .unwrap();
        let got = answer.lock().unwrap().take().expect("the destructor ran");
        assert_eq!(got.unwrap(), Some(vec![b'v'; 64]), "{compression:?}");
    }
}
