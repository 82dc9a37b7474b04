//! The write-ahead log (WAL): every write batch is appended here, and made durable when
//! the store syncs, before it reaches the memtable, so that a crash loses no
//! acknowledged write.
//!
//! On open the store replays every live log (each numbered at or above the manifest's
//! `wal_number`, oldest first) into a fresh memtable. A log is a plain sequence of
//! records, one per write batch, with no block structure:
//!
//! ```text
//! +----------+----------+------+----------+=====================+
//! | crc: u32 | len: u32 | type | hcrc:u32 | payload (len bytes) |  record 0
//! +----------+----------+------+----------+=====================+
//! | crc: u32 | len: u32 | type | hcrc:u32 | payload ...         |  record 1
//!   0          4          8      9          13
//!
//! crc   CRC-32 (crc32fast, IEEE) of the type byte followed by the payload
//! len   payload length in bytes, at most MAX_RECORD_LEN (256 MiB)
//! type  1 = FULL (a whole write batch); 0 never appears, so zeros are not a record
//! hcrc  CRC-32 of header bytes 0..9 (crc, len, type)
//! ```
//!
//! All integers are little-endian. The header checksum lets the reader trust `len`
//! before it uses it: without it, one flipped bit in a length in the middle of the log
//! could make the rest of the log look like a record cut off at the end of the file,
//! and silently drop it.
//!
//! # Damage: spans, tails and corruption
//!
//! A crash while appending can leave the end of the log damaged, and a disk can damage
//! bytes anywhere. [`scan_wal`] maps a whole log into [`Span`]s: each record that
//! verifies (header checksum, known type, length within the limit and within the file,
//! payload checksum), and each stretch of bytes that is not part of one. After a record
//! that fails, the scan looks for the next offset at which a whole record verifies and
//! resumes there; the bytes in between are one damaged span. The scan never trusts a
//! length before its header checksum holds, and never allocates for a claimed length;
//! the payload bytes its searches checksum are bounded by a multiple of the log's
//! length, past which the rest of the log is one span it did not search.
//!
//! What the store does with a damaged span is a policy, chosen by
//! `Options::wal_recovery` and applied in `recovery.rs` (which also checks each
//! record's sequence numbers, so a stale older log's records left in a reused file
//! count as damage). [`parse_wal`] applies the default policy's rule to one log, by its
//! framing alone:
//!
//! * a record that fails, after which no record verifies, is a **torn tail**: dropped,
//!   its size reported in [`WalReplay::torn_tail_bytes`] — nothing written after the
//!   crash point can be lost by dropping it;
//! * a record that fails with a verifying record after it is [`Error::Corruption`]
//!   naming the file and the bad record's offset — dropping it would drop the valid
//!   records after it, which were acknowledged writes.
//!
//! After replaying a log with a torn tail the store must not append to that file (the
//! new records would sit behind garbage and read back as corruption): it starts a new
//! log instead.

use std::fmt;
use std::io;
use std::path::Path;
use std::thread::JoinHandle;

use byteorder::{ByteOrder, LittleEndian};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::fs::{FileSystem, SyncHandle, WritableFile};
pub use crate::types::MAX_RECORD_LEN;

/// Bytes before each payload: crc (4), len (4), type (1), header crc (4).
pub const HEADER_LEN: usize = 13;

/// The record type of a whole write batch.
const TYPE_FULL: u8 = 1;

/// The writer keeps its scratch buffer between records unless a record made it
/// larger than this.
const KEEP_BUFFER: usize = 1 << 20;

/// Every this many bytes appended without a sync, the writer starts syncing them in
/// the background (RocksDB's `wal_bytes_per_sync`), when the file offers a
/// [`SyncHandle`].
///
/// A log is synced when the memtable it backs is frozen, under the writer lock: with
/// a 64 MiB memtable and nothing synced before, that one `fdatasync` writes 64 MiB
/// and every writer waits for it (the store's slowest writes were that wait). Synced
/// as it grows, the log has at most about this much left to write when it closes.
pub const BACKGROUND_SYNC_BYTES: u64 = 1 << 20;

/// Appends records to a log file.
///
/// Each record is written with a single [`WritableFile::append`] call. If an append or
/// a sync fails, the file's tail is unknown (a partial record may be on disk), so the
/// writer refuses every later call with [`Error::Closed`]; the store must start a new
/// log. A background sync that fails counts as a failed sync: the writer refuses the
/// next call.
pub struct WalWriter {
    file: Box<dyn WritableFile>,
    buf: Vec<u8>,
    bytes_written: u64,
    failed: bool,
    /// Syncs the file from another thread; `None` if the file offers no handle.
    sync_handle: Option<SyncHandle>,
    /// Bytes appended since the last sync, foreground or background, began.
    unsynced: u64,
    /// The background sync in flight, if any.
    background: Option<JoinHandle<io::Result<()>>>,
    background_syncs: u64,
}

impl WalWriter {
    /// A writer appending to `file` (a new log, or an existing one opened for append
    /// whose tail is known to be clean).
    pub fn new(file: Box<dyn WritableFile>) -> WalWriter {
        let sync_handle = file.sync_handle();
        WalWriter {
            file,
            buf: Vec::new(),
            bytes_written: 0,
            failed: false,
            sync_handle,
            unsynced: 0,
            background: None,
            background_syncs: 0,
        }
    }

