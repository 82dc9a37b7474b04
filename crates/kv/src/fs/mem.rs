//! An in-memory file system that knows what a power failure would keep.
//!
//! [`MemFileSystem`] holds every file in memory and tracks, per file, how much of it
//! has been made durable by [`WritableFile::sync`], and, per directory, which entries
//! (creations, renames, deletions) have been made durable by
//! [`FileSystem::sync_dir`]. [`MemFileSystem::power_loss`] then turns the file system
//! into what a disk would hold after the power went out:
//!
//! ```text
//!  file contents    |<--- synced --->|<-- written, not synced -->|
//!                   kept             lost (or a random prefix kept: a torn write)
//!
//!  directory        entries as of the last sync_dir of that directory
//!                   (or, with DirOps::Keep, every entry as it is now)
//! ```
//!
//! This is the model the store is written against (POSIX with `fsync` and a directory
//! `fsync`): a rename or creation not followed by a directory sync may vanish, and
//! bytes not followed by a file sync may vanish, wholly or in part. Tests use it with
//! [`FaultFileSystem`](crate::fs::fault::FaultFileSystem) to crash the store at every
//! file operation and check what it recovers.
//!
//! ```
//! use std::path::Path;
//! use bloomkv_kv::fs::{FileSystem, mem::{DirOps, MemFileSystem, UnsyncedData}};
//!
//! let fs = MemFileSystem::new();
//! fs.create_dir_all(Path::new("/db"))?;
//! let mut f = fs.create(Path::new("/db/log"))?;
//! f.append(b"durable")?;
//! f.sync()?;
//! f.append(b" lost")?;
//! fs.sync_dir(Path::new("/db"))?;
//! fs.power_loss(UnsyncedData::Lose, DirOps::Lose);
//! assert_eq!(fs.read_all(Path::new("/db/log"))?, b"durable");
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};

/// What happens at a power loss to bytes written but not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsyncedData {
    /// Every unsynced byte is lost (the file ends where the last sync left it).
    Lose,
    /// A pseudo-random prefix of each file's unsynced bytes survives, chosen by
    /// this seed: a write torn by the power failure.
    KeepPrefix(u64),
}

/// What happens at a power loss to directory changes not followed by `sync_dir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirOps {
    /// They are lost: each directory is as its last `sync_dir` left it.
    Lose,
    /// They survive (a file system that journals metadata in order).
    Keep,
}

/// One file's bytes; shared by every handle and directory entry naming it (an inode).
#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    /// Bytes `0..synced` are durable.
    synced: usize,
}

type InodeRef = Arc<Mutex<Inode>>;

#[derive(Debug, Default, Clone)]
struct Tree {
    files: BTreeMap<PathBuf, InodeRef>,
    dirs: BTreeSet<PathBuf>,
}

#[derive(Debug, Default)]
struct State {
    /// What a running program sees.
    live: Tree,
    /// The directory entries a power loss would keep (with [`DirOps::Lose`]).
    durable: Tree,
}

/// An in-memory [`FileSystem`] with a power-loss model (see the module docs).
///
/// Cloning gives another handle to the same files; [`MemFileSystem::deep_copy`] gives
/// an independent copy.
#[derive(Debug, Default, Clone)]
pub struct MemFileSystem {
    state: Arc<Mutex<State>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl MemFileSystem {
    /// An empty file system.
    pub fn new() -> MemFileSystem {
        MemFileSystem::default()
    }

    /// An independent copy of every file, its durable part and the durable directory
    /// entries: changes to one do not show in the other.
    pub fn deep_copy(&self) -> MemFileSystem {
        let state = lock(&self.state);
        // Inodes shared between the live and durable trees must stay shared.
        let mut copies: BTreeMap<usize, InodeRef> = BTreeMap::new();
        let mut copy_tree = |tree: &Tree| Tree {
            dirs: tree.dirs.clone(),
            files: tree
                .files
                .iter()
                .map(|(path, inode)| {
                    let key = Arc::as_ptr(inode) as usize;
                    let copy = copies
                        .entry(key)
                        .or_insert_with(|| {
                            let i = lock(inode);
                            Arc::new(Mutex::new(Inode {
                                data: i.data.clone(),
                                synced: i.synced,
                            }))
                        })
                        .clone();
                    (path.clone(), copy)
                })
                .collect(),
        };
        let live = copy_tree(&state.live);
        let durable = copy_tree(&state.durable);
        MemFileSystem {
            state: Arc::new(Mutex::new(State { live, durable })),
        }
    }

    /// Simulates a power failure: afterwards the file system holds only what the
    /// disk would (see the module docs). Handles opened before keep working on the
    /// truncated files; a test should drop the store first.
    pub fn power_loss(&self, data: UnsyncedData, dir_ops: DirOps) {
        let mut state = lock(&self.state);
        if dir_ops == DirOps::Lose {
            state.live = state.durable.clone();
        } else {
            state.durable = state.live.clone();
        }
        let mut rng = match data {
            UnsyncedData::Lose => None,
            UnsyncedData::KeepPrefix(seed) => Some(SplitMix(seed)),
        };
        for inode in state.live.files.values() {
            let mut i = lock(inode);
            let unsynced = i.data.len().saturating_sub(i.synced);
            let keep = match rng.as_mut() {
                Some(r) if unsynced > 0 => (r.next() % (unsynced as u64 + 1)) as usize,
                _ => 0,
            };
            let len = i.synced + keep;
            i.data.truncate(len);
            i.synced = len;
        }
    }

    /// The bytes of `path` as a program would read them, or `None` if it is absent.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        let inode = state.live.files.get(path)?;
        let data = lock(inode).data.clone();
        Some(data)
    }

