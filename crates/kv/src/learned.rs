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
//! Memory is a fixed array of `sets × WAYS` slots of [`SLOT_BYTES`] each (plus
//! [`SET_META_BYTES`] per set), sized from
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

/// Slots per set.
pub const WAYS: usize = 4;

/// Bytes of one learned negative (table id, block number, fingerprint). Each set of
/// [`WAYS`] slots adds [`SET_META_BYTES`] for their use counts and its hand.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// Bytes per set beside its slots: four 2-bit use counts and a 2-bit hand.
pub const SET_META_BYTES: usize = std::mem::size_of::<u16>();

/// Bytes of one set.
const SET_BYTES: usize = WAYS * SLOT_BYTES + SET_META_BYTES;

/// Highest use count a slot reaches: how many passes of the hand a hot slot survives
/// without being asked again.
const MAX_USES: u16 = 3;

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

/// One learned negative. `table == 0` marks an empty slot (ids start at 1). Blocks
/// past 65,535 of a table (a 256-MiB table of 4-KiB blocks) do not learn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
struct Slot {
    table: u32,
    block: u16,
    fp: u16,
}

impl Slot {
    fn is(&self, other: &Slot) -> bool {
        self == other
    }
}

#[derive(Debug)]
struct Shard {
    slots: Box<[Slot]>,
    /// Per set: way `w`'s use count in bits `2w..2w+2`, the hand in bits 8..10.
    meta: Box<[u16]>,
}

/// Way `w`'s use count in a set's `meta`.
fn uses(meta: u16, w: usize) -> u16 {
    (meta >> (2 * w)) & 3
}