    /// Appends one record holding `payload` (not yet durable: see [`WalWriter::sync`]).
    ///
    /// A payload over [`MAX_RECORD_LEN`] is [`Error::InvalidArgument`] and writes
    /// nothing.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_usable()?;
        if self
            .background
            .as_ref()
            .is_some_and(|sync| sync.is_finished())
        {
            self.finish_background_sync()?;
        }
        if payload.len() > MAX_RECORD_LEN {
            return Err(Error::InvalidArgument(format!(
                "WAL record of {} bytes exceeds the {MAX_RECORD_LEN}-byte limit",
                payload.len()
            )));
        }
        self.buf.clear();
        encode_record(payload, &mut self.buf);
        if let Err(e) = self.file.append(&self.buf) {
            self.failed = true;
            return Err(e.into());
        }
        self.bytes_written += self.buf.len() as u64;
        self.unsynced += self.buf.len() as u64;
        if self.buf.capacity() > KEEP_BUFFER {
            self.buf = Vec::new();
        }
        if self.unsynced >= BACKGROUND_SYNC_BYTES && self.background.is_none() {
            self.start_background_sync();
        }
        Ok(())
    }

    /// Makes every record appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        // A background sync still running covers only part of what this one must:
        // its failure must not be missed, and two concurrent syncs gain nothing.
        self.finish_background_sync()?;
        if let Err(e) = self.file.sync() {
            // After a failed fsync the kernel may have dropped the dirty pages: a retry
            // could "succeed" without the data being on disk.
            self.failed = true;
            return Err(e.into());
        }
        self.unsynced = 0;
        Ok(())
    }

    /// Background syncs this writer has started.
    pub fn background_syncs(&self) -> u64 {
        self.background_syncs
    }

    /// Starts syncing the file on a thread of its own, if it offers a handle. Nothing
    /// waits for it but the next [`sync`](Self::sync); a thread that cannot be
    /// started leaves the bytes to that sync.
    fn start_background_sync(&mut self) {
        let Some(handle) = &self.sync_handle else {
            return;
        };
        let handle = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("bloomkv-log-sync".into())
            .spawn(move || handle());
        if let Ok(thread) = spawned {
            self.background = Some(thread);
            self.background_syncs += 1;
            self.unsynced = 0;
        }
    }

    /// Waits for the background sync in flight, if any; its failure is the writer's.
    fn finish_background_sync(&mut self) -> Result<()> {
        let Some(thread) = self.background.take() else {
            return Ok(());
        };
        let result = thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the log's background sync panicked")));
        if let Err(e) = result {
            self.failed = true;
            return Err(e.into());
        }
        Ok(())
    }

    /// Bytes this writer has appended (headers included), counted from its creation.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Closed(
                "an earlier WAL write or sync failed; the log's tail is unknown".into(),
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for WalWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WalWriter")
            .field("bytes_written", &self.bytes_written)
            .field("failed", &self.failed)
            .field("unsynced", &self.unsynced)
            .field("background_syncs", &self.background_syncs)
            .finish()
    }
}

/// Appends the framed record for `payload` (header then payload) to `out`.
///
/// The caller ensures `payload.len() <= MAX_RECORD_LEN`.
pub fn encode_record(payload: &[u8], out: &mut Vec<u8>) {
    let mut header = [0u8; HEADER_LEN];
    LittleEndian::write_u32(&mut header[0..4], payload_crc(TYPE_FULL, payload));
    LittleEndian::write_u32(&mut header[4..8], payload.len() as u32);
    header[8] = TYPE_FULL;
    let hcrc = crc32fast::hash(&header[0..9]);
    LittleEndian::write_u32(&mut header[9..13], hcrc);
    out.reserve(HEADER_LEN + payload.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
}

fn payload_crc(kind: u8, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(payload);
    hasher.finalize()
}

/// Why bytes at an offset are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRecord {
    /// Fewer than [`HEADER_LEN`] bytes remain.
    HeaderCutOff,
    /// The header checksum does not match.
    HeaderChecksum,
    /// The header verifies but names an unknown record type.
    UnknownType(u8),
    /// The header verifies but claims more than [`MAX_RECORD_LEN`] bytes.
    TooLong(usize),
    /// The header verifies but the payload runs past the end of the file.
    PayloadCutOff,
    /// The payload checksum does not match.
    PayloadChecksum,
    /// Not checked: the scan stopped searching for the next record here (see
    /// [`scan_wal`]), so whether valid records follow is unknown.
    NotSearched,
}

impl fmt::Display for BadRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadRecord::HeaderCutOff => write!(f, "record header cut off at the end of file"),
            BadRecord::HeaderChecksum => write!(f, "header checksum mismatch"),
            BadRecord::UnknownType(t) => write!(f, "unknown record type {t}"),
            BadRecord::TooLong(n) => {
                write!(
                    f,
                    "record length {n} exceeds the {MAX_RECORD_LEN}-byte limit"
                )
            }
            BadRecord::PayloadCutOff => write!(f, "record runs past the end of file"),
            BadRecord::PayloadChecksum => write!(f, "payload checksum mismatch"),
            BadRecord::NotSearched => write!(
                f,
                "not searched for records (the search gave up after more record headers \
                 verified without their payloads than damage leaves: a crafted log?)"
            ),
        }
    }
}

