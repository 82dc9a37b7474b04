//! `RibbonPolicy`: the Ribbon filter as an SSTable filter policy.
//!
//! The builder buffers one [`KeyHash`] per key (16 bytes), then in `finish`:
//!
//! ```text
//!  n ≥ 4096 and version 4 (the default):
//!    for seed in 0..4:  band into bumped layers (ribbon::bump); the last layer
//!                       fits?  ->  split the bits, solve, encode version 4, done
//!  n = 0 or a table too small for Ribbon to beat Bloom  ->  cache-local Bloom block
//!  shape from n and bits_per_key (slots, r, upper blocks; ribbon::shape)
//!  for seed in 0..4:  band every key (ribbon::band); all fit?  ->  solve, encode, done
//!  every seed failed                                  ->  cache-local Bloom block
//! ```
//!
//! So a bumped build that fails falls back to a version-3 block, and that to Bloom:
//! a table never goes without a filter, and [`RibbonPolicy::construction_outcome`]
//! says which block a key set got.
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
use super::block::{self, BUMPED_RIBBON_FORMAT_VERSION, OVERHEAD_LEN, RIBBON_FORMAT_VERSION};
use super::bump;
use super::bumped_block::{self, LayerParts};
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

/// A Ribbon filter policy: under 1% false positives at 7.1 bits per key where a Bloom
/// filter needs 10, or about a ninth of a cache-local Bloom filter's false positives
/// at the same memory, for tables of 4,096 keys or more (bumped blocks; smaller tables
/// get version 3, about a sixth; docs/FILTERS.md).
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
    /// The block version written: 4 (bumped, default) or 3.
    version: u8,
    /// Makes every bumped build fail, to test the fallback to version 3.
    #[cfg(test)]
    fail_bumped: bool,
}

/// Fewest keys for which a bumped (version 4) block is built: below it the layers'
/// fixed tails cost more than bumping saves, and a version-3 block is written.
pub const BUMPED_MIN_KEYS: u64 = 4096;

/// Slots per key a bumped block of `n` keys spends over all its layers, as measured
/// (`ribbon_bump_sweep`: 1.025 at 4,096 keys, 1.017 at 10^4, 1.012 at 10^5, 1.010 at
/// 10^6): what [`RibbonPolicy::expected_fp_rate`] assumes before a block is built.
fn bumped_slots_per_key(n: u64) -> f64 {
    1.010 + 60.0 / n.max(1) as f64
}

