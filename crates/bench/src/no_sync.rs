//! A file system for benchmark loads that skips `fsync`: the benchmark measures
//! reads, and a load that syncs every table and manifest edit spends most of its time
//! waiting for the device (the leveled shape writes thousands of small tables).
//! Everything else goes to the wrapped file system unchanged, so reads, the page
//! cache and the OS's read counts are exactly what a store that syncs would see.

use std::io;
use std::path::Path;
use std::sync::Arc;

use bloomkv_kv::fs::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// Wraps a file system and turns `sync` and `sync_dir` into no-ops.
#[derive(Debug)]
pub struct NoSyncFs<F>(pub F);

struct NoSyncFile(Box<dyn WritableFile>);

impl WritableFile for NoSyncFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.append(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<F: FileSystem> FileSystem for NoSyncFs<F> {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(NoSyncFile(self.0.create(path)?)))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(NoSyncFile(self.0.open_append(path)?)))
    }

    fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.0.open_random(path)
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.0.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.remove(path)
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.0.create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }

    fn lock(&self, path: &Path) -> io::Result<FileLock> {
        self.0.lock(path)
    }
}