/// Checks the record starting at `off`: the offset just past it if it verifies.
///
/// Every check is made before the next one trusts a field: the header checksum before
/// the type and length, the length against the limit and the file before the payload
/// is touched.
pub fn check_record(buf: &[u8], off: usize) -> std::result::Result<usize, BadRecord> {
    let rest = buf.get(off..).unwrap_or_default();
    let Some(header) = rest.get(..HEADER_LEN) else {
        return Err(BadRecord::HeaderCutOff);
    };
    if crc32fast::hash(&header[0..9]) != LittleEndian::read_u32(&header[9..13]) {
        return Err(BadRecord::HeaderChecksum);
    }
    let kind = header[8];
    if kind != TYPE_FULL {
        return Err(BadRecord::UnknownType(kind));
    }
    let payload_len = LittleEndian::read_u32(&header[4..8]) as usize;
    if payload_len > MAX_RECORD_LEN {
        return Err(BadRecord::TooLong(payload_len));
    }
    // `rest.len() >= HEADER_LEN` here, so this cannot underflow.
    if payload_len > rest.len() - HEADER_LEN {
        return Err(BadRecord::PayloadCutOff);
    }
    let payload = &rest[HEADER_LEN..HEADER_LEN + payload_len];
    if payload_crc(kind, payload) != LittleEndian::read_u32(&header[0..4]) {
        return Err(BadRecord::PayloadChecksum);
    }
    Ok(off + HEADER_LEN + payload_len)
}

/// One stretch of a log, as [`scan_wal`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    /// A record whose header and payload verify.
    Record {
        /// Offset of the record's header in the file.
        offset: u64,
        /// The payload (a slice of the log's buffer).
        payload: Bytes,
    },
    /// Bytes that belong to no verifying record: from a record that failed up to the
    /// next offset where a record verifies, or to the end of the file.
    Damaged {
        /// Offset of the first damaged byte.
        offset: u64,
        /// Damaged bytes.
        len: u64,
        /// Why the record at `offset` failed.
        why: BadRecord,
        /// Every damaged byte is zero (space the file system allocated but never wrote).
        zeros: bool,
    },
}

impl Span {
    /// The span's first byte in the file.
    pub fn offset(&self) -> u64 {
        match self {
            Span::Record { offset, .. } | Span::Damaged { offset, .. } => *offset,
        }
    }

    /// The span's length in bytes, a record's header included.
    pub fn len(&self) -> u64 {
        match self {
            Span::Record { payload, .. } => (HEADER_LEN + payload.len()) as u64,
            Span::Damaged { len, .. } => *len,
        }
    }

    /// Whether the span is empty (never true of a span [`scan_wal`] returns).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Maps a whole log into records and damaged spans, in file order; together the
/// spans cover every byte exactly once.
///
/// After a record that fails, the next span starts at the first later offset where a
/// whole record verifies. A false match needs a 32-bit header checksum and a 32-bit
/// payload checksum to agree by chance. The spans are found lazily, one per `next`.
///
/// The search checksums the payload of every candidate whose header verifies, so a
/// log crafted with a verifying header every few bytes, each claiming the rest of the
/// file, would cost time quadratic in its length. The payload bytes the whole scan
/// checksums in its searches are therefore bounded ([`RESYNC_BUDGET_FACTOR`] times
/// the log's length, plus 1 MiB): damage makes a verifying header by chance once in
/// 2^32 offsets, so only such a file reaches the bound. Then the rest of the log is
/// one last damaged span, [`BadRecord::NotSearched`], and what follows it is unknown.
pub fn scan_wal(buf: &Bytes) -> WalScan {
    WalScan {
        buf: buf.clone(),
        off: 0,
        budget: buf
            .len()
            .saturating_mul(RESYNC_BUDGET_FACTOR)
            .saturating_add(1 << 20),
        gave_up: false,
    }
}

/// The payload bytes a scan's searches may checksum, per byte of the log (see
/// [`scan_wal`]).
pub const RESYNC_BUDGET_FACTOR: usize = 4;

/// The iterator [`scan_wal`] returns.
#[derive(Debug, Clone)]
pub struct WalScan {
    buf: Bytes,
    off: usize,
    /// Payload bytes the searches may still checksum.
    budget: usize,
    /// A search ran out of budget at `off`: the rest is not searched.
    gave_up: bool,
}

impl Iterator for WalScan {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        let (buf, off) = (&self.buf, self.off);
        if off >= buf.len() {
            return None;
        }
        if self.gave_up {
            self.off = buf.len();
            return Some(Span::Damaged {
                offset: off as u64,
                len: (buf.len() - off) as u64,
                why: BadRecord::NotSearched,
                zeros: all_zero(&buf[off..]),
            });
        }
        let (span, end) = match check_record(buf, off) {
            Ok(end) => (
                Span::Record {
                    offset: off as u64,
                    payload: buf.slice(off + HEADER_LEN..end),
                },
                end,
            ),
            Err(why) => {
                let next = match next_record(buf, off + 1, &mut self.budget) {
                    Ok(next) => next,
                    Err(stopped) => {
                        self.gave_up = true;
                        stopped
                    }
                };
                let span = Span::Damaged {
                    offset: off as u64,
                    len: (next - off) as u64,
                    why,
                    zeros: all_zero(&buf[off..next]),
                };
                (span, next)
            }
        };
        self.off = end;
        Some(span)
    }
}

