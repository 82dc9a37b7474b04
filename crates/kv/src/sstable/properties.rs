//! The properties block: what a table holds, readable without touching its data.
//!
//! The store uses the key range to skip tables a key cannot be in, and the counts for
//! compaction and statistics; `bloomkv inspect` prints them. The filter policy's name
//! tells a reader which decoder may open the filter block.
//!
//! ```text
//!  +----------------+--------------+----------+--------------+----------+
//!  | format_version | smallest_len | smallest | largest_len  | largest  |
//!  | u32 LE         | varint       | bytes    | varint       | bytes    |
//!  +----------------+--------------+----------+--------------+----------+
//!  +---------+-----------+---------+-------------+-----------+
//!  | entries | deletions | max_seq | data_blocks | data_size |   (all varint u64)
//!  +---------+-----------+---------+-------------+-----------+
//!  +-----------------+-------------------------+--------------+
//!  | policy_name_len | policy_name (UTF-8)     | bits_per_key |
//!  | varint          | empty when no filter    | f64 LE       |
//!  +-----------------+-------------------------+--------------+
//!  +--------------------+---------------------------------+
//!  | extractor_name_len | extractor_name (UTF-8)          |   format version 2 on;
//!  | varint             | empty: no prefixes in the filter|   absent in version 1
//!  +--------------------+---------------------------------+
//!  +---------------------+-------------------+
//!  | range_filter_offset | range_filter_size |   format version 4 on; both 0 when
//!  | varint              | varint            |   the table has no range filter
//!  +---------------------+-------------------+
//!  +---------------------+-------------------+
//!  | range_dels_offset   | range_dels_size   |   format version 7 on: the range
//!  | varint              | varint            |   tombstone block (never both 0 in
//!  +---------------------+-------------------+   version 7; both 0 in version 8
//!  +------------+                                  when there is none)
//!  | partitions |   format version 8 on: how many partitions the index and
//!  | varint     |   filter are cut into (at least 1; `partition.rs`)
//!  +------------+
//! ```
//!
//! In a version 7 table `smallest` and `largest` span the range tombstones too
//! (`largest` is at least the last tombstone's exclusive end), so a lookup or a
//! compaction that places the table by its key range meets its tombstones.
//!
//! The range filter block (written between the index and the properties) is found
//! only through this handle; a reader checks that it lies inside the metadata.
//!
//! The extractor's name says which prefixes the filter also answers for: a reader
//! configured with another extractor (or none) must not ask the filter about its
//! prefixes, and scans the table without that shortcut.
//!
//! `format_version` must be one this build reads
//! (`OLDEST_FORMAT_VERSION ..= FORMAT_VERSION` of the footer).
//!
//! `data_size` counts the data blocks' bytes including their trailers and, in format
//! version 5, the padding in front of aligned blocks. The block must
//! be consumed exactly; trailing bytes are corruption. The counts must fit the bytes:
//! a data block costs at least [`MIN_DATA_BLOCK_LEN`] bytes and an entry at least
//! [`MIN_ENTRY_LEN`] before compression, so a table cannot claim more of either than
//! `data_size` holds (`capacity`: where blocks may be LZ4, what the stored bytes
//! can expand to; the reader also checks `data_size` against where the metadata
//! starts).

use bytes::Bytes;

use super::compression::{
    LZ4_MAX_EXPANSION, MAX_ZSTD_RAW_LEN, MIN_LZ4_BLOCK_LEN, MIN_ZSTD_BLOCK_LEN,
};
use super::footer::{
    BlockHandle, Footer, COMPRESSED_FORMAT_VERSION, FORMAT_VERSION, OLDEST_FORMAT_VERSION,
    PARTITIONED_FORMAT_VERSION, RANGE_DEL_FORMAT_VERSION, RANGE_FILTER_FORMAT_VERSION,
    ZSTD_FORMAT_VERSION,
};
use super::{BlockKind, Malformed};
use crate::coding::{get_varint, get_varint_usize, put_varint, u32_at, u64_at};
use crate::types::SeqNo;

/// The smallest encoded entry: shared, unshared and value lengths, seq (one-byte
/// varints each) and the kind byte.
pub(crate) const MIN_ENTRY_LEN: u64 = 5;

/// The smallest data block on disk: one entry, one restart offset, the restart
/// count, and the 5-byte trailer.
pub(crate) const MIN_DATA_BLOCK_LEN: u64 = MIN_ENTRY_LEN + 4 + 4 + 5;

