//! Building, opening and describing table files, apart from any open store: a flush,
//! a compaction, open's flush of recovered logs and `repair` all write a table the
//! same way, and open, `repair` and `inspect` all open one the same way.
//!
//! ```text
//!  entries ─► NNNNNN.sst.tmp ─► fsync ─► rename to NNNNNN.sst ─► fsync dir ─► open
//!             (any failure: the files made so far are deleted; no manifest names them)
//! ```
//!
//! [`TableFiles`] names what that takes (directory, file system, table cache, options,
//! counters, the policies that open filters); the caller chooses each new table's
//! number and filter policy.
//!
//! A table a store opens from its manifest is not read at open: it is a [`LazyTable`],
//! opened (footer, index and filter read, as a built table is at once) by the first
//! lookup, scan or compaction that reaches it. The manifest holds everything a version
//! needs before that (key range, sizes, entries, `max_seq`), so open reads no table
//! file and its time does not grow with the number of tables. Open file descriptors
//! stay bounded by `max_open_files` as before (the table cache closes and reopens
//! files; an opened table keeps only its index and filter).
//!
//! ```text
//!  manifest record ─► TableHandle { meta, LazyTable::Unopened }
//!                       first use ─► TableOpener::open ─► footer, index, filter
//!                                    (checked against the manifest's record)
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bloomkv_filter::{FilterInfo, FilterPolicy, RangeFilterStats};
use bytes::Bytes;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::manifest::TableMeta;
use crate::options::Options;
use crate::sstable::TableCache;
use crate::sstable::{
    show_key, FilterState, RangeFilterState, Table, TableBuilder, TableFile, TableOptions,
};
use crate::stats::Counters;
use crate::types::Entry;
use crate::version::{TableHandle, TableRecord};

/// Where tables are written and how they are opened: a store's own (its table cache
/// and counters), or ones made for a single job (`repair`).
pub(crate) struct TableFiles<'a> {
    pub(crate) fs: &'a Arc<dyn FileSystem>,
    /// The open files (bounded by `max_open_files`) and the block cache.
    pub(crate) cache: &'a Arc<TableCache>,
    pub(crate) dir: &'a Path,
    /// Block size, compression, prefix extractor, range filter, alignment.
    pub(crate) options: &'a Options,
    /// What reads of the opened tables count.
    pub(crate) counters: &'a Arc<Counters>,
    /// Opens any table's filter, whatever policy wrote it.
    pub(crate) policies: &'a [Arc<dyn FilterPolicy>],
}

impl TableFiles<'_> {
    /// Opens live table `number` (index and filter come into memory).
    pub(crate) fn open(&self, number: u64) -> Result<TableHandle> {
        let table = open_table(self.dir, self.cache, self.counters, self.policies, number)?;
        Ok(TableHandle::opened(number, table))
    }

    /// What a [`LazyTable`] of this store opens with, to be shared by all of them.
    pub(crate) fn opener(&self) -> Arc<TableOpener> {
        Arc::new(TableOpener {
            fs: self.fs.clone(),
            cache: self.cache.clone(),
            dir: self.dir.to_path_buf(),
            counters: self.counters.clone(),
            policies: self.policies.to_vec(),
        })
    }

    /// Writes `entries` as table `number` with `policy`'s filter: temp name, fsync,
    /// rename, directory fsync, open. `None` if `entries` was empty.
    ///
    /// On any failure the files it made are deleted at once: no manifest names the table
    /// yet, so they are garbage, and on a full disk they hold the space the next attempt
    /// (or a reopen) needs.
    pub(crate) fn build(
        &self,
        number: u64,
        policy: &Option<Arc<dyn FilterPolicy>>,
        entries: impl Iterator<Item = Result<Entry>>,
    ) -> Result<Option<TableHandle>> {
        let (fs, dir, options) = (self.fs, self.dir, self.options);
        let tmp = filename::temp_table_path(dir, number);
        let path = filename::table_path(dir, number);
        let mut renamed = false;
        let built = (|| {
            let mut builder = TableBuilder::new(
                fs.create(&tmp)?,
                tmp.clone(),
                TableOptions {
                    block_size: options.block_size,
                    restart_interval: options.restart_interval,
                    filter_policy: policy.clone(),
                    prefix_extractor: options.prefix_extractor.clone(),
                    compression: options.compression,
                    range_filter: options.range_filter,
                    block_align: options.block_align,
                },
            );
            for entry in entries {
                let e = entry?;
                builder.add(&e.key, e.seq, e.kind, &e.value)?;
            }
            if builder.num_entries() == 0 {
                drop(builder);
                let _ = fs.remove(&tmp);
                return Ok(None);
            }
            builder.finish()?;
            fs.rename(&tmp, &path)?;
            renamed = true;
            fs.sync_dir(dir)?;
            self.open(number).map(Some)
        })();
        if built.is_err() {
            let _ = fs.remove(if renamed { &path } else { &tmp });
        }
        built
    }
}

