//! The stores under the suite, each behind one small trait, and exactly how each is set.
//!
//! Every store is opened fresh in its own directory, loaded, run, closed and removed.
//! Writes never wait for an fsync (the LSMs append to their log in the page cache;
//! redb commits with `Durability::None`); the load writes in batches of
//! [`LOAD_BATCH`] records, one atomic batch (or one redb transaction) each; a run's
//! update or insert is one write (one redb write transaction).
//!
//! ```text
//! setting   store    block cache      compression            filter                        notes
//! defaults  bloomkv  8 MiB            none                   cache-local Bloom, 10 b/key   Options::default()
//!           fjall    32 MiB           LZ4 from L2 on         L0 0.01% FP (~19 b/key),      KeyspaceCreateOptions::default()
//!                                                            10 b/key below
//!           redb     1 GiB (page)     none                   none (a B-tree)               Builder::new()
//! equal     bloomkv  32 MiB           none                   cache-local Bloom, 10 b/key   filters and indexes in memory (always)
//!           fjall    32 MiB           none                   Bloom 10 b/key every level    filter and index blocks pinned on every level
//!           redb     32 MiB           none                   none (a B-tree)
//! ```
//!
//! redb has no filter and no compression at either setting; at "equal" its page cache
//! is the LSMs' block cache. Every store gets the same keys and values in the same
//! order.

use std::path::{Path, PathBuf};

use bloomkv::kv::{Compression, Db, Options, WriteBatch};
use bloomkv_bench::BenchError;
use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy};
use fjall::config::{FilterPolicyEntry, PinningPolicy};
use fjall::{Database, Keyspace, KeyspaceCreateOptions};
use redb::{ReadableDatabase, TableDefinition};

use super::record::{read_head, ValueHead};

/// Records per atomic batch (redb: per transaction) in the load phase.
pub const LOAD_BATCH: usize = 1000;

/// The block (page) cache of every store at equal settings: fjall's default.
pub const EQUAL_CACHE: usize = 32 << 20;

/// Filter bits per key at equal settings (bloomkv's and RocksDB's default).
pub const EQUAL_BITS_PER_KEY: f64 = 10.0;

/// How the stores are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    /// Each store as its maintainers ship it.
    Defaults,
    /// The same cache, compression off, 10 filter bits per key where there are filters.
    Equal,
}

impl Setting {
    /// The setting's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Defaults => "defaults",
            Setting::Equal => "equal",
        }
    }

    /// Parses `defaults,equal`.
    pub fn parse_list(list: &str) -> Result<Vec<Setting>, String> {
        list.split(',')
            .map(|s| match s.trim() {
                "defaults" => Ok(Setting::Defaults),
                "equal" => Ok(Setting::Equal),
                other => Err(format!(
                    "unknown setting {other:?}: expected defaults or equal"
                )),
            })
            .collect()
    }
}

/// A store the suite can drive from several threads at once.
pub trait YcsbStore: Send + Sync {
    /// Writes `rows` as one atomic batch.
    fn load_batch(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), BenchError>;
    /// Writes one record (insert or update).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError>;
    /// Reads one record: the head of its value, or `None` if absent.
    fn get(&self, key: &[u8]) -> Result<Option<ValueHead>, BenchError>;
    /// Reads up to `count` records from `start` on, in key order, handing each to
    /// `row`; returns how many it read.
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        row: &mut dyn FnMut(&[u8], ValueHead),
    ) -> Result<usize, BenchError>;
    /// After the load: make it durable where the store's writes are not (redb's
    /// non-durable commits). Not timed.
    fn checkpoint(&self) -> Result<(), BenchError> {
        Ok(())
    }
    /// Closes the store cleanly.
    fn close(self: Box<Self>) -> Result<(), BenchError>;
}

/// A value without the 16-byte head is not one this suite wrote.
fn head_of(key: &[u8], value: &[u8]) -> Result<ValueHead, BenchError> {
    read_head(value).ok_or_else(|| {
        format!(
            "value of {:?} is {} bytes, too short to be a record",
            String::from_utf8_lossy(key),
            value.len()
        )
        .into()
    })
}

/// The stores the suite knows.
pub const STORES: [&str; 4] = ["bloomkv", "fjall", "redb", "rocksdb"];

