//! The range filter of one table: a builder over its keys and a reader over its block.
//!
//! Legal calls: `RangeFilterBuilder::new (add_key)* finish`, then
//! `RangeFilterReader::open (may_contain_range | stats)*`.

use std::ops::Bound;

use serde::Serialize;

use super::block::{self, Decoded};
use super::elias_fano::EliasFano;
use super::grafite::{self, Hasher};
use super::keymap::KeyMap;
use crate::error::FilterError;

/// The smallest bits per key a range filter accepts: `r = n·2^(B−2)` must exceed `n`.
pub const RANGE_MIN_BITS_PER_KEY: f64 = 3.0;
/// The largest bits per key a range filter accepts (`2^-38` per unit of range).
pub const RANGE_MAX_BITS_PER_KEY: f64 = 40.0;
/// The seed of the block offsets unless [`RangeFilterBuilder::with_seed`] picks another.
pub const RANGE_DEFAULT_SEED: u64 = 0x5EED_0F6A_F17E_0000;

/// Collects a table's keys and writes its range filter block.
///
/// ```
/// use std::ops::Bound;
/// use bloomkv_filter::{RangeFilterBuilder, RangeFilterReader};
///
/// let mut b = RangeFilterBuilder::new(16.0, 64)?;
/// for k in [b"user:0010", b"user:0042", b"user:0097"] {
///     b.add_key(k);
/// }
/// let reader = RangeFilterReader::open(&b.finish())?;
/// assert!(reader.may_contain_range(b"user:0040", Bound::Included(b"user:0042")));
/// // Before the smallest key: certainly empty, no search needed.
/// assert!(!reader.may_contain_range(b"user:0000", Bound::Excluded(b"user:0010")));
/// // After the largest: certainly empty, even with an open end.
/// assert!(!reader.may_contain_range(b"user:0098", Bound::Unbounded));
/// // An open end inside the table's range: "maybe".
/// assert!(reader.may_contain_range(b"user:0050", Bound::Unbounded));
///
/// // Dense integer keys (big-endian after a prefix): short empty ranges are "no"
/// // but for a false positive rate of at most l / 2^14 at 16 bits per key.
/// let mut b = RangeFilterBuilder::new(16.0, 64)?;
/// for id in (0u64..1000).map(|i| i * 100) {
///     b.add_key(&[&b"id:"[..], &id.to_be_bytes()].concat());
/// }
/// let reader = RangeFilterReader::open(&b.finish())?;
/// let k = |id: u64| [&b"id:"[..], &id.to_be_bytes()].concat();
/// assert!(reader.may_contain_range(&k(4_990), Bound::Included(&k(5_000))));
/// let empty = (0..999u64)
///     .filter(|i| !reader.may_contain_range(&k(i * 100 + 1), Bound::Included(&k(i * 100 + 16))))
///     .count();
/// assert!(empty > 900);
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RangeFilterBuilder {
    bits_per_key: f64,
    max_range_len: u64,
    seed: u64,
    /// Every key's bytes, back to back; key `i` ends at `ends[i]`.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    smallest: usize,
    largest: usize,
}

impl RangeFilterBuilder {
    /// A builder spending about `bits_per_key` bits per distinct key, answering ranges
    /// of up to `max_range_len` mapped keys (longer ones are "maybe"). A tiny key set
    /// lowers the maximum to its reduced universe `r` (`L ≤ r` keeps the bound).
    pub fn new(bits_per_key: f64, max_range_len: u64) -> Result<Self, FilterError> {
        if !(RANGE_MIN_BITS_PER_KEY..=RANGE_MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(FilterError::InvalidArgument(format!(
                "range filter bits per key {bits_per_key} outside \
                 {RANGE_MIN_BITS_PER_KEY}..={RANGE_MAX_BITS_PER_KEY}"
            )));
        }
        if max_range_len == 0 {
            return Err(FilterError::InvalidArgument(
                "range filter maximum range length 0".into(),
            ));
        }
        Ok(RangeFilterBuilder {
            bits_per_key,
            max_range_len,
            seed: RANGE_DEFAULT_SEED,
            bytes: Vec::new(),
            ends: Vec::new(),
            smallest: 0,
            largest: 0,
        })
    }

    /// The same builder with another seed for the block offsets.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Adds a key. Keys may come in any order and repeat (a table adds them sorted).
    pub fn add_key(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
        let i = self.ends.len() - 1;
        if i > 0 {
            if key < self.key(self.smallest) {
                self.smallest = i;
            }
            if key > self.key(self.largest) {
                self.largest = i;
            }
        }
    }

    /// Keys added so far.
    pub fn num_keys(&self) -> usize {
        self.ends.len()
    }

