//! Checking a table file block by block, for `bloomkv verify` and tests.
//!
//! Opening a table stops at the first problem; a check goes on and lists them all:
//! every block's checksum and structure, the data blocks tiling the file up to the
//! metadata (in format version 5 with zero padding up to page boundaries), keys
//! increasing across blocks and within their index separators, and the properties
//! agreeing with what the data holds. A filter block is checked by its trailer's CRC
//! (its own decoder is the filter policy's, used when the table opens); a range filter
//! block by its trailer and its own decoder. A partitioned table (format version 8) has
//! its top level decoded, every index partition read and checked against it (the data
//! blocks are then walked through their entries, as through a whole index), and every
//! filter partition checked by its trailer.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use bloomkv_filter::RangeFilterReader;
use bytes::Bytes;

use super::file::{read_footer, TableFile};
use super::footer::{Footer, ALIGNED_FORMAT_VERSION, FOOTER_SIZE, PARTITIONED_FORMAT_VERSION};
use super::format::padding_before;
use super::index::IndexBlock;
use super::partition::{Bounds, Partitions, TopLevel};
use super::properties::{disagrees_with_footer, TableProperties};
use super::BlockKind;
use crate::error::Error;
use crate::fs::RandomAccessFile;
use crate::range_del::Fragments;
use crate::stats::Counters;
use crate::types::ValueKind;

/// One block that failed a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockProblem {
    /// Which part of the file.
    pub kind: BlockKind,
    /// The block's offset in the file.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for BlockProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at offset {}: {}",
            self.kind, self.offset, self.reason
        )
    }
}

/// Checks a table file without opening it as a [`Table`](super::Table): no filter policy
/// is needed and every problem is listed (an empty list means the file is sound). Its
/// reads are not charged to any store's counters.
pub fn check_file(file: Arc<dyn RandomAccessFile>, path: PathBuf) -> Vec<BlockProblem> {
    check_table_file(&TableFile::new(file, path, Arc::new(Counters::default())))
}

/// What a walk over the data blocks found.
#[derive(Default)]
struct Tally {
    entries: u64,
    deletions: u64,
    max_seq: u64,
    smallest: Option<Bytes>,
    largest: Option<Bytes>,
    complete: bool,
}

