//! `CountingBloomFilter`: a Bloom filter that can forget items.
//!
//! Each bit of a Bloom filter becomes a 4-bit counter. Inserting an item increments
//! its `k` counters; removing it decrements them; an item may be present while all of
//! its counters are non-zero. The price is four times the memory of a plain filter at
//! the same false-positive rate.
//!
//! Each item increments `k` *distinct* counters (see
//! `standalone_probes`), so one item adds at most 1 to any
//! counter per insert: saturating a counter takes 15 inserts that share it, never a
//! few inserts of one item whose probes coincide.
//!
//! Counters saturate: one that reaches 15 stays at 15 forever. It is never
//! decremented, because after saturation the filter no longer knows how many items
//! share it; decrementing could reach zero while one of them is still present (a
//! false negative). With `k` probes chosen for the design size a counter reaches 15
//! with probability around 1e-15, so saturation costs nothing in practice.
//!
//! Counters are packed sixteen per `u64`, counter `c` in bits `4·(c % 16) ..` of word
//! `c / 16`:
//!
//! ```text
//!  word 0: | c15 | c14 | ... | c1 | c0 |    (4 bits each, c0 in the low nibble)
//! ```
//!
//! [`to_bytes`](CountingBloomFilter::to_bytes) uses the same frame as
//! [`BloomFilter`](crate::BloomFilter) with kind 2 and `size` = number of counters.
//!
//! Only remove items you inserted: removing an item that was never inserted but
//! passes the filter (a false positive) takes counts away from other items.
//! [`remove`](CountingBloomFilter::remove) refuses items that are certainly absent.

use crate::bloom::{estimate_items, to_corrupt, zeroed_words, FilterStats, MAX_HASHES};
use crate::error::FilterError;
use crate::frame::{self, FrameHeader, FrameKind};
use crate::sizing::{self, MAX_NUM_BITS};
use crate::standalone_probes::{ProbeRule, Slots};

/// The value at which a counter sticks.
pub const COUNTER_MAX: u8 = 15;

const LOW_NIBBLE_BITS: u64 = 0x1111_1111_1111_1111;

/// A Bloom filter with 4-bit saturating counters, so items can be removed.
///
/// ```
/// use bloomkv_filter::CountingBloomFilter;
///
/// let mut blacklist = CountingBloomFilter::with_rate(10_000, 0.01)?;
/// blacklist.insert("10.0.0.1");
/// blacklist.insert("10.0.0.2");
/// assert!(blacklist.remove("10.0.0.1"));
/// assert!(!blacklist.contains("10.0.0.1"));
/// assert!(blacklist.contains("10.0.0.2"));  // never a false negative for the rest
/// assert!(!blacklist.remove("10.0.0.9"));   // certainly absent: nothing to remove
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountingBloomFilter {
    words: Vec<u64>,
    num_counters: u64,
    num_hashes: u32,
    len: u64,
    /// Where probes land (see [`BloomFilter`](crate::BloomFilter)).
    rule: ProbeRule,
}

impl CountingBloomFilter {
    /// An empty filter of `num_counters` counters probed `num_hashes` times per item.
    ///
    /// Errors when `num_counters` is 0 or above 2^48, or `num_hashes` is 0 or above 64,
    /// and when the counters cannot be allocated: above 1 TiB, or more than the system
    /// will give. An absurd size is an error, never an aborted process.
    pub fn new(num_counters: u64, num_hashes: u32) -> Result<CountingBloomFilter, FilterError> {
        check_params(num_counters, num_hashes)?;
        let words = usize::try_from(frame::payload_words(FrameKind::Counting, num_counters))
            .map_err(|_| FilterError::InvalidArgument("too many counters".into()))?;
        Ok(CountingBloomFilter {
            words: zeroed_words(words)?,
            num_counters,
            num_hashes,
            len: 0,
            rule: ProbeRule::CURRENT,
        })
    }

    /// An empty filter sized for `expected_items` at `fp_rate`: as many counters as a
    /// [`BloomFilter`](crate::BloomFilter) would have bits.
    pub fn with_rate(
        expected_items: u64,
        fp_rate: f64,
    ) -> Result<CountingBloomFilter, FilterError> {
        let (m, k) = sizing::standalone_shape(expected_items, fp_rate, MAX_HASHES)?;
        CountingBloomFilter::new(m, k)
    }

    #[inline]
    fn counter(&self, c: u64) -> u8 {
        self.words
            .get((c / 16) as usize)
            .map_or(0, |w| ((w >> ((c % 16) * 4)) & 0xF) as u8)
    }

