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

use std::sync::Arc;
use std::time::Instant;

use bloomkv_kv::fs::OsFileSystem;
use bloomkv_kv::{Db, FilterAllocation, FilterKind, LevelStats, Options};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use super::{
    absent_warmup_keys, fill_value, in_shares, key, lookup_keys, threads_note, BenchError,
    NoProgress, NoSyncFs, Phase, Progress, WorkDir, Workload,
};

/// How filter memory is split in one leveled run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Allocation {
    /// `bits_per_key` on every level.
    Uniform,
    /// Monkey: the same memory, each level's FP proportional to its size.
    Monkey,
    /// `optimize_filters_for_hits`: no filter on the deepest level.
    NoLastLevel,
    /// `FilterAllocation::Adaptive`: Monkey's split weighted by measured probes, with
    /// a share of the memory for learned negatives.
    Adaptive,
}

/// Settings of a leveled run beside the allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LeveledSettings {
    /// `Options::filter_memory_budget` for every run (`--filter-budget-bytes`).
    pub filter_budget_bytes: Option<usize>,
    /// `Options::metadata_budget` for every run (`--metadata-budget-bytes`).
    pub metadata_budget_bytes: Option<usize>,
    /// Load half the keys, settle, run the absent warm-up, close and reopen, then load
    /// the rest (`--grow-after-warmup`): the tables written after the warm-up are
    /// built with what the lookups taught (probe statistics only change the bits of
    /// tables written after them). The measured phase then gets its own warm-up.
    pub grow_after_warmup: bool,
}

/// One leveled run: an allocation, and the bits per key of memory it may spend
/// (`None`: the workload's `--bits-per-key`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocationRun {
    /// How the memory is split.
    pub allocation: Allocation,
    /// The memory budget in bits per key, if not the workload's.
    pub bits_per_key: Option<f64>,
    /// Ribbon filters instead of the cache-local Bloom.
    pub ribbon: bool,
}

impl Allocation {
    /// The name in flags, tables and reports.
    pub fn name(self) -> &'static str {
        match self {
            Allocation::Uniform => "uniform",
            Allocation::Monkey => "monkey",
            Allocation::NoLastLevel => "no-last-level",
            Allocation::Adaptive => "adaptive",
        }
    }

    /// Parses a comma-separated list of names, each optionally with Ribbon filters
    /// instead of the cache-local Bloom and its own memory budget in bits per key:
    /// `uniform,monkey,monkey@8,monkey+ribbon`.
    pub fn parse_list(list: &str) -> Result<Vec<AllocationRun>, BenchError> {
        list.split(',')
            .map(|s| {
                let (name, bits) = match s.trim().split_once('@') {
                    Some((name, bits)) => {
                        let bits: f64 = bits.parse().map_err(|_| {
                            format!("bad bits per key {bits:?} in allocation {s:?}")
                        })?;
                        if !(1.0..=30.0).contains(&bits) {
                            return Err(format!(
                                "bits per key in allocation {s:?} must be in 1..=30"
                            )
                            .into());
                        }
                        (name, Some(bits))
                    }
                    None => (s.trim(), None),
                };
                let (name, ribbon) = match name.strip_suffix("+ribbon") {
                    Some(name) => (name, true),
                    None => (name, false),
                };
                let allocation = match name {
                    "uniform" => Allocation::Uniform,
                    "monkey" => Allocation::Monkey,
                    "no-last-level" => Allocation::NoLastLevel,
                    "adaptive" => Allocation::Adaptive,
                    other => {
                        return Err(format!(
                            "unknown allocation {other:?} (uniform, monkey, no-last-level, \
                             adaptive, each optionally +ribbon and @BITS)"
                        )
                        .into())
                    }
                };
                Ok(AllocationRun {
                    allocation,
                    bits_per_key: bits,
                    ribbon,
                })
            })
            .collect()
    }
}

impl AllocationRun {
    /// The label in tables and reports: the name, with `@bits` when the budget is
    /// not the workload's.
    pub fn label(&self) -> String {
        let ribbon = if self.ribbon { "+ribbon" } else { "" };
        match self.bits_per_key {
            Some(b) => format!("{}{ribbon}@{b}", self.allocation.name()),
            None => format!("{}{ribbon}", self.allocation.name()),
        }
    }
}

/// One level of one run.
#[derive(Debug, Clone, Serialize)]
pub struct LevelRow {
    /// The allocation (with its budget: `monkey@8`).
    pub allocation: String,
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
    /// Share of the absent lookups whose key fell inside one of the level's tables
    /// (the others never ask its filters: the level's weight in the expected reads).
    pub probed_share: f64,
}

