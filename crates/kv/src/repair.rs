//! Repair: rebuilding a store that will not open because its manifest is missing or
//! damaged, a live table fails its checksums, or a log is damaged beyond what the
//! chosen `WalRecovery` mode accepts.
//!
//! ```text
//!  diagnose:  MANIFEST decodes?  every live table verifies block by block?
//!             every live log replays under options.wal_recovery?
//!             all yes ─► nothing to do: the store is left byte for byte unchanged
//!
//!  settings:  SETTINGS applied over the options given (a policy or extractor named
//!             there that the options do not hold: refused, never guessed)
//!
//!  rebuild:   tables  = the manifest's tables, or (no usable manifest) every *.sst
//!             each table: verifies ─► input          fails ─► renamed into lost/
//!             a table the manifest does not name ─► renamed into lost/, as open does
//!             logs    = every log the manifest keeps (all, without a manifest),
//!                       replayed keeping every valid record (SkipCorrupted)
//!             merge inputs + replayed writes, newest sequence number per key wins
//!             ─► new tables on one level (a sorted run), tombstones dropped
//!             ─► SETTINGS (if missing or damaged), then
//!                MANIFEST.tmp, fsync, rename, fsync dir   (the commit point)
//!             ─► delete the input tables (their entries are in the new ones) and
//!                the replayed logs
//! ```
//!
//! Repair rebuilds what was there: the store's recorded settings (see `settings`) win
//! over the `options` given for everything they record (filter, prefix extractor,
//! range filter, block layout, level sizing), so a store written with prefix or range
//! filters comes back with them; `options` supplies the rest (file system, caches)
//! and the policies and extractors the file names. A missing or damaged settings file
//! leaves `options` as given; a damaged one is rewritten from them (reported).
//!
//! Keyspaces: each named keyspace's directory is repaired first, on its own (it has no
//! logs; a rebuilt manifest names again the first root log its old one named). Then the
//! root: if it is rebuilt, its logs are replayed for every keyspace, each from its first
//! log on, and each keyspace's writes go to an L0 table in its directory with a
//! manifest naming the root's fresh log, written before the root's manifest retires
//! the logs. A damaged `KEYSPACES` list is rebuilt from the `keyspace-*` directories,
//! each named after its directory (the names are lost; the data is not). Limit: a
//! keyspace whose manifest could not be read replays every root log at its next open,
//! and a write both in its tables and in a log is then held twice (same key, same
//! sequence number), which reads and compaction treat as one.
//!
//! Sequence numbers make the rebuild independent of where each table used to sit:
//! every entry carries the number of the write that made it, so merging by it gives
//! each key its newest surviving version whatever the order or level of the inputs.
//!
//! Crash safety: nothing the old state needs is changed before the new manifest is
//! durable, except tables that fail verification or that the manifest does not name,
//! which are renamed into `lost/` (and both directories fsynced) first; after the
//! commit point repair deletes only its input tables, whose entries the new tables
//! hold. A crash before the commit point leaves new tables that no manifest names:
//! with a usable manifest they are ignored, and the next open or repair moves them
//! into `lost/`; without one, the next repair reads them as inputs, and they only
//! repeat entries (same keys, same sequence numbers) that the other inputs still hold.
//!
//! Limit: without a usable manifest, repair cannot tell a live table from one that a
//! finished compaction had made obsolete but not yet deleted (a crash in between). If
//! such a table is present, a key whose tombstone that compaction dropped can come
//! back with its older value. The same holds for a log that a flush had retired but
//! whose deletion failed: replayed with the others, its older writes are merged by
//! sequence number like any input, so a key deleted since and then compacted away can
//! return. RocksDB's and LevelDB's repair share this limit.

