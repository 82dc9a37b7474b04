//! bloomkv's disk-I/O savings workload run on peer LSM stores, side by side with bloomkv.
//!
//! Every store here implements the facade's [`BenchStore`](bloomkv::bench::BenchStore),
//! so the very same workload code (`bloomkv::bench::run_store`: same keys, same
//! shuffled load order, same number of tables, same lookups) drives each of them, and
//! their rows land in one table:
//!
//! ```text
//! store                 tables        filter            block cache
//! bloomkv no filter     --tables      none              none (one pread per block)
//! bloomkv standard      --tables      10 bits/key       none
//! bloomkv cache-local   --tables      10 bits/key       none
//! fjall no filter       --tables      none              8 MiB
//! fjall                 --tables      10 bits/key       8 MiB
//! rocksdb (feature)     --tables      10 bits/key       8 MiB LRU
//! ```
//!
//! Each peer holds compaction off while loading and querying, so lookups face exactly
//! `--tables` overlapping tables, as they do in bloomkv.

pub mod fjall_store;
mod labeled;
mod page_cache;
#[cfg(feature = "rocksdb")]
pub mod rocksdb_store;

pub use fjall_store::FjallStore;
pub use labeled::Labeled;
#[cfg(feature = "rocksdb")]
pub use rocksdb_store::RocksDbStore;

/// Block cache given to every peer that has one: 8 MiB.
pub const BLOCK_CACHE_BYTES: usize = 8 << 20;

pub use bloomkv::bench::check_lookups;
