//! Probe statistics: where a store's lookups actually go, level by level, for
//! `FilterAllocation::Adaptive`.
//!
//! The per-level planner (`filter_plan.rs`) splits filter memory by each level's weight
//! `wᵢ`, the tables of level `i` an absent lookup asks. Monkey's model guesses `wᵢ`
//! from the tree's shape; this module measures it. The read path already counts, per
//! level, every table probed, every filter "maybe" and every "maybe" for a key the table
//! held (`stats.rs`, striped per thread, so a `get` pays nothing more for it). When a
//! table is about to be written the store folds the counters' growth since the last
//! fold into decayed sums:
//!
//! ```text
//!   per level:  probes      tables probed for a key they did not hold   (wᵢ · lookups)
//!               false pos.  "maybe" for such a key (a read wasted, unless learned)
//!   overall:    lookups     gets that reached the tables
//!               skips       false positives a learned negative caught
//!
//!   fold:  sum ← sum · ½^(Δlookups / HALF_LIFE) + Δ
//! ```
//!
//! The decay is counted in lookups, not time: after [`HALF_LIFE`] more lookups the old
//! sums weigh half, so the weights follow a workload that moves and a quiet store keeps
//! what it knew. The planner reads `wᵢ = probesᵢ / lookups` for L1 and deeper (L0's
//! table count changes with every flush, so it keeps the model's) once [`MIN_LOOKUPS`]
//! lookups are in; a level with under [`MIN_LEVEL_PROBES`] probes keeps the model's
//! weight (it may have been empty while the lookups ran).
//!
//! The skips against the false positives tell whether absent lookups repeat: learned
//! negatives catch a false positive only when the same key comes back to the same
//! table. When they caught at least [`REPEAT_SHARE`] of them, the next open gives
//! learned negatives [`LEARNED_SHARE_REPEATING`] of the filters' memory, otherwise
//! [`LEARNED_SHARE_PROBING`] (enough to keep measuring), and the plans spend the rest.
//!
//! The sums are kept in the store's `PROBES` file, written durably (temp file, fsync,
//! rename, directory fsync) after each flush and compaction and at close, so a reopen
//! does not start blind; its format is drawn in docs/FORMAT.md. A missing file is a
//! fresh start; a damaged one is ignored and counted (`DbStats::probe_stats_damaged`),
//! never an error: the statistics only steer how many bits new filters get.

use std::io;
use std::path::Path;

use crate::filename;
use crate::fs::FileSystem;
use crate::stats::DbStats;
use crate::types::NUM_LEVELS;

/// Lookups after which old sums weigh half.
pub const HALF_LIFE: f64 = 1_000_000.0;
/// Decayed lookups needed before the measured weights replace the model's.
pub const MIN_LOOKUPS: f64 = 10_000.0;
/// Decayed probes a level needs for its measured weight to be used.
pub const MIN_LEVEL_PROBES: f64 = 100.0;
/// Share of false positives learned negatives must catch to count as repetition.
pub const REPEAT_SHARE: f64 = 0.25;
/// Share of the filters' memory learned negatives get while absent lookups repeat.
pub const LEARNED_SHARE_REPEATING: f64 = 1.0 / 32.0;
/// Share they get otherwise: enough to measure whether lookups repeat.
pub const LEARNED_SHARE_PROBING: f64 = 1.0 / 256.0;
/// Decayed false positives needed before the repetition share is judged.
const MIN_FALSE_POSITIVES: f64 = 50.0;

const MAGIC: &[u8; 8] = b"BKPROBES";
const VERSION: u32 = 1;
/// Bytes of a `PROBES` file: magic, version, level count, lookups, skips, two sums per
/// level, CRC.
pub const FILE_LEN: usize = 8 + 4 + 4 + 8 + 8 + NUM_LEVELS * 16 + 4;

/// The raw counters a fold starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Raw {
    lookups: u64,
    skips: u64,
    probes: [u64; NUM_LEVELS],
    false_positives: [u64; NUM_LEVELS],
}

impl Raw {
    /// The counters of `stats` a fold reads.
    pub fn of(stats: &DbStats) -> Raw {
        let mut raw = Raw {
            lookups: stats.gets.saturating_sub(stats.memtable_hits),
            skips: stats.learned_skips,
            ..Raw::default()
        };
        for (l, s) in stats.levels.iter().enumerate().take(NUM_LEVELS) {
            raw.probes[l] = s.table_probes.saturating_sub(s.filter_true_positives);
            raw.false_positives[l] = s.filter_positives.saturating_sub(s.filter_true_positives);
        }
        raw
    }
}