/// One run's totals.
#[derive(Debug, Clone, Serialize)]
pub struct LeveledRow {
    /// `"leveled"`.
    pub shape: &'static str,
    /// The allocation (with its budget: `monkey@8`).
    pub allocation: String,
    /// The memory budget in bits per key the allocation was given.
    pub budget_bits_per_key: f64,
    /// Non-empty levels.
    pub levels: usize,
    /// Filter memory in bytes.
    pub filter_bytes: u64,
    /// Data-block reads per absent-key lookup.
    pub absent_reads_per_lookup: f64,
    /// Data-block reads per present-key lookup.
    pub present_reads_per_lookup: f64,
    /// Threads that ran each lookup phase at once (`--threads`).
    pub threads: usize,
    /// Nanoseconds of wall-clock time per absent-key lookup (all threads together).
    pub absent_ns_per_lookup: f64,
    /// Nanoseconds of wall-clock time per present-key lookup (all threads together).
    pub present_ns_per_lookup: f64,
    /// Per-level rows.
    pub per_level: Vec<LevelRow>,
    /// How the absent keys were drawn: `"uniform"` or `"zipf:THETA"`
    /// (`--absent-skew`), after `absent_warmup` unmeasured absent lookups.
    pub absent_skew: String,
    /// Absent lookups made, unmeasured, before the absent phase.
    pub absent_warmup: u64,
    /// Bytes of learned negatives held after the lookups (`--learned-bits-per-key`,
    /// or the share `adaptive` gives them), apart from `filter_bytes`.
    pub learned_bytes: u64,
    /// `Options::filter_memory_budget` (`--filter-budget-bytes`), if set.
    pub filter_budget_bytes: Option<u64>,
    /// Whether the tree was grown after a warm-up (`--grow-after-warmup`), and the
    /// share of its keys in tables written after that warm-up (built knowing the
    /// lookups; 0 without it).
    pub grown_after_warmup: bool,
    /// Share of the measured tree's keys in tables written after the first warm-up.
    pub keys_written_after_warmup: f64,
    /// Bytes of index and filter held after the lookups (`DbStats::metadata_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_bytes: Option<u64>,
    /// `Options::metadata_budget` (`--metadata-budget-bytes`), if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_budget_bytes: Option<u64>,
}

/// Level-1 budget of the leveled shape (bytes); ×10 per level below. Small on
/// purpose: a million 120-byte entries then settle over four levels (L1..L4).
pub const LEVEL1_BYTES: u64 = 64 << 10;

/// Keys written between two flushes of the leveled load: well under what the
/// 2 MiB memtable holds at the benchmark's largest default entries.
const LOAD_CHUNK: usize = 8192;

/// Table size of the leveled shape.
pub const TARGET_FILE_BYTES: u64 = 64 << 10;

/// Table files the leveled shape may keep open: its ~2,000 small tables do not fit the
/// default 1,000, and reopening a file on every present get would be what the ns
/// column measures. Up to 4,096, but never within 256 of the process's limit on open
/// files (read from `/proc/self/limits`; the default where that cannot be read).
pub(crate) fn open_files_budget() -> usize {
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
        });
    match limit {
        Some(limit) => limit.saturating_sub(256).clamp(1000, 4096),
        None => Options::default().max_open_files,
    }
}

