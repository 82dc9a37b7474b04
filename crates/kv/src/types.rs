//! The small vocabulary shared by the write path, the tables and the read path.
//!
//! Sequence numbers, entries, what a get finds, the number of levels and the limits on
//! keys, values and batches. It imports nothing from the rest of the crate, so every
//! module can name these without importing one that imports it.

use bytes::Bytes;

/// A global, monotonically increasing write number: newer writes have larger numbers.
pub type SeqNo = u64;

/// A keyspace's number in its store (see [`Db::keyspace`](crate::Db::keyspace)): what a
/// write batch records for each op. The default keyspace is 0; named keyspaces are
/// numbered from 1 as they are made, and a number is never given twice, so a log
/// record for a dropped keyspace can never be replayed into a newer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct KeyspaceId(u32);

impl KeyspaceId {
    /// The default keyspace: the store as it was before keyspaces.
    pub const DEFAULT: KeyspaceId = KeyspaceId(0);

    /// The keyspace numbered `n`.
    pub const fn new(n: u32) -> KeyspaceId {
        KeyspaceId(n)
    }

    /// Its number.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl std::fmt::Display for KeyspaceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The largest sequence number a store gives a write or accepts from its files:
/// `2^63 - 1`, beyond reach (a write every nanosecond for 290 years), so that `+ 1` on
/// any number a file supplies cannot overflow. A log record or manifest past it is
/// corrupt.
pub const MAX_SEQ: SeqNo = u64::MAX >> 1;

/// The newest sequence number: reads at it see every applied write.
pub const READ_LATEST: SeqNo = SeqNo::MAX;

/// Deepest level a table can live on (L0 .. L6, as in LevelDB).
pub const NUM_LEVELS: usize = 7;

/// The longest key accepted (bytes).
pub const MAX_KEY_LEN: usize = 64 * 1024;

/// The longest value accepted (bytes).
pub const MAX_VALUE_LEN: usize = 64 * 1024 * 1024;

/// The largest payload a record may carry (256 MiB), enforced on write and on read.
pub const MAX_RECORD_LEN: usize = 256 << 20;

/// The largest encoded write batch accepted (bytes, see
/// [`WriteBatch::approximate_size`](crate::WriteBatch::approximate_size)): a batch is
/// one WAL record, and a record holds at most this much. A batch of five 60 MiB values
/// is over it and is refused with `InvalidArgument` (the store goes on); split it into
/// several batches.
pub const MAX_BATCH_LEN: usize = MAX_RECORD_LEN;

/// Whether an entry sets a value or deletes the key (a tombstone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key is deleted as of this sequence number.
    Delete = 0,
    /// A value.
    Put = 1,
}

impl ValueKind {
    /// Decodes the on-disk byte; `None` for anything else.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            _ => None,
        }
    }
}

/// One versioned entry: what a memtable, table or merge yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The user key.
    pub key: Bytes,
    /// The write that produced this version.
    pub seq: SeqNo,
    /// Put or tombstone.
    pub kind: ValueKind,
    /// The value (empty for a tombstone).
    pub value: Bytes,
}

/// What a get found in a table or a memtable for a key the caller holds: the
/// version's sequence number, kind and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) seq: SeqNo,
    pub(crate) kind: ValueKind,
    pub(crate) value: Bytes,
}

impl Hit {
    /// "Deleted": what a source answers for a key a range tombstone at `seq` covers
    /// above any version it holds.
    pub(crate) fn range_deleted(seq: SeqNo) -> Hit {
        Hit {
            seq,
            kind: ValueKind::Delete,
            value: Bytes::new(),
        }
    }

    /// The value a get returns: the value of a put, nothing for a tombstone.
    pub(crate) fn live_value(self) -> Option<Bytes> {
        match self.kind {
            ValueKind::Put => Some(self.value),
            ValueKind::Delete => None,
        }
    }

    /// The hit as an entry of `key`.
    pub(crate) fn into_entry(self, key: Bytes) -> Entry {
        Entry {
            key,
            seq: self.seq,
            kind: self.kind,
            value: self.value,
        }
    }
}
