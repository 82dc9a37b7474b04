//! Recovery: turning the write-ahead logs a stopped store left behind back into a
//! memtable, under the policy the user chose for bytes that are not valid records.
//!
//! The logs are replayed oldest first. Each log is mapped by `wal::scan_wal` into
//! records that verify and damaged spans; then every record must also decode as a
//! write batch whose first sequence number is above every sequence number already
//! recovered (the tables' `last_sequence` from the manifest, then each record
//! replayed). A record that fails that test is damage too: it is a stale record of an
//! older log left in a reused file, and replaying it would put an old value above a
//! newer one.
//!
//! ```text
//!  000007.wal  [rec 41][rec 42][rec 43][##damage##][rec 44][rec 45]
//!  000008.wal  [rec 46][rec 47][##tail (cut, zeros, garbage, stale records)##]
//!
//!  TolerateCorruptTail  000007: Corruption at the damage (valid records follow it)
//!  PointInTime          keeps 41..43; drops the rest of 000007 and all of 000008
//!  AbsoluteConsistency  Corruption at the first damaged byte
//!  SkipCorrupted        keeps 41..47; drops the damage and the tail
//! ```
//!
//! What each [`WalRecovery`] mode keeps and drops is documented on the enum. Whatever
//! is dropped is listed in the [`RecoveryReport`] (by log, offset, length and reason)
//! and counted in `DbStats::wal_tail_bytes_dropped`. A store that dropped anything
//! never appends to the damaged log: the recovered writes go to a table and a fresh
//! log starts (see `Db::open`).

use std::fmt;
use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian};
use bytes::Bytes;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::memtable::Memtable;
use crate::options::WalRecovery;
use crate::types::{KeyspaceId, SeqNo};
use crate::wal::{self, BadRecord, Span};
use crate::write_batch::{self, DecodedBatch};

/// A stretch of a log that recovery did not replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedSpan {
    /// The log's file number (`{number:06}.wal`).
    pub wal: u64,
    /// Offset of the first dropped byte.
    pub offset: u64,
    /// Bytes dropped.
    pub len: u64,
    /// Why.
    pub reason: String,
}

/// What recovery did with one log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WalOutcome {
    /// The log's file number.
    pub number: u64,
    /// Its length in bytes.
    pub file_len: u64,
    /// Records replayed from it.
    pub records: u64,
}

/// What opening a store recovered from its logs and what it dropped
/// (`Db::recovery_report`; `bloomkv verify` shows one per mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// The mode applied.
    pub mode: WalRecovery,
    /// Each log replayed, oldest first.
    pub wals: Vec<WalOutcome>,
    /// Every stretch not replayed, in file order.
    pub dropped: Vec<DroppedSpan>,
    /// Whether the replayed writes stayed in the memtable with the newest log reopened
    /// for appending (`true`), or were written to a level-0 table with a fresh log
    /// started (`false`).
    pub kept_in_memtable: bool,
    /// Table files the manifest does not name, found at open and moved into `lost/`
    /// (where they are now). Open never deletes a table it cannot prove is garbage:
    /// such a table is usually the output of a flush or compaction cut short by a
    /// crash, whose entries the named tables and logs still hold.
    pub tables_moved_aside: Vec<PathBuf>,
}

impl RecoveryReport {
    /// A report of a store that had no log to replay.
    pub fn empty(mode: WalRecovery) -> RecoveryReport {
        RecoveryReport {
            mode,
            wals: Vec::new(),
            dropped: Vec::new(),
            kept_in_memtable: false,
            tables_moved_aside: Vec::new(),
        }
    }

    /// Bytes of log not replayed.
    pub fn bytes_dropped(&self) -> u64 {
        self.dropped.iter().map(|d| d.len).sum()
    }

    /// Records replayed.
    pub fn records_replayed(&self) -> u64 {
        self.wals.iter().map(|w| w.records).sum()
    }

