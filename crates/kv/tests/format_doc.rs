//! docs/FORMAT.md checked against the encoders: every hex example in it is regenerated
//! from the code for the same tiny input, and the document's mechanically checkable
//! numbers (sizes, offsets, magic bytes, file names) are compared with what the code
//! writes. A changed encoder or an edited example that disagrees fails here.
//!
//! A hex example in FORMAT.md is a fenced block right after a line
//! `<!-- hex: NAME -->`. In it, a line holds bytes when it starts (after indentation)
//! with two-digit hex tokens separated by single spaces; anything after two spaces is
//! commentary. Lines that do not start with a byte are commentary too.

use std::path::Path;
use std::sync::Arc;

use bloomkv_filter::{BloomPolicy, FilterPolicy, RangeFilterBuilder, RangeFilterReader};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::manifest::{ManifestState, TableMeta};
use bloomkv_kv::range_del::{Fragments, RangeTombstone};
use bloomkv_kv::sstable::{TableBuilder, TableOptions};
use bloomkv_kv::{filename, wal, ValueKind, WriteBatch};
use bytes::Bytes;

fn format_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `<!-- hex: NAME -->` example in the document, with its bytes.
fn hex_examples(doc: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- hex: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "hex example {name}: no code block follows"
        );
        let mut bytes = Vec::new();
        for line in lines.by_ref().take_while(|l| !l.starts_with("```")) {
            let data = line.trim_start().split("  ").next().unwrap_or_default();
            let tokens: Vec<&str> = data.split(' ').collect();
            let is_byte = |t: &&str| t.len() == 2 && t.chars().all(|c| c.is_ascii_hexdigit());
            if !data.is_empty() && tokens.iter().all(is_byte) {
                bytes.extend(tokens.iter().map(|t| u8::from_str_radix(t, 16).unwrap()));
            }
        }
        out.push((name.to_string(), bytes));
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    let lines: Vec<String> = bytes
        .chunks(16)
        .map(|c| {
            c.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.join("\n")
}

/// The table of the data-block example: "apple" -> "red" (seq 7) and "apricot" ->
/// "orange" (seq 9), default block size and restart interval, with or without a filter.
fn example_table(filter: Option<Arc<dyn FilterPolicy>>) -> Vec<u8> {
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    let mut b = TableBuilder::new(
        fs.create(path).unwrap(),
        path.to_path_buf(),
        TableOptions {
            filter_policy: filter,
            ..TableOptions::default()
        },
    );
    b.add(b"apple", 7, ValueKind::Put, b"red").unwrap();
    b.add(b"apricot", 9, ValueKind::Put, b"orange").unwrap();
    b.finish().unwrap();
    fs.file_bytes(path).unwrap()
}

/// The write batch of the WAL example: put "k" = "v", delete "x", from sequence 5.
fn example_batch() -> Vec<u8> {
    let mut batch = WriteBatch::new();
    batch.put("k", "v");
    batch.delete("x");
    batch.encode(5).unwrap()
}

/// The manifest example: one L0 table 3 ("a".."c", 2 entries, max_seq 2), log 4 live.
fn example_manifest() -> Vec<u8> {
    let table = TableMeta {
        level: 0,
        number: 3,
        file_size: 200,
        smallest: Bytes::from_static(b"a"),
        largest: Bytes::from_static(b"c"),
        entries: 2,
        max_seq: 2,
        data_size: Some(150),
    };
    ManifestState::new(5, 2, 4, vec![table]).encode()
}

/// What each named example must be, from the encoders.
fn generate(name: &str) -> Option<Vec<u8>> {
    Some(match name {
        "data-block" => {
            let table = example_table(None);
            // One data block at offset 0; its contents end where the trailer begins,
            // and the index (the next block) starts right after the trailer.
            let (contents, _) = data_block_of(&table);
            contents
        }
        "table-without-filter" => example_table(None),
        "write-batch" => example_batch(),
        "wal-record" => {
            let mut out = Vec::new();
            wal::encode_record(&example_batch(), &mut out);
            out
        }
        "manifest" => example_manifest(),
        "write-batch-keyspace" => {
            let mut batch = WriteBatch::new();
            batch.put_in(bloomkv_kv::KeyspaceId::new(3), "k", "v");
            batch.delete("x");
            batch.encode(9).unwrap()
        }
        "write-batch-range" => {
            let mut batch = WriteBatch::new();
            batch.delete_range("a", "c");
            batch.encode(7).unwrap()
        }
        "range-tombstone-block" => {
            let t = |start: &'static str, end: &'static str, seq| RangeTombstone {
                start: start.into(),
                end: end.into(),
                seq,
            };
            Fragments::new([t("b", "f", 9), t("d", "h", 12)]).encode()
        }
        "range-filter-block" => {
            let mut b = RangeFilterBuilder::new(5.0, 4).unwrap();
            b.add_key(b"ab1");
            b.add_key(b"ab7");
            b.finish()
        }
        _ => return None,
    })
}

/// The first data block of `table` (contents, trailer), found through the footer.
fn data_block_of(table: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let footer = &table[table.len() - 64..];
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    // The index is the first metadata block after the data when there is no filter.
    let index_offset = u64_at(footer, 0) as usize;
    let data = &table[..index_offset];
    let (contents, trailer) = data.split_at(data.len() - 5);
    (contents.to_vec(), trailer.to_vec())
}

#[test]
fn every_hex_example_in_format_md_is_what_the_encoders_write() {
    let doc = format_md();
    let examples = hex_examples(&doc);
    let names: Vec<&str> = examples.iter().map(|(n, _)| n.as_str()).collect();
    for wanted in [
        "data-block",
        "table-without-filter",
        "write-batch",
        "wal-record",
        "manifest",
        "range-filter-block",
        "write-batch-range",
        "write-batch-keyspace",
        "range-tombstone-block",
    ] {
        assert!(
            names.contains(&wanted),
            "FORMAT.md lost the {wanted} example"
        );
    }
    for (name, shown) in &examples {
        let written = generate(name).unwrap_or_else(|| panic!("no encoder for example {name}"));
        assert!(
            *shown == written,
            "FORMAT.md example {name} disagrees with the encoder; the encoder writes\n{}\n\
             (FORMAT.md shows\n{})",
            hex(&written),
            hex(shown)
        );
    }
}

#[test]
fn the_hex_example_reader_catches_a_changed_byte() {
    // The check above must be able to fail: one changed byte is a different example.
    let doc = "<!-- hex: x -->\n```\n 00 05 03  comment 01\n more words\n ff\n```\n";
    assert_eq!(
        hex_examples(doc),
        vec![("x".to_string(), vec![0, 5, 3, 0xff])]
    );
    let written = generate("data-block").unwrap();
    let mut changed = written.clone();
    changed[3] ^= 1;
    assert_ne!(changed, written);
}

#[test]
fn block_trailer_and_footer_are_laid_out_as_drawn() {
    for filter in [None, Some(policy())] {
        let table = example_table(filter.clone());
        let (contents, trailer) = data_block_of_any(&table);
        // Trailer: type 0, then CRC-32 of contents ++ type.
        assert_eq!(trailer[0], 0, "block type");
        let mut covered = contents.clone();
        covered.push(0);
        assert_eq!(trailer[1..5], crc32fast::hash(&covered).to_le_bytes());
        // Footer: the format version at 48, CRC of bytes 0..52 at 52, magic at 56.
        let footer = &table[table.len() - 64..];
        assert_eq!(footer[48..52], 5u32.to_le_bytes());
        assert_eq!(footer[52..56], crc32fast::hash(&footer[..52]).to_le_bytes());
        assert_eq!(
            &footer[56..64],
            &[0x62, 0x6c, 0x6f, 0x6f, 0x6d, 0x6b, 0x76, 0x54]
        );
        assert_eq!(&footer[56..64], b"bloomkvT");
        // No filter: filter offset = filter size = 0; with one, a handle past the data.
        let filter_handle = &footer[16..32];
        assert_eq!(filter_handle == [0u8; 16], filter.is_none());
    }
}

/// The first data block of a table with or without a filter: it ends where the first
/// metadata block (the smallest non-zero handle offset in the footer) starts.
fn data_block_of_any(table: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let footer = &table[table.len() - 64..];
    let u64_at = |at: usize| u64::from_le_bytes(footer[at..at + 8].try_into().unwrap());
    let meta_start = [0, 16, 32]
        .into_iter()
        .map(u64_at)
        .filter(|&o| o != 0)
        .min()
        .unwrap() as usize;
    let (contents, trailer) = table[..meta_start].split_at(meta_start - 5);
    (contents.to_vec(), trailer.to_vec())
}

fn policy() -> Arc<dyn FilterPolicy> {
    Arc::new(BloomPolicy::standard(10.0).unwrap())
}

#[test]
fn wal_header_checksums_are_as_drawn() {
    let payload = example_batch();
    let mut record = Vec::new();
    wal::encode_record(&payload, &mut record);
    assert_eq!(record.len(), wal::HEADER_LEN + payload.len());
    assert_eq!(wal::HEADER_LEN, 13);
    // crc: CRC-32 of the type byte followed by the payload.
    let mut typed = vec![1u8];
    typed.extend_from_slice(&payload);
    assert_eq!(record[0..4], crc32fast::hash(&typed).to_le_bytes());
    assert_eq!(record[4..8], (payload.len() as u32).to_le_bytes());
    assert_eq!(record[8], 1, "type FULL");
    assert_eq!(record[9..13], crc32fast::hash(&record[0..9]).to_le_bytes());
    // "An all-zero header never validates (the CRC-32 of nine zero bytes is not zero)".
    assert_ne!(crc32fast::hash(&[0u8; 9]), 0);
    // The largest record: 268,435,456 bytes (256 MiB).
    assert_eq!(wal::MAX_RECORD_LEN, 268_435_456);
}

#[test]
fn manifest_sizes_are_as_drawn() {
    // 40 fixed bytes, 52 per table plus its two keys (44 in version 1), 4 of CRC.
    let empty = ManifestState::new(1, 0, 0, Vec::new()).encode();
    assert_eq!(empty.len(), 40 + 4);
    assert_eq!(example_manifest().len(), 40 + 52 + 2 + 4);
    assert_eq!(example_manifest()[8..12], 2u32.to_le_bytes());
    let mut v1 = ManifestState::decode(&example_manifest(), Path::new("MANIFEST"))
        .unwrap()
        .tables()
        .to_vec();
    v1[0].data_size = None;
    let v1 = ManifestState::new(5, 2, 4, v1).encode();
    assert_eq!(v1.len(), 40 + 44 + 2 + 4);
    assert_eq!(v1[8..12], 1u32.to_le_bytes());
    // The example is a manifest a store would accept.
    let decoded = ManifestState::decode(&example_manifest(), Path::new("MANIFEST")).unwrap();
    assert_eq!(decoded.wal_number(), 4);
    assert_eq!(&empty[..8], b"BKVMANIF");
    let body = empty.len() - 4;
    assert_eq!(empty[body..], crc32fast::hash(&empty[..body]).to_le_bytes());
}

#[test]
fn file_names_are_as_listed() {
    assert_eq!(filename::table_file_name(42), "000042.sst");
    assert_eq!(filename::wal_file_name(1_234_567), "1234567.wal");
    assert_eq!(filename::temp_table_file_name(13), "000013.sst.tmp");
}

#[test]
fn filter_block_sizes_and_trailer_are_as_drawn() {
    // "total: 8W + 24 bytes"; an empty builder writes one zero word (standard) or one
    // zero line (cache-local); cache-local arrays are ceil(n * bpk) rounded up to 512.
    let block = |p: &BloomPolicy, n: u32| {
        let mut b = p.new_builder();
        for i in 0..n {
            b.add_key(&i.to_le_bytes());
        }
        b.finish()
    };
    let standard = BloomPolicy::standard(10.0).unwrap();
    let cache_local = BloomPolicy::cache_local(10.0).unwrap();
    assert_eq!(block(&standard, 0).len(), 8 + 24);
    assert_eq!(block(&cache_local, 0).len(), 64 + 24);
    assert_eq!(block(&standard, 1000).len(), 10_048 / 8 + 24); // 10,000 bits -> 157 words
    assert_eq!(block(&cache_local, 1000).len(), 10_240 / 8 + 24); // -> 20 lines
    for (p, layout, k) in [(&standard, 0u8, 7u8), (&cache_local, 1, 6)] {
        let b = block(p, 1000);
        let t = b.len() - 24;
        assert_eq!(b[t], 1, "format version");
        assert_eq!(b[t + 1], layout, "layout id");
        assert_eq!(b[t + 2], k, "probes at 10 bits/key");
        assert_eq!(b[t + 3], 0, "reserved");
        assert_eq!(b[t + 4..t + 12], 1000u64.to_le_bytes(), "num_keys");
        assert_eq!(
            b[t + 12..t + 20],
            ((t as u64) * 8).to_le_bytes(),
            "num_bits"
        );
        assert_eq!(b[t + 20..], crc32fast::hash(&b[..t + 20]).to_le_bytes());
    }
}

#[test]
fn range_filter_block_is_laid_out_as_drawn() {
    // "total: 60 + s + g + 8·(LW + HW) bytes", the magic, and the two hashes the
    // example's comments name (0 and 11, so [0, 0] and [11, 11] hold one each).
    let mut b = RangeFilterBuilder::new(5.0, 4).unwrap();
    b.add_key(b"ab1");
    b.add_key(b"ab7");
    let block = b.finish();
    assert_eq!(block.len(), 60 + 3 + 3 + 8 * 2);
    assert_eq!(&block[..4], b"BKVR");
    let body = block.len() - 4;
    assert_eq!(block[body..], crc32fast::hash(&block[..body]).to_le_bytes());
    let reader = RangeFilterReader::open(&block).unwrap();
    let s = reader.stats();
    assert_eq!(
        (s.keys, s.stored_hashes, s.reduced_universe, s.prefix_len),
        (2, 2, 16, 2)
    );
}
