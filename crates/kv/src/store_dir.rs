//! The store's directory as a set of files: what each file is, how open tidies the
//! directory before it writes, how a manifest is written for a version, and which
//! files go once a durable manifest no longer needs them.
//!
//! ```text
//!  MANIFEST  the live tables, the oldest live log, the next file number
//!  000007.log, 000009.log   logs from the manifest's number on: replayed at open
//!  000005.sst …             tables: live if the manifest names them
//!  SETTINGS                 how tables and levels are made (see `settings`)
//!  *.sst.tmp, MANIFEST.tmp, SETTINGS.tmp
//!                           being written when the store stopped: never live, deleted
//!  lost/                    tables no manifest names, moved aside at open (never deleted)
//! ```
//!
//! Nothing here knows the open store: open, flush, compaction, `repair` and `inspect`
//! call these with the directory and its file system.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::filename::{self, parse_file_name, FileKind};
use crate::fs::FileSystem;
use crate::manifest::{self, ManifestState, TableMeta};
use crate::types::SeqNo;
use crate::types::NUM_LEVELS;
use crate::version::Version;

/// What a reader without the lock compares before and after reading a store to tell
/// whether a writer changed it meanwhile: the manifest's bytes and the file names.
/// (Logs grow in place; only a log's last record can be caught half-written, which
/// the default recovery mode tolerates.)
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DirState {
    manifest: Option<Vec<u8>>,
    names: Vec<String>,
}

impl DirState {
    pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> DirState {
        DirState {
            manifest: fs.read_all(&filename::manifest_path(dir)).ok(),
            names: fs.list(dir).unwrap_or_default(),
        }
    }

    /// Whether the manifest is the same in `self` and `later` (files may have come
    /// and gone).
    pub(crate) fn same_manifest(&self, later: &DirState) -> bool {
        self.manifest == later.manifest
    }

    /// Files that appeared or vanished between `self` and `later`, plus one if the
    /// manifest was replaced.
    pub(crate) fn changes(&self, later: &DirState) -> usize {
        let a: HashSet<&String> = self.names.iter().collect();
        let b: HashSet<&String> = later.names.iter().collect();
        a.symmetric_difference(&b).count() + usize::from(self.manifest != later.manifest)
    }
}

/// After a manifest write failed: deletes those of the `added` tables that the
/// manifest on disk does not name (the write failed before its rename, so they are
/// garbage). If the manifest cannot be read back, nothing is deleted.
pub(crate) fn discard_unrecorded(fs: &Arc<dyn FileSystem>, dir: &Path, added: &[u64]) {
    let Ok(Some(state)) = manifest::read_manifest(fs.as_ref(), dir) else {
        return;
    };
    let named: HashSet<u64> = state.tables().iter().map(|t| t.number).collect();
    for &number in added.iter().filter(|n| !named.contains(n)) {
        let _ = fs.remove(&filename::table_path(dir, number));
    }
}

/// Writes the manifest for `version` (atomic: temp file, fsync, rename, dir fsync).
pub(crate) fn write_state(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    version: &Version,
    wal_number: u64,
    next_file_number: u64,
    last_sequence: SeqNo,
) -> Result<()> {
    let tables = version
        .tables()
        .map(|(level, t)| TableMeta {
            level: level as u32,
            number: t.number,
            file_size: t.file_size(),
            smallest: Bytes::copy_from_slice(t.smallest()),
            largest: Bytes::copy_from_slice(t.largest()),
            entries: t.entries(),
            max_seq: t.max_seq(),
            data_size: Some(t.record.data_size),
        })
        .collect();
    let state = ManifestState::new(next_file_number, last_sequence, wal_number, tables);
    manifest::write_manifest(fs.as_ref(), dir, &state)
}

/// Deletes retired WALs, leftover temp files and, given the live set (`repair`, before
/// any reader exists), tables the manifest no longer names. Best effort: a log or temp
/// file that cannot be deleted now goes at the next call; a table the next open finds
/// unnamed is moved into `lost/` (open cannot tell it from one the manifest lost).
pub(crate) fn remove_obsolete(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    live: Option<&HashSet<u64>>,
    live_wal: u64,
) {
    let Ok(names) = fs.list(dir) else { return };
    for name in names {
        let obsolete = match parse_file_name(&name) {
            Some(FileKind::Table(n)) => live.is_some_and(|live| !live.contains(&n)),
            Some(FileKind::Wal(n)) => n < live_wal,
            Some(FileKind::TempTable(_))
            | Some(FileKind::ManifestTemp)
            | Some(FileKind::SettingsTemp) => true,
            _ => false,
        };
        if obsolete {
            let _ = fs.remove(&dir.join(&name));
        }
    }
}

/// Deletes the logs in `dir` numbered below `first_live` and nothing else: what a
/// keyspace's flush may do in the directory another keyspace writes tables to.
pub(crate) fn remove_logs_below(fs: &Arc<dyn FileSystem>, dir: &Path, first_live: u64) {
    let Ok(names) = fs.list(dir) else { return };
    for name in names {
        if let Some(FileKind::Wal(n)) = parse_file_name(&name) {
            if n < first_live {
                let _ = fs.remove(&dir.join(&name));
            }
        }
    }
}

/// The level of a table the manifest in `dir` lists, refused when the store has no
/// such level: the manifest's format numbers levels up to `MAX_LEVELS`, the store
/// uses `NUM_LEVELS`.
pub(crate) fn table_level(dir: &Path, meta: &TableMeta) -> Result<usize> {
    let level = meta.level as usize;
    if level >= NUM_LEVELS {
        return Err(Error::corruption(
            filename::manifest_path(dir),
            format!(
                "table {} on level {level}: the store has levels 0 to {}",
                meta.number,
                NUM_LEVELS - 1
            ),
        ));
    }
    Ok(level)
}

