//! The manifest is the durable record of which tables make up the store: after a
//! crash, the store is exactly the tables the manifest lists plus the replayed WAL.
//!
//! It is one small file, `MANIFEST`, rewritten whole whenever the set of tables
//! changes (after a flush or a compaction). The rewrite is atomic: the new state is
//! written to `MANIFEST.tmp`, fsynced, renamed over `MANIFEST`, and the directory is
//! fsynced so the rename itself survives a crash. A reader therefore sees the old
//! manifest or the new one, never a mix; a `MANIFEST.tmp` left by a crash is ignored.
//!
//! # Format (version 2; version 1 is still read)
//!
//! All integers little-endian.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "BKVMANIF"
//! 8       4     format version (2; or 1, written by earlier builds)
//! 12      8     next_file_number   the next number to give a table or log
//! 20      8     last_sequence      every table entry has seq <= this
//! 28      8     wal_number         the oldest log still needed: open replays every
//!                                  {n:06}.wal with n >= wal_number, oldest first
//! 36      4     table_count
//! 40      ...   table_count table records:
//!
//!               +-----------+------------+--------------+-------------+-------------+
//!               | level u32 | number u64 | file_size u64| entries u64 | max_seq u64 |
//!               +-----------+------------+--------------+-------------+-------------+
//!               | data_size u64 (version 2 only) |
//!               +--------------------------------+
//!               | smallest_len u32 | smallest | largest_len u32 | largest |
//!               +------------------+----------+-----------------+---------+
//!
//! end-4   4     CRC-32 (crc32fast, IEEE) of every byte before it
//! ```
//!
//! Tables are listed in the order the store gave them (for level 0, the store's
//! newest-first order is preserved).
//!
//! Version 2 adds each table's `data_size` (the bytes of its data blocks, what level
//! sizing counts), so that with its key range, size, entries and `max_seq` the
//! manifest holds everything a version needs to place lookups and plan compactions,
//! and open need read no table file (tables are opened on first use). A version-1
//! manifest decodes with `data_size` unknown (`None`); open then opens those tables
//! to learn it, and the next manifest written is version 2.
//! [`ManifestState::encode`] writes version 2 when every table's `data_size` is
//! known (always, for a state a store writes), else version 1.
//!
//! # Validation
//!
//! [`ManifestState::decode`] checks, in order: the length can hold the fixed fields,
//! the magic, the checksum, the version, the table count against the bytes present
//! (each table takes at least 44 bytes, 52 in version 2) before allocating, every key length against the
//! bytes that remain, that no byte follows the last table, and the state's invariants:
//! `next_file_number <= MAX_FILE_NUMBER` and `last_sequence <= MAX_SEQ` (ceilings no
//! store reaches, so that counting on from them cannot overflow), `level < MAX_LEVELS`,
//! `smallest <= largest`, table numbers unique and below `next_file_number`,
//! `wal_number` below `next_file_number` and not a table's number, and every table's
//! `max_seq <= last_sequence`. Any failure is [`Error::Corruption`]
//! naming the file. [`write_manifest`] refuses a state that breaks an invariant
//! ([`Error::InvalidArgument`]) rather than make it durable.

use std::collections::HashSet;
use std::io;
use std::path::Path;

use byteorder::{ByteOrder, LittleEndian};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::filename::{manifest_path, manifest_tmp_path, MAX_FILE_NUMBER};
use crate::fs::FileSystem;
use crate::types::{SeqNo, MAX_SEQ};

/// The first eight bytes of every manifest.
pub const MAGIC: [u8; 8] = *b"BKVMANIF";

/// The format version this code writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format version this code reads (no per-table data size).
pub const FORMAT_VERSION_V1: u32 = 1;

/// Levels are numbered `0..MAX_LEVELS`.
pub const MAX_LEVELS: u32 = 16;

/// Magic, version, next_file_number, last_sequence, wal_number, table_count.
const HEADER_LEN: usize = 8 + 4 + 8 + 8 + 8 + 4;
/// The trailing checksum.
const CRC_LEN: usize = 4;
/// A version-1 table record with two empty keys.
const MIN_TABLE_LEN_V1: usize = 4 + 8 + 8 + 8 + 8 + 4 + 4;
/// A version-2 table record with two empty keys (adds `data_size`).
const MIN_TABLE_LEN: usize = MIN_TABLE_LEN_V1 + 8;

