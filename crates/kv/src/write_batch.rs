//! A write batch is a group of puts and deletes applied atomically: after a crash,
//! either all of them are in the store or none is.
//!
//! Atomicity comes from the log: a batch is encoded as the payload of exactly one WAL
//! record, and a record is either wholly present (its checksum holds) or dropped.
//!
//! # Payload format
//!
//! All integers little-endian; `varint` is LEB128 (7 bits per byte, low bits first,
//! high bit set on every byte but the last, at most 10 bytes for a `u64`).
//!
//! ```text
//! +-----------------+-------------+-------+-------+-----+-------+
//! | base_seq: u64   | count: u32  | op 0  | op 1  | ... | op n-1|
//! +-----------------+-------------+-------+-------+-----+-------+
//!   0                 8             12
//!
//! op (put):          | kind = 1 | varint key_len | key | varint value_len | value |
//! op (delete):       | kind = 0 | varint key_len | key |
//! op (delete range): | kind = 2 | varint start_len | start | varint end_len | end |
//!
//! op in a named keyspace: | kind | 0x80 | varint keyspace | the op's fields as above |
//! ```
//!
//! An op in the default keyspace is untagged, so a store that never made a keyspace
//! writes exactly the bytes it always did. An op for a named keyspace (see
//! `db/keyspace.rs`) sets the kind byte's high bit and carries the keyspace's number
//! after it: one record, one checksum, so a batch across keyspaces is atomic as any
//! batch is. A build that predates keyspaces refuses a tagged op as an unknown kind.
//!
//! A delete range removes every key in `[start, end)` (see `range_del.rs`); it takes
//! one sequence number like any op. A build that predates kind 2 refuses such a batch
//! as corruption ("unknown kind byte 2"), so its log cannot be replayed by it: a store
//! that has used `delete_range` must not be opened by an older build until its logs
//! are flushed.
//!
//! Operation `i` gets sequence number `base_seq + i`, so later operations in a batch
//! win over earlier ones on the same key.
//!
//! Decoding trusts nothing: the count is checked against the bytes present before
//! anything is allocated (every op takes at least two bytes), every length against the
//! bytes that remain, the kind byte against the known kinds, and no byte may follow the
//! last op.

use std::fmt;
use std::ops::Range;
use std::path::Path;

use byteorder::{ByteOrder, LittleEndian};
use bytes::Bytes;

use crate::coding::{get_varint, put_varint};
use crate::error::{Error, Result};
use crate::types::{
    KeyspaceId, SeqNo, ValueKind, MAX_BATCH_LEN, MAX_KEY_LEN, MAX_SEQ, MAX_VALUE_LEN,
};

/// Bytes before the first op: `base_seq` (8) and `count` (4).
pub const HEADER_LEN: usize = 12;

/// Bytes a put adds besides its key and value: the kind byte and two length varints
/// (at most ten bytes each).
pub(crate) const PUT_OVERHEAD: usize = 21;

/// The fewest bytes one op can take: a kind byte and a one-byte key length.
const MIN_OP_LEN: usize = 2;

/// Set in an op's kind byte when a keyspace number follows it.
const KEYSPACE_TAG: u8 = 0x80;

/// What one operation of a batch does: its kind byte in the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpKind {
    /// Deletes one key (kind 0).
    Delete = 0,
    /// Sets one key (kind 1).
    Put = 1,
    /// Deletes every key in `[key, value)` (kind 2).
    DeleteRange = 2,
}

impl OpKind {
    fn from_u8(b: u8) -> Option<OpKind> {
        match b {
            0 => Some(OpKind::Delete),
            1 => Some(OpKind::Put),
            2 => Some(OpKind::DeleteRange),
            _ => None,
        }
    }

    /// The point kind of a put or delete; `None` for a range delete.
    pub fn point(self) -> Option<ValueKind> {
        match self {
            OpKind::Delete => Some(ValueKind::Delete),
            OpKind::Put => Some(ValueKind::Put),
            OpKind::DeleteRange => None,
        }
    }
}

