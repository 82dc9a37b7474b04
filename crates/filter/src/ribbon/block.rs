//! The standard Ribbon filter block (filter-block format version 3, written for tables
//! too small to bump; version 2 still read) and its readers. Version 4, the bumped
//! block, is `ribbon::bumped_block`, and reuses this module's query per layer.
//!
//! Same idea as the Bloom block: the payload, then a fixed trailer at the end with a
//! CRC-32 over everything before it; Ribbon adds a 16-byte header before the trailer.
//! All integers little-endian:
//!
//! ```text
//!  +------------------------------+----- header (16 B) -----+------------- trailer (24 B) -------------+
//!  | solution: W words, w bits LE | seed | 0   | upper      | v | 2 | r | k | num_keys | num_bits | crc |
//!  +------------------------------+------+-----+------------+---+---+---+---+----------+----------+-----+
//!                                   u32   u32     u64        ver lay     coeff  u64        u64      u32
//!                                                                          words
//!  v = 3: rows of w = 64 bits  (k = 1), hashing of version 3 (ribbon::hash)  written today
//!  v = 2: rows of w = 128 bits (k = 2), hashing of version 2                  still read
//!  W        = B·r + upper words; B = (W - upper) / r blocks of w slots
//!  word k of block i (k < cols(i)) = solution bits of column k for slots w·i .. w·i+w-1,
//!           bit j = slot w·i + j; blocks i < upper hold r+1 columns, the others r
//!  seed     the seed of the key hashing that banded (ribbon::hash)
//!  upper    blocks with r+1 columns, 0 ≤ upper < B
//!  lay = 2 (ribbon), r = lower columns 1..=31, k = coefficient words of 64 bits
//!  num_keys keys added (duplicates included), ≤ w·B
//!  num_bits = w·W
//!  crc32    CRC-32 (IEEE) of every byte before it
//! ```
//!
//! [`open`] checks, before trusting a byte: length (header and trailer present, whole
//! words), version, CRC, layout, coefficient width (the one its version defines), `r`
//! range, reserved zero, `num_bits` equal to the payload, `W - upper` a positive
//! multiple of `r`, `upper < B`, and `num_keys ≤ w·B`. Every failure is
//! [`FilterError::Corrupt`].
//!
//! A query: its start slot `s` falls in block `i = s / w` at offset `o = s % w`; for
//! each column both blocks `i` and `i + 1` hold, the `w` solution bits from `s` on are
//! `(word_i >> o) | (word_{i+1} << (w - o))`, and their parity under the key's
//! coefficient row `c` is one result bit, computed as
//! `parity((word_i & c << o) ^ (word_{i+1} & c >> (w - o)))` so that the row is shifted
//! once per query rather than every column's words. The key may be present iff all
//! result bits equal its fingerprint's; the first four are compared before the others
//! are computed, since most queries of a store's filter fail there. Blocks `i` and
//! `i + 1` are adjacent in the payload, so with 64-bit rows a query's first four
//! columns lie within `8·(r + 4)` bytes: two or three cache lines.
//!
//! Why version 3 narrowed the rows: a query's work is its hashing and one dot product
//! per column, and both halve with 64-bit rows (one multiply per part instead of three
//! mixes; one 64-bit AND-pair and parity instead of two), and on a CPU with `popcnt` the
//! parity is one instruction. The price is banding: 64-bit rows need a few percent more
//! slots per key (`ribbon::shape`), so at the same bits per key a block keeps slightly
//! fewer result bits per slot, about 0.3 bits, and lets through about a third more
//! absent keys at 10^5 keys per table, over half more at 10^7.

use std::ops::{BitAnd, BitXor, Shl, Shr};
use std::sync::Arc;

use byteorder::{ByteOrder, LittleEndian};

