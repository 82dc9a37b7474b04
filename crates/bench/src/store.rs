//! bloomkv itself as a [`BenchStore`], under each filter setting: the flat shape's
//! store (compaction off, one table per `end_table`), or a store opened with any
//! options (the peers' fill and leveled rows run it with compaction on).

use std::path::PathBuf;

use bloomkv_kv::{Compression, Db, FilterKind, Options, TableInfo};

use super::{BenchError, BenchStore, FilterShape, LearnedFigures, StoreCounters, KEY_LEN};

/// Which filter the tables carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSetting {
    /// No filter block.
    None,
    /// Textbook Bloom: probes over the whole array.
    Standard,
    /// One 64-byte line per key.
    CacheLocal,
    /// Ribbon filter on every table.
    Ribbon,
}

impl FilterSetting {
    /// Every setting, baseline first.
    pub const ALL: [FilterSetting; 4] = [
        FilterSetting::None,
        FilterSetting::Standard,
        FilterSetting::CacheLocal,
        FilterSetting::Ribbon,
    ];

    /// Parses `--filters`: a comma-separated list of none, standard, cache-local,
    /// ribbon.
    pub fn parse_list(list: &str) -> Result<Vec<FilterSetting>, BenchError> {
        list.split(',')
            .map(|s| match s.trim() {
                "none" => Ok(FilterSetting::None),
                "standard" => Ok(FilterSetting::Standard),
                "cache-local" => Ok(FilterSetting::CacheLocal),
                "ribbon" => Ok(FilterSetting::Ribbon),
                other => Err(format!(
                    "unknown filter {other:?} (none, standard, cache-local, ribbon)"
                )
                .into()),
            })
            .collect()
    }

    /// Name in tables and reports.
    pub fn name(self) -> &'static str {
        match self {
            FilterSetting::None => "no filter",
            FilterSetting::Standard => "standard bloom",
            FilterSetting::CacheLocal => "cache-local bloom",
            FilterSetting::Ribbon => "ribbon",
        }
    }

    fn kind(self) -> FilterKind {
        match self {
            FilterSetting::None => FilterKind::None,
            FilterSetting::Standard => FilterKind::StandardBloom,
            FilterSetting::CacheLocal => FilterKind::CacheLocalBloom,
            FilterSetting::Ribbon => FilterKind::Ribbon,
        }
    }
}

/// A bloomkv store driven by the workload.
pub struct BloomkvStore {
    label: String,
    dir: PathBuf,
    options: Options,
    db: Option<Db>,
}

impl BloomkvStore {
    /// Opens a fresh store in `dir` with `setting` at `bits_per_key`.
    pub fn create(
        dir: PathBuf,
        setting: FilterSetting,
        bits_per_key: f64,
    ) -> Result<Self, BenchError> {
        Self::create_with_cache(
            dir,
            setting,
            bits_per_key,
            Options::default().block_cache_size,
        )
    }

    /// Like [`create`](Self::create), with a block cache of `block_cache_size` bytes
    /// (0: none).
    pub fn create_with_cache(
        dir: PathBuf,
        setting: FilterSetting,
        bits_per_key: f64,
        block_cache_size: usize,
    ) -> Result<Self, BenchError> {
        Self::create_with(dir, setting, bits_per_key, block_cache_size, "none", true)
    }

    /// Like [`create_with_cache`](Self::create_with_cache), with data blocks
    /// compressed by `compression` (`"none"` or `"lz4"`) and, uncompressed, page-aligned
    /// or not (`block_align`).
    pub fn create_with(
        dir: PathBuf,
        setting: FilterSetting,
        bits_per_key: f64,
        block_cache_size: usize,
        compression: &str,
        block_align: bool,
    ) -> Result<Self, BenchError> {
        let compression = match compression {
            "none" => Compression::None,
            "lz4" => Compression::Lz4,
            other => return Err(format!("unknown compression {other:?} (none, lz4)").into()),
        };
        let options = Options {
            compression,
            block_align,
            block_cache_size,
            filter: setting.kind(),
            bits_per_key,
            disable_auto_compaction: true,
            // Tables end where the workload says, never earlier.
            memtable_size: 1 << 30,
            max_immutable_memtables: 4,
            ..Options::default()
        };
        Self::with_options(setting.name(), dir, options)
    }

    /// Opens a fresh store in `dir` with `options` as they are (compaction on unless
    /// they say otherwise), labelled `label` in the rows.
    pub fn with_options(
        label: impl Into<String>,
        dir: PathBuf,
        options: Options,
    ) -> Result<Self, BenchError> {
        let db = Db::open(&dir, options.clone())?;
        Ok(BloomkvStore {
            label: label.into(),
            dir,
            options,
            db: Some(db),
        })
    }

    /// Gives the store `bytes` of learned negatives (`Options::learned_memory`) from
    /// its next reopen on (the workload reopens after loading).
    pub fn set_learned_memory(&mut self, bytes: usize) {
        self.options.learned_memory = bytes;
    }