/// A group of puts and deletes that the store applies atomically.
///
/// Operations are applied in the order they were added; a later operation on a key
/// overrides an earlier one in the same batch.
///
/// ```
/// use bloomkv_kv::WriteBatch;
///
/// let mut batch = WriteBatch::new();
/// batch.put("apple", "red");
/// batch.put(b"banana", b"yellow");
/// batch.delete("cherry");
/// assert_eq!(batch.len(), 3);
/// assert!(!batch.is_empty());
///
/// batch.clear();
/// assert!(batch.is_empty());
/// ```
#[derive(Clone)]
pub struct WriteBatch {
    /// The encoded payload, with the 12-byte header reserved at the front and filled
    /// in when the store assigns sequence numbers, so encoding copies nothing.
    rep: Vec<u8>,
    /// Operations added (kept wide so that `put` can never overflow; checked against
    /// the format's `u32` when encoded).
    count: u64,
    /// The longest key and value added, so the limits are checked without decoding.
    longest_key: usize,
    longest_value: usize,
    /// A range delete whose start is not below its end was added.
    empty_range: bool,
    /// Whether an op goes to the default keyspace.
    default_ops: bool,
    /// The named keyspaces the ops go to, each once, in the order first used (a batch
    /// of the default keyspace alone allocates nothing for this).
    named: Vec<KeyspaceId>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            count: 0,
            longest_key: 0,
            longest_value: 0,
            empty_range: false,
            default_ops: false,
            named: Vec::new(),
        }
    }

    /// An empty batch with room for `bytes` of encoded operations: a put takes its
    /// key and value plus at most 21 bytes ([`WriteBatch::put`] grows it otherwise).
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(HEADER_LEN.saturating_add(bytes));
        rep.resize(HEADER_LEN, 0);
        WriteBatch {
            rep,
            count: 0,
            longest_key: 0,
            longest_value: 0,
            empty_range: false,
            default_ops: false,
            named: Vec::new(),
        }
    }

    /// Adds "set `key` to `value`".
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.push(
            KeyspaceId::DEFAULT,
            OpKind::Put,
            key.as_ref(),
            value.as_ref(),
        );
    }

    /// Adds "delete `key`" (a tombstone; deleting an absent key is not an error).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.push(KeyspaceId::DEFAULT, OpKind::Delete, key.as_ref(), &[]);
    }

    /// Adds "delete every key in `[start, end)`" (a range tombstone). The store
    /// refuses the batch with `InvalidArgument` if `start >= end`.
    ///
    /// ```
    /// use bloomkv_kv::WriteBatch;
    ///
    /// let mut batch = WriteBatch::new();
    /// batch.put("b", "kept? no");
    /// batch.delete_range("a", "c"); // a later op: the put above is deleted too
    /// assert_eq!(batch.len(), 2);
    /// ```
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        let (start, end) = (start.as_ref(), end.as_ref());
        self.push(KeyspaceId::DEFAULT, OpKind::DeleteRange, start, end);
    }

    /// Adds "set `key` to `value`" in `keyspace` (a [`Keyspace`](crate::Keyspace) or
    /// its id). One batch may span keyspaces: it is applied whole or not at all, also
    /// across a crash, and readers see it whole. A keyspace of another store, or one
    /// dropped, makes the store refuse the batch (`InvalidArgument`).
    ///
    /// ```
    /// use bloomkv_kv::{Db, Options, WriteBatch};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let orders = db.keyspace("orders", Options::default())?;
    /// let stock = db.keyspace("stock", Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put_in(&orders, "o-17", "2 x widget");
    /// batch.put_in(&stock, "widget", "98");
    /// db.write(batch)?;
    /// assert_eq!(stock.get("widget")?.as_deref(), Some(&b"98"[..]));
    /// assert_eq!(db.get("widget")?, None, "the default keyspace is another one");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put_in(
        &mut self,
        keyspace: impl Into<KeyspaceId>,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) {
        self.push(keyspace.into(), OpKind::Put, key.as_ref(), value.as_ref());
    }

    /// Adds "delete `key`" in `keyspace` (see [`WriteBatch::put_in`]).
    pub fn delete_in(&mut self, keyspace: impl Into<KeyspaceId>, key: impl AsRef<[u8]>) {
        self.push(keyspace.into(), OpKind::Delete, key.as_ref(), &[]);
    }

    /// Adds "delete every key in `[start, end)`" in `keyspace` (see
    /// [`WriteBatch::put_in`] and [`WriteBatch::delete_range`]).
    pub fn delete_range_in(
        &mut self,
        keyspace: impl Into<KeyspaceId>,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.push(
            keyspace.into(),
            OpKind::DeleteRange,
            start.as_ref(),
            end.as_ref(),
        );
    }

    /// Encodes one op (`value` is a range delete's end; unused for a delete).
    fn push(&mut self, keyspace: KeyspaceId, kind: OpKind, key: &[u8], value: &[u8]) {
        // One growth for the whole operation, not one per field (a tag adds at most
        // five bytes).
        let tag = if keyspace == KeyspaceId::DEFAULT {
            0
        } else {
            5
        };
        self.rep
            .reserve(PUT_OVERHEAD + tag + key.len() + value.len());
        if keyspace == KeyspaceId::DEFAULT {
            self.rep.push(kind as u8);
        } else {
            self.rep.push(kind as u8 | KEYSPACE_TAG);
            put_varint(&mut self.rep, u64::from(keyspace.get()));
        }
        put_varint(&mut self.rep, key.len() as u64);
        self.rep.extend_from_slice(key);
        if kind != OpKind::Delete {
            put_varint(&mut self.rep, value.len() as u64);
            self.rep.extend_from_slice(value);
        }
        self.count += 1;
        self.longest_key = self.longest_key.max(key.len());
        match kind {
            OpKind::Put => self.longest_value = self.longest_value.max(value.len()),
            OpKind::DeleteRange => {
                self.longest_key = self.longest_key.max(value.len());
                if key >= value {
                    self.empty_range = true;
                }
            }
            OpKind::Delete => {}
        }
        if keyspace == KeyspaceId::DEFAULT {
            self.default_ops = true;
        } else if self.named.last() != Some(&keyspace) && !self.named.contains(&keyspace) {
            self.named.push(keyspace);
        }
    }

    /// The keyspaces the batch writes to, each once (the default keyspace first).
    pub(crate) fn keyspaces(&self) -> impl Iterator<Item = KeyspaceId> + '_ {
        self.default_ops
            .then_some(KeyspaceId::DEFAULT)
            .into_iter()
            .chain(self.named.iter().copied())
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every operation, keeping the allocated buffer for reuse.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_LEN);
        self.count = 0;
        self.longest_key = 0;
        self.longest_value = 0;
        self.empty_range = false;
        self.default_ops = false;
        self.named.clear();
    }

    /// Checks the store's limits: keys up to [`MAX_KEY_LEN`], values up to
    /// [`MAX_VALUE_LEN`], the whole batch up to [`MAX_BATCH_LEN`] encoded bytes.
    /// A batch over any of them is [`Error::InvalidArgument`].
    ///
    /// ```
    /// use bloomkv_kv::{WriteBatch, MAX_KEY_LEN};
    ///
    /// let mut batch = WriteBatch::new();
    /// batch.put("k", "v");
    /// assert!(batch.check_limits().is_ok());
    /// batch.put(vec![0u8; MAX_KEY_LEN + 1], "v");
    /// assert!(batch.check_limits().is_err());
    /// ```
    pub fn check_limits(&self) -> Result<()> {
        if self.empty_range {
            return Err(Error::InvalidArgument(
                "delete_range: start must be below end".into(),
            ));
        }
        if self.longest_key > MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
                self.longest_key
            )));
        }
        if self.longest_value > MAX_VALUE_LEN {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes exceeds the {MAX_VALUE_LEN}-byte limit",
                self.longest_value
            )));
        }
        if self.rep.len() > MAX_BATCH_LEN {
            return Err(Error::InvalidArgument(format!(
                "write batch of {} encoded bytes exceeds the {MAX_BATCH_LEN}-byte limit \
                 of one log record; split it into smaller batches",
                self.rep.len()
            )));
        }
        Ok(())
    }

    /// The size in bytes of the batch's encoding: what it will add to the log.
    ///
    /// ```
    /// use bloomkv_kv::WriteBatch;
    ///
    /// let mut batch = WriteBatch::new();
    /// let empty = batch.approximate_size();
    /// batch.put("key", "value");
    /// assert!(batch.approximate_size() >= empty + 8);
    /// ```
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Encodes the batch as a WAL record payload whose first operation gets sequence
    /// number `base_seq`, consuming the batch (no copy).
    ///
    /// Fails with [`Error::InvalidArgument`] if the batch holds more than `u32::MAX`
    /// operations or `base_seq + len` passes `MAX_SEQ` (2^63 - 1).
    pub fn into_payload(mut self, base_seq: SeqNo) -> Result<Bytes> {
        self.write_header(base_seq)?;
        Ok(Bytes::from(self.rep))
    }

    /// Like [`WriteBatch::into_payload`], as the plain buffer.
    pub(crate) fn into_record(mut self, base_seq: SeqNo) -> Result<Vec<u8>> {
        self.write_header(base_seq)?;
        Ok(self.rep)
    }

    /// Like [`WriteBatch::into_payload`], keeping the batch (copies the encoding).
    pub fn encode(&self, base_seq: SeqNo) -> Result<Vec<u8>> {
        let mut rep = self.rep.clone();
        write_header(&mut rep, base_seq, self.count)?;
        Ok(rep)
    }

    fn write_header(&mut self, base_seq: SeqNo) -> Result<()> {
        write_header(&mut self.rep, base_seq, self.count)
    }
}

