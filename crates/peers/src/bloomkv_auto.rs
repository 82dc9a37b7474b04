//! bloomkv with its own compaction on, as a [`BenchStore`](bloomkv_bench::BenchStore): the timed fill and the
//! leveled shape.
//!
//! The flat shape's bloomkv store (`bloomkv_bench::BloomkvStore`) holds compaction
//! off and cuts a table per `end_table`. Here the store runs as an application would
//! open it: `Options::default()` (compaction on, sync off, its 8 MiB block cache),
//! with the row's filter and cache, and for the leveled shape the small level
//! budgets every store gets there. `end_table` is not used by the fill; `settle`
//! flushes the memtable and waits until compaction is idle.

use std::path::PathBuf;

use bloomkv::kv::{FilterAllocation, FilterKind, Options};
use bloomkv_bench::{BenchError, BloomkvStore};

use crate::{CacheSize, Layout};

/// The filter and cache of a store [`open_auto`] opens.
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

/// Opens a fresh bloomkv store with compaction on in `dir` — the benchmark's own
/// [`BloomkvStore`], with these options — set up as `setup` says, with the budgets
/// of `layout` (`Defaults` or `SmallLevels`; `Flat` is `BloomkvStore::create`).
pub fn open_auto(
    label: impl Into<String>,
    dir: PathBuf,
    setup: BloomkvSetup,
    layout: Layout,
) -> Result<BloomkvStore, BenchError> {
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
            return Err("the flat shape's bloomkv store is bloomkv_bench::BloomkvStore".into())
        }
        Layout::Defaults => {}
        Layout::SmallLevels => {
            options.memtable_size = crate::SMALL_MEMTABLE;
            options.target_file_size = crate::SMALL_TABLE;
            options.level1_max_bytes = crate::SMALL_LEVEL1;
            // Fixed level budgets, as the leveled table in docs/BENCHMARKS.md was measured.
            options.dynamic_level_bytes = false;
        }
    }
    BloomkvStore::with_options(label, dir, options)
}