    /// Nothing was dropped.
    pub fn is_clean(&self) -> bool {
        self.dropped.is_empty()
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: replayed {} record(s) from {} log(s)",
            self.mode,
            self.records_replayed(),
            self.wals.len()
        )?;
        for moved in &self.tables_moved_aside {
            write!(
                f,
                "; a table the manifest does not name was moved to {}",
                moved.display()
            )?;
        }
        if self.is_clean() {
            return write!(f, ", dropped nothing");
        }
        write!(
            f,
            ", dropped {} byte(s) in {} stretch(es):",
            self.bytes_dropped(),
            self.dropped.len()
        )?;
        for d in &self.dropped {
            write!(
                f,
                "\n    {} offset {}: {} byte(s), {}",
                filename::wal_file_name(d.wal),
                d.offset,
                d.len,
                d.reason
            )?;
        }
        Ok(())
    }
}

/// Where replay sends a keyspace's writes: the keyspace, and the first log that holds
/// writes of it that its tables do not (its manifest's log number). Writes of a
/// keyspace not routed (a dropped one) are skipped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub keyspace: KeyspaceId,
    pub first_log: u64,
}

/// The logs' writes, recovered.
pub(crate) struct Replayed {
    /// Every replayed write of the default keyspace.
    pub memtable: Memtable,
    /// Every replayed write of each named keyspace routed, in the routes' order.
    pub named: Vec<(KeyspaceId, Memtable)>,
    /// The highest sequence number of a valid record in the logs, replayed or not
    /// (point-in-time recovery drops valid records after damage), or the floor given
    /// if there was none: new writes number above it, so no write ever takes the
    /// number of a dropped record, which a log that comes back (a deletion a power
    /// loss undid, read by `repair`) could still hold.
    pub last_seq: SeqNo,
    /// What was replayed and dropped.
    pub report: RecoveryReport,
}

/// Whether open may keep the replayed writes as its live memtable and append to the
/// newest log: only when nothing was dropped (a log with a damaged tail must never be
/// appended to), the writes are smaller than a memtable, and the last session closed
/// cleanly with the newest log exactly as long as it is now (`mark`, see
/// [`ClosedMark`]).
pub(crate) fn can_keep(
    report: &RecoveryReport,
    memtable: &Memtable,
    memtable_size: usize,
    mark: Option<ClosedMark>,
) -> bool {
    let vouched = match (report.wals.last(), mark) {
        (Some(newest), Some(mark)) => mark.wal == newest.number && mark.wal_len == newest.file_len,
        _ => false,
    };
    vouched && report.is_clean() && memtable.approximate_size() < memtable_size
}

/// What a clean close leaves behind (the file `CLOSED`): the newest log and its length,
/// once every write in it was synced without error.
///
/// Replay reads the logs through the page cache. After a failed `fsync` the kernel may
/// have dropped a log's dirty pages and marked them clean: the bytes still read back
/// in this boot, but they are not on the device, and later syncs will not write them.
/// A store that kept such a log and appended to it would sync new, acknowledged
/// writes behind a hole that a power loss then reveals (refused as corruption, or the
/// new writes dropped as a tail). So open appends to a log only when this mark vouches
/// for it — the last session closed with no error and nothing was written since — and
/// otherwise writes the replayed writes to a table and starts a fresh log. Open
/// removes the mark before it accepts a write; a crash, a failed sync, or a failed
/// close leaves none.
///
/// ```text
///   offset  size  field
///   0       8     wal: the newest log's file number, little-endian
///   8       8     wal_len: its length in bytes at the close, little-endian
///   16      4     CRC-32 (IEEE) of bytes 0..16, little-endian
/// ```
///
/// A mark of any other length or checksum is ignored, as if there were none: the
/// store then takes the path that is always safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClosedMark {
    pub wal: u64,
    pub wal_len: u64,
}

/// Bytes of an encoded [`ClosedMark`].
const CLOSED_MARK_LEN: usize = 20;

