//! Two LZ4 writers on the same data blocks: the store's own (`Compression::pack_block`)
//! and `lz4_flex`'s (what fjall writes), read by the same decoder.
//!
//! Blocks are built as the store builds its data blocks: entries in key order,
//! each `shared, unshared, value_len` (varints), the key's unshared suffix, the
//! value, a restart point every 16 entries, closed at 4 KiB:
//!
//! ```text
//! rows ──▶ 4 KiB blocks ──┬─ store's writer ──▶ bytes ─┐
//!                         └─ lz4_flex writer ──▶ bytes ─┴─▶ lz4_flex::block::decompress
//! ```
//!
//! Either writer's block is kept raw when it saves less than an eighth (the store's
//! rule), so "bytes" is what a table would hold. Decoding is timed per block, the
//! cost a present get without a block cache pays once.

use std::time::Instant;

use bloomkv::kv::Compression;

/// Target bytes of a block before compression (the store's default `block_size`).
pub const BLOCK_SIZE: usize = 4096;
/// Entries between restart points (the store's default).
const RESTART_INTERVAL: usize = 16;

fn varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Sorted (key, value) rows.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The data sets the compression examples compare on, each `rows` rows, sorted as a
/// table holds them: TPC-H line items and orders (a text pool of `pool_mib` MiB), the
/// benchmark's values and the YCSB suite's values.
pub fn data_sets(rows: usize, pool_mib: usize) -> Vec<(String, Rows)> {
    use crate::tpch::{Table, TpchRows};
    use crate::ycsb::record;
    let tpch = TpchRows::new(1.0, pool_mib << 20);
    let mut sets: Vec<(String, Rows)> = vec![
        ("TPC-H lineitem".into(), tpch.rows(Table::LineItem, rows)),
        ("TPC-H orders".into(), tpch.rows(Table::Orders, rows)),
    ];
    let mut bench: Rows = (0..rows as u64)
        .map(|i| {
            let mut v = Vec::new();
            bloomkv_bench::fill_value(&mut v, i, 100);
            (bloomkv_bench::key(i).to_vec(), v)
        })
        .collect();
    bench.sort_unstable();
    sets.push(("the benchmark's values (100 B)".into(), bench));
    let mut ycsb: Rows = (0..rows as u64)
        .map(|i| {
            let mut v = Vec::new();
            record::fill_value(&mut v, i, 0, 100);
            (record::key(i).to_vec(), v)
        })
        .collect();
    ycsb.sort_unstable();
    sets.push(("the YCSB suite's values (100 B)".into(), ycsb));
    sets
}

/// Cuts sorted `rows` into data blocks of about [`BLOCK_SIZE`] bytes.
pub fn blocks(rows: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut block = Vec::new();
    let mut restarts: Vec<u32> = Vec::new();
    let mut last: &[u8] = &[];
    let mut n = 0;
    let mut close = |block: &mut Vec<u8>, restarts: &mut Vec<u32>| {
        for r in restarts.iter() {
            block.extend_from_slice(&r.to_le_bytes());
        }
        block.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
        out.push(std::mem::take(block));
        restarts.clear();
    };
    for (k, v) in rows {
        let shared = if n % RESTART_INTERVAL == 0 {
            restarts.push(block.len() as u32);
            0
        } else {
            last.iter().zip(k).take_while(|(a, b)| a == b).count()
        };
        varint(&mut block, shared);
        varint(&mut block, k.len() - shared);
        varint(&mut block, v.len());
        block.extend_from_slice(&k[shared..]);
        block.extend_from_slice(v);
        last = k;
        n += 1;
        if block.len() >= BLOCK_SIZE {
            close(&mut block, &mut restarts);
            n = 0;
        }
    }
    if !block.is_empty() {
        close(&mut block, &mut restarts);
    }
    out
}

/// `lz4_flex`'s form of a block (length prefix, LZ4 block), or `None` where it
/// saves less than an eighth.
pub fn flex_pack(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = (raw.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&lz4_flex::block::compress(raw));
    (out.len() <= raw.len() - raw.len() / 8).then_some(out)
}

/// Bytes of one data set's blocks under each writer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WriterBytes {
    /// The data set.
    pub data: String,
    /// Blocks.
    pub blocks: usize,
    /// Bytes before compression.
    pub raw_bytes: u64,
    /// Bytes stored with the store's writer (raw blocks counted raw).
    pub own_bytes: u64,
    /// Blocks the store's writer kept raw.
    pub own_raw_blocks: usize,
    /// Bytes stored with `lz4_flex`'s writer.
    pub flex_bytes: u64,
    /// Blocks `lz4_flex`'s writer kept raw.
    pub flex_raw_blocks: usize,
}

/// Packs every block with both writers.
pub fn compare_bytes(data: &str, blocks: &[Vec<u8>]) -> WriterBytes {
    let mut w = WriterBytes {
        data: data.into(),
        blocks: blocks.len(),
        raw_bytes: 0,
        own_bytes: 0,
        own_raw_blocks: 0,
        flex_bytes: 0,
        flex_raw_blocks: 0,
    };
    for b in blocks {
        w.raw_bytes += b.len() as u64;
        match Compression::Lz4.pack_block(b) {
            Some(p) => w.own_bytes += p.len() as u64,
            None => {
                w.own_bytes += b.len() as u64;
                w.own_raw_blocks += 1;
            }
        }
        match flex_pack(b) {
            Some(p) => w.flex_bytes += p.len() as u64,
            None => {
                w.flex_bytes += b.len() as u64;
                w.flex_raw_blocks += 1;
            }
        }
    }
    w
}

/// Nanoseconds per block to decode every compressed block of `packed` (each a
/// length prefix and an LZ4 block), `rounds` times over; checks every output's
/// length.
pub fn decode_ns_per_block(packed: &[Vec<u8>], rounds: usize) -> Result<f64, String> {
    let started = Instant::now();
    let mut n = 0u64;
    for _ in 0..rounds {
        for p in packed {
            let (len, body) = p.split_at(4);
            let raw_len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let raw = lz4_flex::block::decompress(body, raw_len).map_err(|e| e.to_string())?;
            if raw.len() != raw_len {
                return Err(format!("decoded {} bytes, expected {raw_len}", raw.len()));
            }
            std::hint::black_box(&raw);
            n += 1;
        }
    }
    Ok(started.elapsed().as_nanos() as f64 / n.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_writers_round_trip_through_the_one_decoder() {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..2000u32)
            .map(|i| {
                (
                    format!("key{i:08}").into_bytes(),
                    format!("value {} of row {i}", i % 7).repeat(3).into_bytes(),
                )
            })
            .collect();
        let blocks = blocks(&rows);
        assert!(blocks.len() > 10);
        assert!(blocks.iter().all(|b| b.len() < 2 * BLOCK_SIZE));
        for b in &blocks {
            for p in [Compression::Lz4.pack_block(b), flex_pack(b)]
                .into_iter()
                .flatten()
            {
                let raw_len = u32::from_le_bytes(p[..4].try_into().unwrap()) as usize;
                assert_eq!(&lz4_flex::block::decompress(&p[4..], raw_len).unwrap(), b);
            }
        }
        let w = compare_bytes("test", &blocks);
        assert!(w.own_bytes < w.raw_bytes && w.flex_bytes < w.raw_bytes);
    }
}
