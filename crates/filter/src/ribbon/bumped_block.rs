//! The bumped Ribbon block (filter-block format version 4) and its reader.
//!
//! The layers of `ribbon::bump`, one after the other, then a table describing them, a
//! small header and the trailer every filter block ends with (CRC-32 over everything
//! before it). All integers little-endian:
//!
//! ```text
//!  +-------------------------------------+--------------+-- header (8 B) --+------ trailer (24 B) ------+
//!  | layer 0: solution, codes | layer 1 … | L layer rows | seed | L | 0 0 0 | 4 | 2 | r | 1 | n | bits | crc
//!  +-------------------------------------+--------------+------+---+-------+---+---+---+---+---+------+-----+
//!                                          24 B each      u32    u8         ver lay     k   u64  u64   u32
//!  layer row:  blocks u64 | upper u64 | r u8 | bumps u8 | 6 zero bytes
//!  layer l:    solution: blocks·r + upper words of 64 bits, interleaved as in version 3
//!              (blocks < upper hold r+1 columns);
//!              codes (if bumps = 1): ceil(blocks / 32) words, 2 bits per bucket,
//!              bucket i in bits 2(i mod 32).. of word i / 32; threshold = [0,16,32,64][code]
//!  every layer but the last bumps (bumps = 1); the last has bumps = 0 and may be empty
//!  (blocks = r = upper = 0: no key was left for it) when L ≥ 2
//!  trailer r = layer 0's r (the same in every layer); bits = 8 · payload bytes;
//!  n = keys added (repeats included), at most bits
//! ```
//!
//! [`open`] checks, before trusting a byte: length, version, CRC, layout, coefficient
//! width, `1 ≤ L ≤ 4`, reserved bytes zero, each layer's `bumps` (1 except the last),
//! `r` in `1..=31` (the same as the trailer's) for a non-empty layer, `upper < blocks`,
//! that the layers' words add up (without overflow) to the payload exactly, the
//! trailer's bits, and `n ≤` bits. Every failure is [`FilterError::Corrupt`];
//! a store then reads the table without its filter (fail open).

use std::sync::Arc;

use byteorder::{ByteOrder, LittleEndian};

use super::block::{
    has_popcnt, RibbonProbe, Solution, BUMPED_RIBBON_FORMAT_VERSION, RIBBON_LAYOUT_ID,
};
use super::bump::{code, equation, salt, MAX_LAYERS, THRESHOLDS};
use super::hash::ROW_BITS;
use super::shape::{Shape, MAX_COLUMNS};
use crate::error::FilterError;
use crate::filter_block::TRAILER_LEN;
use crate::hash::KeyHash;
use crate::layout::prefetch;
use crate::policy::{FilterInfo, FilterReader};

/// Bytes of the header between the layer table and the trailer.
pub(crate) const HEADER_LEN: usize = 8;
/// Bytes of one layer's row in the table.
pub(crate) const LAYER_ROW_LEN: usize = 24;

/// Bytes a bumped block of `layers` layers spends beyond its solutions and codes.
pub(crate) fn overhead_len(layers: usize) -> usize {
    layers * LAYER_ROW_LEN + HEADER_LEN + TRAILER_LEN
}

/// One layer as the encoder is given it.
pub(crate) struct LayerParts<'a> {
    pub shape: Shape,
    pub words: &'a [u64],
    pub codes: Option<&'a [u64]>,
}

