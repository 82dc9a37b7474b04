//! The storage-engine plug-in: how an SSTable builds and consults its filter block.
//!
//! A table writer feeds every user key of the table to a [`FilterBuilder`] and stores the
//! bytes of `finish()` as the table's filter block, recording [`FilterPolicy::name`]
//! beside it. A table reader opens a [`FilterReader`] over those bytes once, keeps it in
//! memory, and asks it about every lookup before touching a data block:
//!
//! ```text
//! builder:  (add_key | add_hash)* finish
//! reader:   open_reader(block) then may_contain / may_contain_hash, any number of times
//! ```
//!
//! A filter may say "maybe" for a key it never saw (a false positive: one wasted read),
//! but never "no" for a key it did see. A block that cannot be decoded makes
//! `open_reader` fail; the caller then reads the table without a filter ("fail open"):
//! a damaged filter costs speed, never data.

use std::fmt;

use crate::error::FilterError;
use crate::hash::KeyHash;
use crate::ribbon::RibbonProbe;

/// Builds filter blocks and opens readers over them. Shared by every table of a store.
pub trait FilterPolicy: Send + Sync + fmt::Debug {
    /// A stable, non-empty name written into each table, so a changed encoding is
    /// never misread (a store refuses an empty one: tables without a filter record "").
    fn name(&self) -> &str;

    /// The number of filter bits this policy spends per key.
    fn bits_per_key(&self) -> f64;

    /// A fresh builder for one table's filter block.
    fn new_builder(&self) -> Box<dyn FilterBuilder>;

    /// Validates `block` (length, checksum, version, sizes) and opens a reader over it.
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError>;
}

/// Accumulates one table's keys and produces its filter block.
///
/// # The hash contract
///
/// A store hashes each looked-up key once, with [`KeyHash::of`], and asks every table's
/// filter about that one hash through [`FilterReader::may_contain_hash`]. A table
/// writer adds each key with [`add_key`](Self::add_key). So, for every key:
///
/// ```text
/// add_key(key)  must have the effect of  add_hash(KeyHash::of(key))
/// ```
///
/// A builder that overrides `add_key` with another hash (or derives its bits from
/// the raw key) sets bits the store never probes: lookups of keys the table holds
/// answer "absent" — false negatives, data silently unreadable. Keep the default
/// `add_key`, or hash with `KeyHash::of` inside it. `bloomkv-kv` checks a
/// user's policy against this contract when a store opens (`check_hash_contract` in
/// its `options.rs`: 200 keys added with `add_key` must all answer "maybe" to
/// `may_contain_hash(KeyHash::of(key))`) and refuses a policy that breaks it with
/// `InvalidArgument`; the check cannot prove the contract, only catch a breach.
pub trait FilterBuilder: Send {
    /// Adds a key; equivalent to `add_hash(KeyHash::of(key))`. An override must keep
    /// that equivalence (see [the hash contract](FilterBuilder#the-hash-contract)).
    fn add_key(&mut self, key: &[u8]) {
        self.add_hash(KeyHash::of(key));
    }

    /// Adds a key by its hash, which is always [`KeyHash::of`] of the key: the same
    /// value a lookup hands to [`FilterReader::may_contain_hash`].
    fn add_hash(&mut self, hash: KeyHash);

    /// Keys added so far.
    fn num_keys(&self) -> u64;

    /// Encodes the filter block for the keys added so far and resets the builder.
    fn finish(&mut self) -> Vec<u8>;
}

/// Answers membership queries over one decoded filter block. Kept in memory per table.
pub trait FilterReader: Send + Sync + fmt::Debug {
    /// `false` means the key is certainly absent; `true` means it may be present.
    fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(KeyHash::of(key))
    }

    /// As [`may_contain`](Self::may_contain), for a key already hashed with [`KeyHash::of`].
    ///
    /// This is the only question a store asks: one `KeyHash::of(key)` per lookup,
    /// handed to every table's reader. It must answer `true` for every hash its
    /// builder was given through `add_hash` or `add_key`; see
    /// [the hash contract](FilterBuilder#the-hash-contract), which `bloomkv-kv` checks
    /// when a store opens with a user's policy.
    fn may_contain_hash(&self, hash: KeyHash) -> bool;

    /// Starts loading the memory `may_contain_hash(hash)` will read, without waiting
    /// for it. A store probing several tables' filters for one key prefetches them all
    /// first, so their cache misses overlap. The default does nothing.
    fn prefetch_hash(&self, _hash: KeyHash) {}

    /// The filter as a [`RibbonProbe`], if it is a version-3 Ribbon filter: what a
    /// store asking one key of many tables' filters uses instead of a virtual call per
    /// table. It must answer as `may_contain_hash` does. The default is `None`.
    fn ribbon_probe(&self) -> Option<RibbonProbe> {
        None
    }

    /// Describes the decoded filter (layout, sizes, probes, fill).
    fn info(&self) -> FilterInfo;

    /// Heap bytes the reader holds.
    fn memory_bytes(&self) -> usize;
}

/// What a filter block says about itself; shown by `bloomkv inspect`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FilterInfo {
    /// Layout name: `"standard"`, `"cache-local"` or `"ribbon"`.
    pub layout: &'static str,
    /// Bits in the filter's array (Ribbon: its solution), without the trailer.
    pub num_bits: u64,
    /// Keys the filter was built from.
    pub num_keys: u64,
    /// Probes per key (Bloom); for Ribbon, the result bits `r` checked per query in
    /// the lower blocks (the first blocks check `r + 1`).
    pub num_probes: u32,
    /// Fraction of bits set (about one half for Ribbon).
    pub fill_ratio: f64,
    /// False-positive rate predicted for this filter's actual shape: the exact line
    /// model (cache-local), the formula (standard), or the mix of `2^-r` and
    /// `2^-(r+1)` over its blocks (Ribbon).
    pub estimated_fp_rate: f64,
}
