//! Live tables opened on first use.
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
//!  manifest record ─► TableHandle { record, LazyTable (unopened) }
//!                       first use ─► LazyTable::get ─► footer, index, filter
//!                                    (checked against the manifest's record)
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bloomkv_filter::FilterPolicy;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::manifest::TableMeta;
use crate::sstable::{show_key, Table, TableCache, TableFile};
use crate::stats::Counters;
use crate::types::SeqNo;

/// What a version knows of a live table without reading it: the manifest records
/// exactly this, so a store opens without opening its tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableRecord {
    pub smallest: Bytes,
    pub largest: Bytes,
    pub file_size: u64,
    /// Bytes of data blocks (what level sizing counts).
    pub data_size: u64,
    pub entries: u64,
    pub max_seq: SeqNo,
}

impl TableRecord {
    /// An opened table's record, from its own properties.
    pub(crate) fn of(table: &Table) -> TableRecord {
        let p = table.properties();
        TableRecord {
            smallest: table.smallest().clone(),
            largest: table.largest().clone(),
            file_size: table.file_size(),
            data_size: p.data_size,
            entries: p.entries,
            max_seq: p.max_seq,
        }
    }
}

impl std::fmt::Display for TableRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "keys {}..{}, {} bytes ({} of data), {} entries, max_seq {}",
            show_key(&self.smallest),
            show_key(&self.largest),
            self.file_size,
            self.data_size,
            self.entries,
            self.max_seq
        )
    }
}

/// Opens live table `number` of `dir` through `cache` (index and filter into memory).
pub(crate) fn open_table(
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
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) cache: Arc<TableCache>,
    pub(crate) dir: PathBuf,
    pub(crate) counters: Arc<Counters>,
    pub(crate) policies: Vec<Arc<dyn FilterPolicy>>,
    /// Tables whose filters the budget released (`filter_budget.rs`): opened without.
    pub(crate) released: std::collections::BTreeSet<u64>,
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
        let table = if opener.released.contains(&self.number) {
            table.without_filter()
        } else {
            table
        };
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
