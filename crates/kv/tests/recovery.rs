//! Recovery from the WAL: what a crash mid-append leaves behind is dropped, nothing else.

use std::path::{Path, PathBuf};

use bloomkv_kv::{Db, Error, Options};

fn wal_files(dir: &Path) -> Vec<PathBuf> {
    let mut wals: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    wals.sort();
    wals
}

/// Writes keys 0..n, one batch each, and closes without flushing: all of it is in the WAL.
fn write_keys(dir: &Path, n: usize) {
    let db = Db::open(
        dir,
        Options {
            sync_writes: true,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..n {
        db.put(format!("key{i:03}"), format!("value{i}")).unwrap();
    }
    db.close().unwrap();
}

fn present(db: &Db, n: usize) -> usize {
    (0..n)
        .filter(|i| db.get(format!("key{i:03}")).unwrap().is_some())
        .count()
}

#[test]
fn torn_wal_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 50);
    let wal = wal_files(dir.path()).pop().unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    // Cut the last record short, as a crash in the middle of its append would.
    let file = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    file.set_len(len - 3).unwrap();
    drop(file);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 50), 49, "only the torn last write is lost");
    assert_eq!(db.get("key048").unwrap().as_deref(), Some(&b"value48"[..]));
    assert_eq!(db.get("key049").unwrap(), None);
    // The recovered writes are now in a table; writes continue in a fresh WAL.
    db.put("after", "crash").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 50), 49);
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"crash"[..]));
}

#[test]
fn zero_filled_wal_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 20);
    let wal = wal_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]); // the file grew, its data never arrived
    std::fs::write(&wal, bytes).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(present(&db, 20), 20);
}

#[test]
fn corruption_in_the_middle_of_the_wal_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write_keys(dir.path(), 20);
    let wal = wal_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[30] ^= 0x01; // inside an early record, with good records after it
    std::fs::write(&wal, bytes).unwrap();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, wal),
        other => panic!("expected Corruption naming the WAL, got {other:?}"),
    }
}
