//! `BloomFilter`: the standalone Bloom filter of the source documents.
//!
//! A Bloom filter is a set that answers "definitely not present" or "probably
//! present" in `m` bits, whatever the size of the items. Inserting an item sets `k`
//! bits chosen by its hash; asking about an item checks them. A zero bit proves the
//! item was never inserted; all-ones may be a coincidence of other items (a false
//! positive, at the rate [`sizing::false_positive_rate`] predicts). Items cannot be
//! removed (see [`CountingBloomFilter`](crate::CountingBloomFilter) for that).
//!
//! Items are hashed once with MurmurHash3 x64_128; the halves pick `k` *distinct* bits
//! from a mixed sequence (rule 2 of `standalone_probes`,
//! multiply-shift instead of `%`), so no item, the empty one included, sets fewer than
//! `k` bits. Filters read from version-1 bytes keep the double hashing they were
//! written with. Bits live in `u64` words so that fill ratio is a hardware popcount
//! per word.
//!
//! # Serialized form
//!
//! [`BloomFilter::to_bytes`] writes a 28-byte header, the words and a CRC-32, all
//! little-endian (the same frame as the counting filter, with kind 1):
//!
//! ```text
//! offset  size  field
//!      0     4  magic "BKVF"
//!      4     1  version: 2 (distinct probes); 1 (double hashing) is still read
//!      5     1  kind = 1 (BloomFilter)
//!      6     2  reserved = 0
//!      8     4  num_hashes  (u32, 1..=64)
//!     12     8  num_bits    (u64, 1..=2^48)
//!     20     8  items_added (u64)
//!     28   8·W  bit words, W = ceil(num_bits / 64), bit i = word[i/64] >> (i%64) & 1
//! 28+8W     4  CRC-32 (IEEE, crc32fast) of bytes 0 .. 28+8W
//! ```
//!
//! [`BloomFilter::from_bytes`] checks length, checksum, magic, version, kind and sizes
//! before it allocates anything (the copy is then bounded by the input's length), and
//! on the copy that no bit beyond `num_bits` is set.

use serde::Serialize;

use crate::error::FilterError;
use crate::frame::{self, FrameHeader, FrameKind};
use crate::sizing::{self, MAX_NUM_BITS};
use crate::standalone_probes::ProbeRule;

/// The most hash functions a standalone filter accepts. Beyond 64 the optimum would
/// need over 92 bits per item and a false-positive rate below 2^-64.
pub const MAX_HASHES: u32 = 64;

/// A Bloom filter over arbitrary byte strings, sized by bits or by (items, rate).
///
/// ```
/// use bloomkv_filter::BloomFilter;
///
/// let mut seen = BloomFilter::with_rate(1000, 0.01)?;
/// assert_eq!((seen.num_bits(), seen.num_hashes()), (9586, 7));
/// assert!(seen.insert("apple"));        // new: some bit went from 0 to 1
/// assert!(!seen.insert("apple"));       // already there: nothing changed
/// assert!(seen.contains("apple"));
/// assert!(!seen.contains("watermelon")); // certainly absent (with high probability)
///
/// let bytes = seen.to_bytes();
/// assert_eq!(BloomFilter::from_bytes(&bytes)?, seen);
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloomFilter {
    words: Vec<u64>,
    num_bits: u64,
    num_hashes: u32,
    len: u64,
    /// Where probes land: the current rule, or the one the bytes were written with.
    rule: ProbeRule,
}

/// A filter's statistics, serializable to JSON with the field names the source
/// documents print (`size`, `hash_count`, `items_added`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterStats {
    /// `"bloom"` or `"counting"`.
    pub kind: &'static str,
    /// Bits (or counters) in the array: `m`.
    pub size: u64,
    /// Hash functions (probes) per item: `k`.
    pub hash_count: u32,
    /// Items added (see [`BloomFilter::len`] for what counts).
    pub items_added: u64,
    /// Fraction of bits (counters) that are non-zero.
    pub fill_ratio: f64,
    /// `(1 - e^{-k·items_added/m})^k`, as [`BloomFilter::estimated_fp_rate`].
    pub estimated_fp_rate: f64,
    /// Items estimated from the fill ratio alone: `-(m/k) ln(1 - fill_ratio)`.
    pub estimated_items: f64,
    /// Heap bytes of the array.
    pub memory_bytes: u64,
}