/// Opens live table `number` of `dir` through `cache` (index and filter into memory).
fn open_table(
    dir: &Path,
    cache: &Arc<TableCache>,
    counters: &Arc<Counters>,
    policies: &[Arc<dyn FilterPolicy>],
    number: u64,
) -> Result<Table> {
    let path = filename::table_path(dir, number);
    let file = TableFile::cached(cache.slot(path.clone()), counters.clone());
    Table::open_file(file, policies).map_err(|e| live_table_error(&path, e))
}

/// What every lazily opened table of a store opens with (one per open store).
pub(crate) struct TableOpener {
    fs: Arc<dyn FileSystem>,
    cache: Arc<TableCache>,
    dir: PathBuf,
    counters: Arc<Counters>,
    policies: Vec<Arc<dyn FilterPolicy>>,
}

impl std::fmt::Debug for TableOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableOpener")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A live table's reader, opened when first asked for.
///
/// Made opened (a table just built) or unopened (a table named by the manifest at
/// open). [`LazyTable::get`] opens an unopened one once, under a lock, so concurrent
/// first users read its metadata once; a failure is not kept (the next use tries
/// again: a refused open, too many files say, may pass later), and is the
/// `Corruption` naming the file that an eager open would have failed with.
///
/// Retiring (`mark_obsolete`) a table nobody has opened deletes its file when the
/// handle is dropped, as the opened table's file slot does for an opened one.
pub(crate) struct LazyTable {
    number: u64,
    /// The manifest's record, checked against the table when it is opened (`None`:
    /// made opened, nothing to check).
    expected: Option<TableRecord>,
    opener: Option<Arc<TableOpener>>,
    table: OnceLock<Table>,
    opening: Mutex<()>,
    obsolete: AtomicBool,
}

impl std::fmt::Debug for LazyTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyTable")
            .field("number", &self.number)
            .field("table", &self.table.get())
            .finish_non_exhaustive()
    }
}

impl LazyTable {
    /// A table already open.
    pub(crate) fn opened(number: u64, table: Table) -> LazyTable {
        LazyTable {
            number,
            expected: None,
            opener: None,
            table: OnceLock::from(table),
            opening: Mutex::new(()),
            obsolete: AtomicBool::new(false),
        }
    }

    /// Table `number`, to be opened by `opener` on first use and checked against
    /// `expected` (the manifest's record of it).
    pub(crate) fn unopened(
        number: u64,
        expected: TableRecord,
        opener: Arc<TableOpener>,
    ) -> LazyTable {
        LazyTable {
            number,
            expected: Some(expected),
            opener: Some(opener),
            table: OnceLock::new(),
            opening: Mutex::new(()),
            obsolete: AtomicBool::new(false),
        }
    }

    /// The table if it has been opened, without opening it.
    pub(crate) fn if_open(&self) -> Option<&Table> {
        self.table.get()
    }

    /// The opened table, opening it now if this is its first use.
    #[inline]
    pub(crate) fn get(&self) -> Result<&Table> {
        match self.table.get() {
            Some(t) => Ok(t),
            None => self.open_now(),
        }
    }

    #[cold]
    fn open_now(&self) -> Result<&Table> {
        let _opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = self.table.get() {
            return Ok(t); // opened while this caller waited
        }
        let (Some(opener), Some(expected)) = (&self.opener, &self.expected) else {
            // Unreachable: a table made opened has its reader.
            return Err(Error::InvalidArgument(format!(
                "table {} has no reader and nothing to open it with",
                self.number
            )));
        };
        let table = open_table(
            &opener.dir,
            &opener.cache,
            &opener.counters,
            &opener.policies,
            self.number,
        )?;
        let found = TableRecord::of(&table);
        if found != *expected {
            return Err(Error::corruption(
                table.path(),
                format!(
                    "live table does not match the manifest: the manifest records \
                     {expected}, the file holds {found}"
                ),
            ));
        }
        let table = self.table.get_or_init(|| table);
        if self.obsolete.load(Ordering::Relaxed) {
            table.mark_obsolete(); // retired before anyone opened it
        }
        Ok(table)
    }

