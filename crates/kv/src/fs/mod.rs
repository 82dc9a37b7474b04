//! The one file layer every store file operation goes through.
//!
//! The store never calls `std::fs` directly: it asks a [`FileSystem`]. The default,
//! [`OsFileSystem`], maps each call onto the operating system; tests wrap it to inject
//! faults (fail the Nth operation, short writes, lose everything after the last fsync).
//!
//! Two more file systems live beside it, for tests and for users who test their own
//! code against the store: [`mem::MemFileSystem`] keeps files in memory and knows what
//! a power failure would keep; [`fault::FaultFileSystem`] wraps any file system,
//! numbers its operations and fails the one a test chooses.
//!
//! Reads of table files are positioned reads (`pread`): one call is one read syscall,
//! which is what lets the store's `data_block_reads` be checked against the kernel's
//! own count in `/proc/self/io`.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod fault;
pub mod mem;
#[cfg(all(feature = "io-uring", target_os = "linux"))]
pub(crate) mod uring;

/// A file opened for appending: the WAL, a table or manifest being written.
pub trait WritableFile: Send {
    /// Appends all of `buf`.
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable (`fdatasync`).
    fn sync(&mut self) -> io::Result<()>;
    /// A handle that can sync this file from another thread while appends go on, for
    /// a log that starts syncing its bytes in the background as they accumulate, so
    /// that the sync which must wait (when the log is closed) finds little left to
    /// write. `None`, the default: the file is synced only by [`sync`](Self::sync)
    /// (a wrapper that counts or fails syncs must keep the default, or its syncs would
    /// bypass it).
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
}

/// Syncs a file from another thread (see [`WritableFile::sync_handle`]).
pub type SyncHandle = Arc<dyn Fn() -> io::Result<()> + Send + Sync>;

/// A file opened for positioned reads: a table.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset` with one positioned read.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Hints the OS to drop this file's cached pages (for cold-cache benchmarks).
    fn drop_cache(&self) -> io::Result<()> {
        Ok(())
    }
    /// Hints the OS that `len` bytes at `offset` will be read soon, so it can start
    /// fetching them from the device without the caller waiting (a batch of lookups
    /// tells it of every block it is about to read, then reads them one by one). Not a
    /// read: nothing is counted, and the default does nothing.
    fn will_need(&self, _offset: u64, _len: usize) -> io::Result<()> {
        Ok(())
    }
    /// The operating system's descriptor of the file, for reads the store submits to
    /// the kernel itself (io_uring, the `io-uring` feature). `None`, the default: every
    /// read goes through [`read_exact_at`](Self::read_exact_at) (a wrapper that counts
    /// or fails reads must keep the default, or its reads would bypass it).
    fn raw_fd(&self) -> Option<i32> {
        None
    }
}

/// The store's view of a file system. All paths are absolute or relative to the cwd.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// Creates (or truncates) a file for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens a file for positioned reads.
    fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file (the WAL and the manifest).
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Deletes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes a directory's entries (creations, renames, deletions) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Removes an empty directory (a dropped keyspace's, once its files are gone). The
    /// default cannot: it says so, and the store leaves the empty directory, which
    /// open ignores.
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: this file system cannot remove directories",
                dir.display()
            ),
        ))
    }
    /// The names of the entries in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive advisory lock on `path` (created if missing), held until the
    /// returned guard is dropped. Fails with `WouldBlock` if another holder has it.
    ///
    /// [`OsFileSystem`] also locks the directory holding `path`, and checks the
    /// directory lock first: deleting the lock file while a store is open does not let
    /// a second opener in, because the directory cannot be deleted while it holds the
    /// store's files.
    fn lock(&self, path: &Path) -> io::Result<FileLock>;
    /// Gives the file `from` a second name, `to` (which must not exist), sharing its
    /// bytes where the file system can (a hard link), else copying them and syncing
    /// the copy. Either way `to`'s bytes are durable on return; its directory entry is
    /// not until [`sync_dir`](Self::sync_dir). The default copies, through this file
    /// system's own operations ([`copy_file`]).
    fn link(&self, from: &Path, to: &Path) -> io::Result<Linked> {
        copy_file(self, from, to)
    }
}

/// How [`FileSystem::link`] gave a file its second name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linked {
    /// A hard link: no byte was copied.
    HardLink,
    /// The file system could not link (another device, no support): the bytes were
    /// copied and synced.
    Copied,
}

/// Copies `from` to a new file `to` through `fs` and syncs it: the fallback of
/// [`FileSystem::link`]. A failed copy deletes what it made (best effort).
pub fn copy_file<F: FileSystem + ?Sized>(fs: &F, from: &Path, to: &Path) -> io::Result<Linked> {
    if fs.exists(to) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "copy {} to {}: the target exists",
                from.display(),
                to.display()
            ),
        ));
    }
    let bytes = fs.read_all(from)?;
    let copied = fs.create(to).and_then(|mut f| {
        f.append(&bytes)?;
        f.sync()
    });
    match copied {
        Ok(()) => Ok(Linked::Copied),
        Err(e) => {
            let _ = fs.remove(to);
            Err(e)
        }
    }
}

/// Makes `bytes` the whole content of `dest` atomically: write them to `tmp`, fsync
/// it, rename it over `dest`, fsync `dest`'s directory so the rename itself survives
/// a crash. A crash at any step leaves the old `dest` or the new one, never a mix; on
/// an error before the rename the half-written `tmp` is removed (on a full disk it
/// holds needed space). The manifest, the settings and the probe statistics are all
/// written this way.
pub fn replace_durably<F: FileSystem + ?Sized>(
    fs: &F,
    tmp: &Path,
    dest: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let written = fs.create(tmp).and_then(|mut file| {
        file.append(bytes)?;
        file.sync()
    });
    if let Err(e) = written {
        let _ = fs.remove(tmp);
        return Err(e);
    }
    fs.rename(tmp, dest)?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs.sync_dir(dir)
}