use super::bumped_block::Bumped;
use super::hash::{
    parity, parity128, ribbon_hash, ribbon_hash128, seed_salt, RibbonHash, ROW128_BITS, ROW_BITS,
};
use super::shape::{Shape, MAX_COLUMNS};
use crate::error::FilterError;
use crate::filter_block::TRAILER_LEN;
use crate::hash::KeyHash;
use crate::layout::prefetch;
use crate::policy::{FilterInfo, FilterReader};

/// The filter-block format version of standard Ribbon blocks with 64-bit rows; written
/// when bumping does not apply (small tables) or by [`RibbonPolicy::with_format_version`].
///
/// [`RibbonPolicy::with_format_version`]: crate::RibbonPolicy::with_format_version
pub const RIBBON_FORMAT_VERSION: u8 = 3;
/// The filter-block format version of bumped Ribbon blocks (`ribbon::bump`), written by
/// default since it came.
pub const BUMPED_RIBBON_FORMAT_VERSION: u8 = 4;
/// The filter-block format version of Ribbon blocks with 128-bit rows, written before
/// version 3; still read.
pub const RIBBON128_FORMAT_VERSION: u8 = 2;
/// The layout id of Ribbon blocks in the trailer.
pub(crate) const RIBBON_LAYOUT_ID: u8 = 2;
/// Bytes of the Ribbon header before the trailer.
pub(crate) const HEADER_LEN: usize = 16;
/// Bytes a Ribbon block spends beyond its solution.
pub(crate) const OVERHEAD_LEN: usize = HEADER_LEN + TRAILER_LEN;

/// Whether a filter block's format version is a Ribbon one.
pub(crate) fn is_ribbon_version(version: u8) -> bool {
    version == RIBBON_FORMAT_VERSION
        || version == RIBBON128_FORMAT_VERSION
        || version == BUMPED_RIBBON_FORMAT_VERSION
}

/// Encodes a version-3 Ribbon block (64-bit rows; `shape.width` must be 64).
pub(crate) fn encode(shape: &Shape, seed: u32, num_keys: u64, words: &[u64]) -> Vec<u8> {
    let payload = words.len() * 8;
    let mut out = vec![0u8; payload + OVERHEAD_LEN];
    for (dst, w) in out.chunks_exact_mut(8).zip(words) {
        dst.copy_from_slice(&w.to_le_bytes());
    }
    let h = &mut out[payload..];
    LittleEndian::write_u32(&mut h[0..4], seed);
    LittleEndian::write_u32(&mut h[4..8], 0);
    LittleEndian::write_u64(&mut h[8..16], shape.upper_blocks);
    let t = &mut h[HEADER_LEN..];
    t[0] = RIBBON_FORMAT_VERSION;
    t[1] = RIBBON_LAYOUT_ID;
    t[2] = shape.lower_cols as u8; // < MAX_COLUMNS by construction
    t[3] = (ROW_BITS / 64) as u8;
    LittleEndian::write_u64(&mut t[4..12], num_keys);
    LittleEndian::write_u64(&mut t[12..20], words.len() as u64 * ROW_BITS);
    let end = out.len() - 4;
    let crc = crc32fast::hash(&out[..end]);
    LittleEndian::write_u32(&mut out[end..], crc);
    out
}

fn corrupt(msg: impl Into<String>) -> FilterError {
    FilterError::Corrupt(format!("ribbon filter block: {}", msg.into()))
}

/// A validated block: its solution bytes and what its header and trailer say.
struct Parsed<'a> {
    payload: &'a [u8],
    shape: Shape,
    seed: u32,
    num_keys: u64,
}

