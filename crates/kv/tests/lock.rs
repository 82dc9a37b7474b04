//! One writer per store, even when a user deletes `LOCK`, and an open that never
//! deletes a table it cannot prove is garbage.
//!
//! The lock is held on the store directory as well as on the `LOCK` file: deleting
//! the file while a store is open must not let a second opener in. And a table file
//! the manifest does not name is moved into `lost/` by open, byte for byte, instead of
//! being deleted.

use std::path::Path;

use bloomkv_kv::{Db, Error, Options};

fn opts() -> Options {
    Options {
        disable_auto_compaction: true,
        ..Options::default()
    }
}

#[test]
fn a_second_open_is_refused_while_the_first_holds_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    match Db::open(dir.path(), opts()) {
        Err(Error::Locked(p)) => assert_eq!(p, dir.path()),
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().unwrap();
    Db::open(dir.path(), opts()).unwrap().close().unwrap();
}

#[test]
fn deleting_the_lock_file_does_not_let_a_second_opener_in() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..500 {
        db.put(format!("k{i:04}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    // A second opener finds no LOCK file, creates one... and is still refused.
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Locked(_))
    ));
    // The first process goes on; nothing it wrote is lost.
    for i in 500..1000 {
        db.put(format!("k{i:04}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..1000 {
        assert_eq!(
            db.get(format!("k{i:04}")).unwrap().as_deref(),
            Some(format!("v{i}").as_bytes()),
            "k{i:04}"
        );
    }
}

fn tables(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_table_the_manifest_does_not_name_is_moved_aside_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), "old").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let live = tables(dir.path());
    assert_eq!(live.len(), 1);
    // A table no manifest names (what another writer, or a crashed flush, leaves).
    let bytes = std::fs::read(dir.path().join(&live[0])).unwrap();
    std::fs::write(dir.path().join("000900.sst"), &bytes).unwrap();
    std::fs::write(dir.path().join("000901.sst.tmp"), b"half a table").unwrap();

    let db = Db::open(dir.path(), opts()).unwrap();
    let moved = dir.path().join("lost").join("000900.sst");
    assert_eq!(db.recovery_report().tables_moved_aside, vec![moved.clone()]);
    assert_eq!(std::fs::read(&moved).unwrap(), bytes, "moved byte for byte");
    assert!(!dir.path().join("000900.sst").exists());
    assert!(
        !dir.path().join("000901.sst.tmp").exists(),
        "a temp file is garbage"
    );
    assert_eq!(tables(dir.path()), live, "the live table is untouched");
    assert_eq!(db.get("k050").unwrap().as_deref(), Some(&b"old"[..]));
    db.close().unwrap();

    // A second unlisted table of the same number does not overwrite the first.
    std::fs::write(dir.path().join("000900.sst"), b"another").unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let second = dir.path().join("lost").join("000900.sst.1");
    assert_eq!(
        db.recovery_report().tables_moved_aside,
        vec![second.clone()]
    );
    assert_eq!(std::fs::read(&moved).unwrap(), bytes);
    assert_eq!(std::fs::read(&second).unwrap(), b"another");
}

/// A scan holds the store as a snapshot does: after `close`, the directory stays locked
/// until the scan is dropped, so no second `Db` can compact away the tables it still
/// reads, and the scan yields every key.
#[test]
fn a_scan_that_outlives_its_store_keeps_it_locked() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        max_open_files: 1, // the scan's files are closed and reopened as it goes
        block_cache_size: 0,
        ..opts()
    };
    let db = Db::open(dir.path(), opts()).unwrap();
    for t in 0..3 {
        for i in 0..100 {
            db.put(format!("k{t}{i:03}"), "v").unwrap();
        }
        db.flush().unwrap();
    }
    let scan = db.scan::<&str, _>(..);
    db.close().unwrap();
    match Db::open(dir.path(), opts()) {
        Err(Error::Locked(p)) => assert_eq!(p, dir.path()),
        other => panic!("expected Locked while the scan lives, got {other:?}"),
    }
    let got: Vec<_> = scan.collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), 300);
    let db = Db::open(dir.path(), opts()).unwrap();
    db.compact().unwrap();
    assert_eq!(db.scan::<&str, _>(..).count(), 300);
}
