//! The store's own LZ4 writer against `lz4_flex`'s, on data blocks of TPC-H rows, of
//! the benchmark's values and of the YCSB suite's values: bytes on disk, and (with a
//! number of rounds) the time to decode a block, which a present get without a
//! block cache pays once.
//!
//! ```text
//! cargo run --release -p bloomkv-peers --example lz4_writers -- [ROWS] [POOL_MIB] [ROUNDS]
//! ```
//!
//! `ROWS` rows of each data set (default 200,000); `POOL_MIB` the TPC-H text pool
//! (default 300, dbgen's); `ROUNDS` > 0 times decoding: rounds alternate the two
//! writers' blocks, three times each, and print every pass (default 0: bytes only).

use bloomkv_peers::lz4_writers::{
    blocks, compare_bytes, data_sets, decode_ns_per_block, flex_pack,
};

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

    println!("| data | blocks | raw bytes | store's writer | kept raw | lz4_flex | kept raw | store / lz4_flex |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, rows) in &sets {
        let b = blocks(rows);
        let w = compare_bytes(name, &b);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {:.4} |",
            w.blocks,
            w.raw_bytes,
            w.own_bytes,
            w.own_raw_blocks,
            w.flex_bytes,
            w.flex_raw_blocks,
            w.own_bytes as f64 / w.flex_bytes as f64
        );
        if rounds > 0 {
            // Only blocks both writers compress, so both decode the same blocks.
            let (own, flex): (Vec<Vec<u8>>, Vec<Vec<u8>>) = b
                .iter()
                .filter_map(|raw| {
                    Some((
                        bloomkv::kv::Compression::Lz4.pack_block(raw)?,
                        flex_pack(raw)?,
                    ))
                })
                .unzip();
            for pass in 0..3 {
                let o = decode_ns_per_block(&own, rounds)?;
                let f = decode_ns_per_block(&flex, rounds)?;
                println!(
                    "  {name}, pass {pass}: decode {o:.0} ns/block (store's writer) vs {f:.0} (lz4_flex): {:.3}×",
                    o / f
                );
            }
        }
    }
    Ok(())
}
