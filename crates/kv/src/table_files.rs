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
//! A store opens the tables its manifest names lazily (`lazy_table.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv_filter::{FilterInfo, FilterPolicy, RangeFilterStats};
use bytes::Bytes;
use serde::Serialize;

use crate::error::Result;
use crate::filename;
use crate::fs::FileSystem;
use crate::lazy_table::{open_table, TableOpener};
use crate::options::Options;
use crate::range_del::Fragments;
use crate::sstable::TableCache;
use crate::sstable::{show_key, FilterState, RangeFilterState, Table, TableBuilder, TableOptions};
use crate::stats::Counters;
use crate::types::Entry;
use crate::version::TableHandle;

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

    /// What a [`LazyTable`] of this store opens with, to be shared by all of them
    /// (`released`: the tables it opens without their filters, see `filter_budget`).
    pub(crate) fn opener(&self, released: std::collections::BTreeSet<u64>) -> Arc<TableOpener> {
        Arc::new(TableOpener {
            fs: self.fs.clone(),
            cache: self.cache.clone(),
            dir: self.dir.to_path_buf(),
            counters: self.counters.clone(),
            policies: self.policies.to_vec(),
            released,
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
        self.build_with_range_dels(number, policy, entries, |_| None)
    }

    /// [`TableFiles::build`], the table carrying the range tombstones `range_dels`
    /// gives once the entries are written (it is handed the last key written, or
    /// `None` if there was none). A table of range tombstones alone is written too.
    pub(crate) fn build_with_range_dels(
        &self,
        number: u64,
        policy: &Option<Arc<dyn FilterPolicy>>,
        entries: impl Iterator<Item = Result<Entry>>,
        range_dels: impl FnOnce(Option<&[u8]>) -> Option<Fragments>,
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
                    metadata_partition: options.metadata_partition_bytes(),
                },
            );
            let mut last: Option<Bytes> = None;
            for entry in entries {
                let e = entry?;
                builder.add(&e.key, e.seq, e.kind, &e.value)?;
                last = Some(e.key);
            }
            let dels = range_dels(last.as_deref()).filter(|d| !d.is_empty());
            let has_dels = dels.is_some();
            if let Some(dels) = dels {
                builder.set_range_dels(dels);
            }
            if builder.num_entries() == 0 && !has_dels {
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
    /// Range tombstones (fragment and sequence number pairs) in its range tombstone
    /// block (format version 7); 0 without one.
    pub range_tombstones: u64,
    /// Partitions its index and filter are cut into (format version 8, written under
    /// `Options::metadata_budget`; `filter` then describes the coarse filter kept in
    /// memory); 0 for a table whose index and filter are whole.
    pub partitions: u64,
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
                FilterState::Released => "released (filter_memory_budget)".into(),
            },
            filter: table.filter_info(),
            range_filter_state: match table.range_filter_state() {
                RangeFilterState::Loaded => "loaded".into(),
                RangeFilterState::NotWritten => "none".into(),
                RangeFilterState::Corrupt(why) => format!("CORRUPT, ignored: {why}"),
            },
            range_filter: table.range_filter_stats(),
            range_tombstones: table.range_dels().map_or(0, Fragments::count),
            partitions: p.partitions,
        }
    }
}
