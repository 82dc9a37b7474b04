//! The leveled shape: the filters of a tree that the store's own compaction built,
//! measured level by level, under each filter allocation.
//!
//! The flat shape (ten equal, overlapping tables) is the one shape where how filter
//! memory is split cannot matter. Here the keys are loaded with auto compaction on and
//! a small level-1 budget (256 KiB, ×10 per level), so a million keys settle over
//! four levels, each ten times the one above. Settled means no level over its budget
//! and L0 compacted away (so every allocation is measured on a tree of the same
//! shape, whatever the background thread's timing left in L0). Then absent and
//! present keys are looked up and every level's probes, filter negatives, false
//! positives and reads are counted.
//!
//! ```text
//! allocation     L1 bits/key   L2    L3    L4     reads per absent get
//! uniform            10        10    10    10     Σ levels' FP
//! monkey            ~20       ~16   ~13    ~9     fewer, same memory
//! no-last-level      10        10    10     –     ~1 (the last level is read)
//! ```

use std::time::Instant;

use bloomkv_kv::{Db, FilterAllocation, FilterKind, LevelStats, Options};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use super::{key, lookup_keys, BenchError, Phase, Progress, WorkDir, Workload};

/// How filter memory is split in one leveled run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Allocation {
    /// `bits_per_key` on every level.
    Uniform,
    /// Monkey: the same memory, each level's FP proportional to its size.
    Monkey,
    /// `optimize_filters_for_hits`: no filter on the deepest level.
    NoLastLevel,
}

impl Allocation {
    /// The name in flags, tables and reports.
    pub fn name(self) -> &'static str {
        match self {
            Allocation::Uniform => "uniform",
            Allocation::Monkey => "monkey",
            Allocation::NoLastLevel => "no-last-level",
        }
    }

    /// Parses a comma-separated list of names.
    pub fn parse_list(list: &str) -> Result<Vec<Allocation>, BenchError> {
        list.split(',')
            .map(|s| match s.trim() {
                "uniform" => Ok(Allocation::Uniform),
                "monkey" => Ok(Allocation::Monkey),
                "no-last-level" => Ok(Allocation::NoLastLevel),
                other => Err(format!(
                    "unknown allocation {other:?} (uniform, monkey, no-last-level)"
                )
                .into()),
            })
            .collect()
    }
}

/// One level of one run.
#[derive(Debug, Clone, Serialize)]
pub struct LevelRow {
    /// The allocation.
    pub allocation: &'static str,
    /// The level.
    pub level: usize,
    /// Tables on it.
    pub tables: usize,
    /// Keys on it.
    pub keys: u64,
    /// Filter bits per key actually built (0 without filters).
    pub filter_bits_per_key: f64,
    /// Key-weighted false-positive rate the level's filters predict (1 without).
    pub predicted_fp: f64,
    /// Absent-key lookups: the level's counters.
    pub absent: LevelStats,
    /// Observed false-positive rate of the absent lookups on this level.
    pub observed_fp: f64,
}

/// One run's totals.
#[derive(Debug, Clone, Serialize)]
pub struct LeveledRow {
    /// `"leveled"`.
    pub shape: &'static str,
    /// The allocation.
    pub allocation: &'static str,
    /// Non-empty levels.
    pub levels: usize,
    /// Filter memory in bytes.
    pub filter_bytes: u64,
    /// Data-block reads per absent-key lookup.
    pub absent_reads_per_lookup: f64,
    /// Data-block reads per present-key lookup.
    pub present_reads_per_lookup: f64,
    /// Nanoseconds per absent-key lookup.
    pub absent_ns_per_lookup: f64,
    /// Nanoseconds per present-key lookup.
    pub present_ns_per_lookup: f64,
    /// Per-level rows.
    pub per_level: Vec<LevelRow>,
}

/// Level-1 budget of the leveled shape (bytes); ×10 per level below. Small on
/// purpose: a million 120-byte entries then settle over four levels (L1..L4).
pub const LEVEL1_BYTES: u64 = 256 << 10;

/// Builds the tree once per allocation and measures it.
pub fn run_leveled(
    w: &Workload,
    allocations: &[Allocation],
    work: &WorkDir,
    progress: &dyn Progress,
) -> Result<Vec<LeveledRow>, BenchError> {
    let mut rows = Vec::new();
    for &allocation in allocations {
        let dir = work.store_dir(&format!("leveled-{}", allocation.name()))?;
        let options = Options {
            filter: FilterKind::CacheLocalBloom,
            bits_per_key: w.bits_per_key,
            filter_allocation: match allocation {
                Allocation::Monkey => FilterAllocation::Monkey,
                _ => FilterAllocation::Uniform,
            },
            optimize_filters_for_hits: allocation == Allocation::NoLastLevel,
            memtable_size: 2 << 20,
            target_file_size: 1 << 20,
            level1_max_bytes: LEVEL1_BYTES,
            block_cache_size: w.cache_mib << 20,
            ..Options::default()
        };
        let db = Db::open(&dir, options.clone())?;
        let mut order: Vec<u64> = (0..w.keys).collect();
        order.shuffle(&mut StdRng::seed_from_u64(w.seed));
        let value = vec![b'v'; w.value_size];
        progress.start(&format!("load leveled {}", allocation.name()), w.keys);
        for (n, &i) in (1u64..).zip(&order) {
            db.put(key(2 * i), &value)?;
            if n.is_multiple_of(4096) {
                progress.inc(4096);
            }
        }
        db.wait_for_compaction()?;
        db.close()?;
        // Settle L0 too: a trigger of one table compacts whatever the load left there.
        let db = Db::open(
            &dir,
            Options {
                l0_compaction_trigger: 1,
                ..options
            },
        )?;
        db.wait_for_compaction()?;
        progress.finish();
        rows.push(measure(&db, w, allocation)?);
    }
    Ok(rows)
}