/// An exclusive lock on a file (and, on the OS file system, on its directory),
/// released on drop.
pub struct FileLock {
    _file: Option<File>,
    _dir: Option<File>,
    path: PathBuf,
}

impl FileLock {
    /// A lock that holds nothing, for in-memory test file systems.
    pub fn detached(path: &Path) -> FileLock {
        FileLock {
            _file: None,
            _dir: None,
            path: path.to_path_buf(),
        }
    }

    /// The locked path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Debug for FileLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileLock")
            .field("path", &self.path)
            .finish()
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

/// Wraps an operating-system error with the operation and the path it failed on,
/// keeping its kind: "create /data/000042.sst.tmp: No space left on device (os error
/// 28)" rather than the bare reason.
fn at<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{op} {}: {e}", path.display()))
}

struct OsWritable(File, PathBuf);

impl WritableFile for OsWritable {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(at("write", &self.1))
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data().map_err(at("fsync", &self.1))
    }

    fn sync_handle(&self) -> Option<SyncHandle> {
        // A second descriptor of the same open file: `fdatasync` on it writes back the
        // file's pages whichever descriptor appended them.
        let file = self.0.try_clone().ok()?;
        let path = self.1.clone();
        Some(Arc::new(move || {
            file.sync_data().map_err(at("fsync", &path))
        }))
    }
}

struct OsRandom(File, PathBuf);

impl RandomAccessFile for OsRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.0, buf, offset).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("read {} at offset {offset}: {e}", self.1.display()),
            )
        })
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata().map_err(at("stat", &self.1))?.len())
    }

    fn drop_cache(&self) -> io::Result<()> {
        drop_page_cache(&self.0)
    }

    fn will_need(&self, offset: u64, len: usize) -> io::Result<()> {
        advise_will_need(&self.0, offset, len)
    }

    fn raw_fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        Some(self.0.as_raw_fd())
    }
}

#[cfg(target_os = "linux")]
fn drop_page_cache(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `posix_fadvise` only reads its integer arguments; the descriptor is valid
    // for the duration of the call because `file` is borrowed.
    let rc = unsafe { libc_fadvise(file.as_raw_fd(), 0, 0, POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(target_os = "linux")]
const POSIX_FADV_DONTNEED: i32 = 4;

#[cfg(target_os = "linux")]
const POSIX_FADV_WILLNEED: i32 = 3;

/// `posix_fadvise(WILLNEED)`: the kernel starts reading the range into its page cache
/// and returns without waiting for the device. Not a read syscall (`syscr` does not
/// count it), so the store's read count still matches the kernel's.
#[cfg(target_os = "linux")]
fn advise_will_need(file: &File, offset: u64, len: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(()); // past what the call can name: no hint
    };
    // SAFETY: as for `drop_page_cache`: integer arguments only, and the descriptor is
    // valid for the call because `file` is borrowed.
    let rc = unsafe { libc_fadvise(file.as_raw_fd(), offset, len, POSIX_FADV_WILLNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_will_need(_file: &File, _offset: u64, _len: usize) -> io::Result<()> {
    Ok(())
}

#[cfg(target_os = "linux")]
extern "C" {
    #[link_name = "posix_fadvise"]
    fn libc_fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> i32;
}

#[cfg(not(target_os = "linux"))]
fn drop_page_cache(_file: &File) -> io::Result<()> {
    Ok(())
}

impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(at("create", path))?;
        Ok(Box::new(OsWritable(file, path.to_path_buf())))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(at("open for append", path))?;
        Ok(Box::new(OsWritable(file, path.to_path_buf())))
    }

    fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(at("open", path))?;
        Ok(Arc::new(OsRandom(file, path.to_path_buf())))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path).map_err(at("read", path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("rename {} to {}: {e}", from.display(), to.display()),
            )
        })
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path).map_err(at("delete", path))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(at("fsync directory", dir))
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir).map_err(at("create directory", dir))
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(at("list", dir))? {
            names.push(
                entry
                    .map_err(at("list", dir))?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<Linked> {
        match fs::hard_link(from, to) {
            Ok(()) => Ok(Linked::HardLink),
            // Another device, a file system without links (FAT, some network ones), or
            // the file's link count at its limit: the bytes are copied instead.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::CrossesDevices
                        | io::ErrorKind::Unsupported
                        | io::ErrorKind::PermissionDenied
                        | io::ErrorKind::TooManyLinks
                ) =>
            {
                fs::copy(from, to)
                    .and_then(|_| OpenOptions::new().write(true).open(to))
                    .and_then(|f| f.sync_all())
                    .map_err(|e| {
                        let _ = fs::remove_file(to);
                        io::Error::new(
                            e.kind(),
                            format!("copy {} to {}: {e}", from.display(), to.display()),
                        )
                    })?;
                Ok(Linked::Copied)
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("link {} to {}: {e}", from.display(), to.display()),
            )),
        }
    }

    fn lock(&self, path: &Path) -> io::Result<FileLock> {
        // The directory first: its lock survives a user deleting the lock file, so a
        // second opener is refused even then. The file is locked too, for openers that
        // lock only the file (earlier versions of the store).
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir = File::open(parent).map_err(at("open directory", parent))?;
        try_lock(&dir)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(at("create", path))?;
        try_lock(&file)?;
        Ok(FileLock {
            _file: Some(file),
            _dir: Some(dir),
            path: path.to_path_buf(),
        })
    }
}

/// An exclusive `flock` on `file`, or `WouldBlock` if another holder has one.
fn try_lock(file: &File) -> io::Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "lock held by another instance",
        )),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}
