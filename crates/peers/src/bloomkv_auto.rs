//! bloomkv with its own compaction on, as a [`BenchStore`]: the timed fill and the
//! leveled shape.
//!
//! The flat shape's bloomkv store (`bloomkv::bench::BloomkvStore`) holds compaction
//! off and cuts a table per `end_table`. Here the store runs as an application would
//! open it: `Options::default()` (compaction on, sync off, its 8 MiB block cache),
//! with the row's filter and cache, and for the leveled shape the small level
//! budgets every store gets there. `end_table` is not used by the fill; `settle`
//! flushes the memtable and waits until compaction is idle.

use std::path::PathBuf;

use bloomkv::bench::{BenchError, BenchStore, FilterShape, StoreCounters};
use bloomkv::kv::{Db, FilterAllocation, FilterKind, Options};

use crate::{CacheSize, Layout};

/// The filter and cache of a [`BloomkvAuto`].
#[derive(Debug, Clone)]
pub struct BloomkvSetup {
    /// The filter every table carries.
    pub filter: FilterKind,
    /// Its bits per key (the average, under Monkey).
    pub bits_per_key: f64,
    /// How filter memory is split between levels.
    pub allocation: FilterAllocation,
    /// No filter on the deepest level (`optimize_filters_for_hits`).
    pub no_last_level_filter: bool,
    /// The block cache.
    pub cache: CacheSize,
}

/// A bloomkv store with compaction on.
pub struct BloomkvAuto {
    label: String,
    dir: PathBuf,
    options: Options,
    db: Option<Db>,
}

impl BloomkvAuto {
    /// Opens a fresh store in `dir` set up as `setup` says, with the budgets of
    /// `layout` (`Defaults` or `SmallLevels`; `Flat` is the benchmark's own
    /// `BloomkvStore`).
    pub fn create(
        label: impl Into<String>,
        dir: PathBuf,
        setup: BloomkvSetup,
        layout: Layout,
    ) -> Result<Self, BenchError> {
        let defaults = Options::default();
        let mut options = Options {
            filter: setup.filter,
            bits_per_key: setup.bits_per_key,
            filter_allocation: setup.allocation,
            optimize_filters_for_hits: setup.no_last_level_filter,
            block_cache_size: setup.cache.bytes(defaults.block_cache_size),
            ..defaults
        };
        match layout {
            Layout::Flat => {
                return Err("the flat shape's bloomkv store is bloomkv::bench::BloomkvStore".into())
            }
            Layout::Defaults => {}
            Layout::SmallLevels => {
                options.memtable_size = crate::SMALL_MEMTABLE;
                options.target_file_size = crate::SMALL_TABLE;
                options.level1_max_bytes = crate::SMALL_LEVEL1;
            }
        }
        let db = Db::open(&dir, options.clone())?;
        Ok(BloomkvAuto {
            label: label.into(),
            dir,
            options,
            db: Some(db),
        })
    }

    fn db(&self) -> Result<&Db, BenchError> {
        self.db.as_ref().ok_or_else(|| "store is closed".into())
    }

    /// Flushes the memtable and waits until compaction is idle.
    pub fn settle(&mut self) -> Result<(), BenchError> {
        let db = self.db()?;
        db.flush()?;
        db.wait_for_compaction()?;
        Ok(())
    }

    /// Tables per level, deepest last, empty levels left out.
    pub fn levels(&self) -> Vec<(usize, usize)> {
        let mut levels: Vec<(usize, usize)> = Vec::new();
        for t in self
            .db
            .as_ref()
            .map(|db| db.table_infos())
            .unwrap_or_default()
        {
            match levels.iter_mut().find(|(l, _)| *l == t.level) {
                Some((_, n)) => *n += 1,
                None => levels.push((t.level, 1)),
            }
        }
        levels.sort_unstable();
        levels
    }
}

impl BenchStore for BloomkvAuto {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        Ok(self.db()?.put(key, value)?)
    }

    fn end_table(&mut self) -> Result<(), BenchError> {
        Ok(self.db()?.flush()?)
    }

    fn reopen(&mut self) -> Result<(), BenchError> {
        if let Some(db) = self.db.take() {
            db.close()?;
        }
        self.db = Some(Db::open(&self.dir, self.options.clone())?);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
        Ok(self.db()?.get(key)?.is_some())
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
        // Keys of every table (a table without a filter still holds keys), so that
        // bits per key is over the whole store; the rate is averaged over tables.
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
}
