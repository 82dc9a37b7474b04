//! One store through the suite: the load phase, then each workload for a fixed time
//! (or a fixed number of operations), its latencies in HDR histograms.
//!
//! ```text
//! load     threads write ids 0..records in batches (timed alone)
//! a, b, …  threads draw operations for `seconds`; each is timed on its own and goes
//!          into its kind's histogram (nanoseconds, 3 significant digits)
//! ```
//!
//! The workloads run one after another on the same store, as YCSB's do after one
//! load: what D and E insert stays for the workloads after them. Every read is
//! checked as it returns (a loaded or acknowledged record is found, under its own
//! id; an absent key is absent; a scan's rows come in order and belong to their
//! keys); reads and writes of one record in every `verify_every` are also logged
//! for [`verify::check`](super::verify::check).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bloomkv_bench::BenchError;
use hdrhistogram::Histogram;

use super::generator::{fnv64, Chooser, SplitMix64};
use super::record::{Data, ABSENT_BASE};
use super::stores::{YcsbStore, LOAD_BATCH};
use super::verify::{self, Event, Seen};
use super::workload::{Op, Workload, MAX_SCAN, OP_KINDS};

/// How a store is run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Records loaded before the workloads.
    pub records: u64,
    /// Threads of the load and of every workload.
    pub threads: usize,
    /// How long each workload runs...
    pub duration: Duration,
    /// ...or, if set, how many operations each thread does instead.
    pub ops_per_thread: Option<u64>,
    /// Bytes of every value.
    pub value_size: usize,
    /// Seeds every thread's generator.
    pub seed: u64,
    /// One record in this many is logged and checked ([`verify`]); 1 logs all.
    pub verify_every: u64,
    /// The records' keys and values.
    pub data: Data,
}

/// The load phase's result.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct LoadResult {
    /// Records written.
    pub records: u64,
    /// Wall time of the load.
    pub seconds: f64,
    /// Records per second.
    pub ops_per_sec: f64,
}

/// Latencies of one operation kind, in nanoseconds.
pub type Latencies = Histogram<u64>;

/// A histogram from 1 ns to an hour at 3 significant digits.
pub fn new_histogram() -> Latencies {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant bounds hdrhistogram accepts: 1 <= low, high >= 2 low, 3 digits")
}

/// One workload's result on one store.
#[derive(Debug, Clone)]
pub struct WorkloadResult {
    /// The workload.
    pub workload: char,
    /// Operations done, all threads.
    pub ops: u64,
    /// Wall time from the threads' start to the last one's end.
    pub seconds: f64,
    /// Latencies per kind, in [`OP_KINDS`] order.
    pub latencies: Vec<Latencies>,
    /// Reads checked against the write log.
    pub reads_verified: usize,
}

impl WorkloadResult {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }

    /// Operations of `kind` done.
    pub fn count(&self, kind: Op) -> u64 {
        self.latencies[kind.index()].len()
    }
}

/// Ids of inserted records, handed out in order; the records before the first id
/// not yet acknowledged are the ones reads may ask for (YCSB's acknowledged counter).
#[derive(Debug)]
pub struct Acknowledged {
    next: AtomicU64,
    limit: AtomicU64,
    pending: Mutex<BinaryHeap<Reverse<u64>>>,
}

impl Acknowledged {
    /// Records `0..records` exist already.
    pub fn new(records: u64) -> Self {
        Acknowledged {
            next: AtomicU64::new(records),
            limit: AtomicU64::new(records),
            pending: Mutex::new(BinaryHeap::new()),
        }
    }

    /// The id of the next insert.
    pub fn reserve(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Insert `id` is done.
    pub fn ack(&self, id: u64) {
        let mut pending = match self.pending.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        pending.push(Reverse(id));
        let mut limit = self.limit.load(Ordering::Acquire);
        while pending.peek() == Some(&Reverse(limit)) {
            pending.pop();
            limit += 1;
        }
        self.limit.store(limit, Ordering::Release);
    }

    /// Records `0..count()` are all written.
    pub fn count(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }
}

/// What runs on one store: its records, the clock and log of the checked records.
pub struct StoreRun<'a> {
    store: &'a dyn YcsbStore,
    config: RunConfig,
    acked: Acknowledged,
    clock: AtomicU64,
    writers: AtomicU64,
    log: Mutex<Vec<Event>>,
}

