//! Builds one data block: sorted entries with prefix-compressed keys and restart points.
//!
//! See [`super::block`] for the layout. Call order: `(add* finish reset)*`.

use crate::coding::{put_varint, varint_len};
use crate::keycmp::common_prefix;
use crate::types::{SeqNo, ValueKind};

/// Accumulates the entries of one data block in their encoded form.
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    /// Entries since the last restart point.
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder placing a restart point every `restart_interval` (at least 1) entries.
    pub(crate) fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. The caller guarantees `key` is greater than the previous key and
    /// that the block stays below 4 GiB (restart offsets are `u32`).
    pub(crate) fn add(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let shared = self.shared_with(key);
        if self.at_restart() {
            // `as u32`: the table builder keeps every block far below 4 GiB.
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
        }
        let unshared = &key[shared..];
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, unshared.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(unshared);
        put_varint(&mut self.buf, seq);
        self.buf.push(kind as u8);
        self.buf.extend_from_slice(value);

        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Whether the next entry starts a restart point.
    fn at_restart(&self) -> bool {
        self.entries == 0 || self.since_restart >= self.restart_interval
    }

    /// The key bytes the next entry shares with the previous one: none at a restart
    /// point, which stores its key whole so a reader can start decoding there.
    fn shared_with(&self, key: &[u8]) -> usize {
        if self.at_restart() {
            0
        } else {
            common_prefix(&self.last_key, key)
        }
    }

    /// Whether no entry has been added since the last reset.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The size of the block if it were finished now.
    pub(crate) fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// The size of the block if it were finished after adding this entry.
    pub(crate) fn size_with(&self, key: &[u8], seq: SeqNo, value_len: usize) -> usize {
        let shared = self.shared_with(key);
        let unshared = key.len() - shared;
        self.estimated_size()
            + 4 * usize::from(self.at_restart())
            + varint_len(shared as u64)
            + varint_len(unshared as u64)
            + varint_len(value_len as u64)
            + unshared
            + varint_len(seq)
            + 1
            + value_len
    }

    /// Appends the restart array and its count, and returns the finished block. The caller
    /// may append its trailer to the returned buffer before writing it; then `reset`.
    pub(crate) fn finish(&mut self) -> &mut Vec<u8> {
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        // `as u32`: at most one restart per entry, and a block is below 4 GiB.
        self.buf
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        &mut self.buf
    }

    /// Clears the builder for the next block, keeping its allocations.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `size_with` predicts exactly what `add` then writes, restart points included
    /// (the aligned table builder closes blocks by it).
    #[test]
    fn size_with_is_the_size_after_add() {
        let mut b = BlockBuilder::new(3);
        let mut x = 7u64;
        for i in 0..200u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("key{:05}{}", i, "z".repeat((x >> 60) as usize));
            let value = vec![b'v'; (x >> 40) as usize % 300];
            let seq = x >> (x % 64);
            let predicted = b.size_with(key.as_bytes(), seq, value.len());
            b.add(key.as_bytes(), seq, ValueKind::Put, &value);
            assert_eq!(b.estimated_size(), predicted, "entry {i}");
        }
        let estimated = b.estimated_size();
        assert_eq!(b.finish().len(), estimated);
    }
}