pub(crate) fn check_table_file(file: &TableFile) -> Vec<BlockProblem> {
    let mut problems = Vec::new();
    let mut report = |kind: BlockKind, offset: u64, reason: String| {
        // A read's corruption error already names the block ("data block at offset
        // 0: …"), which `BlockProblem`'s display adds itself: keep only the why.
        let named = format!("{kind} at offset {offset}: ");
        let reason = match reason.strip_prefix(&named) {
            Some(why) => why.to_string(),
            None => reason,
        };
        problems.push(BlockProblem {
            kind,
            offset,
            reason,
        })
    };
    let file_size = match file.size() {
        Ok(n) => n,
        Err(e) => {
            report(BlockKind::Footer, 0, reason(e));
            return problems;
        }
    };
    let footer = match read_footer(file, file_size) {
        Ok(f) => f,
        Err(e) => {
            report(
                BlockKind::Footer,
                file_size.saturating_sub(FOOTER_SIZE as u64),
                reason(e),
            );
            return problems;
        }
    };
    if let Some(h) = footer.filter {
        if let Err(e) = file.read_block(h, BlockKind::Filter) {
            report(BlockKind::Filter, h.offset, reason(e));
        }
    }
    let p = footer.properties;
    let properties = file.read_block(p, BlockKind::Properties).and_then(|bytes| {
        TableProperties::decode(&bytes)
            .map_err(|m| file.corruption(BlockKind::Properties, p.offset, m))
    });
    let properties = properties
        .map_err(|e| report(BlockKind::Properties, p.offset, reason(e)))
        .ok();
    let meta_end = file_size - FOOTER_SIZE as u64; // `read_footer` checked the size
    if let Some((kind, offset, why)) = properties
        .as_ref()
        .and_then(|props| disagrees_with_footer(&footer, props, meta_end))
    {
        report(kind, offset, why.0);
    }
    let meta_start = footer.meta_start();
    // The range filter block has no policy to look up: its own decoder checks it whole.
    // Its handle comes from the properties, not the footer, so it is bounded here
    // before it sizes a read (as `Table::open` bounds it).
    if let Some(h) = properties.as_ref().and_then(|p| p.range_filter) {
        let opened = if h.lies_within(meta_start, meta_end) {
            file.read_block(h, BlockKind::Filter)
        } else {
            Err(file.corruption(
                BlockKind::Filter,
                h.offset,
                "block outside the metadata".into(),
            ))
        }
        .and_then(|bytes| {
            RangeFilterReader::open(&bytes)
                .map(drop)
                .map_err(|e| file.corruption(BlockKind::Filter, h.offset, e.to_string().into()))
        });
        if let Err(e) = opened {
            report(BlockKind::Filter, h.offset, reason(e));
        }
    }
    // The range tombstone block (version 7): checked whole, as `Table::open` checks it.
    let mut range_dels = None;
    if let Some(h) = properties.as_ref().and_then(|p| p.range_dels) {
        let kind = BlockKind::RangeTombstones;
        let opened = if h.lies_within(meta_start, meta_end) {
            file.read_block(h, kind)
        } else {
            Err(file.corruption(kind, h.offset, "block outside the metadata".into()))
        }
        .and_then(|bytes| {
            Fragments::decode(&bytes).map_err(|m| file.corruption(kind, h.offset, m.into()))
        });
        match opened {
            Ok(f) => range_dels = Some(f),
            Err(e) => report(kind, h.offset, reason(e)),
        }
    }
    let ix = footer.index;
    let (index, data_end) = if footer.version >= PARTITIONED_FORMAT_VERSION {
        let Some(props) = properties.as_ref() else {
            return problems; // reported: the partitions cannot be placed without them
        };
        match check_partitions(file, &footer, props, meta_start) {
            Ok(index) => (index, props.data_size),
            Err((kind, offset, e)) => {
                report(kind, offset, reason(e));
                return problems;
            }
        }
    } else {
        let index = file.read_block(ix, BlockKind::Index).and_then(|bytes| {
            IndexBlock::decode(bytes, meta_start, footer.version >= 2)
                .map_err(|m| file.corruption(BlockKind::Index, ix.offset, m))
        });
        let Ok(index) = index.map_err(|e| report(BlockKind::Index, ix.offset, reason(e))) else {
            return problems;
        };
        (index, meta_start)
    };

    let layout = Layout {
        multi_version: footer.version >= 2,
        padded: footer.version >= ALIGNED_FORMAT_VERSION,
    };
    let mut tally = check_data_blocks(file, &index, data_end, layout, &mut report);
    if let Some((start, end)) = range_dels.as_ref().and_then(|r| r.extent()) {
        // The table's range and newest number span its tombstones too.
        let last = crate::range_del::last_covered(end);
        tally.smallest = tally.smallest.map(|s| s.min(start.clone()));
        tally.largest = tally.largest.map(|l| l.max(last));
        tally.max_seq = tally
            .max_seq
            .max(range_dels.as_ref().map_or(0, Fragments::max_seq));
    }
    if let (Some(props), true) = (properties, tally.complete) {
        let mut disagree = |what: &str, recorded: String, found: String| {
            if recorded != found {
                report(
                    BlockKind::Properties,
                    p.offset,
                    format!("{what}: recorded {recorded}, data holds {found}"),
                );
            }
        };
        disagree(
            "entries",
            props.entries.to_string(),
            tally.entries.to_string(),
        );
        disagree(
            "deletions",
            props.deletions.to_string(),
            tally.deletions.to_string(),
        );
        disagree(
            "max_seq",
            props.max_seq.to_string(),
            tally.max_seq.to_string(),
        );
        disagree(
            "data_blocks",
            props.data_blocks.to_string(),
            index.len().to_string(),
        );
        if footer.version < PARTITIONED_FORMAT_VERSION {
            disagree(
                "data_size",
                props.data_size.to_string(),
                meta_start.to_string(),
            );
        }
        let show = |k: Option<Bytes>| k.map_or("none".into(), |k| super::show_key(&k));
        disagree(
            "smallest key",
            super::show_key(&props.smallest),
            show(tally.smallest),
        );
        disagree(
            "largest key",
            super::show_key(&props.largest),
            show(tally.largest),
        );
    }
    problems
}

/// A partitioned table's top level and partitions: the top level decoded against the
/// properties, each filter partition's trailer checked, each index partition read and
/// checked against the top level; the partitions' entries as one whole index. The
/// first partition must start where the data blocks end (`data_size`).
fn check_partitions(
    file: &TableFile,
    footer: &Footer,
    props: &TableProperties,
    meta_start: u64,
) -> Result<IndexBlock, (BlockKind, u64, Error)> {
    let ix = footer.index;
    let bounds = Bounds {
        data_end: props.data_size,
        meta_start,
        data_blocks: props.data_blocks,
        partitions: props.partitions,
        has_filter: footer.filter.is_some(),
    };
    let top = file
        .read_block(ix, BlockKind::Index)
        .and_then(|bytes| {
            TopLevel::decode(bytes, &bounds)
                .map_err(|m| file.corruption(BlockKind::Index, ix.offset, m))
        })
        .map_err(|e| (BlockKind::Index, ix.offset, e))?;
    if let Some((first, _)) = top.handles(0) {
        if first.offset != props.data_size {
            let why = format!(
                "the first partition starts at {} but the data blocks end at {}",
                first.offset, props.data_size
            );
            return Err((
                BlockKind::Index,
                first.offset,
                file.corruption(BlockKind::Index, first.offset, why.into()),
            ));
        }
    }
    for p in 0..top.len() {
        if let Some((_, Some(h))) = top.handles(p) {
            file.read_block(h, BlockKind::Filter)
                .map_err(|e| (BlockKind::Filter, h.offset, e))?;
        }
    }
    Partitions::new(top, None, None, props.data_size, props.data_blocks, None)
        .whole_index(file)
        .map_err(|e| (BlockKind::Index, ix.offset, e))
}