/// One live table as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    /// The level the table sits in (`0..MAX_LEVELS`).
    pub level: u32,
    /// The table's file number: its file is `{number:06}.sst`.
    pub number: u64,
    /// The table file's size in bytes.
    pub file_size: u64,
    /// The smallest user key in the table.
    pub smallest: Bytes,
    /// The largest user key in the table.
    pub largest: Bytes,
    /// Entries in the table, tombstones included.
    pub entries: u64,
    /// The highest sequence number in the table.
    pub max_seq: SeqNo,
    /// The bytes of the table's data blocks (`None`: read from a version-1 manifest,
    /// which did not record it).
    pub data_size: Option<u64>,
}

/// The durable state of a store: its live tables and the counters recovery resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestState {
    /// The next number to give a new table or log file.
    pub(crate) next_file_number: u64,
    /// The highest sequence number in any table; WAL replay continues above it.
    pub(crate) last_sequence: SeqNo,
    /// The oldest write-ahead log still needed: every log numbered at or above it holds
    /// writes no table holds yet, and open replays them all, oldest first.
    pub(crate) wal_number: u64,
    /// The live tables, in the store's order.
    pub(crate) tables: Vec<TableMeta>,
}

impl ManifestState {
    /// A state with the given counters and tables.
    pub fn new(
        next_file_number: u64,
        last_sequence: SeqNo,
        wal_number: u64,
        tables: Vec<TableMeta>,
    ) -> ManifestState {
        ManifestState {
            next_file_number,
            last_sequence,
            wal_number,
            tables,
        }
    }

    /// The next number to give a new table or log file.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// The highest sequence number recorded.
    pub fn last_sequence(&self) -> SeqNo {
        self.last_sequence
    }

    /// The oldest write-ahead log still needed (logs below it are retired; open
    /// replays this one and every later one).
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// The live tables.
    pub fn tables(&self) -> &[TableMeta] {
        &self.tables
    }

    /// The manifest file's bytes for this state: version 2 if every table's data
    /// size is known, else version 1 (which does not record it).
    pub fn encode(&self) -> Vec<u8> {
        let sizes: Option<Vec<u64>> = self.tables.iter().map(|t| t.data_size).collect();
        let (version, min_len) = match sizes {
            Some(_) => (FORMAT_VERSION, MIN_TABLE_LEN),
            None => (FORMAT_VERSION_V1, MIN_TABLE_LEN_V1),
        };
        let keys: usize = self
            .tables
            .iter()
            .map(|t| min_len + t.smallest.len() + t.largest.len())
            .sum();
        let mut out = Vec::with_capacity(HEADER_LEN + keys + CRC_LEN);
        out.extend_from_slice(&MAGIC);
        put_u32(&mut out, version);
        put_u64(&mut out, self.next_file_number);
        put_u64(&mut out, self.last_sequence);
        put_u64(&mut out, self.wal_number);
        put_u32(&mut out, self.tables.len() as u32);
        for t in &self.tables {
            put_u32(&mut out, t.level);
            put_u64(&mut out, t.number);
            put_u64(&mut out, t.file_size);
            put_u64(&mut out, t.entries);
            put_u64(&mut out, t.max_seq);
            if let (FORMAT_VERSION, Some(size)) = (version, t.data_size) {
                put_u64(&mut out, size);
            }
            put_u32(&mut out, t.smallest.len() as u32);
            out.extend_from_slice(&t.smallest);
            put_u32(&mut out, t.largest.len() as u32);
            out.extend_from_slice(&t.largest);
        }
        let crc = crc32fast::hash(&out);
        put_u32(&mut out, crc);
        out
    }