    /// Gives the store `Options::metadata_budget` (partitioned index and filter), from
    /// now on: the store is reopened, so every table the workload then writes is
    /// partitioned.
    pub fn set_metadata_budget(&mut self, budget: Option<usize>) -> Result<(), BenchError> {
        if budget == self.options.metadata_budget {
            return Ok(());
        }
        self.options.metadata_budget = budget;
        if let Some(db) = self.db.take() {
            db.close()?;
        }
        self.db = Some(Db::open(&self.dir, self.options.clone())?);
        Ok(())
    }

    /// Flushes the memtable and waits until compaction is idle.
    pub fn settle(&mut self) -> Result<(), BenchError> {
        Ok(self.open_db()?.wait_for_compaction()?)
    }

    /// Tables per level, deepest last, empty levels left out.
    pub fn levels(&self) -> Vec<(usize, usize)> {
        levels_of(&self.db.as_ref().map(Db::table_infos).unwrap_or_default())
    }

    /// The open store (`None` only after a failed reopen).
    pub fn db(&self) -> Option<&Db> {
        self.db.as_ref()
    }

    fn open_db(&self) -> Result<&Db, BenchError> {
        self.db.as_ref().ok_or_else(|| "store is closed".into())
    }
}

impl BenchStore for BloomkvStore {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        Ok(self.open_db()?.put(key, value)?)
    }

    fn end_table(&mut self) -> Result<(), BenchError> {
        Ok(self.open_db()?.flush()?)
    }

    fn reopen(&mut self) -> Result<(), BenchError> {
        if let Some(db) = self.db.take() {
            db.close()?;
        }
        let db = Db::open(&self.dir, self.options.clone())?;
        // Open reads no table (each opens on first use); the peers open theirs at
        // open, so the reopen opens them all and lookups are measured alone.
        db.open_tables()?;
        self.db = Some(db);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
        Ok(self.open_db()?.get(key)?.is_some())
    }

    fn metadata_bytes(&self) -> Option<u64> {
        Some(self.db.as_ref()?.stats().metadata_bytes)
    }

    fn multi_get(&self, keys: &[[u8; KEY_LEN]]) -> Result<u64, BenchError> {
        let found = self.open_db()?.multi_get(keys)?;
        Ok(found.iter().flatten().count() as u64)
    }

    fn counters(&self) -> StoreCounters {
        let Some(db) = self.db.as_ref() else {
            return StoreCounters::default();
        };
        let s = db.stats();
        StoreCounters {
            table_probes: Some(s.table_probes),
            filter_negatives: Some(s.filter_negatives),
            filter_positives: Some(s.filter_positives),
            filter_true_positives: Some(s.filter_true_positives),
            data_block_reads: Some(s.data_block_reads),
            block_cache_hits: Some(s.block_cache_hits),
        }
    }

    fn filter_shape(&self) -> FilterShape {
        let Some(db) = self.db.as_ref() else {
            return FilterShape::default();
        };
        let infos = db.table_infos();
        let filters: Vec<_> = infos.iter().filter_map(|t| t.filter.as_ref()).collect();
        if filters.is_empty() {
            return FilterShape::default();
        }
        // Keys of every table (a table without a filter, say on the deepest level,
        // still holds keys), so bits per key is over the whole store; the rate is
        // averaged over the tables that have a filter.
        FilterShape {
            bits: filters.iter().map(|f| f.num_bits).sum(),
            keys: infos.iter().map(|t| t.entries).sum(),
            formula_fp: filters.iter().map(|f| f.estimated_fp_rate).sum::<f64>()
                / filters.len() as f64,
            probes: filters[0].num_probes,
        }
    }

    fn tables(&self) -> usize {
        self.db
            .as_ref()
            .map(|db| db.stats().num_tables())
            .unwrap_or(0)
    }

    fn drop_caches(&self) {
        if let Some(db) = self.db.as_ref() {
            db.drop_table_caches();
        }
    }

    fn uring_reads(&self) -> Option<u64> {
        Some(self.db.as_ref()?.stats().uring_reads)
    }

    fn learned(&self) -> Option<LearnedFigures> {
        let s = self.db.as_ref()?.stats();
        Some(LearnedFigures {
            bytes: s.learned_bytes,
            skips: s.learned_skips,
            entries: s.learned_entries,
        })
    }

    fn disk_bytes(&self) -> Option<u64> {
        let db = self.db.as_ref()?;
        Some(db.table_infos().iter().map(|t| t.file_size).sum())
    }
}

/// Tables per level as `[level, tables]`, deepest last, empty levels left out.
pub fn levels_of(infos: &[TableInfo]) -> Vec<(usize, usize)> {
    let mut levels: Vec<(usize, usize)> = Vec::new();
    for t in infos {
        match levels.iter_mut().find(|(l, _)| *l == t.level) {
            Some((_, n)) => *n += 1,
            None => levels.push((t.level, 1)),
        }
    }
    levels.sort_unstable();
    levels
}