/// `base_seq + count`, the number after a batch's last, if it stays within
/// [`MAX_SEQ`]: the one rule for writing a batch and for trusting one read back, so
/// that whoever counts on from a recovered batch cannot overflow.
fn seq_end(base_seq: SeqNo, count: u64) -> Option<SeqNo> {
    base_seq.checked_add(count).filter(|end| *end <= MAX_SEQ)
}

fn write_header(rep: &mut [u8], base_seq: SeqNo, count: u64) -> Result<()> {
    let count32 = u32::try_from(count).map_err(|_| {
        Error::InvalidArgument(format!(
            "write batch holds {count} operations, more than {}",
            u32::MAX
        ))
    })?;
    if seq_end(base_seq, count).is_none() {
        return Err(Error::InvalidArgument(format!(
            "sequence numbers exhausted: {base_seq} + {count} passes {MAX_SEQ}"
        )));
    }
    // `rep` always starts with the reserved header.
    if let Some(header) = rep.get_mut(..HEADER_LEN) {
        LittleEndian::write_u64(&mut header[..8], base_seq);
        LittleEndian::write_u32(&mut header[8..], count32);
    }
    Ok(())
}

impl Default for WriteBatch {
    fn default() -> WriteBatch {
        WriteBatch::new()
    }
}

