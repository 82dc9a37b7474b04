//! One writer per store, even when a user deletes `LOCK`, and an open that never
//! deletes a table it cannot prove is garbage.
//!
//! The lock is held on the store directory as well as on the `LOCK` file: deleting
//! the file while a store is open must not let a second opener in. And a table file
//! the manifest does not name is moved into `lost/` by open, byte for byte, instead of
//! being deleted.

use std::path::Path;

use bloomkv_kv::fs::{FileSystem, OsFileSystem};
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

/// A file system that, at the first table deletion it sees, tries to open the store
/// a second time (what another process could do at that moment) and records how that
/// went.
#[derive(Debug, Default)]
struct OpenAtDelete {
    armed: std::sync::atomic::AtomicBool,
    second_open: std::sync::Mutex<Option<std::result::Result<(), String>>>,
}

impl FileSystem for OpenAtDelete {
    fn remove(&self, p: &Path) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        if p.extension().is_some_and(|e| e == "sst") && self.armed.swap(false, Ordering::SeqCst) {
            let tried = match Db::open(p.parent().unwrap(), Options::default()) {
                Ok(db) => {
                    db.close().unwrap();
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            };
            *self.second_open.lock().unwrap() = Some(tried);
        }
        OsFileSystem.remove(p)
    }
    fn create(&self, p: &Path) -> std::io::Result<Box<dyn bloomkv_kv::fs::WritableFile>> {
        OsFileSystem.create(p)
    }
    fn open_append(&self, p: &Path) -> std::io::Result<Box<dyn bloomkv_kv::fs::WritableFile>> {
        OsFileSystem.open_append(p)
    }
    fn open_random(
        &self,
        p: &Path,
    ) -> std::io::Result<std::sync::Arc<dyn bloomkv_kv::fs::RandomAccessFile>> {
        OsFileSystem.open_random(p)
    }
    fn read_all(&self, p: &Path) -> std::io::Result<Vec<u8>> {
        OsFileSystem.read_all(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> std::io::Result<()> {
        OsFileSystem.rename(a, b)
    }
    fn sync_dir(&self, d: &Path) -> std::io::Result<()> {
        OsFileSystem.sync_dir(d)
    }
    fn create_dir_all(&self, d: &Path) -> std::io::Result<()> {
        OsFileSystem.create_dir_all(d)
    }
    fn list(&self, d: &Path) -> std::io::Result<Vec<String>> {
        OsFileSystem.list(d)
    }
    fn exists(&self, p: &Path) -> bool {
        OsFileSystem.exists(p)
    }
    fn lock(&self, p: &Path) -> std::io::Result<bloomkv_kv::fs::FileLock> {
        OsFileSystem.lock(p)
    }
}

/// A scan that outlives its store's `close` holds the store's last handle; dropping it
/// deletes the tables compaction retired while the scan read them. It must do so
/// while the directory is still locked: an open let in first moved them into `lost/`
/// for good (or failed when a deletion won the race).
#[test]
fn a_scan_dropped_after_close_deletes_its_retired_tables_before_unlocking() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(OpenAtDelete::default());
    let options = Options {
        file_system: fs.clone(),
        disable_auto_compaction: true,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for t in 0..2 {
        for i in 0..100 {
            db.put(format!("k{t}{i:03}"), "v").unwrap();
        }
        db.flush().unwrap();
    }
    let scan = db.scan::<&str, _>(..);
    db.compact().unwrap(); // retires both tables; the scan still reads them
    db.close().unwrap();
    fs.armed.store(true, Ordering::SeqCst);
    drop(scan);
    match fs.second_open.lock().unwrap().take() {
        Some(Err(e)) => assert!(e.contains("lock"), "{e}"),
        Some(Ok(())) => panic!("a second open got in while the scan deleted its tables"),
        None => panic!("dropping the scan deleted no table"),
    }
    assert!(!dir.path().join("lost").exists(), "tables were moved aside");
}

/// A child process being started holds a copy of every file its parent has open for
/// the moment between its fork and its exec, and an `flock` belongs to the open file,
/// which the copy shares: a store closed at that moment stays locked until the child
/// execs. A program that starts processes (this test binary does, in other tests)
/// and closes and reopens a store must not be refused its own store for it.
#[test]
fn a_reopen_is_not_refused_while_child_processes_start() {
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spawner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let exe = std::env::current_exe().unwrap();
            let mut started = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let status = Command::new(&exe)
                    .arg("--list")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
                started += 1;
            }
            started
        })
    };
    for round in 0..300 {
        let db = Db::open(dir.path(), opts())
            .unwrap_or_else(|e| panic!("reopen {round} while processes start: {e}"));
        db.put(format!("k{round:04}"), "v").unwrap();
        db.close().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let started = spawner.join().unwrap();
    assert!(started > 0, "no process was started during the reopens");
    let db = Db::open(dir.path(), opts()).unwrap();
    for round in 0..300 {
        assert!(
            db.get(format!("k{round:04}")).unwrap().is_some(),
            "k{round:04}"
        );
    }
}