/// Validates a Ribbon block of either version (module docs list the checks).
fn parse(block: &[u8]) -> Result<Parsed<'_>, FilterError> {
    if block.len() < OVERHEAD_LEN {
        return Err(corrupt(format!(
            "{} bytes, shorter than the {OVERHEAD_LEN}-byte header and trailer",
            block.len()
        )));
    }
    let payload_len = block.len() - OVERHEAD_LEN;
    let (payload, rest) = block.split_at(payload_len);
    let (h, t) = rest.split_at(HEADER_LEN);
    let width = match t[0] {
        RIBBON_FORMAT_VERSION => ROW_BITS,
        RIBBON128_FORMAT_VERSION => ROW128_BITS,
        v => return Err(corrupt(format!("format version {v} is not 2 or 3"))),
    };
    let word_bytes = (width / 8) as usize;
    if !payload_len.is_multiple_of(word_bytes) {
        return Err(corrupt(format!(
            "solution of {payload_len} bytes is not a whole number of {width}-bit words"
        )));
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
    let coeff_words = width / 64;
    if u64::from(t[3]) != coeff_words {
        return Err(corrupt(format!(
            "coefficient rows of {} words; version {} has {coeff_words}",
            t[3], t[0]
        )));
    }
    let lower = u32::from(t[2]);
    if lower == 0 || lower >= MAX_COLUMNS {
        return Err(corrupt(format!(
            "{lower} result columns outside 1..={}",
            MAX_COLUMNS - 1
        )));
    }
    let seed = LittleEndian::read_u32(&h[0..4]);
    if LittleEndian::read_u32(&h[4..8]) != 0 {
        return Err(corrupt("reserved header bytes are not zero"));
    }
    let upper = LittleEndian::read_u64(&h[8..16]);
    let num_keys = LittleEndian::read_u64(&t[4..12]);
    let num_bits = LittleEndian::read_u64(&t[12..20]);
    let words = (payload_len / word_bytes) as u64;
    if num_bits != words * width {
        return Err(corrupt(format!(
            "trailer says {num_bits} bits but the solution holds {}",
            words * width
        )));
    }
    let lower_words = words
        .checked_sub(upper)
        .filter(|w| *w > 0 && w.is_multiple_of(u64::from(lower)))
        .ok_or_else(|| {
            corrupt(format!(
                "{words} words do not split into blocks of {lower} columns plus {upper}"
            ))
        })?;
    let blocks = lower_words / u64::from(lower);
    if upper >= blocks {
        return Err(corrupt(format!(
            "{upper} upper blocks out of {blocks}: must be fewer"
        )));
    }
    let shape = Shape {
        width,
        blocks,
        lower_cols: lower,
        upper_blocks: upper,
    };
    if num_keys > shape.slots() {
        return Err(corrupt(format!(
            "{num_keys} keys in {} slots: more keys than slots",
            shape.slots()
        )));
    }
    Ok(Parsed {
        payload,
        shape,
        seed,
        num_keys,
    })
}

/// Validates a Ribbon block of any version and opens a reader over it.
pub(crate) fn open(block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
    if crate::filter_block::format_version(block) == Some(BUMPED_RIBBON_FORMAT_VERSION) {
        return super::bumped_block::open(block);
    }
    let p = parse(block)?;
    Ok(if p.shape.width == ROW_BITS {
        Box::new(RibbonReader::<u64>::new(&p))
    } else {
        Box::new(RibbonReader::<u128>::new(&p))
    })
}

/// A solution word and coefficient row: 64 bits wide (version 3) or 128 (version 2),
/// each width with its own hashing.
pub(crate) trait Row:
    Copy
    + BitAnd<Output = Self>
    + BitXor<Output = Self>
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Width in bits: slots per block.
    const BITS: u64;
    /// The key's equation under this width's hashing (`ribbon::hash`).
    fn equation(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash<Self>;
    /// A word from its little-endian bytes (`BITS / 8` of them).
    fn read_le(bytes: &[u8]) -> Self;
    /// Set bits, by `count_ones` (one instruction where the CPU has `popcnt`).
    fn ones(self) -> u32;
    /// The parity by folding: fewer instructions than a software popcount.
    fn folded_parity(self) -> u32;
    /// The solution as a [`RibbonProbe`], for this width if it has one (64 bits only).
    fn probe(solution: &Solution<Self>) -> Option<RibbonProbe>;
}

impl Row for u64 {
    const BITS: u64 = ROW_BITS;

