//! The range-scan phases: how many table reads a range filter saves a short scan.
//!
//! The store has the flat shape of the lookup phases (`keys` keys shuffled into
//! `tables` overlapping tables, compaction held off, reopened), with keys dense in
//! their low bytes so that a range's length in the range filter's mapped space is its
//! length in ids: key `i` is `"r"` and the id `i · 4096` as 8 big-endian bytes. Every
//! table's key range spans nearly all ids, so only a filter can rule a range out.
//!
//! Phases, on three stores — no range filter, a prefix Bloom filter
//! (`FixedPrefix::new(8)`: `"r"` and the id's top 7 bytes, so groups of 256 ids; a
//! scan whose two bounds share a prefix asks it), and a range filter — for ranges of
//! 1, 16, 64 and 1024 ids (`scan(a..=b)`):
//!
//! * **empty**: ranges inside the gaps between stored ids; half start right after a
//!   stored id (`id + 1`, the correlated case that defeats trie-based range filters),
//!   half anywhere in a gap;
//! * **non-empty**: ranges holding a stored id at a random offset.
//!
//! Reported per phase: data-block reads per scan, tables asked (range or prefix filter)
//! and skipped, the share of asked tables that said "maybe" to an empty range (a
//! wasted read each) beside the range filter's bound `l / 2^(B−2)` (1 above the maximum
//! range length `L`: such ranges are not asked), ns per scan, and the range filter's
//! bits per key as the tables report them. The prefix filter has no bound for ranges:
//! a range starting right after a stored key shares that key's prefix.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use std::sync::Arc;