/// Opens store `name` fresh in `dir` at `setting`.
pub fn open(name: &str, dir: &Path, setting: Setting) -> Result<Box<dyn YcsbStore>, BenchError> {
    Ok(match name {
        "bloomkv" => Box::new(BloomkvYcsb::open(dir, setting)?),
        "fjall" => Box::new(FjallYcsb::open(dir, setting)?),
        "redb" => Box::new(RedbYcsb::open(dir, setting)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(rocks::RocksYcsb::open(dir, setting)?),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => return Err("rocksdb needs `--features rocksdb`".into()),
        other => return Err(format!("unknown store {other:?}: expected one of {STORES:?}").into()),
    })
}

/// bloomkv: `Options::default()`, or the equal cache.
pub struct BloomkvYcsb {
    db: Db,
}

impl BloomkvYcsb {
    /// Opens a fresh store in `dir`.
    pub fn open(dir: &Path, setting: Setting) -> Result<Self, BenchError> {
        let options = match setting {
            Setting::Defaults => Options::default(),
            Setting::Equal => Options {
                block_cache_size: EQUAL_CACHE,
                compression: Compression::None,
                bits_per_key: EQUAL_BITS_PER_KEY,
                ..Options::default()
            },
        };
        Ok(BloomkvYcsb {
            db: Db::open(dir, options)?,
        })
    }
}

impl YcsbStore for BloomkvYcsb {
    fn load_batch(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), BenchError> {
        let mut batch = WriteBatch::new();
        for (k, v) in rows {
            batch.put(k, v);
        }
        Ok(self.db.write(batch)?)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        Ok(self.db.put(key, value)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<ValueHead>, BenchError> {
        match self.db.get(key)? {
            Some(v) => Ok(Some(head_of(key, &v)?)),
            None => Ok(None),
        }
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        row: &mut dyn FnMut(&[u8], ValueHead),
    ) -> Result<usize, BenchError> {
        let mut n = 0;
        for item in self.db.scan(start..).take(count) {
            let (k, v) = item?;
            row(&k, head_of(&k, &v)?);
            n += 1;
        }
        Ok(n)
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        Ok(self.db.close()?)
    }
}

/// fjall: one keyspace, as `KeyspaceCreateOptions::default()` or at equal settings.
pub struct FjallYcsb {
    keyspace: Keyspace,
    db: Database,
}

impl FjallYcsb {
    /// Opens a fresh database in `dir`.
    pub fn open(dir: &Path, setting: Setting) -> Result<Self, BenchError> {
        let mut builder = Database::builder(dir);
        let mut options = KeyspaceCreateOptions::default();
        if setting == Setting::Equal {
            builder = builder.cache_size(EQUAL_CACHE as u64);
            options = options
                .data_block_compression_policy(CompressionPolicy::disabled())
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(EQUAL_BITS_PER_KEY as f32),
                )))
                .filter_block_pinning_policy(PinningPolicy::all(true))
                .index_block_pinning_policy(PinningPolicy::all(true));
        }
        let db = builder.open()?;
        let keyspace = db.keyspace("ycsb", || options)?;
        Ok(FjallYcsb { keyspace, db })
    }
}

impl YcsbStore for FjallYcsb {
    fn load_batch(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), BenchError> {
        let mut batch = self.db.batch();
        for (k, v) in rows {
            batch.insert(&self.keyspace, k.as_slice(), v.as_slice());
        }
        Ok(batch.commit()?)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        Ok(self.keyspace.insert(key, value)?)
    }

    fn get(&self, key: &[u8]) -> Result<Option<ValueHead>, BenchError> {
        match self.keyspace.get(key)? {
            Some(v) => Ok(Some(head_of(key, &v)?)),
            None => Ok(None),
        }
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        row: &mut dyn FnMut(&[u8], ValueHead),
    ) -> Result<usize, BenchError> {
        let mut n = 0;
        for guard in self.keyspace.range(start..).take(count) {
            let (k, v) = guard.into_inner()?;
            row(&k, head_of(&k, &v)?);
            n += 1;
        }
        Ok(n)
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        // Dropping the handles stops fjall's workers and writes its journal out.
        drop(self);
        Ok(())
    }
}

const REDB_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("ycsb");