    #[inline(always)]
    fn equation(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash<u64> {
        ribbon_hash(hash, salt, num_starts)
    }

    fn read_le(bytes: &[u8]) -> u64 {
        LittleEndian::read_u64(bytes)
    }

    #[inline(always)]
    fn ones(self) -> u32 {
        self.count_ones()
    }

    #[inline(always)]
    fn folded_parity(self) -> u32 {
        parity(self)
    }

    fn probe(solution: &Solution<u64>) -> Option<RibbonProbe> {
        Some(RibbonProbe {
            kind: ProbeKind::Standard(solution.clone()),
        })
    }
}

impl Row for u128 {
    const BITS: u64 = ROW128_BITS;

    #[inline(always)]
    fn equation(hash: KeyHash, salt: u64, num_starts: u64) -> RibbonHash<u128> {
        ribbon_hash128(hash, salt, num_starts)
    }

    fn read_le(bytes: &[u8]) -> u128 {
        LittleEndian::read_u128(bytes)
    }

    #[inline(always)]
    fn ones(self) -> u32 {
        self.count_ones()
    }

    #[inline(always)]
    fn folded_parity(self) -> u32 {
        parity128(self)
    }

    fn probe(_: &Solution<u128>) -> Option<RibbonProbe> {
        None
    }
}

/// Whether this CPU counts bits in one instruction (x86-64's `popcnt`, detected once
/// per reader; other targets' `count_ones` is used as is).
pub(crate) fn has_popcnt() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("popcnt");
    #[cfg(not(target_arch = "x86_64"))]
    return true;
}

/// Columns a query checks before the rest (see `RibbonReader::query`). Four was the
/// fastest of two to six in a query-only loop (not kept) with 128-bit rows; with it a
/// miss took 29–35 ns against 44–53 ns checking every column (`cargo bench --bench
/// filter -- 'miss/1e(4|5)/bloomkv ribbon'`, alternated builds; docs/FILTERS.md).
const EARLY_COLUMNS: usize = 4;

/// A mask of the low `n ≤ 32` bits.
#[inline]
fn low_bits(n: usize) -> u32 {
    u32::MAX.checked_shr(32 - n as u32).unwrap_or(0)
}

/// What a query reads: the solution's words and what places a key's equation in them.
/// Cheap to clone (the words are shared), so a [`RibbonProbe`] can carry it.
#[derive(Debug, Clone)]
pub(crate) struct Solution<R> {
    pub(crate) words: Arc<[R]>,
    pub(crate) shape: Shape,
    pub(crate) num_starts: u64,
    /// The seed's salt, derived once rather than per query.
    pub(crate) salt: u64,
}

impl<R: Row> Solution<R> {
    /// Where a query of `start` reads: the index of its block's first word `lo`, how
    /// many words after it the next block starts (`next`), and the columns `cols` both
    /// blocks hold. The block index is `start / R::BITS`, a power of two, so it
    /// compiles to a shift, where a division by `shape.width` was the costliest
    /// instruction of an absent get's filter work (`perf annotate`: ~6% of the get's
    /// samples over ten Ribbon tables).
    ///
    /// Block `i + 1` starts where block `i` ends, `cols(i)` words on; a start in the
    /// last block (only the very last start slot) reads that block for both, `next` 0.
    /// The columns are `cols(min(i + 1, B - 1))`, which is `r + (i + 1 < U)` either
    /// way (`U < B`, so the last block has `r`). The same as two `offset`s and a
    /// `cols`, with one multiplication and no `min`.
    #[inline(always)]
    fn spans(&self, start: u64) -> (usize, usize, usize) {
        debug_assert_eq!(R::BITS, self.shape.width);
        let s = &self.shape;
        let i = start / R::BITS;
        let next = if i + 1 < s.blocks { s.cols(i) } else { 0 };
        let cols = s.lower_cols + u32::from(i + 1 < s.upper_blocks);
        (s.offset(i) as usize, next as usize, cols as usize)
    }

