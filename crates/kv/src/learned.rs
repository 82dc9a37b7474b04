//! Learned negatives: the store remembers the false positives its filters gave, so the
//! same absent lookup skips that table's read next time — exactly, never a false
//! negative.
//!
//! A get asks a table's filter, and on "maybe" the table's in-memory index names the
//! one data block `b` where the key would live; that block is read. When the key is not
//! in `b` (no version of it at all), every key of `b` is in hand, and the store records
//!
//! ```text
//!   (table id, block b, fp(k))      fp = 16 bits of the key's filter hash
//! ```
//!
//! but only after checking that no key of `b` has the same fingerprint. A later lookup
//! of any key `x` whose filter says "maybe", whose index search lands on the same `b`,
//! and with `fp(x)` recorded for `(table, b)`, skips the read: were `x` in the table,
//! its newest version would be in `b` (the index sends every key of the table to the
//! block that holds it — the read path already depends on that), so `b` would hold a
//! key with fingerprint `fp(x)`, and it was checked to hold none. Tables are immutable,
//! so the fact holds for the table's life. The fingerprint's width decides only how
//! often learning is refused (a key of `b` sharing the fingerprint: about
//! `keys_per_block / 65,536`), never whether an answer is right. Table and block are
//! stored whole; table ids come from a process-wide counter that is never reused.
//!
//! Memory is a fixed array of `sets × WAYS` slots of [`SLOT_BYTES`] each, sized from
//! `Options::learned_memory` when the store opens and never grown. A slot's set is
//! chosen by hashing the whole `(table, block, fingerprint)`; within a full set the
//! victim is found CLOCK-fashion: each slot holds a small use count, raised by every
//! skip it grants and lowered as the hand passes, and the first slot found at zero is
//! replaced — so the absent keys asked again and again stay, and the ones asked once
//! leave. The array is split into shards, each behind its own lock.
//!
//! What is learned lives in memory only: a reopen starts empty and the workload's
//! first false positives teach it again (one wasted read per hot key and table).
//! When compaction retires a table its slots are cleared; a slot of a table that
//! went away otherwise (its id is never reused) can never match again and is the
//! first to go.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use bloomkv_filter::KeyHash;

use crate::sstable::block::Block;

/// Slots per set.
pub const WAYS: usize = 4;

/// Bytes of one learned negative (table id, block number, fingerprint, use count).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// Highest use count a slot reaches: how many passes of the hand a hot slot survives
/// without being asked again.
const MAX_USES: u8 = 3;

/// Most shards (locks) the array is split into.
const MAX_SHARDS: usize = 16;

/// The 16-bit fingerprint a learned negative records for a key hash. Exposed so tests
/// can pick keys that collide in it.
#[inline]
pub fn fingerprint(hash: KeyHash) -> u16 {
    // The top bits of the second half: the filters use its low bits as a step.
    (hash.h2 >> 48) as u16
}

/// The next table id, or `None` once the 32-bit space is spent (that table then never
/// learns: an id is never handed out twice).
pub(crate) fn next_table_id() -> Option<u32> {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
        .ok()
}

/// One learned negative. `table == 0` marks an empty slot (ids start at 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
struct Slot {
    table: u32,
    block: u32,
    fp: u16,
    uses: u8,
}

#[derive(Debug)]
struct Shard {
    slots: Box<[Slot]>,
    /// Where each set's hand stands (a 2-bit position per set would do; one byte is
    /// counted in `memory_bytes`).
    hands: Box<[u8]>,
}

/// The learned negatives of one store; see the module docs.
#[derive(Debug)]
pub struct LearnedNegatives {
    shards: Box<[Mutex<Shard>]>,
    sets_per_shard: usize,
    /// Occupied slots (a get skips the lock while there are none).
    entries: AtomicUsize,
    skips: AtomicU64,
    learned: AtomicU64,
    refused: AtomicU64,
}

/// What [`LearnedNegatives`] holds and has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearnedStats {
    /// Data-block reads skipped because a learned negative matched.
    pub skips: u64,
    /// False positives recorded.
    pub learned: u64,
    /// False positives not recorded because a key of the block shares the fingerprint.
    pub refused: u64,
    /// Learned negatives held now.
    pub entries: u64,
    /// Bytes they occupy (the whole fixed array, within the budget).
    pub bytes: u64,
}

