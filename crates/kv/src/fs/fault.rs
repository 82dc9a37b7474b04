//! A file system wrapper that counts every operation and fails the one you choose.
//!
//! [`FaultFileSystem`] wraps any [`FileSystem`] (usually a
//! [`MemFileSystem`](super::mem::MemFileSystem)) and numbers each file operation the
//! store performs — opening, reading, appending, syncing, renaming, deleting, listing —
//! in the order they happen. A [`FaultPlan`] picks the Nth operation (counting only the
//! [`OpKind`]s it names) and what goes wrong there:
//!
//! | [`Fault`] | at the chosen operation | afterwards |
//! |---|---|---|
//! | `Error` | returns an I/O error, does nothing | works normally |
//! | `ShortWrite` | an append writes part of its bytes, then errors | works normally |
//! | `PowerLoss` | nothing happens; the operation errors | every operation errors |
//! | `NoSpace` | a create or append errors with `StorageFull` | every create and append does (the disk is full); the rest works |
//!
//! After a `PowerLoss` the test drops the store, calls
//! [`MemFileSystem::power_loss`](super::mem::MemFileSystem::power_loss) to throw away
//! what was not durable, and reopens: exactly what a machine that lost power mid-way
//! would see on reboot.
//!
//! Sweeping `at` over `1..=ops` for a workload of `ops` operations tests a failure at
//! every point. First run the workload with [`FaultPlan::none`] to learn `ops` from
//! [`FaultFileSystem::ops`].
//!
//! ```
//! use std::path::Path;
//! use std::sync::Arc;
//! use bloomkv_kv::fs::{FileSystem, fault::{Fault, FaultFileSystem, FaultPlan, OpKind}, mem::MemFileSystem};
//!
//! let mem = MemFileSystem::new();
//! let fs = FaultFileSystem::new(Arc::new(mem.clone()));
//! fs.create_dir_all(Path::new("/db"))?;
//! // Fail the second sync from now on.
//! fs.set_plan(FaultPlan::nth(2, &[OpKind::Sync], Fault::Error));
//! let mut f = fs.create(Path::new("/db/f"))?;
//! f.append(b"a")?;
//! f.sync()?;
//! assert!(f.sync().is_err());
//! assert!(fs.fired());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{FileLock, FileSystem, Linked, RandomAccessFile, WritableFile};