/// Decayed probe statistics (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProbeStats {
    /// Gets that reached the tables.
    pub lookups: f64,
    /// False positives a learned negative caught.
    pub skips: f64,
    /// Per level: tables probed for a key they did not hold.
    pub probes: [f64; NUM_LEVELS],
    /// Per level: "maybe" for a key the table did not hold.
    pub false_positives: [f64; NUM_LEVELS],
}

impl ProbeStats {
    /// Adds the counters' growth from `last` to `now`, decaying what was there.
    pub fn fold(&mut self, last: &Raw, now: &Raw) {
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
        let new_lookups = d(last.lookups, now.lookups);
        if new_lookups == 0.0 {
            return;
        }
        let keep = 0.5f64.powf(new_lookups / HALF_LIFE);
        self.lookups = self.lookups * keep + new_lookups;
        self.skips = self.skips * keep + d(last.skips, now.skips);
        for l in 0..NUM_LEVELS {
            self.probes[l] = self.probes[l] * keep + d(last.probes[l], now.probes[l]);
            self.false_positives[l] =
                self.false_positives[l] * keep + d(last.false_positives[l], now.false_positives[l]);
        }
    }

    /// Measured tables probed per lookup, level by level (L0 always `None`); all `None`
    /// with fewer than [`MIN_LOOKUPS`] lookups.
    pub fn weights(&self) -> [Option<f64>; NUM_LEVELS] {
        let mut w = [None; NUM_LEVELS];
        if self.lookups < MIN_LOOKUPS {
            return w;
        }
        for (w, &probes) in w.iter_mut().zip(&self.probes).skip(1) {
            if probes >= MIN_LEVEL_PROBES {
                *w = Some(probes / self.lookups);
            }
        }
        w
    }

    /// Whether learned negatives caught at least [`REPEAT_SHARE`] of the false
    /// positives: absent lookups repeat.
    pub fn repeating(&self) -> bool {
        let fp: f64 = self.false_positives.iter().sum();
        fp >= MIN_FALSE_POSITIVES && self.skips >= REPEAT_SHARE * fp
    }

    /// The share of the filters' memory learned negatives get (see the module docs).
    pub fn learned_share(&self) -> f64 {
        if self.repeating() {
            LEARNED_SHARE_REPEATING
        } else {
            LEARNED_SHARE_PROBING
        }
    }

    /// The `PROBES` file's bytes (docs/FORMAT.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(FILE_LEN - crate::coding::FRAME_OVERHEAD);
        payload.extend_from_slice(&(NUM_LEVELS as u32).to_le_bytes());
        payload.extend_from_slice(&self.lookups.to_le_bytes());
        payload.extend_from_slice(&self.skips.to_le_bytes());
        for l in 0..NUM_LEVELS {
            payload.extend_from_slice(&self.probes[l].to_le_bytes());
            payload.extend_from_slice(&self.false_positives[l].to_le_bytes());
        }
        crate::coding::frame(MAGIC, VERSION, &payload)
    }

    /// Decodes a `PROBES` file, checking its length, checksum, magic, version, level
    /// count and that every sum is a finite, non-negative number; why not, if not.
    pub fn decode(bytes: &[u8]) -> Result<ProbeStats, String> {
        if bytes.len() != FILE_LEN {
            return Err(format!("{} bytes, not {FILE_LEN}", bytes.len()));
        }
        let body = crate::coding::unframe(bytes, MAGIC, VERSION, "probe statistics")?;
        let levels = crate::coding::u32_at(body, 0);
        if levels != Some(NUM_LEVELS as u32) {
            return Err(format!("{levels:?} levels, not {NUM_LEVELS}"));
        }
        let mut at = 4;
        let mut next = || -> Result<f64, String> {
            let v = body
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(f64::from_le_bytes)
                .ok_or("truncated")?;
            at += 8;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(format!("a sum is {v}"))
            }
        };
        let mut s = ProbeStats {
            lookups: next()?,
            skips: next()?,
            ..ProbeStats::default()
        };
        for l in 0..NUM_LEVELS {
            s.probes[l] = next()?;
            s.false_positives[l] = next()?;
        }
        Ok(s)
    }

    /// Reads `dir`'s `PROBES` file: `Ok(None)` when there is none, `Err(why)` when it
    /// cannot be read or does not decode (the caller ignores it and counts it).
    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ProbeStats>, String> {
        let path = filename::probes_path(dir);
        let file = match fs.open_random(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let len = file.len().map_err(|e| e.to_string())?;
        if len != FILE_LEN as u64 {
            return Err(format!("{len} bytes, not {FILE_LEN}"));
        }
        let mut bytes = vec![0u8; FILE_LEN];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| e.to_string())?;
        ProbeStats::decode(&bytes).map(Some)
    }

    /// Writes `dir`'s `PROBES` file durably: `PROBES.tmp`, fsync, rename, fsync of the
    /// directory. A crash leaves the old file or the new one.
    pub fn write(&self, fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
        let (tmp, dest) = (filename::probes_tmp_path(dir), filename::probes_path(dir));
        crate::fs::replace_durably(fs, &tmp, &dest, &self.encode())
    }
}

