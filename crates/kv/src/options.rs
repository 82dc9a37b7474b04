//! How a store is configured, with defaults that suit a laptop-sized workload.
//!
//! Every field has a documented default (see [`Options::default`]); [`Options::validate`]
//! runs at `Db::open` and turns a nonsensical setting into `Error::InvalidArgument`.
//!
//! The choices a user makes here are defined here too ([`FilterKind`],
//! [`FilterAllocation`], [`WalRecovery`]), so the modules that act on them import them
//! from below; the table-format settings ([`Compression`], [`RangeFilterOptions`]) live
//! with the table in `sstable/`, and the store's limits in `types.rs`.

use std::fmt;
use std::sync::Arc;

use bloomkv_filter::{
    BloomPolicy, FilterError, FilterPolicy, KeyHash, RangeFilterBuilder, RibbonPolicy,
    MAX_BITS_PER_KEY, MIN_BITS_PER_KEY,
};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem};
use crate::prefix::PrefixExtractor;
use crate::sstable::{Compression, RangeFilterOptions};

/// Which filter each new table carries.
///
/// Whatever builds new tables, a table's recorded policy name decides how it is read:
/// the built-in policies and [`Options::extra_filter_policies`] are all consulted, so a
/// store whose setting changed still reads its older tables with their filters.
#[derive(Clone, Default)]
pub enum FilterKind {
    /// Bloom filter with all of a key's probes inside one 64-byte cache line
    /// (RocksDB's FastLocalBloom idea): one cache miss per table per lookup.
    #[default]
    CacheLocalBloom,
    /// Textbook Bloom filter: probes spread over the whole bit array.
    StandardBloom,
    /// No filter: every table whose key range covers a key is read.
    None,
    /// Ribbon filter (Dillinger & Walzer): about a fifth of the cache-local Bloom's
    /// false positives at the same bits per key, for a slower build. Levels above
    /// [`Options::bloom_before_level`] get the cache-local Bloom instead.
    Ribbon,
    /// A user's own [`FilterPolicy`] builds new tables' filters; its
    /// [`name`](FilterPolicy::name) is recorded in each table and opens them again.
    /// It must honour the hash contract of [`bloomkv_filter::FilterBuilder`]: the
    /// store probes with `may_contain_hash(KeyHash::of(key))`.
    Custom(Arc<dyn FilterPolicy>),
}

impl fmt::Debug for FilterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterKind::CacheLocalBloom => f.write_str("CacheLocalBloom"),
            FilterKind::StandardBloom => f.write_str("StandardBloom"),
            FilterKind::None => f.write_str("None"),
            FilterKind::Ribbon => f.write_str("Ribbon"),
            FilterKind::Custom(policy) => write!(f, "Custom({})", policy.name()),
        }
    }
}

