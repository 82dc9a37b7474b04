//! Looking inside a store directory: what `bloomkv inspect` and `bloomkv verify` show.
//!
//! Both work on a directory without opening it as a [`Db`](crate::Db): they take no
//! lock, write nothing and replay nothing, so they are safe on a damaged store (and on
//! one another process has open). `inspect` stops at the first file it cannot read and
//! says which; `verify` reads everything and lists every problem by file and offset.
//!
//! On a store another process is writing, files come and go while they read (a flush
//! retires a log, a compaction its input tables). Each compares the manifest and the
//! file names before and after reading; if they changed and something failed, it
//! reads again, up to [`ATTEMPTS`] times. A store that never holds still that long is
//! reported as busy (`VerifyReport::settled` is `false`), never as corrupt.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::filename::{self, parse_file_name, FileKind};
use crate::fs::{FileSystem, OsFileSystem};
use crate::lazy_table::live_table_error;
use crate::lazy_table::TableRecord;
use crate::manifest::{self, ManifestState};
use crate::options::Options;
use crate::options::WalRecovery;
use crate::recovery;
use crate::settings::SettingsState;
use crate::sstable::{self, show_key, Table};
use crate::stats::Counters;
use crate::store_dir::{live_wals, no_manifest, table_level, DirState};

// What `inspect` shows of each table is described where tables are opened, so that
// `Db::table_infos` needs nothing of this module.
pub use crate::table_files::TableInfo;

/// A store directory's manifest and tables.
#[derive(Debug, Clone, Serialize)]
pub struct StoreInfo {
    /// The directory.
    pub dir: PathBuf,
    /// Next file number the store will use.
    pub next_file_number: u64,
    /// Highest sequence number in the tables.
    pub last_sequence: u64,
    /// Oldest live WAL.
    pub wal_number: u64,
    /// Live tables, L0 first.
    pub tables: Vec<TableInfo>,
    /// Live WAL files and their sizes.
    pub wals: Vec<(String, u64)>,
    /// The store's named keyspaces, as its `KEYSPACES` list names them (each inspected
    /// on its own: [`keyspace_path`](crate::keyspace_path)). Empty in a keyspace's own
    /// directory and in a store that never made one.
    pub keyspaces: Vec<String>,
}

impl fmt::Display for StoreInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "store {}", self.dir.display())?;
        writeln!(
            f,
            "next file {}, last sequence {}, live WAL from {}",
            self.next_file_number, self.last_sequence, self.wal_number
        )?;
        for (name, size) in &self.wals {
            writeln!(f, "wal {name}: {size} bytes")?;
        }
        if !self.keyspaces.is_empty() {
            writeln!(
                f,
                "named keyspaces: {} (their tables: --keyspace NAME)",
                self.keyspaces.join(", ")
            )?;
        }
        let mut level = usize::MAX;
        for t in &self.tables {
            if t.level != level {
                level = t.level;
                let n = self.tables.iter().filter(|x| x.level == level).count();
                writeln!(f, "L{level}: {n} table(s)")?;
            }
            writeln!(
                f,
                "  {:06}.sst  {} bytes  format {}  {} entries ({} deletions)  keys {} .. {}",
                t.number,
                t.file_size,
                t.format_version,
                t.entries,
                t.deletions,
                show_key(&t.smallest),
                show_key(&t.largest)
            )?;
            if t.partitions > 0 {
                writeln!(
                    f,
                    "    index and filter in {} partitions, read on demand; in memory: the \
                     top level and the coarse filter",
                    t.partitions
                )?;
            }
            match &t.filter {
                Some(fi) => {
                    writeln!(
                    f,
                    "    {} {} ({}): {} bits = {:.2} bits/key, {} {}, fill {:.1}%, est. FP {:.3}%",
                    if t.partitions > 0 { "coarse filter of" } else { "filter" },
                    t.filter_policy,
                    fi.layout,
                    fi.num_bits,
                    fi.num_bits as f64 / fi.num_keys.max(1) as f64,
                    fi.num_probes,
                    // A Ribbon block checks r result bits per query, not k probes.
                    if fi.layout == "ribbon" {
                        "result bits"
                    } else {
                        "probes"
                    },
                    fi.fill_ratio * 100.0,
                    fi.estimated_fp_rate * 100.0
                )?
                }
                None => writeln!(f, "    filter: {}", t.filter_state)?,
            }
            match &t.range_filter {
                Some(r) => writeln!(
                    f,
                    "    range filter (grafite): {} bytes = {:.2} bits/key, {} keys, \
                     max range {}, universe {}, prefix {} + {} mapped bytes",
                    r.block_bytes,
                    r.bits_per_key,
                    r.keys,
                    r.max_range_len,
                    r.reduced_universe,
                    r.prefix_len,
                    r.mapped_bytes
                )?,
                None if t.range_filter_state == "none" => {}
                None => writeln!(f, "    range filter: {}", t.range_filter_state)?,
            }
            if t.range_tombstones > 0 {
                writeln!(f, "    range tombstones: {}", t.range_tombstones)?;
            }
        }
        if self.tables.is_empty() {
            writeln!(f, "no tables")?;
        }
        Ok(())
    }
}