impl ClosedMark {
    pub(crate) fn encode(self) -> [u8; CLOSED_MARK_LEN] {
        let mut out = [0u8; CLOSED_MARK_LEN];
        LittleEndian::write_u64(&mut out[0..8], self.wal);
        LittleEndian::write_u64(&mut out[8..16], self.wal_len);
        let crc = crc32fast::hash(&out[0..16]);
        LittleEndian::write_u32(&mut out[16..20], crc);
        out
    }

    /// The mark in `bytes`, or `None` if they are not one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<ClosedMark> {
        if bytes.len() != CLOSED_MARK_LEN
            || crc32fast::hash(&bytes[0..16]) != LittleEndian::read_u32(&bytes[16..20])
        {
            return None;
        }
        Some(ClosedMark {
            wal: LittleEndian::read_u64(&bytes[0..8]),
            wal_len: LittleEndian::read_u64(&bytes[8..16]),
        })
    }

    /// The mark in `dir`, if there is a valid one. Its length is checked before
    /// anything is read, so a stray file of that name costs nothing however large.
    pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Option<ClosedMark> {
        let file = fs.open_random(&filename::closed_path(dir)).ok()?;
        if file.len().ok()? != CLOSED_MARK_LEN as u64 {
            return None;
        }
        let mut bytes = [0u8; CLOSED_MARK_LEN];
        file.read_exact_at(&mut bytes, 0).ok()?;
        ClosedMark::decode(&bytes)
    }
}

/// One stretch of a log, classified.
enum Item {
    Valid(DecodedBatch),
    Invalid {
        offset: u64,
        len: u64,
        reason: String,
        /// The log's scan gave up searching for records in this stretch
        /// ([`wal::BadRecord::NotSearched`]): valid records may lie in it.
        unsearched: bool,
    },
}

