//! How gets scale from one thread to two over one store, measured so that other load on
//! the machine disturbs the figures as little as possible.
//!
//! Builds the benchmark's flat store once (`KEYS` keys over 10 overlapping tables),
//! then alternates one-thread and two-thread rounds of the same gets. Each round
//! reports wall-clock throughput and the CPU time each thread spent per get (from
//! `/proc/thread-self/schedstat`, in nanoseconds): with nothing shared written on the
//! read path, a get costs a thread the same CPU time whether or not another thread
//! reads at the same moment. Ratios are of medians over the rounds.
//!
//! Two more figures say what the machine allowed at that moment:
//!
//! - **on-CPU**: the two threads' CPU time over twice the round's wall-clock time.
//!   Below 100% one thread waited for a CPU, or finished before the other; a round
//!   whose threads were on a CPU 80% of the time cannot reach 1.6× one thread's
//!   throughput, whatever the read path does.
//! - **pread alone**: between the present gets' rounds, the same alternation of
//!   positioned 4 KiB reads at random offsets of one of the store's table files,
//!   through one descriptor — what a present get whose block is not cached spends most
//!   of its time on, with nothing of the store around it. Its ratio is the ceiling the
//!   kernel's read gave two threads in that run.
//!
//! ```text
//! cargo run --release --example read_threads -- [KEYS] [GETS] [ROUNDS] [CACHE_MIB] [BITS]
//! ```
//!
//! `GETS` per round (default 400,000), `ROUNDS` (7), the block cache in MiB (8) and the
//! cache-local filters' bits per key (10). Each line gives the table reads per get: at
//! 10 bits about 8% of absent gets read a block (a false positive in one of the ten
//! tables), at 20 bits almost none, so the two separate the filters' cost from the
//! reads'.

use std::os::unix::fs::FileExt;
use std::time::Instant;

use bloomkv_bench::{load, lookup_keys, BloomkvStore, FilterSetting, NoProgress, Phase, Workload};

/// CPU nanoseconds this thread has run (Linux), or 0 where unknown.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One round's figures.
struct Round {
    per_sec: f64,
    cpu_ns_each: f64,
    /// The threads' CPU time over `threads` times the round's wall-clock time.
    on_cpu: f64,
}

/// Runs `work` on every item, the items split evenly over `threads` threads.
fn round<T: Sync>(items: &[T], threads: usize, work: impl Fn(&T) + Sync) -> Round {
    let share = items.len().div_ceil(threads);
    let work = &work;
    let started = Instant::now();
    let cpu: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = items
            .chunks(share)
            .map(|part| {
                s.spawn(move || {
                    let c0 = thread_cpu_ns();
                    part.iter().for_each(work);
                    thread_cpu_ns() - c0
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let secs = started.elapsed().as_secs_f64();
    Round {
        per_sec: items.len() as f64 / secs,
        cpu_ns_each: cpu as f64 / items.len() as f64,
        on_cpu: cpu as f64 / (threads as f64 * secs * 1e9),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians of the one-thread rounds `one` and the two-thread rounds `two`, each done
/// `unit` counted.
fn report(unit: &str, one: &[Round], two: &[Round]) -> String {
    let med = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    let (t1, t2) = (med(one, |r| r.per_sec), med(two, |r| r.per_sec));
    let (c1, c2) = (med(one, |r| r.cpu_ns_each), med(two, |r| r.cpu_ns_each));
    format!(
        "1 thread {t1:>9.0} {unit}/s {c1:>6.0} cpu-ns each | 2 threads {t2:>9.0} {unit}/s \
         {c2:>6.0} cpu-ns each, on-CPU {:.0}% | wall ratio {:.2}x, cpu-per-{unit} ratio {:.2}",
        100.0 * med(two, |r| r.on_cpu),
        t2 / t1,
        c2 / c1
    )
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let keys_n = args.first().copied().unwrap_or(1_000_000);
    let gets = args.get(1).copied().unwrap_or(400_000);
    let rounds = args.get(2).copied().unwrap_or(7);
    let cache_mib = args.get(3).copied().unwrap_or(8) as usize;
    let bits_per_key = args.get(4).copied().unwrap_or(10) as f64;
    let w = Workload {
        keys: keys_n,
        ..Workload::default()
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let mut store = BloomkvStore::create_with_cache(
        path.clone(),
        FilterSetting::CacheLocal,
        bits_per_key,
        cache_mib << 20,
    )?;
    load(&mut store, &w, &NoProgress)?;
    let db = store.db().ok_or("the store is open")?;

    // The largest table file, and random 4 KiB-aligned offsets in it.
    let mut tables = Vec::new();
    for entry in std::fs::read_dir(&path)? {
        let entry = entry?;
        if entry.path().extension().is_some_and(|e| e == "sst") {
            tables.push((entry.metadata()?.len(), entry.path()));
        }
    }
    let (table_len, table) = tables.into_iter().max().ok_or("no table file")?;
    let file = std::fs::File::open(table)?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let offsets: Vec<u64> = (0..gets)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % (table_len / 4096).max(1)) * 4096
        })
        .collect();
    let pread = |&offset: &u64| {
        let mut block = vec![0u8; 4096];
        // Near the end of the file a read may come up short; its cost is what counts.
        std::hint::black_box(file.read_at(&mut block, offset).ok());
    };

    let lookups = Workload { lookups: gets, ..w };
    for phase in [Phase::Absent, Phase::Present] {
        let keys = lookup_keys(&lookups, phase);
        let get = |k: &[u8; 19]| {
            std::hint::black_box(db.get(k).unwrap());
        };
        let reads_before = db.stats().data_block_reads;
        let (mut one, mut two, mut pread_one, mut pread_two) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            one.push(round(&keys, 1, get));
            two.push(round(&keys, 2, get));
            if phase == Phase::Present {
                pread_one.push(round(&offsets, 1, pread));
                pread_two.push(round(&offsets, 2, pread));
            }
        }
        let reads = db.stats().data_block_reads - reads_before;
        let name = if phase == Phase::Absent {
            "absent "
        } else {
            "present"
        };
        println!(
            "{name} {:.3} reads/get | {}",
            reads as f64 / (2 * rounds * keys.len() as u64) as f64,
            report("get", &one, &two)
        );
        if phase == Phase::Present {
            println!(
                "pread alone (one descriptor) | {}",
                report("read", &pread_one, &pread_two)
            );
        }
    }
    Ok(())
}
