//! `RibbonPolicy`: the Ribbon filter as an SSTable filter policy.
//!
//! The builder buffers one [`KeyHash`] per key (16 bytes), then in `finish`:
//!
//! ```text
//!  n = 0 or a table too small for Ribbon to beat Bloom  ->  cache-local Bloom block
//!  shape from n and bits_per_key (slots, r, upper blocks; ribbon::shape)
//!  for seed in 0..4:  band every key (ribbon::band); all fit?  ->  solve, encode, done
//!  every seed failed                                  ->  cache-local Bloom block
//! ```
//!
//! `bits_per_key` is the memory really spent: a Ribbon block, header and trailer
//! included, is at most `bits_per_key · n` bits and within one 64-bit word of it.
//! The Bloom fallback uses the same bits per key, so a table never loses its filter;
//! its array is whole 512-bit lines, so for a handful of keys it is larger than
//! `bits_per_key · n` (one key at 10 bits per key gets one line and its header).
//! Readers open any block, Ribbon or Bloom, by its trailer.
//!
//! Policy name (format contract, recorded in each table): `"bloomkv.Ribbon"`.

use super::band::Band;
use super::block::{self, OVERHEAD_LEN};
use super::hash::{ribbon_hash, seed_salt};
use super::shape::{slot_factor, Shape};
use super::solve::back_substitute;
use crate::bloom_policy::{open_filter_block, BloomPolicy, MAX_BITS_PER_KEY, MIN_BITS_PER_KEY};
use crate::error::FilterError;
use crate::hash::KeyHash;
use crate::layout::BloomLayout;
use crate::policy::{FilterBuilder, FilterPolicy, FilterReader};

/// Name of the Ribbon policy (format contract).
pub const RIBBON_POLICY_NAME: &str = "bloomkv.Ribbon";

/// Seeds tried before falling back to a Bloom block. With the default slots per key a
/// seed fails with probability about 15%, so all four fail about once in 2,000 tables.
pub const RIBBON_MAX_ATTEMPTS: u32 = 4;

/// A Ribbon filter policy: about a quarter less memory than a Bloom filter at the same
/// false-positive rate, or about a sixth of a cache-local Bloom filter's false
/// positives at the same memory (docs/FILTERS.md, "Measured").
///
/// ```
/// use bloomkv_filter::{FilterPolicy, RibbonPolicy};
///
/// let policy = RibbonPolicy::new(10.0)?;
/// assert_eq!(policy.name(), "bloomkv.Ribbon");
/// let mut builder = policy.new_builder();
/// for i in 0..10_000u32 {
///     builder.add_key(&i.to_le_bytes());
/// }
/// let block = builder.finish();
/// assert!(block.len() * 8 <= 10 * 10_000);          // bits per key = real memory
/// let reader = policy.open_reader(&block)?;
/// assert_eq!(reader.info().layout, "ribbon");
/// assert!(reader.may_contain(&42u32.to_le_bytes())); // never a false negative
/// assert!(reader.info().estimated_fp_rate < 0.0025);
/// # Ok::<(), bloomkv_filter::FilterError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RibbonPolicy {
    bits_per_key: f64,
    /// Set by [`RibbonPolicy::with_slots_per_key`]; otherwise `shape::slot_factor(n)`.
    slots_per_key: Option<f64>,
}

impl RibbonPolicy {
    /// A Ribbon policy spending `bits_per_key` bits of filter block per key.
    ///
    /// Errors unless `bits_per_key` is a number in `1.0..=100.0`.
    pub fn new(bits_per_key: f64) -> Result<RibbonPolicy, FilterError> {
        if !(MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(FilterError::InvalidArgument(format!(
                "bits per key must be in {MIN_BITS_PER_KEY}..={MAX_BITS_PER_KEY}, got {bits_per_key}"
            )));
        }
        Ok(RibbonPolicy {
            bits_per_key,
            slots_per_key: None,
        })
    }

    /// The same policy with a fixed number of slots per key instead of the measured
    /// default (about 1.08), for experiments: fewer slots leave more bits per slot but
    /// make construction fail more often. A block never holds more keys (repeats
    /// included) than slots, so below 1.0 a table gets the Bloom fallback unless
    /// rounding up to whole 64-slot blocks leaves room.
    ///
    /// Errors unless `slots_per_key` is in `(0, 16]`.
    pub fn with_slots_per_key(self, slots_per_key: f64) -> Result<RibbonPolicy, FilterError> {
        if !(slots_per_key > 0.0 && slots_per_key <= 16.0) {
            return Err(FilterError::InvalidArgument(format!(
                "slots per key must be in (0, 16], got {slots_per_key}"
            )));
        }
        Ok(RibbonPolicy {
            slots_per_key: Some(slots_per_key),
            ..self
        })
    }