/// Replays the logs `numbers` (ascending) of `dir` under `mode`. `floor` is the highest
/// sequence number already durable in tables: a record must start above it.
pub(crate) fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    numbers: &[u64],
    mode: WalRecovery,
    floor: SeqNo,
    routes: &[Route],
) -> Result<Replayed> {
    let memtable = Memtable::new();
    let named: Vec<(KeyspaceId, Memtable)> = routes
        .iter()
        .filter(|r| r.keyspace != KeyspaceId::DEFAULT)
        .map(|r| (r.keyspace, Memtable::new()))
        .collect();
    // The default keyspace takes every write of every log unless routed otherwise.
    let first_log = |keyspace: KeyspaceId| {
        routes
            .iter()
            .find(|r| r.keyspace == keyspace)
            .map(|r| r.first_log)
            .or((keyspace == KeyspaceId::DEFAULT).then_some(0))
    };
    let mut report = RecoveryReport::empty(mode);
    let mut last_seq = floor;
    // The highest sequence number of a valid record met, replayed or dropped.
    let mut seen_seq = floor;
    // Set once point-in-time recovery has met damage: nothing after it is replayed.
    let mut stopped = false;
    for (i, &number) in numbers.iter().enumerate() {
        let path = filename::wal_path(dir, number);
        let buf = Bytes::from(fs.read_all(&path)?);
        let mut outcome = WalOutcome {
            number,
            file_len: buf.len() as u64,
            records: 0,
        };
        if stopped {
            if !buf.is_empty() {
                seen_seq = seen_seq.max(highest_valid(&classify(&buf, &path, last_seq)));
                report.dropped.push(DroppedSpan {
                    wal: number,
                    offset: 0,
                    len: buf.len() as u64,
                    reason: "follows a damaged log (point-in-time recovery)".into(),
                });
            }
            report.wals.push(outcome);
            continue;
        }
        let items = classify(&buf, &path, last_seq);
        seen_seq = seen_seq.max(highest_valid(&items));
        let newest = i + 1 == numbers.len();
        let first_bad = items.iter().enumerate().find_map(|(b, it)| match it {
            Item::Invalid { offset, reason, .. } => Some((b, *offset, reason.clone())),
            Item::Valid(_) => None,
        });
        // How many items to replay, and what to drop.
        let mut keep_until = items.len();
        if let Some((b, offset, reason)) = first_bad {
            let at = |why: String| {
                Error::corruption(&path, format!("WAL record at offset {offset}: {why}"))
            };
            match mode {
                WalRecovery::AbsoluteConsistency => {
                    return Err(at(format!(
                        "{reason} (wal_recovery = AbsoluteConsistency refuses any damage)"
                    )));
                }
                WalRecovery::TolerateCorruptTail => {
                    let valid_after = items[b + 1..].iter().find_map(|it| match it {
                        Item::Valid(batch) => Some(batch.base_seq),
                        Item::Invalid { .. } => None,
                    });
                    if items[b..].iter().any(|it| {
                        matches!(
                            it,
                            Item::Invalid {
                                unsearched: true,
                                ..
                            }
                        )
                    }) {
                        // `reason` says where the search gave up (`classify`).
                        return Err(at(format!("{reason}, so this may not be a torn tail")));
                    }
                    if let Some(seq) = valid_after {
                        return Err(at(format!(
                            "{reason}; a valid record (sequence {seq}) follows it, so this \
                             is not a torn tail and dropping it would lose acknowledged writes"
                        )));
                    }
                    if !newest {
                        return Err(at(format!(
                            "{reason}, in a log that a newer log follows (it was synced \
                             before the newer one started, so this is not a torn tail)"
                        )));
                    }
                    keep_until = b;
                }
                WalRecovery::PointInTime => {
                    keep_until = b;
                    stopped = true;
                }
                WalRecovery::SkipCorrupted => {}
            }
            if keep_until < items.len() {
                // One span from the first bad byte to the end of the log.
                report.dropped.push(DroppedSpan {
                    wal: number,
                    offset,
                    len: buf.len() as u64 - offset,
                    reason,
                });
            }
        }
        for item in items.into_iter().take(keep_until) {
            match item {
                Item::Valid(batch) => {
                    last_seq = last_seq.max(batch.last_seq().unwrap_or(batch.base_seq));
                    outcome.records += 1;
                    for (seq, op) in batch.into_ops() {
                        let Some(first) = first_log(op.keyspace) else {
                            continue; // a dropped keyspace's write
                        };
                        if number < first {
                            continue; // in the keyspace's tables already
                        }
                        let mem = if op.keyspace == KeyspaceId::DEFAULT {
                            Some(&memtable)
                        } else {
                            named
                                .iter()
                                .find(|(id, _)| *id == op.keyspace)
                                .map(|(_, m)| m)
                        };
                        if let Some(mem) = mem {
                            mem.apply_op(seq, op.kind, op.key, op.value);
                        }
                    }
                }
                Item::Invalid {
                    offset,
                    len,
                    reason,
                    ..
                } => report.dropped.push(DroppedSpan {
                    wal: number,
                    offset,
                    len,
                    reason,
                }),
            }
        }
        report.wals.push(outcome);
    }
    Ok(Replayed {
        memtable,
        named,
        last_seq: last_seq.max(seen_seq),
        report,
    })
}

/// The highest sequence number of the valid records among `items` (0 if none).
fn highest_valid(items: &[Item]) -> SeqNo {
    items
        .iter()
        .filter_map(|it| match it {
            Item::Valid(batch) => Some(batch.last_seq().unwrap_or(batch.base_seq)),
            Item::Invalid { .. } => None,
        })
        .max()
        .unwrap_or(0)
}