/// How many entries and data blocks `data_size` stored bytes can hold at most, in a
/// table of `format_version`. From version 3 on a data block may be LZ4: its entries
/// are then bounded by what its stored bytes expand to (LZ4's 255× at most), not by
/// the stored bytes themselves — the versions of one key that snapshots keep pack
/// into about 4 stored bytes each — and its smallest form is the 4-byte length, one
/// byte of LZ4 and the trailer.
///
/// From version 6 on a block may be ZSTD, whose expansion has no such ratio (one
/// run-length block unpacks to the whole block): a block is then bounded by the longest
/// a reader unpacks, and its smallest form is [`MIN_ZSTD_BLOCK_LEN`].
fn capacity(format_version: u32, data_size: u64) -> (u64, u64) {
    if format_version >= ZSTD_FORMAT_VERSION {
        let blocks = data_size / MIN_ZSTD_BLOCK_LEN.min(MIN_LZ4_BLOCK_LEN);
        let per_block = (MAX_ZSTD_RAW_LEN as u64 / MIN_ENTRY_LEN)
            .max(MIN_LZ4_BLOCK_LEN.saturating_mul(LZ4_MAX_EXPANSION) / MIN_ENTRY_LEN);
        (
            blocks
                .saturating_mul(per_block)
                .max(data_size.saturating_mul(LZ4_MAX_EXPANSION) / MIN_ENTRY_LEN),
            blocks,
        )
    } else if format_version >= COMPRESSED_FORMAT_VERSION {
        (
            data_size.saturating_mul(LZ4_MAX_EXPANSION) / MIN_ENTRY_LEN,
            data_size / MIN_LZ4_BLOCK_LEN,
        )
    } else {
        (data_size / MIN_ENTRY_LEN, data_size / MIN_DATA_BLOCK_LEN)
    }
}

/// What a table says about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct TableProperties {
    /// The table format version the table was written with.
    pub format_version: u32,
    /// The smallest user key.
    pub smallest: Bytes,
    /// The largest user key.
    pub largest: Bytes,
    /// Entries (puts and tombstones).
    pub entries: u64,
    /// Tombstones among them.
    pub deletions: u64,
    /// The largest sequence number of any entry.
    pub max_seq: SeqNo,
    /// Data blocks in the file.
    pub data_blocks: u64,
    /// Bytes of data blocks, trailers included.
    pub data_size: u64,
    /// The name of the filter policy that built the filter block; empty without one.
    pub filter_policy: String,
    /// Bits per key of that policy (0 without one).
    pub bits_per_key: f64,
    /// The name of the prefix extractor whose prefixes were added to the filter; empty
    /// when the filter holds whole keys only (always empty in version 1 tables).
    pub prefix_extractor: String,
    /// Where the range filter block is (version 4 tables written with one); `None`
    /// without one.
    pub range_filter: Option<BlockHandle>,
    /// Where the range tombstone block is (version 7 tables, which always have one;
    /// version 8 tables that have one).
    pub range_dels: Option<BlockHandle>,
    /// How many partitions the index and filter are cut into (version 8 tables, at
    /// least 1); 0 for a table whose index and filter are whole.
    pub partitions: u64,
}

