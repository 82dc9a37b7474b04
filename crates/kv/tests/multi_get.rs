//! `multi_get`: one answer per key, in the order asked, all at one point in time.
//!
//! The model is a loop of `get`s on a snapshot taken at the same moment: the batch must
//! answer exactly as that loop does, through flushes, compactions and a reopen, under
//! every filter kind; a snapshot's batch reads the past; a writer's batches are seen
//! whole; a key over the limit is refused before any lookup.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bloomkv_kv::{Db, Error, FilterKind, FixedPrefix, Options, RangeFilterOptions, MAX_KEY_LEN};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A batch of `n` keys drawn from a space twice the written one (so about half are
/// absent), with duplicates and the empty key mixed in.
fn batch(rng: &mut StdRng, n: usize, space: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| match rng.gen_range(0..20) {
            0 => Vec::new(),
            _ => key(rng.gen_range(0..space * 2)),
        })
        .collect()
}

/// Checks `multi_get` against a loop of `get`s on a snapshot of the same moment.
fn agrees_with_gets(db: &Db, keys: &[Vec<u8>]) {
    let snap = db.snapshot();
    let want: Vec<_> = keys.iter().map(|k| snap.get(k).unwrap()).collect();
    assert_eq!(db.multi_get(keys).unwrap(), want, "Db::multi_get");
    assert_eq!(snap.multi_get(keys).unwrap(), want, "Snapshot::multi_get");
}

#[test]
fn multi_get_answers_as_a_loop_of_gets_under_every_filter() {
    const SPACE: u32 = 3_000;
    // The last two also carry a prefix filter (a fixed 5-byte prefix: "key" and two
    // digits) and a range filter in every table.
    for (filter, extras) in [
        (FilterKind::CacheLocalBloom, false),
        (FilterKind::StandardBloom, false),
        (FilterKind::Ribbon, false),
        (FilterKind::None, false),
        (FilterKind::CacheLocalBloom, true),
        (FilterKind::Ribbon, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = || Options {
            filter: filter.clone(),
            memtable_size: 64 << 10,
            disable_auto_compaction: true,
            prefix_extractor: extras
                .then(|| Arc::new(FixedPrefix::new(5)) as Arc<dyn bloomkv_kv::PrefixExtractor>),
            range_filter: extras.then(RangeFilterOptions::default),
            ..Options::default()
        };
        let mut db = Db::open(dir.path(), options()).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let mut written = 0;
        for round in 0..6 {
            for _ in 0..1_500 {
                let k = key(rng.gen_range(0..SPACE));
                if rng.gen_range(0..5) == 0 {
                    db.delete(&k).unwrap();
                } else {
                    db.put(&k, format!("v{round}-{}", rng.gen::<u32>()))
                        .unwrap();
                    written += 1;
                }
            }
            match round {
                1 | 3 => db.flush().unwrap(),
                4 => db.compact().unwrap(),
                5 => {
                    db.close().unwrap();
                    db = Db::open(dir.path(), options()).unwrap();
                }
                _ => {}
            }
            for n in [0, 1, 7, 32, 257] {
                let keys = batch(&mut rng, n, SPACE);
                agrees_with_gets(&db, &keys);
            }
        }
        let keys = batch(&mut rng, 10_000, SPACE);
        agrees_with_gets(&db, &keys);
        // The model must have something to find, or "agrees" would prove little.
        let found = db.multi_get(&keys).unwrap().iter().flatten().count();
        assert!(written > 0 && found > 1_000, "{filter:?}: found {found}");
        assert!(
            found < keys.len() - 1_000,
            "{filter:?}: too few absent keys"
        );
    }
}

#[test]
fn a_snapshots_multi_get_reads_the_past() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();
    db.put("b", "1").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot();
    db.put("a", "2").unwrap();
    db.delete("b").unwrap();
    db.put("c", "2").unwrap();
    db.flush().unwrap();
    let old: Vec<_> = snap.multi_get(["a", "b", "c"]).unwrap();
    assert_eq!(old[0].as_deref(), Some(&b"1"[..]));
    assert_eq!(old[1].as_deref(), Some(&b"1"[..]));
    assert_eq!(old[2], None);
    let now = db.multi_get(["a", "b", "c"]).unwrap();
    assert_eq!(now[0].as_deref(), Some(&b"2"[..]));
    assert_eq!(now[1], None);
    assert_eq!(now[2].as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_key_over_the_limit_is_refused_before_any_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();
    let before = db.stats().gets;
    let long = vec![b'x'; MAX_KEY_LEN + 1];
    let err = db.multi_get([&b"a"[..], &long[..]]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(db.stats().gets, before, "no key was looked up");
    // At the limit is fine, and the store goes on.
    let at_limit = vec![b'x'; MAX_KEY_LEN];
    assert_eq!(db.multi_get([&b"a"[..], &at_limit[..]]).unwrap()[1], None);
    assert!(db.multi_get(Vec::<Vec<u8>>::new()).unwrap().is_empty());
}

#[test]
fn a_writers_batches_are_seen_whole_and_never_go_back() {
    const KEYS: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_size: 32 << 10, // flushes and compactions while the readers read
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let keys: Vec<Vec<u8>> = (0..KEYS as u32).map(key).collect();
    let write_round = |round: u64| {
        let mut batch = bloomkv_kv::WriteBatch::new();
        for k in &keys {
            batch.put(k, round.to_be_bytes());
        }
        db.write(batch).unwrap();
    };
    write_round(0);
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, done, keys) = (db.clone(), done.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut last = 0u64;
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 10 {
                    let values = db.multi_get(&keys).unwrap();
                    let rounds: Vec<u64> = values
                        .iter()
                        .map(|v| {
                            let v = v
                                .as_ref()
                                .expect("every key was written before the readers");
                            u64::from_be_bytes(v[..].try_into().expect("8-byte value"))
                        })
                        .collect();
                    assert!(
                        rounds.iter().all(|&r| r == rounds[0]),
                        "half a batch: {rounds:?}"
                    );
                    assert!(rounds[0] >= last, "went back from {last} to {}", rounds[0]);
                    last = rounds[0];
                    reads += 1;
                }
                last
            })
        })
        .collect();
    for round in 1..=1_500u64 {
        write_round(round);
    }
    done.store(true, Ordering::Release);
    for r in readers {
        let last = r.join().unwrap();
        assert!(last <= 1_500);
    }
    let last = db.multi_get(&keys).unwrap();
    assert!(last
        .iter()
        .all(|v| v.as_deref() == Some(&1_500u64.to_be_bytes()[..])));
}