/// Maps one log into valid batches and invalid stretches (adjacent invalid stretches
/// merged), checking each record's batch and sequence numbers against `floor`.
fn classify(buf: &Bytes, path: &Path, mut floor: SeqNo) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for span in wal::scan_wal(buf) {
        let (offset, len) = (span.offset(), span.len());
        let unsearched = matches!(
            span,
            Span::Damaged {
                why: BadRecord::NotSearched,
                ..
            }
        );
        let invalid = match span {
            Span::Record { payload, .. } => match write_batch::decode(&payload, path) {
                Ok(batch) if batch.base_seq > floor => {
                    floor = batch.last_seq().unwrap_or(floor);
                    items.push(Item::Valid(batch));
                    continue;
                }
                Ok(batch) => format!(
                    "record with sequence number {} not above {floor}: a stale record \
                     of an older log",
                    batch.base_seq
                ),
                Err(e) => format!("record does not decode: {e}"),
            },
            Span::Damaged { why, zeros, .. } if zeros => format!("zero-filled ({why})"),
            Span::Damaged { why, .. } => why.to_string(),
        };
        if let Some(Item::Invalid {
            offset: o,
            len: l,
            reason,
            unsearched: u,
        }) = items.last_mut()
        {
            if *o + *l == offset {
                *l += len;
                if unsearched && !*u {
                    *u = true;
                    *reason = format!("{reason}; then the log was {invalid}");
                }
                continue;
            }
        }
        items.push(Item::Invalid {
            offset,
            len,
            reason: invalid,
            unsearched,
        });
    }
    items
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::fs::mem::MemFileSystem;
    use crate::wal::encode_record;
    use crate::write_batch::WriteBatch;

    fn dir() -> PathBuf {
        PathBuf::from("/db")
    }

    /// A log of `n` one-put batches with sequence numbers from `first`; returns the
    /// bytes and each record's end offset.
    fn log(first: SeqNo, n: u64, tag: &str) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for i in 0..n {
            let mut b = WriteBatch::new();
            b.put(format!("k{:03}", first + i), format!("{tag}{}", first + i));
            encode_record(&b.encode(first + i).unwrap(), &mut out);
            ends.push(out.len());
        }
        (out, ends)
    }

    fn store(logs: &[(u64, Vec<u8>)]) -> MemFileSystem {
        let fs = MemFileSystem::new();
        fs.create_dir_all(&dir()).unwrap();
        for (n, bytes) in logs {
            fs.set_file_bytes(&filename::wal_path(&dir(), *n), bytes.clone());
        }
        fs
    }

    fn run(fs: &MemFileSystem, numbers: &[u64], mode: WalRecovery) -> Result<Replayed> {
        replay(fs, &dir(), numbers, mode, 0, &[])
    }

    fn keys(r: &Replayed) -> Vec<String> {
        r.memtable
            .iter()
            .map(|e| String::from_utf8(e.key.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn clean_logs_replay_whole_in_every_mode() {
        let (a, _) = log(1, 5, "a");
        let (b, _) = log(6, 5, "b");
        let fs = store(&[(3, a), (4, b)]);
        for mode in WalRecovery::ALL {
            let r = run(&fs, &[3, 4], mode).unwrap();
            assert_eq!(r.memtable.len(), 10, "{mode}");
            assert_eq!(r.last_seq, 10);
            assert!(r.report.is_clean());
            assert_eq!(r.report.records_replayed(), 10);
        }
    }

    #[test]
    fn garbage_tail_in_the_newest_log() {
        let (mut a, ends) = log(1, 5, "a");
        let good = a.len();
        a.extend_from_slice(b"\x01\x02garbage that is not a record at all");
        let fs = store(&[(3, a.clone())]);
        for mode in WalRecovery::ALL {
            let r = run(&fs, &[3], mode);
            if mode == WalRecovery::AbsoluteConsistency {
                assert!(matches!(r, Err(Error::Corruption { .. })));
                continue;
            }
            let r = r.unwrap();
            assert_eq!(r.memtable.len(), 5, "{mode}");
            assert_eq!(r.report.bytes_dropped(), (a.len() - good) as u64);
            assert_eq!(r.report.dropped[0].offset, ends[4] as u64);
        }
    }

    #[test]
    fn stale_records_of_an_older_log_are_a_tail() {
        // The newest log wrote sequences 20..22, over a reused file whose older
        // records (1..10) are still there after them.
        let (old, old_ends) = log(1, 10, "old");
        let (new, _) = log(20, 3, "new");
        let mut file = new.clone();
        // Records of the older log, starting at a record boundary and mid-record.
        file.extend_from_slice(&old[old_ends[2]..]);
        let fs = store(&[(9, file.clone())]);
        let r = run(&fs, &[9], WalRecovery::TolerateCorruptTail).unwrap();
        assert_eq!(keys(&r), vec!["k020", "k021", "k022"]);
        assert_eq!(r.report.bytes_dropped(), (file.len() - new.len()) as u64);
        assert!(r.report.dropped[0].reason.contains("stale"), "{}", r.report);
        assert!(matches!(
            run(&fs, &[9], WalRecovery::AbsoluteConsistency),
            Err(Error::Corruption { .. })
        ));
    }

    #[test]
    fn mid_log_damage_per_mode() {
        let (mut a, ends) = log(1, 6, "a");
        a[ends[1] + 20] ^= 0x40; // inside record 2's payload; records 3..5 valid
        let (b, _) = log(7, 2, "b");
        let fs = store(&[(3, a.clone()), (4, b.clone())]);
        match run(&fs, &[3, 4], WalRecovery::TolerateCorruptTail) {
            Err(Error::Corruption { file, reason }) => {
                assert_eq!(file, filename::wal_path(&dir(), 3));
                assert!(reason.contains(&format!("offset {}", ends[1])), "{reason}");
            }
            other => panic!("expected corruption, got {:?}", other.map(|r| r.report)),
        }
        assert!(run(&fs, &[3, 4], WalRecovery::AbsoluteConsistency).is_err());

        let pit = run(&fs, &[3, 4], WalRecovery::PointInTime).unwrap();
        assert_eq!(keys(&pit), vec!["k001", "k002"]);
        // New writes number above every valid record, the dropped ones too (up to 8,
        // in the second log): none may share a number with a record a log still holds.
        assert_eq!(pit.last_seq, 8);
        assert_eq!(
            pit.report.bytes_dropped(),
            (a.len() - ends[1] + b.len()) as u64
        );

        let skip = run(&fs, &[3, 4], WalRecovery::SkipCorrupted).unwrap();
        assert_eq!(
            keys(&skip),
            vec!["k001", "k002", "k004", "k005", "k006", "k007", "k008"]
        );
        assert_eq!(skip.report.dropped.len(), 1);
        assert_eq!(skip.report.bytes_dropped(), (ends[2] - ends[1]) as u64);
    }

    #[test]
    fn damage_in_an_older_log_is_not_a_tail() {
        let (mut a, ends) = log(1, 3, "a");
        a.truncate(ends[2] - 2); // the older log's last record cut short
        let (b, _) = log(4, 2, "b");
        let fs = store(&[(3, a), (4, b)]);
        assert!(matches!(
            run(&fs, &[3, 4], WalRecovery::TolerateCorruptTail),
            Err(Error::Corruption { file, .. }) if file == filename::wal_path(&dir(), 3)
        ));
        let pit = run(&fs, &[3, 4], WalRecovery::PointInTime).unwrap();
        assert_eq!(keys(&pit), vec!["k001", "k002"]);
        let skip = run(&fs, &[3, 4], WalRecovery::SkipCorrupted).unwrap();
        assert_eq!(keys(&skip), vec!["k001", "k002", "k004", "k005"]);
    }

    #[test]
    fn records_at_or_below_the_tables_floor_are_not_replayed() {
        let (a, _) = log(1, 5, "a");
        let fs = store(&[(3, a)]);
        // Tables already hold everything up to 5: nothing here is newer.
        let r = replay(&fs, &dir(), &[3], WalRecovery::SkipCorrupted, 5, &[]).unwrap();
        assert!(r.memtable.is_empty());
        assert_eq!(r.last_seq, 5);
        assert_eq!(r.report.dropped.len(), 1);
    }
}