/// A store's probe statistics and the counters they were last folded from.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    /// The decayed sums.
    pub stats: ProbeStats,
    /// The counters at the last fold.
    pub last: Raw,
    /// The learned negatives' share of the filters' memory, decided at open (0 when
    /// the user sized them: their memory is then the user's, not the filters').
    pub learned_share: f64,
}

impl Tracker {
    /// Folds the counters' growth since the last fold into the sums.
    pub fn fold(&mut self, now: Raw) {
        self.stats.fold(&self.last, &now);
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(lookups: u64, probes: u64, fp: u64, skips: u64) -> Raw {
        let mut r = Raw {
            lookups,
            skips,
            ..Raw::default()
        };
        r.probes[3] = probes;
        r.false_positives[3] = fp;
        r
    }

    #[test]
    fn a_fold_decays_by_lookups_and_adds_the_growth() {
        let mut s = ProbeStats::default();
        s.fold(&Raw::default(), &raw(1_000_000, 500_000, 100, 0));
        assert_eq!(s.lookups, 1_000_000.0);
        assert_eq!(s.probes[3], 500_000.0);
        // A million more lookups, none probing L3: the old half-life has passed.
        s.fold(
            &raw(1_000_000, 500_000, 100, 0),
            &raw(2_000_000, 500_000, 100, 0),
        );
        assert!((s.lookups - 1_500_000.0).abs() < 1e-6, "{}", s.lookups);
        assert!((s.probes[3] - 250_000.0).abs() < 1e-6, "{}", s.probes[3]);
        let w = s.weights();
        assert_eq!(w[0], None);
        assert!((w[3].unwrap() - 250_000.0 / 1_500_000.0).abs() < 1e-12);
        assert_eq!(w[4], None, "a level never probed keeps the model's weight");
        // No new lookups: nothing changes.
        let before = s;
        s.fold(&raw(2_000_000, 0, 0, 0), &raw(2_000_000, 0, 0, 0));
        assert_eq!(s, before);
    }

    #[test]
    fn too_few_lookups_give_no_weights() {
        let mut s = ProbeStats::default();
        s.fold(&Raw::default(), &raw(9_000, 9_000, 10, 0));
        assert!(s.weights().iter().all(Option::is_none));
    }

    #[test]
    fn repetition_is_the_share_of_false_positives_learning_caught() {
        let mut s = ProbeStats::default();
        s.fold(&Raw::default(), &raw(100_000, 50_000, 1_000, 249));
        assert!(!s.repeating());
        assert_eq!(s.learned_share(), LEARNED_SHARE_PROBING);
        let mut s = ProbeStats::default();
        s.fold(&Raw::default(), &raw(100_000, 50_000, 1_000, 250));
        assert!(s.repeating());
        assert_eq!(s.learned_share(), LEARNED_SHARE_REPEATING);
        // Too few false positives to judge.
        let mut s = ProbeStats::default();
        s.fold(&Raw::default(), &raw(100_000, 50_000, 40, 40));
        assert!(!s.repeating());
    }

    #[test]
    fn the_file_round_trips_and_every_damage_is_refused() {
        let mut s = ProbeStats::default();
        s.fold(&Raw::default(), &raw(123_456, 7_890, 12, 3));
        let bytes = s.encode();
        assert_eq!(bytes.len(), FILE_LEN);
        assert_eq!(ProbeStats::decode(&bytes), Ok(s));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(ProbeStats::decode(&bad).is_err(), "byte {i} flipped");
        }
        assert!(ProbeStats::decode(&bytes[..FILE_LEN - 1]).is_err());
        let mut long = bytes.clone();
        long.push(0);
        assert!(ProbeStats::decode(&long).is_err());
        // A well-formed file holding a negative or non-finite sum is refused too.
        for v in [-1.0f64, f64::NAN, f64::INFINITY] {
            let mut bad = bytes.clone();
            bad[16..24].copy_from_slice(&v.to_le_bytes());
            let crc = crc32fast::hash(&bad[..FILE_LEN - 4]);
            bad[FILE_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
            assert!(ProbeStats::decode(&bad).is_err(), "{v}");
        }
    }
}