impl fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBatch")
            .field("len", &self.count)
            .field("bytes", &self.rep.len())
            .finish()
    }
}

/// One operation of a decoded batch. Key and value share the payload's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOp {
    /// The keyspace the op writes to ([`KeyspaceId::DEFAULT`] for an untagged op).
    pub keyspace: KeyspaceId,
    /// Put, delete or range delete.
    pub kind: OpKind,
    /// The user key (a range delete's start).
    pub key: Bytes,
    /// The value; empty for a delete; a range delete's end.
    pub value: Bytes,
}

/// A batch read back from a WAL record payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedBatch {
    /// The sequence number of the first operation.
    pub base_seq: SeqNo,
    /// The operations in order; op `i` has sequence number `base_seq + i`.
    pub ops: Vec<BatchOp>,
}

impl DecodedBatch {
    /// The operations with their sequence numbers, in batch order.
    pub fn into_ops(self) -> impl Iterator<Item = (SeqNo, BatchOp)> {
        let base = self.base_seq;
        // `decode` checked that `base_seq + ops.len()` does not overflow.
        (base..).zip(self.ops)
    }

    /// The sequence number of the last operation (`None` for an empty batch).
    pub fn last_seq(&self) -> Option<SeqNo> {
        let n = self.ops.len() as u64;
        n.checked_sub(1).map(|last| self.base_seq + last)
    }
}