fn measure(db: &Db, w: &Workload, allocation: Allocation) -> Result<LeveledRow, BenchError> {
    let infos = db.table_infos();
    let mut per_level: Vec<LevelRow> = Vec::new();
    let mut filter_bytes = 0u64;
    for t in &infos {
        if per_level.last().is_none_or(|r| r.level != t.level) {
            per_level.push(LevelRow {
                allocation: allocation.name(),
                level: t.level,
                tables: 0,
                keys: 0,
                filter_bits_per_key: 0.0,
                predicted_fp: 0.0,
                absent: LevelStats::default(),
                observed_fp: 0.0,
            });
        }
        let row = per_level.last_mut().ok_or("no level row")?;
        row.tables += 1;
        row.keys += t.entries;
        match &t.filter {
            Some(f) => {
                row.filter_bits_per_key += f.num_bits as f64;
                row.predicted_fp += f.estimated_fp_rate * t.entries as f64;
                filter_bytes += f.num_bits / 8;
            }
            None => row.predicted_fp += t.entries as f64,
        }
    }
    for row in &mut per_level {
        row.filter_bits_per_key /= row.keys.max(1) as f64;
        row.predicted_fp /= row.keys.max(1) as f64;
    }

    let phase = |phase: Phase| -> Result<(f64, f64, Vec<LevelStats>), BenchError> {
        let keys = lookup_keys(w, phase);
        let before = db.stats();
        let started = Instant::now();
        let mut found = 0u64;
        for k in &keys {
            found += u64::from(db.get(k)?.is_some());
        }
        let ns = started.elapsed().as_nanos() as f64 / keys.len() as f64;
        let want = match phase {
            Phase::Absent => 0,
            Phase::Present => keys.len() as u64,
        };
        if found != want {
            return Err(format!(
                "leveled {}: {} found {found} of {} lookups",
                allocation.name(),
                phase.name(),
                keys.len()
            )
            .into());
        }
        let after = db.stats();
        let reads = (after.data_block_reads - before.data_block_reads) as f64 / keys.len() as f64;
        let levels = after
            .levels
            .iter()
            .zip(&before.levels)
            .map(|(a, b)| LevelStats {
                table_probes: a.table_probes - b.table_probes,
                filter_negatives: a.filter_negatives - b.filter_negatives,
                filter_positives: a.filter_positives - b.filter_positives,
                filter_true_positives: a.filter_true_positives - b.filter_true_positives,
            })
            .collect();
        Ok((reads, ns, levels))
    };
    let (absent_reads, absent_ns, absent_levels) = phase(Phase::Absent)?;
    let (present_reads, present_ns, _) = phase(Phase::Present)?;
    for row in &mut per_level {
        if let Some(stats) = absent_levels.get(row.level) {
            row.observed_fp = stats.observed_fp_rate();
            row.absent = stats.clone();
        }
    }
    Ok(LeveledRow {
        shape: "leveled",
        allocation: allocation.name(),
        levels: per_level.len(),
        filter_bytes,
        absent_reads_per_lookup: absent_reads,
        present_reads_per_lookup: present_reads,
        absent_ns_per_lookup: absent_ns,
        present_ns_per_lookup: present_ns,
        per_level,
    })
}

/// The leveled runs as a text table: one line per level, then the totals.
pub fn print_leveled(rows: &[LeveledRow]) -> String {
    let mut out = format!(
        "\nleveled shape (level-1 budget {} KiB, ×10 per level; auto compaction, settled)\n",
        LEVEL1_BYTES >> 10
    );
    out += &format!(
        "{:<14} {:>5} {:>6} {:>9} {:>8} {:>10} {:>10} {:>9} {:>9}\n",
        "allocation",
        "level",
        "tables",
        "keys",
        "bits/key",
        "pred FP",
        "obs FP",
        "probes",
        "FP reads"
    );
    for r in rows {
        for l in &r.per_level {
            let fp = l
                .absent
                .filter_positives
                .saturating_sub(l.absent.filter_true_positives);
            let fp_reads = if l.filter_bits_per_key == 0.0 {
                l.absent.table_probes
            } else {
                fp
            };
            out += &format!(
                "{:<14} {:>5} {:>6} {:>9} {:>8.2} {:>9.4}% {:>9.4}% {:>9} {:>9}\n",
                r.allocation,
                format!("L{}", l.level),
                l.tables,
                l.keys,
                l.filter_bits_per_key,
                l.predicted_fp * 100.0,
                l.observed_fp * 100.0,
                l.absent.table_probes,
                fp_reads
            );
        }
        out += &format!(
            "{:<14} total: {} levels, filters {:.2} MiB; absent {:.4} reads/get, {:.0} ns; present {:.4} reads/get, {:.0} ns\n",
            r.allocation,
            r.levels,
            r.filter_bytes as f64 / (1 << 20) as f64,
            r.absent_reads_per_lookup,
            r.absent_ns_per_lookup,
            r.present_reads_per_lookup,
            r.present_ns_per_lookup
        );
    }
    out
}
