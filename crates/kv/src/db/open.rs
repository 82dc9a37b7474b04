//! The steps of open, in order: lock the directory, read the manifest and tidy the
//! directory, recover the tables, recover the logs, keep or flush what the logs held,
//! start the background thread. A read-only open takes the same steps except those
//! that lock or write.
//!
//! ```text
//!  open:       lock_dir ─► read_state_and_tidy ─► recover_tables ─► open_named
//!              ─► recover_logs ─► keep_or_flush ─► Journal, Inner::new per keyspace
//!              ─► background::spawn per keyspace
//!  read-only:  (no lock)  read the manifest    ─► recover_tables ─► open_named
//!              ─► recover_logs ─► Inner::new  (no writes, no background thread)
//! ```
//!
//! Named keyspaces (see `keyspace.rs`) are opened with the root, each from its own
//! directory with the settings it recorded; one replay of the shared logs fills every
//! keyspace's memtable, each from its own manifest's log number on. Then all keep
//! their writes or all flush them: a log is appended to again only if every keyspace
//! may keep what it holds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileLock;
use crate::keyspaces::{self, Registry};
use crate::lazy_table::record_of;
use crate::manifest::{self, ManifestState};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::recovery::{self, ClosedMark, RecoveryReport, Replayed, Route};
use crate::retain::Retain;
use crate::settings::{self, SettingsReport};
use crate::stats::add;
use crate::store_dir::{
    discard_unrecorded, file_number, live_wals, no_manifest, no_store, remove_closed_mark,
    remove_obsolete, store_dir, stray_store_file, table_level, tidy_before_writing, write_state,
    DirState,
};
use crate::types::{KeyspaceId, SeqNo};
use crate::version::{TableHandle, Version};
use crate::wal::WalWriter;

use super::background;
use super::inner::{Inner, Parts, Recovered, RecoveredLog};
use super::journal::Journal;
use super::keyspace::{keyspace_base, KeyspaceSet, OpenKeyspace};
use super::Db;