    /// Replaces the contents of `path` (creating it if needed) and makes them durable,
    /// as a corrupting disk or a hostile user would: for corruption tests.
    pub fn set_file_bytes(&self, path: &Path, bytes: Vec<u8>) {
        let mut state = lock(&self.state);
        let len = bytes.len();
        let inode = Arc::new(Mutex::new(Inode {
            data: bytes,
            synced: len,
        }));
        state.live.files.insert(path.to_path_buf(), inode.clone());
        state.durable.files.insert(path.to_path_buf(), inode);
    }

    /// Every file path, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        lock(&self.state).live.files.keys().cloned().collect()
    }

    /// Total bytes held by live files.
    pub fn total_bytes(&self) -> u64 {
        let state = lock(&self.state);
        state
            .live
            .files
            .values()
            .map(|i| lock(i).data.len() as u64)
            .sum()
    }

    fn inode(&self, path: &Path) -> io::Result<InodeRef> {
        lock(&self.state)
            .live
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(path))
    }

    fn check_parent(state: &State, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() && !state.live.dirs.contains(p) => {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{}: no such directory", p.display()),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// A small deterministic generator (SplitMix64), so power losses replay exactly.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

struct MemWritable(InodeRef);

impl WritableFile for MemWritable {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        lock(&self.0).data.extend_from_slice(buf);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut i = lock(&self.0);
        i.synced = i.data.len();
        Ok(())
    }
}

struct MemRandom(InodeRef);

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let i = lock(&self.0);
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| i.data.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.0).data.len() as u64)
    }
}