/// Builds the tree once per allocation and measures it.
pub fn run_leveled(
    w: &Workload,
    allocations: &[AllocationRun],
    settings: LeveledSettings,
    work: &WorkDir,
    progress: &dyn Progress,
) -> Result<Vec<LeveledRow>, BenchError> {
    let mut rows = Vec::new();
    for run in allocations {
        let (allocation, label) = (run.allocation, run.label());
        let budget = run.bits_per_key.unwrap_or(w.bits_per_key);
        let dir = work.store_dir(&format!("leveled-{label}"))?;
        let options = Options {
            filter: if run.ribbon {
                FilterKind::Ribbon
            } else {
                FilterKind::CacheLocalBloom
            },
            bits_per_key: budget,
            filter_allocation: match allocation {
                Allocation::Monkey => FilterAllocation::Monkey,
                Allocation::Adaptive => FilterAllocation::Adaptive,
                _ => FilterAllocation::Uniform,
            },
            filter_memory_budget: settings.filter_budget_bytes,
            metadata_budget: settings.metadata_budget_bytes,
            optimize_filters_for_hits: allocation == Allocation::NoLastLevel,
            memtable_size: 2 << 20,
            target_file_size: TARGET_FILE_BYTES,
            level1_max_bytes: LEVEL1_BYTES,
            dynamic_level_bytes: true,
            file_system: Arc::new(NoSyncFs(OsFileSystem)),
            max_open_files: open_files_budget(),
            block_cache_size: w.cache_mib << 20,
            learned_memory: w.learned_memory(),
            ..Options::default()
        };
        let mut order: Vec<u64> = (0..w.keys).collect();
        order.shuffle(&mut StdRng::seed_from_u64(w.seed));
        let mut value = Vec::with_capacity(w.value_size);
        progress.start(&format!("load leveled {label}"), w.keys);
        // Deterministic: each chunk fits in the memtable, so no flush happens on its
        // own; the chunk is flushed and every compaction it triggers runs to the end
        // before the next chunk is written. The tree is then the same on every run
        // (the background thread's timing decides nothing), and so is every
        // allocation's tree.
        let load = |db: &Db, keys: &[u64], value: &mut Vec<u8>| -> Result<(), BenchError> {
            for chunk in keys.chunks(LOAD_CHUNK) {
                for &i in chunk {
                    fill_value(value, i, w.value_size);
                    db.put(key(2 * i), &value[..])?;
                }
                db.wait_for_compaction()?; // flushes first
                progress.inc(chunk.len() as u64);
            }
            Ok(())
        };
        // Settles L0 too: a trigger of one table compacts whatever the load left there.
        let settled = Options {
            l0_compaction_trigger: 1,
            ..options.clone()
        };
        // Tables numbered above this were written after the warm-up.
        let mut first_after_warmup = None;
        if settings.grow_after_warmup {
            let (first, rest) = order.split_at(order.len() / 2);
            let db = Db::open(&dir, options.clone())?;
            load(&db, first, &mut value)?;
            db.close()?;
            let db = Db::open(&dir, settled.clone())?;
            db.wait_for_compaction()?;
            in_shares(&absent_warmup_keys(w), w.threads, &NoProgress, |k| {
                Ok(u64::from(db.get(k)?.is_some()))
            })?;
            first_after_warmup = db.table_infos().iter().map(|t| t.number).max();
            db.close()?; // keeps the probe statistics (`PROBES`)
            let db = Db::open(&dir, options.clone())?;
            load(&db, rest, &mut value)?;
            db.close()?;
        } else {
            let db = Db::open(&dir, options.clone())?;
            load(&db, &order, &mut value)?;
            db.close()?;
        }
        let db = Db::open(&dir, settled)?;
        db.wait_for_compaction()?;
        db.open_tables()?; // as `BloomkvStore::reopen` does
        progress.finish();
        let mut row = measure(&db, w, &label, budget)?;
        row.filter_budget_bytes = settings.filter_budget_bytes.map(|b| b as u64);
        row.metadata_budget_bytes = settings.metadata_budget_bytes.map(|b| b as u64);
        row.grown_after_warmup = settings.grow_after_warmup;
        if let Some(n) = first_after_warmup {
            let infos = db.table_infos();
            let after: u64 = infos
                .iter()
                .filter(|t| t.number > n)
                .map(|t| t.entries)
                .sum();
            let all: u64 = infos.iter().map(|t| t.entries).sum();
            row.keys_written_after_warmup = after as f64 / all.max(1) as f64;
        }
        rows.push(row);
    }
    Ok(rows)
}