impl Db {
    /// Opens the store in `path`, creating it if `options.create_if_missing`.
    ///
    /// Recovery: the manifest names the live tables; every WAL it does not retire is
    /// replayed, oldest first, under `options.wal_recovery` (what was dropped is in
    /// [`Db::recovery_report`]). Then one of two things happens:
    ///
    /// * **Kept.** Every log replayed cleanly (nothing dropped), the writes fit in
    ///   less than `memtable_size`, and the last session closed cleanly (its `CLOSED`
    ///   mark names the newest log at its current length; see
    ///   `recovery::ClosedMark`): they become the live memtable, backed by the logs
    ///   they came from, and the newest log is reopened for appending. Nothing is
    ///   written at open, and a program that opens, writes a little and exits (a
    ///   command-line `put`) adds to one log instead of leaving a table per run. The
    ///   manifest already keeps every log from the oldest replayed one; the next flush
    ///   retires them all at once (its manifest names the log after them, and only
    ///   then are they deleted).
    /// * **Flushed.** Otherwise (a tail was dropped or a record skipped, the writes
    ///   are large, or the last session crashed, failed a sync or was never closed)
    ///   they are written to an L0 table, a manifest that retires the old logs is made
    ///   durable, and a fresh log is started: a damaged log, or one whose bytes may be
    ///   only in the page cache, is never written after.
    ///
    /// With [`Options::read_only`] nothing is written, no lock is taken, and the logs
    /// are replayed into memory only: see [`Options::read_only`].
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let started = Instant::now();
        let db = Db::open_timed(path.as_ref(), options)?;
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        db.inner
            .counters
            .open_micros
            .store(micros, Ordering::Relaxed);
        Ok(db)
    }

    /// [`Db::open`]'s steps (see there); the caller times them.
    fn open_timed(path: &Path, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = store_dir(path)?;
        if options.read_only {
            return open_read_only(dir, options);
        }
        let lock = lock_dir(&dir, &options)?;
        let parts = Parts::new(dir, options)?;
        let (state, names, moved_aside) = read_state_and_tidy(&parts)?;
        // Before the manifest of a new store: a store with a manifest has its settings.
        let settings = settings::at_open(parts.fs.as_ref(), &parts.dir, &parts.options)?;
        let version = recover_tables(&parts, &state, Some(&names))?;
        let registry = keyspaces::read(parts.fs.as_ref(), &parts.dir)?;
        remove_unlisted_keyspaces(&parts, &names, &registry)?;
        let mut named = open_named(&parts, &registry, true)?;
        // One counter numbers every file of the store, every keyspace's tables and
        // the logs: above every number any keyspace's manifest or directory holds (a
        // keyspace's manifest may name a log made after the root's was written).
        let next_file_number = named
            .iter()
            .map(|n| n.next_file_number.max(n.state.wal_number() + 1))
            .fold(next_file_number(&names, &state), u64::max);
        let (wals, mut replayed) = recover_logs(&parts, &names, &state, &named)?;
        replayed.report.tables_moved_aside = moved_aside;
        let (log, recovered, report) = keep_or_flush(
            &parts,
            &state,
            version,
            &wals,
            replayed,
            next_file_number,
            &mut named,
        )?;
        let journal = Arc::new(Journal::new(
            parts.dir.clone(),
            parts.fs.clone(),
            recovered.next_file_number.clone(),
            log,
            Some(lock),
        ));
        let root_wal = recovered.mem_wal;
        let inner = Arc::new(Inner::new(
            parts,
            recovered,
            journal.clone(),
            KeyspaceId::DEFAULT,
        ));
        journal.register(&inner, root_wal);
        let worker = background::spawn(&inner)?;
        let set = start_named(named, &journal, registry, true)?;
        let db = handle(inner, Some(worker), report, settings, set);
        db.inner.schedule();
        Ok(db)
    }
}

/// A named keyspace as open finds it, then as recovery leaves it.
struct NamedAtOpen {
    id: KeyspaceId,
    name: String,
    parts: Parts,
    /// Its manifest as open read it.
    state: ManifestState,
    version: Version,
    /// Above every file number its manifest and directory hold.
    next_file_number: u64,
    /// The highest sequence number its tables hold (raised by a flush at open).
    last_sequence: SeqNo,
    /// Its replayed writes, and the oldest log they came from (filled by
    /// `keep_or_flush`).
    mem: Memtable,
    mem_wal: u64,
}

/// Opens each keyspace the list names from its directory, with the settings it
/// recorded (see [`keyspace_base`]); `writable`: tidied as the root is, tables opened
/// lazily.
fn open_named(root: &Parts, registry: &Registry, writable: bool) -> Result<Vec<NamedAtOpen>> {
    let mut named = Vec::new();
    for (id, name) in &registry.entries {
        let dir = filename::keyspace_dir(&root.dir, id.get());
        let base = keyspace_base(&root.options);
        let options = settings::load_options(&dir, base)?.options;
        let parts = Parts::new(dir.clone(), options)?;
        let missing = || {
            Error::corruption(
                filename::keyspaces_path(&root.dir),
                format!(
                    "keyspace {name:?} (number {id}) is listed but {} holds no store",
                    dir.display()
                ),
            )
        };
        if !parts.fs.exists(&filename::manifest_path(&dir)) {
            return Err(missing());
        }
        let (state, names, version) = if writable {
            let (state, names, _moved) = read_state_and_tidy(&parts)?;
            settings::at_open(parts.fs.as_ref(), &parts.dir, &parts.options)?;
            let version = recover_tables(&parts, &state, Some(&names))?;
            (state, names, version)
        } else {
            let names = parts.fs.list(&dir)?;
            let state = manifest::read_manifest(parts.fs.as_ref(), &dir)?.ok_or_else(missing)?;
            let version = recover_tables(&parts, &state, None)?;
            (state, names, version)
        };
        let next_file_number = next_file_number(&names, &state);
        named.push(NamedAtOpen {
            id: *id,
            name: name.clone(),
            parts,
            mem_wal: state.wal_number(),
            last_sequence: state.last_sequence(),
            state,
            version,
            next_file_number,
            mem: Memtable::new(),
        });
    }
    Ok(named)
}

