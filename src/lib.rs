//! # bloomkv
//!
//! The SSTable Bloom filter block ([`bloomkv_filter`]) and the LSM store that uses it
//! to skip disk reads ([`bloomkv_kv`]), re-exported from one crate.

pub use bloomkv_filter as filter;
pub use bloomkv_kv as kv;

pub use bloomkv_filter::*;
pub use bloomkv_kv::*;

pub use bloomkv_bench as bench;
