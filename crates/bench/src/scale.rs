//! The scale shape: the store as it ships, loaded until its metadata is large, and
//! what the size costs at open, on the first gets after it, and in memory.
//!
//! The flat and leveled shapes build small tables on purpose (ten overlapping tables,
//! or two thousand of 64 KiB). This one takes the store's defaults — 64 MiB memtables
//! and tables, levels sized from the bottom, compaction on, no fsync per write (tables
//! and manifests are synced as always) — and writes `--keys` keys in random order, in
//! atomic batches of 1,000. Then it measures what grows with the data:
//!
//! ```text
//!  load ─► settle ─► close ─► open (warm) ─► absent and present gets ─► close
//!   │        │                    │                  │
//!   time     write and space      time               reads per get (the store's and
//!            amplification                           the OS's), metadata held, RSS
//!
//!  ─► drop the store's pages ─► open (cold) ─► the first 10,000 present gets
//! ```
//!
//! It builds two stores: the default (every table's index and filter in memory once
//! the table is opened) and one under `Options::metadata_budget` — a quarter of the
//! metadata the first store held with every table open, or `--metadata-budget-bytes`
//! — whose tables are written partitioned. Reads per get count the metadata
//! partitions the budgeted store reads (`DbStats::data_block_reads` includes them);
//! the OS's read syscalls per get count everything, table opens included.
//!
//! Resident memory is measured twice. In the benchmark's own process (`VmRSS`, right
//! after the warm open and after the gets) it holds whatever the allocator kept from
//! the load (and, for the second store, from the first), so it is an upper bound.
//! Then a fresh process — the `bloomkv` executable again, as `bloomkv scale-probe` —
//! opens the store, makes the same absent and present gets and reports its `VmRSS`
//! after the open and after the gets, and its peak (`VmHWM`): what a process that
//! embeds the store holds, the lookup key lists (a few MiB) included. Both are held
//! against the bound a user can plan with: metadata (the budget, or what the tables
//! hold), block cache, memtables, and 64 MiB.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use bloomkv_kv::fs::{FileSystem, OsFileSystem};
use bloomkv_kv::{Db, DbStats, Options, WriteBatch};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use super::{
    fill_value, in_shares, key, lookup_keys, BenchError, NoProgress, OsIo, OsReads, Phase,
    Progress, WorkDir, Workload, KEY_LEN,
};
use crate::store::levels_of;

/// Records per atomic batch of the load.
pub const LOAD_BATCH: usize = 1000;

/// Present gets measured right after the cold open.
pub const COLD_GETS: usize = 10_000;

/// What the memory bound allows beside metadata, block cache and memtables.
pub const RSS_HEADROOM: u64 = 64 << 20;

/// One batch of gets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GetFigures {
    /// Gets made.
    pub gets: u64,
    /// Table-file reads per get: data blocks, and under a budget the metadata
    /// partitions the cache lacked (`DbStats::data_block_reads`).
    pub reads_per_get: f64,
    /// Read syscalls per get the OS counted (table opens included), where it counts.
    pub os_reads_per_get: Option<f64>,
    /// Bytes per get the device served (not the page cache), where the OS says.
    pub device_bytes_per_get: Option<f64>,
    /// Wall-clock nanoseconds per get (all threads together).
    pub ns_per_get: f64,
    /// Tables the gets opened (footer, index and filter read).
    pub tables_opened: u64,
}