impl TableProperties {
    /// Encodes the properties block (without trailer).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.smallest.len() + self.largest.len());
        out.extend_from_slice(&self.format_version.to_le_bytes());
        for key in [&self.smallest, &self.largest] {
            put_varint(&mut out, key.len() as u64);
            out.extend_from_slice(key);
        }
        for v in [
            self.entries,
            self.deletions,
            self.max_seq,
            self.data_blocks,
            self.data_size,
        ] {
            put_varint(&mut out, v);
        }
        put_varint(&mut out, self.filter_policy.len() as u64);
        out.extend_from_slice(self.filter_policy.as_bytes());
        out.extend_from_slice(&self.bits_per_key.to_le_bytes());
        if self.format_version >= 2 {
            put_varint(&mut out, self.prefix_extractor.len() as u64);
            out.extend_from_slice(self.prefix_extractor.as_bytes());
        }
        if self.format_version >= RANGE_FILTER_FORMAT_VERSION {
            self.range_filter
                .unwrap_or_default()
                .encode_varint(&mut out);
        }
        if self.format_version >= RANGE_DEL_FORMAT_VERSION {
            self.range_dels.unwrap_or_default().encode_varint(&mut out);
        }
        if self.format_version >= PARTITIONED_FORMAT_VERSION {
            put_varint(&mut out, self.partitions);
        }
        out
    }

    /// Decodes and validates a properties block.
    pub(crate) fn decode(buf: &[u8]) -> Result<TableProperties, Malformed> {
        let mut pos = 0;
        let format_version = u32_at(buf, 0).ok_or("too short for a format version")?;
        pos += 4;
        let mut bytes_field = |what: &str| -> Result<&[u8], Malformed> {
            let len = get_varint_usize(buf, &mut pos)
                .ok_or_else(|| Malformed(format!("bad {what} length")))?;
            let field = pos
                .checked_add(len)
                .and_then(|end| buf.get(pos..end))
                .ok_or_else(|| Malformed(format!("{what} runs past the end of the block")))?;
            pos += len;
            Ok(field)
        };
        let smallest = Bytes::copy_from_slice(bytes_field("smallest key")?);
        let largest = Bytes::copy_from_slice(bytes_field("largest key")?);
        let mut numbers = [0u64; 5];
        for (n, name) in numbers.iter_mut().zip([
            "entries",
            "deletions",
            "max_seq",
            "data_blocks",
            "data_size",
        ]) {
            *n = get_varint(buf, &mut pos).ok_or_else(|| Malformed(format!("bad {name}")))?;
        }
        let [entries, deletions, max_seq, data_blocks, data_size] = numbers;
        let filter_policy = name_field(buf, &mut pos, "filter policy name")?;
        let bits_per_key = f64::from_bits(u64_at(buf, pos).ok_or("missing bits_per_key")?);
        pos += 8;
        let prefix_extractor = if format_version >= 2 {
            name_field(buf, &mut pos, "prefix extractor name")?
        } else {
            String::new()
        };
        let range_filter = if format_version >= RANGE_FILTER_FORMAT_VERSION {
            let h = BlockHandle::decode_varint(buf, &mut pos).ok_or("bad range filter handle")?;
            (h != BlockHandle::default()).then_some(h)
        } else {
            None
        };
        let range_dels = if format_version >= RANGE_DEL_FORMAT_VERSION {
            let h = BlockHandle::decode_varint(buf, &mut pos)
                .ok_or("bad range tombstone block handle")?;
            if h != BlockHandle::default() {
                Some(h)
            } else if format_version >= PARTITIONED_FORMAT_VERSION {
                None
            } else {
                return Err("a version 7 table without its range tombstone block".into());
            }
        } else {
            None
        };
        let partitions = if format_version >= PARTITIONED_FORMAT_VERSION {
            match get_varint(buf, &mut pos) {
                Some(n) if n >= 1 => n,
                _ => return Err("bad partition count".into()),
            }
        } else {
            0
        };
        if pos != buf.len() {
            return Err(Malformed(format!(
                "{} unexpected bytes after the properties",
                buf.len() - pos
            )));
        }
        let props = TableProperties {
            format_version,
            smallest,
            largest,
            entries,
            deletions,
            max_seq,
            data_blocks,
            data_size,
            filter_policy,
            bits_per_key,
            prefix_extractor,
            range_filter,
            range_dels,
            partitions,
        };
        props.validate()?;
        Ok(props)
    }

    fn validate(&self) -> Result<(), Malformed> {
        let (max_entries, max_blocks) = capacity(self.format_version, self.data_size);
        let problem = if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&self.format_version) {
            "unknown table format version"
        } else if self.smallest > self.largest {
            "smallest key is greater than largest key"
        } else if self.entries == 0 || self.data_blocks == 0 {
            "a table holds at least one entry in one data block"
        } else if self.deletions > self.entries {
            "more deletions than entries"
        } else if self.data_blocks > self.entries {
            "more data blocks than entries"
        } else if self.entries > max_entries {
            "more entries than data_size bytes can hold"
        } else if self.data_blocks > max_blocks {
            "more data blocks than data_size bytes can hold"
        } else if self.partitions > self.data_blocks {
            "more partitions than data blocks"
        } else if !(self.bits_per_key.is_finite() && self.bits_per_key >= 0.0) {
            "bits_per_key is not a finite non-negative number"
        } else {
            return Ok(());
        };
        Err(problem.into())
    }
}

/// A varint length and that many bytes of UTF-8 at `*pos`.
fn name_field(buf: &[u8], pos: &mut usize, what: &str) -> Result<String, Malformed> {
    let len = get_varint_usize(buf, pos).ok_or_else(|| Malformed(format!("bad {what} length")))?;
    let name = pos
        .checked_add(len)
        .and_then(|end| buf.get(*pos..end))
        .ok_or_else(|| Malformed(format!("{what} runs past the end of the block")))?;
    *pos += len;
    std::str::from_utf8(name)
        .map(str::to_owned)
        .map_err(|_| Malformed(format!("{what} is not UTF-8")))
}

