//! The prefix-scan phases: how many table reads a prefix filter saves a prefix scan,
//! and what snapshots and reverse scans cost on the same store.
//!
//! The store has the flat shape of the lookup phases (`keys` keys shuffled into
//! `tables` overlapping tables, compaction held off, reopened), but its keys come in
//! groups of eight sharing a 16-byte prefix: key `n` is `key{16 digits}` with
//! `n = 1000 * 2g + member`, so the prefix `key{13 digits}` names group `2g`. Odd groups
//! hold no key and lie inside every table's key range: only a filter can rule them out.
//!
//! Phases, each on a store built with `FixedPrefix::new(16)` and on one without an
//! extractor: `scans` prefix scans of absent groups, then of present groups (reads
//! per scan, tables skipped, ns per scan). On the store with the extractor, also: point
//! gets with no snapshot and with one old snapshot held, and one full scan forwards and
//! one backwards.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::load_flat_db;
use bloomkv_kv::{Db, FilterKind, FixedPrefix, Options, PrefixExtractor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::{
    in_shares, key, threads_note, BenchError, NoProgress, Progress, WorkDir, Workload, KEY_LEN,
};

/// Keys per prefix group (`--prefix-scans` needs at least one full group).
pub const GROUP: u64 = 8;

/// Bytes of the prefix: `key` and 13 of the 16 digits.
pub const PREFIX_LEN: usize = KEY_LEN - 3;

/// One prefix-scan phase on one store.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixRow {
    /// `"fixed-16"` or `"none"`.
    pub extractor: String,
    /// `"absent"` or `"present"`.
    pub phase: &'static str,
    /// Prefix scans made.
    pub scans: u64,
    /// Keys they returned.
    pub keys_found: u64,
    /// Data-block reads over the phase.
    pub data_block_reads: u64,
    /// ... per scan.
    pub reads_per_scan: f64,
    /// Tables whose prefix filter was asked.
    pub prefix_checks: u64,
    /// Tables skipped on the filter's "absent".
    pub tables_skipped: u64,
    /// Threads that ran the scans at once (`--threads`).
    pub threads: usize,
    /// Wall-clock nanoseconds per scan (all threads together).
    pub ns_per_scan: f64,
}

/// Point gets and whole scans on the store with the extractor, side by side.
#[derive(Debug, Clone, Serialize)]
pub struct VersionTimes {
    /// ns per get of a present key with no snapshot held: the median of
    /// [`VERSION_ROUNDS`] passes, made after the snapshot below is released, on the
    /// same tables.
    pub get_ns: f64,
    /// ns per get of the same keys while one snapshot is held (taken before a round
    /// of overwrites that was flushed, so the tables hold two versions of those keys):
    /// the median of [`VERSION_ROUNDS`] passes, after one warm-up pass.
    pub get_with_snapshot_ns: f64,
    /// ns per get through that snapshot (median of [`VERSION_ROUNDS`] passes,
    /// alternated with the passes above).
    pub snapshot_get_ns: f64,
    /// ns for one forward scan of the whole store.
    pub forward_scan_ns: f64,
    /// ns for one reverse scan of the whole store.
    pub reverse_scan_ns: f64,
    /// Keys each full scan returned.
    pub scanned_keys: u64,
}

/// The group numbers of a phase: even (present) or odd (absent), seeded.
fn groups(w: &Workload, scans: u64, present: bool) -> Vec<u64> {
    let total = (w.keys / GROUP).max(1); // `--keys` ≥ GROUP: every group drawn is full
    let mut rng = StdRng::seed_from_u64(w.seed ^ (u64::from(present) + 7) << 40);
    (0..scans)
        .map(|_| 2 * rng.gen_range(0..total) + u64::from(!present))
        .collect()
}

fn prefix_of_group(group: u64) -> Vec<u8> {
    key(group * 1000)[..PREFIX_LEN].to_vec()
}

