//! The block cache lives in `sstable/block_cache.rs`, beside the table file that reads
//! through it. This module is empty and goes once the crate root stops declaring it.