impl BloomFilter {
    /// An empty filter of `num_bits` bits probed `num_hashes` times per item.
    ///
    /// Errors when `num_bits` is 0 or above 2^48, or `num_hashes` is 0 or above
    /// [`MAX_HASHES`], and when the bit array cannot be allocated: above 1 TiB
    /// (2^43 bits), or more than the system will give. An absurd size is an error,
    /// never an aborted process.
    pub fn new(num_bits: u64, num_hashes: u32) -> Result<BloomFilter, FilterError> {
        check_params(num_bits, num_hashes)?;
        let words = zeroed_words(words_for(num_bits)?)?;
        Ok(BloomFilter {
            words,
            num_bits,
            num_hashes,
            len: 0,
            rule: ProbeRule::CURRENT,
        })
    }

    /// An empty filter sized for `expected_items` at false-positive rate `fp_rate`
    /// ([`sizing::optimal_num_bits`], [`sizing::optimal_num_hashes`]). Below a rate
    /// of about 1e-19 the optimum would need more than [`MAX_HASHES`] hash functions:
    /// the filter then gets `MAX_HASHES` and the bits those need for `fp_rate`.
    ///
    /// Errors as [`BloomFilter::new`] does: `with_rate(10_000_000_000_000, 0.01)`
    /// would need 12 TB and is refused.
    pub fn with_rate(expected_items: u64, fp_rate: f64) -> Result<BloomFilter, FilterError> {
        let (m, k) = sizing::standalone_shape(expected_items, fp_rate, MAX_HASHES)?;
        BloomFilter::new(m, k)
    }

    /// Adds `item`. Returns `true` if the item was new to the filter (at least one of
    /// its bits was zero) and `false` if it may have been added before, so a
    /// de-duplicating caller needs one call, not `contains` then `insert`.
    pub fn insert(&mut self, item: impl AsRef<[u8]>) -> bool {
        let slots = self
            .rule
            .slots(item.as_ref(), self.num_hashes, self.num_bits);
        self.len = self.len.saturating_add(1);
        let mut changed = 0u64;
        for &bit in slots.as_slice() {
            let mask = 1u64 << (bit & 63);
            if let Some(w) = self.words.get_mut((bit >> 6) as usize) {
                changed |= !*w & mask;
                *w |= mask;
            }
        }
        changed != 0
    }

