//! A batch that meets the device tells the OS about the blocks of every later table at
//! once (readahead hints). Hints are not reads: the counted reads stay a loop of gets'.
//! (That the hints stop once reads come back at page-cache speed is a matter of the
//! clock; the decision is tested on its running average in `sstable::file`.)

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use bloomkv_kv::{Db, FilterKind, Options};

/// The in-memory file system, recording which file each readahead hint was for.
#[derive(Debug, Clone)]
struct HintLog {
    inner: MemFileSystem,
    hints: Arc<Mutex<Vec<PathBuf>>>,
}

struct HintedFile {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    hints: Arc<Mutex<Vec<PathBuf>>>,
}

impl RandomAccessFile for HintedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn will_need(&self, _offset: u64, _len: usize) -> io::Result<()> {
        self.hints.lock().unwrap().push(self.path.clone());
        Ok(())
    }
}

impl FileSystem for HintLog {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }
    fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(HintedFile {
            inner: self.inner.open_random(path)?,
            path: path.to_path_buf(),
            hints: self.hints.clone(),
        }))
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> io::Result<FileLock> {
        self.inner.lock(path)
    }
}

fn key(table: u32, i: u32) -> Vec<u8> {
    format!("key{i:05}-{table}").into_bytes()
}

/// Four overlapping L0 tables of 2,000 keys each, no block cache.
fn four_tables(fs: &HintLog) -> Db {
    let options = Options {
        file_system: Arc::new(fs.clone()),
        filter: FilterKind::Ribbon,
        disable_auto_compaction: true,
        block_cache_size: 0,
        ..Options::default()
    };
    let db = Db::open("/store", options).unwrap();
    for table in 0..4 {
        for i in 0..2_000 {
            db.put(key(table, i), format!("value {table} {i}")).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().tables_per_level[0], 4);
    db
}

#[test]
fn a_batch_that_reads_hints_the_later_tables_then_stops_when_reads_are_fast() {
    let fs = HintLog {
        inner: MemFileSystem::new(),
        hints: Arc::default(),
    };
    let db = four_tables(&fs);
    // One key in the newest table (one block: read alone, unhinted, untimed), several
    // far apart in each older one.
    let mut keys = vec![key(3, 1_000)];
    for table in 0..3 {
        keys.extend([0, 700, 1_400, 1_999].map(|i| key(table, i)));
    }
    let before = db.stats();
    let values = db.multi_get(&keys).unwrap();
    let after = db.stats();
    assert!(values.iter().all(Option::is_some));
    let hinted: std::collections::BTreeSet<PathBuf> = fs.hints.lock().unwrap().drain(..).collect();
    // The three older tables were hinted before their turn.
    assert!(hinted.len() >= 3, "hinted files: {hinted:?}");
    // Hints are not reads: one counted read per key, as a loop of gets makes.
    let loop_reads = {
        let b = db.stats();
        for k in &keys {
            db.get(k).unwrap().unwrap();
        }
        db.stats().data_block_reads - b.data_block_reads
    };
    assert_eq!(after.data_block_reads - before.data_block_reads, loop_reads);
    // When the hints stop (reads timed at page-cache speed) depends on the clock, so
    // it is tested on the running average itself (`sstable::file`'s unit tests), not
    // here, where a loaded machine's debug build can read memory slower than a device.
}