fn options(w: &Workload, extractor: bool) -> Options {
    Options {
        bits_per_key: w.bits_per_key,
        filter: FilterKind::CacheLocalBloom,
        disable_auto_compaction: true,
        memtable_size: 1 << 30,
        // The run's block cache (`--cache-mib`), as the point-lookup rows have.
        block_cache_size: w.cache_mib << 20,
        prefix_extractor: extractor
            .then(|| Arc::new(FixedPrefix::new(PREFIX_LEN)) as Arc<dyn PrefixExtractor>),
        ..Options::default()
    }
}

/// The `i`-th key of the grouped set.
fn grouped_key(i: u64) -> [u8; KEY_LEN] {
    key(2 * (i / GROUP) * 1000 + i % GROUP)
}

fn load(
    dir: &Path,
    w: &Workload,
    extractor: bool,
    progress: &dyn Progress,
) -> Result<Db, BenchError> {
    let label = format!("load prefix {}", if extractor { "fixed" } else { "none" });
    load_flat_db(
        dir,
        &options(w, extractor),
        w,
        &label,
        grouped_key,
        progress,
    )
}

fn scan_phase(
    db: &Db,
    w: &Workload,
    label: &str,
    groups: &[u64],
    present: bool,
) -> Result<PrefixRow, BenchError> {
    let prefixes: Vec<Vec<u8>> = groups.iter().map(|&g| prefix_of_group(g)).collect();
    if w.cold {
        db.drop_table_caches();
    }
    let before = db.stats();
    let started = Instant::now();
    let found = in_shares(&prefixes, w.threads, &NoProgress, |p| {
        db.scan_prefix(p)
            .try_fold(0u64, |n, kv| kv.map(|_| n + 1))
            .map_err(BenchError::from)
    })?;
    let nanos = started.elapsed().as_nanos() as f64;
    let after = db.stats();
    let reads = after.data_block_reads - before.data_block_reads;
    let scans = prefixes.len() as u64;
    let want = if present { GROUP * scans } else { 0 };
    if found != want {
        return Err(format!("{label} prefix scans found {found} keys, expected {want}").into());
    }
    Ok(PrefixRow {
        extractor: label.to_string(),
        phase: if present { "present" } else { "absent" },
        scans,
        keys_found: found,
        data_block_reads: reads,
        reads_per_scan: reads as f64 / scans.max(1) as f64,
        prefix_checks: after.prefix_checks - before.prefix_checks,
        tables_skipped: after.prefix_negatives - before.prefix_negatives,
        threads: w.threads.max(1),
        ns_per_scan: nanos / scans.max(1) as f64,
    })
}

/// Timed passes of each kind in [`VersionTimes`]; each figure is their median.
pub const VERSION_ROUNDS: usize = 3;

fn median(mut passes: Vec<f64>) -> f64 {
    passes.sort_by(f64::total_cmp);
    passes.get(passes.len() / 2).copied().unwrap_or(0.0)
}

fn time_gets(
    keys: &[[u8; KEY_LEN]],
    get: impl Fn(&[u8]) -> Result<bool, BenchError>,
) -> Result<f64, BenchError> {
    let started = Instant::now();
    for k in keys {
        if !get(k)? {
            return Err("a present key was not found".into());
        }
    }
    Ok(started.elapsed().as_nanos() as f64 / keys.len().max(1) as f64)
}

