//! The table cache lives in `sstable/table_cache.rs`, beside the table file that reads
//! through it. This path re-exports it for the modules that still name it here, and
//! goes once they name `crate::sstable::TableCache`.

pub(crate) use crate::sstable::TableCache;