/// Deletes what a keyspace the list does not name left: a keyspace made or dropped
/// when the process stopped (the list is the commit point; see `keyspaces.rs`).
fn remove_unlisted_keyspaces(root: &Parts, names: &[String], registry: &Registry) -> Result<()> {
    for name in names {
        if let Some(filename::FileKind::KeyspaceDir(id)) = filename::parse_file_name(name) {
            if !registry.contains(KeyspaceId::new(id)) {
                keyspaces::remove_dir_files(root.fs.as_ref(), &root.dir.join(name))?;
            }
        }
    }
    Ok(())
}

/// Makes each named keyspace's state, registers it with the journal, and (`writable`)
/// starts its background thread.
fn start_named(
    named: Vec<NamedAtOpen>,
    journal: &Arc<Journal>,
    registry: Registry,
    writable: bool,
) -> Result<KeyspaceSet> {
    let mut set = KeyspaceSet::new(registry);
    for n in named {
        let recovered = Recovered {
            version: n.version,
            mem: n.mem,
            mem_wal: n.mem_wal,
            last_sequence: n.last_sequence,
            next_file_number: journal.file_numbers.clone(),
        };
        let inner = Arc::new(Inner::new(n.parts, recovered, journal.clone(), n.id));
        journal.register(&inner, n.mem_wal);
        let worker = if writable {
            let worker = background::spawn(&inner)?;
            inner.schedule();
            Some(worker)
        } else {
            None
        };
        set.insert(n.name, OpenKeyspace { inner, worker });
    }
    Ok(set)
}

/// The handle on a store's shared state (`worker`: the default keyspace's background
/// thread, if any).
fn handle(
    inner: Arc<Inner>,
    worker: Option<JoinHandle<()>>,
    recovery: RecoveryReport,
    settings: SettingsReport,
    keyspaces: KeyspaceSet,
) -> Db {
    Db {
        inner,
        worker: Mutex::new(worker),
        closed: AtomicBool::new(false),
        recovery,
        settings,
        keyspaces: Mutex::new(keyspaces),
    }
}

