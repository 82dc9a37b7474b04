//! `BloomPolicy`: the Bloom filter as an SSTable filter policy.
//!
//! A policy is the configuration shared by every table of a store: bits per key and
//! layout. Its builder buffers one [`KeyHash`] per distinct key (the array size depends
//! on the final key count), then sets all bits and writes a
//! [filter block](crate::filter_block) in `finish`. Its reader copies the block's
//! payload once into aligned memory and answers lookups from there.
//!
//! ```text
//!  table writer:  policy.new_builder() → add_key(k)* → finish() → block bytes
//!  table reader:  policy.open_reader(block) → may_contain_hash(KeyHash::of(key))
//! ```
//!
//! Policy names are part of the on-disk contract (a table records the name of the
//! policy that built its filter):
//!
//! | layout      | name                                |
//! |-------------|-------------------------------------|
//! | standard    | `"bloomkv.BloomFilter.standard"`    |
//! | cache-local | `"bloomkv.BloomFilter.cache-local"` |
//!
//! Both layouts write the same block format, and the trailer names the layout, so
//! `open_reader` on either policy opens a block of either layout.

use crate::error::FilterError;
use crate::filter_block;
use crate::hash::KeyHash;
use crate::layout::{
    cache_local_contains, cache_local_insert, cache_local_prefetch, standard_contains,
    standard_insert, standard_prefetch, BloomLayout, Line, MAX_PROBES,
};
use crate::policy::{FilterBuilder, FilterInfo, FilterPolicy, FilterReader};

/// Name of the standard-layout policy (format contract).
pub const STANDARD_POLICY_NAME: &str = "bloomkv.BloomFilter.standard";
/// Name of the cache-local-layout policy (format contract).
pub const CACHE_LOCAL_POLICY_NAME: &str = "bloomkv.BloomFilter.cache-local";

/// The bits per key used everywhere unless configured: about 1% false positives.
pub const DEFAULT_BITS_PER_KEY: f64 = 10.0;
/// Smallest accepted bits per key (about 60% false positives below it: useless).
pub const MIN_BITS_PER_KEY: f64 = 1.0;
/// Largest accepted bits per key (false positives far below 10^-9 already at 45).
pub const MAX_BITS_PER_KEY: f64 = 100.0;

/// A Bloom filter policy: bits per key and layout.
///
/// ```
/// use bloomkv_filter::{BloomLayout, BloomPolicy, FilterPolicy, KeyHash};
///
/// let policy = BloomPolicy::new(10.0)?;
/// assert_eq!(policy.layout(), BloomLayout::CacheLocal);
/// assert_eq!(policy.name(), "bloomkv.BloomFilter.cache-local");
///
/// let mut builder = policy.new_builder();
/// for key in [b"apple".as_slice(), b"banana", b"cherry"] {
///     builder.add_key(key);
/// }
/// let block = builder.finish();
///
/// let reader = policy.open_reader(&block)?;
/// assert!(reader.may_contain(b"banana"));
/// let hash = KeyHash::of(b"banana"); // hash once, ask every table
/// assert!(reader.may_contain_hash(hash));
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BloomPolicy {
    bits_per_key: f64,
    layout: BloomLayout,
    /// Set by [`BloomPolicy::with_num_probes`]; otherwise the layout's choice.
    num_probes: Option<u32>,
}

impl BloomPolicy {
    /// A policy with the default (cache-local) layout.
    ///
    /// Errors unless `bits_per_key` is a number in `1.0..=100.0`.
    pub fn new(bits_per_key: f64) -> Result<BloomPolicy, FilterError> {
        BloomPolicy::with_layout(bits_per_key, BloomLayout::default())
    }

    /// A policy with the standard layout (probes over the whole array).
    pub fn standard(bits_per_key: f64) -> Result<BloomPolicy, FilterError> {
        BloomPolicy::with_layout(bits_per_key, BloomLayout::Standard)
    }

    /// A policy with the cache-local layout (all probes in one 64-byte line).
    pub fn cache_local(bits_per_key: f64) -> Result<BloomPolicy, FilterError> {
        BloomPolicy::with_layout(bits_per_key, BloomLayout::CacheLocal)
    }

    /// A policy with the given layout.
    pub fn with_layout(bits_per_key: f64, layout: BloomLayout) -> Result<BloomPolicy, FilterError> {
        // Written so that NaN fails too.
        if !(MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(FilterError::InvalidArgument(format!(
                "bits per key must be in {MIN_BITS_PER_KEY}..={MAX_BITS_PER_KEY}, got {bits_per_key}"
            )));
        }
        Ok(BloomPolicy {
            bits_per_key,
            layout,
            num_probes: None,
        })
    }