use std::collections::HashSet;
use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::filename::{self, parse_file_name, FileKind};
use crate::fs::FileSystem;
use crate::keyspaces::{self, Registry};
use crate::manifest::{self, ManifestState};
use crate::memtable::Memtable;
use crate::merge::{MergeIter, Source};
use crate::options::{Options, WalRecovery};
use crate::range_del::Fragments;
use crate::recovery::{self, DroppedSpan, Route};
use crate::retain::Retain;
use crate::settings::{load_options, Settings, SettingsState};
use crate::sstable::check_file;
use crate::sstable::TableCache;
use crate::stats::Counters;
use crate::store_dir::{
    file_number, free_name, remove_obsolete, store_dir, stray_store_file, write_state,
};
use crate::table_files::TableFiles;
use crate::types::NUM_LEVELS;
use crate::types::{Entry, KeyspaceId, SeqNo};
use crate::version::{TableHandle, Version};

/// A table that failed verification and was moved out of the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MovedTable {
    /// Its file number.
    pub number: u64,
    /// Where it is now (under `lost/`).
    pub to: PathBuf,
    /// What failed.
    pub reason: String,
}

/// What [`repair`] did for one named keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyspaceRepair {
    /// Its name.
    pub name: String,
    /// The repair of its own directory (tables and manifest).
    pub report: RepairReport,
    /// Its unflushed writes found in the root's logs, written to its table below.
    pub entries_from_logs: u64,
    /// The L0 table those writes went to, if there were any.
    pub table_written: Option<u64>,
}

/// What [`repair`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// Whether anything was changed. `false`: the store needed no repair.
    pub repaired: bool,
    /// What made the repair necessary (empty when nothing was).
    pub problems: Vec<String>,
    /// Tables that verified and whose entries were carried into the new tables.
    pub tables_kept: Vec<u64>,
    /// Tables that failed verification, moved aside (never deleted).
    pub tables_moved_aside: Vec<MovedTable>,
    /// Tables the manifest named that were not there.
    pub tables_missing: Vec<u64>,
    /// Logs replayed into the new tables.
    pub wals_replayed: Vec<u64>,
    /// Valid log records replayed.
    pub wal_records: u64,
    /// Stretches of logs that were not valid records, skipped.
    pub wal_dropped: Vec<DroppedSpan>,
    /// The tables written, and the level they were placed on.
    pub tables_written: Vec<u64>,
    /// The level the new tables sit on.
    pub level: usize,
    /// Live entries written (tombstones are dropped: nothing older survives under them).
    pub entries_written: u64,
    /// What the store's settings file held; repair built with those settings when
    /// `Recorded`, with the options given otherwise.
    pub settings: SettingsState,
    /// Settings in the file this build could not apply (see `LoadedOptions::ignored`).
    pub settings_ignored: Vec<String>,
    /// Each named keyspace's repair (empty for a store without keyspaces).
    pub keyspaces: Vec<KeyspaceRepair>,
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.settings != SettingsState::Recorded {
            writeln!(f, "settings: {}", self.settings)?;
        }
        for i in &self.settings_ignored {
            writeln!(f, "settings: ignored {i}")?;
        }
        if !self.repaired {
            return writeln!(f, "the store needs no repair; nothing was changed");
        }
        for k in &self.keyspaces {
            if k.report.repaired {
                for line in k.report.to_string().lines() {
                    writeln!(f, "keyspace {}: {line}", k.name)?;
                }
            }
            if let Some(n) = k.table_written {
                writeln!(
                    f,
                    "keyspace {}: {} entries from the logs written to {n:06}.sst",
                    k.name, k.entries_from_logs
                )?;
            }
        }
        for p in &self.problems {
            writeln!(f, "found: {p}")?;
        }
        let list = |v: &[u64]| {
            v.iter()
                .map(|n| format!("{n:06}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        writeln!(
            f,
            "kept: {} table(s) [{}], {} log record(s) from {} log(s)",
            self.tables_kept.len(),
            list(&self.tables_kept),
            self.wal_records,
            self.wals_replayed.len()
        )?;
        for m in &self.tables_moved_aside {
            writeln!(
                f,
                "moved aside: {:06}.sst -> {} ({})",
                m.number,
                m.to.display(),
                m.reason
            )?;
        }
        for n in &self.tables_missing {
            writeln!(f, "missing: {n:06}.sst")?;
        }
        for d in &self.wal_dropped {
            writeln!(
                f,
                "dropped: {} offset {}, {} byte(s): {}",
                filename::wal_file_name(d.wal),
                d.offset,
                d.len,
                d.reason
            )?;
        }
        writeln!(
            f,
            "wrote {} table(s) on L{} with {} entries; new MANIFEST written",
            self.tables_written.len(),
            self.level,
            self.entries_written
        )
    }
}