    /// The false-positive rate a block of `num_keys` distinct keys is expected to have:
    /// its Ribbon shape's (slots, result columns), or the Bloom fallback's where the
    /// policy would write that instead. No block is built.
    pub fn expected_fp_rate(&self, num_keys: u64) -> f64 {
        match self.shape_for(num_keys) {
            Some(shape) => shape.expected_fp(),
            None => {
                let fallback = self.fallback();
                let layout = BloomLayout::CacheLocal;
                let bits = layout.num_bits(num_keys, self.bits_per_key);
                layout.estimated_fp_rate(bits, num_keys, fallback.num_probes())
            }
        }
    }

    /// The Bloom policy used when a table gets no Ribbon filter.
    fn fallback(&self) -> BloomPolicy {
        BloomPolicy::cache_local(self.bits_per_key).unwrap_or_default()
    }

    /// The Ribbon shape for `n` keys, if Ribbon beats the fallback's expected rate.
    fn shape_for(&self, n: u64) -> Option<Shape> {
        if n == 0 {
            return None;
        }
        let budget = self.bits_per_key * n as f64 - (OVERHEAD_LEN * 8) as f64;
        let factor = self.slots_per_key.unwrap_or_else(|| slot_factor(n));
        let shape = Shape::for_keys(n, budget, factor)?;
        // The textbook Bloom rate at its best k: a little below what either Bloom
        // layout achieves, so Ribbon is chosen only where it surely wins, and cheap
        // (the exact cache-local model would cost more than building a small table).
        let bloom = BloomLayout::Standard;
        let bits = bloom.num_bits(n, self.bits_per_key);
        let bloom_fp = bloom.estimated_fp_rate(bits, n, bloom.num_probes(self.bits_per_key));
        // More keys than slots (repeats included) can band, the repeats implied, but
        // a reader refuses such a block: it cannot be what a sound builder wrote.
        (shape.expected_fp() < bloom_fp && n <= shape.slots()).then_some(shape)
    }
}

impl Default for RibbonPolicy {
    /// 10 bits per key.
    fn default() -> RibbonPolicy {
        RibbonPolicy {
            bits_per_key: crate::bloom_policy::DEFAULT_BITS_PER_KEY,
            slots_per_key: None,
        }
    }
}

impl FilterPolicy for RibbonPolicy {
    fn name(&self) -> &str {
        RIBBON_POLICY_NAME
    }

    fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(RibbonBuilder {
            policy: *self,
            hashes: Vec::new(),
        })
    }

    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        open_filter_block(block)
    }
}

/// Buffers key hashes until `finish` knows the key count.
#[derive(Debug)]
struct RibbonBuilder {
    policy: RibbonPolicy,
    hashes: Vec<KeyHash>,
}

impl RibbonBuilder {
    /// One construction attempt with `seed`: the block, or `None` if banding failed.
    fn try_build(hashes: &[KeyHash], shape: &Shape, seed: u32) -> Option<Vec<u8>> {
        let mut band = Band::new(usize::try_from(shape.slots()).ok()?);
        let (starts, salt) = (shape.num_starts(), seed_salt(seed));
        for &h in hashes {
            let r = ribbon_hash(h, salt, starts);
            if !band.add(r.start as usize, r.coeff, r.fingerprint) {
                return None;
            }
        }
        let words = back_substitute(&band, shape);
        drop(band);
        Some(block::encode(shape, seed, hashes.len() as u64, &words))
    }
}

impl FilterBuilder for RibbonBuilder {
    fn add_hash(&mut self, hash: KeyHash) {
        // Adjacent repeats (versions of one user key) would only spend bits; other
        // repeats are harmless: banding finds them implied.
        if self.hashes.last() != Some(&hash) {
            self.hashes.push(hash);
        }
    }

    fn num_keys(&self) -> u64 {
        self.hashes.len() as u64
    }

    fn finish(&mut self) -> Vec<u8> {
        let hashes = std::mem::take(&mut self.hashes);
        if let Some(shape) = self.policy.shape_for(hashes.len() as u64) {
            for seed in 0..RIBBON_MAX_ATTEMPTS {
                if let Some(block) = Self::try_build(&hashes, &shape, seed) {
                    return block;
                }
            }
        }
        let mut bloom = self.policy.fallback().new_builder();
        for h in hashes {
            bloom.add_hash(h);
        }
        bloom.finish()
    }
}