impl<'a> StoreRun<'a> {
    /// Prepares to run `store` (empty) as `config` says.
    pub fn new(store: &'a dyn YcsbStore, config: RunConfig) -> Self {
        StoreRun {
            store,
            acked: Acknowledged::new(config.records),
            config,
            clock: AtomicU64::new(1),
            writers: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
        }
    }

    /// Records in the store now (loaded plus acknowledged inserts).
    pub fn count(&self) -> u64 {
        self.acked.count()
    }

    /// The load phase: ids `0..records`, in batches, spread over the threads.
    pub fn load(&self) -> Result<LoadResult, BenchError> {
        let records = self.config.records;
        let threads = self.config.threads.max(1) as u64;
        let value_size = self.config.value_size;
        let data = &self.config.data;
        let started = Instant::now();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || -> Result<(), BenchError> {
                        let mut batch = Vec::with_capacity(LOAD_BATCH);
                        let mut id = t * LOAD_BATCH as u64;
                        // Thread t writes batches t, t + threads, t + 2·threads, …
                        while id < records {
                            let end = (id + LOAD_BATCH as u64).min(records);
                            batch.clear();
                            for i in id..end {
                                let (mut k, mut v) = (Vec::new(), Vec::with_capacity(value_size));
                                data.key(i, &mut k);
                                data.value(i, verify::LOAD_VERSION, value_size, &mut v);
                                batch.push((k, v));
                            }
                            self.store.load_batch(&batch)?;
                            id += threads * LOAD_BATCH as u64;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().map_err(|_| "a load thread panicked")?)
        })?;
        let seconds = started.elapsed().as_secs_f64();
        self.store.checkpoint()?;
        Ok(LoadResult {
            records,
            seconds,
            ops_per_sec: records as f64 / seconds.max(1e-9),
        })
    }

    fn sampled(&self, id: u64) -> bool {
        fnv64(id).is_multiple_of(self.config.verify_every.max(1))
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    /// Runs `workload`; `round` varies the seeds between the runs of a comparison.
    pub fn run(&self, workload: &Workload, round: u64) -> Result<WorkloadResult, BenchError> {
        let threads = self.config.threads.max(1);
        let started = Instant::now();
        let deadline = started + self.config.duration;
        let per_thread = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let seed = self.config.seed
                        ^ fnv64(round << 32 | (workload.name as u64) << 16 | t as u64);
                    s.spawn(move || self.thread(workload, seed, deadline))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| -> BenchError { "a workload thread panicked".into() })?
                })
                .collect::<Result<Vec<_>, BenchError>>()
        })?;
        let seconds = started.elapsed().as_secs_f64();
        let mut latencies: Vec<Latencies> = OP_KINDS.iter().map(|_| new_histogram()).collect();
        let mut ops = 0;
        for thread in per_thread {
            for (all, h) in latencies.iter_mut().zip(thread) {
                ops += h.len();
                all.add(&h)
                    .map_err(|e| format!("merging histograms: {e}"))?;
            }
        }
        let log = match self.log.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        };
        let records = self.config.records;
        let reads_verified = verify::check(&log, |id| id < records).map_err(|errors| {
            format!(
                "workload {}: reads that no correct store returns:\n  {}",
                workload.name,
                errors.join("\n  ")
            )
        })?;
        Ok(WorkloadResult {
            workload: workload.name,
            ops,
            seconds,
            latencies,
            reads_verified,
        })
    }

    /// One thread of a workload: its histograms.
    fn thread(
        &self,
        workload: &Workload,
        seed: u64,
        deadline: Instant,
    ) -> Result<Vec<Latencies>, BenchError> {
        let mut rng = SplitMix64::new(seed);
        let mut chooser = Chooser::new(workload.distribution, self.count());
        let mut absent = Chooser::new(workload.distribution, self.config.records);
        let mut hists: Vec<Latencies> = OP_KINDS.iter().map(|_| new_histogram()).collect();
        let writer = self.writers.fetch_add(1, Ordering::Relaxed) + 1;
        let mut writes = 0u64;
        let mut value = Vec::with_capacity(self.config.value_size);
        let data = &self.config.data;
        let mut k = Vec::new();
        let mut log = Vec::new();
        let mut done = 0u64;
        loop {
            let op = workload.next_op(&mut rng);
            let mut version = || {
                writes += 1;
                writer << 40 | writes
            };
            let t0 = Instant::now();
            match op {
                Op::Read | Op::ReadModifyWrite => {
                    let id = chooser.next(self.count(), &mut rng);
                    data.key(id, &mut k);
                    let sampled = self.sampled(id);
                    let start = if sampled { self.tick() } else { 0 };
                    let got = self.store.get(&k)?;
                    let end = if sampled { self.tick() } else { 0 };
                    match got {
                        Some(head) if head.id == id => {}
                        Some(head) => {
                            return Err(
                                format!("record {id} holds record {}'s value", head.id).into()
                            )
                        }
                        None => {
                            return Err(format!("record {id} was written but is not found").into())
                        }
                    }
                    if sampled {
                        log.push(Event {
                            id,
                            start,
                            end,
                            seen: Seen::Read(got.map(|h| h.version)),
                        });
                    }
                    if op == Op::ReadModifyWrite {
                        let v = version();
                        data.value(id, v, self.config.value_size, &mut value);
                        self.put_logged(id, &k, &value, v, &mut log)?;
                    }
                }
                Op::ReadAbsent => {
                    let id = ABSENT_BASE + absent.next(self.config.records, &mut rng);
                    data.key(id, &mut k);
                    if let Some(head) = self.store.get(&k)? {
                        return Err(format!(
                            "a key never written was found, holding record {}'s value",
                            head.id
                        )
                        .into());
                    }
                }
                Op::Update => {
                    let id = chooser.next(self.count(), &mut rng);
                    let v = version();
                    data.key(id, &mut k);
                    data.value(id, v, self.config.value_size, &mut value);
                    self.put_logged(id, &k, &value, v, &mut log)?;
                }
                Op::Insert => {
                    let id = self.acked.reserve();
                    let v = version();
                    data.key(id, &mut k);
                    data.value(id, v, self.config.value_size, &mut value);
                    self.put_logged(id, &k, &value, v, &mut log)?;
                    self.acked.ack(id);
                }
                Op::Scan => {
                    let id = chooser.next(self.count(), &mut rng);
                    let len = 1 + rng.below(MAX_SCAN) as usize;
                    data.key(id, &mut k);
                    let start_key = &k;
                    let start = self.tick();
                    let mut previous: Vec<u8> = Vec::new();
                    let mut own = Vec::new();
                    let mut rows = Vec::new();
                    let mut bad = None;
                    self.store.scan(start_key, len, &mut |k, head| {
                        data.key(head.id, &mut own);
                        let ok = k >= &start_key[..]
                            && (rows.is_empty() || k > &previous[..])
                            && own == k;
                        if !ok && bad.is_none() {
                            bad = Some(String::from_utf8_lossy(k).into_owned());
                        }
                        previous.clear();
                        previous.extend_from_slice(k);
                        rows.push(head);
                    })?;
                    let end = self.tick();
                    if let Some(k) = bad {
                        return Err(format!(
                            "a scan from {:?} returned {k:?} out of order or with another record's value",
                            String::from_utf8_lossy(start_key)
                        )
                        .into());
                    }
                    for head in rows.into_iter().filter(|h| self.sampled(h.id)) {
                        log.push(Event {
                            id: head.id,
                            start,
                            end,
                            seen: Seen::Read(Some(head.version)),
                        });
                    }
                }
            }
            let t1 = Instant::now();
            let ns = t1.duration_since(t0).as_nanos().min(u64::MAX as u128) as u64;
            hists[op.index()].saturating_record(ns.max(1));
            done += 1;
            let finished = match self.config.ops_per_thread {
                Some(n) => done >= n,
                None => t1 >= deadline,
            };
            if finished {
                break;
            }
        }
        let mut shared = match self.log.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        };
        shared.extend(log);
        Ok(hists)
    }

    /// Writes `value` for record `id` at `version`, logging it if sampled.
    fn put_logged(
        &self,
        id: u64,
        k: &[u8],
        value: &[u8],
        version: u64,
        log: &mut Vec<Event>,
    ) -> Result<(), BenchError> {
        if self.sampled(id) {
            let start = self.tick();
            self.store.put(k, value)?;
            let end = self.tick();
            log.push(Event {
                id,
                start,
                end,
                seen: Seen::Wrote(version),
            });
        } else {
            self.store.put(k, value)?;
        }
        Ok(())
    }
}
