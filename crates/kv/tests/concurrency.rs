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
