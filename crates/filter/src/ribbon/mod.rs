//! The Ribbon filter: a static filter that solves a linear system instead of setting bits.
//!
//! A Bloom filter at `b` bits per key lets about `0.6185^b` of absent keys through;
//! the bound for any filter is `2^-b`, so Bloom spends about 44% more bits than
//! needed. Ribbon (Dillinger & Walzer, "Ribbon filter: practically smaller than Bloom
//! and Xor", 2021) gets within a few percent of the bound: every key becomes one
//! equation over GF(2) with a 64-bit band of coefficients, and the filter stores a
//! solution `S` (`r` bits per slot, slightly more slots than keys). A query recomputes
//! the key's equation and checks that `S` satisfies it; an absent key does so with
//! probability `2^-r`.
//!
//! ```text
//!  key ──KeyHash──> (start, 64-bit row c, fingerprint f)           ribbon::hash
//!  build:  band the equations c · S[start..start+64] = f            ribbon::band
//!          solve back to front into r columns of S                  ribbon::solve
//!          write S, seed and shape with a checksum                  ribbon::block
//!  query:  parity(c & S[start..start+64]) == f, column by column    ribbon::block
//!  sizes and the expected false-positive rate                       ribbon::shape
//!  bumping: no spare slots; buckets refuse what                  ribbon::bump
//!           does not fit, the rest go to a smaller layer
//!  the bumped block (version 4) and its query                       ribbon::bumped_block
//!  the policy: bumped, else standard with retries, else Bloom       ribbon::policy
//! ```
//!
//! The solution is stored interleaved, 64 slots by `r` columns per block, so a query
//! reads two adjacent runs of words; `r` may be `r` or `r + 1` per block, so bits per
//! key need not be a whole number of columns. Tables of 4,096 keys or more get a
//! bumped block (filter-block format version 4): its slots exceed its keys by a
//! 1–2.5% instead of 5–14%, which is what brings it within about a
//! tenth of a bit per key of the bound. Blocks of format version 3 (standard, 64-bit
//! rows) and 2 (128-bit rows, their own hashing) are still read (`ribbon::block`).

pub(crate) mod band;
pub(crate) mod block;
pub(crate) mod bump;
pub(crate) mod bumped_block;
pub(crate) mod hash;
pub(crate) mod policy;
pub(crate) mod shape;
pub(crate) mod solve;
pub(crate) mod teach;

pub use block::{
    RibbonProbe, BUMPED_RIBBON_FORMAT_VERSION, RIBBON128_FORMAT_VERSION, RIBBON_FORMAT_VERSION,
};
pub use policy::{
    RibbonOutcome, RibbonPolicy, BUMPED_MIN_KEYS, RIBBON_MAX_ATTEMPTS, RIBBON_POLICY_NAME,
};
