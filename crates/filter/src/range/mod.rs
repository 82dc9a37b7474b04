//! Range filters: "may any key of this table lie in `[a, b]`?", answered without
//! reading the table.
//!
//! A point filter skips a table for a key it does not hold; a scan of a short, empty
//! key range still reads one block per table whose key range covers it. A range
//! filter answers the scan's question before the read. This one is Grafite (Costa,
//! Ferragina, Vinciguerra, SIGMOD 2024), whose false-positive bound holds for any
//! data and any queries, including the adversarial "start right after a stored key"
//! that defeats trie- and prefix-based range filters:
//!
//! ```text
//!  key ──keymap──> u64 (≤ 8 bytes after the common key prefix)      range::keymap
//!  u64 ──h(x) = (q(j) + x − jL) mod r, j = x / L──> [0, r)           range::grafite
//!  sorted, distinct h(S) ──> Elias–Fano, successor search            range::elias_fano
//!  bytes: header, boundary keys, words, CRC-32                       range::block
//!  builder and reader                                                range::filter
//! ```
//!
//! At `B` bits per key a range of `l` mapped keys, `l ≤ L`, is a false positive with
//! probability at most `l / 2^(B−2)`; longer ranges, and ranges not bounded at the
//! end, are "maybe".

pub(crate) mod block;
pub(crate) mod elias_fano;
pub(crate) mod filter;
pub(crate) mod grafite;
pub(crate) mod keymap;

pub use block::RANGE_FORMAT_VERSION;
pub use filter::{
    RangeFilterBuilder, RangeFilterReader, RangeFilterStats, RANGE_DEFAULT_SEED,
    RANGE_MAX_BITS_PER_KEY, RANGE_MIN_BITS_PER_KEY,
};