/// One store of the scale shape.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    /// `"default"` or `"budget"`.
    pub label: String,
    /// Keys loaded.
    pub keys: u64,
    /// `Options::metadata_budget`, if set.
    pub metadata_budget_bytes: Option<u64>,
    /// Seconds from the first write until the last returned.
    pub load_seconds: f64,
    /// Seconds after that until the memtable was flushed and compaction idle.
    pub settle_seconds: f64,
    /// Bytes of keys and values written (no overhead).
    pub logical_bytes: u64,
    /// Bytes of the live tables once settled.
    pub table_bytes: u64,
    /// `table_bytes / logical_bytes`.
    pub space_amplification: f64,
    /// Bytes the process wrote (log, tables, manifests) during load and settle, as the
    /// OS counts them (`wchar`), where it counts.
    pub bytes_written: Option<u64>,
    /// `bytes_written / logical_bytes`.
    pub write_amplification: Option<f64>,
    /// Table bytes flushes and compactions wrote (`DbStats`), per logical byte.
    pub table_write_amplification: f64,
    /// Tables per level once settled, as `[level, tables]`.
    pub levels: Vec<(usize, usize)>,
    /// Milliseconds `Db::open` took, the files in the page cache.
    pub open_warm_ms: f64,
    /// Milliseconds `Db::open` took after the store's files were dropped from the page
    /// cache.
    pub open_cold_ms: f64,
    /// `DbStats::open_micros` of the cold open.
    pub open_cold_micros: u64,
    /// The first present gets after the cold open.
    pub cold: GetFigures,
    /// Absent gets after the warm open (the tables in the page cache as the load left
    /// them).
    pub absent: GetFigures,
    /// Present gets after those.
    pub present: GetFigures,
    /// Index and filter held after the gets (`DbStats::metadata_bytes`).
    pub metadata_bytes: u64,
    /// Index and filter held with every table open (of the default store: what the
    /// budget is a quarter of).
    pub metadata_bytes_all_open: u64,
    /// The process's resident memory right after the warm open, where the OS says.
    pub rss_at_open: Option<u64>,
    /// The process's resident memory after the warm gets, where the OS says.
    pub rss_bytes: Option<u64>,
    /// A fresh process's warm open and gets, where one could be run (see the module
    /// docs).
    pub fresh: Option<FreshProcess>,
    /// Metadata (the budget, or `metadata_bytes_all_open` without one) + block cache +
    /// memtables (the active one and every immutable one allowed) + 64 MiB.
    pub memory_bound_bytes: u64,
}

/// What a fresh process that opens the store and gets holds in memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FreshProcess {
    /// Resident memory right after `Db::open`.
    pub rss_at_open: u64,
    /// Resident memory after the absent and present gets.
    pub rss_after_gets: u64,
    /// The most the process was ever resident (`VmHWM`).
    pub peak_rss: u64,
    /// Index and filter held after the gets (`DbStats::metadata_bytes`).
    pub metadata_bytes: u64,
    /// Milliseconds `Db::open` took.
    pub open_ms: f64,
    /// The absent gets.
    pub absent: GetFigures,
    /// The present gets.
    pub present: GetFigures,
}

/// The hidden subcommand a fresh process runs: `bloomkv scale-probe`.
pub const PROBE_COMMAND: &str = "scale-probe";

/// The fresh process's work: opens the store at `dir` with the scale shape's options,
/// makes the workload's absent and present gets, and reports its memory.
pub fn probe_fresh(
    dir: &Path,
    w: &Workload,
    metadata_budget: Option<usize>,
) -> Result<FreshProcess, BenchError> {
    let status = |field: &str| {
        proc_status_bytes(field).ok_or_else(|| format!("no {field} in /proc/self/status"))
    };
    let present_keys = lookup_keys(w, Phase::Present);
    let absent_keys = lookup_keys(w, Phase::Absent);
    let (db, open_ms) = timed_open(dir, &scale_options(w, metadata_budget))?;
    let rss_at_open = status("VmRSS")?;
    let absent = measure_gets(&db, &absent_keys, w.threads, false)?;
    let present = measure_gets(&db, &present_keys, w.threads, true)?;
    let fresh = FreshProcess {
        rss_at_open,
        rss_after_gets: status("VmRSS")?,
        peak_rss: status("VmHWM")?,
        metadata_bytes: db.stats().metadata_bytes,
        open_ms,
        absent,
        present,
    };
    db.close()?;
    Ok(fresh)
}

/// Runs [`probe_fresh`] in a new process of `exe` (the `bloomkv` executable) and reads
/// what it printed.
fn in_fresh_process(
    exe: &Path,
    dir: &Path,
    w: &Workload,
    metadata_budget: Option<usize>,
) -> Result<FreshProcess, BenchError> {
    let mut command = Command::new(exe);
    command
        .arg(PROBE_COMMAND)
        .arg("--dir")
        .arg(dir)
        .arg("--workload")
        .arg(serde_json::to_string(w).map_err(|e| e.to_string())?);
    if let Some(b) = metadata_budget {
        command.arg("--metadata-budget").arg(b.to_string());
    }
    let out = command
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {PROBE_COMMAND} failed ({}): {}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{PROBE_COMMAND} printed no figures: {e}").into())
}

