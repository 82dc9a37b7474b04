//! The names of the files in a store directory.
//!
//! Every file the store creates has a name this module builds, and every name it
//! builds it can parse back, so that cleanup deletes only files the store made:
//!
//! ```text
//! 000042.sst       a live (or obsolete) table, file number 42
//! 000042.sst.tmp   a table being written; renamed to 000042.sst once synced
//! 000017.wal       a write-ahead log, file number 17
//! MANIFEST         the list of live tables (see `manifest`)
//! MANIFEST.tmp     a manifest being written; renamed to MANIFEST once synced
//! LOCK             held while a store has the directory open
//! SETTINGS         how the store's tables and levels are made (see `settings`)
//! SETTINGS.tmp     settings being written; renamed to SETTINGS once synced
//! PROBES           where lookups went, level by level (see `probe_stats`)
//! PROBES.tmp       probe statistics being written; renamed to PROBES once synced
//! RELEASED         tables whose filters the budget let go of (see `filter_budget`)
//! RELEASED.tmp     that list being written; renamed to RELEASED once synced
//! KEYSPACES        the store's named keyspaces (see `keyspaces`)
//! KEYSPACES.tmp    that list being written; renamed to KEYSPACES once synced
//! keyspace-000003/ named keyspace 3's tables, manifest and settings (its writes are
//!                  in the root's logs)
//! CLOSED           left by a clean close: the log it names may be appended to again
//!                  (see `recovery::ClosedMark`); removed by the next open
//! lost/            tables moved aside, never deleted: damaged ones (by `repair`)
//!                  and ones the manifest does not name (by open)
//! ```
//!
//! File numbers come from one counter (`next_file_number` in the manifest), so a
//! table and a log never share a number. Numbers are printed with at least six digits;
//! larger numbers simply print wider. A name parses only if it is exactly what this
//! module would print (`42.sst` or `0000042.sst` are not the store's files) and its
//! number is at most [`MAX_FILE_NUMBER`], which the counter never reaches.

use std::path::{Path, PathBuf};

/// The largest file number a store uses or recognizes: `2^63 - 1`, beyond reach, so
/// that `+ 1` on the highest number in a directory cannot overflow. A file named with
/// a larger number is not the store's (open and repair leave it alone), and a manifest
/// whose `next_file_number` exceeds it is corrupt.
pub const MAX_FILE_NUMBER: u64 = u64::MAX >> 1;

/// The manifest's file name.
pub const MANIFEST: &str = "MANIFEST";
/// The name a new manifest is written under before it is renamed to [`MANIFEST`].
pub const MANIFEST_TMP: &str = "MANIFEST.tmp";
/// The settings file's name (see `settings`).
pub const SETTINGS: &str = "SETTINGS";
/// The name new settings are written under before they are renamed to [`SETTINGS`].
pub const SETTINGS_TMP: &str = "SETTINGS.tmp";
/// The probe statistics' file name (see `probe_stats`).
pub const PROBES: &str = "PROBES";
/// The name new probe statistics are written under before they are renamed to
/// [`PROBES`].
pub const PROBES_TMP: &str = "PROBES.tmp";
/// The released filters' file name (see `filter_budget`).
pub const RELEASED: &str = "RELEASED";
/// The name a new list of released filters is written under before it is renamed to
/// [`RELEASED`].
pub const RELEASED_TMP: &str = "RELEASED.tmp";
/// The keyspace list's file name (see `keyspaces`).
pub const KEYSPACES: &str = "KEYSPACES";
/// The name a new keyspace list is written under before it is renamed to
/// [`KEYSPACES`].
pub const KEYSPACES_TMP: &str = "KEYSPACES.tmp";
/// What a named keyspace's directory name starts with (`keyspace-000003`).
const KEYSPACE_DIR_PREFIX: &str = "keyspace-";
/// The lock file's name.
pub const LOCK: &str = "LOCK";
/// The clean-close mark's name (see `recovery::ClosedMark`).
pub const CLOSED: &str = "CLOSED";
/// The directory damaged tables (`repair`) and tables no manifest names (open) are
/// moved into.
pub const LOST_DIR: &str = "lost";

const TABLE_SUFFIX: &str = ".sst";
const TEMP_TABLE_SUFFIX: &str = ".sst.tmp";
const WAL_SUFFIX: &str = ".wal";

