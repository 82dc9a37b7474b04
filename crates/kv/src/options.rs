//! How a store is configured, with defaults that suit a laptop-sized workload.
//!
//! Every field has a documented default (see [`Options::default`]); [`Options::validate`]
//! runs at `Db::open` and turns a nonsensical setting into `Error::InvalidArgument`.

use std::fmt;
use std::sync::Arc;

use bloomkv_filter::{BloomPolicy, FilterPolicy};

use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem};
use crate::recovery::WalRecovery;

/// Which filter each new table carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterKind {
    /// Bloom filter with all of a key's probes inside one 64-byte cache line
    /// (RocksDB's FastLocalBloom idea): one cache miss per table per lookup.
    #[default]
    CacheLocalBloom,
    /// Textbook Bloom filter: probes spread over the whole bit array.
    StandardBloom,
    /// No filter: every table whose key range covers a key is read.
    None,
}

/// Store configuration. `Options::default()` is a sound start; change what you need.
///
/// ```
/// use bloomkv_kv::{FilterKind, Options};
/// let options = Options {
///     bits_per_key: 10.0,
///     filter: FilterKind::StandardBloom,
///     sync_writes: true,
///     ..Options::default()
/// };
/// assert!(options.validate().is_ok());
/// ```
#[derive(Clone)]
pub struct Options {
    /// Filter bits spent per key of each table. Default 10.0 (about 1% false positives).
    pub bits_per_key: f64,
    /// Filter layout for new tables. Default [`FilterKind::CacheLocalBloom`].
    pub filter: FilterKind,
    /// A memtable this large (approximate bytes) is frozen and flushed. Default 4 MiB.
    pub memtable_size: usize,
    /// Target size of an uncompressed data block. Default 4096.
    pub block_size: usize,
    /// Keys between restart points in a data block. Default 16.
    pub restart_interval: usize,
    /// Fsync the WAL before a write returns. Default `false` (like RocksDB and LevelDB):
    /// a crash of the machine may lose the last writes, a crash of the process does not.
    pub sync_writes: bool,
    /// Never compact in the background (manual `compact()` still works). Default `false`.
    pub disable_auto_compaction: bool,
    /// Number of L0 tables that triggers a compaction into L1. Default 4.
    pub l0_compaction_trigger: usize,
    /// Size budget of L1; each deeper level gets `level_size_multiplier` times more.
    /// Default 8 MiB.
    pub level1_max_bytes: u64,
    /// Growth factor between levels. Default 10.
    pub level_size_multiplier: u64,
    /// Compaction splits its output into tables of about this size. Default 2 MiB.
    pub target_file_size: u64,
    /// Frozen memtables waiting for flush before writers stall. Default 2.
    pub max_immutable_memtables: usize,
    /// Create the directory if it does not hold a store. Default `true`.
    pub create_if_missing: bool,
    /// The file layer every file operation goes through. Default: the operating system's.
    pub file_system: Arc<dyn FileSystem>,
    /// What open does with WAL bytes that are not a valid record (see [`WalRecovery`]
    /// for exactly what each mode keeps and drops). Default
    /// [`WalRecovery::TolerateCorruptTail`].
    pub wal_recovery: WalRecovery,
}

/// Deepest level a table can live on (L0 .. L6, as in LevelDB).
pub const NUM_LEVELS: usize = 7;

/// The longest key accepted (bytes).
pub const MAX_KEY_LEN: usize = 64 * 1024;

/// The longest value accepted (bytes).
pub const MAX_VALUE_LEN: usize = 64 * 1024 * 1024;

impl Default for Options {
    fn default() -> Self {
        Options {
            bits_per_key: 10.0,
            filter: FilterKind::CacheLocalBloom,
            memtable_size: 4 << 20,
            block_size: 4096,
            restart_interval: 16,
            sync_writes: false,
            disable_auto_compaction: false,
            l0_compaction_trigger: 4,
            level1_max_bytes: 8 << 20,
            level_size_multiplier: 10,
            target_file_size: 2 << 20,
            max_immutable_memtables: 2,
            create_if_missing: true,
            file_system: Arc::new(OsFileSystem),
            wal_recovery: WalRecovery::TolerateCorruptTail,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("bits_per_key", &self.bits_per_key)
            .field("filter", &self.filter)
            .field("memtable_size", &self.memtable_size)
            .field("block_size", &self.block_size)
            .field("restart_interval", &self.restart_interval)
            .field("sync_writes", &self.sync_writes)
            .field("disable_auto_compaction", &self.disable_auto_compaction)
            .field("l0_compaction_trigger", &self.l0_compaction_trigger)
            .field("level1_max_bytes", &self.level1_max_bytes)
            .field("level_size_multiplier", &self.level_size_multiplier)
            .field("target_file_size", &self.target_file_size)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field("create_if_missing", &self.create_if_missing)
            .field("file_system", &self.file_system)
            .field("wal_recovery", &self.wal_recovery)
            .finish()
    }
}

impl Options {
    /// Checks every field; the first bad one is reported as `InvalidArgument`.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if !self.bits_per_key.is_finite() || self.bits_per_key <= 0.0 || self.bits_per_key > 100.0 {
            return bad(format!(
                "bits_per_key must be a number in (0, 100], got {}",
                self.bits_per_key
            ));
        }
        let sizes = [
            ("memtable_size", self.memtable_size as u64),
            ("block_size", self.block_size as u64),
            ("restart_interval", self.restart_interval as u64),
            ("l0_compaction_trigger", self.l0_compaction_trigger as u64),
            ("level1_max_bytes", self.level1_max_bytes),
            ("target_file_size", self.target_file_size),
            (
                "max_immutable_memtables",
                self.max_immutable_memtables as u64,
            ),
        ];
        for (name, value) in sizes {
            if value == 0 {
                return bad(format!("{name} must be greater than zero"));
            }
        }
        if self.level_size_multiplier < 2 {
            return bad(format!(
                "level_size_multiplier must be at least 2, got {}",
                self.level_size_multiplier
            ));
        }
        if self.block_size > 16 << 20 {
            return bad(format!("block_size {} exceeds 16 MiB", self.block_size));
        }
        Ok(())
    }

    /// The policy that builds new tables' filters, or `None` for [`FilterKind::None`].
    pub(crate) fn filter_policy(&self) -> Result<Option<Arc<dyn FilterPolicy>>> {
        let policy: Arc<dyn FilterPolicy> = match self.filter {
            FilterKind::None => return Ok(None),
            FilterKind::CacheLocalBloom => Arc::new(
                BloomPolicy::cache_local(self.bits_per_key)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))?,
            ),
            FilterKind::StandardBloom => Arc::new(
                BloomPolicy::standard(self.bits_per_key)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))?,
            ),
        };
        Ok(Some(policy))
    }

    /// Every policy a table on disk may name, whatever this store writes now, so a
    /// table written under another setting is still read with its filter.
    pub(crate) fn known_policies(&self) -> Result<Vec<Arc<dyn FilterPolicy>>> {
        let bpk = self.bits_per_key;
        let to_err = |e: bloomkv_filter::FilterError| Error::InvalidArgument(e.to_string());
        Ok(vec![
            Arc::new(BloomPolicy::cache_local(bpk).map_err(to_err)?),
            Arc::new(BloomPolicy::standard(bpk).map_err(to_err)?),
        ])
    }

    /// Size budget of `level` (≥ 1).
    pub(crate) fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.level1_max_bytes;
        for _ in 1..level {
            bytes = bytes.saturating_mul(self.level_size_multiplier);
        }
        bytes
    }
}