/// The options of the scale shape's stores: the defaults, with the workload's block
/// cache and bits per key, and the table files it may keep open.
pub fn scale_options(w: &Workload, metadata_budget: Option<usize>) -> Options {
    Options {
        bits_per_key: w.bits_per_key,
        block_cache_size: w.cache_mib << 20,
        metadata_budget,
        max_open_files: super::leveled::open_files_budget(),
        ..Options::default()
    }
}

/// Builds and measures the default store, then the budgeted one (`budget`, or a
/// quarter of the default store's metadata with every table open).
///
/// `fresh`, the `bloomkv` executable, runs each store's fresh process (see the module
/// docs); without it, or if it fails (said on stderr), rows have no `fresh` figures.
pub fn run_scale(
    w: &Workload,
    budget: Option<usize>,
    fresh: Option<&Path>,
    work: &WorkDir,
    progress: &dyn Progress,
) -> Result<Vec<ScaleRow>, BenchError> {
    run_scale_with(w, budget, fresh, work, progress, |o| o)
}

/// [`run_scale`] with the options adjusted by `tune` (tests shrink the memtable and
/// tables, so that a small load makes many tables; the fresh process opens with the
/// shape's own options).
pub fn run_scale_with(
    w: &Workload,
    budget: Option<usize>,
    fresh: Option<&Path>,
    work: &WorkDir,
    progress: &dyn Progress,
    tune: impl Fn(Options) -> Options,
) -> Result<Vec<ScaleRow>, BenchError> {
    let run = |label: &str, budget: Option<usize>| {
        run_one(
            w,
            label,
            tune(scale_options(w, budget)),
            fresh,
            work,
            progress,
        )
    };
    let default = run("default", None)?;
    let budget = budget.unwrap_or((default.metadata_bytes_all_open / 4).max(1) as usize);
    let budgeted = run("budget", Some(budget))?;
    Ok(vec![default, budgeted])
}

fn run_one(
    w: &Workload,
    label: &str,
    options: Options,
    fresh_exe: Option<&Path>,
    work: &WorkDir,
    progress: &dyn Progress,
) -> Result<ScaleRow, BenchError> {
    let dir = work.store_dir(&format!("scale-{label}"))?;
    let logical_bytes = w.keys * (KEY_LEN + w.value_size) as u64;

    // Load and settle.
    let db = Db::open(&dir, options.clone())?;
    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(w.seed));
    progress.start(&format!("load scale {label}"), w.keys);
    let written_before = OsIo::now();
    let started = Instant::now();
    let mut value = Vec::with_capacity(w.value_size);
    for chunk in order.chunks(LOAD_BATCH) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            fill_value(&mut value, i, w.value_size);
            batch.put(key(2 * i), &value[..]);
        }
        db.write(batch)?;
        progress.inc(chunk.len() as u64);
    }
    let loaded = started.elapsed();
    db.wait_for_compaction()?;
    let settled = started.elapsed();
    progress.finish();
    let written_after = OsIo::now();
    drop(order);
    let stats = db.stats();
    let infos = db.table_infos();
    let table_bytes: u64 = infos.iter().map(|t| t.file_size).sum();
    let levels = levels_of(&infos);
    db.close()?;
    let bytes_written = match (written_before, written_after) {
        (Some(b), Some(a)) => Some(a.wchar.saturating_sub(b.wchar)),
        _ => None,
    };
    let per_logical = |bytes: u64| bytes as f64 / logical_bytes.max(1) as f64;

    // A warm open, and gets with the tables in the page cache as the load left them.
    let present_keys = lookup_keys(w, Phase::Present);
    let absent_keys = lookup_keys(w, Phase::Absent);
    let (db, open_warm_ms) = timed_open(&dir, &options)?;
    let rss_at_open = rss_bytes();
    let absent = measure_gets(&db, &absent_keys, w.threads, false)?;
    let present = measure_gets(&db, &present_keys, w.threads, true)?;
    let metadata_bytes = db.stats().metadata_bytes;
    let rss_bytes = rss_bytes();
    db.open_tables()?;
    let metadata_bytes_all_open = db.stats().metadata_bytes;
    db.close()?;

    // The same open and gets in a process that did nothing else.
    let fresh =
        fresh_exe.and_then(
            |exe| match in_fresh_process(exe, &dir, w, options.metadata_budget) {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!("scale {label}: no fresh-process figures: {e}");
                    None
                }
            },
        );

    // Then an open with the store's files out of the page cache, and its first gets.
    drop_dir_from_page_cache(&dir);
    let (db, open_cold_ms) = timed_open(&dir, &options)?;
    let open_cold_micros = db.stats().open_micros;
    let first = &present_keys[..present_keys.len().min(COLD_GETS)];
    let cold = measure_gets(&db, first, w.threads, true)?;
    db.close()?;

    let metadata = options
        .metadata_budget
        .map_or(metadata_bytes_all_open, |b| b as u64);
    let memtables = options.memtable_size as u64 * (1 + options.max_immutable_memtables as u64);
    Ok(ScaleRow {
        label: label.to_string(),
        keys: w.keys,
        metadata_budget_bytes: options.metadata_budget.map(|b| b as u64),
        load_seconds: loaded.as_secs_f64(),
        settle_seconds: (settled - loaded).as_secs_f64(),
        logical_bytes,
        table_bytes,
        space_amplification: per_logical(table_bytes),
        bytes_written,
        write_amplification: bytes_written.map(per_logical),
        table_write_amplification: per_logical(
            stats.flush_bytes_written + stats.compaction_bytes_written,
        ),
        levels,
        open_warm_ms,
        open_cold_ms,
        open_cold_micros,
        cold,
        absent,
        present,
        metadata_bytes,
        metadata_bytes_all_open,
        rss_at_open,
        rss_bytes,
        fresh,
        memory_bound_bytes: metadata + options.block_cache_size as u64 + memtables + RSS_HEADROOM,
    })
}

