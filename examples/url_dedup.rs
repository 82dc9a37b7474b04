//! A crawler's seen-set: has this URL been visited? A Bloom filter sized for 10M URLs
//! at 0.1% false positives takes ~17 MiB and 10 hashes; a `HashSet<String>` of the
//! same URLs is measured beside it, in the same run.
//!
//! The crawler asks once per URL: `insert` returns `false` when the URL "was seen".
//! For a URL that was really new that answer is a false positive: the crawler skips a
//! page it never fetched. The run counts those, then probes 1M never-inserted URLs
//! for the filter's false-positive rate at full load.
//!
//! Run: `cargo run --release --example url_dedup -- --urls 10000000`
//! (`--urls N` to run smaller; default 10,000,000).

use std::collections::HashSet;
use std::time::Instant;

use bloomkv::BloomFilter;

fn url(i: u64) -> String {
    // Spread ids over hosts and paths like a crawl frontier.
    let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!(
        "https://site{}.example.com/articles/{}/{}?ref={}",
        x % 50_000,
        (x >> 20) % 1000,
        i,
        x >> 54
    )
}

fn parse_urls() -> Result<u64, String> {
    let mut urls = 10_000_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--urls" => {
                let v = args.next().ok_or("--urls needs a number")?;
                urls = v
                    .replace('_', "")
                    .parse()
                    .map_err(|e| format!("--urls {v}: {e}"))?;
            }
            "-h" | "--help" => {
                println!("usage: url_dedup [--urls N]   (default 10000000)");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if urls == 0 {
        return Err("--urls must be at least 1".into());
    }
    Ok(urls)
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

fn main() {
    let n = match parse_urls() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("url_dedup: {e}");
            std::process::exit(2);
        }
    };
    let p = 0.001;
    let mut seen = match BloomFilter::with_rate(n, p) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("url_dedup: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "{n} URLs at p = {p}: {} bits ({}), {} hashes",
        seen.num_bits(),
        mib(seen.memory_bytes() as f64),
        seen.num_hashes()
    );

    // Every URL is new: each `false` from insert is a false positive.
    let start = Instant::now();
    let mut wrongly_seen = 0u64;
    for i in 0..n {
        if !seen.insert(url(i)) {
            wrongly_seen += 1;
        }
    }
    let bloom_time = start.elapsed();

    let probes = 1_000_000u64.min(n.max(100_000));
    let fp = (0..probes).filter(|i| seen.contains(url(n + i))).count() as f64 / probes as f64;

    let start = Instant::now();
    let mut set: HashSet<String> = HashSet::new();
    let mut string_bytes = 0u64;
    for i in 0..n {
        let u = url(i);
        string_bytes += u.capacity() as u64;
        set.insert(u);
    }
    let set_time = start.elapsed();
    // The table: one (ptr, cap, len) String per bucket plus a control byte, over all
    // buckets (capacity rounded to a power of two); plus the strings' heap buffers.
    let buckets = (set.capacity() as f64 / 0.875).round();
    let set_bytes = buckets * (std::mem::size_of::<String>() as f64 + 1.0) + string_bytes as f64;

    println!();
    println!("                      Bloom filter    HashSet<String>");
    println!(
        "memory                {:>12}    {:>15}",
        mib(seen.memory_bytes() as f64),
        mib(set_bytes)
    );
    println!(
        "build time            {:>10.2} s    {:>13.2} s",
        bloom_time.as_secs_f64(),
        set_time.as_secs_f64()
    );
    println!(
        "new URLs taken as seen while crawling: {wrongly_seen} of {n} ({:.4}%)",
        wrongly_seen as f64 / n as f64 * 100.0
    );
    println!(
        "false positives on {probes} unseen URLs at full load: {:.4}% (formula {:.4}%)",
        fp * 100.0,
        seen.estimated_fp_rate() * 100.0
    );
    println!(
        "the filter is {:.0}x smaller than the set",
        set_bytes / seen.memory_bytes() as f64
    );
    match serde_json::to_string(&seen.stats()) {
        Ok(s) => println!("stats: {s}"),
        Err(e) => eprintln!("stats: {e}"),
    }
}