use super::load_flat_db;
use bloomkv_kv::{Db, FilterKind, FixedPrefix, Options, PrefixExtractor, RangeFilterOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::{in_shares, threads_note, BenchError, NoProgress, Progress, WorkDir, Workload};

/// Ids between two stored keys: room for empty ranges of every measured length.
const SPACING: u64 = 4096;

/// The range lengths measured, in ids (= mapped keys).
pub const RANGE_LENGTHS: [u64; 4] = [1, 16, 64, 1024];

/// One range-scan phase on one store.
#[derive(Debug, Clone, Serialize)]
pub struct RangeRow {
    /// `"none"`, `"prefix-8"` or `"grafite"`.
    pub filter: String,
    /// `"empty"` or `"non-empty"`.
    pub phase: &'static str,
    /// Ids per range.
    pub range_len: u64,
    /// Scans made.
    pub scans: u64,
    /// Keys they returned.
    pub keys_found: u64,
    /// Data-block reads over the phase.
    pub data_block_reads: u64,
    /// ... per scan.
    pub reads_per_scan: f64,
    /// Tables whose range (or prefix) filter was asked.
    pub filter_checks: u64,
    /// Tables skipped on the filter's "no".
    pub tables_skipped: u64,
    /// Empty phases: the share of checks that said "maybe" (a wasted read each).
    pub observed_fp: Option<f64>,
    /// The bound on that share: `l / 2^(B−2)`, or 1 for ranges longer than `L`.
    pub fp_bound: Option<f64>,
    /// Threads that ran the scans at once (`--threads`).
    pub threads: usize,
    /// Wall-clock nanoseconds per scan (all threads together).
    pub ns_per_scan: f64,
    /// Range filter bits per key, averaged over the tables (0 without one).
    pub filter_bits_per_key: f64,
}

/// Key of id `id`: `"r"` and the id, 8 bytes big-endian.
fn range_key(id: u64) -> [u8; 9] {
    let mut k = [b'r'; 9];
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// The stores compared: a label, the range filter, and whether a prefix extractor.
#[derive(Clone, Copy)]
struct Setup {
    label: &'static str,
    range: Option<RangeFilterOptions>,
    prefix: bool,
}

/// Bytes of the prefix: `"r"` and the id's top 7 bytes.
const PREFIX_LEN: usize = 8;

fn options(w: &Workload, setup: Setup) -> Options {
    Options {
        bits_per_key: w.bits_per_key,
        filter: FilterKind::CacheLocalBloom,
        disable_auto_compaction: true,
        memtable_size: 1 << 30,
        block_cache_size: w.cache_mib << 20,
        range_filter: setup.range,
        prefix_extractor: setup
            .prefix
            .then(|| Arc::new(FixedPrefix::new(PREFIX_LEN)) as Arc<dyn PrefixExtractor>),
        ..Options::default()
    }
}

fn load(dir: &Path, w: &Workload, setup: Setup, progress: &dyn Progress) -> Result<Db, BenchError> {
    let label = format!("load range {}", setup.label);
    load_flat_db(
        dir,
        &options(w, setup),
        w,
        &label,
        |i| range_key(i * SPACING),
        progress,
    )
}

/// The first id of each range of a phase, seeded.
fn starts(w: &Workload, scans: u64, len: u64, empty: bool) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(w.seed ^ (len << 20) ^ u64::from(empty));
    // Stored ids 1 .. keys−1: ranges stay inside every table's key range.
    let last = w.keys.saturating_sub(1).max(2);
    (0..scans)
        .map(|s| {
            let id = rng.gen_range(1..last) * SPACING;
            if !empty {
                id - rng.gen_range(0..len)
            } else if s % 2 == 0 {
                id + 1
            } else {
                id + 1 + rng.gen_range(0..SPACING - len - 1)
            }
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn scan_phase(
    db: &Db,
    label: &str,
    w: &Workload,
    scans: u64,
    len: u64,
    empty: bool,
    bound: Option<f64>,
    bits_per_key: f64,
) -> Result<RangeRow, BenchError> {
    let ranges: Vec<([u8; 9], [u8; 9])> = starts(w, scans, len, empty)
        .into_iter()
        .map(|a| (range_key(a), range_key(a + len - 1)))
        .collect();
    if w.cold {
        db.drop_table_caches();
    }
    let before = db.stats();
    let started = Instant::now();
    let found = in_shares(&ranges, w.threads, &NoProgress, |(lo, hi)| {
        db.scan::<[u8; 9], _>(lo..=hi)
            .try_fold(0u64, |n, kv| kv.map(|_| n + 1))
            .map_err(BenchError::from)
    })?;
    let nanos = started.elapsed().as_nanos() as f64;
    let after = db.stats();
    let (want_lo, want_hi) = if empty { (0, 0) } else { (scans, scans) };
    if found < want_lo || found > want_hi {
        return Err(format!(
            "{label} range scans of {len} found {found} keys, expected {want_lo}..={want_hi}"
        )
        .into());
    }
    let reads = after.data_block_reads - before.data_block_reads;
    let checks = after.range_filter_checks - before.range_filter_checks
        + (after.prefix_checks - before.prefix_checks);
    let skipped = after.range_filter_negatives - before.range_filter_negatives
        + (after.prefix_negatives - before.prefix_negatives);
    let observed_fp = (empty && checks > 0).then(|| (checks - skipped) as f64 / checks as f64);
    Ok(RangeRow {
        filter: label.to_string(),
        phase: if empty { "empty" } else { "non-empty" },
        range_len: len,
        scans,
        keys_found: found,
        data_block_reads: reads,
        reads_per_scan: reads as f64 / scans.max(1) as f64,
        filter_checks: checks,
        tables_skipped: skipped,
        observed_fp,
        fp_bound: if empty { bound } else { None },
        threads: w.threads.max(1),
        ns_per_scan: nanos / scans.max(1) as f64,
        filter_bits_per_key: bits_per_key,
    })
}

/// The range filter alone, outside the store: what building and asking it costs.
#[derive(Debug, Clone, Serialize)]
pub struct RangeFilterTimes {
    /// Keys in the filter (one table's worth).
    pub keys: u64,
    /// ns per key to build it (`add_key` of sorted keys, then `finish`).
    pub build_ns_per_key: f64,
    /// ns per `may_contain_range` of a short empty range (length 16, half correlated).
    pub query_ns: f64,
    /// Share of those queries answered "maybe".
    pub query_maybe: f64,
}

/// Builds one table's worth of range filter over the phase keys and times it and
/// `queries` short empty queries against it.
pub fn time_range_filter(
    w: &Workload,
    range: RangeFilterOptions,
    queries: u64,
) -> Result<RangeFilterTimes, BenchError> {
    let per_table = w.keys.div_ceil(u64::from(w.tables.max(1))).max(1);
    // Every `tables`-th id: the density of one table of the flat shape.
    let ids: Vec<u64> = (0..per_table)
        .map(|i| i * u64::from(w.tables.max(1)) * SPACING)
        .collect();
    let keys: Vec<[u8; 9]> = ids.iter().map(|&id| range_key(id)).collect();
    let started = Instant::now();
    let mut b = bloomkv_filter::RangeFilterBuilder::new(range.bits_per_key, range.max_range_len)?;
    for k in &keys {
        b.add_key(k);
    }
    let block = b.finish();
    let build_ns_per_key = started.elapsed().as_nanos() as f64 / per_table as f64;
    let reader = bloomkv_filter::RangeFilterReader::open(&block)?;
    let mut rng = StdRng::seed_from_u64(w.seed ^ 0xF117);
    let len = 16;
    let bounds: Vec<([u8; 9], [u8; 9])> = (0..queries)
        .map(|q| {
            let id = ids[rng.gen_range(0..ids.len())];
            let a = if q % 2 == 0 {
                id + 1
            } else {
                id + 1 + rng.gen_range(0..SPACING - len - 1)
            };
            (range_key(a), range_key(a + len - 1))
        })
        .collect();
    let started = Instant::now();
    let mut maybe = 0u64;
    for (lo, hi) in &bounds {
        maybe += u64::from(reader.may_contain_range(lo, std::ops::Bound::Included(hi)));
    }
    let query_ns = started.elapsed().as_nanos() as f64 / queries.max(1) as f64;
    Ok(RangeFilterTimes {
        keys: per_table,
        build_ns_per_key,
        query_ns,
        query_maybe: maybe as f64 / queries.max(1) as f64,
    })
}

/// Runs the range phases on a store without a range filter and on one with
/// `bits_per_key` and `max_range_len`.
pub fn run_range_phases(
    w: &Workload,
    work: &WorkDir,
    scans: u64,
    range: RangeFilterOptions,
    progress: &dyn Progress,
) -> Result<Vec<RangeRow>, BenchError> {
    if w.keys < 3 {
        return Err("the range phases need at least 3 keys".into());
    }
    let mut rows = Vec::new();
    let setups = [
        Setup {
            label: "none",
            range: None,
            prefix: false,
        },
        Setup {
            label: "prefix-8",
            range: None,
            prefix: true,
        },
        Setup {
            label: "grafite",
            range: Some(range),
            prefix: false,
        },
    ];
    for setup in setups {
        let (filter, label) = (setup.range, setup.label);
        let dir = work.store_dir(&format!("range-{label}"))?;
        let db = load(&dir, w, setup, progress)?;
        let infos = db.table_infos();
        let bits: Vec<f64> = infos
            .iter()
            .filter_map(|t| t.range_filter.as_ref().map(|r| r.bits_per_key))
            .collect();
        let bits_per_key = if bits.is_empty() {
            0.0
        } else {
            bits.iter().sum::<f64>() / bits.len() as f64
        };
        for len in RANGE_LENGTHS {
            let bound = filter.map(|r| {
                if len > r.max_range_len {
                    1.0
                } else {
                    (len as f64 / (r.bits_per_key - 2.0).exp2()).min(1.0)
                }
            });
            for empty in [true, false] {
                rows.push(scan_phase(
                    &db,
                    label,
                    w,
                    scans,
                    len,
                    empty,
                    bound,
                    bits_per_key,
                )?);
            }
        }
        db.close()?;
    }
    Ok(rows)
}

/// The range rows (and the filter's own costs) as a text table.
pub fn print_range_table(rows: &[RangeRow], times: Option<&RangeFilterTimes>) -> String {
    let mut out = threads_note(rows.first().map_or(1, |r| r.threads));
    let _ = writeln!(
        out,
        "{:<8} {:<9} {:>5} {:>7} {:>7} {:>10} {:>7} {:>8} {:>9} {:>9} {:>9} {:>6}",
        "range",
        "phase",
        "len",
        "scans",
        "found",
        "reads/scan",
        "checks",
        "skipped",
        "obs FP",
        "bound",
        "ns/scan",
        "bits/k"
    );
    let pct = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{:.4}%", v * 100.0));
    for r in rows {
        let _ = writeln!(
            out,
            "{:<8} {:<9} {:>5} {:>7} {:>7} {:>10.4} {:>7} {:>8} {:>9} {:>9} {:>9.0} {:>6.2}",
            r.filter,
            r.phase,
            r.range_len,
            r.scans,
            r.keys_found,
            r.reads_per_scan,
            r.filter_checks,
            r.tables_skipped,
            pct(r.observed_fp),
            pct(r.fp_bound),
            r.ns_per_scan,
            r.filter_bits_per_key
        );
    }
    if let Some(t) = times {
        let _ = writeln!(
            out,
            "range filter alone, {} keys: build {:.1} ns/key, query (length 16, empty) {:.1} ns, \
             {:.4}% maybe",
            t.keys,
            t.build_ns_per_key,
            t.query_ns,
            t.query_maybe * 100.0
        );
    }
    out
}
