//! In-memory files and a tiny exact filter policy for the table tests.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bloomkv_filter::{FilterBuilder, FilterError, FilterInfo, FilterPolicy, FilterReader, KeyHash};

use super::{Table, TableBuilder, TableOptions, TableSummary};
use crate::fs::{RandomAccessFile, WritableFile};
use crate::stats::Counters;
use crate::types::ValueKind;

/// A writable file appending to a shared buffer, remembering whether it was synced.
#[derive(Clone, Default)]
pub(crate) struct MemWritable {
    pub(crate) data: Arc<Mutex<Vec<u8>>>,
    pub(crate) synced: Arc<Mutex<bool>>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.data.lock().unwrap().extend_from_slice(buf);
        *self.synced.lock().unwrap() = false;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        *self.synced.lock().unwrap() = true;
        Ok(())
    }
}

/// A read-only in-memory file counting its positioned reads like a kernel counts syscalls.
pub(crate) struct MemFile {
    pub(crate) data: Vec<u8>,
    pub(crate) reads: AtomicU64,
}

impl MemFile {
    pub(crate) fn new(data: Vec<u8>) -> Arc<MemFile> {
        Arc::new(MemFile {
            data,
            reads: AtomicU64::new(0),
        })
    }
}

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.data.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.data.len() as u64)
    }
}

/// An exact-set "filter": the sorted `h1` halves of the keys' hashes, then a count and a
/// CRC. No false positives, so tests know exactly which lookups it rejects.
#[derive(Debug)]
pub(crate) struct ExactPolicy;

pub(crate) const EXACT_NAME: &str = "test.exact-set";

struct ExactBuilder(Vec<u64>);

impl FilterBuilder for ExactBuilder {
    fn add_hash(&mut self, hash: KeyHash) {
        self.0.push(hash.h1);
    }

    fn num_keys(&self) -> u64 {
        self.0.len() as u64
    }

    fn finish(&mut self) -> Vec<u8> {
        let mut hashes = std::mem::take(&mut self.0);
        hashes.sort_unstable();
        hashes.dedup();
        let mut out = Vec::new();
        for h in &hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        out.extend_from_slice(&(hashes.len() as u32).to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

#[derive(Debug)]
struct ExactReader(Vec<u64>);

impl FilterReader for ExactReader {
    fn may_contain_hash(&self, hash: KeyHash) -> bool {
        self.0.binary_search(&hash.h1).is_ok()
    }

    fn info(&self) -> FilterInfo {
        FilterInfo {
            layout: "exact",
            num_bits: 64 * self.0.len() as u64,
            num_keys: self.0.len() as u64,
            num_probes: 1,
            fill_ratio: 1.0,
            estimated_fp_rate: 0.0,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.0.capacity() * 8
    }
}

impl FilterPolicy for ExactPolicy {
    fn name(&self) -> &str {
        EXACT_NAME
    }

    fn bits_per_key(&self) -> f64 {
        64.0
    }

    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(ExactBuilder(Vec::new()))
    }

    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        let corrupt = |why: &str| FilterError::Corrupt(why.to_owned());
        let n = block.len().checked_sub(8).ok_or_else(|| corrupt("short"))?;
        let crc = u32::from_le_bytes(block[n + 4..].try_into().unwrap());
        if crc != crc32fast::hash(&block[..n + 4]) {
            return Err(corrupt("checksum"));
        }
        let count = u32::from_le_bytes(block[n..n + 4].try_into().unwrap()) as usize;
        if count * 8 != n {
            return Err(corrupt("count"));
        }
        let hashes = block[..n]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        Ok(Box::new(ExactReader(hashes)))
    }
}

/// One entry of a test table.
pub(crate) type TestEntry = (Vec<u8>, u64, ValueKind, Vec<u8>);

pub(crate) fn path() -> PathBuf {
    PathBuf::from("000042.sst")
}

pub(crate) fn exact_options(block_size: usize) -> TableOptions {
    TableOptions {
        block_size,
        filter_policy: Some(Arc::new(ExactPolicy)),
        ..TableOptions::default()
    }
}

/// Writes `entries` as a table and returns its bytes and summary.
pub(crate) fn build(entries: &[TestEntry], options: TableOptions) -> (Vec<u8>, TableSummary) {
    let file = MemWritable::default();
    let mut b = TableBuilder::new(Box::new(file.clone()), path(), options);
    for (k, seq, kind, v) in entries {
        b.add(k, *seq, *kind, v).unwrap();
    }
    let summary = b.finish().unwrap();
    assert!(*file.synced.lock().unwrap(), "finish must sync the file");
    let data = file.data.lock().unwrap().clone();
    (data, summary)
}

pub(crate) fn policies() -> Vec<Arc<dyn FilterPolicy>> {
    vec![Arc::new(ExactPolicy)]
}

/// Opens table bytes with the exact policy; returns the table, its counters and file.
pub(crate) fn open(data: Vec<u8>) -> (crate::Result<Table>, Arc<Counters>, Arc<MemFile>) {
    let file = MemFile::new(data);
    let counters = Arc::new(Counters::default());
    let table = Table::open(file.clone(), path(), counters.clone(), &policies());
    (table, counters, file)
}

/// `n` bytes of xorshift noise from `seed` (nonzero): data no compressor can shrink.
pub(crate) fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
