//! Where a standalone filter's `k` probes land: two rules, told apart by the frame version.
//!
//! Both rules hash an item once with MurmurHash3 x64_128 (seed 0) into halves `(a, b)`.
//!
//! **Rule 1 (frame version 1, still read).** Double hashing: probe `j` is slot
//! `fastrange(a + j·(b | 1), m)`. It degenerates when the step is small or close to
//! `c · 2^64 / d` for a small `d`: the probes then fall into a few slots. The empty
//! item hashes to `(0, 0)`, so its step is 1 and all its probes are slot 0: one set bit
//! instead of `k`, and a counting filter saturates that counter after a few inserts.
//!
//! **Rule 2 (frame version 2, written now).** Draw slots until `k` distinct ones are
//! found: draw `j` is slot `fastrange(fmix64(a + j·s), m)` with step `s = fmix64(b ^ S)
//! | 1` (`S` a fixed salt, `fmix64` MurmurHash3's finalizer, a bijection). The mix
//! spreads even neighbouring inputs over the whole range, and a repeated slot is
//! simply skipped, so every item sets exactly `min(k, m)` distinct slots, whatever its
//! hash:
//!
//! ```text
//!  draws:  x_0    x_1    x_2 (repeats x_0: skipped)   x_3 ...
//!  slots:  | 17 | 403 | 17 |  88 | ...   -> k distinct slots: 17, 403, 88, ...
//! ```
//!
//! Skipping costs about `k²/2m` extra draws per item (0.003 at 1% and 1000 items).
//! Draws stop after `16k + 64`: with `m ≥ 2k` that many draws fail to find `k`
//! distinct slots with probability below 2^-60, and since inserts and lookups walk
//! the same sequence, a (practically unreachable) short walk still gives no false
//! negative.

use crate::hash::fastrange64;
use crate::murmur3::murmur3_x64_128;

/// The most probes any standalone filter uses (`MAX_HASHES`).
const MAX_K: usize = 64;

/// Salt for the step of rule 2, so that `b = 0` does not give a fixed point of fmix64.
const STEP_SALT: u64 = 0x5851_F42D_4C95_7F2D;

/// How a standalone filter maps an item to its slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ProbeRule {
    /// Frame version 1: double hashing `a + j·(b | 1)`.
    DoubleHashing,
    /// Frame version 2: `k` distinct slots drawn from a mixed sequence.
    DistinctMixed,
}

impl ProbeRule {
    /// The rule new filters use.
    pub(crate) const CURRENT: ProbeRule = ProbeRule::DistinctMixed;

    /// The frame version that records this rule.
    pub(crate) fn frame_version(self) -> u8 {
        match self {
            ProbeRule::DoubleHashing => 1,
            ProbeRule::DistinctMixed => 2,
        }
    }

    /// The rule a frame of `version` was written with.
    pub(crate) fn from_frame_version(version: u8) -> Option<ProbeRule> {
        match version {
            1 => Some(ProbeRule::DoubleHashing),
            2 => Some(ProbeRule::DistinctMixed),
            _ => None,
        }
    }

    /// The false-positive rate expected of `m` slots holding `n` items at `k` probes:
    /// the textbook formula, plus what double hashing adds when its step makes the
    /// probes cluster (rule 1 only; `sizing::double_hashing_excess`).
    pub(crate) fn estimated_fp_rate(self, m: u64, n: u64, k: u32) -> f64 {
        let (m, n) = (m as f64, n as f64);
        let formula = crate::sizing::standard_fp(m, n, f64::from(k));
        match self {
            ProbeRule::DoubleHashing => {
                (formula + crate::sizing::double_hashing_excess(m, n, k)).min(1.0)
            }
            ProbeRule::DistinctMixed => formula,
        }
    }

    /// The slots of `item` in a filter of `m` slots and `k` probes, in probe order.
    pub(crate) fn slots(self, item: &[u8], k: u32, m: u64) -> Slots {
        let (a, b) = murmur3_x64_128(item, 0);
        self.slots_of_halves(a, b, k, m)
    }

