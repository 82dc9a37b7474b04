//! # bloomkv-filter
//!
//! Bloom filters, and the SSTable *filter block* that lets an LSM store skip reading a
//! table that cannot hold a key.

mod error;
mod hash;
mod policy;

pub use error::FilterError;
pub use hash::KeyHash;
pub use policy::{FilterBuilder, FilterInfo, FilterPolicy, FilterReader};