    /// The query, with the parity computed by `count_ones` (`POPCNT`) or by folding.
    #[inline(always)]
    fn query<const POPCNT: bool>(&self, hash: KeyHash) -> bool {
        self.answer::<POPCNT>(R::equation(hash, self.salt, self.num_starts))
    }

    /// Whether the solution satisfies the equation `h` (of this solution's hashing).
    #[inline(always)]
    pub(crate) fn answer<const POPCNT: bool>(&self, h: RibbonHash<R>) -> bool {
        let (lo, next, cols) = self.spans(h.start);
        let run = self.words.get(lo..).unwrap_or_default();
        let (Some(lo_words), Some(hi_words)) = (run.get(..cols), run.get(next..next + cols)) else {
            return true; // unreachable for a validated shape; fail open
        };
        // Align the row to the two blocks instead of each column's words to the row:
        // bits o.. of block i's words and bits ..o of block i+1's meet the row's bits
        // 0.. and w-o.. . `(c >> 1) >> (w - 1 - o)` is `c >> (w - o)` without the
        // overflowing shift by w when o = 0.
        let o = (h.start % R::BITS) as u32;
        let row_lo = h.coeff << o;
        let row_hi = (h.coeff >> 1) >> (R::BITS as u32 - 1 - o);
        let par = |x: R| {
            if POPCNT {
                x.ones() & 1
            } else {
                x.folded_parity()
            }
        };
        check(cols, h.fingerprint, |b| {
            par((lo_words[b] & row_lo) ^ (hi_words[b] & row_hi))
        })
    }

    /// Starts loading the words a query of `hash` reads first (see
    /// [`FilterReader::prefetch_hash`]).
    #[inline(always)]
    fn prefetch(&self, hash: KeyHash) {
        self.prefetch_start(R::equation(hash, self.salt, self.num_starts).start);
    }

    /// Starts loading the words a query starting at slot `start` reads first.
    #[inline(always)]
    pub(crate) fn prefetch_start(&self, start: u64) {
        let s = &self.shape;
        let i = start / R::BITS;
        // The words of the columns checked first, in both blocks: most queries end
        // there. The two blocks are adjacent, so it is one run from block i's first
        // word: its `cols(i)` words and `EARLY_COLUMNS` more (a few past what the query
        // reads where the next block has fewer columns, or there is none; a hint, not a
        // read). One hint per 64-byte line, and its last word. (A plain loop: the
        // iterator chain it replaced cost ~40 instructions more per table, cachegrind.)
        let per_line = (512 / R::BITS) as usize;
        let lo = s.offset(i) as usize;
        let len = s.cols(i) as usize + EARLY_COLUMNS;
        let Some(run) = self.words.get(lo..(lo + len).min(self.words.len())) else {
            return;
        };
        let mut at = 0;
        while at < run.len() {
            prefetch(&run[at]);
            at += per_line;
        }
        if let Some(end) = run.last() {
            prefetch(end);
        }
    }
}

/// Compares the result bits `dot(b)` to `fingerprint`, the first `EARLY_COLUMNS`
/// alone: an absent key fails them with probability 15/16, and then the other
/// columns are never computed (a filter in a store answers "absent" far more often
/// than "may be present"). The branch goes the same way 15 times in 16.
#[inline(always)]
pub(crate) fn check(cols: usize, fingerprint: u32, dot: impl Fn(usize) -> u32) -> bool {
    let all = |from: usize, got: u32| (from..cols).fold(got, |got, b| got | dot(b) << b);
    if cols < EARLY_COLUMNS {
        return all(0, 0) == fingerprint & low_bits(cols);
    }
    // A constant count, which the compiler unrolls: a loop to `cols.min(4)` cost
    // ~60 instructions more per query (cachegrind, an absent get over ten tables).
    let got = (0..EARLY_COLUMNS).fold(0u32, |got, b| got | dot(b) << b);
    if got != fingerprint & low_bits(EARLY_COLUMNS) {
        return false;
    }
    all(EARLY_COLUMNS, got) == fingerprint & low_bits(cols)
}