    /// Writes the block.
    pub fn finish(self) -> Vec<u8> {
        if self.ends.is_empty() {
            let ef = EliasFano::new(&[], 0);
            let map = KeyMap {
                prefix_len: 0,
                width: 0,
                packed: None,
            };
            return block::encode(0, &map, &[], &[], self.max_range_len, None, &ef);
        }
        let (smallest, largest) = (self.key(self.smallest), self.key(self.largest));
        let map = KeyMap::choose(smallest, largest, (0..self.ends.len()).map(|i| self.key(i)));
        let mut mapped: Vec<u64> = (0..self.ends.len()).map(|i| map.map(self.key(i))).collect();
        mapped.sort_unstable();
        mapped.dedup();
        let universe = grafite::reduced_universe(mapped.len() as u64, self.bits_per_key);
        // A block longer than r would wrap onto itself: two keys of one block r apart
        // would share a hash, and the bound would no longer hold. L ≤ r keeps it.
        let block_len = self.max_range_len.min(universe);
        let hasher = Hasher::new(universe, block_len, self.seed);
        let ef = grafite::build(&mapped, &hasher);
        block::encode(
            self.ends.len() as u64,
            &map,
            smallest,
            largest,
            block_len,
            Some(&hasher),
            &ef,
        )
    }
}

/// What a range filter block holds, for `inspect` and the benchmark.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RangeFilterStats {
    /// Keys added when the block was built (duplicates included).
    pub keys: u64,
    /// Distinct hashes stored (keys merged by the map or by the hash count once).
    pub stored_hashes: u64,
    /// Block bytes · 8 / keys.
    pub bits_per_key: f64,
    /// `L`: the longest range, in mapped keys, that gets an answer other than "maybe".
    pub max_range_len: u64,
    /// `r`: the reduced universe.
    pub reduced_universe: u64,
    /// Bytes of the common key prefix the map drops.
    pub prefix_len: usize,
    /// Bytes after the prefix the map reads (0..=8), or with packed positions (block
    /// version 2) the positions it codes (up to 64).
    pub mapped_bytes: usize,
    /// Bytes of the block.
    pub block_bytes: usize,
}

/// A decoded range filter block.
#[derive(Debug)]
pub struct RangeFilterReader {
    decoded: Decoded,
    map: KeyMap,
    block_bytes: usize,
}

impl RangeFilterReader {
    /// Validates `block` and opens it. A store treats an error as "maybe" for every
    /// range (it reads the table as if it had no range filter).
    pub fn open(block: &[u8]) -> Result<Self, FilterError> {
        let decoded = block::open(block)?;
        Ok(RangeFilterReader {
            map: decoded.map,
            decoded,
            block_bytes: block.len(),
        })
    }

    /// Whether a key in `start ..` up to `end` may be in the set. `false` is certain;
    /// `true` is "maybe". An unbounded end is always "maybe"; an excluded end is
    /// treated as included once mapped (a superset, so never a false negative).
    pub fn may_contain_range(&self, start: &[u8], end: Bound<&[u8]>) -> bool {
        let Some(hasher) = &self.decoded.hasher else {
            return false; // no keys at all
        };
        let (smallest, largest) = (&self.decoded.smallest[..], &self.decoded.largest[..]);
        if start > largest {
            return false;
        }
        let end = match end {
            Bound::Unbounded => return true,
            Bound::Included(e) => {
                if e < start || e < smallest {
                    return false;
                }
                e
            }
            Bound::Excluded(e) => {
                if e <= start || e <= smallest {
                    return false;
                }
                e
            }
        };
        // Clamped to [smallest, largest], both ends share the set's prefix.
        let lo = start.max(smallest);
        let hi = end.min(largest);
        grafite::may_contain(&self.decoded.ef, hasher, self.map.map(lo), self.map.map(hi))
    }

    /// Whether a key mapping into `a ..= b` may be in the set: the filter on its own
    /// integers (the benchmark measures range lengths in this space).
    pub fn may_contain_mapped(&self, a: u64, b: u64) -> bool {
        match &self.decoded.hasher {
            None => false,
            Some(h) => grafite::may_contain(&self.decoded.ef, h, a, b),
        }
    }

    /// The integer a key maps to: up to 8 bytes after the table's common prefix.
    pub fn map_key(&self, key: &[u8]) -> u64 {
        self.map.map(key)
    }

    /// The bound on the false-positive probability of a range of `len` mapped keys:
    /// `n·len / r`, at most 1 (1 for ranges answered "maybe" without a search).
    pub fn fp_bound(&self, len: u64) -> f64 {
        match &self.decoded.hasher {
            None => 0.0,
            Some(h) if len > h.block_len || len >= h.universe => 1.0,
            Some(h) => (self.decoded.ef.len() as f64 * len as f64 / h.universe as f64).min(1.0),
        }
    }

    /// The block's figures.
    pub fn stats(&self) -> RangeFilterStats {
        let keys = self.decoded.keys;
        RangeFilterStats {
            keys,
            stored_hashes: self.decoded.ef.len(),
            bits_per_key: if keys == 0 {
                0.0
            } else {
                self.block_bytes as f64 * 8.0 / keys as f64
            },
            max_range_len: self.decoded.block_len,
            reduced_universe: self.decoded.ef.universe(),
            prefix_len: self.map.prefix_len,
            mapped_bytes: self.map.width,
            block_bytes: self.block_bytes,
        }
    }

    /// Heap bytes the reader holds.
    pub fn memory_bytes(&self) -> usize {
        self.decoded.ef.coded_bytes() + self.decoded.smallest.len() + self.decoded.largest.len()
    }
}