/// What a file in a store directory is, as told by its name. New kinds of file may
/// come (`Closed` did), so a `match` outside this crate needs a catch-all arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// `{number:06}.sst`: a table.
    Table(u64),
    /// `{number:06}.sst.tmp`: a table still being written (garbage after a crash).
    TempTable(u64),
    /// `{number:06}.wal`: a write-ahead log.
    Wal(u64),
    /// `MANIFEST`.
    Manifest,
    /// `MANIFEST.tmp` (garbage after a crash).
    ManifestTemp,
    /// `LOCK`.
    Lock,
    /// `CLOSED`.
    Closed,
    /// `SETTINGS`.
    Settings,
    /// `SETTINGS.tmp` (garbage after a crash).
    SettingsTemp,
    /// `KEYSPACES`.
    Keyspaces,
    /// `KEYSPACES.tmp` (garbage after a crash).
    KeyspacesTemp,
    /// `keyspace-{number:06}`: a named keyspace's directory.
    KeyspaceDir(u32),
}

/// `{number:06}.sst`
pub fn table_file_name(number: u64) -> String {
    format!("{number:06}{TABLE_SUFFIX}")
}

/// `{number:06}.sst.tmp`
pub fn temp_table_file_name(number: u64) -> String {
    format!("{number:06}{TEMP_TABLE_SUFFIX}")
}

/// `{number:06}.wal`
pub fn wal_file_name(number: u64) -> String {
    format!("{number:06}{WAL_SUFFIX}")
}

/// `dir/{number:06}.sst`
pub fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(table_file_name(number))
}

/// `dir/{number:06}.sst.tmp`
pub fn temp_table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(temp_table_file_name(number))
}

/// `dir/{number:06}.wal`
pub fn wal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(wal_file_name(number))
}

/// `dir/MANIFEST`
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST)
}

/// `dir/MANIFEST.tmp`
pub fn manifest_tmp_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST_TMP)
}

/// `dir/lost`
pub fn lost_dir(dir: &Path) -> PathBuf {
    dir.join(LOST_DIR)
}

/// `dir/LOCK`
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join(LOCK)
}

/// `dir/SETTINGS`
pub fn settings_path(dir: &Path) -> PathBuf {
    dir.join(SETTINGS)
}

/// `dir/SETTINGS.tmp`
pub fn settings_tmp_path(dir: &Path) -> PathBuf {
    dir.join(SETTINGS_TMP)
}

/// `dir/PROBES`
pub fn probes_path(dir: &Path) -> PathBuf {
    dir.join(PROBES)
}

/// `dir/RELEASED`
pub fn released_path(dir: &Path) -> PathBuf {
    dir.join(RELEASED)
}

/// `dir/RELEASED.tmp`
pub fn released_tmp_path(dir: &Path) -> PathBuf {
    dir.join(RELEASED_TMP)
}

/// `dir/PROBES.tmp`
pub fn probes_tmp_path(dir: &Path) -> PathBuf {
    dir.join(PROBES_TMP)
}

/// `dir/KEYSPACES`
pub fn keyspaces_path(dir: &Path) -> PathBuf {
    dir.join(KEYSPACES)
}

/// `dir/KEYSPACES.tmp`
pub fn keyspaces_tmp_path(dir: &Path) -> PathBuf {
    dir.join(KEYSPACES_TMP)
}

/// `keyspace-{id:06}`
pub fn keyspace_dir_name(id: u32) -> String {
    format!("{KEYSPACE_DIR_PREFIX}{id:06}")
}

/// `dir/keyspace-{id:06}`: where named keyspace `id` keeps its tables.
pub fn keyspace_dir(dir: &Path, id: u32) -> PathBuf {
    dir.join(keyspace_dir_name(id))
}

/// `dir/CLOSED`
pub fn closed_path(dir: &Path) -> PathBuf {
    dir.join(CLOSED)
}