/// A decoded Ribbon block with rows of `R`: version 3 (`u64`) or 2 (`u128`).
#[derive(Debug)]
pub(crate) struct RibbonReader<R> {
    solution: Solution<R>,
    num_keys: u64,
    ones: u64,
    /// Whether `count_ones` is one instruction here (`has_popcnt`).
    popcnt: bool,
}

impl<R: Row> RibbonReader<R> {
    fn new(p: &Parsed<'_>) -> Self {
        // `parse` proved the payload a whole number of words: the allocation is
        // bounded by the block's own size.
        let words: Arc<[R]> = p
            .payload
            .chunks_exact(R::BITS as usize / 8)
            .map(R::read_le)
            .collect();
        let ones = words.iter().map(|w| u64::from(w.ones())).sum();
        RibbonReader {
            solution: Solution {
                words,
                shape: p.shape,
                num_starts: p.shape.num_starts(),
                salt: seed_salt(p.seed),
            },
            num_keys: p.num_keys,
            ones,
            popcnt: has_popcnt(),
        }
    }

    /// The query, with the parity computed by `count_ones` (`POPCNT`) or by folding.
    #[inline(always)]
    fn query<const POPCNT: bool>(&self, hash: KeyHash) -> bool {
        self.solution.query::<POPCNT>(hash)
    }

    /// [`Self::query`] compiled for a CPU with `popcnt`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn query_popcnt(&self, hash: KeyHash) -> bool {
        self.query::<true>(hash)
    }
}

/// A version-3 Ribbon filter as a plain value: its words (shared with the reader that
/// made it, [`FilterReader::ribbon_probe`]) and shape. A store that asks the same
/// key of many tables keeps one per table side by side and asks them through
/// [`RibbonProbe::first_maybe`]: no virtual call per table, and the parity computed by
/// `popcnt` inline, where a reader's `may_contain_hash` costs a call into a function
/// compiled for it.
#[derive(Debug, Clone)]
pub struct RibbonProbe {
    kind: ProbeKind,
}

/// The filters a [`RibbonProbe`] asks: a version-3 block or a bumped one (version 4).
#[derive(Debug, Clone)]
enum ProbeKind {
    Standard(Solution<u64>),
    Bumped(Arc<Bumped>),
}

impl RibbonProbe {
    /// A probe over a bumped filter (format version 4).
    pub(crate) fn bumped(filter: Arc<Bumped>) -> RibbonProbe {
        RibbonProbe {
            kind: ProbeKind::Bumped(filter),
        }
    }

    /// The bumped filter this probe asks, if it is one.
    #[cfg(test)]
    pub(crate) fn kind_for_tests(&self) -> Option<&Arc<Bumped>> {
        match &self.kind {
            ProbeKind::Bumped(b) => Some(b),
            ProbeKind::Standard(_) => None,
        }
    }

    /// The query, with the parity by `count_ones` (`POPCNT`) or by folding.
    #[inline(always)]
    fn query<const POPCNT: bool>(&self, hash: KeyHash) -> bool {
        match &self.kind {
            ProbeKind::Standard(s) => s.query::<POPCNT>(hash),
            ProbeKind::Bumped(b) => b.query::<POPCNT>(hash),
        }
    }

    /// Starts loading the memory a query of `hash` reads first, as
    /// [`FilterReader::prefetch_hash`] does.
    #[inline]
    pub fn prefetch(&self, hash: KeyHash) {
        match &self.kind {
            ProbeKind::Standard(s) => s.prefetch(hash),
            ProbeKind::Bumped(b) => b.prefetch(hash),
        }
    }

