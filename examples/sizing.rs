//! How big must a Bloom filter be? The source documents' tables, computed.
//!
//! 1. Memory for n = 10^5 .. 10^10 keys at p = 1%.
//! 2. p = 0.1% / 1% / 5% at n = 10^8.
//!
//! Each row shows bits per key, hash count k, and the memory a hash set of the same
//! keys would need: 36-byte UUID strings in a `HashSet<String>`, estimated (not
//! measured; `url_dedup` measures one) as a 24-byte `String` plus one control byte
//! per bucket at the maximum load factor of 7/8, plus the 36-byte buffer in the
//! allocator's 48-byte size class: about 77 bytes per key.
//!
//! Why the bits per key are `1.44 · log2(1/p)`: `docs/GUIDE.md`, section 3.
//!
//! Run: `cargo run --example sizing`

use bloomkv::sizing::{false_positive_rate, optimal_num_bits, optimal_num_hashes};
use bloomkv::FilterError;

/// Estimated bytes per 36-byte string key in a `HashSet<String>`.
fn hash_set_bytes_per_key() -> f64 {
    // String header (ptr, cap, len) in the table + heap buffer of 36 bytes rounded to
    // the allocator's 48-byte class + 1 control byte, all at a 7/8 load factor.
    (24.0 + 1.0) / 0.875 + 48.0
}

fn human(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", UNITS[u])
}

fn row(n: u64, p: f64) -> Result<(), FilterError> {
    let m = optimal_num_bits(n, p)?;
    let k = optimal_num_hashes(m, n)?;
    let actual = false_positive_rate(m, n, k)?;
    let set = n as f64 * hash_set_bytes_per_key();
    println!(
        "{n:>14} {:>7.3}% {:>16} {:>9.2} {k:>3} {:>8.4}% {:>12} {:>12} {:>6.0}x",
        p * 100.0,
        m,
        m as f64 / n as f64,
        actual * 100.0,
        human(m as f64 / 8.0),
        human(set),
        set / (m as f64 / 8.0),
    );
    Ok(())
}

fn header() {
    println!(
        "{:>14} {:>8} {:>16} {:>9} {:>3} {:>9} {:>12} {:>12} {:>7}",
        "keys n", "target p", "bits m", "bits/key", "k", "formula p", "filter", "hash set", "ratio"
    );
}

fn main() -> Result<(), FilterError> {
    println!("Memory at p = 1%:");
    header();
    for exp in 5..=10 {
        row(10u64.pow(exp), 0.01)?;
    }
    println!();
    println!("n = 10^8 at different rates:");
    header();
    for p in [0.001, 0.01, 0.05] {
        row(100_000_000, p)?;
    }
    println!();
    println!(
        "RocksDB's default of 10 bits per key: 10^8 keys -> {} at ~{:.2}% (k = 7).",
        human(1e8 * 10.0 / 8.0),
        false_positive_rate(1_000_000_000, 100_000_000, 7)? * 100.0
    );
    Ok(())
}
