//! What one load that misses the CPU caches costs on this machine: a pointer chase over
//! a random cycle through `MiB` of cache lines, each load waiting for the one before.
//! The figures docs/notes/2026-12-cached-get.md quotes for a cached get's waits come from here.
//!
//! ```text
//! cargo run --release --example memory_latency -- [MiB ...]    (default 1 8 32 128 512)
//! ```

use std::time::Instant;

/// One `usize` per 64-byte cache line: the index of the next line to visit.
const STRIDE: usize = 64 / std::mem::size_of::<usize>();

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() {
        vec![1, 8, 32, 128, 512]
    } else {
        sizes
    };
    for mib in sizes {
        let lines = (mib << 20) / 64;
        // A random cyclic order of the lines (Fisher–Yates, xorshift).
        let mut order: Vec<usize> = (0..lines).collect();
        let mut state = 0x1234_5678_9ABC_DEF1u64;
        for i in (1..lines).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            order.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let mut next = vec![0usize; lines * STRIDE];
        for (i, &line) in order.iter().enumerate() {
            next[line * STRIDE] = order[(i + 1) % lines] * STRIDE;
        }
        let steps = 2_000_000;
        let mut at = 0;
        let started = Instant::now();
        for _ in 0..steps {
            at = next[at];
        }
        let ns = started.elapsed().as_nanos() as f64 / steps as f64;
        println!("{mib:>5} MiB: {ns:6.1} ns per dependent load");
        std::hint::black_box(at);
    }
    Ok(())
}