fn timed_open(dir: &Path, options: &Options) -> Result<(Db, f64), BenchError> {
    let started = Instant::now();
    let db = Db::open(dir, options.clone())?;
    Ok((db, started.elapsed().as_secs_f64() * 1000.0))
}

/// Asks the OS to drop every file under `dir` from its page cache (`posix_fadvise`
/// DONTNEED through bloomkv's file layer; best effort: errors are ignored). A store's
/// own block cache is not touched.
pub fn drop_dir_from_page_cache(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => drop_dir_from_page_cache(&path),
            Ok(t) if t.is_file() => {
                if let Ok(file) = OsFileSystem.open_random(&path) {
                    let _ = file.drop_cache();
                }
            }
            _ => {}
        }
    }
}

/// Looks every key up on `threads` threads and counts what it cost; every key must be
/// found (`present`) or none.
fn measure_gets(
    db: &Db,
    keys: &[[u8; KEY_LEN]],
    threads: usize,
    present: bool,
) -> Result<GetFigures, BenchError> {
    let before: DbStats = db.stats();
    let cost = OsIo::self_cost();
    let os_before = OsIo::now();
    let started = Instant::now();
    let found = in_shares(keys, threads, &NoProgress, |k| {
        Ok(u64::from(db.get(k)?.is_some()))
    })?;
    let nanos = started.elapsed().as_nanos();
    let os_after = OsIo::now();
    let after = db.stats();
    let want = if present { keys.len() as u64 } else { 0 };
    if found != want {
        return Err(format!(
            "{found} of {} {} keys were found",
            keys.len(),
            if present { "present" } else { "absent" }
        )
        .into());
    }
    let n = keys.len().max(1) as f64;
    let os = match (os_before, os_after, cost) {
        (Some(b), Some(a), Some(c)) => Some(OsReads::between(b, a, c)),
        _ => None,
    };
    Ok(GetFigures {
        gets: keys.len() as u64,
        reads_per_get: after
            .data_block_reads
            .saturating_sub(before.data_block_reads) as f64
            / n,
        os_reads_per_get: os.as_ref().map(|o| o.syscalls as f64 / n),
        device_bytes_per_get: os.as_ref().map(|o| o.device_bytes as f64 / n),
        ns_per_get: nanos as f64 / n,
        tables_opened: after.opened_tables.saturating_sub(before.opened_tables),
    })
}