/// Decodes a WAL record payload; `file` names the log in errors.
///
/// Keys and values are zero-copy slices of `payload`. Any inconsistency (short
/// header, a count the bytes cannot hold, a length past the end, an unknown kind,
/// bytes after the last op, sequence numbers past `MAX_SEQ`) is
/// [`Error::Corruption`].
pub fn decode(payload: &Bytes, file: &Path) -> Result<DecodedBatch> {
    let mut ops = Vec::new();
    // One pass: on an error the half-built list is dropped.
    let base_seq = walk(payload, file, |keyspace, kind, key, value| {
        ops.push(BatchOp {
            keyspace,
            kind,
            key: payload.slice(key),
            value: payload.slice(value),
        });
    })?;
    Ok(DecodedBatch { base_seq, ops })
}

/// Checks a whole payload (every check of [`decode`]) without handing out anything;
/// returns the base sequence number.
pub(crate) fn check(payload: &[u8], file: &Path) -> Result<SeqNo> {
    walk(payload, file, |_, _, _, _| {})
}

/// Calls `op(keyspace, kind, key, value)` for each operation of a payload, in order,
/// with the byte ranges of its key and value (empty for a delete). For a payload [`check`]
/// accepted this cannot fail; on any other payload, operations before the fault have
/// been handed out when the error comes back.
pub(crate) fn for_each_op(
    payload: &[u8],
    file: &Path,
    op: impl FnMut(KeyspaceId, OpKind, Range<usize>, Range<usize>),
) -> Result<()> {
    walk(payload, file, op).map(|_| ())
}

/// One pass over a payload: the checks of [`decode`], `op` per operation as it goes.
fn walk(
    payload: &[u8],
    file: &Path,
    mut op: impl FnMut(KeyspaceId, OpKind, Range<usize>, Range<usize>),
) -> Result<SeqNo> {
    let corrupt = |reason: String| Error::corruption(file, format!("write batch: {reason}"));
    if payload.len() < HEADER_LEN {
        return Err(corrupt(format!(
            "payload of {} bytes is shorter than the {HEADER_LEN}-byte header",
            payload.len()
        )));
    }
    let base_seq = LittleEndian::read_u64(&payload[..8]);
    let count = LittleEndian::read_u32(&payload[8..HEADER_LEN]) as usize;
    let body = payload.len() - HEADER_LEN;
    // Validate the count before anything trusts it.
    if count > body / MIN_OP_LEN {
        return Err(corrupt(format!(
            "count {count} cannot fit in {body} bytes of operations"
        )));
    }
    if seq_end(base_seq, count as u64).is_none() {
        return Err(corrupt(format!(
            "sequence numbers past {MAX_SEQ}: base {base_seq} + count {count}"
        )));
    }
    let mut pos = HEADER_LEN;
    for i in 0..count {
        let at = pos;
        let kind_byte = *payload
            .get(pos)
            .ok_or_else(|| corrupt(format!("count {count} but the payload ends after {i} ops")))?;
        pos += 1;
        let kind = OpKind::from_u8(kind_byte & !KEYSPACE_TAG).ok_or_else(|| {
            corrupt(format!(
                "op {i} at byte {at}: unknown kind byte {kind_byte}"
            ))
        })?;
        let keyspace = if kind_byte & KEYSPACE_TAG == 0 {
            KeyspaceId::DEFAULT
        } else {
            get_varint(payload, &mut pos)
                .and_then(|id| u32::try_from(id).ok())
                .map(KeyspaceId::new)
                .ok_or_else(|| corrupt(format!("op {i} at byte {at}: bad keyspace number")))?
        };
        let key = read_range(payload, &mut pos)
            .ok_or_else(|| corrupt(format!("op {i} at byte {at}: bad key length")))?;
        let value = match kind {
            OpKind::Put | OpKind::DeleteRange => read_range(payload, &mut pos)
                .ok_or_else(|| corrupt(format!("op {i} at byte {at}: bad value length")))?,
            OpKind::Delete => pos..pos,
        };
        if kind == OpKind::DeleteRange && payload[key.clone()] >= payload[value.clone()] {
            return Err(corrupt(format!(
                "op {i} at byte {at}: range delete's start is not below its end"
            )));
        }
        op(keyspace, kind, key, value);
    }
    if pos != payload.len() {
        return Err(corrupt(format!(
            "{} unexpected bytes after the last of {count} ops",
            payload.len() - pos
        )));
    }
    Ok(base_seq)
}