/// The error for a directory without a `MANIFEST`: corruption if it holds a table or
/// a log (a store lost its manifest: `repair` rebuilds it), otherwise no store at all
/// (which an open that creates stores goes on from).
pub(crate) fn no_manifest(dir: &Path, names: &[String]) -> Error {
    match stray_store_file(names) {
        Some(stray) => Error::corruption(
            filename::manifest_path(dir),
            format!("missing, but the directory holds store file {stray} (`repair` rebuilds it)"),
        ),
        None => Error::InvalidArgument(format!(
            "{} holds no bloomkv store (no MANIFEST)",
            dir.display()
        )),
    }
}

/// The store's directory as given, refused when empty: an empty path would resolve
/// against the current directory for some operations (its `LOCK` file) and fail for
/// others, leaving a file behind and an error that names no path.
pub(crate) fn store_dir(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::InvalidArgument("the store's path is empty".into()));
    }
    Ok(path.to_path_buf())
}

/// A table or log among `names`: what only a store that has a manifest leaves.
pub(crate) fn stray_store_file(names: &[String]) -> Option<&String> {
    names.iter().find(|n| {
        matches!(
            parse_file_name(n),
            Some(FileKind::Table(_)) | Some(FileKind::Wal(_))
        )
    })
}

/// The error for a directory that holds no store when the open may not create one.
pub(crate) fn no_store(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{} holds no bloomkv store and create_if_missing is false",
        dir.display()
    ))
}

/// Open's first step on an existing store, before it writes anything: deletes leftover
/// temp files (a table or manifest being written when the store stopped: never named
/// by a manifest) and moves every table the manifest does not name into `lost/`.
/// Returns where the moved tables are now.
///
/// Such a table is normally the output of a flush or compaction cut short by a crash,
/// or an input a finished compaction had not yet deleted; either way the named tables
/// and logs hold its entries. But open cannot prove that (a table written by another
/// process that got past the lock, or copied in by hand, looks the same), so it keeps
/// the file where the store no longer reads it and `repair` or a person can.
pub(crate) fn tidy_before_writing(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    names: &[String],
    state: &ManifestState,
) -> Result<Vec<PathBuf>> {
    let live: HashSet<u64> = state.tables().iter().map(|t| t.number).collect();
    let mut unlisted = Vec::new();
    for name in names {
        match parse_file_name(name) {
            Some(FileKind::TempTable(_))
            | Some(FileKind::ManifestTemp)
            | Some(FileKind::SettingsTemp)
            | Some(FileKind::KeyspacesTemp) => {
                let path = dir.join(name);
                match fs.remove(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Some(FileKind::Table(n)) if !live.contains(&n) => unlisted.push(n),
            _ => {}
        }
    }
    let mut moved = Vec::new();
    if unlisted.is_empty() {
        return Ok(moved);
    }
    let lost = filename::lost_dir(dir);
    fs.create_dir_all(&lost)?;
    for number in unlisted {
        let to = free_name(fs.as_ref(), &lost, &filename::table_file_name(number));
        fs.rename(&filename::table_path(dir, number), &to)?;
        moved.push(to);
    }
    fs.sync_dir(&lost)?;
    fs.sync_dir(dir)?;
    Ok(moved)
}

/// A name in `dir` for `name` that no file has yet (`name`, `name.1`, `name.2`, ...).
pub(crate) fn free_name(fs: &dyn FileSystem, dir: &Path, name: &str) -> PathBuf {
    let mut candidate = dir.join(name);
    let mut i = 0u32;
    while fs.exists(&candidate) {
        i += 1;
        candidate = dir.join(format!("{name}.{i}"));
    }
    candidate
}

/// Leaves the clean-close mark (`CLOSED`, the bytes of a `recovery::ClosedMark`)
/// durably: created, written, fsynced, then the directory fsynced. Best effort, as a
/// missing mark only costs the next open a flush: an error leaves no mark or a torn
/// one, which fails its CRC and is ignored.
///
/// Why durable: a mark lost to a power loss after a clean close would cost that flush
/// for nothing. (A mark is trusted only when the log's length is exactly what it
/// says, so even a stale one cannot vouch for bytes written after it.)
pub(crate) fn write_closed_mark(fs: &Arc<dyn FileSystem>, dir: &Path, mark: &[u8]) {
    let path = filename::closed_path(dir);
    let written = (|| {
        let mut file = fs.create(&path)?;
        file.append(mark)?;
        file.sync()?;
        fs.sync_dir(dir)
    })();
    if written.is_err() {
        let _ = fs.remove(&path);
    }
}

/// Removes the clean-close mark before the open that read it takes a write, durably
/// (the directory fsynced): the mark vouches for one session's log once, and a
/// removal undone by a power loss would bring back a mark for a log this session may
/// have appended to. An error fails the open.
pub(crate) fn remove_closed_mark(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<()> {
    match fs.remove(&filename::closed_path(dir)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    fs.sync_dir(dir)?;
    Ok(())
}

/// The number in a store file's name, if it has one.
pub(crate) fn file_number(name: &str) -> Option<u64> {
    match parse_file_name(name)? {
        FileKind::Table(n) | FileKind::TempTable(n) | FileKind::Wal(n) => Some(n),
        _ => None,
    }
}

/// The log numbers among `names` from `first` on (the manifest's oldest live log),
/// oldest first: the logs an open replays and `verify` checks.
pub(crate) fn live_wals(names: &[String], first: u64) -> Vec<u64> {
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match parse_file_name(n) {
            Some(FileKind::Wal(number)) if number >= first => Some(number),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    wals
}