/// Which block a key set got: the bumped Ribbon block, the standard one (after the
/// bumped one failed or was not tried), or the Bloom fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RibbonOutcome {
    /// Format version 4, built with this seed.
    Bumped { seed: u32 },
    /// Format version 3, built with this seed.
    Standard { seed: u32 },
    /// A cache-local Bloom block.
    Bloom,
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
            version: BUMPED_RIBBON_FORMAT_VERSION,
            #[cfg(test)]
            fail_bumped: false,
        })
    }

    /// The same policy writing blocks of filter-block format `version`: 4 (bumped
    /// Ribbon, the default) or 3 (standard Ribbon with 64-bit rows, what builds before
    /// version 4 wrote). Readers open either, whatever the policy.
    ///
    /// Errors for any other version (2 is read, never written).
    pub fn with_format_version(self, version: u8) -> Result<RibbonPolicy, FilterError> {
        if version != BUMPED_RIBBON_FORMAT_VERSION && version != RIBBON_FORMAT_VERSION {
            return Err(FilterError::InvalidArgument(format!(
                "ribbon blocks are written in format version 3 or 4, not {version}"
            )));
        }
        Ok(RibbonPolicy { version, ..self })
    }

    /// The format version this policy writes for tables large enough (smaller ones get
    /// version 3 or Bloom).
    pub fn format_version(&self) -> u8 {
        self.version
    }

    /// Builds the block for `hashes` and says which kind it is: what `finish` writes,
    /// for tests and tools that must see the fallback path taken.
    pub fn construction_outcome(&self, hashes: &[KeyHash]) -> (Vec<u8>, RibbonOutcome) {
        build(self, hashes)
    }

    /// The same policy with a fixed number of slots per key instead of the measured
    /// default (about 1.08), for experiments: fewer slots leave more bits per slot but
    /// make construction fail more often. In a bumped block (version 4) it sets the
    /// slots per key of the last, standard layer only (the bumping layers' are part of
    /// the format's design, `ribbon::bump`). A block never holds more keys (repeats
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
    ///
    /// For a bumped block (version 4, from [`BUMPED_MIN_KEYS`] keys) the rate is
    /// predicted from the slots per key bumping was measured to need, about 1%
    /// over the keys; a built block's own rate (`FilterReader::info`) is exact.
    pub fn expected_fp_rate(&self, num_keys: u64) -> f64 {
        if let Some(shape) = self.bumped_model_shape(num_keys) {
            return shape.expected_fp();
        }
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

    /// Whether a table of `n` keys gets a bumped block first.
    fn bumps(&self, n: u64) -> bool {
        self.version == BUMPED_RIBBON_FORMAT_VERSION && n >= BUMPED_MIN_KEYS
    }

    /// A one-layer shape with the bits and slots a bumped block of `n` keys is
    /// expected to have: its expected rate is the block's, to within a few percent.
    fn bumped_model_shape(&self, n: u64) -> Option<Shape> {
        if !self.bumps(n) {
            return None;
        }
        let layers = 3;
        let overhead = (bumped_block::overhead_len(layers) * 8) as f64;
        let factor = bumped_slots_per_key(n);
        let slots = n as f64 * factor;
        let code_bits = slots / 64.0 * 2.0 + 64.0 * layers as f64;
        let budget = self.bits_per_key * n as f64 - overhead - code_bits;
        Shape::for_keys(n, budget, factor)
    }

    /// The bumped block for `hashes` with `seed`, or `None` if its last layer does not
    /// band or the bits do not reach one column.
    fn try_bumped(&self, hashes: &[KeyHash], seed: u32) -> Option<Vec<u8>> {
        #[cfg(test)]
        if self.fail_bumped {
            return None;
        }
        let layers = bump::band_layers(hashes, seed, self.slots_per_key)?;
        let codes: u64 = layers
            .iter()
            .filter(|l| l.codes.is_some())
            .map(|l| l.blocks.div_ceil(32))
            .sum();
        let overhead = (bumped_block::overhead_len(layers.len()) * 8) as f64;
        let budget = self.bits_per_key * hashes.len() as f64 - overhead - (codes * 64) as f64;
        let shapes = bump::shapes(&layers, budget)?;
        let words = bump::solve(&layers, &shapes);
        let parts: Vec<LayerParts<'_>> = layers
            .iter()
            .zip(&shapes)
            .zip(&words)
            .map(|((l, shape), w)| LayerParts {
                shape: *shape,
                words: w,
                codes: l.codes.as_deref(),
            })
            .collect();
        Some(bumped_block::encode(seed, hashes.len() as u64, &parts))
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
            version: BUMPED_RIBBON_FORMAT_VERSION,
            #[cfg(test)]
            fail_bumped: false,
        }
    }
}

/// The block for `hashes` under `policy` and which kind it is (module docs).
fn build(policy: &RibbonPolicy, hashes: &[KeyHash]) -> (Vec<u8>, RibbonOutcome) {
    let n = hashes.len() as u64;
    if policy.bumps(n) {
        for seed in 0..RIBBON_MAX_ATTEMPTS {
            if let Some(block) = policy.try_bumped(hashes, seed) {
                return (block, RibbonOutcome::Bumped { seed });
            }
        }
    }
    if let Some(shape) = policy.shape_for(n) {
        for seed in 0..RIBBON_MAX_ATTEMPTS {
            if let Some(block) = RibbonBuilder::try_build(hashes, &shape, seed) {
                return (block, RibbonOutcome::Standard { seed });
            }
        }
    }
    let mut bloom = policy.fallback().new_builder();
    for &h in hashes {
        bloom.add_hash(h);
    }
    (bloom.finish(), RibbonOutcome::Bloom)
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
        build(&self.policy, &hashes).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bumped build failing (all four seeds), the table gets a version-3 block
    /// with every key, and the outcome says so.
    #[test]
    fn a_failed_bumped_build_writes_version_3() {
        let policy = RibbonPolicy {
            fail_bumped: true,
            ..RibbonPolicy::default()
        };
        let hashes: Vec<KeyHash> = (0..10_000u32)
            .map(|i| KeyHash::of(&i.to_le_bytes()))
            .collect();
        let (block, outcome) = policy.construction_outcome(&hashes);
        assert!(
            matches!(outcome, RibbonOutcome::Standard { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            crate::filter_block::format_version(&block),
            Some(RIBBON_FORMAT_VERSION)
        );
        let reader = policy.open_reader(&block).unwrap();
        assert!(hashes.iter().all(|&h| reader.may_contain_hash(h)));
        // Not failing, the same keys get a bumped block.
        let (_, outcome) = RibbonPolicy::default().construction_outcome(&hashes);
        assert_eq!(outcome, RibbonOutcome::Bumped { seed: 0 });
    }
}