/// The kinds of file operation the store performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `FileSystem::create`.
    Create,
    /// `FileSystem::open_append`.
    OpenAppend,
    /// `FileSystem::open_random`.
    OpenRandom,
    /// `FileSystem::read_all`.
    ReadAll,
    /// `RandomAccessFile::read_exact_at`.
    ReadAt,
    /// `RandomAccessFile::len`.
    Len,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::sync`.
    Sync,
    /// `FileSystem::rename`.
    Rename,
    /// `FileSystem::remove` and `FileSystem::remove_dir`.
    Remove,
    /// `FileSystem::sync_dir`.
    SyncDir,
    /// `FileSystem::create_dir_all`.
    CreateDir,
    /// `FileSystem::list`.
    List,
    /// `FileSystem::link`.
    Link,
    /// `FileSystem::lock`.
    Lock,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 15] = [
        OpKind::Create,
        OpKind::OpenAppend,
        OpKind::OpenRandom,
        OpKind::ReadAll,
        OpKind::ReadAt,
        OpKind::Len,
        OpKind::Append,
        OpKind::Sync,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::SyncDir,
        OpKind::CreateDir,
        OpKind::List,
        OpKind::Lock,
        OpKind::Link,
    ];
}

/// What goes wrong at the chosen operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation returns an I/O error and has no effect.
    Error,
    /// An append writes the first half of its bytes, then returns an error; any other
    /// operation just returns an error.
    ShortWrite,
    /// The power goes out: this operation and every later one return an error.
    PowerLoss,
    /// The operation panics: for testing that a panic in the store's background work
    /// reaches writers as an error instead of a silent stall.
    Panic,
    /// The disk fills up: from this operation on, every create and append fails with
    /// [`io::ErrorKind::StorageFull`] and has no effect, until the plan is changed
    /// (space freed). Reads, renames, deletions and syncs go on working.
    NoSpace,
}

/// Which operation fails, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultPlan {
    /// 1-based position among the operations of `kinds`, counted from when the plan
    /// was set; 0 never fires.
    pub at: u64,
    /// The kinds counted (empty: every kind).
    pub kinds: Vec<OpKind>,
    /// What happens.
    pub fault: Fault,
}

impl FaultPlan {
    /// A plan that never fires: use it to count a workload's operations.
    pub fn none() -> FaultPlan {
        FaultPlan {
            at: 0,
            kinds: Vec::new(),
            fault: Fault::Error,
        }
    }

    /// Fail the `at`-th operation (1-based) among `kinds` (empty: all kinds).
    pub fn nth(at: u64, kinds: &[OpKind], fault: Fault) -> FaultPlan {
        FaultPlan {
            at,
            kinds: kinds.to_vec(),
            fault,
        }
    }

    fn counts(&self, kind: OpKind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }
}

#[derive(Debug)]
struct Shared {
    inner: Arc<dyn FileSystem>,
    plan: Mutex<FaultPlan>,
    /// Operations of the plan's kinds since the plan was set.
    matching: AtomicU64,
    /// Every operation since the plan was set.
    total: AtomicU64,
    fired: AtomicBool,
    dead: AtomicBool,
    /// The disk is full ([`Fault::NoSpace`] fired).
    full: AtomicBool,
    /// Kinds of the operations seen, in order, when recording.
    log: Mutex<Option<Vec<OpKind>>>,
    /// Paths given to `open_random`, in order, when recording.
    opened: Mutex<Option<Vec<PathBuf>>>,
}

/// What to do with one operation.
enum Verdict {
    Go,
    Fail,
    Short,
    Full,
}

impl Shared {
    fn plan(&self) -> MutexGuard<'_, FaultPlan> {
        self.plan.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check(&self, kind: OpKind) -> Verdict {
        if self.dead.load(Ordering::SeqCst) {
            return Verdict::Fail;
        }
        self.total.fetch_add(1, Ordering::SeqCst);
        // A link may have to copy (a file system without links), so it fills too.
        let fills = matches!(kind, OpKind::Create | OpKind::Append | OpKind::Link);
        if fills && self.full.load(Ordering::SeqCst) {
            return Verdict::Full;
        }
        if let Some(log) = self.log.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            log.push(kind);
        }
        let plan = self.plan();
        if !plan.counts(kind) {
            return Verdict::Go;
        }
        let n = self.matching.fetch_add(1, Ordering::SeqCst) + 1;
        if plan.at == 0 || n != plan.at {
            return Verdict::Go;
        }
        self.fired.store(true, Ordering::SeqCst);
        match plan.fault {
            Fault::Error => Verdict::Fail,
            Fault::ShortWrite if kind == OpKind::Append => Verdict::Short,
            Fault::ShortWrite => Verdict::Fail,
            Fault::PowerLoss => {
                self.dead.store(true, Ordering::SeqCst);
                Verdict::Fail
            }
            Fault::Panic => {
                drop(plan);
                panic!("injected panic at {kind:?}");
            }
            Fault::NoSpace => {
                self.full.store(true, Ordering::SeqCst);
                if fills {
                    Verdict::Full
                } else {
                    Verdict::Go
                }
            }
        }
    }

    fn gate(&self, kind: OpKind) -> io::Result<()> {
        match self.check(kind) {
            Verdict::Go => Ok(()),
            Verdict::Fail | Verdict::Short => Err(injected(kind)),
            Verdict::Full => Err(no_space(kind)),
        }
    }
}

fn injected(kind: OpKind) -> io::Error {
    io::Error::other(format!("injected fault at {kind:?}"))
}

fn no_space(kind: OpKind) -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        format!("injected full disk at {kind:?}: no space left on device"),
    )
}

/// A [`FileSystem`] that forwards to another one, counting operations and injecting
/// the fault its [`FaultPlan`] describes. Clones share the count and the plan.
#[derive(Debug, Clone)]
pub struct FaultFileSystem {
    shared: Arc<Shared>,
}

impl FaultFileSystem {
    /// Wraps `inner` with no fault planned.
    pub fn new(inner: Arc<dyn FileSystem>) -> FaultFileSystem {
        FaultFileSystem {
            shared: Arc::new(Shared {
                inner,
                plan: Mutex::new(FaultPlan::none()),
                matching: AtomicU64::new(0),
                total: AtomicU64::new(0),
                fired: AtomicBool::new(false),
                dead: AtomicBool::new(false),
                full: AtomicBool::new(false),
                log: Mutex::new(None),
                opened: Mutex::new(None),
            }),
        }
    }

    /// Sets the plan and restarts the counts (and brings the power back).
    pub fn set_plan(&self, plan: FaultPlan) {
        *self.shared.plan() = plan;
        self.shared.matching.store(0, Ordering::SeqCst);
        self.shared.total.store(0, Ordering::SeqCst);
        self.shared.fired.store(false, Ordering::SeqCst);
        self.shared.dead.store(false, Ordering::SeqCst);
        self.shared.full.store(false, Ordering::SeqCst);
    }

    /// Operations seen since the plan was set (all kinds; none after a power loss).
    pub fn ops(&self) -> u64 {
        self.shared.total.load(Ordering::SeqCst)
    }

    /// Operations of the plan's kinds seen since the plan was set.
    pub fn matching_ops(&self) -> u64 {
        self.shared.matching.load(Ordering::SeqCst)
    }

    /// Whether the planned fault has happened.
    pub fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Whether a [`Fault::PowerLoss`] has happened.
    pub fn powered_off(&self) -> bool {
        self.shared.dead.load(Ordering::SeqCst)
    }

    /// Starts recording the kind of every operation (see [`FaultFileSystem::take_log`]).
    pub fn record(&self) {
        *self.shared.log.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
        *self.shared.opened.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
    }

    /// The paths opened for random access since [`FaultFileSystem::record`], in order;
    /// stops recording them. A file not among them was not read at positions (a file
    /// opened before recording began may have been).
    pub fn take_opened(&self) -> Vec<PathBuf> {
        self.shared
            .opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default()
    }

    /// The kinds recorded since [`FaultFileSystem::record`], in order; stops recording.
    pub fn take_log(&self) -> Vec<OpKind> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default()
    }
}

struct FaultWritable {
    inner: Box<dyn WritableFile>,
    shared: Arc<Shared>,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.shared.check(OpKind::Append) {
            Verdict::Go => self.inner.append(buf),
            Verdict::Fail => Err(injected(OpKind::Append)),
            Verdict::Full => Err(no_space(OpKind::Append)),
            Verdict::Short => {
                self.inner.append(&buf[..buf.len() / 2])?;
                Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!(
                        "injected short write: {} of {} bytes",
                        buf.len() / 2,
                        buf.len()
                    ),
                ))
            }
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.shared.gate(OpKind::Sync)?;
        self.inner.sync()
    }
}

struct FaultRandom {
    inner: Arc<dyn RandomAccessFile>,
    shared: Arc<Shared>,
}

impl RandomAccessFile for FaultRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.shared.gate(OpKind::ReadAt)?;
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.shared.gate(OpKind::Len)?;
        self.inner.len()
    }

    fn drop_cache(&self) -> io::Result<()> {
        self.inner.drop_cache()
    }

    fn will_need(&self, offset: u64, len: usize) -> io::Result<()> {
        self.inner.will_need(offset, len)
    }
}

impl FileSystem for FaultFileSystem {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.shared.gate(OpKind::Create)?;
        Ok(Box::new(FaultWritable {
            inner: self.shared.inner.create(path)?,
            shared: self.shared.clone(),
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.shared.gate(OpKind::OpenAppend)?;
        Ok(Box::new(FaultWritable {
            inner: self.shared.inner.open_append(path)?,
            shared: self.shared.clone(),
        }))
    }

    fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.shared.gate(OpKind::OpenRandom)?;
        if let Some(opened) = self
            .shared
            .opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            opened.push(path.to_path_buf());
        }
        Ok(Arc::new(FaultRandom {
            inner: self.shared.inner.open_random(path)?,
            shared: self.shared.clone(),
        }))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.shared.gate(OpKind::ReadAll)?;
        self.shared.inner.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.gate(OpKind::Rename)?;
        self.shared.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.shared.gate(OpKind::Remove)?;
        self.shared.inner.remove(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.shared.gate(OpKind::SyncDir)?;
        self.shared.inner.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.shared.gate(OpKind::CreateDir)?;
        self.shared.inner.create_dir_all(dir)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.shared.gate(OpKind::Remove)?;
        self.shared.inner.remove_dir(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.shared.gate(OpKind::List)?;
        self.shared.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        // Cannot fail, so it is not a fault point and not counted.
        self.shared.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> io::Result<FileLock> {
        self.shared.gate(OpKind::Lock)?;
        self.shared.inner.lock(path)
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<Linked> {
        self.shared.gate(OpKind::Link)?;
        self.shared.inner.link(from, to)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::mem::MemFileSystem;

    fn setup() -> (MemFileSystem, FaultFileSystem) {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        fs.create_dir_all(Path::new("/d")).unwrap();
        (mem, fs)
    }

    #[test]
    fn the_nth_operation_of_the_chosen_kinds_fails_once() {
        let (_, fs) = setup();
        fs.set_plan(FaultPlan::nth(3, &[OpKind::Append], Fault::Error));
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"1").unwrap();
        f.sync().unwrap();
        f.append(b"2").unwrap();
        assert!(!fs.fired());
        assert!(f.append(b"3").is_err());
        assert!(fs.fired());
        f.append(b"4").unwrap();
        assert_eq!(fs.read_all(Path::new("/d/a")).unwrap(), b"124");
        assert_eq!(fs.matching_ops(), 4);
        assert_eq!(fs.ops(), 7); // create, 4 appends, sync, read_all
    }

    #[test]
    fn a_short_write_lands_half_of_its_bytes() {
        let (mem, fs) = setup();
        fs.set_plan(FaultPlan::nth(1, &[OpKind::Append], Fault::ShortWrite));
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        let err = f.append(b"abcdef").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
        assert_eq!(mem.file_bytes(Path::new("/d/a")).unwrap(), b"abc");
    }

    #[test]
    fn after_a_power_loss_everything_fails() {
        let (_, fs) = setup();
        fs.set_plan(FaultPlan::nth(2, &[], Fault::PowerLoss));
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        assert!(f.append(b"x").is_err());
        assert!(fs.powered_off());
        assert!(f.sync().is_err());
        assert!(fs.list(Path::new("/d")).is_err());
        fs.set_plan(FaultPlan::none());
        assert!(fs.list(Path::new("/d")).is_ok());
    }

    #[test]
    fn a_full_disk_fails_every_create_and_append_until_space_is_freed() {
        let (_, fs) = setup();
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        fs.set_plan(FaultPlan::nth(2, &[OpKind::Append], Fault::NoSpace));
        f.append(b"1").unwrap();
        let err = f.append(b"2").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(
            f.append(b"3").unwrap_err().kind(),
            io::ErrorKind::StorageFull
        );
        let err = fs.create(Path::new("/d/b")).err().map(|e| e.kind());
        assert_eq!(err, Some(io::ErrorKind::StorageFull));
        f.sync().unwrap();
        fs.remove(Path::new("/d/a")).unwrap();
        assert_eq!(fs.list(Path::new("/d")).unwrap(), Vec::<String>::new());
        fs.set_plan(FaultPlan::none());
        fs.create(Path::new("/d/b")).unwrap().append(b"4").unwrap();
        assert_eq!(fs.read_all(Path::new("/d/b")).unwrap(), b"4");
    }

    #[test]
    fn the_log_records_kinds_in_order() {
        let (_, fs) = setup();
        fs.record();
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"x").unwrap();
        f.sync().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        assert_eq!(
            fs.take_log(),
            [
                OpKind::Create,
                OpKind::Append,
                OpKind::Sync,
                OpKind::SyncDir
            ]
        );
    }
}
