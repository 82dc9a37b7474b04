//! What a block read costs when it straddles two pages of the OS's file cache.
//!
//! The OS caches a file in 4 KiB pages, and a positioned read looks up and copies from
//! every page it overlaps. This writes a scratch file of `MIB` MiB (default 128: in
//! the page cache once written, far past the CPU caches), then times rounds of reads
//! at random offsets, alternating two kinds: 4,096 bytes starting on a page boundary
//! (one page: what an aligned table's block read is) and 4,101 bytes — a 4 KiB block
//! and its trailer — starting `SKEW` bytes into a page (two pages: what a read of an
//! unaligned table's block almost always is). Medians of the rounds are printed.
//!
//! ```text
//! cargo run --release --example page_straddle -- [MIB] [READS per round] [ROUNDS] [SKEW]
//! ```
//!
//! This is why uncompressed tables align their data blocks (`Options::block_align`,
//! format version 5; `docs/FORMAT.md`, "Aligned data blocks").

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Instant;

const PAGE: u64 = 4096;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let mib = args.first().copied().unwrap_or(128).max(1);
    let reads = args.get(1).copied().unwrap_or(200_000).max(1);
    let rounds = args.get(2).copied().unwrap_or(7).max(1);
    let skew = args.get(3).copied().unwrap_or(37) % PAGE;
    if skew == 0 {
        return Err(
            "SKEW must not be a multiple of 4096: the straddling reads would not straddle".into(),
        );
    }

    let mut file = tempfile::tempfile()?;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    for _ in 0..mib {
        file.write_all(&chunk)?;
    }
    let pages = mib * (1 << 20) / PAGE - 1; // the straddling read needs a next page

    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut buf = vec![0u8; 2 * PAGE as usize];
    let mut checksum = 0u64; // keeps the reads from being optimized out
    let mut time = |len: usize, skew: u64| -> std::io::Result<f64> {
        let start = Instant::now();
        for _ in 0..reads {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let offset = (state % pages) * PAGE + skew;
            file.read_exact_at(&mut buf[..len], offset)?;
            checksum = checksum.wrapping_add(u64::from(buf[len / 2]));
        }
        Ok(start.elapsed().as_nanos() as f64 / reads as f64)
    };
    time(4096, 0)?; // warm-up
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        one.push(time(4096, 0)?);
        two.push(time(4101, skew)?);
    }
    let (one, two) = (median(one), median(two));
    println!(
        "{mib} MiB file, {rounds} rounds of {reads} reads: one page (4096 bytes, aligned) \
         {one:.0} ns, two pages (4101 bytes at +{skew}) {two:.0} ns: {:.2}x (checksum {checksum})",
        two / one
    );
    Ok(())
}