    /// `false` if `item` was certainly never inserted; `true` if it probably was.
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        let slots = self
            .rule
            .slots(item.as_ref(), self.num_hashes, self.num_bits);
        // A word beyond the array cannot exist for a consistent filter; counting it as
        // set keeps the answer a "maybe", never a false negative.
        slots.as_slice().iter().all(|&bit| {
            self.words
                .get((bit >> 6) as usize)
                .is_none_or(|w| (w >> (bit & 63)) & 1 == 1)
        })
    }

    /// Bits in the array (`m`).
    pub fn num_bits(&self) -> u64 {
        self.num_bits
    }

    /// Hash functions (probes) per item (`k`).
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// Calls to [`insert`](Self::insert) (the documents' `items_added`), duplicates
    /// included: the filter cannot tell a duplicate from a false positive. Callers
    /// that insert duplicates can count `insert`'s `true` answers instead, or use
    /// [`estimated_len`](Self::estimated_len).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no item has been added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bits set to one (hardware popcount over the words).
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Fraction of bits set. About one half for a filter filled to its design size.
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.num_bits as f64
    }

    /// The false-positive rate predicted for the items added so far:
    /// `(1 - e^{-k·len/m})^k` (plus what double hashing adds, for a filter read from a
    /// version-1 frame: see `standalone_probes`).
    pub fn estimated_fp_rate(&self) -> f64 {
        self.rule
            .estimated_fp_rate(self.num_bits, self.len, self.num_hashes)
    }

    /// Items estimated from the fill ratio alone (Swamidass and Baldi):
    /// `n* = -(m/k) ln(1 - X/m)` for `X` bits set. Infinite for a full filter.
    ///
    /// Useful after [`union`](Self::union), or for a filter read from bytes whose
    /// writer over-inserted.
    pub fn estimated_len(&self) -> f64 {
        estimate_items(self.num_bits, self.num_hashes, self.count_ones())
    }

    /// Merges `other` into `self`: afterwards `self` contains every item of either.
    ///
    /// Both filters must have the same `num_bits`, `num_hashes` and probe rule (a
    /// filter read from version-1 bytes keeps version 1's rule). The item count becomes the fill-ratio estimate, clamped
    /// between the larger of the two counts and their sum, since items present in both
    /// cannot be told apart.
    pub fn union(&mut self, other: &BloomFilter) -> Result<(), FilterError> {
        if self.num_bits != other.num_bits
            || self.num_hashes != other.num_hashes
            || self.rule != other.rule
        {
            return Err(FilterError::InvalidArgument(format!(
                "cannot unite a filter of {} bits, {} hashes, version {} with one of {} bits, {} hashes, version {}",
                self.num_bits,
                self.num_hashes,
                self.rule.frame_version(),
                other.num_bits,
                other.num_hashes,
                other.rule.frame_version()
            )));
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
        let lo = self.len.max(other.len);
        let hi = self.len.saturating_add(other.len);
        let est = self.estimated_len();
        self.len = if est.is_finite() {
            (est.round() as u64).clamp(lo, hi)
        } else {
            hi
        };
        Ok(())
    }

    /// Removes every item, keeping the size.
    pub fn clear(&mut self) {
        self.words.fill(0);
        self.len = 0;
    }

    /// Heap bytes of the bit array.
    pub fn memory_bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// Statistics for logging or JSON output.
    ///
    /// ```
    /// let mut f = bloomkv_filter::BloomFilter::new(20, 2)?;
    /// f.insert("kiwi");
    /// let json = serde_json::to_string(&f.stats()).unwrap();
    /// assert!(json.contains("\"size\":20") && json.contains("\"hash_count\":2"));
    /// # Ok::<(), bloomkv_filter::FilterError>(())
    /// ```
    pub fn stats(&self) -> FilterStats {
        FilterStats {
            kind: "bloom",
            size: self.num_bits,
            hash_count: self.num_hashes,
            items_added: self.len,
            fill_ratio: self.fill_ratio(),
            estimated_fp_rate: self.estimated_fp_rate(),
            estimated_items: self.estimated_len(),
            memory_bytes: self.memory_bytes(),
        }
    }

    /// The checksummed serialized form (layout in the module docs), in the frame
    /// version of this filter's probe rule.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = FrameHeader {
            kind: FrameKind::Bloom,
            rule: self.rule,
            num_hashes: self.num_hashes,
            size: self.num_bits,
            items: self.len,
        };
        frame::encode(&header, &self.words)
    }

    /// Decodes [`to_bytes`](Self::to_bytes) output, refusing anything damaged with
    /// [`FilterError::Corrupt`].
    pub fn from_bytes(bytes: &[u8]) -> Result<BloomFilter, FilterError> {
        let (header, words) = frame::decode(bytes, FrameKind::Bloom)?;
        check_params(header.size, header.num_hashes).map_err(to_corrupt)?;
        Ok(BloomFilter {
            words,
            num_bits: header.size,
            num_hashes: header.num_hashes,
            len: header.items,
            rule: header.rule,
        })
    }
}

pub(crate) fn estimate_items(m: u64, k: u32, ones: u64) -> f64 {
    let m = m as f64;
    -(m / f64::from(k)) * (1.0 - ones as f64 / m).ln()
}

fn check_params(num_bits: u64, num_hashes: u32) -> Result<(), FilterError> {
    if num_bits == 0 || num_bits > MAX_NUM_BITS {
        return Err(FilterError::InvalidArgument(format!(
            "bit count must be in 1..={MAX_NUM_BITS}, got {num_bits}"
        )));
    }
    if num_hashes == 0 || num_hashes > MAX_HASHES {
        return Err(FilterError::InvalidArgument(format!(
            "hash count must be in 1..={MAX_HASHES}, got {num_hashes}"
        )));
    }
    Ok(())
}

