//! # bloomkv-kv
//!
//! An embeddable, crash-safe LSM key-value store whose read path consults each table's
//! Bloom filter block and skips the disk read when the filter says "absent".
//!
//! ```
//! use bloomkv_kv::{Db, Options};
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::default())?;
//! db.put("apple", "red")?;
//! db.put("cherry", "dark red")?;
//! db.flush()?; // now in an SSTable with a Bloom filter block
//! assert_eq!(db.get("apple")?.as_deref(), Some(&b"red"[..]));
//! // "banana" lies inside the table's key range, so only the filter can rule it out:
//! assert_eq!(db.get("banana")?, None);
//! assert_eq!(db.stats().filter_negatives, 1); // no disk read for it
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout of the crate, one concept per file:
//!
//! | file | concept |
//! |---|---|
//! | `db/` | the store, one type cut by path: open, write path, read path, flush and compaction, the background thread, snapshots |
//! | `table_files.rs` | building, opening and describing table files (what flush, compaction, open and `repair` share) |
//! | `store_dir.rs` | the directory's files: tidying at open, writing the manifest, deleting what it retired |
//! | `options.rs` | configuration and its defaults |
//! | `wal.rs`, `write_batch.rs` | the write-ahead log and the atomic batch it records |
//! | `recovery.rs` | replaying the logs at open, under the chosen `WalRecovery` mode |
//! | `repair.rs` | rebuilding a store whose manifest, tables or logs are damaged |
//! | `memtable.rs` | the in-memory sorted table of recent writes |
//! | `sstable/` | the table file: format limits, blocks, index, filter block, properties, footer; the block cache and the table cache |
//! | `version.rs` | the set of live tables per level, and the per-level lookup |
//! | `merge.rs` | merging sorted runs of versions, forwards or backwards (scan, compaction) |
//! | `retain.rs` | which versions a flush or compaction keeps for the live snapshots |
//! | `scan.rs` | the point-in-time, double-ended scan iterator |
//! | `prefix.rs` | prefix extractors: what a prefix filter and `scan_prefix` ask about |
//! | `manifest.rs`, `filename.rs` | the durable list of live tables; file naming |
//! | `fs/` | the one file layer (positioned, counted reads); in-memory and fault-injecting file systems |
//! | `stats.rs` | the read path's counters |
//! | `learned.rs` | learned negatives: filter false positives remembered, exactly, so a repeated absent lookup skips the read |
//! | `types.rs` | the vocabulary every layer shares: sequence numbers, entries, `Hit`, size limits, `NUM_LEVELS` |
//! | `keycmp.rs` | comparing short keys a word at a time (the read path compares a lot) |

mod coding;
mod compaction;
mod db;
mod error;
pub mod filename;
mod filter_budget;
pub mod filter_plan;
pub mod fs;
mod inspect;
mod keycmp;
mod keyspaces;
mod lazy_table;
pub mod learned;
pub mod manifest;
pub mod memtable;
mod merge;
mod options;
mod prefetch;
mod prefix;
pub mod probe_stats;
pub mod range_del;
mod recovery;
mod repair;
mod retain;
mod scan;
mod settings;
pub mod sstable;
mod stats;
mod store_dir;
mod table_files;
mod types;
mod version;
pub mod wal;
pub mod write_batch;

pub use db::Checkpoint;
pub use db::Db;
pub use db::Keyspace;
pub use db::Snapshot;
pub use error::{Error, Result};
pub use inspect::{inspect, verify, ModeVerdict, Problem, StoreInfo, TableInfo, VerifyReport};
pub use keyspaces::{keyspace_path, DEFAULT_KEYSPACE, MAX_KEYSPACE_NAME};
pub use options::{FilterAllocation, FilterKind, Options, WalRecovery};
pub use prefix::{FixedPrefix, PrefixExtractor};
pub use recovery::{DroppedSpan, RecoveryReport, WalOutcome};
pub use repair::{repair, MovedTable, RepairReport};
pub use scan::ScanIter;
pub use settings::{
    load_options, LoadedOptions, Settings, SettingsReport, SettingsState, SETTINGS_FORMAT,
};
pub use sstable::{Compression, RangeFilterOptions};
pub use stats::{
    Counters, DbStats, LevelCounters, LevelStats, LevelTally, ReadTally, Stripe, COUNTER_STRIPES,
};
pub use types::{
    Entry, KeyspaceId, SeqNo, ValueKind, MAX_BATCH_LEN, MAX_KEY_LEN, MAX_VALUE_LEN, NUM_LEVELS,
};
pub use write_batch::WriteBatch;