/// The error for a directory with no store file at all.
fn no_store_to_repair(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{} holds no bloomkv store to repair",
        dir.display()
    ))
}

/// Rebuilds the store in `path` if it needs it (see the module docs); a store that
/// opens cleanly under `options` is left unchanged, so repairing twice changes
/// nothing the second time.
///
/// Takes the directory's lock: a store open elsewhere is [`Error::Locked`]. A
/// directory that holds no store file at all is [`Error::InvalidArgument`].
///
/// ```
/// use bloomkv_kv::{repair, Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// db.put("k", "v")?;
/// db.flush()?;
/// db.close()?;
/// std::fs::remove_file(dir.path().join("MANIFEST"))?;
/// let report = repair(dir.path(), Options::default())?;
/// assert!(report.repaired);
/// let db = Db::open(dir.path(), Options::default())?;
/// assert_eq!(db.get("k")?.as_deref(), Some(&b"v"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn repair(path: impl AsRef<Path>, options: Options) -> Result<RepairReport> {
    options.validate()?;
    let dir = store_dir(path.as_ref())?;
    let loaded = recorded_options(&dir, options.clone())?;
    let base = options;
    let options = loaded.options.clone();
    let fs = options.file_system.clone();
    if !fs.exists(&dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist",
            dir.display()
        )));
    }
    // A directory with no store file at all is refused before the lock, which would
    // leave a `LOCK` file behind in it. (Checked again under the lock below.)
    let listed = fs.list(&dir)?;
    if !listed.iter().any(|n| n == filename::MANIFEST) && stray_store_file(&listed).is_none() {
        return Err(no_store_to_repair(&dir));
    }
    let _lock = match fs.lock(&filename::lock_path(&dir)) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(Error::Locked(dir)),
        Err(e) => return Err(e.into()),
    };
    // Named keyspaces first, each its own tables and manifest (they have no logs);
    // their unflushed writes are in the root's logs, which the root's rebuild hands
    // to them before it retires the logs.
    let (mut named, problems) = repair_keyspaces(&fs, &dir, &base)?;
    let mut report = repair_dir(&fs, &dir, &options, loaded, &mut named, None)?;
    report.problems.extend(problems);
    report.repaired |= named
        .iter()
        .any(|k| k.report.repaired || k.table_written.is_some());
    report.keyspaces = named
        .into_iter()
        .map(|k| KeyspaceRepair {
            name: k.name,
            report: k.report,
            entries_from_logs: k.entries_from_logs,
            table_written: k.table_written,
        })
        .collect();
    Ok(report)
}

/// A store's recorded settings over `options`, refused when they name a policy or an
/// extractor the options do not hold.
fn recorded_options(dir: &Path, options: Options) -> Result<crate::settings::LoadedOptions> {
    let loaded = load_options(dir, options)?;
    if !loaded.unresolved.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} was written with {}; repair would rebuild its tables without it. Repair \
             from a program that has it (repair(path, options) with it in the options), \
             or remove SETTINGS to rebuild with the options given",
            dir.display(),
            loaded.unresolved.join(" and ")
        )));
    }
    Ok(loaded)
}

/// A named keyspace under repair.
struct NamedRepair {
    id: KeyspaceId,
    name: String,
    dir: PathBuf,
    options: Options,
    /// The first root log holding writes its tables lack, from its manifest before
    /// the repair (0, every log, when that manifest could not be read).
    first_log: u64,
    report: RepairReport,
    entries_from_logs: u64,
    table_written: Option<u64>,
}

