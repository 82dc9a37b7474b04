//! A bad argument is refused alone: the store goes on taking writes, flushing and
//! reopening. Only a real log failure stops writes.

use bloomkv_kv::{Db, Error, Options, WriteBatch, MAX_BATCH_LEN, MAX_KEY_LEN, MAX_VALUE_LEN};

fn assert_store_still_works(db: Db, dir: &std::path::Path) {
    db.put("after", "ok").unwrap();
    db.flush().unwrap();
    db.put("after2", "ok2").unwrap();
    db.close().unwrap();
    let db = Db::open(dir, Options::default()).unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"ok"[..]));
    assert_eq!(db.get("after2").unwrap().as_deref(), Some(&b"ok2"[..]));
    assert_eq!(db.get("big").unwrap(), None, "nothing of a refused batch");
}

#[test]
fn an_oversized_batch_is_refused_and_the_store_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("before", "x").unwrap();
    // Five values just under the value limit: each is legal, the batch is not.
    let value = vec![7u8; MAX_VALUE_LEN - 1024];
    let mut batch = WriteBatch::new();
    for i in 0..5 {
        batch.put(format!("big{i}"), &value);
    }
    batch.put("big", "x");
    assert!(batch.approximate_size() > MAX_BATCH_LEN);
    match db.write(batch) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("batch"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(db.get("before").unwrap().as_deref(), Some(&b"x"[..]));
    assert_store_still_works(db, dir.path());
}

#[test]
fn oversized_keys_and_values_are_refused_and_the_store_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let err = db.put(vec![1u8; MAX_KEY_LEN + 1], "v").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let err = db.put("big", vec![1u8; MAX_VALUE_LEN + 1]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    // The limits themselves are accepted.
    db.put(vec![2u8; MAX_KEY_LEN], "edge").unwrap();
    assert_eq!(
        db.get(vec![2u8; MAX_KEY_LEN]).unwrap().as_deref(),
        Some(&b"edge"[..])
    );
    assert_store_still_works(db, dir.path());
}

/// Values on both sides of the size at which a write stops copying values into the
/// memtable and shares its batch's buffer instead: alone and batched with small ones,
/// each reads back from the memtable, from a table and after a reopen.
#[test]
fn values_of_every_size_read_back_from_memtable_table_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [
        0usize,
        1,
        100,
        4096,
        4097,
        16 << 10,
        (16 << 10) + 1,
        100_000,
        1 << 20,
    ];
    let value =
        |i: usize, n: usize| -> Vec<u8> { (0..n).map(|j| (i * 31 + j * 7) as u8).collect() };
    let mut want = Vec::new();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for (i, &n) in sizes.iter().enumerate() {
            db.put(format!("alone{i}"), value(i, n)).unwrap();
            want.push((format!("alone{i}"), value(i, n)));
            // A big value and small ones in one batch: the record is large, every
            // value in it is shared.
            let mut batch = WriteBatch::new();
            batch.put(format!("small{i}a"), value(i + 100, 10));
            batch.put(format!("batched{i}"), value(i + 200, n));
            batch.put(format!("small{i}b"), value(i + 300, 3));
            db.write(batch).unwrap();
            want.push((format!("small{i}a"), value(i + 100, 10)));
            want.push((format!("batched{i}"), value(i + 200, n)));
            want.push((format!("small{i}b"), value(i + 300, 3)));
        }
        let check = |db: &Db, when: &str| {
            for (k, v) in &want {
                assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "{k} {when}");
            }
        };
        check(&db, "in the memtable");
        db.flush().unwrap();
        check(&db, "in a table");
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for (k, v) in &want {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(&v[..]),
            "{k} after reopen"
        );
    }
}

/// An empty store path is refused before anything is written: it used to leave a
/// `LOCK` file in the current directory and fail with an error naming no path.
#[test]
fn an_empty_store_path_is_refused_and_nothing_is_written() {
    use bloomkv_kv::fs::mem::MemFileSystem;

    let mem = MemFileSystem::new();
    for read_only in [false, true] {
        let options = Options {
            read_only,
            file_system: std::sync::Arc::new(mem.clone()),
            ..Options::default()
        };
        match Db::open("", options) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains("empty"), "{why}"),
            other => panic!("read_only {read_only}: {:?}", other.map(|_| ())),
        }
    }
    let options = Options {
        file_system: std::sync::Arc::new(mem.clone()),
        ..Options::default()
    };
    assert!(matches!(
        bloomkv_kv::repair("", options),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(mem.paths(), Vec::<std::path::PathBuf>::new());
}