impl LearnedNegatives {
    /// An array within `budget` bytes (slots, hands and locks counted); `None` if the
    /// budget cannot hold one set.
    pub fn new(budget: usize) -> Option<LearnedNegatives> {
        let set_bytes = WAYS * SLOT_BYTES + 1;
        let lock_bytes = std::mem::size_of::<Mutex<Shard>>();
        let sets = budget.checked_sub(lock_bytes)? / set_bytes;
        if sets == 0 {
            return None;
        }
        let mut shards = MAX_SHARDS.min(sets);
        let mut sets_per_shard = sets / shards;
        while shards > 1 && shards * (sets_per_shard * set_bytes + lock_bytes) > budget {
            shards -= 1;
            sets_per_shard = sets / shards;
        }
        if sets_per_shard == 0 {
            return None;
        }
        let shards = (0..shards)
            .map(|_| {
                Mutex::new(Shard {
                    slots: vec![Slot::default(); sets_per_shard * WAYS].into_boxed_slice(),
                    hands: vec![0; sets_per_shard].into_boxed_slice(),
                })
            })
            .collect();
        let learned = LearnedNegatives {
            shards,
            sets_per_shard,
            entries: AtomicUsize::new(0),
            skips: AtomicU64::new(0),
            learned: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        };
        debug_assert!(learned.memory_bytes() <= budget);
        Some(learned)
    }

    /// Bytes held: every slot, hand and lock, occupied or not.
    pub fn memory_bytes(&self) -> usize {
        self.shards.len()
            * (std::mem::size_of::<Mutex<Shard>>() + self.sets_per_shard * (WAYS * SLOT_BYTES + 1))
    }