    /// Parses and validates manifest bytes; `path` names the file in errors.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<ManifestState> {
        let corrupt = |reason: String| Error::corruption(path, format!("manifest: {reason}"));
        if bytes.len() < HEADER_LEN + CRC_LEN {
            return Err(corrupt(format!(
                "{} bytes is shorter than the {}-byte minimum",
                bytes.len(),
                HEADER_LEN + CRC_LEN
            )));
        }
        if bytes[..8] != MAGIC {
            return Err(corrupt("bad magic: not a bloomkv manifest".into()));
        }
        let (body, crc) = bytes.split_at(bytes.len() - CRC_LEN);
        let stored = LittleEndian::read_u32(crc);
        let actual = crc32fast::hash(body);
        if stored != actual {
            return Err(corrupt(format!(
                "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }

        let mut r = Cursor { buf: body, pos: 8 };
        let version = r.u32().ok_or_else(|| corrupt("truncated header".into()))?;
        let min_len = match version {
            FORMAT_VERSION => MIN_TABLE_LEN,
            FORMAT_VERSION_V1 => MIN_TABLE_LEN_V1,
            _ => {
                return Err(corrupt(format!(
                    "unsupported format version {version} (this build reads \
                     {FORMAT_VERSION_V1} and {FORMAT_VERSION})"
                )))
            }
        };
        let header = (|| Some((r.u64()?, r.u64()?, r.u64()?, r.u32()?)))();
        let (next_file_number, last_sequence, wal_number, count) =
            header.ok_or_else(|| corrupt("truncated header".into()))?;
        let count = count as usize;
        // Validate the count before it sizes an allocation.
        if count > r.remaining() / min_len {
            return Err(corrupt(format!(
                "table count {count} cannot fit in {} bytes",
                r.remaining()
            )));
        }
        let mut tables = Vec::with_capacity(count);
        for i in 0..count {
            let table = r
                .table(version == FORMAT_VERSION)
                .ok_or_else(|| corrupt(format!("table record {i} runs past the end")))?;
            tables.push(table);
        }
        if r.remaining() != 0 {
            return Err(corrupt(format!(
                "{} unexpected bytes after the last table",
                r.remaining()
            )));
        }
        let state = ManifestState {
            next_file_number,
            last_sequence,
            wal_number,
            tables,
        };
        state.validate().map_err(corrupt)?;
        Ok(state)
    }

    /// Checks the invariants listed in the module docs; the reason on failure.
    fn validate(&self) -> std::result::Result<(), String> {
        if self.next_file_number > MAX_FILE_NUMBER {
            return Err(format!(
                "next file number {} is above the ceiling {MAX_FILE_NUMBER}",
                self.next_file_number
            ));
        }
        if self.last_sequence > MAX_SEQ {
            return Err(format!(
                "last sequence {} is above the ceiling {MAX_SEQ}",
                self.last_sequence
            ));
        }
        if self.wal_number >= self.next_file_number {
            return Err(format!(
                "wal number {} is not below next file number {}",
                self.wal_number, self.next_file_number
            ));
        }
        let mut numbers = HashSet::with_capacity(self.tables.len());
        for (i, t) in self.tables.iter().enumerate() {
            let what = format!("table {i} (file {})", t.number);
            if t.level >= MAX_LEVELS {
                return Err(format!("{what}: level {} >= {MAX_LEVELS}", t.level));
            }
            if t.smallest > t.largest {
                return Err(format!("{what}: smallest key is above largest key"));
            }
            if t.number >= self.next_file_number {
                return Err(format!(
                    "{what}: number is not below next file number {}",
                    self.next_file_number
                ));
            }
            if t.number == self.wal_number {
                return Err(format!("{what}: number is the wal number"));
            }
            if !numbers.insert(t.number) {
                return Err(format!("{what}: number listed twice"));
            }
            if t.max_seq > self.last_sequence {
                return Err(format!(
                    "{what}: max_seq {} is above last_sequence {}",
                    t.max_seq, self.last_sequence
                ));
            }
            if t.smallest.len() > u32::MAX as usize || t.largest.len() > u32::MAX as usize {
                return Err(format!("{what}: key longer than 4 GiB"));
            }
        }
        if self.tables.len() > u32::MAX as usize {
            return Err(format!("{} tables is too many", self.tables.len()));
        }
        Ok(())
    }
}

/// A bounds-checked little-endian reader; every read is `None` past the end.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.remaining() {
            return None;
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(LittleEndian::read_u32)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(LittleEndian::read_u64)
    }

    fn key(&mut self) -> Option<Bytes> {
        let len = self.u32()? as usize;
        self.take(len).map(Bytes::copy_from_slice)
    }

    /// One table record (`with_data_size`: a version-2 record).
    fn table(&mut self, with_data_size: bool) -> Option<TableMeta> {
        let (level, number, file_size, entries, max_seq) = (
            self.u32()?,
            self.u64()?,
            self.u64()?,
            self.u64()?,
            self.u64()?,
        );
        let data_size = if with_data_size {
            Some(self.u64()?)
        } else {
            None
        };
        Some(TableMeta {
            level,
            number,
            file_size,
            entries,
            max_seq,
            data_size,
            smallest: self.key()?,
            largest: self.key()?,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Makes `state` the directory's manifest, atomically: write `MANIFEST.tmp`, fsync
/// it, rename it over `MANIFEST`, fsync the directory.
///
/// A state that breaks an invariant is refused with [`Error::InvalidArgument`] and
/// nothing is written. On an I/O error the previous `MANIFEST` is intact (a crash at
/// any point leaves the old or the new one).
pub fn write_manifest(fs: &dyn FileSystem, dir: &Path, state: &ManifestState) -> Result<()> {
    state
        .validate()
        .map_err(|reason| Error::InvalidArgument(format!("manifest state: {reason}")))?;
    let bytes = state.encode();
    crate::fs::replace_durably(fs, &manifest_tmp_path(dir), &manifest_path(dir), &bytes)?;
    Ok(())
}

/// Reads the directory's manifest: `None` if there is none (a new store), the state if
/// it validates, [`Error::Corruption`] naming `MANIFEST` if not. A `MANIFEST.tmp` is
/// never read.
pub fn read_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestState>> {
    let path = manifest_path(dir);
    match fs.read_all(&path) {
        Ok(bytes) => ManifestState::decode(&bytes, &path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::sync::{Arc, Mutex};

    use proptest::prelude::*;

    use super::*;
    use crate::filename::{MANIFEST, MANIFEST_TMP};
    use crate::fs::{FileLock, OsFileSystem, RandomAccessFile, WritableFile};

    fn path() -> &'static Path {
        Path::new("MANIFEST")
    }

    fn table(level: u32, number: u64, smallest: &str, largest: &str) -> TableMeta {
        TableMeta {
            level,
            number,
            file_size: 4096 * number,
            smallest: Bytes::copy_from_slice(smallest.as_bytes()),
            largest: Bytes::copy_from_slice(largest.as_bytes()),
            entries: 100 + number,
            max_seq: 10 * number,
            data_size: Some(4000 * number),
        }
    }

    fn sample() -> ManifestState {
        ManifestState::new(
            12,
            500,
            11,
            vec![
                table(0, 9, "b", "y"),
                table(0, 7, "a", "z"),
                table(1, 3, "", "m"), // the empty key is a key
                table(1, 4, "n", "n"),
                TableMeta {
                    smallest: Bytes::from_static(&[0, 0xff, 7]),
                    largest: Bytes::from_static(&[0xff; 40]),
                    ..table(6, 5, "", "")
                },
            ],
        )
    }

    fn assert_corrupt(bytes: &[u8]) -> String {
        match ManifestState::decode(bytes, path()) {
            Err(Error::Corruption { file, reason }) => {
                assert_eq!(file, path());
                reason
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    /// Re-seals `body` (everything but the checksum) with a valid checksum, to test
    /// the checks that run after the checksum.
    fn seal(mut body: Vec<u8>) -> Vec<u8> {
        let crc = crc32fast::hash(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    fn unsealed(state: &ManifestState) -> Vec<u8> {
        let mut bytes = state.encode();
        bytes.truncate(bytes.len() - CRC_LEN);
        bytes
    }

    #[test]
    fn state_round_trips() {
        for state in [sample(), ManifestState::new(2, 0, 1, Vec::new())] {
            let decoded = ManifestState::decode(&state.encode(), path()).unwrap();
            assert_eq!(decoded, state);
        }
    }

    #[test]
    fn header_layout_is_as_documented() {
        let bytes = sample().encode();
        assert_eq!(&bytes[0..8], b"BKVMANIF");
        assert_eq!(LittleEndian::read_u32(&bytes[8..12]), 2);
        assert_eq!(LittleEndian::read_u64(&bytes[12..20]), 12);
        assert_eq!(LittleEndian::read_u64(&bytes[20..28]), 500);
        assert_eq!(LittleEndian::read_u64(&bytes[28..36]), 11);
        assert_eq!(LittleEndian::read_u32(&bytes[36..40]), 5);
        // First table: level 0, number 9.
        assert_eq!(LittleEndian::read_u32(&bytes[40..44]), 0);
        assert_eq!(LittleEndian::read_u64(&bytes[44..52]), 9);
        // Its data size follows max_seq (version 2).
        assert_eq!(LittleEndian::read_u64(&bytes[76..84]), 36_000);
        let n = bytes.len();
        assert_eq!(
            LittleEndian::read_u32(&bytes[n - 4..]),
            crc32fast::hash(&bytes[..n - 4])
        );
    }

    #[test]
    fn every_single_byte_flip_is_corruption() {
        let bytes = sample().encode();
        for pos in 0..bytes.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[pos] ^= mask;
                assert_corrupt(&bad);
            }
        }
    }

    #[test]
    fn every_truncation_and_any_appended_garbage_is_corruption() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert_corrupt(&bytes[..cut]);
        }
        for garbage in [&[0u8][..], &[0; 4], &[1, 2, 3, 4, 5, 6, 7, 8, 9]] {
            let mut bad = bytes.clone();
            bad.extend_from_slice(garbage);
            assert_corrupt(&bad);
        }
    }

    #[test]
    fn hostile_counts_and_lengths_are_refused_before_allocation() {
        // A table count of u32::MAX with a valid checksum in a 44-byte file.
        let mut body = unsealed(&ManifestState::new(2, 0, 1, Vec::new()));
        body[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(assert_corrupt(&seal(body)).contains("table count"));

        // A key length of 4 GiB - 1 with a valid checksum.
        let state = ManifestState::new(2, 10, 1, vec![table(0, 0, "a", "b")]);
        let mut body = unsealed(&state);
        let smallest_len_at = HEADER_LEN + 4 + 8 * 5;
        body[smallest_len_at..smallest_len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(assert_corrupt(&seal(body)).contains("runs past the end"));
    }

    #[test]
    fn broken_invariants_are_corruption_even_with_a_valid_checksum() {
        let cases: Vec<(ManifestState, &str)> = vec![
            (
                ManifestState::new(20, 500, 11, vec![table(MAX_LEVELS, 3, "a", "b")]),
                "level",
            ),
            (
                ManifestState::new(20, 500, 11, vec![table(1, 3, "b", "a")]),
                "smallest",
            ),
            (
                ManifestState::new(
                    20,
                    500,
                    11,
                    vec![table(1, 3, "a", "b"), table(2, 3, "c", "d")],
                ),
                "twice",
            ),
            (
                ManifestState::new(20, 500, 11, vec![table(1, 20, "a", "b")]),
                "next file number",
            ),
            (ManifestState::new(11, 500, 11, Vec::new()), "wal number"),
            (
                ManifestState::new(20, 500, 11, vec![table(1, 11, "a", "b")]),
                "wal number",
            ),
            (
                ManifestState::new(20, 29, 11, vec![table(1, 3, "a", "b")]),
                "max_seq",
            ),
            // Past the ceilings: counting on from them could overflow.
            (ManifestState::new(u64::MAX, 500, 11, Vec::new()), "ceiling"),
            (
                ManifestState::new(MAX_FILE_NUMBER + 1, 500, 11, Vec::new()),
                "ceiling",
            ),
            (ManifestState::new(20, u64::MAX, 11, Vec::new()), "ceiling"),
            (
                ManifestState::new(20, MAX_SEQ + 1, 11, Vec::new()),
                "ceiling",
            ),
        ];
        for (state, needle) in cases {
            let reason = assert_corrupt(&state.encode());
            assert!(
                reason.contains(needle),
                "{reason:?} should mention {needle:?}"
            );
            let dir = tempfile::tempdir().unwrap();
            let result = write_manifest(&OsFileSystem, dir.path(), &state);
            assert!(
                matches!(result, Err(Error::InvalidArgument(_))),
                "{result:?}"
            );
            assert!(!dir.path().join(MANIFEST).exists());
        }
    }

    #[test]
    fn bad_magic_and_unknown_version_are_named() {
        let mut bytes = sample().encode();
        bytes[0] = b'X';
        assert!(assert_corrupt(&bytes).contains("magic"));
        let mut body = unsealed(&sample());
        body[8..12].copy_from_slice(&3u32.to_le_bytes());
        assert!(assert_corrupt(&seal(body)).contains("version 3"));
    }

    /// A version-1 manifest (no data sizes) still decodes, with the sizes unknown;
    /// such a state encodes as version 1 again, and one with every size known as 2.
    #[test]
    fn version_1_manifests_still_decode() {
        let mut old = sample();
        for t in &mut old.tables {
            t.data_size = None;
        }
        let bytes = old.encode();
        assert_eq!(bytes[8..12], 1u32.to_le_bytes());
        assert_eq!(bytes.len() + 8 * old.tables.len(), sample().encode().len());
        let decoded = ManifestState::decode(&bytes, path()).unwrap();
        assert_eq!(decoded, old);
        assert!(decoded.tables().iter().all(|t| t.data_size.is_none()));
        assert_eq!(sample().encode()[8..12], 2u32.to_le_bytes());
    }

    #[test]
    fn write_then_read_through_the_os_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), None);
        write_manifest(&fs, dir.path(), &sample()).unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), Some(sample()));
        // A rewrite replaces the state and leaves no temp file.
        let next = ManifestState::new(13, 600, 12, vec![table(1, 3, "a", "b")]);
        write_manifest(&fs, dir.path(), &next).unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), Some(next));
        assert!(!dir.path().join(MANIFEST_TMP).exists());
    }

    #[test]
    fn leftover_temp_manifest_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        // A crash mid-write before any manifest existed: still a fresh directory.
        fs::write(dir.path().join(MANIFEST_TMP), b"half a manifest").unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), None);
        write_manifest(&fs, dir.path(), &sample()).unwrap();
        // A crash mid-way through the next write: the old manifest still reads.
        fs::write(dir.path().join(MANIFEST_TMP), vec![0xee; 300]).unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), Some(sample()));
    }

    #[test]
    fn corrupt_manifest_on_disk_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        write_manifest(&fs, dir.path(), &sample()).unwrap();
        let path = dir.path().join(MANIFEST);
        let mut bytes = fs::read(&path).unwrap();
        bytes[50] ^= 1;
        fs::write(&path, bytes).unwrap();
        match read_manifest(&fs, dir.path()) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    /// Records every operation and can fail one of them.
    #[derive(Debug, Default)]
    struct RecordingFs {
        ops: Arc<Mutex<Vec<String>>>,
        fail: Option<&'static str>,
    }

    struct RecordingFile {
        inner: Box<dyn WritableFile>,
        ops: Arc<Mutex<Vec<String>>>,
        fail: Option<&'static str>,
    }

    fn name(path: &Path) -> String {
        path.file_name().unwrap().to_string_lossy().into_owned()
    }

    impl RecordingFs {
        fn record(&self, op: &'static str, what: String) -> io::Result<()> {
            self.ops.lock().unwrap().push(format!("{op} {what}"));
            if self.fail == Some(op) {
                return Err(io::Error::other(format!("injected {op} failure")));
            }
            Ok(())
        }
    }

    impl WritableFile for RecordingFile {
        fn append(&mut self, buf: &[u8]) -> io::Result<()> {
            self.ops.lock().unwrap().push("append".into());
            if self.fail == Some("append") {
                // A short write, then the error.
                self.inner.append(&buf[..buf.len() / 2])?;
                return Err(io::Error::other("injected append failure"));
            }
            self.inner.append(buf)
        }

        fn sync(&mut self) -> io::Result<()> {
            self.ops.lock().unwrap().push("sync".into());
            if self.fail == Some("sync") {
                return Err(io::Error::other("injected sync failure"));
            }
            self.inner.sync()
        }
    }

    impl FileSystem for RecordingFs {
        fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
            self.record("create", name(path))?;
            Ok(Box::new(RecordingFile {
                inner: OsFileSystem.create(path)?,
                ops: Arc::clone(&self.ops),
                fail: self.fail,
            }))
        }
        fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
            OsFileSystem.open_append(path)
        }
        fn open_random(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
            OsFileSystem.open_random(path)
        }
        fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
            OsFileSystem.read_all(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.record("rename", format!("{} {}", name(from), name(to)))?;
            OsFileSystem.rename(from, to)
        }
        fn remove(&self, path: &Path) -> io::Result<()> {
            OsFileSystem.remove(path)
        }
        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            self.record("sync_dir", String::new())?;
            OsFileSystem.sync_dir(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
            OsFileSystem.create_dir_all(dir)
        }
        fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
            OsFileSystem.list(dir)
        }
        fn exists(&self, path: &Path) -> bool {
            OsFileSystem.exists(path)
        }
        fn lock(&self, path: &Path) -> io::Result<FileLock> {
            Ok(FileLock::detached(path))
        }
    }

    #[test]
    fn write_is_temp_then_sync_then_rename_then_dir_sync() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RecordingFs::default();
        write_manifest(&fs, dir.path(), &sample()).unwrap();
        assert_eq!(
            *fs.ops.lock().unwrap(),
            vec![
                "create MANIFEST.tmp",
                "append",
                "sync",
                "rename MANIFEST.tmp MANIFEST",
                "sync_dir ",
            ]
        );
    }

    #[test]
    fn a_failed_write_leaves_the_previous_manifest() {
        for fail in ["create", "append", "sync", "rename"] {
            let dir = tempfile::tempdir().unwrap();
            write_manifest(&OsFileSystem, dir.path(), &sample()).unwrap();
            let fs = RecordingFs {
                fail: Some(fail),
                ..RecordingFs::default()
            };
            let next = ManifestState::new(13, 600, 12, Vec::new());
            assert!(matches!(
                write_manifest(&fs, dir.path(), &next),
                Err(Error::Io(_))
            ));
            let on_disk = read_manifest(&OsFileSystem, dir.path()).unwrap();
            assert_eq!(on_disk, Some(sample()), "after a failed {fail}");
        }
    }

    fn table_strategy() -> impl Strategy<Value = (u32, Vec<u8>, Vec<u8>, u64, u64, u64)> {
        let key = || proptest::collection::vec(any::<u8>(), 0..24);
        (
            0..MAX_LEVELS,
            key(),
            key(),
            any::<u64>(),
            any::<u64>(),
            0u64..1000,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_states_round_trip(
            raw in proptest::collection::vec(table_strategy(), 0..12),
            extra_files in 1u64..1000,
            extra_seq in 0u64..1000,
            with_sizes in any::<bool>(),
        ) {
            // A state is written as version 2 only when every table's data size is
            // known, and as version 1 (no sizes) otherwise, so a round trip keeps
            // either all sizes or none.
            let tables: Vec<TableMeta> = raw
                .into_iter()
                .enumerate()
                .map(|(i, (level, a, b, size, entries, max_seq))| {
                    let (smallest, largest) = if a <= b { (a, b) } else { (b, a) };
                    TableMeta {
                        level,
                        number: i as u64,
                        file_size: size,
                        smallest: Bytes::from(smallest),
                        largest: Bytes::from(largest),
                        entries,
                        max_seq,
                        data_size: with_sizes.then_some(size / 2),
                    }
                })
                .collect();
            let wal_number = tables.len() as u64;
            let state = ManifestState::new(wal_number + extra_files, 1000 + extra_seq, wal_number, tables);
            let decoded = ManifestState::decode(&state.encode(), path()).unwrap();
            prop_assert_eq!(decoded, state);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = ManifestState::decode(&bytes, path());
        }

        /// Random bodies behind a valid magic, version and checksum reach the parser.
        #[test]
        fn sealed_random_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            bytes.extend_from_slice(&body);
            let _ = ManifestState::decode(&seal(bytes), path());
        }
    }
}
