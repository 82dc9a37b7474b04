//! # bloomkv-filter
//!
//! Bloom filters, and the SSTable *filter block* that lets an LSM store skip reading a
//! table that cannot hold a key.
//!
//! A Bloom filter answers "is this key in the set?" with "certainly not" or
//! "probably": `m` bits, `k` probes per key, no false negatives, and a false-positive
//! rate of about `(1 - e^{-kn/m})^k` for `n` keys. At 10 bits per key that is about
//! 1%: a store that consults the filter before reading a table skips 99% of the reads
//! for keys the table does not hold.
//!
//! The crate has two faces:
//!
//! * **A standalone library**, as the classic texts describe it:
//!   [`BloomFilter`] (sized by [`sizing`], hashed with [`murmur3`], JSON
//!   [`FilterStats`], checksummed bytes) and [`CountingBloomFilter`] (4-bit counters,
//!   so items can be removed). For URL de-duplication, blacklists, cache-penetration
//!   guards.
//! * **The storage-engine plug-in**: [`FilterPolicy`], [`FilterBuilder`] and
//!   [`FilterReader`], implemented by [`BloomPolicy`] in two [`BloomLayout`]s, writing
//!   the self-describing, checksummed [`filter_block`] format. A store hashes each
//!   lookup key once with [`KeyHash::of`] and hands the hash to every table's reader.
//! * **A range filter** for short scans: [`RangeFilterBuilder`] and
//!   [`RangeFilterReader`] (Grafite over an order-preserving map of byte keys), so a
//!   store can skip a table for a key range it holds nothing in.
//!
//! ```
//! use bloomkv_filter::{BloomFilter, BloomPolicy, FilterPolicy};
//!
//! // Standalone: 1000 items at 1% false positives.
//! let mut seen = BloomFilter::with_rate(1000, 0.01)?;
//! seen.insert("https://example.com/");
//! assert!(seen.contains("https://example.com/"));
//!
//! // Plug-in: one table's filter block.
//! let policy = BloomPolicy::new(10.0)?;
//! let mut builder = policy.new_builder();
//! builder.add_key(b"user:42");
//! let reader = policy.open_reader(&builder.finish())?;
//! assert!(reader.may_contain(b"user:42"));
//! # Ok::<(), bloomkv_filter::FilterError>(())
//! ```
//!
//! Hashes: XXH3-128 for filter blocks (faster on short keys; the `filter` benchmark
//! measures it against MurmurHash3), MurmurHash3 x64_128 for the standalone filters.
//! Positions come from multiply-shift ([`fastrange64`]), never `%`.

mod bloom;
mod bloom_policy;
mod counting;
mod error;
pub mod filter_block;
mod frame;
mod hash;
mod layout;
mod line_model;
pub mod murmur3;
mod policy;
mod range;
mod ribbon;
pub mod sizing;
mod standalone_probes;

pub use bloom::{BloomFilter, FilterStats, MAX_HASHES};
pub use bloom_policy::{
    open_filter_block, BloomPolicy, CACHE_LOCAL_POLICY_NAME, DEFAULT_BITS_PER_KEY,
    MAX_BITS_PER_KEY, MIN_BITS_PER_KEY, STANDARD_POLICY_NAME,
};
pub use counting::{CountingBloomFilter, COUNTER_MAX};
pub use error::FilterError;
pub use hash::{fastrange64, KeyHash};
pub use layout::{BloomLayout, CACHE_LOCAL_MAX_PROBES, CACHE_LOCAL_PROBES, MAX_PROBES};
pub use policy::{FilterBuilder, FilterInfo, FilterPolicy, FilterReader};
pub use range::{
    RangeFilterBuilder, RangeFilterReader, RangeFilterStats, RANGE_DEFAULT_SEED,
    RANGE_FORMAT_VERSION, RANGE_MAX_BITS_PER_KEY, RANGE_MIN_BITS_PER_KEY,
};
/// A Ribbon filter small enough to print, for learning how banding and solving work.
pub use ribbon::teach::{TeachingEquation, TeachingRibbon};
pub use ribbon::{
    RibbonOutcome, RibbonPolicy, RibbonProbe, BUMPED_MIN_KEYS, BUMPED_RIBBON_FORMAT_VERSION,
    RIBBON128_FORMAT_VERSION, RIBBON_FORMAT_VERSION, RIBBON_MAX_ATTEMPTS, RIBBON_POLICY_NAME,
};