fn words_for(num_bits: u64) -> Result<usize, FilterError> {
    usize::try_from(num_bits.div_ceil(64))
        .map_err(|_| FilterError::InvalidArgument(format!("{num_bits} bits do not fit in memory")))
}

/// The most memory one filter's array may take: 1 TiB. Beyond it an allocation is
/// refused up front, whatever the system might promise.
pub(crate) const MAX_FILTER_BYTES: u64 = 1 << 40;

/// `words` zeroed words, or an error if they exceed [`MAX_FILTER_BYTES`] or the
/// allocator refuses them (instead of aborting the process). The trial reservation is
/// released and the array then allocated zeroed, so its pages are still only mapped
/// when first written.
pub(crate) fn zeroed_words(words: usize) -> Result<Vec<u64>, FilterError> {
    let bytes = (words as u64).saturating_mul(8);
    if bytes > MAX_FILTER_BYTES {
        return Err(FilterError::InvalidArgument(format!(
            "a filter of {bytes} bytes exceeds the {MAX_FILTER_BYTES}-byte (1 TiB) limit"
        )));
    }
    let mut trial: Vec<u64> = Vec::new();
    trial.try_reserve_exact(words).map_err(|e| {
        FilterError::InvalidArgument(format!(
            "a filter of {bytes} bytes cannot be allocated: {e}"
        ))
    })?;
    drop(trial);
    Ok(vec![0; words])
}