    /// The first filter in `probes`, among those whose bit is set in `candidates`
    /// (lowest first), that may hold `hash`; its bit and those of the filters that
    /// answered "absent" before it are cleared. `None` once every candidate answered
    /// "absent" (`candidates` is then 0). A candidate past the end of `probes` answers
    /// "maybe", as a reader with no filter would.
    #[inline]
    pub fn first_maybe(
        probes: &[RibbonProbe],
        candidates: &mut u64,
        hash: KeyHash,
    ) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        {
            if has_popcnt() {
                // SAFETY: this CPU was found to have the `popcnt` feature
                // (`has_popcnt`), which is all `first_maybe_popcnt` enables.
                return unsafe { first_maybe_popcnt(probes, candidates, hash) };
            }
            first_maybe_with::<false>(probes, candidates, hash)
        }
        #[cfg(not(target_arch = "x86_64"))]
        first_maybe_with::<true>(probes, candidates, hash)
    }
}

/// [`RibbonProbe::first_maybe`], the parity by `count_ones` (`POPCNT`) or by folding.
#[inline(always)]
fn first_maybe_with<const POPCNT: bool>(
    probes: &[RibbonProbe],
    candidates: &mut u64,
    hash: KeyHash,
) -> Option<usize> {
    while *candidates != 0 {
        let i = candidates.trailing_zeros() as usize;
        *candidates &= *candidates - 1;
        if probes.get(i).is_none_or(|p| p.query::<POPCNT>(hash)) {
            return Some(i);
        }
    }
    None
}

/// [`first_maybe_with`] compiled for a CPU with `popcnt`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn first_maybe_popcnt(
    probes: &[RibbonProbe],
    candidates: &mut u64,
    hash: KeyHash,
) -> Option<usize> {
    first_maybe_with::<true>(probes, candidates, hash)
}