/// Makes the directory if the open may create a store, refuses a directory without a
/// store if it may not, and takes the directory's lock.
fn lock_dir(dir: &Path, options: &Options) -> Result<FileLock> {
    let fs = &options.file_system;
    if !fs.exists(dir) {
        if !options.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist and create_if_missing is false",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
    }
    if !options.create_if_missing && !fs.exists(&filename::manifest_path(dir)) {
        // Refused before the lock is taken: no LOCK file is left in a directory
        // that holds no store.
        return Err(no_store(dir));
    }
    let path = filename::lock_path(dir);
    let started = Instant::now();
    loop {
        match fs.lock(&path) {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if started.elapsed() >= LOCK_WAIT {
                    return Err(Error::Locked(dir.to_path_buf()));
                }
                std::thread::sleep(LOCK_RETRY);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// How long an open waits for a lock that is held before it says `Locked`.
///
/// A child process holds a copy of every file its parent had open from its fork until
/// its exec, and an `flock` belongs to the open file the copy shares: while any thread
/// of this process is starting a process, a store it closed an instant before still
/// looks locked, for as long as the child takes to exec. An open waits that moment
/// out; a lock another holder keeps is reported this much later.
const LOCK_WAIT: Duration = Duration::from_millis(200);

/// The pause between two tries within [`LOCK_WAIT`].
const LOCK_RETRY: Duration = Duration::from_millis(2);

/// The manifest (a new, empty state for a store being created), the directory's file
/// names after tidying, and where the tables no manifest names were moved.
fn read_state_and_tidy(parts: &Parts) -> Result<(ManifestState, Vec<String>, Vec<PathBuf>)> {
    let (fs, dir) = (&parts.fs, &parts.dir);
    let names = fs.list(dir)?;
    let state = manifest::read_manifest(fs.as_ref(), dir)?;
    let state = match state {
        Some(s) => s,
        None if !parts.options.create_if_missing => return Err(no_store(dir)),
        None => {
            if stray_store_file(&names).is_some() {
                return Err(no_manifest(dir, &names));
            }
            ManifestState::new(1, 0, 0, Vec::new())
        }
    };

    // Before anything is written: leftover temp files go (they are never named by
    // a manifest, and after a full disk they hold the space a reopen needs), and
    // tables the manifest does not name are moved aside, never deleted.
    let moved_aside = tidy_before_writing(fs, dir, &names, &state)?;
    let names = if moved_aside.is_empty() {
        names
    } else {
        fs.list(dir)?
    };
    Ok((state, names, moved_aside))
}

/// The live tables as the manifest records them. A writable open (`listed`: the
/// directory's names, read already) opens none of them: each is opened on first use
/// (`lazy_table::LazyTable`), so open reads no table file. A table the manifest names
/// that the listing lacks fails the open as `Corruption` naming it, as it did when
/// open read every table: a store missing a table is damaged, and that is best said
/// before any answer.
///
/// A read-only open (`listed: None`) opens every table now, as every open did before:
/// it runs beside a writer that deletes the tables its compactions retire, and a table
/// held open stays readable after its deletion; a table gone before it was opened fails
/// this attempt, and the caller reads the manifest again.
///
/// Either way, a table recorded by a version-1 manifest, which lacks its data size, is
/// opened now; the next manifest written records it.
fn recover_tables(
    parts: &Parts,
    state: &ManifestState,
    listed: Option<&[String]>,
) -> Result<Version> {
    let files = parts.table_files();
    let opener = files.opener(parts.released.clone());
    let present: Option<std::collections::HashSet<&str>> =
        listed.map(|names| names.iter().map(String::as_str).collect());
    let mut tables = Vec::new();
    for meta in state.tables() {
        let level = table_level(&parts.dir, meta)?;
        let handle = match (&present, record_of(meta)) {
            (Some(present), Some(record)) => {
                if !present.contains(filename::table_file_name(meta.number).as_str()) {
                    return Err(Error::corruption(
                        filename::table_path(&parts.dir, meta.number),
                        "live table cannot be read: the manifest names it and the \
                         directory does not hold it",
                    ));
                }
                TableHandle::lazy(meta.number, record, opener.clone())
            }
            _ => {
                let mut handle = files.open(meta.number)?;
                if parts.released.contains(&meta.number) {
                    handle = handle.without_filter()?;
                }
                handle
            }
        };
        tables.push((level, Arc::new(handle)));
    }
    Ok(Version::empty().apply(&[], tables))
}

/// The number the next new file takes: above the manifest's count and above every
/// number a file in the directory already has.
fn next_file_number(names: &[String], state: &ManifestState) -> u64 {
    let max_on_disk = names
        .iter()
        .filter_map(|n| file_number(n))
        .max()
        .unwrap_or(0);
    state.next_file_number().max(max_on_disk + 1).max(1)
}

/// Replays the live WALs, oldest first, under `options.wal_recovery`, each keyspace's
/// writes into its memtable from its manifest's log on; returns the logs' numbers
/// with what they held. The last sequence number is above every keyspace's tables.
fn recover_logs(
    parts: &Parts,
    names: &[String],
    state: &ManifestState,
    named: &[NamedAtOpen],
) -> Result<(Vec<u64>, Replayed)> {
    let mut routes = vec![Route {
        keyspace: KeyspaceId::DEFAULT,
        first_log: state.wal_number(),
    }];
    routes.extend(named.iter().map(|n| Route {
        keyspace: n.id,
        first_log: n.state.wal_number(),
    }));
    let first = routes.iter().map(|r| r.first_log).min().unwrap_or(0);
    // Every record of a log at or after a keyspace's first is newer than that
    // keyspace's tables; the lowest such bound holds for all the logs read.
    let floor = std::iter::once(state.last_sequence())
        .chain(named.iter().map(|n| n.state.last_sequence()))
        .min()
        .unwrap_or(0);
    let wals = live_wals(names, first);
    let mut replayed = recovery::replay(
        parts.fs.as_ref(),
        &parts.dir,
        &wals,
        parts.options.wal_recovery,
        floor,
        &routes,
    )?;
    let tables_last = std::iter::once(state.last_sequence())
        .chain(named.iter().map(|n| n.state.last_sequence()))
        .max()
        .unwrap_or(0);
    replayed.last_seq = replayed.last_seq.max(tables_last);
    add(
        &parts.counters.wal_tail_bytes_dropped,
        replayed.report.bytes_dropped(),
    );
    Ok((wals, replayed))
}

/// What becomes of the recovered writes (see [`Db::open`]): kept as the live
/// memtables, backed by the logs they came from, or flushed ([`flush_recovered`]);
/// the same for every keyspace.
fn keep_or_flush(
    parts: &Parts,
    state: &ManifestState,
    version: Version,
    wals: &[u64],
    replayed: Replayed,
    next_file_number: u64,
    named: &mut [NamedAtOpen],
) -> Result<(RecoveredLog, Recovered, RecoveryReport)> {
    let (fs, dir) = (&parts.fs, &parts.dir);
    let Replayed {
        memtable,
        named: named_mems,
        last_seq,
        mut report,
    } = replayed;
    for (id, mem) in named_mems {
        if let Some(n) = named.iter_mut().find(|n| n.id == id) {
            n.mem = mem;
        }
    }
    // The mark vouches for the logs once: whatever happens next, this session's
    // own clean close must write a new one. Removed durably before any write.
    let mark = ClosedMark::read(fs.as_ref(), dir);
    if fs.exists(&filename::closed_path(dir)) {
        remove_closed_mark(fs, dir)?;
    }
    let keep = recovery::can_keep(&report, &memtable, parts.options.memtable_size, mark)
        && named
            .iter()
            .all(|n| n.mem.approximate_size() < n.parts.options.memtable_size);
    // The oldest log at or after `first` (the newest log if none is).
    let backing =
        |first: u64, newest: u64| wals.iter().copied().find(|&w| w >= first).unwrap_or(newest);
    match (wals.first(), report.wals.last()) {
        (Some(&oldest), Some(newest)) if keep => {
            // The logs replayed cleanly, hold less than a memtable, and the last
            // session closed cleanly: they stay the memtables' logs, and writes go
            // on appending to the newest. No manifest change is needed: each
            // already keeps every log from its first.
            let file = fs.open_append(&filename::wal_path(dir, newest.number))?;
            remove_obsolete(fs, dir, None, oldest);
            report.kept_in_memtable = true;
            for n in named.iter_mut() {
                n.mem_wal = backing(n.state.wal_number(), newest.number);
            }
            let log = RecoveredLog {
                wal: WalWriter::new(file),
                wal_number: newest.number,
                wal_start: newest.file_len,
                last_seq,
            };
            let recovered = Recovered {
                version,
                mem: memtable,
                mem_wal: backing(state.wal_number(), newest.number),
                last_sequence: state.last_sequence(),
                next_file_number: Arc::new(AtomicU64::new(next_file_number)),
            };
            Ok((log, recovered, report))
        }
        _ => {
            let (log, recovered) = flush_recovered(
                parts,
                state,
                version,
                &memtable,
                last_seq,
                next_file_number,
                named,
            )?;
            Ok((log, recovered, report))
        }
    }
}

/// Writes the recovered writes to an L0 table in each keyspace that has some, makes
/// durable manifests that retire the logs they came from (the named keyspaces'
/// first, the root's last), and starts a fresh log.
fn flush_recovered(
    parts: &Parts,
    state: &ManifestState,
    mut version: Version,
    memtable: &Memtable,
    last_seq: SeqNo,
    next_file_number: u64,
    named: &mut [NamedAtOpen],
) -> Result<(RecoveredLog, Recovered)> {
    let (fs, dir) = (&parts.fs, &parts.dir);
    // The fresh log's number, which every manifest written below names. A crash
    // between them leaves each keyspace's manifest naming the old logs (its writes
    // replay again) or the new one (its writes are in its table).
    let wal_number = next_file_number;
    let mut numbers = wal_number + 1;
    for n in named.iter_mut() {
        if n.mem.is_empty() {
            n.mem_wal = wal_number;
            continue;
        }
        let (next_version, built) =
            flush_memtable(&n.parts, n.version.clone(), &n.mem, &mut numbers)?;
        let last_sequence = n.state.last_sequence().max(n.mem.max_seq());
        if let Err(e) = write_state(
            &n.parts.fs,
            &n.parts.dir,
            &next_version,
            wal_number,
            numbers,
            last_sequence,
        ) {
            discard_unrecorded(&n.parts.fs, &n.parts.dir, &built);
            return Err(e);
        }
        n.version = next_version;
        n.last_sequence = last_sequence;
        n.mem = Memtable::new();
        n.mem_wal = wal_number;
    }
    let (next_version, built) = flush_memtable(parts, version, memtable, &mut numbers)?;
    version = next_version;
    // Also when nothing was kept: the numbers of records point-in-time
    // recovery dropped are used up, and the logs that held them go.
    let last_sequence = state.last_sequence().max(last_seq);

    // A manifest that retires the old WALs, then the fresh WAL it names. In
    // this order, a crash or error in between leaves no WAL newer than one
    // with a torn tail, and no WAL without a manifest (either would refuse
    // the next open); a named WAL that does not exist yet holds no writes.
    if let Err(e) = write_state(fs, dir, &version, wal_number, numbers, last_sequence) {
        // No manifest names the table: delete it, as a failed install
        // does, or the next open would move it aside for good (the
        // logs it came from are still there and replay again).
        discard_unrecorded(fs, dir, &built);
        return Err(e);
    }
    let wal_file = fs.create(&filename::wal_path(dir, wal_number))?;
    fs.sync_dir(dir)?;
    remove_obsolete(fs, dir, None, wal_number);
    let log = RecoveredLog {
        wal: WalWriter::new(wal_file),
        wal_number,
        wal_start: 0,
        last_seq,
    };
    let recovered = Recovered {
        version,
        mem: Memtable::new(),
        mem_wal: wal_number,
        last_sequence,
        next_file_number: Arc::new(AtomicU64::new(numbers)),
    };
    Ok((log, recovered))
}

/// Writes `memtable` (if it holds anything) as an L0 table numbered from `*numbers`
/// and returns the version with it, and the table numbers written.
fn flush_memtable(
    parts: &Parts,
    version: Version,
    memtable: &Memtable,
    numbers: &mut u64,
) -> Result<(Version, Vec<u64>)> {
    if memtable.is_empty() {
        return Ok((version, Vec::new()));
    }
    let number = *numbers;
    *numbers += 1;
    let range_dels = memtable.range_dels().map(|r| (*r).clone());
    let handle = parts.table_files().build_with_range_dels(
        number,
        &parts.policy,
        // No snapshot exists yet: the newest version of each key.
        Retain::new(memtable.versions().map(Ok), Vec::new(), false),
        |_| range_dels,
    )?;
    Ok(match handle {
        Some(handle) => (
            version.apply(&[], vec![(0, Arc::new(handle))]),
            vec![number],
        ),
        None => (version, Vec::new()),
    })
}

/// How many times a read-only open starts again when the store changed under it.
const READ_ONLY_ATTEMPTS: usize = 20;

/// A read-only open (see [`Options::read_only`]): the manifest's tables are opened and
/// the logs replayed into the memtable; nothing is written, deleted or locked, and no
/// background thread runs. A writer may be rotating files meanwhile: when an attempt
/// fails and the manifest changed while it ran, it starts again.
fn open_read_only(dir: PathBuf, options: Options) -> Result<Db> {
    let fs = options.file_system.clone();
    if !fs.exists(&dir) {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist",
            dir.display()
        )));
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = DirState::read(fs.as_ref(), &dir);
        let opened = open_read_only_once(&dir, &options);
        if opened.is_ok() {
            return opened;
        }
        // A table or log that vanished because a writer moved on: read again.
        let after = DirState::read(fs.as_ref(), &dir);
        if before.same_manifest(&after) {
            return opened;
        }
        if attempt >= READ_ONLY_ATTEMPTS {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "{} is open by another process that kept changing it: {} file(s) \
                     rotated while reading, {attempt} attempt(s); try again",
                    dir.display(),
                    before.changes(&after)
                ),
            )));
        }
    }
}