    /// The same policy with a fixed probe count instead of the layout's choice, for
    /// experiments such as measuring the false-positive rate of each `k`.
    ///
    /// Errors unless `num_probes` is in `1..=MAX_PROBES` (30). Blocks record their
    /// probe count, so readers need no such setting.
    pub fn with_num_probes(self, num_probes: u32) -> Result<BloomPolicy, FilterError> {
        if num_probes == 0 || num_probes > MAX_PROBES {
            return Err(FilterError::InvalidArgument(format!(
                "probe count must be in 1..={MAX_PROBES}, got {num_probes}"
            )));
        }
        Ok(BloomPolicy {
            num_probes: Some(num_probes),
            ..self
        })
    }

    /// The layout this policy builds.
    pub fn layout(&self) -> BloomLayout {
        self.layout
    }

    /// Probes per key this policy uses.
    pub fn num_probes(&self) -> u32 {
        self.num_probes
            .unwrap_or_else(|| self.layout.num_probes(self.bits_per_key))
    }
}

impl Default for BloomPolicy {
    /// Cache-local, 10 bits per key.
    fn default() -> BloomPolicy {
        BloomPolicy {
            bits_per_key: DEFAULT_BITS_PER_KEY,
            layout: BloomLayout::default(),
            num_probes: None,
        }
    }
}

impl FilterPolicy for BloomPolicy {
    fn name(&self) -> &str {
        match self.layout {
            BloomLayout::Standard => STANDARD_POLICY_NAME,
            BloomLayout::CacheLocal => CACHE_LOCAL_POLICY_NAME,
        }
    }

    fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(BloomBlockBuilder {
            policy: *self,
            hashes: Vec::new(),
        })
    }

    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        open_filter_block(block)
    }
}

/// Opens a reader over a filter block of any layout, Bloom or Ribbon (the trailer's
/// format version and layout id say which).
pub fn open_filter_block(block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
    if filter_block::format_version(block).is_some_and(crate::ribbon::block::is_ribbon_version) {
        return crate::ribbon::block::open(block);
    }
    let h = filter_block::decode(block)?;
    // `decode` proved payload.len() == num_bits / 8, a multiple of 8 (or 64): the
    // allocations below are bounded by the block's own length.
    let words = h.payload.chunks_exact(8).map(|c| {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        u64::from_le_bytes(b)
    });
    let reader: Box<dyn FilterReader> = match h.layout {
        BloomLayout::Standard => {
            let words: Vec<u64> = words.collect();
            let ones = count_ones(&words);
            Box::new(StandardReader {
                words,
                num_bits: h.num_bits,
                num_probes: h.num_probes,
                num_keys: h.num_keys,
                ones,
            })
        }
        BloomLayout::CacheLocal => {
            let mut lines = vec![Line::default(); h.payload.len() / 64];
            for (i, w) in words.enumerate() {
                if let Some(line) = lines.get_mut(i / 8) {
                    line.0[i % 8] = w;
                }
            }
            let ones = lines.iter().map(|l| count_ones(&l.0)).sum();
            Box::new(CacheLocalReader {
                lines,
                num_probes: h.num_probes,
                num_keys: h.num_keys,
                ones,
            })
        }
    };
    Ok(reader)
}