fn load_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<ManifestState> {
    if !fs.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist",
            dir.display()
        )));
    }
    match manifest::read_manifest(fs, dir)? {
        Some(state) => Ok(state),
        None => Err(no_manifest(dir, &fs.list(dir)?)),
    }
}

/// Reads a store's manifest and opens each live table read-only.
///
/// Fails with the first file that does not validate, naming it.
pub fn inspect(dir: &Path) -> Result<StoreInfo> {
    let fs = OsFileSystem;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = DirState::read(&fs, dir);
        match inspect_once(&fs, dir) {
            Ok(info) => return Ok(info),
            Err(e) => {
                let after = DirState::read(&fs, dir);
                if before == after {
                    return Err(e);
                }
                if attempt >= ATTEMPTS {
                    return Err(busy(dir, attempt, before.changes(&after)));
                }
            }
        }
    }
}

/// How many times `inspect` and `verify` read a store that changes under them.
pub const ATTEMPTS: usize = 20;

fn busy(dir: &Path, attempts: usize, changes: usize) -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::ResourceBusy,
        format!(
            "{} is open by another process: {changes} file(s) rotated while reading, \
             {attempts} attempt(s); try again",
            dir.display()
        ),
    ))
}

fn inspect_once(fs: &OsFileSystem, dir: &Path) -> Result<StoreInfo> {
    let fs = *fs;
    let state = load_manifest(&fs, dir)?;
    let policies = Options::default().known_policies()?;
    let counters = Arc::new(Counters::default());
    let mut tables = Vec::new();
    for meta in state.tables() {
        let path = filename::table_path(dir, meta.number);
        let file = fs
            .open_random(&path)
            .map_err(|e| live_table_error(&path, e.into()))?;
        let table = Table::open(file, path, counters.clone(), &policies)?;
        tables.push(TableInfo::of(meta.level as usize, meta.number, &table));
    }
    tables.sort_by_key(|t| (t.level, t.number));
    let mut wals = Vec::new();
    for name in fs.list(dir)? {
        if let Some(FileKind::Wal(n)) = parse_file_name(&name) {
            if n >= state.wal_number() {
                let size = std::fs::metadata(dir.join(&name))
                    .map(|m| m.len())
                    .unwrap_or(0);
                wals.push((name, size));
            }
        }
    }
    Ok(StoreInfo {
        dir: dir.to_path_buf(),
        next_file_number: state.next_file_number(),
        last_sequence: state.last_sequence(),
        wal_number: state.wal_number(),
        tables,
        wals,
        keyspaces: crate::keyspaces::read(&fs, dir)?
            .entries
            .into_iter()
            .map(|(_, name)| name)
            .collect(),
    })
}

/// One problem `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// Byte offset of the bad block or record, where known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub what: String,
}