/// The first offset at or after `from` where a whole record verifies, or the end of
/// the buffer. Most offsets are ruled out by their would-be type byte (which must be
/// FULL) before any checksum is computed. Each payload checksummed in vain is taken
/// from `budget`; `Err` with the offset reached when it runs out.
fn next_record(buf: &[u8], from: usize, budget: &mut usize) -> std::result::Result<usize, usize> {
    let mut p = from;
    while let Some(type_bytes) = buf.get(p + 8..) {
        let Some(skip) = type_bytes.iter().position(|&b| b == TYPE_FULL) else {
            break;
        };
        p += skip;
        match check_record(buf, p) {
            Ok(_) => return Ok(p),
            Err(BadRecord::PayloadChecksum) => {
                let checked = LittleEndian::read_u32(&buf[p + 4..p + 8]) as usize;
                match budget.checked_sub(checked) {
                    Some(left) => *budget = left,
                    None => return Err(p),
                }
            }
            Err(_) => {}
        }
        p += 1;
    }
    Ok(buf.len())
}

/// What replaying a log found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalReplay {
    /// The payloads of the valid records, in order (slices of one buffer).
    pub records: Vec<Bytes>,
    /// Length of the valid prefix: the offset just past the last valid record.
    pub valid_len: u64,
    /// Bytes after the valid prefix that were dropped as a torn tail (0 if none).
    pub torn_tail_bytes: u64,
    /// Why the tail was dropped, when it was.
    pub torn_reason: Option<String>,
}

/// Reads and validates the whole log at `path` (see the module docs for what is a
/// torn tail and what is corruption).
pub fn read_wal(fs: &dyn FileSystem, path: &Path) -> Result<WalReplay> {
    let bytes = fs.read_all(path)?;
    parse_wal(Bytes::from(bytes), path)
}

