//! fjall 3 as a [`BenchStore`]: the peer written in Rust.
//!
//! Set up so its rows compare with bloomkv's:
//!
//! - one keyspace; `end_table` seals the memtable and waits until it is flushed into a
//!   table of its own (a memtable never fills up on its own: its limit is 1 GiB);
//! - compaction held off: leveled compaction with its L0 trigger at 255 tables, so no
//!   two tables are ever merged. fjall still *moves* the very first table to the last
//!   level (a metadata change: the file, its filter and its key range stay as they
//!   are), so lookups face exactly `--tables` overlapping tables, one of them in L6;
//! - Bloom filters at `bits_per_key` on EVERY level (fjall 3's default builds L0
//!   filters for a 0.01% false-positive rate, about 19 bits/key), filter and index
//!   blocks pinned in memory on every level, as bloomkv keeps them;
//! - data blocks of 4 KiB, uncompressed (bloomkv does not compress either), an 8 MiB
//!   block cache.
//!
//! fjall counts its read path when built with its `metrics` feature (on here):
//! filter negatives are its `io_skipped_by_filter`, and table reads are the blocks it
//! loaded from a file (`block_load_io_count`: data, index and filter blocks). It does
//! not count table probes or filter positives, so those columns stay empty.

use std::path::PathBuf;
use std::sync::Arc;

use bloomkv::bench::{BenchError, BenchStore, FilterShape, StoreCounters};
use bloomkv::sizing;
use fjall::compaction::Leveled;
use fjall::config::{
    BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry, PinningPolicy,
};
use fjall::{Database, Keyspace, KeyspaceCreateOptions};

use crate::page_cache;

/// The one keyspace the workload writes to.
const KEYSPACE: &str = "bench";

/// fjall stalls writes once L0 holds 20 tables and halts them at 30, waiting for a
/// compaction that is held off here: more tables than this are refused.
pub const MAX_TABLES: u32 = 20;

/// fjall's Bloom construction at `bits_per_key` (lsm-tree's `with_bpk`): the bit count
/// is `n · ⌊bits_per_key⌋` rounded up to whole bytes, the probe count
/// `max(1, ⌊bits_per_key · ln 2⌋)`.
fn fjall_filter_bits(keys: u64, bits_per_key: f64) -> u64 {
    (keys * bits_per_key.floor() as u64).div_ceil(8) * 8
}

fn fjall_probes(bits_per_key: f64) -> u32 {
    ((bits_per_key * std::f64::consts::LN_2).floor() as u32).max(1)
}

/// An open database and its keyspace (the keyspace is dropped first).
struct Open {
    keyspace: Keyspace,
    _db: Database,
}

/// A fjall database set up for the workload.
pub struct FjallStore {
    label: String,
    dir: PathBuf,
    /// Filter bits per key, or `None` for no filters.
    bits_per_key: Option<f64>,
    open: Option<Open>,
    /// Keys written into each finished table, in order.
    table_keys: Vec<u64>,
    /// Keys written since the last `end_table`.
    pending_keys: u64,
}

impl FjallStore {
    /// Creates a fresh database in `dir` whose tables carry Bloom filters at
    /// `bits_per_key` (or none, for `None`).
    pub fn create(
        label: impl Into<String>,
        dir: PathBuf,
        bits_per_key: Option<f64>,
    ) -> Result<Self, BenchError> {
        if let Some(bpk) = bits_per_key {
            if !(bpk.is_finite() && bpk >= 1.0) {
                return Err(format!("fjall needs at least 1 filter bit per key, got {bpk}").into());
            }
        }
        let mut store = FjallStore {
            label: label.into(),
            dir,
            bits_per_key,
            open: None,
            table_keys: Vec::new(),
            pending_keys: 0,
        };
        store.open = Some(store.open_db()?);
        Ok(store)
    }

    /// The keyspace's options. They are stored with the keyspace when it is created,
    /// and read back from it on every reopen.
    fn keyspace_options(&self) -> KeyspaceCreateOptions {
        let filter = match self.bits_per_key {
            Some(bpk) => FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(bpk as f32),
            )),
            None => FilterPolicy::disabled(),
        };
        KeyspaceCreateOptions::default()
            .filter_policy(filter)
            .filter_block_pinning_policy(PinningPolicy::all(true))
            .index_block_pinning_policy(PinningPolicy::all(true))
            .data_block_compression_policy(CompressionPolicy::disabled())
            .compaction_strategy(Arc::new(Leveled::default().with_l0_threshold(u8::MAX)))
            .max_memtable_size(1 << 30)
            // The journal is written through at each table's end, not at every put:
            // loading speed is not what the workload measures.
            .manual_journal_persist(true)
    }

    fn open_db(&self) -> Result<Open, BenchError> {
        let db = Database::builder(&self.dir)
            .cache_size(crate::BLOCK_CACHE_BYTES as u64)
            .manual_journal_persist(true)
            .open()?;
        let options = self.keyspace_options();
        let keyspace = db.keyspace(KEYSPACE, || options)?;
        Ok(Open { keyspace, _db: db })
    }

    fn keyspace(&self) -> Result<&Keyspace, BenchError> {
        self.open
            .as_ref()
            .map(|o| &o.keyspace)
            .ok_or_else(|| "fjall store is closed".into())
    }
}

impl BenchStore for FjallStore {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        self.keyspace()?.insert(key, value)?;
        self.pending_keys += 1;
        Ok(())
    }

    fn end_table(&mut self) -> Result<(), BenchError> {
        if self.pending_keys == 0 {
            return Ok(());
        }
        // Seal the memtable and wait until its table is written and installed.
        self.keyspace()?.rotate_memtable_and_wait()?;
        self.table_keys.push(self.pending_keys);
        self.pending_keys = 0;
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), BenchError> {
        // Dropping the handles stops fjall's workers and persists the journal.
        self.open = None;
        self.open = Some(self.open_db()?);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<bool, BenchError> {
        Ok(self.keyspace()?.get(key)?.is_some())
    }

    fn counters(&self) -> StoreCounters {
        let Some(open) = self.open.as_ref() else {
            return StoreCounters::default();
        };
        let m = open.keyspace.metrics();
        StoreCounters {
            table_probes: None,
            filter_negatives: Some(m.io_skipped_by_filter() as u64),
            filter_positives: None,
            filter_true_positives: None,
            data_block_reads: Some(m.block_load_io_count() as u64),
            block_cache_hits: None,
        }
    }

    /// Computed from fjall's construction rule and the keys written into each table
    /// (fjall does not report its filters' sizes).
    fn filter_shape(&self) -> FilterShape {
        let Some(bpk) = self.bits_per_key else {
            return FilterShape::default();
        };
        let probes = fjall_probes(bpk);
        let tables: Vec<(u64, u64)> = self
            .table_keys
            .iter()
            .map(|&n| (fjall_filter_bits(n, bpk), n))
            .collect();
        FilterShape::from_tables(&tables, probes, |m, n| {
            sizing::false_positive_rate(m, n, probes).unwrap_or(1.0)
        })
    }

    fn tables(&self) -> usize {
        self.open
            .as_ref()
            .map(|o| o.keyspace.table_count())
            .unwrap_or(0)
    }

    fn drop_caches(&self) {
        page_cache::drop_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_rule_at_ten_bits_per_key() {
        assert_eq!(fjall_probes(10.0), 6);
        assert_eq!(fjall_filter_bits(100_000, 10.0), 1_000_000);
        assert_eq!(fjall_filter_bits(3, 10.0), 32);
    }
}