/// What the format version allows between and within data blocks.
#[derive(Clone, Copy)]
struct Layout {
    /// A key's versions may continue into the next block (version 2 on).
    multi_version: bool,
    /// Zero padding may start a block on a page boundary (version 5 on).
    padded: bool,
}

/// Whether the `gap` bytes at `offset`, in front of a block of `block_len` bytes
/// (trailer included), are the padding the builder writes: exactly what the block
/// needed to touch no more pages than it must (so fewer than a page, ending on a page
/// boundary), all zero.
fn is_padding(file: &TableFile, offset: u64, gap: u64, block_len: u64) -> bool {
    gap == padding_before(offset, block_len)
        && file
            .read(offset, gap as usize)
            .is_ok_and(|bytes| bytes.iter().all(|&b| b == 0))
}

/// Reads every data block the index names; reports bad blocks and ordering problems.
fn check_data_blocks(
    file: &TableFile,
    index: &IndexBlock,
    meta_start: u64,
    layout: Layout,
    report: &mut impl FnMut(BlockKind, u64, String),
) -> Tally {
    let multi_version = layout.multi_version;
    let mut last_seq = 0;
    let mut tally = Tally {
        complete: true,
        ..Tally::default()
    };
    let mut expected_offset = 0;
    for i in 0..index.len() {
        let (Some(h), Some(separator)) = (index.handle(i), index.separator(i)) else {
            break;
        };
        let padded = layout.padded
            && h.offset > expected_offset
            && h.end().is_some_and(|end| {
                is_padding(
                    file,
                    expected_offset,
                    h.offset - expected_offset,
                    end - h.offset,
                )
            });
        if h.offset != expected_offset && !padded {
            report(
                BlockKind::Index,
                h.offset,
                format!(
                    "data block {i} starts at {} but the previous ends at {expected_offset}{}",
                    h.offset,
                    if layout.padded {
                        " (and the bytes between are not the zero padding that block needs to \
                         start a page)"
                    } else {
                        ""
                    }
                ),
            );
        }
        expected_offset = h.end().unwrap_or(u64::MAX);
        let block = match file.load_data_block(h) {
            Ok(b) => b,
            Err(e) => {
                report(BlockKind::Data, h.offset, reason(e));
                tally.complete = false;
                continue;
            }
        };
        let previous_separator = i.checked_sub(1).and_then(|j| index.separator(j));
        let mut empty = true;
        for entry in block {
            let entry = match entry {
                Ok(e) => e,
                Err(m) => {
                    report(BlockKind::Data, h.offset, m.0);
                    tally.complete = false;
                    break;
                }
            };
            empty = false;
            let key = &entry.key[..];
            // An older version of the previous entry's key (format version 2 only),
            // possibly the first entry of a block whose predecessor ended on that key.
            let older_version = multi_version
                && tally.largest.as_ref().is_some_and(|l| key == &l[..])
                && entry.seq < last_seq;
            let out_of_place = key > separator
                || previous_separator.is_some_and(|s| key < s || (key == s && !older_version))
                || tally
                    .largest
                    .as_ref()
                    .is_some_and(|l| key < &l[..] || (key == &l[..] && !older_version));
            last_seq = entry.seq;
            if out_of_place {
                report(
                    BlockKind::Data,
                    h.offset,
                    format!(
                        "key {} is out of order or outside its index range",
                        super::show_key(key)
                    ),
                );
                tally.complete = false;
                break;
            }
            tally.entries += 1;
            tally.deletions += u64::from(entry.kind == ValueKind::Delete);
            tally.max_seq = tally.max_seq.max(entry.seq);
            tally.smallest.get_or_insert_with(|| entry.key.clone());
            tally.largest = Some(entry.key);
        }
        if empty {
            report(BlockKind::Data, h.offset, "block holds no entry".into());
        }
    }
    if expected_offset != meta_start {
        report(
            BlockKind::Index,
            expected_offset,
            format!("data blocks end at {expected_offset} but the metadata starts at {meta_start}"),
        );
    }
    tally
}

/// The reason of a corruption (the file and block are reported beside it).
fn reason(e: Error) -> String {
    match e {
        Error::Corruption { reason, .. } => reason,
        other => other.to_string(),
    }
}