impl<R: Row> FilterReader for RibbonReader<R> {
    #[inline]
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            if self.popcnt {
                // SAFETY: `popcnt` is set only when this CPU was found to have the
                // `popcnt` feature (`has_popcnt`), which is all `query_popcnt` enables.
                // Measured: a query over ten 100K-key filters took 10–14 ns per filter
                // with it against 17–19 ns folding (temporary harness, alternated).
                return unsafe { self.query_popcnt(hash) };
            }
            self.query::<false>(hash)
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.query::<true>(hash)
    }

    #[inline]
    fn prefetch_hash(&self, hash: KeyHash) {
        self.solution.prefetch(hash);
    }

    fn ribbon_probe(&self) -> Option<RibbonProbe> {
        R::probe(&self.solution)
    }

    fn info(&self) -> FilterInfo {
        let shape = &self.solution.shape;
        let num_bits = self.solution.words.len() as u64 * R::BITS;
        FilterInfo {
            layout: "ribbon",
            num_bits,
            num_keys: self.num_keys,
            num_probes: shape.lower_cols,
            fill_ratio: self.ones as f64 / num_bits as f64,
            estimated_fp_rate: shape.expected_fp(),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.solution.words.len() * (R::BITS as usize / 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::FilterPolicy;
    use crate::ribbon::RibbonPolicy;

    /// Filters asked side by side through `RibbonProbe::first_maybe` answer as each
    /// reader's `may_contain_hash` does, and a version-2 reader has no probe.
    #[test]
    fn probes_answer_as_their_readers() {
        let policy = RibbonPolicy::new(10.0).unwrap();
        let readers: Vec<_> = (0..5u32)
            .map(|t| {
                let mut b = policy.new_builder();
                for i in 0..(1_000 + 3_000 * t) {
                    b.add_key(format!("kav:{}", i * 5 + t).as_bytes());
                }
                open(&b.finish()).unwrap()
            })
            .collect();
        let probes: Vec<RibbonProbe> = readers.iter().map(|r| r.ribbon_probe().unwrap()).collect();
        for i in 0..100_000u32 {
            let h = KeyHash::of(format!("kav:{i}").as_bytes());
            let want: Vec<usize> = (0..readers.len())
                .filter(|&t| readers[t].may_contain_hash(h))
                .collect();
            let mut got = Vec::new();
            let mut candidates = 0b11111u64;
            while let Some(t) = RibbonProbe::first_maybe(&probes, &mut candidates, h) {
                got.push(t);
            }
            assert_eq!(candidates, 0);
            assert_eq!(got, want, "key {i}");
            // The folding parity, which a CPU without `popcnt` runs.
            let (mut folded, mut candidates) = (Vec::new(), 0b11111u64);
            while let Some(t) = first_maybe_with::<false>(&probes, &mut candidates, h) {
                folded.push(t);
            }
            assert_eq!(folded, want, "key {i}");
            probes[i as usize % 5].prefetch(h);
        }
        // A candidate without a probe answers "maybe".
        let mut candidates = 1u64 << 7;
        let h = KeyHash::of(b"x");
        assert_eq!(
            RibbonProbe::first_maybe(&probes, &mut candidates, h),
            Some(7)
        );
        let v2 = ribbon_v2_block();
        assert!(open(&v2).unwrap().ribbon_probe().is_none());
    }

    /// A version-2 block, as the old builder wrote it (1,000 keys "kav:{i}").
    fn ribbon_v2_block() -> Vec<u8> {
        let line = include_str!("../../tests/fixtures/ribbon_blocks_v2.txt");
        let hex = line.lines().next().unwrap().rsplit(' ').next().unwrap();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `spans` places every start slot where two `offset`s and a `cols` do:
    /// block `i = start / w` from `offset(i)`, block `j = min(i + 1, B - 1)` from
    /// `offset(j)`, `cols(j)` columns.
    #[test]
    fn spans_agree_with_offsets_and_cols() {
        for blocks in 1..7u64 {
            for lower_cols in 1..5u32 {
                for upper_blocks in 0..blocks {
                    let shape = Shape {
                        width: 64,
                        blocks,
                        lower_cols,
                        upper_blocks,
                    };
                    let solution = Solution::<u64> {
                        words: vec![0; shape.words() as usize].into(),
                        shape,
                        num_starts: shape.num_starts(),
                        salt: 0,
                    };
                    for start in 0..shape.num_starts() {
                        let i = start / 64;
                        let j = (i + 1).min(blocks - 1);
                        let (lo, next, cols) = solution.spans(start);
                        assert_eq!(lo as u64, shape.offset(i), "{shape:?} {start}");
                        assert_eq!((lo + next) as u64, shape.offset(j), "{shape:?} {start}");
                        assert_eq!(cols as u32, shape.cols(j), "{shape:?} {start}");
                    }
                }
            }
        }
    }

    /// The two ways of computing a parity give the same answers, key for key, for both
    /// row widths: the folding one every x86-64 CPU runs and `count_ones` (one
    /// instruction where the CPU has it, which `may_contain_hash` then uses).
    #[test]
    fn both_parities_answer_alike() {
        fn check<R: Row>(block: &[u8], keys: u32) {
            let p = parse(block).unwrap();
            assert_eq!(p.shape.width, R::BITS);
            let r = RibbonReader::<R>::new(&p);
            let mut passed = 0;
            for i in 0..200_000u32 {
                let h = KeyHash::of(format!("kav:{i}").as_bytes());
                let folded = r.query::<false>(h);
                assert_eq!(folded, r.query::<true>(h), "key {i}");
                assert_eq!(folded, r.may_contain_hash(h), "key {i}");
                passed += u32::from(folded);
            }
            // The block's keys and about 0.1–0.2% of the others.
            assert!((keys..keys + 1_000).contains(&passed), "{passed}");
        }
        let policy = RibbonPolicy::new(10.0)
            .unwrap()
            .with_format_version(RIBBON_FORMAT_VERSION)
            .unwrap();
        let mut b = policy.new_builder();
        for i in 0..20_000u32 {
            b.add_key(format!("kav:{i}").as_bytes());
        }
        check::<u64>(&b.finish(), 20_000);
        check::<u128>(&ribbon_v2_block(), 1_000);
    }
}