    /// As [`slots`](Self::slots), from the two hash halves.
    pub(crate) fn slots_of_halves(self, a: u64, b: u64, k: u32, m: u64) -> Slots {
        let k = (k as usize).min(MAX_K);
        let mut out = Slots {
            slots: [0; MAX_K],
            len: 0,
        };
        if m == 0 {
            return out;
        }
        match self {
            ProbeRule::DoubleHashing => {
                let step = b | 1;
                let mut h = a;
                for slot in out.slots.iter_mut().take(k) {
                    *slot = fastrange64(h, m);
                    h = h.wrapping_add(step);
                }
                out.len = k;
            }
            ProbeRule::DistinctMixed => {
                let want = k.min(usize::try_from(m).unwrap_or(usize::MAX));
                let step = fmix64(b ^ STEP_SALT) | 1;
                let mut x = a;
                for _ in 0..16 * k + 64 {
                    if out.len == want {
                        break;
                    }
                    let slot = fastrange64(fmix64(x), m);
                    x = x.wrapping_add(step);
                    if !out.slots[..out.len].contains(&slot) {
                        out.slots[out.len] = slot;
                        out.len += 1;
                    }
                }
            }
        }
        out
    }
}

/// Up to 64 slot indices, on the stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slots {
    slots: [u64; MAX_K],
    len: usize,
}

impl Slots {
    /// The slots in probe order.
    pub(crate) fn as_slice(&self) -> &[u64] {
        &self.slots[..self.len]
    }
}

/// MurmurHash3's 64-bit finalizer: a bijection that makes every input bit affect every
/// output bit.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distinct(s: &Slots) -> usize {
        let mut v = s.as_slice().to_vec();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    #[test]
    fn rule_1_collapses_the_empty_item_rule_2_does_not() {
        // murmur3("") = (0, 0): under rule 1 every probe is slot 0.
        let old = ProbeRule::DoubleHashing.slots(b"", 7, 9586);
        assert_eq!(old.as_slice(), &[0; 7]);
        let new = ProbeRule::DistinctMixed.slots(b"", 7, 9586);
        assert_eq!(distinct(&new), 7);
    }

    /// Hashes that collide in one half, or whose halves are the degenerate steps of
    /// double hashing (zero, one, c·2^64/d for small d), still give k distinct slots.
    #[test]
    fn degenerate_halves_give_k_distinct_slots() {
        let mut halves = vec![(0u64, 0u64), (u64::MAX, u64::MAX), (0, 1), (1, 0)];
        for d in 2..=64u64 {
            for c in [1, d - 1] {
                let near = ((u128::from(c) << 64) / u128::from(d)) as u64;
                for a in [0u64, 12_345, u64::MAX / 3] {
                    halves.push((a, near));
                    halves.push((near, a));
                    halves.push((a, near.wrapping_add(1)));
                }
            }
        }
        for (a, b) in halves {
            for m in [64u64, 65, 100, 128, 1000, 9586, 1 << 20, 1 << 40, u64::MAX] {
                for k in [1u32, 2, 7, 10, 30, 64] {
                    let s = ProbeRule::DistinctMixed.slots_of_halves(a, b, k, m);
                    assert_eq!(distinct(&s), k as usize, "({a:#x}, {b:#x}) k {k} m {m}");
                    assert!(s.as_slice().iter().all(|&x| x < m));
                }
            }
        }
    }

    #[test]
    fn fewer_slots_than_probes_uses_every_slot_once() {
        for m in 1..=8u64 {
            let s = ProbeRule::DistinctMixed.slots_of_halves(3, 5, 10, m);
            assert_eq!(distinct(&s), m as usize);
            assert_eq!(s.as_slice().len(), m as usize);
        }
        assert!(ProbeRule::DistinctMixed
            .slots_of_halves(3, 5, 10, 0)
            .as_slice()
            .is_empty());
    }

    #[test]
    fn versions_round_trip() {
        for r in [ProbeRule::DoubleHashing, ProbeRule::DistinctMixed] {
            assert_eq!(ProbeRule::from_frame_version(r.frame_version()), Some(r));
        }
        assert_eq!(ProbeRule::from_frame_version(0), None);
        assert_eq!(ProbeRule::from_frame_version(3), None);
        assert_eq!(ProbeRule::CURRENT.frame_version(), 2);
    }
}