/// Repairs each named keyspace's directory on its own (tables and manifest), with
/// its recorded settings. A damaged `KEYSPACES` list is rebuilt from the
/// `keyspace-*` directories, each named after its directory (reported).
fn repair_keyspaces(
    fs: &Arc<dyn FileSystem>,
    root: &Path,
    base: &Options,
) -> Result<(Vec<NamedRepair>, Vec<String>)> {
    let mut problems = Vec::new();
    let registry = match keyspaces::read(fs.as_ref(), root) {
        Ok(r) => r,
        Err(e) => {
            let mut ids: Vec<u32> = fs
                .list(root)?
                .iter()
                .filter_map(|n| match parse_file_name(n) {
                    Some(FileKind::KeyspaceDir(id)) => Some(id),
                    _ => None,
                })
                .collect();
            ids.sort_unstable();
            let registry = Registry {
                next_id: ids.last().map_or(1, |id| id + 1),
                entries: ids
                    .iter()
                    .map(|&id| (KeyspaceId::new(id), filename::keyspace_dir_name(id)))
                    .collect(),
            };
            problems.push(format!(
                "KEYSPACES is damaged ({e}); rebuilt from the keyspace directories, each \
                 named after its directory"
            ));
            keyspaces::write(fs.as_ref(), root, &registry)?;
            registry
        }
    };
    let mut named = Vec::new();
    for (id, name) in &registry.entries {
        let dir = filename::keyspace_dir(root, id.get());
        let base = Options {
            create_if_missing: false,
            ..base.clone()
        };
        let loaded = recorded_options(&dir, base)?;
        let options = loaded.options.clone();
        let first_log = manifest::read_manifest(fs.as_ref(), &dir)
            .ok()
            .flatten()
            .map_or(0, |s| s.wal_number());
        let mut none = Vec::new();
        let report = repair_dir(fs, &dir, &options, loaded, &mut none, Some(first_log))?;
        named.push(NamedRepair {
            id: *id,
            name: name.clone(),
            dir,
            options,
            first_log,
            report,
            entries_from_logs: 0,
            table_written: None,
        });
    }
    Ok((named, problems))
}

