//! A prefix extractor names the part of a key that prefix scans ask about, so a table's
//! filter can also answer "does this table hold any key with this prefix?".
//!
//! With [`Options::prefix_extractor`](crate::Options::prefix_extractor) set, every new
//! table's filter gets, besides each whole key, the hash of each distinct prefix of its
//! keys. [`Db::scan_prefix`](crate::Db::scan_prefix) (and a scan whose two bounds have
//! the same prefix) then asks each table's filter about the prefix and skips the table
//! on "absent": no index seek, no data-block read.
//!
//! ```text
//!  keys in a table        filter holds (FixedPrefix::new(4))
//!  user0001:name   ──┐    hash("user0001:name"), hash("user0001:mail"), ...
//!  user0001:mail   ──┼──► hash("user")            one prefix hash for all three
//!  user0002:name   ──┘
//!  abc             ──────► hash("abc") only: shorter than the prefix, out of the domain
//! ```
//!
//! Keys shorter than the prefix are handled as RocksDB handles keys outside an
//! extractor's domain: they go into the filter whole, contribute no prefix, and a
//! prefix scan for a prefix outside the domain (shorter than the fixed length) reads
//! every table whose key range it touches, without asking any filter.
//!
//! Each table records its extractor's [`name`](PrefixExtractor::name) (table format
//! version 2): a table written with another extractor, or with none, is scanned without
//! its prefix filter, because its filter never saw these prefixes.

use std::fmt;

/// Maps a key to the prefix that prefix scans and the prefix filter use.
///
/// The contract, as RocksDB's for its `SliceTransform`:
///
/// * `transform(key)` is a prefix of `key`, for every key `in_domain`;
/// * order is kept: for in-domain keys `a <= b`, `transform(a) <= transform(b)`, and
///   every key between two in-domain keys with the same prefix is in the domain too
///   (so a range whose two ends share a prefix holds only keys with that prefix);
/// * the same name always means the same mapping (the name is recorded in tables).
pub trait PrefixExtractor: Send + Sync + fmt::Debug {
    /// A stable, non-empty name, recorded in each table whose filter holds these
    /// prefixes (`Options::validate` refuses an empty one: tables without an
    /// extractor record "").
    fn name(&self) -> &str;

    /// Whether `key` has a prefix under this extractor.
    fn in_domain(&self, key: &[u8]) -> bool;

    /// The prefix of an in-domain `key`.
    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8];

    /// The prefix of `key`, or `None` outside the domain.
    fn prefix_of<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        self.in_domain(key).then(|| self.transform(key))
    }

    /// Whether every key that starts with `prefix` is in the domain with the prefix
    /// `transform(prefix)`: what lets [`Db::scan_prefix`](crate::Db::scan_prefix) ask
    /// each table's filter about that prefix. The contract above does not imply it: an
    /// extractor taking "the first 3 bytes, or the whole key if shorter" maps `ab` to
    /// `ab` but `abc1` to `abc`, so a filter asked about `ab` would wrongly rule out a
    /// table holding `abc1`. `false`, the default, is always safe: such a prefix scan
    /// reads every table its range touches (a range whose two bounds share a prefix
    /// still uses the filter, which the contract does make safe).
    fn covers_extensions(&self, prefix: &[u8]) -> bool {
        let _ = prefix;
        false
    }
}

/// The first `n` bytes of a key are its prefix; shorter keys have none.
///
/// ```
/// use bloomkv_kv::{FixedPrefix, PrefixExtractor};
/// let p = FixedPrefix::new(4);
/// assert_eq!(p.prefix_of(b"user0001"), Some(&b"user"[..]));
/// assert_eq!(p.prefix_of(b"abc"), None); // shorter than the prefix
/// assert_eq!(p.name(), "bloomkv.FixedPrefix.4");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedPrefix {
    len: usize,
    name: String,
}

impl FixedPrefix {
    /// An extractor taking the first `len` bytes of each key.
    pub fn new(len: usize) -> FixedPrefix {
        FixedPrefix {
            len,
            name: format!("bloomkv.FixedPrefix.{len}"),
        }
    }

    /// The prefix length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the prefix is empty (every key has the same, empty, prefix).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl PrefixExtractor for FixedPrefix {
    fn name(&self) -> &str {
        &self.name
    }

    fn in_domain(&self, key: &[u8]) -> bool {
        key.len() >= self.len
    }

    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        &key[..self.len.min(key.len())]
    }

    /// A prefix at least `len` long: its extensions share its first `len` bytes.
    fn covers_extensions(&self, prefix: &[u8]) -> bool {
        prefix.len() >= self.len
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None` if there
/// is none (the prefix is empty or all `0xff`): the exclusive end of a prefix scan.
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_bounds_exactly_the_keys_with_the_prefix() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
        for p in [&b"ab"[..], b"a\xff", b"\x00"] {
            let end = prefix_successor(p).unwrap();
            let mut longest = p.to_vec();
            longest.extend_from_slice(&[0xff; 8]);
            assert!(longest < end && p < &end[..]);
        }
    }

    #[test]
    fn fixed_prefix_domain_is_keys_at_least_n_long() {
        let p = FixedPrefix::new(3);
        assert!(!p.in_domain(b"ab"));
        assert_eq!(p.prefix_of(b"abc"), Some(&b"abc"[..]));
        assert_eq!(p.prefix_of(b"abcdef"), Some(&b"abc"[..]));
        assert_eq!(FixedPrefix::new(0).prefix_of(b""), Some(&b""[..]));
        assert!(p.covers_extensions(b"abc") && p.covers_extensions(b"abcd"));
        assert!(!p.covers_extensions(b"ab"));
    }
}