fn version_times(db: &Db, w: &Workload, lookups: u64) -> Result<VersionTimes, BenchError> {
    let mut rng = StdRng::seed_from_u64(w.seed ^ 0x5eed);
    let keys: Vec<[u8; KEY_LEN]> = (0..lookups)
        .map(|_| grouped_key(rng.gen_range(0..w.keys)))
        .collect();
    // One old snapshot, then a round of overwrites of a tenth of the keys, flushed.
    // Every timed pass below runs on these same tables, warm: with the snapshot held
    // (alternated with passes through it), then with it released.
    let snap = db.snapshot();
    let value = vec![b'w'; w.value_size];
    for i in (0..w.keys).step_by(10) {
        db.put(grouped_key(i), &value)?;
    }
    db.flush()?;
    time_gets(&keys, |k| Ok(db.get(k)?.is_some()))?;
    let (mut held, mut through) = (Vec::new(), Vec::new());
    for _ in 0..VERSION_ROUNDS {
        held.push(time_gets(&keys, |k| Ok(db.get(k)?.is_some()))?);
        through.push(time_gets(&keys, |k| Ok(snap.get(k)?.is_some()))?);
    }
    drop(snap);
    let released = (0..VERSION_ROUNDS)
        .map(|_| time_gets(&keys, |k| Ok(db.get(k)?.is_some())))
        .collect::<Result<Vec<_>, _>>()?;
    let (get_ns, get_with_snapshot_ns) = (median(released), median(held));
    let snapshot_get_ns = median(through);
    let started = Instant::now();
    let forward = db
        .scan::<&[u8], _>(..)
        .try_fold(0u64, |n, kv| kv.map(|_| n + 1))?;
    let forward_scan_ns = started.elapsed().as_nanos() as f64;
    let started = Instant::now();
    let reverse = db
        .scan::<&[u8], _>(..)
        .rev()
        .try_fold(0u64, |n, kv| kv.map(|_| n + 1))?;
    let reverse_scan_ns = started.elapsed().as_nanos() as f64;
    if forward != w.keys || reverse != w.keys {
        return Err(format!(
            "full scans found {forward} and {reverse} of {} keys",
            w.keys
        )
        .into());
    }
    Ok(VersionTimes {
        get_ns,
        get_with_snapshot_ns,
        snapshot_get_ns,
        forward_scan_ns,
        reverse_scan_ns,
        scanned_keys: forward,
    })
}

/// Runs the prefix phases (with and without an extractor) and the version timings.
pub fn run_prefix_phases(
    w: &Workload,
    work: &WorkDir,
    scans: u64,
    progress: &dyn Progress,
) -> Result<(Vec<PrefixRow>, Option<VersionTimes>), BenchError> {
    let mut rows = Vec::new();
    let mut times = None;
    for (extractor, label) in [(false, "none"), (true, "fixed-16")] {
        let dir = work.store_dir(&format!("prefix-{label}"))?;
        let db = load(&dir, w, extractor, progress)?;
        rows.push(scan_phase(&db, w, label, &groups(w, scans, false), false)?);
        rows.push(scan_phase(&db, w, label, &groups(w, scans, true), true)?);
        if extractor {
            times = Some(version_times(&db, w, w.lookups)?);
        }
        db.close()?;
    }
    Ok((rows, times))
}

/// The prefix rows and version timings as a text table.
pub fn print_prefix_table(rows: &[PrefixRow], times: Option<&VersionTimes>) -> String {
    let mut out = threads_note(rows.first().map_or(1, |r| r.threads));
    let _ = writeln!(
        out,
        "{:<10} {:<8} {:>7} {:>8} {:>7} {:>10} {:>7} {:>8} {:>9}",
        "extractor",
        "phase",
        "scans",
        "found",
        "reads",
        "reads/scan",
        "checks",
        "skipped",
        "ns/scan"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<10} {:<8} {:>7} {:>8} {:>7} {:>10.4} {:>7} {:>8} {:>9.0}",
            r.extractor,
            r.phase,
            r.scans,
            r.keys_found,
            r.data_block_reads,
            r.reads_per_scan,
            r.prefix_checks,
            r.tables_skipped,
            r.ns_per_scan
        );
    }
    if let Some(t) = times {
        let _ = writeln!(
            out,
            "one thread: get, no snapshot {:.0} ns; with one old snapshot held {:.0} ns ({:.3}x); through it {:.0} ns",
            t.get_ns,
            t.get_with_snapshot_ns,
            t.get_with_snapshot_ns / t.get_ns,
            t.snapshot_get_ns
        );
        let _ = writeln!(
            out,
            "full scan of {} keys: forward {:.1} ms, reverse {:.1} ms ({:.3}x)",
            t.scanned_keys,
            t.forward_scan_ns / 1e6,
            t.reverse_scan_ns / 1e6,
            t.reverse_scan_ns / t.forward_scan_ns
        );
    }
    out
}