/// The process's resident memory (`VmRSS` of `/proc/self/status`), where the OS says.
pub fn rss_bytes() -> Option<u64> {
    proc_status_bytes("VmRSS")
}

/// A memory field of `/proc/self/status` (`VmRSS`, `VmHWM`, …), in bytes.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// The scale shape's table.
pub fn print_scale(rows: &[ScaleRow]) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("n/a".to_string(), f);
    let mut out = String::new();
    for r in rows {
        let budget = r
            .metadata_budget_bytes
            .map_or("none".to_string(), |b| format!("{:.1} MiB", mib(b)));
        let levels = r
            .levels
            .iter()
            .map(|(l, n)| format!("L{l} {n}"))
            .collect::<Vec<_>>()
            .join(" · ");
        out.push_str(&format!(
            "scale {} ({} keys, metadata budget {budget}): load {:.1} s + settle {:.1} s; \
             {levels}\n",
            r.label, r.keys, r.load_seconds, r.settle_seconds
        ));
        out.push_str(&format!(
            "  space amplification {:.2}, write amplification {} (tables alone {:.2})\n",
            r.space_amplification,
            opt(r.write_amplification, &|v| format!("{v:.2}")),
            r.table_write_amplification
        ));
        out.push_str(&format!(
            "  open: warm {:.1} ms, cold {:.1} ms\n",
            r.open_warm_ms, r.open_cold_ms
        ));
        for (name, g) in [
            ("absent gets, warm", &r.absent),
            ("present gets, warm", &r.present),
            ("first present gets, cold", &r.cold),
        ] {
            out.push_str(&format!(
                "  {name}: {} gets, {:.4} reads per get, OS reads per get {}, device KiB per \
                 get {}, {:.0} ns per get, {} tables opened\n",
                g.gets,
                g.reads_per_get,
                opt(g.os_reads_per_get, &|v| format!("{v:.4}")),
                opt(g.device_bytes_per_get, &|v| format!("{:.2}", v / 1024.0)),
                g.ns_per_get,
                g.tables_opened
            ));
        }
        let mib_of = |v: Option<u64>| {
            opt(v.map(|b| b as f64), &|v| {
                format!("{:.0} MiB", v / (1u64 << 20) as f64)
            })
        };
        out.push_str(&format!(
            "  metadata held {:.1} MiB ({:.1} MiB with every table open); RSS {} at open, {} after the gets (bound {:.0} MiB)\n",
            mib(r.metadata_bytes),
            mib(r.metadata_bytes_all_open),
            mib_of(r.rss_at_open),
            mib_of(r.rss_bytes),
            mib(r.memory_bound_bytes)
        ));
        if let Some(f) = &r.fresh {
            out.push_str(&format!(
                "  a fresh process: open {:.1} ms; RSS {:.0} MiB at open, {:.0} MiB after the \
                 gets, peak {:.0} MiB (bound {:.0} MiB); {:.0} ns per absent get, {:.0} per \
                 present\n",
                f.open_ms,
                mib(f.rss_at_open),
                mib(f.rss_after_gets),
                mib(f.peak_rss),
                mib(r.memory_bound_bytes),
                f.absent.ns_per_get,
                f.present.ns_per_get
            ));
        }
    }
    if let [default, budget] = rows {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        out.push_str(&format!(
            "budget ÷ default, reads per get: absent {:.2}×, present {:.2}×, first cold gets {:.2}×\n",
            ratio(budget.absent.reads_per_get, default.absent.reads_per_get),
            ratio(budget.present.reads_per_get, default.present.reads_per_get),
            ratio(budget.cold.reads_per_get, default.cold.reads_per_get)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_where_the_os_says() {
        if std::path::Path::new("/proc/self/status").exists() {
            let rss = rss_bytes().expect("VmRSS in /proc/self/status");
            let peak = proc_status_bytes("VmHWM").expect("VmHWM in /proc/self/status");
            assert!(rss > 0 && peak >= rss, "VmRSS {rss}, VmHWM {peak}");
            assert_eq!(proc_status_bytes("VmNoSuchField"), None);
        }
    }
}
