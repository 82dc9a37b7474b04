//! A third-party filter plugged into the store: xorf's `BinaryFuse8` as a `FilterPolicy`.
//!
//! The store hands a policy each table's keys and later asks it about lookups, always
//! through the hash contract: the builder gets `add_hash(KeyHash::of(key))`, the reader
//! `may_contain_hash(KeyHash::of(key))`. Here the fuse filter is built over `h1`, and
//! its block has its own frame, which the reader checks before trusting a byte:
//!
//! ```text
//!  "BFU8" | seed u64 | seg_len u32 | seg_mask u32 | seg_count_len u32 | n u32 | n fingerprints | check u64
//!  check = KeyHash::of(every byte before it).h1;  n = seg_count_len + 2 * seg_len
//! ```
//!
//! A block that fails the check makes `open_reader` fail, and the store reads that table
//! without a filter (fail open, counted in `filter_corrupt`). The workload is the
//! benchmark's flat shape: keys loaded shuffled into overlapping tables, compaction off,
//! the store reopened, then absent-key gets.
//!
//! `cargo run --release --example custom_filter -- [--keys N] [--tables T] [--lookups L]`

use std::sync::Arc;
use std::time::Instant;

use bloomkv::{Db, FilterBuilder, FilterError, FilterInfo, FilterKind, FilterPolicy};
use bloomkv::{FilterReader, KeyHash, Options};
use bloomkv_bench::{key, lookup_keys, Phase, Workload};
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};
use serde_json::{json, Value};
use xorf::{BinaryFuse8, Filter};

#[derive(Debug)]
struct FusePolicy;

struct FuseBuilder(Vec<u64>);

#[derive(Debug)]
struct FuseReader(Option<BinaryFuse8>, u64); // None: built over no keys

impl FilterPolicy for FusePolicy {
    fn name(&self) -> &str {
        "example.xorf.BinaryFuse8"
    }
    fn bits_per_key(&self) -> f64 {
        9.0 // about 9.04 at these sizes; only an estimate for table sizing
    }
    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(FuseBuilder(Vec::new()))
    }
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        let bad = |why: &str| FilterError::Corrupt(format!("BinaryFuse8 block: {why}"));
        let (body, check) = block
            .split_at_checked(block.len().wrapping_sub(8))
            .ok_or(bad("short"))?;
        let u = |at: usize, n: usize| body.get(at..at + n).ok_or(bad("short"));
        if u(0, 4)? != b"BFU8" || KeyHash::of(body).h1.to_le_bytes() != check {
            return Err(bad("bad magic or check"));
        }
        let u32_at =
            |at| Ok::<_, FilterError>(u32::from_le_bytes(u(at, 4)?.try_into().unwrap_or_default()));
        let (len, mask, count_len, n) = (u32_at(12)?, u32_at(16)?, u32_at(20)?, u32_at(24)?);
        let fingerprints = &body[28.min(body.len())..];
        if n == 0 && fingerprints.is_empty() {
            return Ok(Box::new(FuseReader(None, 0)));
        }
        // The filter indexes below count_len + 2 * len: refuse anything that disagrees.
        let fits = len.is_power_of_two() && mask == len - 1 && count_len % len == 0;
        if !fits
            || fingerprints.len() != n as usize
            || n as u64 != count_len as u64 + 2 * len as u64
        {
            return Err(bad("sizes disagree"));
        }
        // xorf's fields are private; its serde support is the door to them.
        let seed = u64::from_le_bytes(u(4, 8)?.try_into().unwrap_or_default());
        let fields = json!({ "seed": seed, "segment_length": len, "segment_length_mask": mask,
            "segment_count_length": count_len, "fingerprints": fingerprints });
        let filter = serde_json::from_value(fields).map_err(|e| bad(&e.to_string()))?;
        Ok(Box::new(FuseReader(Some(filter), n as u64)))
    }
}