/// What `verify` checked and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Files read.
    pub files_checked: usize,
    /// Blocks and records whose checksums passed... and those that did not:
    pub problems: Vec<Problem>,
    /// Things worth knowing that are not damage (a torn WAL tail from a crash).
    pub notes: Vec<String>,
    /// What each `WalRecovery` mode would do with the store's logs, default first.
    pub recovery: Vec<ModeVerdict>,
    /// Whether the store held still while it was read. `false`: another process kept
    /// changing it through every attempt; nothing is known (the problems are empty).
    pub settled: bool,
    /// Reads of the store this report took (more than one when a writer changed the
    /// store while a read failed).
    pub attempts: usize,
    /// Files that appeared or vanished under the failed reads.
    pub rotated: usize,
}

/// What opening the store under one `WalRecovery` mode would do with its logs.
#[derive(Debug, Clone, Serialize)]
pub struct ModeVerdict {
    /// The mode.
    pub mode: WalRecovery,
    /// Whether the store would open (its manifest and tables are sound and the mode
    /// accepts the logs).
    pub opens: bool,
    /// WAL bytes it would drop.
    pub dropped_bytes: u64,
    /// What it would replay and drop, or why it refuses.
    pub detail: String,
}

impl VerifyReport {
    /// The store held still long enough to be read, and no problem was found.
    pub fn is_clean(&self) -> bool {
        self.settled && self.problems.is_empty()
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.settled {
            return writeln!(
                f,
                "the store is open by another process: {} file(s) rotated while reading, \
                 {} attempt(s); nothing verified, try again",
                self.rotated, self.attempts
            );
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        // The mode verdicts matter only when some mode would drop or refuse something.
        let damaged_logs = self
            .recovery
            .iter()
            .any(|v| v.dropped_bytes > 0 || v.detail.starts_with("refuses"));
        if damaged_logs {
            writeln!(f, "the logs are damaged; opening with wal_recovery =")?;
            for v in &self.recovery {
                let default = if v.mode == WalRecovery::default() {
                    " (default)"
                } else {
                    ""
                };
                let verdict = if v.opens {
                    "opens"
                } else if v.detail.starts_with("refuses") {
                    "does not open"
                } else {
                    "would accept the logs, but the tables or manifest are damaged"
                };
                writeln!(f, "  {}{default}: {verdict}; {}", v.mode, v.detail)?;
            }
        }
        if !self.problems.is_empty() && !self.recovery.iter().any(|v| v.opens) {
            // Refused logs keep the store shut; damaged tables or a damaged manifest
            // are another matter: a table's damaged block fails only the reads that
            // need it, so say which it is.
            let logs_refused = self
                .recovery
                .iter()
                .all(|v| v.detail.starts_with("refuses"));
            if logs_refused {
                writeln!(
                    f,
                    "no recovery mode opens this store as it is: `bloomkv repair DIR` \
                     rebuilds it from what verifies"
                )?;
            } else {
                writeln!(
                    f,
                    "the store is damaged (below): reads that need a damaged block fail, \
                     or the store does not open; `bloomkv repair DIR` rebuilds it from what \
                     verifies"
                )?;
            }
        }
        for p in &self.problems {
            match p.offset {
                Some(off) => writeln!(
                    f,
                    "CORRUPT {} at offset {off}: {}",
                    p.file.display(),
                    p.what
                )?,
                None => writeln!(f, "CORRUPT {}: {}", p.file.display(), p.what)?,
            }
        }
        writeln!(
            f,
            "{} file(s) checked, {} problem(s)",
            self.files_checked,
            self.problems.len()
        )
    }
}

/// Checks every checksum of every file the store needs: manifest, each live table
/// block by block, and each live WAL record by record.
///
/// Returns `Err` only when the directory holds no store; damage is reported in the
/// [`VerifyReport`].
pub fn verify(dir: &Path) -> Result<VerifyReport> {
    let fs = OsFileSystem;
    let mut rotated = 0;
    for attempt in 1..=ATTEMPTS {
        let before = DirState::read(&fs, dir);
        let mut report = verify_once(&fs, dir)?;
        let after = DirState::read(&fs, dir);
        if report.problems.is_empty() || before == after {
            report.settled = true;
            report.attempts = attempt;
            report.rotated = rotated;
            return Ok(report);
        }
        rotated += before.changes(&after);
    }
    Ok(VerifyReport {
        settled: false,
        attempts: ATTEMPTS,
        rotated,
        ..VerifyReport::default()
    })
}

fn verify_once(fs: &OsFileSystem, dir: &Path) -> Result<VerifyReport> {
    let fs = *fs;
    if !fs.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist",
            dir.display()
        )));
    }
    let mut report = VerifyReport::default();
    let manifest_path = filename::manifest_path(dir);
    report.files_checked += 1;
    let manifest = match manifest::read_manifest(&fs, dir) {
        Ok(Some(state)) => Ok(state),
        // Tables or logs with no manifest are a store that lost it: damage to report.
        Ok(None) => match no_manifest(dir, &fs.list(dir)?) {
            e @ Error::Corruption { .. } => Err(e),
            e => return Err(e),
        },
        Err(e) => Err(e),
    };
    // Without a manifest, every table file there is gets checked below.
    let state = manifest
        .map_err(|e| {
            report.problems.push(Problem {
                file: manifest_path,
                offset: None,
                what: e.to_string(),
            })
        })
        .ok();
    // The settings file: damage is a problem (the tools would open the store with the
    // defaults); none at all (a store from before stores recorded them) and names
    // only a program that registers them can resolve are notes.
    let settings = crate::settings::load_options(dir, Options::default())?;
    match &settings.state {
        SettingsState::Recorded => report.files_checked += 1,
        SettingsState::Missing => report.notes.push(format!("settings {}", settings.state)),
        SettingsState::Damaged(why) => {
            report.files_checked += 1;
            report.problems.push(Problem {
                file: filename::settings_path(dir),
                offset: None,
                what: why.clone(),
            });
        }
    }
    for name in &settings.unresolved {
        report.notes.push(format!(
            "settings name a {name}, known only to the program that wrote it"
        ));
    }
    // A level the store does not have: the manifest reads, but no open accepts it.
    for meta in state.iter().flat_map(|s| s.tables()) {
        if let Err(e) = table_level(dir, meta) {
            report.problems.push(Problem {
                file: filename::manifest_path(dir),
                offset: None,
                what: e.to_string(),
            });
        }
    }
    let names = fs.list(dir)?;
    let live_tables: Vec<u64> = match &state {
        Some(s) => s.tables().iter().map(|t| t.number).collect(),
        // Without a manifest, check every table file there is.
        None => names
            .iter()
            .filter_map(|n| match parse_file_name(n) {
                Some(FileKind::Table(k)) => Some(k),
                _ => None,
            })
            .collect(),
    };
    for number in live_tables {
        let path = filename::table_path(dir, number);
        report.files_checked += 1;
        match fs.open_random(&path) {
            Ok(file) => {
                let problems = sstable::check_file(file.clone(), path.clone());
                let sound = problems.is_empty();
                for p in problems {
                    report.problems.push(Problem {
                        file: path.clone(),
                        offset: Some(p.offset),
                        what: format!("{}: {}", p.kind, p.reason),
                    });
                }
                // A sound table must also be the one the manifest records: a store
                // opens without reading its tables, and its first read of a table
                // that does not match fails as corruption.
                let meta = state
                    .iter()
                    .flat_map(|s| s.tables())
                    .find(|t| t.number == number);
                if let (true, Some(meta)) = (sound, meta) {
                    if let Some(why) = record_mismatch(file, &path, meta) {
                        report.problems.push(Problem {
                            file: path.clone(),
                            offset: None,
                            what: why,
                        });
                    }
                }
            }
            // A missing table is damage; any other refusal (permissions, too many
            // open files) says nothing about the store: an error, not a finding.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => report.problems.push(Problem {
                file: path,
                offset: None,
                what: format!("live table cannot be opened: {e}"),
            }),
            Err(e) => return Err(e.into()),
        }
    }
    let first_wal = state.as_ref().map(|s| s.wal_number()).unwrap_or(0);
    let wals = live_wals(&names, first_wal);
    report.files_checked += wals.len();
    let floor = state.as_ref().map_or(0, |s| s.last_sequence());
    let tables_sound = report.problems.is_empty();
    for mode in WalRecovery::ALL {
        let verdict = match recovery::replay(&fs, dir, &wals, mode, floor, &[]) {
            Ok(r) => ModeVerdict {
                mode,
                opens: tables_sound,
                dropped_bytes: r.report.bytes_dropped(),
                detail: r
                    .report
                    .to_string()
                    .trim_start_matches(&format!("{mode}: "))
                    .to_string(),
            },
            Err(e) => {
                if mode == WalRecovery::default() {
                    let file = match &e {
                        Error::Corruption { file, .. } => file.clone(),
                        _ => dir.to_path_buf(),
                    };
                    report.problems.push(Problem {
                        file,
                        offset: None,
                        what: e.to_string(),
                    });
                }
                ModeVerdict {
                    mode,
                    opens: false,
                    dropped_bytes: 0,
                    detail: format!("refuses: {e}"),
                }
            }
        };
        report.recovery.push(verdict);
    }
    Ok(report)
}