/// Encodes a version-4 block.
pub(crate) fn encode(seed: u32, num_keys: u64, layers: &[LayerParts<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in layers {
        for w in l.words.iter().chain(l.codes.unwrap_or(&[])) {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    let payload_bits = out.len() as u64 * 8;
    for l in layers {
        let mut row = [0u8; LAYER_ROW_LEN];
        LittleEndian::write_u64(&mut row[0..8], l.shape.blocks);
        LittleEndian::write_u64(&mut row[8..16], l.shape.upper_blocks);
        row[16] = if l.shape.blocks == 0 {
            0
        } else {
            l.shape.lower_cols as u8
        };
        row[17] = u8::from(l.codes.is_some());
        out.extend_from_slice(&row);
    }
    out.extend_from_slice(&seed.to_le_bytes());
    out.extend_from_slice(&[layers.len() as u8, 0, 0, 0]);
    let r0 = layers.first().map_or(0, |l| l.shape.lower_cols as u8);
    out.extend_from_slice(&[BUMPED_RIBBON_FORMAT_VERSION, RIBBON_LAYOUT_ID, r0, 1]);
    out.extend_from_slice(&num_keys.to_le_bytes());
    out.extend_from_slice(&payload_bits.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn corrupt(msg: impl Into<String>) -> FilterError {
    FilterError::Corrupt(format!("bumped ribbon filter block: {}", msg.into()))
}

/// One layer of a decoded block.
#[derive(Debug)]
struct Layer {
    /// The layer's solution and hashing; `shape.blocks == 0` for an empty last layer.
    solution: Solution<u64>,
    /// Bucket codes of a bumping layer; empty for the last, whose every code then
    /// reads as 0 (`bump::code`): nothing bumped, without a branch to say so.
    codes: Box<[u64]>,
}

/// A decoded bumped filter: its layers, first to last.
#[derive(Debug)]
pub(crate) struct Bumped {
    /// Layer 0, where most queries end: a field of its own, one indirection less.
    first: Layer,
    /// Layers 1 ..
    rest: Box<[Layer]>,
}

impl Bumped {
    /// Whether the key of `hash` may be present: the layer its starts lead to answers.
    /// Layer 0 is spelled out (version 3's hashing and query, one code read between),
    /// since about 99% of queries end there; the rest take the loop.
    #[inline(always)]
    pub(crate) fn query<const POPCNT: bool>(&self, hash: KeyHash) -> bool {
        // Layer 0 is never empty (`open` refuses it), so no check: and an empty one
        // would answer "may contain" through `answer`'s bounds checks (fail open).
        let s = &self.first.solution;
        let h = equation(hash, 0, s.salt, s.num_starts);
        if h.start % ROW_BITS < THRESHOLDS[code(&self.first.codes, h.start / ROW_BITS)] {
            return self.query_rest::<POPCNT>(hash);
        }
        s.answer::<POPCNT>(h)
    }

    /// The query from layer 1 on, for keys layer 0 bumped.
    #[inline(always)]
    fn query_rest<const POPCNT: bool>(&self, hash: KeyHash) -> bool {
        for (l, layer) in (1..).zip(self.rest.iter()) {
            let s = &layer.solution;
            if s.shape.blocks == 0 {
                return false; // an empty last layer: no key was bumped to here
            }
            let h = equation(hash, l, s.salt, s.num_starts);
            if h.start % ROW_BITS < THRESHOLDS[code(&layer.codes, h.start / ROW_BITS)] {
                continue;
            }
            return s.answer::<POPCNT>(h);
        }
        true // unreachable: the last layer bumps nothing; fail open
    }

    /// Starts loading what a query of `hash` reads first: layer 0's code word and
    /// columns.
    #[inline(always)]
    pub(crate) fn prefetch(&self, hash: KeyHash) {
        let s = &self.first.solution;
        let start = equation(hash, 0, s.salt, s.num_starts).start;
        if let Some(w) = self.first.codes.get((start / ROW_BITS / 32) as usize) {
            prefetch(w);
        }
        s.prefetch_start(start);
    }

    /// The expected rate for absent keys: per layer, each start slot either is bumped
    /// (the next layer's rate) or meets the columns of its block and the next
    /// (`2^-cols`), summed over the layer's start slots, last layer first.
    fn expected_fp(&self) -> f64 {
        let mut next = 0.0;
        for layer in self.rest.iter().rev().chain(std::iter::once(&self.first)) {
            let s = &layer.solution.shape;
            let bumps = !layer.codes.is_empty();
            next = match &layer.codes {
                _ if s.blocks == 0 => 0.0,
                _ if !bumps => s.expected_fp(),
                codes => {
                    let mut sum = 0.0;
                    for i in 0..s.blocks {
                        let starts = if i + 1 < s.blocks { ROW_BITS } else { 1 };
                        let bumped = THRESHOLDS[code(codes, i)].min(starts);
                        let cols = s.cols((i + 1).min(s.blocks - 1));
                        sum += (starts - bumped) as f64 * 0.5f64.powi(cols as i32)
                            + bumped as f64 * next;
                    }
                    sum / layer.solution.num_starts as f64
                }
            };
        }
        next
    }
}

/// Validates a version-4 block and opens a reader over it (module docs list the
/// checks).
pub(crate) fn open(block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
    let fixed = HEADER_LEN + TRAILER_LEN;
    if block.len() < fixed {
        return Err(corrupt(format!(
            "{} bytes, shorter than the {fixed}-byte header and trailer",
            block.len()
        )));
    }
    let (rest, t) = block.split_at(block.len() - TRAILER_LEN);
    if t[0] != BUMPED_RIBBON_FORMAT_VERSION {
        return Err(corrupt(format!("format version {} is not 4", t[0])));
    }
    let stored = LittleEndian::read_u32(&t[20..24]);
    let actual = crc32fast::hash(&block[..block.len() - 4]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    if t[1] != RIBBON_LAYOUT_ID {
        return Err(corrupt(format!("layout id {} is not ribbon (2)", t[1])));
    }
    if t[3] != 1 {
        return Err(corrupt(format!(
            "coefficient rows of {} words; version 4 has 1",
            t[3]
        )));
    }
    let (rest, h) = rest.split_at(rest.len() - HEADER_LEN);
    let seed = LittleEndian::read_u32(&h[0..4]);
    let count = usize::from(h[4]);
    if h[5..8] != [0, 0, 0] {
        return Err(corrupt("reserved header bytes are not zero"));
    }
    if !(1..=MAX_LAYERS).contains(&count) {
        return Err(corrupt(format!("{count} layers outside 1..={MAX_LAYERS}")));
    }
    let table_len = count * LAYER_ROW_LEN;
    if rest.len() < table_len {
        return Err(corrupt(format!(
            "{count} layer rows do not fit in {} bytes",
            rest.len()
        )));
    }
    let (payload, table) = rest.split_at(rest.len() - table_len);
    if !payload.len().is_multiple_of(8) {
        return Err(corrupt(format!(
            "payload of {} bytes is not a whole number of 64-bit words",
            payload.len()
        )));
    }
    let r0 = u32::from(t[2]);
    let mut shapes = Vec::with_capacity(count);
    let mut words = 0u64;
    for (l, row) in table.chunks_exact(LAYER_ROW_LEN).enumerate() {
        let blocks = LittleEndian::read_u64(&row[0..8]);
        let upper = LittleEndian::read_u64(&row[8..16]);
        let r = u32::from(row[16]);
        let bumps = row[17];
        let last = l + 1 == count;
        if row[18..].iter().any(|&b| b != 0) {
            return Err(corrupt(format!("layer {l}: reserved bytes are not zero")));
        }
        if bumps != u8::from(!last) {
            return Err(corrupt(format!(
                "layer {l}: bumps = {bumps}, expected {}",
                u8::from(!last)
            )));
        }
        let empty = blocks == 0;
        if empty {
            if !(last && count >= 2 && r == 0 && upper == 0) {
                return Err(corrupt(format!("layer {l}: no blocks")));
            }
        } else {
            if r != r0 || r == 0 || r >= MAX_COLUMNS {
                return Err(corrupt(format!(
                    "layer {l}: {r} columns, trailer says {r0}"
                )));
            }
            if upper >= blocks {
                return Err(corrupt(format!(
                    "layer {l}: {upper} upper blocks of {blocks}"
                )));
            }
        }
        let codes = if last { 0 } else { blocks.div_ceil(32) };
        let layer_words = blocks
            .checked_mul(u64::from(r))
            .and_then(|w| w.checked_add(upper))
            .and_then(|w| w.checked_add(codes))
            .and_then(|w| words.checked_add(w))
            .filter(|&w| w <= (payload.len() / 8) as u64)
            .ok_or_else(|| corrupt(format!("layer {l}: more words than the payload holds")))?;
        words = layer_words;
        shapes.push(Shape {
            width: ROW_BITS,
            blocks,
            lower_cols: r,
            upper_blocks: upper,
        });
    }
    if words != (payload.len() / 8) as u64 {
        return Err(corrupt(format!(
            "layers hold {words} words, the payload {}",
            payload.len() / 8
        )));
    }
    let num_keys = LittleEndian::read_u64(&t[4..12]);
    let num_bits = LittleEndian::read_u64(&t[12..20]);
    if num_bits != payload.len() as u64 * 8 {
        return Err(corrupt(format!(
            "trailer says {num_bits} bits but the payload holds {}",
            payload.len() * 8
        )));
    }
    // Repeated keys count in `n` but take no slot (they band as implied), and the
    // layers are sized from `n`: a sound block has `n` below its bits.
    if num_keys > num_bits {
        return Err(corrupt(format!("{num_keys} keys in {num_bits} bits")));
    }
    // Every length is proven: the allocations below are bounded by the block's size.
    let mut all = payload.chunks_exact(8).map(LittleEndian::read_u64);
    let mut ones = 0u64;
    let mut layers = Vec::with_capacity(count);
    for (l, shape) in shapes.into_iter().enumerate() {
        let solution: Arc<[u64]> = all.by_ref().take(shape.words() as usize).collect();
        let code_words = if l + 1 < count {
            shape.blocks.div_ceil(32)
        } else {
            0
        };
        let codes: Box<[u64]> = all.by_ref().take(code_words as usize).collect();
        ones += solution
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum::<u64>();
        let num_starts = (shape.blocks * ROW_BITS).saturating_sub(ROW_BITS - 1);
        layers.push(Layer {
            solution: Solution {
                words: solution,
                shape,
                num_starts,
                salt: salt(seed, l),
            },
            codes,
        });
    }
    let mut layers = layers.into_iter();
    let Some(first) = layers.next() else {
        return Err(corrupt("no layers")); // unreachable: 1 ≤ L was checked
    };
    let filter = Bumped {
        first,
        rest: layers.collect(),
    };
    let fp = filter.expected_fp();
    Ok(Box::new(BumpedReader {
        filter: Arc::new(filter),
        num_keys,
        num_bits,
        ones,
        fp,
        popcnt: has_popcnt(),
    }))
}

/// A decoded version-4 block.
#[derive(Debug)]
struct BumpedReader {
    filter: Arc<Bumped>,
    num_keys: u64,
    num_bits: u64,
    ones: u64,
    fp: f64,
    /// Whether `count_ones` is one instruction here.
    popcnt: bool,
}

impl BumpedReader {
    /// [`Bumped::query`] compiled for a CPU with `popcnt`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn query_popcnt(&self, hash: KeyHash) -> bool {
        self.filter.query::<true>(hash)
    }
}

impl FilterReader for BumpedReader {
    #[inline]
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            if self.popcnt {
                // SAFETY: `popcnt` is set only when this CPU was found to have the
                // `popcnt` feature (`has_popcnt`), which is all `query_popcnt` enables.
                return unsafe { self.query_popcnt(hash) };
            }
            self.filter.query::<false>(hash)
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.filter.query::<true>(hash)
    }

    #[inline]
    fn prefetch_hash(&self, hash: KeyHash) {
        self.filter.prefetch(hash);
    }

    fn ribbon_probe(&self) -> Option<RibbonProbe> {
        Some(RibbonProbe::bumped(Arc::clone(&self.filter)))
    }

    fn info(&self) -> FilterInfo {
        let r = self.filter.first.solution.shape.lower_cols;
        FilterInfo {
            layout: "ribbon",
            num_bits: self.num_bits,
            num_keys: self.num_keys,
            num_probes: r,
            fill_ratio: if self.num_bits == 0 {
                0.0
            } else {
                self.ones as f64 / self.num_bits as f64
            },
            estimated_fp_rate: self.fp,
        }
    }

    fn memory_bytes(&self) -> usize {
        (self.num_bits / 8) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The folding parity and `count_ones` answer alike, key for key.
    #[test]
    fn both_parities_answer_alike() {
        use crate::policy::FilterPolicy;
        let policy = crate::RibbonPolicy::new(10.0).unwrap();
        let mut b = policy.new_builder();
        for i in 0..20_000u32 {
            b.add_key(format!("kav:{i}").as_bytes());
        }
        let block = b.finish();
        assert_eq!(
            crate::filter_block::format_version(&block),
            Some(BUMPED_RIBBON_FORMAT_VERSION)
        );
        let reader = open(&block).unwrap();
        let Some(probe) = reader.ribbon_probe() else {
            panic!("a bumped block has a probe");
        };
        let filter = match &probe.kind_for_tests() {
            Some(f) => Arc::clone(f),
            None => panic!("a bumped probe"),
        };
        let mut passed = 0;
        for i in 0..200_000u32 {
            let h = KeyHash::of(format!("kav:{i}").as_bytes());
            let folded = filter.query::<false>(h);
            assert_eq!(folded, filter.query::<true>(h), "key {i}");
            assert_eq!(folded, reader.may_contain_hash(h), "key {i}");
            passed += u32::from(folded);
        }
        assert!((20_000..21_000).contains(&passed), "{passed}");
    }
}