fn count_ones(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// Buffers key hashes until `finish` knows the key count.
#[derive(Debug)]
struct BloomBlockBuilder {
    policy: BloomPolicy,
    hashes: Vec<KeyHash>,
}

impl FilterBuilder for BloomBlockBuilder {
    fn add_hash(&mut self, hash: KeyHash) {
        // A table holds every version of a user key next to each other; adding the
        // same key again would only spend bits. (Non-adjacent repeats are harmless.)
        if self.hashes.last() != Some(&hash) {
            self.hashes.push(hash);
        }
    }

    fn num_keys(&self) -> u64 {
        self.hashes.len() as u64
    }

    fn finish(&mut self) -> Vec<u8> {
        let hashes = std::mem::take(&mut self.hashes);
        let n = hashes.len() as u64;
        let layout = self.policy.layout;
        let k = self.policy.num_probes();
        let num_bits = layout.num_bits(n, self.policy.bits_per_key);
        match layout {
            BloomLayout::Standard => {
                let mut words = vec![0u64; (num_bits / 64) as usize];
                for h in hashes {
                    standard_insert(&mut words, num_bits, k, h);
                }
                filter_block::encode(layout, k, n, &words)
            }
            BloomLayout::CacheLocal => {
                let mut lines = vec![Line::default(); (num_bits / 512) as usize];
                for h in hashes {
                    cache_local_insert(&mut lines, k, h);
                }
                let words: Vec<u64> = lines.iter().flat_map(|l| l.0).collect();
                filter_block::encode(layout, k, n, &words)
            }
        }
    }
}

/// Reader of a standard-layout block.
#[derive(Debug)]
struct StandardReader {
    words: Vec<u64>,
    num_bits: u64,
    num_probes: u32,
    num_keys: u64,
    ones: u64,
}

impl FilterReader for StandardReader {
    #[inline]
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        standard_contains(&self.words, self.num_bits, self.num_probes, hash)
    }

    #[inline]
    fn prefetch_hash(&self, hash: KeyHash) {
        standard_prefetch(&self.words, self.num_bits, hash);
    }

    fn info(&self) -> FilterInfo {
        info(
            BloomLayout::Standard,
            self.num_bits,
            self.num_keys,
            self.num_probes,
            self.ones,
        )
    }

    fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// Reader of a cache-local block: the payload copied into 64-byte-aligned lines.
#[derive(Debug)]
struct CacheLocalReader {
    lines: Vec<Line>,
    num_probes: u32,
    num_keys: u64,
    ones: u64,
}

impl FilterReader for CacheLocalReader {
    #[inline]
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        cache_local_contains(&self.lines, self.num_probes, hash)
    }

    #[inline]
    fn prefetch_hash(&self, hash: KeyHash) {
        cache_local_prefetch(&self.lines, hash);
    }

    fn info(&self) -> FilterInfo {
        info(
            BloomLayout::CacheLocal,
            self.lines.len() as u64 * 512,
            self.num_keys,
            self.num_probes,
            self.ones,
        )
    }

    fn memory_bytes(&self) -> usize {
        self.lines.len() * 64
    }
}

fn info(
    layout: BloomLayout,
    num_bits: u64,
    num_keys: u64,
    num_probes: u32,
    ones: u64,
) -> FilterInfo {
    FilterInfo {
        layout: layout.name(),
        num_bits,
        num_keys,
        num_probes,
        fill_ratio: ones as f64 / num_bits as f64,
        estimated_fp_rate: layout.estimated_fp_rate(num_bits, num_keys, num_probes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_bits_per_key_are_errors() {
        for bpk in [
            0.0,
            -1.0,
            0.5,
            100.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert!(
                matches!(BloomPolicy::new(bpk), Err(FilterError::InvalidArgument(_))),
                "{bpk}"
            );
            assert!(BloomPolicy::standard(bpk).is_err());
            assert!(BloomPolicy::cache_local(bpk).is_err());
        }
        assert!(BloomPolicy::new(1.0).is_ok());
        assert!(BloomPolicy::new(100.0).is_ok());
    }

    #[test]
    fn names_and_defaults() {
        let d = BloomPolicy::default();
        assert_eq!(d, BloomPolicy::new(10.0).unwrap());
        assert_eq!(d.layout(), BloomLayout::CacheLocal);
        assert_eq!(d.bits_per_key(), 10.0);
        assert_eq!(d.name(), CACHE_LOCAL_POLICY_NAME);
        assert_eq!(
            BloomPolicy::standard(10.0).unwrap().name(),
            STANDARD_POLICY_NAME
        );
        assert_eq!(BloomPolicy::standard(10.0).unwrap().num_probes(), 7);
        assert_eq!(d.num_probes(), 6);
        assert_eq!(d.with_num_probes(3).unwrap().num_probes(), 3);
        assert!(d.with_num_probes(0).is_err());
        assert!(d.with_num_probes(31).is_err());
    }

    #[test]
    fn consecutive_duplicate_keys_are_added_once() {
        let mut b = BloomPolicy::default().new_builder();
        for key in [b"a", b"a", b"b", b"b", b"a"] {
            b.add_key(key);
        }
        assert_eq!(b.num_keys(), 3);
        let block = b.finish();
        assert_eq!(b.num_keys(), 0, "finish resets the builder");
        let r = open_filter_block(&block).unwrap();
        assert_eq!(r.info().num_keys, 3);
    }
}