    #[inline]
    fn set_counter(&mut self, c: u64, value: u8) {
        if let Some(w) = self.words.get_mut((c / 16) as usize) {
            let shift = (c % 16) * 4;
            *w = (*w & !(0xF << shift)) | (u64::from(value & 0xF) << shift);
        }
    }

    /// The counter indices of an item: `k` distinct counters (version-2 rule), or
    /// double hashing for a filter read from version-1 bytes. Held on the stack, so
    /// counters can be updated while they are walked.
    fn probes(&self, item: &[u8]) -> Slots {
        self.rule.slots(item, self.num_hashes, self.num_counters)
    }

    /// Adds `item` (counted again if added twice). Returns `true` if it was certainly
    /// absent before.
    pub fn insert(&mut self, item: impl AsRef<[u8]>) -> bool {
        let mut was_absent = false;
        for &c in self.probes(item.as_ref()).as_slice() {
            let v = self.counter(c);
            was_absent |= v == 0;
            if v < COUNTER_MAX {
                self.set_counter(c, v + 1);
            }
        }
        self.len = self.len.saturating_add(1);
        was_absent
    }

    /// Removes one insertion of `item`. Returns `false`, changing nothing, when the
    /// item cannot be present (one of its counters is zero).
    ///
    /// Saturated counters are left at 15, so other items never become false
    /// negatives.
    pub fn remove(&mut self, item: impl AsRef<[u8]>) -> bool {
        let probes = self.probes(item.as_ref());
        if probes.as_slice().iter().any(|&c| self.counter(c) == 0) {
            return false;
        }
        for &c in probes.as_slice() {
            let v = self.counter(c);
            // v == 0 here only under the version-1 rule, if this item probes one
            // counter twice and this removal already drained it; never wrap below zero.
            if v > 0 && v < COUNTER_MAX {
                self.set_counter(c, v - 1);
            }
        }
        self.len = self.len.saturating_sub(1);
        true
    }

    /// `false` if `item` is certainly absent; `true` if it may be present.
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        self.probes(item.as_ref())
            .as_slice()
            .iter()
            .all(|&c| self.counter(c) > 0)
    }

    /// Number of counters (`m`).
    pub fn num_counters(&self) -> u64 {
        self.num_counters
    }

    /// Probes per item (`k`).
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// Insertions minus successful removals.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the filter holds no insertion.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counters that are not zero (a popcount per word on nibble-OR masks).
    pub fn count_nonzero(&self) -> u64 {
        self.words
            .iter()
            .map(|&w| {
                // Fold each nibble onto its low bit, then count those bits.
                let x = w | (w >> 1);
                let x = x | (x >> 2);
                u64::from((x & LOW_NIBBLE_BITS).count_ones())
            })
            .sum()
    }

    /// Counters stuck at 15.
    pub fn count_saturated(&self) -> u64 {
        (0..self.num_counters)
            .filter(|&c| self.counter(c) == COUNTER_MAX)
            .count() as u64
    }

    /// Fraction of counters that are not zero.
    pub fn fill_ratio(&self) -> f64 {
        self.count_nonzero() as f64 / self.num_counters as f64
    }

    /// `(1 - e^{-k·len/m})^k` (plus what double hashing adds, for a filter read from a
    /// version-1 frame: see `standalone_probes`).
    pub fn estimated_fp_rate(&self) -> f64 {
        self.rule
            .estimated_fp_rate(self.num_counters, self.len, self.num_hashes)
    }

    /// Items estimated from the fill ratio: `-(m/k) ln(1 - nonzero/m)`.
    pub fn estimated_len(&self) -> f64 {
        estimate_items(self.num_counters, self.num_hashes, self.count_nonzero())
    }

    /// Heap bytes of the counters (half a byte each).
    pub fn memory_bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// Statistics for logging or JSON output (`kind` = `"counting"`, `size` = counters).
    pub fn stats(&self) -> FilterStats {
        FilterStats {
            kind: "counting",
            size: self.num_counters,
            hash_count: self.num_hashes,
            items_added: self.len,
            fill_ratio: self.fill_ratio(),
            estimated_fp_rate: self.estimated_fp_rate(),
            estimated_items: self.estimated_len(),
            memory_bytes: self.memory_bytes(),
        }
    }

    /// The checksummed serialized form (see the module docs of [`BloomFilter`](crate::BloomFilter)).
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = FrameHeader {
            kind: FrameKind::Counting,
            rule: self.rule,
            num_hashes: self.num_hashes,
            size: self.num_counters,
            items: self.len,
        };
        frame::encode(&header, &self.words)
    }

    /// Decodes [`to_bytes`](Self::to_bytes) output, refusing anything damaged.
    pub fn from_bytes(bytes: &[u8]) -> Result<CountingBloomFilter, FilterError> {
        let (header, words) = frame::decode(bytes, FrameKind::Counting)?;
        check_params(header.size, header.num_hashes).map_err(to_corrupt)?;
        Ok(CountingBloomFilter {
            words,
            num_counters: header.size,
            num_hashes: header.num_hashes,
            len: header.items,
            rule: header.rule,
        })
    }
}