/// Tells what a directory entry is; `None` for names the store did not make.
///
/// ```
/// use bloomkv_kv::filename::{parse_file_name, FileKind};
///
/// assert_eq!(parse_file_name("000042.sst"), Some(FileKind::Table(42)));
/// assert_eq!(parse_file_name("1234567.wal"), Some(FileKind::Wal(1234567)));
/// assert_eq!(parse_file_name("MANIFEST"), Some(FileKind::Manifest));
/// assert_eq!(parse_file_name("42.sst"), None); // not how the store prints 42
/// assert_eq!(parse_file_name("notes.txt"), None);
/// ```
pub fn parse_file_name(name: &str) -> Option<FileKind> {
    match name {
        MANIFEST => return Some(FileKind::Manifest),
        MANIFEST_TMP => return Some(FileKind::ManifestTemp),
        LOCK => return Some(FileKind::Lock),
        CLOSED => return Some(FileKind::Closed),
        SETTINGS => return Some(FileKind::Settings),
        SETTINGS_TMP => return Some(FileKind::SettingsTemp),
        KEYSPACES => return Some(FileKind::Keyspaces),
        KEYSPACES_TMP => return Some(FileKind::KeyspacesTemp),
        _ => {}
    }
    if let Some(digits) = name.strip_prefix(KEYSPACE_DIR_PREFIX) {
        let id: u32 = digits.parse().ok()?;
        return (keyspace_dir_name(id) == name).then_some(FileKind::KeyspaceDir(id));
    }
    let (stem, make): (&str, fn(u64) -> FileKind) =
        if let Some(stem) = name.strip_suffix(TEMP_TABLE_SUFFIX) {
            (stem, FileKind::TempTable)
        } else if let Some(stem) = name.strip_suffix(TABLE_SUFFIX) {
            (stem, FileKind::Table)
        } else if let Some(stem) = name.strip_suffix(WAL_SUFFIX) {
            (stem, FileKind::Wal)
        } else {
            return None;
        };
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: u64 = stem.parse().ok()?;
    // Only the canonical spelling is ours: reject "42" and "0000042" for 42.
    if format!("{number:06}") != stem || number > MAX_FILE_NUMBER {
        return None;
    }
    Some(make(number))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_name_parses_back() {
        for n in [0, 1, 42, 999_999, 1_000_000, MAX_FILE_NUMBER] {
            assert_eq!(
                parse_file_name(&table_file_name(n)),
                Some(FileKind::Table(n))
            );
            assert_eq!(
                parse_file_name(&temp_table_file_name(n)),
                Some(FileKind::TempTable(n))
            );
            assert_eq!(parse_file_name(&wal_file_name(n)), Some(FileKind::Wal(n)));
        }
        assert_eq!(parse_file_name(MANIFEST), Some(FileKind::Manifest));
        assert_eq!(parse_file_name(MANIFEST_TMP), Some(FileKind::ManifestTemp));
        assert_eq!(parse_file_name(LOCK), Some(FileKind::Lock));
        assert_eq!(parse_file_name(SETTINGS), Some(FileKind::Settings));
        assert_eq!(parse_file_name(SETTINGS_TMP), Some(FileKind::SettingsTemp));
    }

    #[test]
    fn numbers_past_the_ceiling_are_not_ours() {
        for n in [MAX_FILE_NUMBER + 1, u64::MAX] {
            assert_eq!(parse_file_name(&table_file_name(n)), None);
            assert_eq!(parse_file_name(&temp_table_file_name(n)), None);
            assert_eq!(parse_file_name(&wal_file_name(n)), None);
        }
    }

    #[test]
    fn names_the_store_did_not_make_are_not_parsed() {
        for name in [
            "",
            ".sst",
            "42.sst",
            "0000042.sst",
            "+00042.sst",
            "-00042.wal",
            "00004a.sst",
            "000042.SST",
            "000042.sst.bak",
            "000042.log",
            "99999999999999999999.sst", // overflows u64
            "MANIFEST.old",
            "manifest",
            "LOCK2",
        ] {
            assert_eq!(parse_file_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn paths_join_the_directory() {
        let dir = Path::new("db");
        assert_eq!(table_path(dir, 7), Path::new("db/000007.sst"));
        assert_eq!(temp_table_path(dir, 7), Path::new("db/000007.sst.tmp"));
        assert_eq!(wal_path(dir, 7), Path::new("db/000007.wal"));
        assert_eq!(manifest_path(dir), Path::new("db/MANIFEST"));
        assert_eq!(manifest_tmp_path(dir), Path::new("db/MANIFEST.tmp"));
        assert_eq!(lock_path(dir), Path::new("db/LOCK"));
    }
}
