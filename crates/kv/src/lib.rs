//! # bloomkv-kv
//!
//! An embeddable, crash-safe LSM key-value store whose read path consults each table's
//! Bloom filter block and skips the disk read when the filter says "absent".

mod error;
pub mod fs;
pub mod sstable;
mod stats;
mod types;

pub use error::{Error, Result};
pub use stats::{Counters, DbStats};
pub use types::{Entry, SeqNo, ValueKind};