/// `meta` with way `w`'s use count set to `n` (at most 3).
fn with_uses(meta: u16, w: usize, n: u16) -> u16 {
    (meta & !(3 << (2 * w))) | (n.min(MAX_USES) << (2 * w))
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
        let set_bytes = SET_BYTES;
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
                    meta: vec![0; sets_per_shard].into_boxed_slice(),
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
        self.shards.len() * (std::mem::size_of::<Mutex<Shard>>() + self.sets_per_shard * SET_BYTES)
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
    fn locate(&self, slot: &Slot) -> (MutexGuard<'_, Shard>, usize, usize) {
        let Slot { table, block, fp } = *slot;
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
        let Ok(block) = u16::try_from(block) else {
            return false;
        };
        let want = Slot {
            table,
            block,
            fp: fingerprint(hash),
        };
        let (mut guard, set, first) = self.locate(&want);
        let shard = &mut *guard;
        let Some(w) = shard.slots[first..first + WAYS]
            .iter()
            .position(|s| s.is(&want))
        else {
            return false;
        };
        let meta = shard.meta[set];
        shard.meta[set] = with_uses(meta, w, uses(meta, w) + 1);
        self.skips.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Records that the key with `hash` is not in block `block` of table `table`, whose
    /// keys (every entry's, in order) are `keys` — its index search lands there, and the
    /// block holds no version of it — if no key of the block shares the key's
    /// fingerprint. A block that fails to decode (an `Err` among `keys`) teaches
    /// nothing.
    pub(crate) fn learn<K: AsRef<[u8]>, E>(
        &self,
        table: u32,
        block: usize,
        hash: KeyHash,
        keys: impl IntoIterator<Item = Result<K, E>>,
    ) {
        let Ok(block) = u16::try_from(block) else {
            return;
        };
        let fp = fingerprint(hash);
        let mut previous: Option<K> = None;
        for key in keys {
            let Ok(key) = key else {
                return;
            };
            if previous
                .as_ref()
                .is_some_and(|p| p.as_ref() == key.as_ref())
            {
                continue; // an older version of the key just checked
            }
            if fingerprint(KeyHash::of(key.as_ref())) == fp {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            previous = Some(key);
        }
        self.insert(Slot { table, block, fp });
    }

    fn insert(&self, new: Slot) {
        let (mut guard, set, first) = self.locate(&new);
        let shard = &mut *guard;
        let ways = &mut shard.slots[first..first + WAYS];
        if ways.iter().any(|s| s.is(&new)) {
            return; // two lookups learned the same thing at once
        }
        let mut meta = shard.meta[set];
        let at = match ways.iter().position(|s| s.table == 0) {
            Some(free) => {
                self.entries.fetch_add(1, Ordering::Relaxed);
                free
            }
            None => {
                // CLOCK: lower each count the hand passes; replace the first at zero.
                // Every count is at most MAX_USES, so the hand stops within
                // (MAX_USES + 1) turns of the set.
                let mut hand = usize::from(meta >> 8) % WAYS;
                while uses(meta, hand) > 0 {
                    meta = with_uses(meta, hand, uses(meta, hand) - 1);
                    hand = (hand + 1) % WAYS;
                }
                meta = (meta & 0xff) | (((hand + 1) % WAYS) as u16) << 8;
                hand
            }
        };
        ways[at] = new;
        shard.meta[set] = with_uses(meta, at, 0);
        self.learned.fetch_add(1, Ordering::Relaxed);
    }

    /// Clears every slot of table `table` (retired by compaction).
    pub(crate) fn forget_table(&self, table: u32) {
        for shard in self.shards.iter() {
            let mut shard = match shard.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let shard = &mut *shard;
            for (i, slot) in shard.slots.iter_mut().enumerate() {
                if slot.table == table {
                    *slot = Slot::default();
                    let set = i / WAYS;
                    shard.meta[set] = with_uses(shard.meta[set], i % WAYS, 0);
                    self.entries.fetch_sub(1, Ordering::Relaxed);
                }
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
                None => assert!(budget < SET_BYTES + 64, "budget {budget}"),
                Some(l) => {
                    assert!(l.memory_bytes() <= budget, "budget {budget}");
                    // And not wasteful: at least half the budget becomes slots.
                    if budget >= 4096 {
                        assert!(l.memory_bytes() * 2 >= budget, "budget {budget}");
                    }
                }
            }
        }
        assert_eq!(SLOT_BYTES, 8);
        assert_eq!(SET_BYTES, 34);
    }

    #[test]
    fn exact_match_on_table_block_and_fingerprint() {
        let l = LearnedNegatives::new(4096).unwrap();
        l.insert(Slot {
            table: 7,
            block: 3,
            fp: 0xabcd,
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
        let l = LearnedNegatives::new(4 * SET_BYTES + 64).unwrap();
        let hot: Vec<Slot> = (0..4)
            .map(|i| Slot {
                table: 1,
                block: i,
                fp: 1,
            })
            .collect();
        for s in &hot {
            l.insert(*s);
        }
        let mut held = 0;
        for cold in 0..2_000u16 {
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
            });
        }
        // Each hot slot is asked (and raised to MAX_USES) between any two cold
        // insertions into its set, so the hand never finds it at zero.
        assert!(held >= 4 * 1_990, "hot skips {held} of 8000");
        assert!(l.stats().entries <= 16);
    }

    /// The keys of a block's entries, as the read path hands them to `learn`.
    fn keys_of(
        block: &crate::sstable::block::Block,
    ) -> impl Iterator<Item = Result<bytes::Bytes, crate::sstable::Malformed>> {
        block.clone().into_iter().map(|e| e.map(|e| e.key))
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
        (0u64..1 << 24)
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
        // A key the index sends its "/"-suffixed neighbours along with (not one that
        // ends its block with the separator at it).
        let p = (1000..1100)
            .map(|i| format!("k{i:05}"))
            .find(|p| {
                let find = |k: &str| t.inner.index.find(k.as_bytes());
                find(p) == find(&format!("{p}/0"))
            })
            .unwrap();
        let p = p.as_str();
        let fp = fingerprint(KeyHash::of(p.as_bytes()));
        let i = t.inner.index.find(p.as_bytes());
        let block = t
            .inner
            .file
            .read_data_block(t.inner.index.handle(i).unwrap())
            .unwrap();
        let a = collide(&t, &format!("{p}/"), fp, i, true);
        learned.learn(id, i, KeyHash::of(a.as_bytes()), keys_of(&block));
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
        learned.learn(id, i, KeyHash::of(other.as_bytes()), keys_of(&block));
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
