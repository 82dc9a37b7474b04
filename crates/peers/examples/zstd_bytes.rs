//! ZSTD against LZ4 on the store's data blocks: bytes on disk for TPC-H rows, the
//! benchmark's values and the YCSB suite's values, and (with a number of rounds) the
//! time to decode a block, which a present get without a block cache pays once.
//!
//! ```text
//! cargo run --release -p bloomkv-peers --example zstd_bytes -- [ROWS] [POOL_MIB] [ROUNDS]
//! ```
//!
//! `ROWS` rows of each data set (default 200,000); `POOL_MIB` the TPC-H text pool
//! (default 300, dbgen's); `ROUNDS` > 0 times decoding: each pass decodes the LZ4
//! blocks, then the ZSTD blocks, three passes (default 0: bytes only). Blocks are built
//! as the store builds them (4 KiB, `lz4_writers::blocks`) and packed by
//! `Compression::pack_block`, so a block that saves less than an eighth counts raw, as
//! a table would hold it.

use std::time::Instant;

use bloomkv::kv::Compression;
use bloomkv_peers::lz4_writers::{blocks, data_sets};

/// Stored bytes of `blocks` under `c`, and how many stayed raw.
fn stored(c: Compression, blocks: &[Vec<u8>]) -> (u64, usize) {
    let mut bytes = 0;
    let mut raw = 0;
    for b in blocks {
        match c.pack_block(b) {
            Some(p) => bytes += p.len() as u64,
            None => {
                bytes += b.len() as u64;
                raw += 1;
            }
        }
    }
    (bytes, raw)
}

/// Nanoseconds per block to unpack every block of `packed` `rounds` times over.
fn decode_ns(c: Compression, packed: &[Vec<u8>], rounds: usize) -> Result<f64, String> {
    let started = Instant::now();
    let mut n = 0u64;
    for _ in 0..rounds {
        for p in packed {
            let raw = c.unpack_block(p).map_err(|e| e.to_string())?;
            std::hint::black_box(&raw);
            n += 1;
        }
    }
    Ok(started.elapsed().as_nanos() as f64 / n.max(1) as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = |i: usize, d: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(match std::env::args().nth(i) {
            Some(s) => s.parse()?,
            None => d,
        })
    };
    let rows = arg(1, 200_000)?;
    let pool_mib = arg(2, 300)?;
    let rounds = arg(3, 0)?;

    let sets = data_sets(rows, pool_mib);

    let zstd = Compression::Zstd { level: 3 };
    println!("| data | blocks | raw bytes | LZ4 | kept raw | ZSTD | kept raw | ZSTD / LZ4 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, rows) in &sets {
        let b = blocks(rows);
        let raw: u64 = b.iter().map(|x| x.len() as u64).sum();
        let (lz4_bytes, lz4_raw) = stored(Compression::Lz4, &b);
        let (zstd_bytes, zstd_raw) = stored(zstd, &b);
        println!(
            "| {name} | {} | {raw} | {lz4_bytes} | {lz4_raw} | {zstd_bytes} | {zstd_raw} | {:.3} |",
            b.len(),
            zstd_bytes as f64 / lz4_bytes as f64
        );
        if rounds > 0 {
            // Only blocks both compress, so both decode the same blocks.
            let (l, z): (Vec<Vec<u8>>, Vec<Vec<u8>>) = b
                .iter()
                .filter_map(|raw| Some((Compression::Lz4.pack_block(raw)?, zstd.pack_block(raw)?)))
                .unzip();
            if l.is_empty() {
                println!("  {name}: no block both compress, so no decode to compare");
                continue;
            }
            for pass in 0..3 {
                let lt = decode_ns(Compression::Lz4, &l, rounds)?;
                let zt = decode_ns(zstd, &z, rounds)?;
                println!(
                    "  {name}, pass {pass}: decode {zt:.0} ns/block (ZSTD) vs {lt:.0} (LZ4): {:.2}×",
                    zt / lt
                );
            }
        }
    }
    Ok(())
}