/// [`repair`] of one directory, its lock taken: the root (whose logs it replays,
/// handing `named` keyspaces their writes) or a named keyspace's (`named` empty).
///
/// `first_log`: for a named keyspace, the first root log its manifest named, which a
/// rebuilt manifest names again (its writes since are in those logs).
fn repair_dir(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    options: &Options,
    loaded: crate::settings::LoadedOptions,
    named: &mut [NamedRepair],
    first_log: Option<u64>,
) -> Result<RepairReport> {
    let (fs, dir) = (fs.clone(), dir.to_path_buf());
    let options = options.clone();
    let names = fs.list(&dir)?;
    let mut report = RepairReport {
        settings: loaded.state,
        settings_ignored: loaded.ignored,
        ..RepairReport::default()
    };

    // Diagnose.
    let state = match manifest::read_manifest(fs.as_ref(), &dir) {
        Ok(Some(state)) => Some(state),
        Ok(None) => {
            report.problems.push("MANIFEST is missing".into());
            None
        }
        Err(e) => {
            report.problems.push(format!("MANIFEST is damaged: {e}"));
            None
        }
    };
    let on_disk = |want: fn(FileKind) -> Option<u64>| -> Vec<u64> {
        let mut v: Vec<u64> = names
            .iter()
            .filter_map(|n| parse_file_name(n).and_then(want))
            .collect();
        v.sort_unstable();
        v
    };
    let table_files = on_disk(|k| match k {
        FileKind::Table(n) => Some(n),
        _ => None,
    });
    let wal_files = on_disk(|k| match k {
        FileKind::Wal(n) => Some(n),
        _ => None,
    });
    if state.is_none() && table_files.is_empty() && wal_files.is_empty() {
        return Err(no_store_to_repair(&dir));
    }
    let (tables, wals, floor): (Vec<u64>, Vec<u64>, SeqNo) = match &state {
        Some(s) => (
            s.tables().iter().map(|t| t.number).collect(),
            wal_files
                .iter()
                .copied()
                .filter(|&n| n >= s.wal_number())
                .collect(),
            s.last_sequence(),
        ),
        None => (table_files.clone(), wal_files.clone(), 0),
    };
    let mut sound = Vec::new();
    let mut failed = Vec::new();
    for &number in &tables {
        let path = filename::table_path(&dir, number);
        if !fs.exists(&path) {
            report
                .problems
                .push(format!("table {number:06} is missing"));
            report.tables_missing.push(number);
            continue;
        }
        match verify_table(&fs, &dir, number, &options) {
            Ok(handle) => sound.push(Arc::new(handle)),
            Err(reason) => {
                report
                    .problems
                    .push(format!("table {number:06} fails verification: {reason}"));
                failed.push((number, reason));
            }
        }
    }
    if state.is_some() && report.problems.is_empty() {
        match recovery::replay(fs.as_ref(), &dir, &wals, options.wal_recovery, floor, &[]) {
            Ok(_) => {
                // Opens as it is: nothing to rebuild. Damaged settings are all there
                // is to mend (missing ones, as an older store has, the next open writes).
                if let SettingsState::Damaged(why) = &report.settings {
                    report.problems.push(format!("SETTINGS is damaged: {why}"));
                    Settings::of(&options).write(fs.as_ref(), &dir)?;
                    report.repaired = true;
                }
                return Ok(report);
            }
            Err(e) => report.problems.push(format!("log damaged: {e}")),
        }
    }

    // Rebuild. First move failing tables aside, durably, while a manifest may still
    // name them: after the commit point an unnamed table would count as obsolete.
    // Tables the manifest does not name are moved aside too, as open moves them:
    // nothing proves their entries are elsewhere, so they are never deleted.
    if state.is_some() {
        let named: HashSet<u64> = tables.iter().copied().collect();
        for &number in table_files.iter().filter(|n| !named.contains(n)) {
            failed.push((number, "not named by the manifest".to_string()));
        }
    }
    if !failed.is_empty() {
        let lost = filename::lost_dir(&dir);
        fs.create_dir_all(&lost)?;
        for (number, reason) in failed {
            let to = free_name(fs.as_ref(), &lost, &filename::table_file_name(number));
            fs.rename(&filename::table_path(&dir, number), &to)?;
            report
                .tables_moved_aside
                .push(MovedTable { number, to, reason });
        }
        fs.sync_dir(&lost)?;
        fs.sync_dir(&dir)?;
    }
    // Every valid record of every log; the seq floor keeps a stale record out. Each
    // named keyspace takes its writes from its first log on.
    let root_first = state.as_ref().map_or(0, ManifestState::wal_number);
    let mut routes = vec![Route {
        keyspace: KeyspaceId::DEFAULT,
        first_log: root_first,
    }];
    routes.extend(named.iter().map(|k| Route {
        keyspace: k.id,
        first_log: k.first_log,
    }));
    // A named keyspace may need logs the root's tables already hold.
    let first = routes.iter().map(|r| r.first_log).min().unwrap_or(0);
    let (wals, floor) = if first < root_first {
        let older: Vec<u64> = wal_files.iter().copied().filter(|&n| n >= first).collect();
        (older, 0)
    } else {
        (wals, floor)
    };
    let replayed = recovery::replay(
        fs.as_ref(),
        &dir,
        &wals,
        WalRecovery::SkipCorrupted,
        floor,
        &routes,
    )?;
    report.wals_replayed = wals.clone();
    report.wal_records = replayed.report.records_replayed();
    report.wal_dropped = replayed.report.dropped.clone();

    let named_mems = replayed.named;
    let mut last_sequence = replayed.last_seq;
    if let Some(s) = &state {
        last_sequence = last_sequence.max(s.last_sequence());
    }
    let mut input_bytes = replayed.memtable.approximate_size() as u64;
    for t in &sound {
        last_sequence = last_sequence.max(t.max_seq());
        input_bytes += t.file_size();
        report.tables_kept.push(t.number);
    }
    let level = level_for(&options, input_bytes);
    report.level = level;

    // One counter numbers the files of every keyspace: above all of theirs too.
    let mut highest = names
        .iter()
        .filter_map(|n| file_number(n))
        .max()
        .unwrap_or(0);
    for k in named.iter() {
        for n in fs.list(&k.dir)? {
            highest = highest.max(file_number(&n).unwrap_or(0));
        }
        if let Ok(Some(s)) = manifest::read_manifest(fs.as_ref(), &k.dir) {
            highest = highest.max(s.next_file_number().saturating_sub(1));
        }
    }
    let floor_number = state.as_ref().map_or(1, ManifestState::next_file_number);
    let next_number = AtomicU64::new(floor_number.max(highest + 1));
    let written = match write_merged(
        &fs,
        &dir,
        &options,
        &sound,
        replayed.memtable,
        &next_number,
        &mut report,
    ) {
        Ok(w) => w,
        Err(e) => {
            // Nothing names the partial output: remove it (best effort).
            for n in &report.tables_written {
                let _ = fs.remove(&filename::table_path(&dir, *n));
            }
            return Err(e);
        }
    };

    // The commit point: a manifest naming only the new tables, and a log number above
    // every log replayed (that log does not exist yet: it holds no writes).
    let version = Version::empty().apply(&[], written.into_iter().map(|h| (level, h)).collect());
    let wal_number = match first_log {
        Some(first) => first,
        None => next_number.fetch_add(1, Ordering::Relaxed),
    };
    // The named keyspaces' writes from the logs, each to an L0 table of its own, and
    // manifests naming the fresh log: before the root's manifest, which retires the
    // logs they came from.
    for (id, mem) in named_mems {
        if let Some(k) = named.iter_mut().find(|k| k.id == id) {
            hand_over(&fs, k, mem, &next_number, wal_number)?;
        }
    }
    let next = next_number.load(Ordering::Relaxed).max(wal_number + 1);
    if report.settings != SettingsState::Recorded {
        Settings::of(&options).write(fs.as_ref(), &dir)?;
    }
    write_state(&fs, &dir, &version, wal_number, next, last_sequence)?;
    // Only the inputs go: their entries are in the new tables. Every other table
    // the directory held was moved into `lost/` above.
    for t in &sound {
        let _ = fs.remove(&filename::table_path(&dir, t.number));
    }
    remove_obsolete(&fs, &dir, None, wal_number);
    report.repaired = true;
    Ok(report)
}