impl PartialEq for FilterKind {
    /// Built-in kinds by variant; custom policies by the name they record in tables.
    fn eq(&self, other: &FilterKind) -> bool {
        match (self, other) {
            (FilterKind::Custom(a), FilterKind::Custom(b)) => a.name() == b.name(),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// How filter memory is split across levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterAllocation {
    /// `bits_per_key` on every table of every level (what LevelDB, RocksDB and fjall
    /// do).
    #[default]
    Uniform,
    /// The same total filter memory as `Uniform`, split so each level's false-positive
    /// rate is proportional to its size (Monkey): fewer wasted reads per absent get.
    /// A level gets at most 30 bits per key; above 30 bits per key (where false
    /// positives are already below 1e-5) the plan is `Uniform`'s.
    Monkey,
    /// Monkey's split, weighted by where absent lookups were measured to go instead of
    /// by a model: each level's probes per lookup, counted on the read path, decayed
    /// and kept across reopens in the store's `PROBES` file (see `probe_stats.rs`).
    /// With too few samples it plans as `Monkey`. A small share of the same memory
    /// goes to learned negatives (`learned.rs`), more of it when the measured false
    /// positives repeat (skewed lookups), so filters and learned negatives together
    /// spend what `Uniform`'s filters would. Bits follow lookups only as tables are
    /// written: a table keeps the filter it was built with until compaction rewrites
    /// it. See docs/FILTERS.md.
    Adaptive,
}

/// What recovery does with WAL bytes that are not a valid record (`Options::wal_recovery`).
///
/// A record is valid when its header and payload checksums verify, its payload
/// decodes as a write batch, and its sequence numbers continue above everything
/// recovered before it. The modes differ in what they do at the first invalid one:
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum WalRecovery {
    /// The default. In the newest log, an invalid record after which no valid record
    /// can be found (the scan tries every later offset) is a torn tail: a crash cut
    /// the last write short, or the file system extended the file without its data,
    /// or a reused file still holds an older log's bytes. It is dropped, reported and
    /// counted, and never written after. An invalid record with a valid record after
    /// it, or any invalid record in a log that a newer log follows (older logs were
    /// synced before the newer one started), is [`Error::Corruption`] naming the file
    /// and offset: dropping it would lose acknowledged writes. So is an invalid
    /// record whose log the scan stopped searching ([`crate::wal::scan_wal`]: a log
    /// crafted with more verifying headers than damage leaves), since whether valid
    /// records follow is then unknown. One crash without `sync_writes` can look like
    /// such damage: the kernel may write a log's unsynced pages back out of order, so
    /// a power loss can leave an earlier page unwritten (zeros) with valid records
    /// after it. This mode refuses that log too, naming it; `PointInTime` opens it,
    /// keeping what precedes the hole.
    #[default]
    TolerateCorruptTail,
    /// Stop at the first invalid record in any log: keep every record before it,
    /// drop the rest of that log and every newer log, and report what was dropped.
    /// The store comes back as it was at one moment in time, possibly older than the
    /// last acknowledged write. New writes number above every record it dropped, so a
    /// dropped log that comes back (for `repair`) never outranks them. RocksDB's
    /// default.
    PointInTime,
    /// Any byte of any log that is not part of a valid record is
    /// [`Error::Corruption`], a torn tail included. For stores that must never lose an
    /// acknowledged write silently, written with `sync_writes` (a crash mid-append
    /// leaves a tail this mode refuses; `repair` or another mode then opens the store).
    AbsoluteConsistency,
    /// Salvage: skip every invalid stretch, keep every valid record in every log, and
    /// report how many stretches and bytes were skipped. Later writes may then be
    /// present while an earlier one is missing. LevelDB's default behaviour.
    SkipCorrupted,
}

impl fmt::Display for WalRecovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl WalRecovery {
    /// Every mode, the default first.
    pub const ALL: [WalRecovery; 4] = [
        WalRecovery::TolerateCorruptTail,
        WalRecovery::PointInTime,
        WalRecovery::AbsoluteConsistency,
        WalRecovery::SkipCorrupted,
    ];
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
    /// A memtable this large (approximate bytes) is frozen and flushed. Default 64 MiB
    /// (RocksDB's `write_buffer_size` and fjall's `max_memtable_size`): a large memtable
    /// absorbs many writes before the first compaction. A fill of 1M keys takes 0.9×
    /// fjall's time with it, 1.03× with LevelDB-like sizes (4 MiB memtable, 2 MiB tables,
    /// an 8 MiB level 1; LevelDB's own level 1 is 10 MiB, `MaxBytesForLevel` in
    /// `db/version_set.cc`) and 1.34× with a 4 MiB memtable under the default level sizing
    /// (`crates/peers/examples/fill_settings.rs`). It costs memory: up to
    /// `(1 + max_immutable_memtables) × memtable_size` bytes of memtables, 128 MiB at
    /// the defaults, and as much WAL to replay after a crash.
    pub memtable_size: usize,
    /// Target size of a data block before compression. Default 4096: one page, so an
    /// aligned block is one read of one page (see `block_align`).
    ///
    /// A smaller block makes a get that reads its block cheaper, since it copies,
    /// checks and (compressed) decodes fewer bytes, at the price of a larger index and
    /// more reads per scan. Measured with `cargo run --release --example
    /// compression_cost -- 500000 200000 7 0 [block size]` (no block cache, runs at
    /// the two sizes alternated twice): a present get from raw tables took 1,331–1,420
    /// ns with 2048-byte blocks against 1,500–1,587 ns with 4096-byte ones, for 3.4%
    /// more bytes on disk. The share compression adds does not shrink with the block:
    /// at 2048 bytes an LZ4 get cost 1.09–1.19× a raw one (five runs, median 1.14×),
    /// at 4096 bytes 1.07–1.21×.
    pub block_size: usize,
    /// Lays uncompressed data blocks out against 4 KiB pages (RocksDB's `block_align`;
    /// table format version 5): a block, trailer included, holds at most `block_size`
    /// bytes unless one entry alone is larger, and zero padding starts it on the next
    /// page where it would otherwise cross one more page boundary. With the default
    /// `block_size` every data block then lies in one page, so a read that misses the
    /// block cache copies from one page of the OS's file cache instead of two and, when
    /// the page is not cached, fetches 4 KiB from the device instead of 8.
    ///
    /// Default `true`. Measured over the benchmark's 1M-key store with a warm page
    /// cache, a present get at the default 8 MiB block cache took 12–19% less time and
    /// an absent one 5–11% less; tables take about 2.5% more bytes. The price is paid
    /// on a cold start of a store that fits in memory: there the second page an
    /// unaligned read fetches is often one a later read needs, so the benchmark's cold
    /// phases ran 30–40% slower aligned (fewer, larger device reads unaligned). Numbers
    /// and commands: `docs/notes/2026-12-page-alignment.md`. Ignored with compression, whose blocks
    /// vary in size. Tables written either way keep opening; builds that predate
    /// format version 5 cannot open aligned tables.
    pub block_align: bool,
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
    /// With `dynamic_level_bytes`, the smallest target the base level may have.
    /// Default 256 MiB (RocksDB's `max_bytes_for_level_base`): four memtables' worth.
    pub level1_max_bytes: u64,
    /// Growth factor between levels. Default 10.
    pub level_size_multiplier: u64,
    /// Size the levels from the bottom up (RocksDB's
    /// `level_compaction_dynamic_level_bytes`): the deepest level (L6) holds what it
    /// holds, each level above gets `1/level_size_multiplier` of the one below, and
    /// L0 compacts into the highest level whose target is at least
    /// `level1_max_bytes` (levels above it stay empty). Every pair of adjacent levels
    /// is then ten times apart however much data there is, which keeps the tree's
    /// shape, and the filter plan made for it, stable as the store grows. Default
    /// `true`, as in RocksDB since 8.4; with `false`, level `n` has the fixed budget
    /// `level1_max_bytes × multiplier^(n-1)` and the deepest level is only as full as
    /// the data makes it. A store written either way opens the other way (tables above
    /// the base level are moved down by compaction).
    pub dynamic_level_bytes: bool,
    /// Compaction splits its output into tables of about this size. Default 64 MiB
    /// (RocksDB's `target_file_size_base`, fjall's table target size).
    pub target_file_size: u64,
    /// Frozen memtables waiting for flush before writers stall. Default 1 (RocksDB's
    /// `max_write_buffer_number` of 2 counts the live one too): a flush of 64 MiB
    /// takes well under the time it takes to write the next 64 MiB.
    pub max_immutable_memtables: usize,
    /// L0 tables at which each write first yields up to 1 ms to compaction, spreading
    /// a stall over many writes. Default 20 (RocksDB's; LevelDB uses 8).
    /// Ignored while `disable_auto_compaction` is set. Must be at least
    /// `l0_compaction_trigger`.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 tables at which a write that needs a fresh memtable waits until compaction
    /// lowers L0. Default 36 (RocksDB's; LevelDB 12). Ignored while
    /// `disable_auto_compaction` is set. Must be at least the slowdown trigger (and so
    /// at least `l0_compaction_trigger`: below it no compaction would ever be due to
    /// free the write).
    pub level0_stop_writes_trigger: usize,
    /// Table files kept open at once; tables beyond it are reopened on demand (their
    /// index and filter stay in memory, so a filter negative still costs no I/O).
    /// Default 1000 (LevelDB's). Minimum 1.
    pub max_open_files: usize,
    /// Create the directory if it does not hold a store. Default `true`.
    pub create_if_missing: bool,
    /// The file layer every file operation goes through. Default: the operating system's.
    pub file_system: Arc<dyn FileSystem>,
    /// More policies to read existing tables with, matched by the name each table
    /// recorded (the built-in Bloom and Ribbon policies are always known). A table whose policy is
    /// in neither list is read without its filter and counted in
    /// `DbStats::filter_unknown_policy`. Default empty.
    pub extra_filter_policies: Vec<Arc<dyn FilterPolicy>>,
    /// How filter memory is split across levels: [`FilterAllocation::Uniform`]
    /// (default: `bits_per_key` everywhere), [`FilterAllocation::Monkey`] (the same
    /// total, more bits on small upper levels; see `filter_plan`) or
    /// [`FilterAllocation::Adaptive`] (the same total, split by measured lookups).
    pub filter_allocation: FilterAllocation,
    /// Build no filter for the deepest non-empty level (RocksDB's name): saves most of
    /// the filter memory; lookups for absent keys then read one block there. With
    /// [`FilterAllocation::Monkey`] the levels that keep a filter share what Uniform
    /// would spend on them, not the deepest level's memory too. Default `false`.
    pub optimize_filters_for_hits: bool,
    /// With [`FilterKind::Ribbon`], levels below this number (L0 .. L(n-1)) get the
    /// cache-local Bloom instead (RocksDB's name and meaning): their tables are
    /// short-lived flush and early-compaction output, where a cheap build matters more
    /// than memory. Default 0: Ribbon on every level, as RocksDB's default.
    pub bloom_before_level: usize,
    /// What open does with WAL bytes that are not a valid record (see [`WalRecovery`]
    /// for exactly what each mode keeps and drops). Default
    /// [`WalRecovery::TolerateCorruptTail`].
    pub wal_recovery: WalRecovery,
    /// Adds each key's prefix to new tables' filters (whole keys stay in), so
    /// [`Db::scan_prefix`](crate::Db::scan_prefix), and a scan whose bounds share a
    /// prefix, skip tables holding no key with it. [`FixedPrefix::new(n)`](crate::FixedPrefix)
    /// ships; keys shorter than the prefix go in whole only (see `prefix.rs`). Tables
    /// record the extractor's name; one written under another is scanned without its
    /// prefix filter. Default `None`.
    pub prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
    /// Open without writing anything (RocksDB's `OpenForReadOnly`): no lock is taken
    /// and no file is created, changed or deleted; the logs are replayed into memory
    /// only; writes, flushes and compactions return `Error::ReadOnly`. Works on a
    /// read-only mount or without write permission, and beside one writer and any
    /// number of other read-only openers: it reads the store as it was when it opened
    /// (a table the writer deletes later stays readable while its file is open, up to
    /// `max_open_files`). `create_if_missing` is ignored. Default `false`.
    pub read_only: bool,
    /// Bytes of decoded data blocks kept in memory, shared by all tables (see
    /// `sstable/block_cache.rs`); 0 = no cache, every data block a get needs is read
    /// from its file. Default 8 MiB: the setting the benchmarks give the peers, which
    /// holds a hot set of about 2,000 4-KiB blocks. Not counted in it: the cache's
    /// admission table (8 bytes per 4 KiB of capacity, at most 8 MiB) and, per thread
    /// that reads compressed blocks, one buffer of stored bytes (at most 64 KiB).
    pub block_cache_size: usize,
    /// How new tables store their data blocks: [`Compression::None`] (the default),
    /// [`Compression::Lz4`] or [`Compression::Zstd`], per block, recorded in each block's trailer. Tables keep
    /// opening whatever the setting: every block says how it was written.
    pub compression: Compression,
    /// How tables written to the bottommost level store their data blocks, where they
    /// differ from [`compression`](Self::compression) (RocksDB's
    /// `bottommost_compression`): most of a store's bytes live there and are rewritten
    /// least often, so a slower, smaller form such as [`Compression::Zstd`] pays off
    /// there while the upper levels keep a fast one. A table is bottommost when a
    /// compaction writes it to a level below which no level holds a table (flushes to
    /// level 0 never are). Default `None`: every level uses `compression`.
    pub bottommost_compression: Option<Compression>,
    /// Builds a range filter beside the point filter for every new table, so a scan
    /// with both bounds set skips a table that holds no key in its range (see
    /// [`RangeFilterOptions`]). Tables without one are scanned as before. Default
    /// `None`: no range filters.
    pub range_filter: Option<RangeFilterOptions>,
    /// Bytes of memory for learned negatives: false positives the filters gave, kept
    /// so the same absent lookup skips that table's read next time — exactly (a
    /// present key is never skipped; see `learned.rs` and docs/FILTERS.md). A fixed
    /// array of 8-byte entries (8.5 with their use counts) allocated at open, the keys asked most often kept;
    /// in memory only (a reopen learns again). Default 0: nothing is learned (but
    /// see [`FilterAllocation::Adaptive`], which gives learned negatives a share of
    /// the filters' memory when this is 0).
    pub learned_memory: usize,
    /// A cap on the bytes of all live tables' filters (what
    /// `DbStats::filter_memory_bytes` counts once every table is open; under
    /// [`FilterAllocation::Adaptive`] its learned negatives count too). Each new
    /// table's filter is planned for the whole tree within the cap, each level getting
    /// a share (fewer bits where lookups are rarest: the deepest level first). Tables
    /// already written under earlier plans are brought back to theirs: when a new
    /// filter does not fit, filters of levels over their share are released from
    /// memory (that table then reads a data block per lookup; the `RELEASED` file keeps
    /// them released across reopens), and when compaction is idle, tables with far more
    /// bits than their level's plan, then tables without a filter, are rewritten alone
    /// with the plan's filter (docs/FILTERS.md). Filters never answer wrongly for it:
    /// fewer bits or none only mean more reads. Default `None`: no cap.
    pub filter_memory_budget: Option<usize>,
    /// A cap on the bytes of index and filter a store holds in memory (what
    /// `DbStats::metadata_bytes` counts). `Some(bytes)`: new tables are written with
    /// their index and filter cut into partitions (table format version 8, about
    /// `bytes / 16` each, 64 B to 4 KiB); each open table keeps only a small top level
    /// and a coarse (Ribbon) filter of 5 bits per key in memory, and the partitions a lookup
    /// needs come and go through a cache holding at most `bytes`, the top levels
    /// counted in it (filter partitions kept before index partitions). A partition that
    /// cannot be read is read around, never answered "absent" (counted in
    /// `metadata_partition_failures`). Tables written without it keep opening, whole.
    /// Default `None`: every table's index and filter stay in memory whole, as before.
    pub metadata_budget: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bits_per_key: 10.0,
            filter: FilterKind::CacheLocalBloom,
            memtable_size: 64 << 20,
            block_size: 4096,
            block_align: true,
            restart_interval: 16,
            sync_writes: false,
            disable_auto_compaction: false,
            l0_compaction_trigger: 4,
            level1_max_bytes: 256 << 20,
            level_size_multiplier: 10,
            dynamic_level_bytes: true,
            target_file_size: 64 << 20,
            max_immutable_memtables: 1,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_open_files: 1000,
            create_if_missing: true,
            file_system: Arc::new(OsFileSystem),
            extra_filter_policies: Vec::new(),
            filter_allocation: FilterAllocation::Uniform,
            optimize_filters_for_hits: false,
            bloom_before_level: 0,
            wal_recovery: WalRecovery::TolerateCorruptTail,
            prefix_extractor: None,
            read_only: false,
            block_cache_size: 8 << 20,
            compression: Compression::None,
            bottommost_compression: None,
            range_filter: None,
            learned_memory: 0,
            filter_memory_budget: None,
            metadata_budget: None,
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
            .field("block_align", &self.block_align)
            .field("restart_interval", &self.restart_interval)
            .field("sync_writes", &self.sync_writes)
            .field("disable_auto_compaction", &self.disable_auto_compaction)
            .field("l0_compaction_trigger", &self.l0_compaction_trigger)
            .field("level1_max_bytes", &self.level1_max_bytes)
            .field("level_size_multiplier", &self.level_size_multiplier)
            .field("dynamic_level_bytes", &self.dynamic_level_bytes)
            .field("target_file_size", &self.target_file_size)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field(
                "level0_slowdown_writes_trigger",
                &self.level0_slowdown_writes_trigger,
            )
            .field(
                "level0_stop_writes_trigger",
                &self.level0_stop_writes_trigger,
            )
            .field("max_open_files", &self.max_open_files)
            .field("create_if_missing", &self.create_if_missing)
            .field("file_system", &self.file_system)
            .field(
                "extra_filter_policies",
                &self
                    .extra_filter_policies
                    .iter()
                    .map(|p| p.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("wal_recovery", &self.wal_recovery)
            .field("filter_allocation", &self.filter_allocation)
            .field("optimize_filters_for_hits", &self.optimize_filters_for_hits)
            .field("bloom_before_level", &self.bloom_before_level)
            .field(
                "prefix_extractor",
                &self.prefix_extractor.as_ref().map(|p| p.name().to_string()),
            )
            .field("read_only", &self.read_only)
            .field("block_cache_size", &self.block_cache_size)
            .field("compression", &self.compression)
            .field("bottommost_compression", &self.bottommost_compression)
            .field("range_filter", &self.range_filter)
            .field("learned_memory", &self.learned_memory)
            .field("filter_memory_budget", &self.filter_memory_budget)
            .field("metadata_budget", &self.metadata_budget)
            .finish()
    }
}

impl Options {
    /// The bytes new tables cut their index and filter partitions at: `None` (whole
    /// blocks) without a `metadata_budget`.
    pub(crate) fn metadata_partition_bytes(&self) -> Option<usize> {
        self.metadata_budget
            .map(|b| (b / 16).clamp(64, crate::sstable::DEFAULT_PARTITION_BYTES))
    }

    /// Checks every field; the first bad one is reported as `InvalidArgument`, with one
    /// message. Everything `Db::open` would refuse about the options themselves is
    /// refused here (the filter policies are built and a custom one's hash contract is
    /// checked), so a program can check its configuration before it opens anything.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        for c in std::iter::once(self.compression).chain(self.bottommost_compression) {
            if let Compression::Zstd { level } = c {
                if !crate::sstable::ZSTD_LEVELS.contains(&level) {
                    return bad(format!(
                        "a ZSTD level must be in {}..={}, got {level}",
                        crate::sstable::ZSTD_LEVELS.start(),
                        crate::sstable::ZSTD_LEVELS.end()
                    ));
                }
            }
        }
        // Checked whatever the filter kind: tables written under another setting are
        // still read with a policy of this many bits per key.
        if !(MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&self.bits_per_key) {
            return bad(format!(
                "bits_per_key must be a number in {MIN_BITS_PER_KEY}..={MAX_BITS_PER_KEY}, got {}",
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
            (
                "level0_slowdown_writes_trigger",
                self.level0_slowdown_writes_trigger as u64,
            ),
            (
                "level0_stop_writes_trigger",
                self.level0_stop_writes_trigger as u64,
            ),
            ("max_open_files", self.max_open_files as u64),
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
        // Below the compaction trigger a stop would wait for a compaction that is never
        // due (L0's score stays under 1): the write would hang. A slowdown there would
        // slow writes while nothing works to lower L0. RocksDB raises both silently;
        // a refusal says what is wrong.
        if self.level0_stop_writes_trigger < self.l0_compaction_trigger {
            return bad(format!(
                "level0_stop_writes_trigger ({}) must be at least l0_compaction_trigger ({}): \
                 below it writes would wait for a compaction that is never due",
                self.level0_stop_writes_trigger, self.l0_compaction_trigger
            ));
        }
        if self.level0_slowdown_writes_trigger < self.l0_compaction_trigger {
            return bad(format!(
                "level0_slowdown_writes_trigger ({}) must be at least l0_compaction_trigger \
                 ({}): below it writes would be slowed while no compaction is due",
                self.level0_slowdown_writes_trigger, self.l0_compaction_trigger
            ));
        }
        if self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger {
            return bad(format!(
                "level0_stop_writes_trigger ({}) must be at least level0_slowdown_writes_trigger ({})",
                self.level0_stop_writes_trigger, self.level0_slowdown_writes_trigger
            ));
        }
        if self.block_size > 16 << 20 {
            return bad(format!("block_size {} exceeds 16 MiB", self.block_size));
        }
        if let Some(range) = &self.range_filter {
            RangeFilterBuilder::new(range.bits_per_key, range.max_range_len)
                .map_err(filter_error)?;
        }
        // A table written without an extractor or a filter records an empty name: an
        // extractor or policy named "" would pass for one that table was built with
        // (its filter, which holds whole keys only, would be asked about prefixes and
        // rule out tables that hold them).
        if self
            .prefix_extractor
            .as_ref()
            .is_some_and(|x| x.name().is_empty())
        {
            return bad("prefix_extractor has an empty name; give it one".into());
        }
        let custom = match &self.filter {
            FilterKind::Custom(policy) => Some(policy),
            _ => None,
        };
        if custom
            .into_iter()
            .chain(&self.extra_filter_policies)
            .any(|p| p.name().is_empty())
        {
            return bad("a filter policy has an empty name; give it one".into());
        }
        self.filter_policy()?;
        self.known_policies()?;
        Ok(())
    }

    /// The policy that builds new tables' filters, or `None` for [`FilterKind::None`].
    pub(crate) fn filter_policy(&self) -> Result<Option<Arc<dyn FilterPolicy>>> {
        let policy: Arc<dyn FilterPolicy> = match &self.filter {
            FilterKind::None => return Ok(None),
            FilterKind::Custom(policy) => {
                check_hash_contract(policy.as_ref())?;
                Arc::clone(policy)
            }
            FilterKind::CacheLocalBloom => {
                Arc::new(BloomPolicy::cache_local(self.bits_per_key).map_err(filter_error)?)
            }
            FilterKind::StandardBloom => {
                Arc::new(BloomPolicy::standard(self.bits_per_key).map_err(filter_error)?)
            }
            FilterKind::Ribbon => {
                Arc::new(RibbonPolicy::new(self.bits_per_key).map_err(filter_error)?)
            }
        };
        Ok(Some(policy))
    }

    /// Every policy a table on disk may name, whatever this store writes now, so a
    /// table written under another setting is still read with its filter.
    pub(crate) fn known_policies(&self) -> Result<Vec<Arc<dyn FilterPolicy>>> {
        let bpk = self.bits_per_key;
        let to_err = filter_error;
        let mut policies: Vec<Arc<dyn FilterPolicy>> = Vec::new();
        // The policy writing new tables first, so its name finds it before a
        // same-named registered one.
        if let FilterKind::Custom(policy) = &self.filter {
            policies.push(Arc::clone(policy));
        }
        policies.extend(self.extra_filter_policies.iter().cloned());
        policies.push(Arc::new(BloomPolicy::cache_local(bpk).map_err(to_err)?));
        policies.push(Arc::new(BloomPolicy::standard(bpk).map_err(to_err)?));
        policies.push(Arc::new(RibbonPolicy::new(bpk).map_err(to_err)?));
        Ok(policies)
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

/// A filter's refusal as the store's: one "invalid argument: ..." prefix, not two.
fn filter_error(e: FilterError) -> Error {
    match e {
        FilterError::InvalidArgument(m) => Error::InvalidArgument(m),
        other => Error::InvalidArgument(other.to_string()),
    }
}

/// Checks a user's policy against the store's hash contract before any table is
/// written with it: the table builder adds keys with `add_key` and prefixes with
/// `add_hash(KeyHash::of(prefix))`, lookups probe with `may_contain_hash(KeyHash::of(key))`,
/// so all three must agree on the hash. A builder that hashes differently would answer
/// "absent" for keys or prefixes a table holds (false negatives: lost data, or scans
/// that skip tables holding matches); it is refused at open with `InvalidArgument`.
/// Both doors are checked, each with a builder of its own.
fn check_hash_contract(policy: &dyn FilterPolicy) -> Result<()> {
    check_hash_door(policy, "add_key", |b, key| b.add_key(key))?;
    check_hash_door(policy, "add_hash", |b, key| b.add_hash(KeyHash::of(key)))
}

/// Adds 200 keys through `add` and checks that the policy's reader says "maybe" to
/// each one's `KeyHash::of`.
fn check_hash_door(
    policy: &dyn FilterPolicy,
    door: &str,
    add: impl Fn(&mut dyn bloomkv_filter::FilterBuilder, &[u8]),
) -> Result<()> {
    let keys: Vec<Vec<u8>> = (0u32..200)
        .map(|i| {
            let len = (i as usize * 7) % 40;
            (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
        })
        .collect();
    let mut builder = policy.new_builder();
    for key in &keys {
        add(builder.as_mut(), key);
    }
    let block = builder.finish();
    let reader = policy.open_reader(&block).map_err(|e| {
        Error::InvalidArgument(format!(
            "filter policy {} cannot open a block it built: {e}",
            policy.name()
        ))
    })?;
    for key in &keys {
        if !reader.may_contain_hash(KeyHash::of(key)) || !reader.may_contain(key) {
            return Err(Error::InvalidArgument(format!(
                "filter policy {} breaks the hash contract: a key added with {door} is \
                 absent for may_contain_hash(KeyHash::of(key)); the store would lose it",
                policy.name()
            )));
        }
    }
    Ok(())
}
