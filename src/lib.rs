//! # bloomkv
//!
//! The SSTable Bloom filter block ([`bloomkv_filter`]) and the LSM store that uses it
//! to skip disk reads ([`bloomkv_kv`]), re-exported from one crate.
//!
//! The default `cli` feature adds the `bloomkv` command line and the benchmark
//! (`bloomkv::bench`); with `default-features = false` the library compiles the filter
//! and kv crates alone.

pub use bloomkv_filter as filter;
pub use bloomkv_kv as kv;

pub use bloomkv_filter::*;
pub use bloomkv_kv::*;

/// The bytes a get returns ([`Db::get`]): a cheaply cloned, reference-counted buffer.
pub use bytes::Bytes;

/// The README's Rust blocks, compiled and run as doc tests, so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's Rust blocks (its formulas against the sizing functions and the planner),
/// compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/GUIDE.md")]
pub struct GuideDoctests;

/// The disk-I/O savings benchmark (the `bloomkv-bench` crate), for the command line.
#[cfg(feature = "cli")]
pub use bloomkv_bench as bench;