/// Validates a log already in memory; `path` names it in errors.
///
/// The valid prefix is kept; a failing record with no verifying record after it is a
/// torn tail; one with a verifying record after it is [`Error::Corruption`] naming
/// its offset.
pub fn parse_wal(buf: Bytes, path: &Path) -> Result<WalReplay> {
    let mut spans = scan_wal(&buf);
    let mut records = Vec::new();
    let mut valid_len = 0u64;
    for span in spans.by_ref() {
        match span {
            Span::Record { offset, payload } => {
                valid_len = offset + (HEADER_LEN + payload.len()) as u64;
                records.push(payload);
            }
            Span::Damaged {
                offset, why, zeros, ..
            } => {
                match spans.next() {
                    Some(Span::Damaged {
                        offset: next,
                        why: BadRecord::NotSearched,
                        ..
                    }) => {
                        return Err(Error::corruption(
                            path,
                            format!(
                                "WAL record at offset {offset}: {why}; from offset {next} the \
                                 log was {}, so this may not be a torn tail",
                                BadRecord::NotSearched
                            ),
                        ))
                    }
                    Some(next) => {
                        return Err(Error::corruption(
                            path,
                            format!(
                                "WAL record at offset {offset}: {why}; a valid record follows \
                                 at offset {}, so this is not a torn tail",
                                next.offset()
                            ),
                        ))
                    }
                    None => {}
                }
                let reason = if zeros {
                    "zero-filled tail".to_string()
                } else {
                    why.to_string()
                };
                return Ok(WalReplay {
                    records,
                    valid_len,
                    torn_tail_bytes: buf.len() as u64 - valid_len,
                    torn_reason: Some(reason),
                });
            }
        }
    }
    Ok(WalReplay {
        records,
        valid_len,
        torn_tail_bytes: 0,
        torn_reason: None,
    })
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use proptest::prelude::*;

    use super::*;
    use crate::fs::OsFileSystem;

    fn path() -> &'static Path {
        Path::new("000003.wal")
    }

    /// An in-memory file that counts appends and can be told to fail.
    #[derive(Clone, Default)]
    struct MemFile {
        data: Arc<Mutex<Vec<u8>>>,
        appends: Arc<Mutex<usize>>,
        fail_append: bool,
        fail_sync: bool,
    }

    impl WritableFile for MemFile {
        fn append(&mut self, buf: &[u8]) -> io::Result<()> {
            *self.appends.lock().unwrap() += 1;
            if self.fail_append {
                // A short write: half the bytes land, then the error.
                self.data
                    .lock()
                    .unwrap()
                    .extend_from_slice(&buf[..buf.len() / 2]);
                return Err(io::Error::other("injected append failure"));
            }
            self.data.lock().unwrap().extend_from_slice(buf);
            Ok(())
        }

        fn sync(&mut self) -> io::Result<()> {
            if self.fail_sync {
                return Err(io::Error::other("injected sync failure"));
            }
            Ok(())
        }
    }

    /// Payloads of assorted sizes, including empty and one crossing 4 KiB.
    fn sample_payloads() -> Vec<Vec<u8>> {
        vec![
            b"first".to_vec(),
            Vec::new(),
            vec![0u8; 20], // zeros inside a payload are data, not a zero tail
            (0..=255u8).collect(),
            vec![0xab; 5000],
            b"last".to_vec(),
        ]
    }

    fn encode_log(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut log = Vec::new();
        let mut ends = Vec::new();
        for p in payloads {
            encode_record(p, &mut log);
            ends.push(log.len());
        }
        (log, ends)
    }

    fn parse(bytes: &[u8]) -> Result<WalReplay> {
        parse_wal(Bytes::copy_from_slice(bytes), path())
    }

    fn payloads_of(replay: &WalReplay) -> Vec<Vec<u8>> {
        replay.records.iter().map(|r| r.to_vec()).collect()
    }

    fn assert_corruption_at(result: Result<WalReplay>, offset: usize) {
        match result {
            Err(Error::Corruption { file, reason }) => {
                assert_eq!(file, path());
                assert!(
                    reason.contains(&format!("offset {offset}:")),
                    "reason {reason:?} should name offset {offset}"
                );
            }
            other => panic!("expected corruption at offset {offset}, got {other:?}"),
        }
    }

    #[test]
    fn header_layout_is_as_documented() {
        let mut out = Vec::new();
        encode_record(b"abc", &mut out);
        assert_eq!(out.len(), HEADER_LEN + 3);
        assert_eq!(
            LittleEndian::read_u32(&out[0..4]),
            crc32fast::hash(&[1, b'a', b'b', b'c'])
        );
        assert_eq!(&out[4..8], &[3, 0, 0, 0]);
        assert_eq!(out[8], TYPE_FULL);
        assert_eq!(
            LittleEndian::read_u32(&out[9..13]),
            crc32fast::hash(&out[0..9])
        );
        assert_eq!(&out[13..], b"abc");
        // An all-zero header never validates, so a zero tail is never a record.
        assert_ne!(crc32fast::hash(&[0u8; 9]), 0);
    }

    #[test]
    fn writer_uses_one_append_per_record_and_counts_bytes() {
        let file = MemFile::default();
        let mut wal = WalWriter::new(Box::new(file.clone()));
        for p in sample_payloads() {
            wal.add_record(&p).unwrap();
        }
        wal.sync().unwrap();
        let (expected, _) = encode_log(&sample_payloads());
        assert_eq!(*file.appends.lock().unwrap(), sample_payloads().len());
        assert_eq!(wal.bytes_written(), expected.len() as u64);
        assert_eq!(*file.data.lock().unwrap(), expected);
    }

    #[test]
    fn writer_refuses_to_continue_after_a_failed_append() {
        let file = MemFile {
            fail_append: true,
            ..MemFile::default()
        };
        let mut wal = WalWriter::new(Box::new(file.clone()));
        assert!(matches!(wal.add_record(b"x"), Err(Error::Io(_))));
        assert!(matches!(wal.add_record(b"y"), Err(Error::Closed(_))));
        assert!(matches!(wal.sync(), Err(Error::Closed(_))));
        assert_eq!(*file.appends.lock().unwrap(), 1);
        // What did land is a torn tail, not corruption.
        let replay = parse(&file.data.lock().unwrap()).unwrap();
        assert!(replay.records.is_empty());
    }

    #[test]
    fn writer_refuses_to_continue_after_a_failed_sync() {
        let file = MemFile {
            fail_sync: true,
            ..MemFile::default()
        };
        let mut wal = WalWriter::new(Box::new(file));
        wal.add_record(b"x").unwrap();
        assert!(matches!(wal.sync(), Err(Error::Io(_))));
        assert!(matches!(wal.add_record(b"y"), Err(Error::Closed(_))));
    }

    #[test]
    fn oversized_record_is_refused_on_write() {
        let file = MemFile::default();
        let mut wal = WalWriter::new(Box::new(file.clone()));
        // Zeroed allocation: pages are not touched, so this costs no real memory.
        let huge = vec![0u8; MAX_RECORD_LEN + 1];
        assert!(matches!(
            wal.add_record(&huge),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(*file.appends.lock().unwrap(), 0);
        // The writer is still usable: nothing was written.
        wal.add_record(b"ok").unwrap();
    }

    #[test]
    fn empty_log_has_no_records() {
        let replay = parse(&[]).unwrap();
        assert!(replay.records.is_empty());
        assert_eq!(replay.torn_tail_bytes, 0);
        assert_eq!(replay.torn_reason, None);
    }

    #[test]
    fn torn_wal_tail_is_dropped_at_every_cut() {
        let payloads = sample_payloads();
        let (log, ends) = encode_log(&payloads);
        for cut in 0..=log.len() {
            let replay = parse(&log[..cut]).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let whole = ends.iter().filter(|&&end| end <= cut).count();
            assert_eq!(payloads_of(&replay), payloads[..whole], "cut {cut}");
            let valid = if whole == 0 { 0 } else { ends[whole - 1] };
            assert_eq!(replay.valid_len, valid as u64, "cut {cut}");
            assert_eq!(replay.torn_tail_bytes, (cut - valid) as u64, "cut {cut}");
            assert_eq!(replay.torn_reason.is_some(), cut != valid, "cut {cut}");
        }
    }

    #[test]
    fn torn_tail_through_the_os_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let path = dir.path().join("000001.wal");
        let payloads = sample_payloads();
        let mut wal = WalWriter::new(fs.create(&path).unwrap());
        for p in &payloads {
            wal.add_record(p).unwrap();
        }
        wal.sync().unwrap();
        drop(wal);
        let full = std::fs::read(&path).unwrap();
        let (_, ends) = encode_log(&payloads);
        // Cut in the header and in the payload of the last record.
        for cut in [ends[4] + 5, ends[4] + HEADER_LEN + 1, full.len() - 1] {
            std::fs::write(&path, &full[..cut]).unwrap();
            let replay = read_wal(&fs, &path).unwrap();
            assert_eq!(payloads_of(&replay), payloads[..5]);
            assert_eq!(replay.torn_tail_bytes, (cut - ends[4]) as u64);
        }
    }

    /// A file whose background syncs are counted, and fail when told to.
    #[derive(Clone, Default)]
    struct BackgroundFile {
        inner: MemFile,
        background_calls: Arc<Mutex<usize>>,
        fail_background: bool,
    }

    impl WritableFile for BackgroundFile {
        fn append(&mut self, buf: &[u8]) -> io::Result<()> {
            self.inner.append(buf)
        }

        fn sync(&mut self) -> io::Result<()> {
            self.inner.sync()
        }

        fn sync_handle(&self) -> Option<SyncHandle> {
            let calls = self.background_calls.clone();
            let fail = self.fail_background;
            Some(Arc::new(move || {
                *calls.lock().unwrap() += 1;
                if fail {
                    return Err(io::Error::other("injected background sync failure"));
                }
                Ok(())
            }))
        }
    }

    /// Appends records of 64 KiB until `bytes` more have been written.
    fn append_bytes(wal: &mut WalWriter, bytes: u64) -> Result<()> {
        let payload = vec![7u8; 64 << 10];
        let end = wal.bytes_written() + bytes;
        while wal.bytes_written() < end {
            wal.add_record(&payload)?;
        }
        Ok(())
    }

    #[test]
    fn a_growing_log_is_synced_in_the_background() {
        let file = BackgroundFile::default();
        let calls = file.background_calls.clone();
        let mut wal = WalWriter::new(Box::new(file.clone()));
        append_bytes(&mut wal, BACKGROUND_SYNC_BYTES - 100_000).unwrap();
        assert_eq!(wal.background_syncs(), 0, "started before the threshold");
        append_bytes(&mut wal, 100_000).unwrap();
        assert_eq!(wal.background_syncs(), 1);
        // The foreground sync waits for the background one, then starts the count
        // over.
        wal.sync().unwrap();
        assert_eq!(*calls.lock().unwrap(), 1);
        append_bytes(&mut wal, BACKGROUND_SYNC_BYTES / 2).unwrap();
        assert_eq!(wal.background_syncs(), 1);
        append_bytes(&mut wal, BACKGROUND_SYNC_BYTES / 2).unwrap();
        assert_eq!(wal.background_syncs(), 2);
        wal.sync().unwrap();
        assert_eq!(*calls.lock().unwrap(), 2);
        // Every record is in the file, whole.
        let data = Bytes::from(file.inner.data.lock().unwrap().clone());
        let replay = parse_wal(data, path()).unwrap();
        assert_eq!(replay.torn_tail_bytes, 0);
        assert_eq!(
            replay.records.len() as u64 * (HEADER_LEN as u64 + (64 << 10)),
            wal.bytes_written()
        );
    }

    #[test]
    fn a_failed_background_sync_stops_the_writer() {
        let file = BackgroundFile {
            fail_background: true,
            ..BackgroundFile::default()
        };
        let mut wal = WalWriter::new(Box::new(file));
        append_bytes(&mut wal, BACKGROUND_SYNC_BYTES).unwrap();
        assert_eq!(wal.background_syncs(), 1);
        let err = wal.sync().unwrap_err();
        assert!(
            err.to_string().contains("injected background sync failure"),
            "{err}"
        );
        assert!(matches!(wal.add_record(b"after"), Err(Error::Closed(_))));
        assert!(matches!(wal.sync(), Err(Error::Closed(_))));
    }

    #[test]
    fn a_failed_background_sync_refuses_the_next_record() {
        let file = BackgroundFile {
            fail_background: true,
            ..BackgroundFile::default()
        };
        let calls = file.background_calls.clone();
        let mut wal = WalWriter::new(Box::new(file));
        append_bytes(&mut wal, BACKGROUND_SYNC_BYTES).unwrap();
        // Once the thread has run, the next record learns of its failure.
        while wal.background.as_ref().is_some_and(|t| !t.is_finished()) {
            std::thread::yield_now();
        }
        assert_eq!(*calls.lock().unwrap(), 1);
        assert!(wal.add_record(b"after").is_err());
        assert!(matches!(wal.add_record(b"again"), Err(Error::Closed(_))));
    }

    #[test]
    fn background_syncs_through_the_os_file_system_keep_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let path = dir.path().join("000001.wal");
        let mut wal = WalWriter::new(fs.create(&path).unwrap());
        append_bytes(&mut wal, 3 * BACKGROUND_SYNC_BYTES).unwrap();
        assert!(wal.background_syncs() >= 1);
        wal.sync().unwrap();
        let written = wal.bytes_written();
        drop(wal);
        let replay = read_wal(&fs, &path).unwrap();
        assert_eq!(replay.torn_tail_bytes, 0);
        assert_eq!(replay.valid_len, written);
        assert!(replay.records.iter().all(|r| r.iter().all(|&b| b == 7)));
    }

    #[test]
    fn zero_filled_tail_is_dropped() {
        let payloads = sample_payloads();
        let (log, ends) = encode_log(&payloads);
        for zeros in [1, HEADER_LEN - 1, HEADER_LEN, HEADER_LEN + 1, 100, 4096] {
            let mut file = log.clone();
            file.resize(log.len() + zeros, 0);
            let replay = parse(&file).unwrap();
            assert_eq!(payloads_of(&replay), payloads);
            assert_eq!(replay.torn_tail_bytes, zeros as u64);
        }
        // A partly written last record, then zeros (the file grew before the data
        // arrived): every split of the last record.
        let last_start = ends[ends.len() - 2];
        for written in 1..log.len() - last_start {
            let mut file = log[..last_start + written].to_vec();
            file.resize(log.len() + 64, 0);
            let replay = parse(&file).unwrap_or_else(|e| panic!("written {written}: {e}"));
            assert_eq!(payloads_of(&replay), payloads[..payloads.len() - 1]);
            assert_eq!(replay.valid_len, last_start as u64);
        }
    }

    #[test]
    fn flipped_byte_in_a_middle_record_is_corruption() {
        let payloads = sample_payloads();
        let (log, ends) = encode_log(&payloads);
        let last_start = ends[ends.len() - 2];
        for pos in 0..last_start {
            let record_start = ends
                .iter()
                .copied()
                .filter(|&e| e <= pos)
                .max()
                .unwrap_or(0);
            for mask in [0x01, 0x80, 0xff] {
                let mut bad = log.clone();
                bad[pos] ^= mask;
                assert_corruption_at(parse(&bad), record_start);
            }
        }
    }

    #[test]
    fn flipped_byte_in_the_last_record_is_a_torn_tail() {
        let payloads = sample_payloads();
        let (log, ends) = encode_log(&payloads);
        let last_start = ends[ends.len() - 2];
        for pos in last_start..log.len() {
            let mut bad = log.clone();
            bad[pos] ^= 0x10;
            // Nothing valid follows: whether header or payload, it is dropped.
            let replay = parse(&bad).unwrap_or_else(|e| panic!("pos {pos}: {e}"));
            assert_eq!(payloads_of(&replay), payloads[..payloads.len() - 1]);
            assert_eq!(replay.torn_tail_bytes, (log.len() - last_start) as u64);
        }
    }

    #[test]
    fn scan_maps_every_byte_and_resumes_after_damage() {
        let payloads = sample_payloads();
        let (log, ends) = encode_log(&payloads);
        // Damage the second record's header: the scan resumes at the third record.
        let mut bad = log.clone();
        bad[ends[0] + 2] ^= 0xff;
        let spans: Vec<Span> = scan_wal(&Bytes::from(bad.clone())).collect();
        assert_eq!(spans.len(), payloads.len());
        assert_eq!(spans.iter().map(Span::len).sum::<u64>(), log.len() as u64);
        match &spans[1] {
            Span::Damaged {
                offset,
                len,
                why,
                zeros,
            } => {
                assert_eq!(*offset, ends[0] as u64);
                assert_eq!(*len, (ends[1] - ends[0]) as u64);
                assert_eq!(*why, BadRecord::HeaderChecksum);
                assert!(!zeros);
            }
            other => panic!("expected a damaged span, got {other:?}"),
        }
        let after: Vec<Vec<u8>> = spans[2..]
            .iter()
            .map(|s| match s {
                Span::Record { payload, .. } => payload.to_vec(),
                other => panic!("expected a record, got {other:?}"),
            })
            .collect();
        assert_eq!(after, payloads[2..]);
        assert_corruption_at(parse(&bad), ends[0]);
    }

    /// `count` record headers 13 bytes apart that verify, each claiming the payload
    /// up to the end of the `len`-byte run, none of which checksums.
    fn verifying_headers(len: usize, count: usize) -> Vec<u8> {
        let mut run = vec![0u8; len];
        for i in 0..count {
            let at = i * HEADER_LEN;
            let claimed = (len - at - HEADER_LEN) as u32;
            let mut header = [0u8; HEADER_LEN];
            header[0..4].copy_from_slice(&0xdead_beef_u32.to_le_bytes());
            header[4..8].copy_from_slice(&claimed.to_le_bytes());
            header[8] = TYPE_FULL;
            let crc = crc32fast::hash(&header[0..9]);
            header[9..13].copy_from_slice(&crc.to_le_bytes());
            run[at..at + HEADER_LEN].copy_from_slice(&header);
        }
        run
    }

    /// A run of verifying headers, each claiming the rest of the file, once made the
    /// search for the next record checksum the rest of the file at each one: time
    /// quadratic in the log's length (a 256 KiB run took seconds to open, a 64 MiB one
    /// would take hours). The searches' checksums are bounded by a multiple of the
    /// log's length; a log that reaches it ends in a span `NotSearched`, and valid
    /// records after it are not counted on: it is corruption, not a torn tail. A few
    /// such headers, as damage could leave, do not reach the bound.
    #[test]
    fn a_run_of_verifying_headers_ends_the_search_and_is_not_a_torn_tail() {
        let (good, ends) = encode_log(&sample_payloads());
        let (after, _) = encode_log(&[b"written after the damage".to_vec()]);
        let with_run = |count: usize| {
            let mut log = good.clone();
            log.extend(verifying_headers(64 << 10, count));
            log.extend_from_slice(&after);
            log
        };
        let crafted = with_run((64 << 10) / HEADER_LEN - 1);
        let spans: Vec<Span> = scan_wal(&Bytes::from(crafted.clone())).collect();
        assert_eq!(
            spans.iter().map(Span::len).sum::<u64>(),
            crafted.len() as u64
        );
        let records = spans
            .iter()
            .filter(|s| matches!(s, Span::Record { .. }))
            .count();
        assert_eq!(
            records,
            ends.len(),
            "the record after the run is not reached"
        );
        let Some(Span::Damaged { offset, why, .. }) = spans.last() else {
            panic!("{:?}", spans.last());
        };
        assert_eq!(*why, BadRecord::NotSearched);
        assert!(*offset < (crafted.len() - after.len()) as u64);
        let err = parse(&crafted).unwrap_err().to_string();
        assert!(err.contains("may not be a torn tail"), "{err}");

        // Three such headers: each checksums the run once, within the bound, and the
        // search finds the record after them.
        let few = with_run(3);
        let spans: Vec<Span> = scan_wal(&Bytes::from(few.clone())).collect();
        assert!(matches!(
            spans.last(),
            Some(Span::Record { payload, .. }) if payload[..] == after[HEADER_LEN..]
        ));
        assert_corruption_at(parse(&few), *ends.last().unwrap());
    }

    #[test]
    fn unknown_type_and_oversized_length_are_bad_records() {
        // Valid header checksum, type 2.
        let mut log = Vec::new();
        encode_record(b"abc", &mut log);
        log[8] = 2;
        let hcrc = crc32fast::hash(&log[0..9]);
        LittleEndian::write_u32(&mut log[9..13], hcrc);
        assert_eq!(check_record(&log, 0), Err(BadRecord::UnknownType(2)));
        // Alone at the end it is a tail; with a record after it, corruption.
        assert_eq!(parse(&log).unwrap().torn_tail_bytes, log.len() as u64);
        encode_record(b"after", &mut log);
        assert_corruption_at(parse(&log), 0);

        // Valid header claiming 4 GiB - 1 in a 13-byte file: refused, nothing allocated.
        let mut header = vec![0u8; HEADER_LEN];
        LittleEndian::write_u32(&mut header[4..8], u32::MAX);
        header[8] = TYPE_FULL;
        let hcrc = crc32fast::hash(&header[0..9]);
        LittleEndian::write_u32(&mut header[9..13], hcrc);
        assert_eq!(
            check_record(&header, 0),
            Err(BadRecord::TooLong(u32::MAX as usize))
        );
        let mut file = Vec::new();
        encode_record(b"before", &mut file);
        file.extend_from_slice(&header);
        let replay = parse(&file).unwrap();
        assert_eq!(replay.records.len(), 1);
        assert_eq!(replay.torn_tail_bytes, HEADER_LEN as u64);
        encode_record(b"after", &mut file);
        assert_corruption_at(parse(&file), HEADER_LEN + 6);

        // A length under the limit but past the end of file is a torn tail.
        LittleEndian::write_u32(&mut header[4..8], 200 << 20);
        let hcrc = crc32fast::hash(&header[0..9]);
        LittleEndian::write_u32(&mut header[9..13], hcrc);
        assert_eq!(check_record(&header, 0), Err(BadRecord::PayloadCutOff));
        let mut file = Vec::new();
        encode_record(b"before", &mut file);
        file.extend_from_slice(&header);
        let replay = parse(&file).unwrap();
        assert_eq!(replay.records.len(), 1);
        assert_eq!(replay.torn_tail_bytes, HEADER_LEN as u64);
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let result = read_wal(&OsFileSystem, &dir.path().join("000009.wal"));
        assert!(matches!(result, Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn records_round_trip_through_the_os_file_system(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..2000), 0..20)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let fs = OsFileSystem;
            let path = dir.path().join("000001.wal");
            let mut wal = WalWriter::new(fs.create(&path).unwrap());
            for p in &payloads {
                wal.add_record(p).unwrap();
            }
            wal.sync().unwrap();
            let written = wal.bytes_written();
            drop(wal);
            let replay = read_wal(&fs, &path).unwrap();
            prop_assert_eq!(payloads_of(&replay), payloads);
            prop_assert_eq!(replay.valid_len, written);
            prop_assert_eq!(replay.torn_tail_bytes, 0);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse(&bytes);
        }

        /// Damage anywhere never yields a wrong record: the result is a prefix of what
        /// was written, or corruption.
        #[test]
        fn damaged_logs_yield_a_prefix_or_corruption(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let payloads = sample_payloads();
            let (mut log, _) = encode_log(&payloads);
            for (at, mask) in flips {
                let i = at.index(log.len());
                log[i] ^= mask;
            }
            if truncate {
                log.truncate(cut.index(log.len()));
            }
            match parse(&log) {
                Ok(replay) => {
                    let got = payloads_of(&replay);
                    prop_assert!(got.len() <= payloads.len());
                    prop_assert_eq!(&got[..], &payloads[..got.len()]);
                }
                Err(Error::Corruption { file, .. }) => prop_assert_eq!(file, path()),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}
