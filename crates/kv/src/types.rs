//! The small vocabulary shared by the write path, the tables and the read path.

use bytes::Bytes;

/// A global, monotonically increasing write number: newer writes have larger numbers.
pub type SeqNo = u64;

/// The largest sequence number a store gives a write or accepts from its files:
/// `2^63 - 1`, beyond reach (a write every nanosecond for 290 years), so that `+ 1` on
/// any number a file supplies cannot overflow. A log record or manifest past it is
/// corrupt.
pub const MAX_SEQ: SeqNo = u64::MAX >> 1;

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
