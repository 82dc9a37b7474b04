//! The batched lookup phases (`--multi-get N`): the same keys as the single-get phases,
//! asked N at a time through [`BenchStore::multi_get`].
//!
//! Each phase looks up exactly the keys [`run_phase`](crate::run_phase) looks up, in
//! the same order, cut into consecutive batches of N (the last may be shorter). Its row
//! has the single-get row's fields, per key — reads per lookup, ns per lookup, the OS's
//! read syscalls beside the store's count — and `"batch": N`, so the two sit side by
//! side in one table and one JSON:
//!
//! ```text
//!  filter  phase    batch  lookups  reads  ns/lkp ...
//!  ribbon  absent       1   200000   1953    ...      run_phase: one get per key
//!  ribbon  present      1   200000 200000    ...
//!  ribbon  absent      32   200000   1953    ...      here: 6,250 multi_gets of 32
//!  ribbon  present     32   200000 198000    ...      (blocks shared by two keys
//! ```                                                   are read once)
//!
//! Without `--cold`, one unmeasured pass of gets warms the caches before any phase
//! ([`run_store_batched`]), so that single gets and batches meet the same cache; with
//! `--cold` the page cache is dropped before each batched phase too, so each phase
//! starts as cold as the single-get phase beside it.

use std::time::Instant;

use super::{
    in_shares, load_timed, lookup_keys, run_phase, warm_up_absent, BenchError, BenchStore,
    FilterShape, OsIo, OsReads, Phase, PhaseResult, Progress, Row, Workload,
};

/// The largest `--multi-get` batch (a batch's keys and answers are held at once).
pub const MAX_BATCH: usize = 1 << 16;

/// Runs one lookup phase in batches of `batch` keys and measures it, as
/// [`run_phase`](crate::run_phase) measures the single gets.
pub fn run_multi_get_phase(
    store: &dyn BenchStore,
    w: &Workload,
    phase: Phase,
    batch: usize,
    progress: &dyn Progress,
) -> Result<PhaseResult, BenchError> {
    Ok(measure(store, w, phase, batch, progress)?.0)
}

/// [`run_multi_get_phase`], with the reads the phase made through io_uring.
fn measure(
    store: &dyn BenchStore,
    w: &Workload,
    phase: Phase,
    batch: usize,
    progress: &dyn Progress,
) -> Result<(PhaseResult, Option<u64>), BenchError> {
    let keys = lookup_keys(w, phase);
    let batches: Vec<_> = keys.chunks(batch.max(1)).collect();
    if w.cold {
        store.drop_caches();
    }
    progress.start(
        &format!("{} {} ×{batch}", store.label(), phase.name()),
        batches.len() as u64,
    );
    let cost = OsIo::self_cost();
    let before = store.counters();
    let uring_before = store.uring_reads();
    let os_before = OsIo::now();
    let started = Instant::now();
    let found = in_shares(&batches, w.threads, progress, |keys| store.multi_get(keys))?;
    let nanos = started.elapsed().as_nanos();
    let os_after = OsIo::now();
    let counters = store.counters().minus(before);
    let uring = store
        .uring_reads()
        .zip(uring_before)
        .map(|(a, b)| a.saturating_sub(b))
        .filter(|&n| n > 0);
    progress.finish();
    let os = match (os_before, os_after, cost) {
        (Some(b), Some(a), Some(c)) => Some(OsReads::between(b, a, c)),
        _ => None,
    };
    let result = PhaseResult {
        lookups: keys.len() as u64,
        found,
        counters,
        os,
        nanos,
        threads: w.threads.max(1),
    };
    Ok((result, uring))
}

/// The whole workload with batched rows: load and reopen, then — unless the run is
/// `--cold` — one unmeasured pass of gets over both phases' keys, then the single-get
/// phases and the phases in batches of `batch`.
///
/// The warm pass puts single gets and batches on an equal footing: both phases of
/// both kinds look up the same keys, so without it the single-get phases would fill
/// the block cache for the batches that follow them, and a cache larger than the data
/// (`--cache-mib 512`) would serve the batches only. With it every phase meets a cache
/// holding what fits of the blocks its keys need. A `--cold` run drops the page cache
/// before each phase instead; give it `--cache-mib 0` so that the block cache does not
/// carry one phase's blocks into the next.
pub fn run_store_batched(
    store: &mut dyn BenchStore,
    w: &Workload,
    batch: usize,
    progress: &dyn Progress,
) -> Result<Vec<Row>, BenchError> {
    let open_ms = load_timed(store, w, progress)?;
    warm_up_absent(store, w, progress)?;
    if !w.cold {
        for phase in [Phase::Absent, Phase::Present] {
            let keys = lookup_keys(w, phase);
            progress.start(
                &format!("warm {} {}", store.label(), phase.name()),
                keys.len() as u64,
            );
            in_shares(&keys, w.threads, progress, |k| Ok(u64::from(store.get(k)?)))?;
            progress.finish();
        }
    }
    let shape = store.filter_shape();
    let mut rows = Vec::new();
    for phase in [Phase::Absent, Phase::Present] {
        let before = store.learned();
        let result = run_phase(store, w, phase, progress)?;
        let mut row = Row::new(&store.label(), phase, &result, &shape, w.keys);
        row.table_bytes = store.disk_bytes();
        row.open_ms = Some(open_ms);
        row.record_learning(w, before, store.learned());
        rows.push(row);
    }
    rows.extend(multi_get_rows(store, w, batch, Some(open_ms), progress)?);
    Ok(rows)
}

/// The absent and present phases in batches of `batch`, as rows beside the single-get
/// rows of the same store (`open_ms`: the reopen those rows measured, which these
/// phases follow too).
pub fn multi_get_rows(
    store: &dyn BenchStore,
    w: &Workload,
    batch: usize,
    open_ms: Option<f64>,
    progress: &dyn Progress,
) -> Result<Vec<Row>, BenchError> {
    let shape: FilterShape = store.filter_shape();
    let mut rows = Vec::new();
    for phase in [Phase::Absent, Phase::Present] {
        let before = store.learned();
        let (result, uring) = measure(store, w, phase, batch, progress)?;
        let mut row = Row::new(&store.label(), phase, &result, &shape, w.keys);
        row.record_learning(w, before, store.learned());
        row.uring_reads = uring;
        row.table_bytes = store.disk_bytes();
        row.batch = batch;
        row.open_ms = open_ms;
        rows.push(row);
    }
    Ok(rows)
}