/// Writes `mem` (a named keyspace's writes replayed from the root's logs) as an L0 table
/// in its directory, and a manifest with its tables and it, naming log `wal_number`
/// (the root's fresh log) as the first it needs.
fn hand_over(
    fs: &Arc<dyn FileSystem>,
    k: &mut NamedRepair,
    mem: Memtable,
    next_number: &AtomicU64,
    wal_number: u64,
) -> Result<()> {
    let Some(state) = manifest::read_manifest(fs.as_ref(), &k.dir)? else {
        return Err(Error::corruption(
            filename::manifest_path(&k.dir),
            "missing after the keyspace's own repair",
        ));
    };
    let policies = k.options.known_policies()?;
    let cache = TableCache::new(fs.clone(), k.options.max_open_files);
    let counters = Arc::new(Counters::default());
    let files = TableFiles {
        fs,
        cache: &cache,
        dir: &k.dir,
        options: &k.options,
        counters: &counters,
        policies: &policies,
    };
    let mut tables = Vec::new();
    for meta in state.tables() {
        tables.push((meta.level as usize, Arc::new(files.open(meta.number)?)));
    }
    let mut version = Version::empty().apply(&[], tables);
    let mut last_sequence = state.last_sequence();
    if !mem.is_empty() {
        let number = next_number.fetch_add(1, Ordering::Relaxed);
        last_sequence = last_sequence.max(mem.max_seq());
        k.entries_from_logs = mem.len() as u64;
        let range_dels = mem.range_dels().map(|r| (*r).clone());
        let built = files.build_with_range_dels(
            number,
            &k.options.filter_policy()?,
            Retain::new(mem.versions().map(Ok), Vec::new(), false),
            |_| range_dels,
        )?;
        if let Some(handle) = built {
            version = version.apply(&[], vec![(0, Arc::new(handle))]);
            k.table_written = Some(number);
        }
    }
    let next = next_number.load(Ordering::Relaxed).max(wal_number + 1);
    write_state(fs, &k.dir, &version, wal_number, next, last_sequence)
}