fn check_params(num_counters: u64, num_hashes: u32) -> Result<(), FilterError> {
    if num_counters == 0 || num_counters > MAX_NUM_BITS {
        return Err(FilterError::InvalidArgument(format!(
            "counter count must be in 1..={MAX_NUM_BITS}, got {num_counters}"
        )));
    }
    if num_hashes == 0 || num_hashes > MAX_HASHES {
        return Err(FilterError::InvalidArgument(format!(
            "hash count must be in 1..={MAX_HASHES}, got {num_hashes}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_size_is_an_error_not_an_abort() {
        let e = CountingBloomFilter::with_rate(10_000_000_000_000, 0.01).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
        assert!(CountingBloomFilter::with_rate(1000, 0.01).is_ok());
    }

    #[test]
    fn counters_saturate_and_are_never_decremented() {
        // One counter, one probe: every item shares it.
        let mut f = CountingBloomFilter::new(1, 1).unwrap();
        for i in 0..20u32 {
            f.insert(i.to_le_bytes());
        }
        assert_eq!(f.counter(0), COUNTER_MAX);
        assert_eq!(f.count_saturated(), 1);
        for i in 0..20u32 {
            assert!(f.remove(i.to_le_bytes()));
        }
        // Stuck at 15: the filter can no longer prove anything absent, but it never lies.
        assert_eq!(f.counter(0), COUNTER_MAX);
        assert!(f.contains("anything"));
        assert!(f.is_empty());
    }

    #[test]
    fn remove_refuses_absent_items() {
        let mut f = CountingBloomFilter::new(1000, 4).unwrap();
        assert!(!f.remove("ghost"));
        f.insert("a");
        let before = f.clone();
        assert!(!f.remove("ghost"));
        assert_eq!(f, before);
        assert!(f.remove("a"));
        assert!(!f.contains("a"));
        assert_eq!(f.count_nonzero(), 0);
    }

    #[test]
    fn duplicates_are_counted_and_need_as_many_removals() {
        let mut f = CountingBloomFilter::new(1000, 4).unwrap();
        f.insert("x");
        f.insert("x");
        assert_eq!(f.len(), 2);
        assert!(f.remove("x"));
        assert!(f.contains("x"));
        assert!(f.remove("x"));
        assert!(!f.contains("x"));
    }

    #[test]
    fn nibble_popcount_matches_a_plain_count() {
        let mut f = CountingBloomFilter::new(37, 3).unwrap();
        for i in 0..9u32 {
            f.insert(i.to_le_bytes());
        }
        let plain = (0..37).filter(|&c| f.counter(c) > 0).count() as u64;
        assert_eq!(f.count_nonzero(), plain);
        let v = serde_json::to_value(f.stats()).unwrap();
        assert_eq!(v["kind"], "counting");
        assert_eq!(v["items_added"], 9);
    }

    #[test]
    fn invalid_arguments_are_errors() {
        assert!(CountingBloomFilter::new(0, 1).is_err());
        assert!(CountingBloomFilter::new(10, 0).is_err());
        assert!(CountingBloomFilter::with_rate(0, 0.1).is_err());
        assert!(CountingBloomFilter::with_rate(10, f64::NAN).is_err());
        assert!(CountingBloomFilter::with_rate(10, 1.0).is_err());
    }

    #[test]
    fn the_empty_item_counts_in_and_out_cleanly() {
        let mut f = CountingBloomFilter::with_rate(1000, 0.01).unwrap();
        for _ in 0..3 {
            f.insert("");
        }
        assert_eq!(f.count_nonzero(), 7, "seven distinct counters");
        assert_eq!(f.count_saturated(), 0);
        for _ in 0..3 {
            assert!(f.remove(""));
        }
        assert!(!f.contains(""));
        assert_eq!(f.count_nonzero(), 0);
        // Fourteen inserts of one item stay below saturation: +1 per counter each.
        for _ in 0..14 {
            f.insert("");
        }
        assert_eq!(f.count_saturated(), 0);
        for _ in 0..14 {
            assert!(f.remove(""));
        }
        assert_eq!(f.count_nonzero(), 0);
    }
}