/// Reads `varint len, bytes[len]` at `*pos` and returns the bytes' range; `None` if
/// either runs past the end.
fn read_range(buf: &[u8], pos: &mut usize) -> Option<Range<usize>> {
    let len = get_varint(buf, pos)?;
    let remaining = (buf.len() - *pos) as u64;
    if len > remaining {
        return None;
    }
    let start = *pos;
    *pos = start + len as usize;
    Some(start..*pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn path() -> &'static Path {
        Path::new("000001.wal")
    }

    #[test]
    fn a_batch_made_with_room_encodes_like_any_other() {
        let (key, value) = (b"key".as_slice(), vec![7u8; 300]);
        let mut roomy = WriteBatch::with_capacity(21 + key.len() + value.len());
        let mut plain = WriteBatch::new();
        for b in [&mut roomy, &mut plain] {
            b.put(key, &value);
            b.delete(b"gone");
        }
        assert_eq!(roomy.encode(5).unwrap(), plain.encode(5).unwrap());
        assert_eq!(roomy.len(), 2);
        // The room asked for covers the put: it did not grow past its first allocation.
        let mut exact = WriteBatch::with_capacity(21 + key.len() + value.len());
        let before = exact.rep.capacity();
        exact.put(key, &value);
        assert_eq!(exact.rep.capacity(), before);
    }

    fn assert_corrupt(payload: &[u8]) -> String {
        // `check`, which the store runs before it logs or applies a write, refuses
        // the same payload.
        assert!(check(payload, path()).is_err());
        match decode(&Bytes::copy_from_slice(payload), path()) {
            Err(Error::Corruption { file, reason }) => {
                assert_eq!(file, path());
                reason
            }
            other => panic!("expected corruption for {payload:?}, got {other:?}"),
        }
    }

    #[test]
    fn empty_batch_round_trips() {
        let payload = WriteBatch::new().into_payload(7).unwrap();
        assert_eq!(payload.len(), HEADER_LEN);
        let decoded = decode(&payload, path()).unwrap();
        assert_eq!(decoded.base_seq, 7);
        assert!(decoded.ops.is_empty());
        assert_eq!(decoded.last_seq(), None);
    }

    #[test]
    fn ops_keep_their_order_and_get_consecutive_seqs() {
        let mut batch = WriteBatch::new();
        batch.put("a", "1");
        batch.delete("b");
        batch.put("a", ""); // empty value is a value, not a delete
        batch.delete_range("c", "e");
        let payload = batch.encode(100).unwrap();
        let decoded = decode(&Bytes::from(payload), path()).unwrap();
        assert_eq!(decoded.last_seq(), Some(103));
        let ops: Vec<(SeqNo, BatchOp)> = decoded.into_ops().collect();
        let summary: Vec<(&[u8], SeqNo, OpKind, &[u8])> = ops
            .iter()
            .map(|(seq, e)| (&e.key[..], *seq, e.kind, &e.value[..]))
            .collect();
        assert_eq!(
            summary,
            vec![
                (&b"a"[..], 100, OpKind::Put, &b"1"[..]),
                (&b"b"[..], 101, OpKind::Delete, &b""[..]),
                (&b"a"[..], 102, OpKind::Put, &b""[..]),
                (&b"c"[..], 103, OpKind::DeleteRange, &b"e"[..]),
            ]
        );
    }

    #[test]
    fn encoding_matches_the_documented_layout() {
        let mut batch = WriteBatch::new();
        batch.put("k", "vv");
        batch.delete("x");
        batch.delete_range("a", "c");
        let payload = batch.encode(0x0102).unwrap();
        let expected: Vec<u8> = [
            &[0x02, 0x01, 0, 0, 0, 0, 0, 0][..], // base_seq
            &[3, 0, 0, 0],                       // count
            &[1, 1, b'k', 2, b'v', b'v'],        // put k=vv
            &[0, 1, b'x'],                       // delete x
            &[2, 1, b'a', 1, b'c'],              // delete range [a, c)
        ]
        .concat();
        assert_eq!(payload, expected);
    }

    #[test]
    fn a_range_delete_must_have_its_start_below_its_end() {
        for (start, end) in [("b", "b"), ("c", "b")] {
            let mut batch = WriteBatch::new();
            batch.delete_range(start, end);
            assert!(matches!(
                batch.check_limits(),
                Err(Error::InvalidArgument(_))
            ));
        }
        // Read back, such an op is corruption (no writer makes one).
        let payload = [
            &[1u8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0][..],
            &[2, 1, b'b', 1, b'b'],
        ]
        .concat();
        assert!(assert_corrupt(&payload).contains("start is not below"));
        let mut too_long = WriteBatch::new();
        too_long.delete_range("a", vec![b'z'; MAX_KEY_LEN + 1]);
        assert!(too_long.check_limits().is_err());
    }

    #[test]
    fn ops_of_named_keyspaces_carry_their_number() {
        let mut batch = WriteBatch::new();
        batch.put("a", "1");
        batch.put_in(KeyspaceId::new(3), "b", "2");
        batch.delete_in(KeyspaceId::new(300), "c");
        batch.delete_range_in(KeyspaceId::new(3), "d", "e");
        assert_eq!(
            batch.keyspaces().collect::<Vec<_>>(),
            [
                KeyspaceId::DEFAULT,
                KeyspaceId::new(3),
                KeyspaceId::new(300)
            ]
        );
        let decoded = decode(&batch.into_payload(10).unwrap(), path()).unwrap();
        let got: Vec<(u32, OpKind, &[u8])> = decoded
            .ops
            .iter()
            .map(|op| (op.keyspace.get(), op.kind, &op.key[..]))
            .collect();
        assert_eq!(
            got,
            [
                (0, OpKind::Put, &b"a"[..]),
                (3, OpKind::Put, b"b"),
                (300, OpKind::Delete, b"c"),
                (3, OpKind::DeleteRange, b"d"),
            ]
        );
        // A tag whose number does not fit a u32, and one cut short, are corruption.
        let mut bad = vec![0u8; HEADER_LEN];
        bad[8] = 1;
        bad.extend_from_slice(&[0x81, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, b'k', 1, b'v']);
        assert!(assert_corrupt(&bad).contains("keyspace"));
        let mut cut = vec![0u8; HEADER_LEN];
        cut[8] = 1;
        cut.extend_from_slice(&[0x81, 0x83]);
        assert_corrupt(&cut);
    }

    #[test]
    fn clear_and_reuse() {
        let mut batch = WriteBatch::default();
        batch.put("a", "b");
        batch.clear();
        assert_eq!(batch.len(), 0);
        assert_eq!(batch.approximate_size(), HEADER_LEN);
        batch.delete("z");
        let decoded = decode(&batch.into_payload(1).unwrap(), path()).unwrap();
        assert_eq!(decoded.ops.len(), 1);
        assert_eq!(decoded.ops[0].kind, OpKind::Delete);
    }

    #[test]
    fn sequence_overflow_is_refused_on_encode() {
        let mut batch = WriteBatch::new();
        batch.put("a", "b");
        batch.put("c", "d");
        for base in [u64::MAX, MAX_SEQ - 1] {
            assert!(matches!(batch.encode(base), Err(Error::InvalidArgument(_))));
        }
        assert!(batch.encode(MAX_SEQ - 2).is_ok());
    }

    #[test]
    fn hostile_count_is_refused_before_allocation() {
        // 20 bytes claiming u32::MAX ops: rejected by arithmetic, no allocation.
        let mut payload = vec![0u8; 20];
        payload[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let reason = assert_corrupt(&payload);
        assert!(reason.contains("count"), "{reason}");
    }

    #[test]
    fn hostile_lengths_are_refused() {
        // A key length of 2^63 in a tiny payload.
        let mut payload = vec![1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
        payload.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x01]);
        assert_corrupt(&payload);
        // A varint longer than 10 bytes / overflowing u64.
        let mut payload = vec![1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        payload.extend_from_slice(&[0xff; 10]);
        payload.push(0x01);
        assert_corrupt(&payload);
        // A value length one past the end.
        let mut payload = vec![0; 8];
        payload.extend_from_slice(&[1, 0, 0, 0, 1, 1, b'k', 3, b'a', b'b']);
        assert_corrupt(&payload);
    }

    #[test]
    fn bad_shapes_are_corruption() {
        assert_corrupt(&[]);
        assert_corrupt(&[0; HEADER_LEN - 1]);
        // Unknown kind byte.
        let mut payload = vec![0; 8];
        payload.extend_from_slice(&[1, 0, 0, 0, 7, 1, b'k']);
        assert!(assert_corrupt(&payload).contains("kind"));
        // Count says 2, one op present.
        let mut payload = vec![0; 8];
        payload.extend_from_slice(&[2, 0, 0, 0, 0, 1, b'k', 0]);
        assert_corrupt(&payload);
        // Trailing garbage after the last op.
        let mut payload = vec![0; 8];
        payload.extend_from_slice(&[1, 0, 0, 0, 0, 1, b'k', 9]);
        assert!(assert_corrupt(&payload).contains("after the last"));
        // Sequence numbers overflow.
        let mut payload = vec![0xff; 8];
        payload.extend_from_slice(&[2, 0, 0, 0, 0, 1, b'k', 0, 1, b'j']);
        assert_corrupt(&payload);
        // Past the ceiling without overflowing, even with no operation: recovery
        // counts on from a batch's base.
        for (base, count) in [(u64::MAX, 0u32), (MAX_SEQ + 1, 0), (MAX_SEQ, 1)] {
            let mut payload = base.to_le_bytes().to_vec();
            payload.extend_from_slice(&count.to_le_bytes());
            if count == 1 {
                payload.extend_from_slice(&[0, 1, b'k']);
            }
            assert!(
                assert_corrupt(&payload).contains("past"),
                "base {base} count {count}"
            );
        }
        let mut payload = (MAX_SEQ - 1).to_le_bytes().to_vec();
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.extend_from_slice(&[0, 1, b'k']);
        assert!(decode(&Bytes::from(payload), path()).is_ok());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(Vec<u8>, Vec<u8>),
        Delete(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..300);
        prop_oneof![
            (bytes(), bytes()).prop_map(|(k, v)| Op::Put(k, v)),
            bytes().prop_map(Op::Delete),
        ]
    }

    proptest! {
        #[test]
        fn batches_round_trip(ops in proptest::collection::vec(op(), 0..40), base in 0u64..u64::MAX / 2) {
            let mut batch = WriteBatch::new();
            for op in &ops {
                match op {
                    Op::Put(k, v) => batch.put(k, v),
                    Op::Delete(k) => batch.delete(k),
                }
            }
            prop_assert_eq!(batch.len(), ops.len());
            let size = batch.approximate_size();
            let payload = batch.into_payload(base).unwrap();
            prop_assert_eq!(payload.len(), size);
            let decoded = decode(&payload, path()).unwrap();
            prop_assert_eq!(decoded.base_seq, base);
            prop_assert_eq!(decoded.ops.len(), ops.len());
            for (got, want) in decoded.ops.iter().zip(&ops) {
                match want {
                    Op::Put(k, v) => {
                        prop_assert_eq!(got.kind, OpKind::Put);
                        prop_assert_eq!(&got.key[..], &k[..]);
                        prop_assert_eq!(&got.value[..], &v[..]);
                    }
                    Op::Delete(k) => {
                        prop_assert_eq!(got.kind, OpKind::Delete);
                        prop_assert_eq!(&got.key[..], &k[..]);
                        prop_assert!(got.value.is_empty());
                    }
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&Bytes::from(bytes), path());
        }

        #[test]
        fn truncated_batches_are_corruption(ops in proptest::collection::vec(op(), 1..10), cut_frac in 0.0f64..1.0) {
            let mut batch = WriteBatch::new();
            for op in &ops {
                match op {
                    Op::Put(k, v) => batch.put(k, v),
                    Op::Delete(k) => batch.delete(k),
                }
            }
            let payload = batch.encode(1).unwrap();
            let cut = ((payload.len() as f64) * cut_frac) as usize;
            prop_assert!(cut < payload.len());
            let result = decode(&Bytes::copy_from_slice(&payload[..cut]), path());
            prop_assert!(
                matches!(result, Err(Error::Corruption { .. })),
                "cut {} of {}: {:?}", cut, payload.len(), result
            );
        }
    }
}