    /// The counts so far.
    pub fn stats(&self) -> LearnedStats {
        LearnedStats {
            skips: self.skips.load(Ordering::Relaxed),
            learned: self.learned.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed) as u64,
            bytes: self.memory_bytes() as u64,
        }
    }

    /// The shard and the set's first slot for `(table, block, fp)`.
    fn locate(&self, table: u32, block: u32, fp: u16) -> (MutexGuard<'_, Shard>, usize, usize) {
        let mut x = (u64::from(table) << 32 | u64::from(block)) ^ (u64::from(fp) << 17);
        // SplitMix64's finalizer: every input bit moves every output bit.
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        let shard = (x % self.shards.len() as u64) as usize;
        let set = ((x >> 16) % self.sets_per_shard as u64) as usize;
        let guard = match self.shards[shard].lock() {
            Ok(g) => g,
            // A slot is written whole under the lock; a panic elsewhere leaves none
            // half-written.
            Err(poisoned) => poisoned.into_inner(),
        };
        (guard, set, set * WAYS)
    }

    /// Whether a lookup of a key with `hash` whose index search landed on `block` of
    /// table `table` may skip the read: the table certainly does not hold the key.
    #[inline]
    pub(crate) fn skips(&self, table: u32, block: usize, hash: KeyHash) -> bool {
        if self.entries.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let Ok(block) = u32::try_from(block) else {
            return false;
        };
        let fp = fingerprint(hash);
        let (mut shard, _, first) = self.locate(table, block, fp);
        for slot in &mut shard.slots[first..first + WAYS] {
            if slot.table == table && slot.block == block && slot.fp == fp {
                slot.uses = (slot.uses + 1).min(MAX_USES);
                self.skips.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Records that the key with `hash` is not in `block_data`, block `block` of table
    /// `table` (its index search lands there, and the block holds no version of it) —
    /// if no key of the block shares the key's fingerprint. A block that fails to
    /// decode teaches nothing.
    pub(crate) fn learn(&self, table: u32, block: usize, hash: KeyHash, block_data: &Block) {
        let Ok(block) = u32::try_from(block) else {
            return;
        };
        let fp = fingerprint(hash);
        let mut previous: Option<Vec<u8>> = None;
        for entry in block_data.clone() {
            let Ok(entry) = entry else {
                return;
            };
            if previous.as_deref() == Some(&entry.key[..]) {
                continue; // an older version of the key just checked
            }
            if fingerprint(KeyHash::of(&entry.key)) == fp {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            previous = Some(entry.key.to_vec());
        }
        self.insert(Slot {
            table,
            block,
            fp,
            uses: 0,
        });
    }

    fn insert(&self, new: Slot) {
        let (mut guard, set, first) = self.locate(new.table, new.block, new.fp);
        let shard = &mut *guard;
        let ways = &mut shard.slots[first..first + WAYS];
        if ways
            .iter()
            .any(|s| s.table == new.table && s.block == new.block && s.fp == new.fp)
        {
            return; // two lookups learned the same thing at once
        }
        let at = match ways.iter().position(|s| s.table == 0) {
            Some(free) => {
                self.entries.fetch_add(1, Ordering::Relaxed);
                free
            }
            None => {
                // CLOCK: lower each count the hand passes; replace the first at zero.
                // Every count is at most MAX_USES, so the hand stops within
                // (MAX_USES + 1) turns of the set.
                let mut hand = usize::from(shard.hands[set]) % WAYS;
                loop {
                    let slot = &mut ways[hand];
                    if slot.uses == 0 {
                        break;
                    }
                    slot.uses -= 1;
                    hand = (hand + 1) % WAYS;
                }
                shard.hands[set] = ((hand + 1) % WAYS) as u8;
                hand
            }
        };
        ways[at] = new;
        self.learned.fetch_add(1, Ordering::Relaxed);
    }

    /// Clears every slot of table `table` (retired by compaction).
    pub(crate) fn forget_table(&self, table: u32) {
        for shard in self.shards.iter() {
            let mut shard = match shard.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            for slot in shard.slots.iter_mut().filter(|s| s.table == table) {
                *slot = Slot::default();
                self.entries.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_with_fp(fp: u16, salt: u64) -> KeyHash {
        KeyHash {
            h1: salt,
            h2: (u64::from(fp) << 48) | 1,
        }
    }

    #[test]
    fn memory_stays_within_every_budget() {
        for budget in [
            0,
            1,
            63,
            64,
            100,
            200,
            1000,
            4096,
            65_536,
            1 << 20,
            12_345_678,
        ] {
            match LearnedNegatives::new(budget) {
                None => assert!(budget < 4 * SLOT_BYTES + 1 + 64, "budget {budget}"),
                Some(l) => {
                    assert!(l.memory_bytes() <= budget, "budget {budget}");
                    // And not wasteful: at least half the budget becomes slots.
                    if budget >= 4096 {
                        assert!(l.memory_bytes() * 2 >= budget, "budget {budget}");
                    }
                }
            }
        }
        assert_eq!(SLOT_BYTES, 12);
    }

    #[test]
    fn exact_match_on_table_block_and_fingerprint() {
        let l = LearnedNegatives::new(4096).unwrap();
        l.insert(Slot {
            table: 7,
            block: 3,
            fp: 0xabcd,
            uses: 0,
        });
        assert!(l.skips(7, 3, hash_with_fp(0xabcd, 1)));
        assert!(
            l.skips(7, 3, hash_with_fp(0xabcd, 99)),
            "any key with that fp"
        );
        assert!(!l.skips(7, 4, hash_with_fp(0xabcd, 1)), "another block");
        assert!(!l.skips(8, 3, hash_with_fp(0xabcd, 1)), "another table");
        assert!(!l.skips(7, 3, hash_with_fp(0xabce, 1)), "another fp");
        l.forget_table(7);
        assert!(!l.skips(7, 3, hash_with_fp(0xabcd, 1)));
        assert_eq!(l.stats().entries, 0);
    }

    #[test]
    fn hot_entries_survive_a_stream_of_cold_ones() {
        // A tiny array: 16 slots. Four hot negatives asked between every cold one.
        let l = LearnedNegatives::new(4 * (WAYS * SLOT_BYTES + 1) + 64).unwrap();
        let hot: Vec<Slot> = (0..4)
            .map(|i| Slot {
                table: 1,
                block: i,
                fp: 1,
                uses: 0,
            })
            .collect();
        for s in &hot {
            l.insert(*s);
        }
        let mut held = 0;
        for cold in 0..2_000u32 {
            for s in &hot {
                if l.skips(s.table, s.block as usize, hash_with_fp(s.fp, 0)) {
                    held += 1;
                } else {
                    l.insert(*s); // a false positive again: learned again
                }
            }
            l.insert(Slot {
                table: 2,
                block: cold,
                fp: 2,
                uses: 0,
            });
        }
        // Each hot slot is asked (and raised to MAX_USES) between any two cold
        // insertions into its set, so the hand never finds it at zero.
        assert!(held >= 4 * 1_990, "hot skips {held} of 8000");
        assert!(l.stats().entries <= 16);
    }

    /// A table of 2,000 keys in 512-byte blocks, with learned negatives attached.
    fn table() -> (
        crate::sstable::Table,
        std::sync::Arc<crate::stats::Counters>,
    ) {
        use crate::sstable::test_util::{build, exact_options, open};
        use crate::types::ValueKind;
        let entries: Vec<_> = (0..2_000)
            .map(|i| {
                (
                    format!("k{i:05}").into_bytes(),
                    1,
                    ValueKind::Put,
                    b"v".to_vec(),
                )
            })
            .collect();
        let (data, _) = build(&entries, exact_options(512));
        let (table, counters, _) = open(data);
        counters
            .learned
            .set(LearnedNegatives::new(1 << 16).unwrap())
            .unwrap();
        (table.unwrap(), counters)
    }

    /// The first key after `prefix` + counter whose fingerprint is `fp` and whose index
    /// search lands on block `i` (`same`) or off it (`!same`).
    fn collide(t: &crate::sstable::Table, prefix: &str, fp: u16, i: usize, same: bool) -> String {
        (0u64..)
            .map(|n| format!("{prefix}{n}"))
            .find(|k| {
                fingerprint(KeyHash::of(k.as_bytes())) == fp
                    && (t.inner.index.find(k.as_bytes()) == i) == same
            })
            .unwrap()
    }

    #[test]
    fn a_key_of_the_block_with_the_fingerprint_refuses_learning() {
        let (t, counters) = table();
        let (learned, id) = t.learned().unwrap();
        let p = "k01000";
        let fp = fingerprint(KeyHash::of(p.as_bytes()));
        let i = t.inner.index.find(p.as_bytes());
        let block = t
            .inner
            .file
            .read_data_block(t.inner.index.handle(i).unwrap())
            .unwrap();
        let a = collide(&t, &format!("{p}/"), fp, i, true);
        learned.learn(id, i, KeyHash::of(a.as_bytes()), &block);
        assert_eq!(
            learned.stats().refused,
            1,
            "p shares a's fingerprint in block {i}"
        );
        assert_eq!(learned.stats().entries, 0);
        // The same call for a key without a twin in the block is recorded: the
        // refusal above came from the twin.
        let other = (0u64..)
            .map(|n| format!("{p}/{n}"))
            .find(|k| fingerprint(KeyHash::of(k.as_bytes())) != fp)
            .unwrap();
        learned.learn(id, i, KeyHash::of(other.as_bytes()), &block);
        assert_eq!(learned.stats().entries, 1);
        let mut tally = crate::stats::ReadTally::default();
        let hit = t
            .read_hit_at(
                p.as_bytes(),
                KeyHash::of(p.as_bytes()),
                crate::types::READ_LATEST,
                &mut tally,
            )
            .unwrap();
        assert!(hit.is_some());
        drop(counters);
    }

    #[test]
    fn a_fingerprint_learned_in_another_block_does_not_skip_a_key() {
        let (t, _counters) = table();
        let (learned, id) = t.learned().unwrap();
        let p = "k01000";
        let hash = KeyHash::of(p.as_bytes());
        let i = t.inner.index.find(p.as_bytes());
        // An absent key with p's fingerprint in a block far away, read and learned
        // through the read path.
        let a = collide(&t, "k01500/", fingerprint(hash), i, false);
        let j = t.inner.index.find(a.as_bytes());
        assert_ne!(i, j);
        let mut tally = crate::stats::ReadTally::default();
        let latest = crate::types::READ_LATEST;
        assert!(t
            .read_hit_at(a.as_bytes(), KeyHash::of(a.as_bytes()), latest, &mut tally)
            .unwrap()
            .is_none());
        assert_eq!(learned.stats().learned, 1, "block {j} has no twin of a");
        assert!(t
            .read_hit_at(a.as_bytes(), KeyHash::of(a.as_bytes()), latest, &mut tally)
            .unwrap()
            .is_none());
        assert_eq!(learned.stats().skips, 1, "the second ask is skipped");
        // p has the very fingerprint learned, in block j; its search lands on i.
        assert!(learned.skips(id, j, hash), "p would be skipped in block j");
        let reads = tally.filter_true_positives;
        assert!(t
            .read_hit_at(p.as_bytes(), hash, latest, &mut tally)
            .unwrap()
            .is_some());
        assert_eq!(tally.filter_true_positives, reads + 1);
        assert_eq!(
            t.get(p.as_bytes(), hash).unwrap().map(|e| e.value),
            Some(bytes::Bytes::from_static(b"v"))
        );
    }
}