/// redb: `Builder::new()` (1 GiB cache) or the equal cache; every commit non-durable.
pub struct RedbYcsb {
    db: redb::Database,
    path: PathBuf,
}

impl RedbYcsb {
    /// Creates a fresh database file in `dir`.
    pub fn open(dir: &Path, setting: Setting) -> Result<Self, BenchError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("ycsb.redb");
        let mut builder = redb::Builder::new();
        if setting == Setting::Equal {
            builder.set_cache_size(EQUAL_CACHE);
        }
        let db = builder.create(&path)?;
        // Create the table, so readers never meet a database without it.
        let tx = db.begin_write()?;
        tx.open_table(REDB_TABLE)?;
        tx.commit()?;
        Ok(RedbYcsb { db, path })
    }

    fn write(
        &self,
        durability: redb::Durability,
        rows: &mut dyn Iterator<Item = (&[u8], &[u8])>,
    ) -> Result<(), BenchError> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(durability)?;
        {
            let mut table = tx.open_table(REDB_TABLE)?;
            for (k, v) in rows {
                table.insert(k, v)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl YcsbStore for RedbYcsb {
    fn load_batch(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), BenchError> {
        self.write(
            redb::Durability::None,
            &mut rows.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
        )
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        self.write(redb::Durability::None, &mut std::iter::once((key, value)))
    }

    fn get(&self, key: &[u8]) -> Result<Option<ValueHead>, BenchError> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(REDB_TABLE)?;
        match table.get(key)? {
            Some(v) => Ok(Some(head_of(key, v.value())?)),
            None => Ok(None),
        }
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        row: &mut dyn FnMut(&[u8], ValueHead),
    ) -> Result<usize, BenchError> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(REDB_TABLE)?;
        let mut n = 0;
        for item in table.range(start..)?.take(count) {
            let (k, v) = item?;
            row(k.value(), head_of(k.value(), v.value())?);
            n += 1;
        }
        Ok(n)
    }

    fn checkpoint(&self) -> Result<(), BenchError> {
        self.write(redb::Durability::Immediate, &mut std::iter::empty())
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        drop(self);
        Ok(())
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    //! RocksDB through the `rocksdb` crate: its defaults, or the equal settings.

    use super::*;
    use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options as RocksOptions, DB};

    /// RocksDB: `Options::default()` with `create_if_missing`, or equal settings.
    pub struct RocksYcsb {
        db: DB,
    }

    impl RocksYcsb {
        pub fn open(dir: &Path, setting: Setting) -> Result<Self, BenchError> {
            let mut o = RocksOptions::default();
            o.create_if_missing(true);
            if setting == Setting::Equal {
                let mut t = BlockBasedOptions::default();
                t.set_block_cache(&Cache::new_lru_cache(EQUAL_CACHE));
                t.set_bloom_filter(EQUAL_BITS_PER_KEY, false);
                t.set_cache_index_and_filter_blocks(false);
                o.set_block_based_table_factory(&t);
                o.set_compression_type(DBCompressionType::None);
            }
            Ok(RocksYcsb {
                db: DB::open(&o, dir)?,
            })
        }
    }

    impl YcsbStore for RocksYcsb {
        fn load_batch(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), BenchError> {
            let mut b = rocksdb::WriteBatch::default();
            for (k, v) in rows {
                b.put(k, v);
            }
            Ok(self.db.write(b)?)
        }

        fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
            Ok(self.db.put(key, value)?)
        }

        fn get(&self, key: &[u8]) -> Result<Option<ValueHead>, BenchError> {
            match self.db.get_pinned(key)? {
                Some(v) => Ok(Some(head_of(key, &v)?)),
                None => Ok(None),
            }
        }

        fn scan(
            &self,
            start: &[u8],
            count: usize,
            row: &mut dyn FnMut(&[u8], ValueHead),
        ) -> Result<usize, BenchError> {
            let mut it = self.db.raw_iterator();
            it.seek(start);
            let mut n = 0;
            while n < count && it.valid() {
                if let (Some(k), Some(v)) = (it.key(), it.value()) {
                    row(k, head_of(k, v)?);
                    n += 1;
                }
                it.next();
            }
            it.status()?;
            Ok(n)
        }

        fn close(self: Box<Self>) -> Result<(), BenchError> {
            drop(self);
            Ok(())
        }
    }
}