pub(crate) fn to_corrupt(e: FilterError) -> FilterError {
    match e {
        FilterError::InvalidArgument(m) => FilterError::Corrupt(m),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Below about 1e-19 the optimal hash count passes `MAX_HASHES`: the count was
    /// capped at 64 but the bits stayed the optimum's, so 1e-30 came out as 3.5e-29.
    #[test]
    fn with_rate_meets_rates_that_need_more_than_max_hashes() {
        let n = 1_000_000;
        for p in [1e-30, 1e-50] {
            let f = BloomFilter::with_rate(n, p).unwrap();
            let c = crate::CountingBloomFilter::with_rate(n, p).unwrap();
            assert_eq!(f.num_hashes(), MAX_HASHES);
            let rate = sizing::false_positive_rate(f.num_bits(), n, f.num_hashes()).unwrap();
            assert!(rate <= p * 1.001, "{p}: {rate}");
            assert_eq!(
                (c.num_counters(), c.num_hashes()),
                (f.num_bits(), f.num_hashes())
            );
        }
    }

    #[test]
    fn new_filter_is_empty() {
        let f = BloomFilter::new(100, 3).unwrap();
        assert!(f.is_empty());
        assert_eq!(f.len(), 0);
        assert_eq!(f.fill_ratio(), 0.0);
        assert_eq!(f.estimated_fp_rate(), 0.0);
        assert!(!f.contains("anything"));
        assert_eq!(f.memory_bytes(), 16);
    }

    #[test]
    fn invalid_arguments_are_errors() {
        assert!(BloomFilter::new(0, 3).is_err());
        assert!(BloomFilter::new(10, 0).is_err());
        assert!(BloomFilter::new(10, MAX_HASHES + 1).is_err());
        assert!(BloomFilter::new(MAX_NUM_BITS + 1, 1).is_err());
    }

    #[test]
    fn an_absurd_size_is_an_error_not_an_abort() {
        // 10^13 items at 1%: about 12 TB of bits.
        let e = BloomFilter::with_rate(10_000_000_000_000, 0.01).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
        // Just over the limit, and just under it in bits but not in bytes.
        assert!(BloomFilter::new((MAX_FILTER_BYTES * 8) + 1, 1).is_err());
        assert!(zeroed_words((MAX_FILTER_BYTES / 8) as usize + 1).is_err());
        assert_eq!(zeroed_words(3).unwrap(), vec![0, 0, 0]);
        assert!(BloomFilter::with_rate(0, 0.01).is_err());
        for p in [0.0, 1.0, -1.0, 2.0, f64::NAN] {
            assert!(matches!(
                BloomFilter::with_rate(10, p),
                Err(FilterError::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn union_requires_equal_parameters_and_keeps_all_items() {
        let mut a = BloomFilter::new(10_000, 5).unwrap();
        let mut b = BloomFilter::new(10_000, 5).unwrap();
        for i in 0..300u32 {
            a.insert(i.to_le_bytes());
            b.insert((i + 150).to_le_bytes());
        }
        a.union(&b).unwrap();
        for i in 0..450u32 {
            assert!(a.contains(i.to_le_bytes()));
        }
        // 450 distinct items; the estimate is within a few percent.
        assert!((a.len() as f64 - 450.0).abs() < 25.0, "{}", a.len());
        assert!(a.union(&BloomFilter::new(10_001, 5).unwrap()).is_err());
        assert!(a.union(&BloomFilter::new(10_000, 4).unwrap()).is_err());
    }

    #[test]
    fn estimated_len_tracks_the_true_count() {
        let mut f = BloomFilter::with_rate(10_000, 0.01).unwrap();
        for i in 0..10_000u32 {
            f.insert(i.to_be_bytes());
        }
        let est = f.estimated_len();
        assert!((est - 10_000.0).abs() < 300.0, "{est}");
        // At design size, about half the bits are set.
        assert!((f.fill_ratio() - 0.5).abs() < 0.02, "{}", f.fill_ratio());
        let full = BloomFilter {
            words: vec![u64::MAX],
            num_bits: 64,
            num_hashes: 1,
            len: 0,
            rule: ProbeRule::CURRENT,
        };
        assert!(full.estimated_len().is_infinite());
    }

    /// A filter of 1.5 · 2^32 bits (768 MiB): a third of the probes land beyond bit
    /// 2^32, and every item is found again. Ignored by default for its memory; run
    /// with `--ignored`.
    #[test]
    #[ignore]
    fn filter_beyond_2_pow_32_bits_works() {
        let m = 3u64 << 31;
        let mut f = BloomFilter::new(m, 3).unwrap();
        for i in 0..100_000u32 {
            f.insert(i.to_le_bytes());
        }
        for i in 0..100_000u32 {
            assert!(f.contains(i.to_le_bytes()));
        }
        let high_word = (1usize << 32) / 64;
        let high_bits: u32 = f.words[high_word..].iter().map(|w| w.count_ones()).sum();
        assert!(high_bits > 0, "no bit beyond 2^32 was ever set");
        let all_bits = f.count_ones();
        assert!(
            u64::from(high_bits) * 4 > all_bits,
            "{high_bits} of {all_bits} high"
        );
        assert_eq!(f.stats().size, m);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut f = BloomFilter::new(1000, 4).unwrap();
        f.insert("a");
        f.clear();
        assert!(f.is_empty() && !f.contains("a") && f.count_ones() == 0);
    }

    #[test]
    fn stats_serialize_with_the_documents_field_names() {
        let mut f = BloomFilter::with_rate(1000, 0.01).unwrap();
        for fruit in ["apple", "banana", "cherry"] {
            f.insert(fruit);
        }
        let v = serde_json::to_value(f.stats()).unwrap();
        assert_eq!(v["size"], 9586);
        assert_eq!(v["hash_count"], 7);
        assert_eq!(v["items_added"], 3);
        assert_eq!(v["memory_bytes"], 150 * 8);
        assert!(v["fill_ratio"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn the_empty_item_sets_k_distinct_bits() {
        let mut f = BloomFilter::with_rate(1000, 0.01).unwrap();
        assert_eq!(f.num_hashes(), 7);
        assert!(f.insert(""));
        assert_eq!(f.count_ones(), 7);
        assert!(f.contains(""));
        // Items whose murmur3 halves are tiny or equal still set k bits each.
        for item in ["", "a", "\0", "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"] {
            let mut f = BloomFilter::new(9586, 7).unwrap();
            f.insert(item);
            assert_eq!(f.count_ones(), 7, "{item:?}");
        }
    }

    #[test]
    fn filters_of_different_rules_do_not_unite() {
        let mut a = BloomFilter::new(128, 2).unwrap();
        let mut b = a.clone();
        b.rule = ProbeRule::DoubleHashing;
        assert!(a.union(&b).is_err());
    }
}