/// Where the properties contradict the footer (`meta_end`: where the footer starts),
/// as the block to blame, its offset and why: another format version, or a filter
/// policy named for a table the footer gives no filter. `Table::open` and `verify`
/// both refuse these.
pub(crate) fn disagrees_with_footer(
    footer: &Footer,
    properties: &TableProperties,
    meta_end: u64,
) -> Option<(BlockKind, u64, Malformed)> {
    if properties.format_version != footer.version {
        return Some((
            BlockKind::Properties,
            footer.properties.offset,
            Malformed(format!(
                "format version {} disagrees with the footer's {}",
                properties.format_version, footer.version
            )),
        ));
    }
    if footer.filter.is_none() && !properties.filter_policy.is_empty() {
        return Some((
            BlockKind::Footer,
            meta_end,
            "properties name a filter policy but the footer has no filter".into(),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> TableProperties {
        TableProperties {
            format_version: 1,
            smallest: Bytes::from_static(b"apple"),
            largest: Bytes::from_static(b"zebra\xff"),
            entries: 1000,
            deletions: 10,
            max_seq: 1 << 40,
            data_blocks: 30,
            data_size: 123_456,
            filter_policy: "bloomkv.test".into(),
            bits_per_key: 10.0,
            prefix_extractor: String::new(),
            range_filter: None,
            range_dels: None,
            partitions: 0,
        }
    }

    #[test]
    fn version_4_records_the_range_filter_handle() {
        let handle = BlockHandle {
            offset: 5000,
            size: 321,
        };
        for range_filter in [Some(handle), None] {
            let v4 = TableProperties {
                format_version: 4,
                range_filter,
                range_dels: None,
                ..sample()
            };
            assert_eq!(TableProperties::decode(&v4.encode()), Ok(v4.clone()));
        }
        // Older versions have no such field: the same bytes labelled 3 are refused.
        let mut as_v3 = TableProperties {
            format_version: 4,
            range_filter: Some(handle),
            range_dels: None,
            ..sample()
        }
        .encode();
        as_v3[..4].copy_from_slice(&3u32.to_le_bytes());
        assert!(TableProperties::decode(&as_v3).is_err());
    }

    #[test]
    fn version_2_records_the_prefix_extractor_and_version_1_has_none() {
        let v2 = TableProperties {
            format_version: 2,
            prefix_extractor: "bloomkv.FixedPrefix.4".into(),
            ..sample()
        };
        assert_eq!(TableProperties::decode(&v2.encode()), Ok(v2.clone()));
        // A version 1 block ends at bits_per_key; the same bytes with the version
        // raised to 2 lack the extractor field and are refused.
        let v1 = sample().encode();
        let mut as_v2 = v1.clone();
        as_v2[..4].copy_from_slice(&2u32.to_le_bytes());
        assert!(TableProperties::decode(&as_v2).is_err());
        // Version 3 (compressed data blocks) keeps version 2's properties; version 4
        // adds the range filter handle, so version 2's bytes labelled 4 are refused.
        let mut as_v3 = v2.encode();
        as_v3[..4].copy_from_slice(&3u32.to_le_bytes());
        assert!(TableProperties::decode(&as_v3).is_ok());
        let mut as_v4 = v2.encode();
        as_v4[..4].copy_from_slice(&4u32.to_le_bytes());
        assert!(TableProperties::decode(&as_v4).is_err());
    }

    /// Raw blocks (versions 1 and 2) hold at most one entry per 5 stored bytes; where
    /// blocks may be LZ4 (version 3 on) the bound is what LZ4 can expand them to, and
    /// still a bound.
    #[test]
    fn version_7_records_the_range_tombstone_handle_and_needs_it() {
        let handle = BlockHandle {
            offset: 300,
            size: 41,
        };
        let p = TableProperties {
            format_version: 7,
            range_dels: Some(handle),
            ..sample()
        };
        assert_eq!(TableProperties::decode(&p.encode()), Ok(p.clone()));
        // A version 7 table without the handle is damaged, not a table without
        // tombstones: reading it without them would bring deleted keys back.
        let without = TableProperties {
            range_dels: None,
            ..p.clone()
        };
        assert!(TableProperties::decode(&without.encode()).is_err());
        // Version 6's bytes end before the handle: the same bytes labelled 6 are
        // refused (trailing bytes).
        let mut bytes = p.encode();
        bytes[..4].copy_from_slice(&6u32.to_le_bytes());
        assert!(TableProperties::decode(&bytes).is_err());
    }

    #[test]
    fn version_8_records_the_partition_count_after_optional_range_tombstones() {
        let handle = BlockHandle {
            offset: 300,
            size: 41,
        };
        for range_dels in [Some(handle), None] {
            let p = TableProperties {
                format_version: 8,
                range_dels,
                partitions: 3,
                ..sample()
            };
            assert_eq!(TableProperties::decode(&p.encode()), Ok(p.clone()));
        }
        let none = TableProperties {
            format_version: 8,
            partitions: 0,
            ..sample()
        };
        assert!(TableProperties::decode(&none.encode()).is_err());
        let too_many = TableProperties {
            format_version: 8,
            partitions: 31,
            ..sample()
        };
        assert!(TableProperties::decode(&too_many.encode()).is_err());
        // Version 7's bytes end before the count: the same bytes labelled 7 are refused.
        let mut bytes = TableProperties {
            format_version: 8,
            range_dels: Some(handle),
            partitions: 2,
            ..sample()
        }
        .encode();
        bytes[..4].copy_from_slice(&7u32.to_le_bytes());
        assert!(TableProperties::decode(&bytes).is_err());
    }

    #[test]
    fn the_entry_count_must_fit_the_stored_bytes_as_the_version_stores_them() {
        let decode = |format_version: u32, entries: u64, data_blocks: u64| {
            let p = TableProperties {
                format_version,
                entries,
                data_blocks,
                data_size: 1000,
                prefix_extractor: String::new(),
                range_filter: None,
                // Version 7 tables always name their range tombstone block.
                range_dels: (format_version >= RANGE_DEL_FORMAT_VERSION)
                    .then_some(BlockHandle { offset: 1, size: 2 }),
                partitions: u64::from(format_version >= PARTITIONED_FORMAT_VERSION),
                ..sample()
            };
            TableProperties::decode(&p.encode()).map(|_| ())
        };
        for v in 1..=2 {
            assert_eq!(decode(v, 200, 55), Ok(()));
            assert!(decode(v, 201, 10).is_err(), "version {v}");
            assert!(decode(v, 200, 56).is_err(), "version {v}");
        }
        for v in 3..ZSTD_FORMAT_VERSION {
            assert_eq!(decode(v, 201, 100), Ok(()), "version {v}");
            assert_eq!(decode(v, 51_000, 100), Ok(()), "version {v}");
            assert!(decode(v, 51_001, 100).is_err(), "version {v}");
            assert!(decode(v, 51_000, 101).is_err(), "version {v}");
        }
        // Where blocks may be ZSTD, each of at most 100 blocks (10 stored bytes each
        // at least) may unpack to the longest block a reader accepts.
        for v in ZSTD_FORMAT_VERSION..=FORMAT_VERSION {
            let most = 100 * (MAX_ZSTD_RAW_LEN as u64 / MIN_ENTRY_LEN);
            assert_eq!(decode(v, 51_001, 100), Ok(()), "version {v}");
            assert_eq!(decode(v, most, 100), Ok(()), "version {v}");
            assert!(decode(v, most + 1, 100).is_err(), "version {v}");
            assert!(decode(v, 51_000, 101).is_err(), "version {v}");
        }
    }

    #[test]
    fn properties_round_trip() {
        let p = sample();
        assert_eq!(TableProperties::decode(&p.encode()), Ok(p));
        let q = TableProperties {
            filter_policy: String::new(),
            bits_per_key: 0.0,
            smallest: Bytes::new(),
            ..sample()
        };
        assert_eq!(TableProperties::decode(&q.encode()), Ok(q));
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(TableProperties::decode(&bytes[..len]).is_err(), "len {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(TableProperties::decode(&longer).is_err());
    }

    #[test]
    fn inconsistent_properties_are_refused() {
        let swapped = TableProperties {
            smallest: Bytes::from_static(b"z"),
            largest: Bytes::from_static(b"a"),
            ..sample()
        };
        assert!(TableProperties::decode(&swapped.encode()).is_err());
        let nan = TableProperties {
            bits_per_key: f64::NAN,
            ..sample()
        };
        assert!(TableProperties::decode(&nan.encode()).is_err());
        for format_version in [0, FORMAT_VERSION + 1, u32::MAX] {
            let future = TableProperties {
                format_version,
                ..sample()
            };
            assert!(TableProperties::decode(&future.encode()).is_err());
        }
    }
}
