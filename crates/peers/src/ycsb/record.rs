//! Records: YCSB's key names and self-describing values.
//!
//! A key is YCSB's: `user` and the record id hashed (FNV-1a, sign bit cleared), as
//! 19 zero-padded decimal digits, so every key is 23 bytes and consecutive ids land
//! all over the key space. Keys that must be absent (workload X) hash ids from
//! [`ABSENT_BASE`] on, which no insert reaches.
//!
//! A value says which write made it, so a reader can check what it got:
//!
//! ```text
//! offset 0        8             16                 value_size
//!        | id u64 | version u64 | printable filler |
//! ```
//!
//! `version` is 0 for the load phase; a run's writes are
//! `(thread + 1) << 40 | n` for the thread's n-th write, unique in the run.

use std::sync::Arc;

use super::generator::{fnv64, SplitMix64};

/// Bytes of every key.
pub const KEY_LEN: usize = 23;

/// Bytes of the value header (id and version).
pub const HEADER_LEN: usize = 16;

/// Absent keys are made from ids at and above this (never loaded or inserted).
pub const ABSENT_BASE: u64 = 1 << 62;

/// The key of record `id`.
pub fn key(id: u64) -> [u8; KEY_LEN] {
    let mut k = [b'0'; KEY_LEN];
    k[..4].copy_from_slice(b"user");
    let mut h = fnv64(id) & (i64::MAX as u64);
    for slot in k[4..].iter_mut().rev() {
        *slot = b'0' + (h % 10) as u8;
        h /= 10;
    }
    k
}

/// Writes the value of record `id` at `version` into `out` (`len` bytes, at least
/// [`HEADER_LEN`]).
pub fn fill_value(out: &mut Vec<u8>, id: u64, version: u64, len: usize) {
    out.clear();
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    let mut rng = SplitMix64::new(id ^ version.rotate_left(32));
    while out.len() < len.max(HEADER_LEN) {
        let r = rng.next_u64();
        for b in r.to_le_bytes() {
            if out.len() < len {
                // 64 printable characters, as YCSB's values are printable.
                out.push(b'0' + (b & 63));
            }
        }
    }
}

/// The records a run writes: YCSB's (hashed ids, generated values), or rows a user
/// has (TPC-H line items, [`crate::tpch`]).
#[derive(Clone, Default)]
pub enum Data {
    /// `user` + hashed id keys, `value_size` printable bytes.
    #[default]
    Ycsb,
    /// Record `id < n` is row `id`: its key, and its text after the value header.
    /// Inserts (`id ≥ n`) get line 1 of order `10^9 + id` and row `id mod n`'s text;
    /// absent keys are row `i`'s key with line `09` (TPC-H's orders have at most 7).
    Tpch(Arc<Vec<(Vec<u8>, Vec<u8>)>>),
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Data::Ycsb => write!(f, "Ycsb"),
            Data::Tpch(rows) => write!(f, "Tpch({} rows)", rows.len()),
        }
    }
}

impl Data {
    /// The data set's name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Data::Ycsb => "ycsb",
            Data::Tpch(_) => "tpch",
        }
    }

    /// Writes record `id`'s key into `out` (cleared first).
    pub fn key(&self, id: u64, out: &mut Vec<u8>) {
        out.clear();
        match self {
            Data::Ycsb => out.extend_from_slice(&key(id)),
            Data::Tpch(rows) if rows.is_empty() => out.extend_from_slice(&key(id)),
            Data::Tpch(rows) => {
                let n = rows.len() as u64;
                if id >= ABSENT_BASE {
                    let row = &rows[((id - ABSENT_BASE) % n) as usize].0;
                    out.extend_from_slice(row);
                    let len = out.len();
                    if len >= 2 {
                        out[len - 2..].copy_from_slice(b"09");
                    }
                } else if id < n {
                    out.extend_from_slice(&rows[id as usize].0);
                } else {
                    out.extend_from_slice(&crate::tpch::line_key(1_000_000_000 + id as i64, 1));
                }
            }
        }
    }

    /// Writes record `id`'s value at `version` into `out`: the header, then
    /// `value_size` bytes in all (YCSB) or the row's text (TPC-H).
    pub fn value(&self, id: u64, version: u64, value_size: usize, out: &mut Vec<u8>) {
        match self {
            Data::Tpch(rows) if !rows.is_empty() => {
                out.clear();
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&rows[(id % rows.len() as u64) as usize].1);
            }
            _ => fill_value(out, id, version, value_size),
        }
    }
}

/// What a read learned from a value: whose it is and which write made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueHead {
    /// The record id the value was written for.
    pub id: u64,
    /// The write that made it.
    pub version: u64,
    /// The value's length.
    pub len: usize,
}

/// Reads a value's header; `None` if it is too short to have one.
pub fn read_head(value: &[u8]) -> Option<ValueHead> {
    let id = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    let version = u64::from_le_bytes(value.get(8..16)?.try_into().ok()?);
    Some(ValueHead {
        id,
        version,
        len: value.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_length_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for id in 0..10_000 {
            let k = key(id);
            assert!(k.starts_with(b"user"));
            assert!(k[4..].iter().all(u8::is_ascii_digit));
            assert!(seen.insert(k), "id {id}");
        }
        assert!(!seen.contains(&key(ABSENT_BASE)));
    }

    #[test]
    fn values_carry_their_writer() {
        let mut v = Vec::new();
        fill_value(&mut v, 42, 7 << 40 | 3, 100);
        assert_eq!(v.len(), 100);
        let head = read_head(&v).unwrap();
        assert_eq!((head.id, head.version, head.len), (42, 7 << 40 | 3, 100));
        let mut again = Vec::new();
        fill_value(&mut again, 42, 7 << 40 | 3, 100);
        assert_eq!(v, again, "deterministic");
        assert_eq!(read_head(&v[..15]), None);
    }
}