/// Opens table `number` and checks every block: the handle if it is sound, why not
/// if it is not.
fn verify_table(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    number: u64,
    options: &Options,
) -> std::result::Result<TableHandle, String> {
    let path = filename::table_path(dir, number);
    let file = fs
        .open_random(&path)
        .map_err(|e| format!("cannot be opened: {e}"))?;
    if let Some(p) = check_file(file, path).into_iter().next() {
        return Err(p.to_string());
    }
    let policies = options.known_policies().map_err(|e| e.to_string())?;
    let cache = TableCache::new(fs.clone(), options.max_open_files);
    TableFiles {
        fs,
        cache: &cache,
        dir,
        options,
        counters: &Arc::new(Counters::default()),
        policies: &policies,
    }
    .open(number)
    .map_err(|e| e.to_string())
}

/// The shallowest level (from L1) whose size budget holds `bytes`.
fn level_for(options: &Options, bytes: u64) -> usize {
    (1..NUM_LEVELS)
        .find(|&l| options.max_bytes_for_level(l) >= bytes)
        .unwrap_or(NUM_LEVELS - 1)
}

/// Merges the sound tables and the replayed writes into new tables of about
/// `target_file_size`, newest sequence number per key, tombstones dropped.
fn write_merged(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    options: &Options,
    sound: &[Arc<TableHandle>],
    replayed: Memtable,
    next_number: &AtomicU64,
    report: &mut RepairReport,
) -> Result<Vec<Arc<TableHandle>>> {
    let policy = options.filter_policy()?;
    let policies = options.known_policies()?;
    let counters = Arc::new(Counters::default());
    let mem = Arc::new(replayed);
    let mut sources: Vec<Source> = vec![Box::new(
        mem.owned_range(
            Bound::Unbounded,
            Bound::Unbounded,
            crate::memtable::READ_LATEST,
        )
        .map(Ok),
    )];
    for t in sound {
        sources.push(Box::new(t.table()?.iter_from(Bound::Unbounded)));
    }
    // No snapshot can exist during a repair: the newest version of each key, and
    // tombstones dropped (nothing older survives the rebuild for them to hide).
    // Range tombstones hide what they cover from the rebuild, and then go too: every
    // version below them is dropped here.
    let mut dels: Vec<Fragments> = mem.range_dels().map(|r| (*r).clone()).into_iter().collect();
    for t in sound {
        dels.extend(t.table()?.range_dels().cloned());
    }
    let range_dels = (!dels.is_empty()).then(|| Fragments::merge(&dels));
    let mut merged = Retain::new(MergeIter::new(sources), Vec::new(), true)
        .with_range_dels(range_dels)
        .peekable();
    let mut written = Vec::new();
    while merged.peek().is_some() {
        let number = next_number.fetch_add(1, Ordering::Relaxed);
        let mut bytes = 0u64;
        let mut entries = 0u64;
        let chunk = std::iter::from_fn(|| {
            if bytes >= options.target_file_size {
                return None;
            }
            let item: Result<Entry> = merged.next()?;
            if let Ok(e) = &item {
                bytes += (e.key.len() + e.value.len() + 16) as u64;
                entries += 1;
            }
            Some(item)
        });
        let cache = TableCache::new(fs.clone(), options.max_open_files);
        let files = TableFiles {
            fs,
            cache: &cache,
            dir,
            options,
            counters: &counters,
            policies: &policies,
        };
        let built = files.build(number, &policy, chunk)?;
        if let Some(handle) = built {
            report.tables_written.push(number);
            report.entries_written += entries;
            written.push(Arc::new(handle));
        }
    }
    Ok(written)
}