    /// Marks the table's file for deletion once no reader holds it.
    pub(crate) fn mark_obsolete(&self) {
        // Under the opening lock: an open in progress either sees the mark or has
        // finished, and then its table is marked here.
        let _opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        self.obsolete.store(true, Ordering::Relaxed);
        if let Some(t) = self.table.get() {
            t.mark_obsolete();
        }
    }
}

impl Drop for LazyTable {
    fn drop(&mut self) {
        // An opened table's file slot deletes the file (if it was retired) when the
        // last reader lets go; one never opened has no slot, so it is deleted here.
        if self.table.get().is_none() && *self.obsolete.get_mut() {
            if let Some(opener) = &self.opener {
                let _ = opener
                    .fs
                    .remove(&filename::table_path(&opener.dir, self.number));
            }
        }
    }
}

/// The manifest's record of a table, as a [`TableHandle`] holds it.
pub(crate) fn record_of(meta: &TableMeta) -> Option<TableRecord> {
    Some(TableRecord {
        smallest: meta.smallest.clone(),
        largest: meta.largest.clone(),
        file_size: meta.file_size,
        data_size: meta.data_size?,
        entries: meta.entries,
        max_seq: meta.max_seq,
    })
}

/// What a failure to open a live table means. A table the manifest names that is
/// missing, or shorter than its own footer says, is corruption; any other I/O error
/// (too many open files, permission denied, a full disk, a device error) is the
/// operating system's refusal, reported as `Error::Io` with the path: the store may
/// well be sound.
pub(crate) fn live_table_error(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            Error::corruption(path, format!("live table cannot be read: {e}"))
        }
        other => other,
    }
}

/// One live table, as `inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TableInfo {
    /// The level it lives on.
    pub level: usize,
    /// Its file number.
    pub number: u64,
    /// Its file.
    pub path: PathBuf,
    /// File size in bytes.
    pub file_size: u64,
    /// Its table format version (5: page-aligned data blocks; see docs/FORMAT.md).
    pub format_version: u32,
    /// Smallest key.
    #[serde(serialize_with = "ser_key")]
    pub smallest: Bytes,
    /// Largest key.
    #[serde(serialize_with = "ser_key")]
    pub largest: Bytes,
    /// Entries, tombstones included.
    pub entries: u64,
    /// Tombstones.
    pub deletions: u64,
    /// The filter policy recorded in the table ("" if none).
    pub filter_policy: String,
    /// The bits per key it was built with.
    pub bits_per_key: f64,
    /// Whether the filter is in use, and if not why.
    pub filter_state: String,
    /// The decoded filter's shape, if it loaded.
    pub filter: Option<FilterInfo>,
    /// Whether scans consult a range filter, and if not why.
    pub range_filter_state: String,
    /// The decoded range filter's figures, if it loaded.
    pub range_filter: Option<RangeFilterStats>,
}

fn ser_key<S: serde::Serializer>(key: &Bytes, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&show_key(key))
}

impl TableInfo {
    pub(crate) fn of(level: usize, number: u64, table: &Table) -> TableInfo {
        let p = table.properties();
        TableInfo {
            level,
            number,
            path: table.path().to_path_buf(),
            file_size: table.file_size(),
            format_version: p.format_version,
            smallest: table.smallest().clone(),
            largest: table.largest().clone(),
            entries: p.entries,
            deletions: p.deletions,
            filter_policy: p.filter_policy.clone(),
            bits_per_key: p.bits_per_key,
            filter_state: match table.filter_state() {
                FilterState::Loaded => "loaded".into(),
                FilterState::NotWritten => "none".into(),
                FilterState::Corrupt(why) => format!("CORRUPT, ignored: {why}"),
                FilterState::UnknownPolicy(name) => format!("unknown policy {name}, ignored"),
            },
            filter: table.filter_info(),
            range_filter_state: match table.range_filter_state() {
                RangeFilterState::Loaded => "loaded".into(),
                RangeFilterState::NotWritten => "none".into(),
                RangeFilterState::Corrupt(why) => format!("CORRUPT, ignored: {why}"),
            },
            range_filter: table.range_filter_stats(),
        }
    }
}