fn open_read_only_once(dir: &Path, options: &Options) -> Result<Db> {
    let parts = Parts::new(dir.to_path_buf(), options.clone())?;
    // The logs are listed before the manifest is read. A writer deletes a log only
    // after a manifest that retires it is in place, so every log the manifest read
    // below still needs was listed (a log started since holds only newer writes, a
    // suffix this open does not see). A listed log or named table that vanishes before
    // it is read fails this attempt, and the caller reads again.
    let names = parts.fs.list(dir)?;
    let Some(state) = manifest::read_manifest(parts.fs.as_ref(), dir)? else {
        return Err(no_manifest(dir, &names));
    };
    let version = recover_tables(&parts, &state, None)?;
    let registry = keyspaces::read(parts.fs.as_ref(), dir)?;
    let mut named = open_named(&parts, &registry, false)?;
    let (wals, replayed) = recover_logs(&parts, &names, &state, &named)?;
    let mem_wal = wals.first().copied().unwrap_or(state.wal_number());
    for (id, mem) in replayed.named {
        if let Some(n) = named.iter_mut().find(|n| n.id == id) {
            n.mem = mem;
            n.mem_wal = mem_wal;
        }
    }
    let log = RecoveredLog {
        wal: WalWriter::new(Box::new(NoWrites)),
        wal_number: mem_wal,
        wal_start: 0,
        last_seq: replayed.last_seq,
    };
    let recovered = Recovered {
        version,
        mem: replayed.memtable,
        mem_wal,
        last_sequence: state.last_sequence(),
        next_file_number: Arc::new(AtomicU64::new(state.next_file_number())),
    };
    // Read, never written (the options given have `read_only` set).
    let settings = settings::at_open(parts.fs.as_ref(), dir, options)?;
    let journal = Arc::new(Journal::new(
        parts.dir.clone(),
        parts.fs.clone(),
        recovered.next_file_number.clone(),
        log,
        None,
    ));
    let inner = Arc::new(Inner::new(
        parts,
        recovered,
        journal.clone(),
        KeyspaceId::DEFAULT,
    ));
    journal.register(&inner, mem_wal);
    let set = start_named(named, &journal, registry, false)?;
    Ok(handle(inner, None, replayed.report, settings, set))
}

/// The log "writer" of a read-only open: every write is refused before it gets here.
struct NoWrites;

impl crate::fs::WritableFile for NoWrites {
    fn append(&mut self, _: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the store is open read-only",
        ))
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
