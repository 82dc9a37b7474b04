//! The one door through which every byte of a table file is read, and counted.
//!
//! Every read is a single positioned read (`pread`) of a whole block with its trailer,
//! counted in `data_block_reads` and `bytes_read` right where it happens. One call, one
//! syscall: the store's count can be checked against the kernel's (`syscr` in
//! `/proc/self/io`).

use std::cell::Cell;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::block::Block;
use super::block_cache::BlockCache;
use super::compression;
use super::footer::{BlockHandle, Footer, FOOTER_SIZE};
use super::meta_cache::MetaCache;
use super::table_cache::FileSlot;
use super::trailer::{self, BLOCK_TRAILER_SIZE};
use super::{BlockKind, Malformed};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::stats::{self, Counters};

/// The largest buffer a thread keeps for its next block read.
const MAX_SPARE: usize = 64 << 10;

/// A read slower than this, in nanoseconds, is taken to have waited on the device:
/// a page-cache `pread` of a 4 KiB block takes 1–5 µs here, an SSD read 50–200 µs.
const DEVICE_READ_NANOS: u64 = 20_000;

/// Whether a running average of batch read times (`0`: none timed yet) says the reads
/// wait on the device (see [`TableFile::reads_wait_on_device`]).
fn waits_on_device(avg_nanos: u64) -> bool {
    avg_nanos == 0 || avg_nanos >= DEVICE_READ_NANOS
}

/// The running average after one more read of `sample` nanoseconds: the first sample
/// alone, then weight 1/8 for each new one. Never 0, which means "none timed".
fn fold_read_nanos(old: u64, sample: u64) -> u64 {
    let new = if old == 0 {
        sample
    } else {
        old - old / 8 + sample / 8
    };
    new.max(1)
}