impl FileSystem for MemFileSystem {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut state = lock(&self.state);
        Self::check_parent(&state, path)?;
        // A new inode, as `O_TRUNC` on a fresh file: the durable entry (if any) keeps
        // pointing at the old bytes until the directory is synced.
        let inode: InodeRef = Arc::default();
        state.live.files.insert(path.to_path_buf(), inode.clone());
        Ok(Box::new(MemWritable(inode)))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(MemWritable(self.inode(path)?)))
    }

    fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(MemRandom(self.inode(path)?)))
    }

    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let inode = self.inode(path)?;
        let data = lock(&inode).data.clone();
        Ok(data)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        Self::check_parent(&state, to)?;
        let inode = state
            .live
            .files
            .remove(from)
            .ok_or_else(|| not_found(from))?;
        state.live.files.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        match state.live.files.remove(path) {
            Some(_) => Ok(()),
            None => Err(not_found(path)),
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        if !state.live.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let in_dir = |p: &Path| p.parent() == Some(dir);
        state.durable.files.retain(|p, _| !in_dir(p));
        let entries: Vec<(PathBuf, InodeRef)> = state
            .live
            .files
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, i)| (p.clone(), i.clone()))
            .collect();
        state.durable.files.extend(entries);
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        // Directories are made durable at once: the store never relies on that.
        for d in dir.ancestors().filter(|d| !d.as_os_str().is_empty()) {
            state.live.dirs.insert(d.to_path_buf());
            state.durable.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = lock(&self.state);
        if !state.live.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let inside = |p: &Path| p.parent() == Some(dir);
        if state.live.files.keys().any(|p| inside(p)) || state.live.dirs.iter().any(|p| inside(p)) {
            return Err(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                format!("{}: directory not empty", dir.display()),
            ));
        }
        // Like its creation, the removal is durable at once.
        state.live.dirs.remove(dir);
        state.durable.dirs.remove(dir);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = lock(&self.state);
        if !state.live.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let mut names: Vec<String> = state
            .live
            .files
            .keys()
            .chain(state.live.dirs.iter())
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        let state = lock(&self.state);
        state.live.files.contains_key(path) || state.live.dirs.contains(path)
    }

    fn lock(&self, path: &Path) -> io::Result<FileLock> {
        // One process, one store per directory in tests: nothing to exclude.
        Ok(FileLock::detached(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> &'static Path {
        Path::new("/db")
    }

    fn setup() -> MemFileSystem {
        let fs = MemFileSystem::new();
        fs.create_dir_all(dir()).unwrap();
        fs
    }

    #[test]
    fn unsynced_bytes_are_lost_and_synced_bytes_kept() {
        let fs = setup();
        let p = dir().join("a");
        let mut f = fs.create(&p).unwrap();
        f.append(b"one").unwrap();
        f.sync().unwrap();
        f.append(b"two").unwrap();
        fs.sync_dir(dir()).unwrap();
        fs.power_loss(UnsyncedData::Lose, DirOps::Lose);
        assert_eq!(fs.read_all(&p).unwrap(), b"one");
    }

    #[test]
    fn a_torn_write_keeps_a_prefix_of_the_unsynced_bytes() {
        let mut kept = BTreeSet::new();
        for seed in 0..64 {
            let fs = setup();
            let p = dir().join("a");
            let mut f = fs.create(&p).unwrap();
            f.append(b"one").unwrap();
            f.sync().unwrap();
            f.append(b"twothree").unwrap();
            fs.sync_dir(dir()).unwrap();
            fs.power_loss(UnsyncedData::KeepPrefix(seed), DirOps::Lose);
            let got = fs.read_all(&p).unwrap();
            assert!(b"onetwothree".starts_with(&got) && got.len() >= 3);
            kept.insert(got.len());
        }
        assert!(kept.len() > 3, "the kept prefix varies with the seed");
    }

    #[test]
    fn a_rename_without_a_directory_sync_may_be_lost() {
        let fs = setup();
        let (tmp, fin) = (dir().join("t.tmp"), dir().join("t"));
        let mut f = fs.create(&tmp).unwrap();
        f.append(b"x").unwrap();
        f.sync().unwrap();
        fs.rename(&tmp, &fin).unwrap();
        let keep = fs.deep_copy();
        fs.power_loss(UnsyncedData::Lose, DirOps::Lose);
        assert!(
            !fs.exists(&fin) && !fs.exists(&tmp),
            "never synced into the dir"
        );
        keep.power_loss(UnsyncedData::Lose, DirOps::Keep);
        assert_eq!(keep.read_all(&fin).unwrap(), b"x");
        assert!(!keep.exists(&tmp));
    }

    #[test]
    fn a_synced_rename_survives_and_replaces_the_old_file() {
        let fs = setup();
        let (tmp, fin) = (dir().join("M.tmp"), dir().join("M"));
        for content in [&b"old"[..], b"new"] {
            let mut f = fs.create(&tmp).unwrap();
            f.append(content).unwrap();
            f.sync().unwrap();
            fs.rename(&tmp, &fin).unwrap();
            fs.sync_dir(dir()).unwrap();
        }
        fs.power_loss(UnsyncedData::Lose, DirOps::Lose);
        assert_eq!(fs.read_all(&fin).unwrap(), b"new");
        assert_eq!(fs.list(dir()).unwrap(), vec!["M".to_string()]);
    }

    #[test]
    fn an_unsynced_delete_comes_back() {
        let fs = setup();
        let p = dir().join("w");
        fs.create(&p).unwrap().sync().unwrap();
        fs.sync_dir(dir()).unwrap();
        fs.remove(&p).unwrap();
        assert!(!fs.exists(&p));
        fs.power_loss(UnsyncedData::Lose, DirOps::Lose);
        assert!(fs.exists(&p));
    }

    #[test]
    fn deep_copies_are_independent() {
        let fs = setup();
        let p = dir().join("a");
        fs.set_file_bytes(&p, b"abc".to_vec());
        let copy = fs.deep_copy();
        copy.set_file_bytes(&p, b"xyz".to_vec());
        fs.open_append(&p).unwrap().append(b"d").unwrap();
        assert_eq!(fs.read_all(&p).unwrap(), b"abcd");
        assert_eq!(copy.read_all(&p).unwrap(), b"xyz");
    }

    #[test]
    fn reads_past_the_end_fail_cleanly() {
        let fs = setup();
        let p = dir().join("a");
        fs.set_file_bytes(&p, b"abc".to_vec());
        let f = fs.open_random(&p).unwrap();
        let mut buf = [0u8; 2];
        f.read_exact_at(&mut buf, 1).unwrap();
        assert_eq!(&buf, b"bc");
        assert!(f.read_exact_at(&mut buf, 2).is_err());
        assert!(f.read_exact_at(&mut buf, u64::MAX).is_err());
        assert!(fs.create(Path::new("/nodir/x")).is_err());
    }
}