impl FilterBuilder for FuseBuilder {
    fn add_hash(&mut self, hash: KeyHash) {
        self.0.push(hash.h1);
    }
    fn num_keys(&self) -> u64 {
        self.0.len() as u64
    }
    fn finish(&mut self) -> Vec<u8> {
        let mut keys = std::mem::take(&mut self.0);
        keys.sort_unstable();
        keys.dedup(); // the fuse construction needs distinct keys
        let mut out = b"BFU8".to_vec();
        match BinaryFuse8::try_from(&keys)
            .ok()
            .filter(|_| !keys.is_empty())
        {
            // A filter that could not be built is written as an invalid block: the
            // table is then read without a filter (fail open), never wrongly filtered.
            None => out.extend_from_slice(if keys.is_empty() { &[0; 24] } else { b"failed" }),
            Some(f) => {
                let v = serde_json::to_value(&f).unwrap_or(Value::Null);
                out.extend_from_slice(&v["seed"].as_u64().unwrap_or(0).to_le_bytes());
                for field in [
                    "segment_length",
                    "segment_length_mask",
                    "segment_count_length",
                ] {
                    out.extend_from_slice(&(v[field].as_u64().unwrap_or(0) as u32).to_le_bytes());
                }
                out.extend_from_slice(&(f.fingerprints.len() as u32).to_le_bytes());
                out.extend_from_slice(&f.fingerprints);
            }
        }
        let check = KeyHash::of(&out).h1;
        out.extend_from_slice(&check.to_le_bytes());
        out
    }
}

impl FilterReader for FuseReader {
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        self.0.as_ref().is_some_and(|f| f.contains(&hash.h1))
    }
    fn info(&self) -> FilterInfo {
        let bits = self.1 * 8;
        FilterInfo {
            layout: "binary-fuse8",
            num_bits: bits,
            num_keys: 0,
            num_probes: 3,
            fill_ratio: 0.0,
            estimated_fp_rate: 1.0 / 256.0,
        }
    }
    fn memory_bytes(&self) -> usize {
        self.1 as usize
    }
}

/// Loads the flat shape under `filter`, reopens, and runs the absent-key phase.
fn run(label: &str, filter: FilterKind, w: &Workload) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let options = Options {
        filter,
        bits_per_key: w.bits_per_key,
        disable_auto_compaction: true,
        memtable_size: 1 << 30,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone())?;
    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(w.seed));
    let per_table = w.keys.div_ceil(u64::from(w.tables)).max(1);
    for (n, &i) in (1u64..).zip(&order) {
        db.put(key(2 * i), vec![b'v'; w.value_size])?;
        if n.is_multiple_of(per_table) || n == w.keys {
            db.flush()?;
        }
    }
    db.close()?;
    let db = Db::open(dir.path(), options)?;
    let (before, started) = (db.stats(), Instant::now());
    for k in lookup_keys(w, Phase::Absent) {
        assert!(db.get(k)?.is_none(), "an absent key was found");
    }
    let nanos = started.elapsed().as_nanos() as f64 / w.lookups as f64;
    let s = db.stats();
    let reads = (s.data_block_reads - before.data_block_reads) as f64 / w.lookups as f64;
    let bpk = s.filter_memory_bytes as f64 * 8.0 / w.keys as f64;
    println!(
        "{label:<22} {:>6} {bpk:>9.2} {reads:>13.4} {:>8.3} % {nanos:>9.0}",
        s.num_tables(),
        100.0 * s.observed_fp_rate()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut w = Workload {
        keys: 100_000,
        lookups: 20_000,
        ..Workload::default()
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).ok_or("every flag takes a value")?;
        match pair[0].as_str() {
            "--keys" => w.keys = value.parse()?,
            "--tables" => w.tables = value.parse()?,
            "--lookups" => w.lookups = value.parse()?,
            "--bits-per-key" => w.bits_per_key = value.parse()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    println!(
        "{w}; absent-key phase only\n{:<22} {:>6} {:>9} {:>13} {:>10} {:>9}",
        "filter", "tables", "bits/key", "reads per get", "FP", "ns/get"
    );
    run("none", FilterKind::None, &w)?;
    run("standard bloom", FilterKind::StandardBloom, &w)?;
    run("cache-local bloom", FilterKind::CacheLocalBloom, &w)?;
    run(
        "xorf BinaryFuse8",
        FilterKind::Custom(Arc::new(FusePolicy)),
        &w,
    )
}