thread_local! {
    /// Each thread's buffer for its next data-block read, left by its last read of a
    /// compressed block: the stored bytes were only decompressed out of it. A read
    /// into it allocates nothing and zeroes nothing, and its lines are likely still in
    /// the CPU's caches. A raw block becomes the buffer it was read into (copied out
    /// of it only when the buffer is a larger spare); giving a finished raw block's
    /// buffer back for the next read measured no faster (three pairs, not kept).
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The thread's spare buffer, taken (empty if it has none, or if the thread is
/// exiting: a get made from another thread-local's destructor must still work).
fn take_spare() -> Vec<u8> {
    SPARE.try_with(Cell::take).unwrap_or_default()
}

/// Keeps `buffer` as the thread's spare unless it is too large to hold on to (or the
/// thread is exiting and has no spare any more: then it is dropped).
fn keep_spare(buffer: Vec<u8>) {
    if buffer.capacity() <= MAX_SPARE {
        let _ = SPARE.try_with(|spare| spare.set(buffer));
    }
}

/// A table file opened for positioned reads, with the counters its reads go to.
#[derive(Clone)]
pub struct TableFile {
    file: Source,
    path: PathBuf,
    counters: Arc<Counters>,
}

/// Where the file's descriptor comes from.
#[derive(Clone)]
enum Source {
    /// Opened by the caller and held for the table's life (tools, tests).
    Open(Arc<dyn RandomAccessFile>),
    /// Held by the store's table cache, which may close it and reopens it on demand.
    Cached(Arc<FileSlot>),
}

impl Source {
    fn with<R>(&self, f: impl FnOnce(&dyn RandomAccessFile) -> io::Result<R>) -> io::Result<R> {
        match self {
            Source::Open(file) => f(file.as_ref()),
            Source::Cached(slot) => slot.with_file(f),
        }
    }
}

impl fmt::Debug for TableFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TableFile {
    /// Wraps an open file; `path` names it in errors.
    pub fn new(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        counters: Arc<Counters>,
    ) -> TableFile {
        TableFile {
            file: Source::Open(file),
            path,
            counters,
        }
    }

    /// A file whose descriptor the store's table cache opens and closes.
    pub(crate) fn cached(slot: Arc<FileSlot>, counters: Arc<Counters>) -> TableFile {
        TableFile {
            path: slot.path().to_path_buf(),
            file: Source::Cached(slot),
            counters,
        }
    }

    /// Marks the file for deletion once no reader holds the table (a no-op for a file
    /// the table cache does not manage).
    pub(crate) fn mark_obsolete(&self) {
        if let Source::Cached(slot) = &self.file {
            slot.mark_obsolete();
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The counters reads are charged to.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The file's length.
    pub fn size(&self) -> Result<u64> {
        self.file
            .with(|f| f.len())
            .map_err(|e| self.io_error("stat", e))
    }

    /// Asks the OS to drop the file's cached pages (cold-cache benchmarks).
    pub fn drop_cache(&self) -> Result<()> {
        self.file
            .with(|f| f.drop_cache())
            .map_err(|e| self.io_error("drop cache of", e))
    }

    /// Reads `len` bytes at `offset`: one allocation, one positioned read, counted.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_into(&mut buf, offset, len)?;
        Ok(buf)
    }

    /// Reads `len` bytes at `offset` into `buf`, counted as one read. `buf` is reused
    /// when it has room (only bytes it did not hold before are zeroed first), and
    /// otherwise replaced by an allocation of exactly `len` bytes.
    fn read_into(&self, buf: &mut Vec<u8>, offset: u64, len: usize) -> Result<()> {
        if buf.capacity() < len {
            *buf = vec![0; len];
        } else {
            buf.resize(len, 0);
        }
        self.file
            .with(|f| f.read_exact_at(buf, offset))
            .map_err(|e| self.io_error("read", e))?;
        let s = self.counters.local();
        stats::bump(&s.data_block_reads);
        stats::add(&s.bytes_read, len as u64);
        Ok(())
    }

    /// Reads the block at `handle` with its trailer, checks the trailer, and returns the
    /// block's contents.
    pub fn read_block(&self, handle: BlockHandle, kind: BlockKind) -> Result<Vec<u8>> {
        let mut sealed = self.read_sealed(handle, kind)?;
        let len = trailer::check(&sealed).map_err(|m| self.corruption(kind, handle.offset, m))?;
        sealed.truncate(len);
        Ok(sealed)
    }

    /// The data block at `handle` for a point lookup: from the store's block cache if
    /// it holds it, otherwise read, checked, decoded and kept there.
    pub fn read_data_block(&self, handle: BlockHandle) -> Result<Block> {
        self.cached_data_block(handle, true)
    }

    /// The data block at `handle` for a scan or a compaction: from the block cache if
    /// it holds it, otherwise read from the file and not kept, so that one pass over
    /// a table does not push the hot blocks out. (The block a scan's start key seeks
    /// into is read with [`read_data_block`](Self::read_data_block).)
    pub fn scan_data_block(&self, handle: BlockHandle) -> Result<Block> {
        self.cached_data_block(handle, false)
    }

    fn cached_data_block(&self, handle: BlockHandle, fill: bool) -> Result<Block> {
        let Some((cache, id)) = self.block_cache() else {
            return self.load_data_block(handle);
        };
        if let Some(block) = cache.get(id, handle.offset) {
            stats::bump(&self.counters.local().block_cache_hits);
            return Ok(block);
        }
        stats::bump(&self.counters.local().block_cache_misses);
        let block = self.load_data_block(handle)?;
        if fill {
            // Only a block that passed every check gets here.
            cache.insert(id, handle.offset, block.clone());
        }
        Ok(block)
    }

    /// The data blocks at `handles` for a batch of point lookups, in order: each from
    /// the block cache if it holds it (counted as [`read_data_block`] counts), the rest
    /// read from the file, checked, decoded and offered to the cache.
    ///
    /// The reads of the missing blocks overlap on the device: when two or more are
    /// missing, the OS is first told of every one of them (`RandomAccessFile::will_need`,
    /// a readahead hint, no read syscall), so their device reads are all under way
    /// before the first positioned read waits. Each block is then still exactly one
    /// counted read: `data_block_reads` stays equal to the kernel's `syscr`.
    ///
    /// [`read_data_block`]: Self::read_data_block
    /// `overlapped` grows by the reads issued together, `missed` by the blocks the
    /// cache lacked.
    pub(crate) fn read_data_blocks(
        &self,
        handles: &[BlockHandle],
        overlapped: &mut u64,
        missed: &mut u64,
    ) -> Result<Vec<Block>> {
        let cache = self.block_cache();
        let mut blocks: Vec<Option<Block>> = handles
            .iter()
            .map(|h| {
                let (cache, id) = cache?;
                let block = cache.get_quiet(id, h.offset);
                let s = self.counters.local();
                match &block {
                    Some(_) => stats::bump(&s.block_cache_hits),
                    None => stats::bump(&s.block_cache_misses),
                }
                block
            })
            .collect();
        let missing: Vec<BlockHandle> = handles
            .iter()
            .zip(&blocks)
            .filter(|(_, b)| b.is_none())
            .map(|(h, _)| *h)
            .collect();
        *missed += missing.len() as u64;
        let mut read = if missing.len() > 1 {
            *overlapped += missing.len() as u64;
            self.read_overlapped(&missing)?
        } else {
            missing
                .iter()
                .map(|h| self.load_data_block(*h))
                .collect::<Result<Vec<_>>>()?
        }
        .into_iter();
        handles
            .iter()
            .zip(blocks.iter_mut())
            .map(|(h, slot)| match slot.take() {
                Some(block) => Ok(block),
                None => {
                    let block = read.next().ok_or_else(|| {
                        self.corruption(BlockKind::Data, h.offset, "block not read".into())
                    })?;
                    if let Some((cache, id)) = cache {
                        cache.insert(id, h.offset, block.clone());
                    }
                    Ok(block)
                }
            })
            .collect()
    }

    /// Reads, checks and decodes the data blocks at `handles` (two or more), their
    /// device reads overlapped: one io_uring submission where the `io-uring` feature
    /// and the kernel give a ring, otherwise a readahead hint for every block, then one
    /// `pread` each.
    fn read_overlapped(&self, handles: &[BlockHandle]) -> Result<Vec<Block>> {
        #[cfg(all(feature = "io-uring", target_os = "linux"))]
        if let Some(blocks) = self.read_with_ring(handles)? {
            return Ok(blocks);
        }
        if self.reads_wait_on_device() {
            for h in handles {
                let len = self.sealed_len(*h, BlockKind::Data)?;
                // Only a hint: a file that cannot take it is read as it would be.
                let _ = self.file.with(|f| f.will_need(h.offset, len));
            }
        }
        // The first read's wait is one read's latency whether or not the hints went
        // out (the later ones may find their pages already fetched): that is the sample.
        let mut blocks = Vec::with_capacity(handles.len());
        for (i, h) in handles.iter().enumerate() {
            let started = Instant::now();
            blocks.push(self.load_data_block(*h)?);
            if i == 0 {
                self.note_batch_read(started.elapsed());
            }
        }
        Ok(blocks)
    }

    /// Whether a batch's reads have lately waited on the device, so that telling the
    /// OS about them ahead of time pays. A hint is a system call per block: when the
    /// pages are in the OS's cache it only adds that call (measured: batched gets 10–15%
    /// slower than single ones with every block a page-cache hit). A `pread` served
    /// from the page cache takes a few microseconds, one that reaches an SSD tens to
    /// hundreds; [`DEVICE_READ_NANOS`] splits the two. With no reads timed yet the
    /// answer is yes.
    pub(crate) fn reads_wait_on_device(&self) -> bool {
        waits_on_device(self.counters.batch_read_nanos.load(Ordering::Relaxed))
    }

    /// Folds one read's `elapsed` time into the running average (weight 1/8, so a
    /// store that turns cold or warm is noticed within a few batches).
    fn note_batch_read(&self, elapsed: Duration) {
        let per_read = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let avg = &self.counters.batch_read_nanos;
        avg.store(
            fold_read_nanos(avg.load(Ordering::Relaxed), per_read),
            Ordering::Relaxed,
        );
    }

    /// The blocks at `handles` read with one io_uring submission, or `None` when the
    /// file has no descriptor to give (a wrapped or in-memory file) or the thread no
    /// ring. Each block counts as one read, as a `pread` would, and in `uring_reads`.
    #[cfg(all(feature = "io-uring", target_os = "linux"))]
    fn read_with_ring(&self, handles: &[BlockHandle]) -> Result<Option<Vec<Block>>> {
        let reads = handles
            .iter()
            .map(|h| Ok((h.offset, self.sealed_len(*h, BlockKind::Data)?)))
            .collect::<Result<Vec<_>>>()?;
        let read = self
            .file
            .with(|f| match f.raw_fd() {
                Some(fd) => crate::fs::uring::read_at_many(fd, &reads),
                None => Ok(None),
            })
            .map_err(|e| self.io_error("read", e))?;
        let Some(buffers) = read else {
            return Ok(None);
        };
        let s = self.counters.local();
        for &(_, len) in &reads {
            stats::bump(&s.data_block_reads);
            stats::bump(&s.uring_reads);
            stats::add(&s.bytes_read, len as u64);
        }
        buffers
            .into_iter()
            .zip(handles)
            .map(|(sealed, h)| self.decode_data_block(*h, sealed))
            .collect::<Result<_>>()
            .map(Some)
    }

    /// Tells the OS that the data blocks at `handles` the cache lacks will be read soon:
    /// a readahead hint per block, no read syscall and nothing counted. A batch gives it
    /// the blocks later tables may need, so their device reads start while earlier
    /// tables are still being read ([`Version::multi_get`]).
    ///
    /// [`Version::multi_get`]: crate::version::Version::multi_get
    pub(crate) fn hint_uncached(&self, handles: &[BlockHandle]) {
        if !self.reads_wait_on_device() {
            return;
        }
        let cache = self.block_cache();
        for h in handles {
            if let Some((cache, id)) = cache {
                if cache.contains(id, h.offset) {
                    continue;
                }
            }
            let Ok(len) = self.sealed_len(*h, BlockKind::Data) else {
                continue; // the read itself will report the bad handle
            };
            // Only a hint: a file that cannot take it is read as it would be.
            let _ = self.file.with(|f| f.will_need(h.offset, len));
        }
    }

    fn block_cache(&self) -> Option<(&BlockCache, u64)> {
        match &self.file {
            Source::Cached(slot) => slot.block_cache(),
            Source::Open(_) => None,
        }
    }

    /// The store's metadata cache (`Options::metadata_budget`), if it has one, and
    /// this table's id in it.
    pub(crate) fn meta_cache(&self) -> Option<(Arc<MetaCache>, u64)> {
        match &self.file {
            Source::Cached(slot) => slot.meta_cache(),
            Source::Open(_) => None,
        }
    }

    /// Reads, checks and decodes the data block at `handle` from the file, bypassing
    /// any cache (what `verify` uses).
    pub fn load_data_block(&self, handle: BlockHandle) -> Result<Block> {
        let len = self.sealed_len(handle, BlockKind::Data)?;
        // The thread's spare buffer is taken, not borrowed: a raw block may become it.
        let mut sealed = take_spare();
        self.read_into(&mut sealed, handle.offset, len)?;
        self.decode_data_block(handle, sealed)
    }

    /// Checks and decodes `sealed`, the data block at `handle` with its trailer, as
    /// read from the file.
    fn decode_data_block(&self, handle: BlockHandle, sealed: Vec<u8>) -> Result<Block> {
        let bad = |m: Malformed| self.corruption(BlockKind::Data, handle.offset, m);
        match trailer::check_data(&sealed).map_err(bad)? {
            (len, kind @ (trailer::LZ4_COMPRESSION | trailer::ZSTD_COMPRESSION)) => {
                let raw = if kind == trailer::LZ4_COMPRESSION {
                    compression::decompress_lz4(&sealed[..len])
                } else {
                    compression::decompress_zstd(&sealed[..len])
                }
                .map_err(bad)?;
                keep_spare(sealed);
                let len = raw.len();
                Block::new(Bytes::from(raw), len).map_err(bad)
            }
            // The trailer stays in the buffer: `Bytes::from` then takes it without
            // copying. A spare larger than the block is not given away (the cache
            // charges a block by its length): the block is copied out of it.
            (len, _) if sealed.capacity() == sealed.len() => {
                Block::new(Bytes::from(sealed), len).map_err(bad)
            }
            (len, _) => {
                let block = Bytes::copy_from_slice(&sealed);
                keep_spare(sealed);
                Block::new(block, len).map_err(bad)
            }
        }
    }

    fn read_sealed(&self, handle: BlockHandle, kind: BlockKind) -> Result<Vec<u8>> {
        self.read(handle.offset, self.sealed_len(handle, kind)?)
    }

    /// The bytes of the block at `handle` with its trailer.
    fn sealed_len(&self, handle: BlockHandle, kind: BlockKind) -> Result<usize> {
        usize::try_from(handle.size)
            .ok()
            .and_then(|s| s.checked_add(BLOCK_TRAILER_SIZE))
            .ok_or_else(|| {
                self.corruption(
                    kind,
                    handle.offset,
                    "block size does not fit in memory".into(),
                )
            })
    }

    /// An [`Error::Corruption`] naming this file, the block kind and its offset.
    pub fn corruption(&self, kind: BlockKind, offset: u64, why: Malformed) -> Error {
        Error::corruption(&self.path, format!("{kind} at offset {offset}: {why}"))
    }

    fn io_error(&self, op: &str, e: io::Error) -> Error {
        Error::Io(io::Error::new(
            e.kind(),
            format!("{op} {}: {e}", self.path.display()),
        ))
    }
}

/// Reads and validates the footer of a `file_size`-byte table.
pub(crate) fn read_footer(file: &TableFile, file_size: u64) -> Result<Footer> {
    let footer_at = file_size.checked_sub(FOOTER_SIZE as u64).ok_or_else(|| {
        Error::corruption(
            file.path(),
            format!("file is {file_size} bytes, shorter than the {FOOTER_SIZE}-byte footer"),
        )
    })?;
    let bytes = file.read(footer_at, FOOTER_SIZE)?;
    Footer::decode(&bytes, file_size).map_err(|m| file.corruption(BlockKind::Footer, footer_at, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_reads_are_judged_by_their_running_average() {
        // Nothing timed yet: hint (the first batch cannot know).
        assert!(waits_on_device(0));
        // A device read (200 µs) then page-cache reads (3 µs): hints stop once the
        // average falls under the threshold, and not before.
        let mut avg = fold_read_nanos(0, 200_000);
        assert_eq!(avg, 200_000);
        let mut fast = 0;
        while waits_on_device(avg) {
            avg = fold_read_nanos(avg, 3_000);
            fast += 1;
            assert!(fast < 100, "the average never fell: {avg}");
        }
        // The gap to 3 µs shrinks by 7/8 a step: 197 µs · (7/8)^n < 17 µs first at
        // n = 19 (ln(17/197) / ln(7/8) = 18.4).
        assert_eq!(fast, 19);
        // A store turning cold again is noticed: a few device reads bring hints back.
        let mut slow = 0;
        while !waits_on_device(avg) {
            avg = fold_read_nanos(avg, 300_000);
            slow += 1;
        }
        assert_eq!(slow, 1);
        // The average is never 0 (which would read as "nothing timed").
        assert_eq!(fold_read_nanos(0, 0), 1);
    }
}