/// Why table `file` is not the one `meta` (the manifest's record) describes, if it
/// is not. A version-1 record has no data size; the rest is compared.
fn record_mismatch(
    file: Arc<dyn crate::fs::RandomAccessFile>,
    path: &Path,
    meta: &crate::manifest::TableMeta,
) -> Option<String> {
    let table = match Table::open(file, path.to_path_buf(), Arc::new(Counters::default()), &[]) {
        Ok(t) => t,
        Err(e) => return Some(e.to_string()),
    };
    let found = TableRecord::of(&table);
    let expected = TableRecord {
        smallest: meta.smallest.clone(),
        largest: meta.largest.clone(),
        file_size: meta.file_size,
        data_size: meta.data_size.unwrap_or(found.data_size),
        entries: meta.entries,
        max_seq: meta.max_seq,
    };
    (found != expected).then(|| {
        format!(
            "live table does not match the manifest: the manifest records {expected}, \
             the file holds {found}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;

    fn store_with_a_table(dir: &Path) {
        let db = Db::open(dir, Options::default()).unwrap();
        db.put("a", "1").unwrap();
        db.flush().unwrap();
        db.put("b", "2").unwrap();
        db.close().unwrap();
    }

    /// `verify` once returned `Err` here, which the command line turns into exit 3
    /// ("no store"), not 1 ("damage found", for which `repair` is the way out).
    #[test]
    fn a_store_that_lost_its_manifest_is_damage_found_and_its_tables_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        store_with_a_table(dir.path());
        std::fs::remove_file(filename::manifest_path(dir.path())).unwrap();
        let report = verify(dir.path()).unwrap();
        assert!(!report.is_clean());
        let [problem] = &report.problems[..] else {
            panic!("one problem expected: {report}");
        };
        assert_eq!(problem.file, filename::manifest_path(dir.path()));
        assert!(problem.what.contains("`repair` rebuilds it"), "{report}");
        // The manifest, the settings, one table and one log.
        assert_eq!(report.files_checked, 4, "{report}");
        assert!(report.recovery.iter().all(|v| !v.opens), "{report}");
        // An empty directory is still no store at all.
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            verify(empty.path()),
            Err(Error::InvalidArgument(_))
        ));
    }

    /// The manifest's format numbers levels up to `MAX_LEVELS`, the store opens only
    /// its `NUM_LEVELS`: `verify` once called such a store clean and said it opens.
    #[test]
    fn a_table_on_a_level_the_store_lacks_is_reported_and_the_store_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        store_with_a_table(dir.path());
        let fs = OsFileSystem;
        let state = manifest::read_manifest(&fs, dir.path()).unwrap().unwrap();
        let mut tables = state.tables().to_vec();
        tables[0].level = crate::types::NUM_LEVELS as u32;
        let moved = ManifestState::new(
            state.next_file_number(),
            state.last_sequence(),
            state.wal_number(),
            tables,
        );
        manifest::write_manifest(&fs, dir.path(), &moved).unwrap();
        assert!(Db::open(dir.path(), Options::default()).is_err());
        let report = verify(dir.path()).unwrap();
        assert!(!report.is_clean(), "{report}");
        assert!(report.problems[0].what.contains("on level 7"), "{report}");
        assert!(report.recovery.iter().all(|v| !v.opens), "{report}");
    }
}