fn measure(db: &Db, w: &Workload, label: &str, budget: f64) -> Result<LeveledRow, BenchError> {
    let infos = db.table_infos();
    let mut per_level: Vec<LevelRow> = Vec::new();
    let mut filter_bytes = 0u64;
    for t in &infos {
        if per_level.last().is_none_or(|r| r.level != t.level) {
            per_level.push(LevelRow {
                allocation: label.to_string(),
                level: t.level,
                tables: 0,
                keys: 0,
                filter_bits_per_key: 0.0,
                predicted_fp: 0.0,
                absent: LevelStats::default(),
                observed_fp: 0.0,
                probed_share: 0.0,
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
        if w.cold {
            db.drop_table_caches();
        }
        let before = db.stats();
        let started = Instant::now();
        let found = in_shares(&keys, w.threads, &NoProgress, |k| {
            Ok(u64::from(db.get(k)?.is_some()))
        })?;
        let ns = started.elapsed().as_nanos() as f64 / keys.len() as f64;
        let want = match phase {
            Phase::Absent => 0,
            Phase::Present => keys.len() as u64,
        };
        if found != want {
            return Err(format!(
                "leveled {label}: {} found {found} of {} lookups",
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
    // The warm-up's draws start the stream the absent phase continues.
    in_shares(&absent_warmup_keys(w), w.threads, &NoProgress, |k| {
        Ok(u64::from(db.get(k)?.is_some()))
    })?;
    let (absent_reads, absent_ns, absent_levels) = phase(Phase::Absent)?;
    let (present_reads, present_ns, _) = phase(Phase::Present)?;
    for row in &mut per_level {
        if let Some(stats) = absent_levels.get(row.level) {
            row.observed_fp = stats.observed_fp_rate();
            row.probed_share = stats.table_probes as f64 / w.lookups.max(1) as f64;
            row.absent = stats.clone();
        }
    }
    Ok(LeveledRow {
        shape: "leveled",
        allocation: label.to_string(),
        budget_bits_per_key: budget,
        levels: per_level.len(),
        filter_bytes,
        absent_reads_per_lookup: absent_reads,
        present_reads_per_lookup: present_reads,
        threads: w.threads.max(1),
        absent_ns_per_lookup: absent_ns,
        present_ns_per_lookup: present_ns,
        per_level,
        absent_skew: w.absent_skew_name(),
        absent_warmup: w.absent_warmup,
        learned_bytes: db.stats().learned_bytes,
        filter_budget_bytes: None,
        grown_after_warmup: false,
        keys_written_after_warmup: 0.0,
        metadata_bytes: Some(db.stats().metadata_bytes),
        metadata_budget_bytes: None,
    })
}

/// The leveled runs as a text table: one line per level, then the totals.
pub fn print_leveled(rows: &[LeveledRow]) -> String {
    let mut out = format!(
        "\nleveled shape (levels sized from the bottom up, ×10 apart, base level ≥ {} KiB, \
         {} KiB tables; loaded in flushed chunks, each compacted to the end: the same tree \
         on every run)\n",
        LEVEL1_BYTES >> 10,
        TARGET_FILE_BYTES >> 10
    );
    out += &threads_note(rows.first().map_or(1, |r| r.threads));
    out += &format!(
        "{:<14} {:>5} {:>6} {:>9} {:>8} {:>7} {:>10} {:>10} {:>9}\n",
        "allocation",
        "level",
        "tables",
        "keys",
        "bits/key",
        "probed",
        "pred FP",
        "obs FP",
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
                "{:<14} {:>5} {:>6} {:>9} {:>8.2} {:>6.1}% {:>9.4}% {:>9.4}% {:>9}\n",
                r.allocation,
                format!("L{}", l.level),
                l.tables,
                l.keys,
                l.filter_bits_per_key,
                l.probed_share * 100.0,
                l.predicted_fp * 100.0,
                l.observed_fp * 100.0,
                fp_reads
            );
        }
        out += &format!(
            "{:<14} total: {} levels, filters {:.3} MiB + learned {:.3} MiB{}; absent {:.4} reads/get, {:.0} ns; present {:.4} reads/get, {:.0} ns\n",
            r.allocation,
            r.levels,
            r.filter_bytes as f64 / (1 << 20) as f64,
            r.learned_bytes as f64 / (1 << 20) as f64,
            match r.filter_budget_bytes {
                Some(b) => format!(" (budget {:.3} MiB)", b as f64 / (1 << 20) as f64),
                None => String::new(),
            },
            r.absent_reads_per_lookup,
            r.absent_ns_per_lookup,
            r.present_reads_per_lookup,
            r.present_ns_per_lookup
        );
    }
    if let Some(uniform) = rows.iter().find(|r| r.allocation == "uniform") {
        out += "relative to uniform (memory: filters and learned negatives):";
        let memory = |r: &LeveledRow| (r.filter_bytes + r.learned_bytes) as f64;
        for r in rows.iter().filter(|r| r.allocation != "uniform") {
            out += &format!(
                "  {} {:.2}× reads at {:.2}× memory;",
                r.allocation,
                r.absent_reads_per_lookup / uniform.absent_reads_per_lookup.max(f64::MIN_POSITIVE),
                memory(r) / memory(uniform).max(1.0)
            );
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_lists_parse_names_filters_and_budgets() {
        let adaptive = Allocation::parse_list("adaptive").unwrap();
        assert_eq!(adaptive[0].allocation, Allocation::Adaptive);
        assert_eq!(adaptive[0].label(), "adaptive");
        let runs = Allocation::parse_list("uniform, monkey+ribbon@8.5,no-last-level@9").unwrap();
        assert_eq!(
            runs,
            vec![
                AllocationRun {
                    allocation: Allocation::Uniform,
                    bits_per_key: None,
                    ribbon: false
                },
                AllocationRun {
                    allocation: Allocation::Monkey,
                    bits_per_key: Some(8.5),
                    ribbon: true
                },
                AllocationRun {
                    allocation: Allocation::NoLastLevel,
                    bits_per_key: Some(9.0),
                    ribbon: false
                },
            ]
        );
        let labels: Vec<String> = runs.iter().map(AllocationRun::label).collect();
        assert_eq!(labels, ["uniform", "monkey+ribbon@8.5", "no-last-level@9"]);
        for bad in [
            "",
            "monky",
            "monkey@",
            "monkey@x",
            "monkey@0.5",
            "monkey@31",
            "uniform+bloom",
        ] {
            assert!(Allocation::parse_list(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
