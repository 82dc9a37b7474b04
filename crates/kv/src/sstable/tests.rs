//! Table-level tests: round trips, lookups, iteration, damage and counting.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bloomkv_filter::KeyHash;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::PAGE_SIZE;
use super::test_util::*;
use super::*;
use crate::error::Error;
use crate::stats::{Counters, ReadTally};
use crate::types::ValueKind;

fn get(table: &Table, key: &[u8]) -> crate::Result<Option<crate::Entry>> {
    table.get(key, KeyHash::of(key))
}

/// Random sorted, distinct entries: binary keys, some long, some empty values.
fn random_entries(rng: &mut StdRng, n: usize, max_key: usize, max_value: usize) -> Vec<TestEntry> {
    let mut keys = BTreeSet::new();
    while keys.len() < n {
        let len = rng.gen_range(0..=max_key);
        // A small alphabet makes shared prefixes common.
        let key: Vec<u8> = (0..len).map(|_| rng.gen_range(0..4u8) * 85).collect();
        keys.insert(key);
    }
    keys.into_iter()
        .map(|k| {
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let vlen = if rng.gen_bool(0.2) {
                0
            } else {
                rng.gen_range(0..=max_value)
            };
            let value = (0..vlen).map(|_| rng.gen()).collect();
            let shift = rng.gen_range(0..64);
            (k, rng.gen_range(0..u64::MAX >> shift), kind, value)
        })
        .collect()
}

fn assert_entry(got: &crate::Entry, want: &TestEntry) {
    assert_eq!(&got.key[..], &want.0[..]);
    assert_eq!(got.seq, want.1);
    assert_eq!(got.kind, want.2);
    assert_eq!(&got.value[..], &want.3[..]);
}

fn small_entries() -> Vec<TestEntry> {
    (0..40u32)
        .map(|i| {
            let kind = if i % 7 == 3 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let v = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                format!("value-{i}").into_bytes()
            };
            (
                format!("key-{:04}", i * 3).into_bytes(),
                u64::from(i) + 100,
                kind,
                v,
            )
        })
        .collect()
}

#[test]
fn random_tables_round_trip() {
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..24 {
        let n = rng.gen_range(1..400);
        let max_key = [6, 12, 300][round % 3]; // 6: ~5000 distinct keys, enough for n
        let entries = random_entries(&mut rng, n, max_key, 100);
        let block_size = [1, 64, 512, 4096][round % 4];
        let restart_interval = [1, 3, 16][round % 3];
        let with_filter = round % 2 == 0;
        let options = TableOptions {
            block_size,
            restart_interval,
            filter_policy: if with_filter {
                Some(Arc::new(ExactPolicy))
            } else {
                None
            },
            prefix_extractor: None,
            compression: match round % 5 {
                0 | 1 => Compression::Lz4,
                2 => Compression::Zstd { level: 3 },
                _ => Compression::None,
            },
            // Every third table carries a range filter too (format version 4).
            range_filter: (round % 3 == 1).then(RangeFilterOptions::default),
            // Aligned in 5 rounds of 7 (format version 5 when also uncompressed).
            block_align: round % 7 < 5,
            // Partitioned index and filter in 1 round of 4 (format version 8).
            metadata_partition: (round % 4 == 3).then_some([64, 200, 1000][round % 3]),
        };
        let with_range = options.range_filter.is_some();
        let partitioned = options.metadata_partition.is_some();
        let expected_version = match (&options.compression, options.block_align, with_range) {
            _ if partitioned => 8,
            (Compression::Zstd { .. }, _, _) => 6,
            (Compression::None, true, _) => 5,
            (Compression::None, false, false) => 2,
            (Compression::Lz4, _, false) => 3,
            (_, _, true) => 4,
        };
        let (data, summary) = build(&entries, options);
        assert_eq!(summary.file_size, data.len() as u64);
        assert_eq!(summary.entries, entries.len() as u64);
        assert_eq!(&summary.smallest[..], &entries[0].0[..]);
        assert_eq!(&summary.largest[..], &entries.last().unwrap().0[..]);
        let deletions = entries.iter().filter(|e| e.2 == ValueKind::Delete).count();
        assert_eq!(summary.deletions, deletions as u64);
        assert_eq!(summary.max_seq, entries.iter().map(|e| e.1).max().unwrap());

        let (table, _, _) = open(data);
        let table = table.unwrap();
        assert_eq!(
            table.properties().format_version,
            expected_version,
            "round {round}"
        );
        assert_eq!(table.has_filter(), with_filter);
        assert_eq!(
            *table.range_filter_state() == super::RangeFilterState::Loaded,
            with_range
        );
        // Every stored key is in a range the range filter says "maybe" to.
        for e in entries.iter().step_by(7) {
            let k = &e.0[..];
            assert!(table.may_contain_range(Bound::Included(k), Bound::Included(k)));
        }
        assert_eq!(table.properties().entries, entries.len() as u64);
        assert!(table.verify().is_empty(), "{:?}", table.verify());
        for e in &entries {
            assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
        }
        // Absent keys: between, before and after the present ones.
        for _ in 0..200 {
            let len = rng.gen_range(0..=max_key + 1);
            let key: Vec<u8> = (0..len).map(|_| rng.gen_range(0..5u8) * 60).collect();
            let want = entries.binary_search_by(|e| e.0.cmp(&key)).ok();
            match (get(&table, &key).unwrap(), want) {
                (None, None) => {}
                (Some(got), Some(i)) => assert_entry(&got, &entries[i]),
                (got, want) => panic!("key {key:?}: got {got:?}, want index {want:?}"),
            }
        }
        let all: Vec<_> = table.iter().map(|e| e.unwrap()).collect();
        assert_eq!(all.len(), entries.len());
        for (got, want) in all.iter().zip(&entries) {
            assert_entry(got, want);
        }
        // iter_from at present keys, absent keys, inclusive and exclusive.
        for _ in 0..20 {
            let probe = if rng.gen_bool(0.5) {
                entries[rng.gen_range(0..entries.len())].0.clone()
            } else {
                (0..rng.gen_range(0..=max_key))
                    .map(|_| rng.gen_range(0..5u8) * 60)
                    .collect()
            };
            let first_incl = entries.partition_point(|e| e.0 < probe);
            let first_excl = entries.partition_point(|e| e.0 <= probe);
            let incl: Vec<_> = table
                .iter_from(Bound::Included(&probe))
                .map(|e| e.unwrap())
                .collect();
            let excl: Vec<_> = table
                .iter_from(Bound::Excluded(&probe))
                .map(|e| e.unwrap())
                .collect();
            assert_eq!(incl.len(), entries.len() - first_incl);
            assert_eq!(excl.len(), entries.len() - first_excl);
            for (got, want) in incl.iter().zip(&entries[first_incl..]) {
                assert_entry(got, want);
            }
            for (got, want) in excl.iter().zip(&entries[first_excl..]) {
                assert_entry(got, want);
            }
        }
    }
}

#[test]
fn a_single_entry_table_with_an_empty_key_and_value_round_trips() {
    let entries = vec![(Vec::new(), 5, ValueKind::Put, Vec::new())];
    let (data, _) = build(&entries, exact_options(4096));
    let table = open(data).0.unwrap();
    assert_entry(&get(&table, b"").unwrap().unwrap(), &entries[0]);
    assert_eq!(get(&table, b"\0").unwrap(), None);
    assert_eq!(table.iter().count(), 1);
}

#[test]
fn out_of_order_and_duplicate_keys_are_refused_without_harm() {
    let file = MemWritable::default();
    let mut b = TableBuilder::new(Box::new(file.clone()), path(), TableOptions::default());
    b.add(b"b", 1, ValueKind::Put, b"1").unwrap();
    for bad in [&b"a"[..], b"b", b""] {
        let err = b.add(bad, 2, ValueKind::Put, b"x").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    b.add(b"c", 3, ValueKind::Put, b"3").unwrap();
    assert_eq!(b.num_entries(), 2);
    assert!(b.estimated_size() > 0);
    b.finish().unwrap();
    let table = open(file.data.lock().unwrap().clone()).0.unwrap();
    let keys: Vec<_> = table.iter().map(|e| e.unwrap().key).collect();
    assert_eq!(keys, vec![&b"b"[..], b"c"]);
}

#[test]
fn an_empty_table_is_refused() {
    let b = TableBuilder::new(
        Box::new(MemWritable::default()),
        path(),
        TableOptions::default(),
    );
    assert!(matches!(b.finish(), Err(Error::InvalidArgument(_))));
}

#[test]
fn keys_outside_the_range_are_not_probes() {
    let (data, _) = build(&small_entries(), exact_options(128));
    let (table, counters, file) = open(data);
    let table = table.unwrap();
    let before = file.reads.load(Ordering::Relaxed);
    assert_eq!(get(&table, b"a").unwrap(), None);
    assert_eq!(get(&table, b"zzz").unwrap(), None);
    assert_eq!(counters.snapshot().table_probes, 0);
    assert_eq!(counters.snapshot().filter_checks, 0);
    assert_eq!(file.reads.load(Ordering::Relaxed), before);
}

#[test]
fn absent_keys_rejected_by_the_filter_cost_no_read() {
    let (data, _) = build(&small_entries(), exact_options(128));
    let (table, counters, file) = open(data);
    let table = table.unwrap();
    // Opening reads the footer, then the metadata blocks: two reads, both counted.
    assert_eq!(file.reads.load(Ordering::Relaxed), 2);
    assert_eq!(counters.snapshot().data_block_reads, 2);
    let reads_after_open = counters.snapshot().data_block_reads;
    for i in 0..40u32 {
        let key = format!("key-{:04}", i * 3 + 1).into_bytes();
        assert_eq!(get(&table, &key).unwrap(), None);
    }
    assert_eq!(counters.snapshot().table_probes, 39);
    assert_eq!(counters.snapshot().filter_checks, 39);
    assert_eq!(counters.snapshot().filter_negatives, 39);
    assert_eq!(counters.snapshot().filter_positives, 0);
    assert_eq!(counters.snapshot().data_block_reads, reads_after_open);
    assert_eq!(file.reads.load(Ordering::Relaxed), 2);
}

#[test]
fn a_present_key_costs_exactly_one_read_of_its_block_and_trailer() {
    let entries = small_entries();
    let (data, _) = build(&entries, exact_options(128));
    let (table, counters, file) = open(data);
    let table = table.unwrap();
    assert!(table.num_data_blocks() > 3);
    for (n, e) in entries.iter().enumerate() {
        let reads = counters.snapshot().data_block_reads;
        let bytes = counters.snapshot().bytes_read;
        let syscalls = file.reads.load(Ordering::Relaxed);
        assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
        let handle = table
            .inner
            .index
            .handle(table.inner.index.find(&e.0))
            .unwrap();
        assert_eq!(counters.snapshot().data_block_reads, reads + 1);
        assert_eq!(file.reads.load(Ordering::Relaxed), syscalls + 1);
        assert_eq!(counters.snapshot().bytes_read - bytes, handle.size + 5);
        assert_eq!(counters.snapshot().filter_positives, n as u64 + 1);
        assert_eq!(counters.snapshot().filter_true_positives, n as u64 + 1);
    }
}

#[test]
fn a_table_without_filter_reads_one_block_per_probe() {
    let entries = small_entries();
    let options = TableOptions {
        block_size: 128,
        ..TableOptions::default()
    };
    let (data, _) = build(&entries, options);
    let (table, counters, _) = open(data);
    let table = table.unwrap();
    assert_eq!(table.filter_state(), &FilterState::NotWritten);
    assert_eq!(table.filter_info(), None);
    assert_eq!(get(&table, b"key-0001").unwrap(), None);
    assert_eq!(counters.snapshot().filter_checks, 0);
    assert_eq!(counters.snapshot().data_block_reads, 3);
    assert_entry(&get(&table, b"key-0000").unwrap().unwrap(), &entries[0]);
    assert_eq!(counters.snapshot().filter_true_positives, 0);
}

#[test]
fn iteration_reads_each_block_once() {
    let entries = small_entries();
    let (data, _) = build(&entries, exact_options(128));
    let (table, counters, _) = open(data);
    let table = table.unwrap();
    let before = counters.snapshot().data_block_reads;
    assert_eq!(table.iter().count(), entries.len());
    let after = counters.snapshot().data_block_reads;
    assert_eq!(after - before, table.num_data_blocks() as u64);
}

#[test]
fn the_filter_is_recorded_and_reported() {
    let (data, _) = build(&small_entries(), exact_options(4096));
    let table = open(data).0.unwrap();
    assert_eq!(table.properties().filter_policy, EXACT_NAME);
    assert_eq!(table.properties().bits_per_key, 64.0);
    assert_eq!(table.filter_state(), &FilterState::Loaded);
    assert_eq!(table.filter_info().unwrap().num_keys, 40);
    assert_eq!(table.filter_memory_bytes(), 40 * 8);
}

#[test]
fn an_unknown_filter_policy_is_ignored() {
    let entries = small_entries();
    let (data, _) = build(&entries, exact_options(128));
    let counters = Arc::new(Counters::default());
    let table = Table::open(MemFile::new(data), path(), counters.clone(), &[]).unwrap();
    assert_eq!(
        table.filter_state(),
        &FilterState::UnknownPolicy(EXACT_NAME.into())
    );
    assert!(!table.has_filter());
    for e in &entries {
        assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
    }
    assert_eq!(counters.filter_corrupt.load(Ordering::Relaxed), 0);
}

/// Every single-byte change outside the filter is caught or harmless; never a wrong
/// answer, never a panic. Changes inside the filter only drop the filter.
#[test]
fn every_flipped_byte_gives_the_right_answer_or_corruption() {
    let entries = small_entries();
    let (data, _) = build(&entries, exact_options(128));
    let clean = open(data.clone()).0.unwrap();
    let footer = file::read_footer(&clean.inner.file, data.len() as u64).unwrap();
    let filter = footer.filter.unwrap();
    let filter_range = filter.offset as usize..filter.end().unwrap() as usize;
    let is_named_corruption =
        |e: &Error| matches!(e, Error::Corruption { file, .. } if *file == path());
    for i in 0..data.len() {
        let mut bad = data.clone();
        bad[i] ^= 0x5a;
        let (table, counters, _) = open(bad);
        let table = match table {
            Ok(t) => t,
            Err(e) => {
                assert!(is_named_corruption(&e), "byte {i}: {e}");
                assert!(
                    !filter_range.contains(&i),
                    "byte {i}: a bad filter must not fail open"
                );
                continue;
            }
        };
        if filter_range.contains(&i) {
            assert!(!table.has_filter(), "byte {i}");
            assert!(matches!(table.filter_state(), FilterState::Corrupt(_)));
            assert_eq!(counters.filter_corrupt.load(Ordering::Relaxed), 1);
        }
        for e in &entries {
            match get(&table, &e.0) {
                Ok(Some(got)) => assert_entry(&got, e),
                Ok(None) => panic!("byte {i}: present key {:?} not found", e.0),
                Err(err) => assert!(is_named_corruption(&err), "byte {i}: {err}"),
            }
            let mut absent = e.0.clone();
            absent.push(b'!');
            match get(&table, &absent) {
                Ok(None) => {}
                Ok(Some(got)) => panic!("byte {i}: absent key found: {got:?}"),
                Err(err) => assert!(is_named_corruption(&err), "byte {i}: {err}"),
            }
        }
        let mut n = 0;
        for item in table.iter() {
            match item {
                Ok(got) => {
                    assert_entry(&got, &entries[n]);
                    n += 1;
                }
                Err(err) => {
                    assert!(is_named_corruption(&err), "byte {i}: {err}");
                    break;
                }
            }
        }
        let problems = table.verify();
        if !filter_range.contains(&i) && n == entries.len() {
            // A data block was damaged only if iteration saw it; otherwise nothing was.
            assert!(problems.is_empty(), "byte {i}: {problems:?}");
        } else {
            assert!(!problems.is_empty(), "byte {i}: verify missed the damage");
        }
    }
}

#[test]
fn every_truncation_is_corruption() {
    let (data, _) = build(&small_entries(), exact_options(128));
    for len in 0..data.len() {
        match open(data[..len].to_vec()).0 {
            Ok(_) => panic!("a table truncated to {len} bytes opened"),
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path()),
            Err(e) => panic!("truncated to {len}: {e}"),
        }
        assert!(!check_file(MemFile::new(data[..len].to_vec()), path()).is_empty());
    }
}

#[test]
fn a_short_file_names_itself() {
    let err = open(vec![0; 10]).0.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("000042.sst") && text.contains("shorter"),
        "{text}"
    );
}

#[test]
fn check_file_reports_the_bad_block_by_kind_and_offset() {
    let (data, _) = build(&small_entries(), exact_options(128));
    assert_eq!(check_file(MemFile::new(data.clone()), path()), vec![]);
    let table = open(data.clone()).0.unwrap();
    let second = table.inner.index.handle(1).unwrap();
    let mut bad = data.clone();
    bad[second.offset as usize + 2] ^= 1;
    let problems = check_file(MemFile::new(bad), path());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, BlockKind::Data);
    assert_eq!(problems[0].offset, second.offset);
    assert!(
        problems[0].to_string().contains("checksum"),
        "{}",
        problems[0]
    );
}

#[test]
fn get_reports_a_bad_data_block_by_file_and_offset() {
    let entries = small_entries();
    let (data, _) = build(&entries, exact_options(128));
    let table = open(data.clone()).0.unwrap();
    let first = table.inner.index.handle(0).unwrap();
    let mut bad = data;
    bad[1] ^= 0xff;
    let table = open(bad).0.unwrap();
    let err = get(&table, &entries[0].0).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("000042.sst"), "{text}");
    assert!(
        text.contains(&format!("data block at offset {}", first.offset)),
        "{text}"
    );
    let mut it = table.iter();
    assert!(it.next().unwrap().is_err());
    assert!(it.next().is_none(), "an iterator ends after its error");
}

#[test]
fn a_failed_write_poisons_the_builder() {
    struct Failing;
    impl crate::fs::WritableFile for Failing {
        fn append(&mut self, _: &[u8]) -> std::io::Result<()> {
            Err(std::io::Error::other("disk full"))
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let options = TableOptions {
        block_size: 1,
        // Unaligned, a block is written as soon as it reaches `block_size`: by the
        // first add (aligned, by the add that no longer fits).
        block_align: false,
        ..TableOptions::default()
    };
    let mut b = TableBuilder::new(Box::new(Failing), path(), options);
    assert!(matches!(
        b.add(b"a", 1, ValueKind::Put, b"1"),
        Err(Error::Io(_))
    ));
    assert!(matches!(
        b.add(b"b", 1, ValueKind::Put, b"1"),
        Err(Error::Io(_))
    ));
    assert!(matches!(b.finish(), Err(Error::Io(_))));
}

#[test]
fn a_filter_its_policy_cannot_open_falls_back_to_the_data() {
    /// Writes like the exact policy but refuses every block it is asked to open.
    #[derive(Debug)]
    struct Refusing;
    impl bloomkv_filter::FilterPolicy for Refusing {
        fn name(&self) -> &str {
            EXACT_NAME
        }
        fn bits_per_key(&self) -> f64 {
            64.0
        }
        fn new_builder(&self) -> Box<dyn bloomkv_filter::FilterBuilder> {
            ExactPolicy.new_builder()
        }
        fn open_reader(
            &self,
            _: &[u8],
        ) -> Result<Box<dyn bloomkv_filter::FilterReader>, bloomkv_filter::FilterError> {
            Err(bloomkv_filter::FilterError::Corrupt(
                "unsupported layout".into(),
            ))
        }
    }
    use bloomkv_filter::FilterPolicy;
    let entries = small_entries();
    let (data, _) = build(&entries, exact_options(128));
    let counters = Arc::new(Counters::default());
    let policies: Vec<Arc<dyn FilterPolicy>> = vec![Arc::new(Refusing)];
    let table = Table::open(MemFile::new(data), path(), counters.clone(), &policies).unwrap();
    assert!(!table.has_filter());
    match table.filter_state() {
        FilterState::Corrupt(why) => assert!(why.contains("unsupported layout"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(counters.filter_corrupt.load(Ordering::Relaxed), 1);
    for e in &entries {
        assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
    }
    assert_eq!(counters.snapshot().filter_checks, 0);
}

#[test]
fn tables_round_trip_through_the_os_file_system() {
    use crate::fs::{FileSystem, OsFileSystem};
    let dir = tempfile::tempdir().unwrap();
    let file_path = dir.path().join("000007.sst");
    let entries = small_entries();
    let mut b = TableBuilder::new(
        OsFileSystem.create(&file_path).unwrap(),
        file_path.clone(),
        exact_options(256),
    );
    for (k, seq, kind, v) in &entries {
        b.add(k, *seq, *kind, v).unwrap();
    }
    let summary = b.finish().unwrap();
    let file = OsFileSystem.open_random(&file_path).unwrap();
    assert_eq!(file.len().unwrap(), summary.file_size);
    let counters = Arc::new(Counters::default());
    let table = Table::open(file.clone(), file_path.clone(), counters, &policies()).unwrap();
    assert_eq!(table.path(), file_path);
    for e in &entries {
        assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
    }
    assert!(table.verify().is_empty());
    assert!(check_file(file, file_path).is_empty());
}

#[test]
fn tables_and_iterators_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send::<TableIter>();
    send::<TableBuilder>();
}

#[test]
fn a_checksummed_block_claiming_a_huge_restart_count_is_corruption() {
    let entries = small_entries();
    let (mut data, _) = build(&entries, exact_options(128));
    let table = open(data.clone()).0.unwrap();
    let h = table.inner.index.handle(0).unwrap();
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    data[end - 4..end].copy_from_slice(&u32::MAX.to_le_bytes());
    // Re-seal so the checksum holds and only the block's own validation can object.
    let crc = crc32fast::hash(&data[start..=end]);
    data[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
    let table = open(data).0.unwrap();
    let err = get(&table, &entries[0].0).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("000042.sst") && text.contains("restart count"),
        "{text}"
    );
    assert!(table.iter().next().unwrap().is_err());
    assert_eq!(table.verify().len(), 1);
}

/// `verify` refuses what `Table::open` refuses: properties whose format version is
/// not the footer's (version 4's properties have version 5's layout, so only the
/// cross-check can object). It once reported such a table clean.
#[test]
fn verify_refuses_properties_of_another_version_than_the_footer() {
    let (mut data, _) = build(&small_entries(), exact_options(128));
    let table = open(data.clone()).0.unwrap();
    let footer = file::read_footer(&table.inner.file, table.inner.file_size).unwrap();
    assert_eq!(footer.version, footer::ALIGNED_FORMAT_VERSION);
    let h = footer.properties;
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    let older = footer::ALIGNED_FORMAT_VERSION - 1;
    data[start..start + 4].copy_from_slice(&older.to_le_bytes());
    let crc = crc32fast::hash(&data[start..=end]);
    data[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
    let err = open(data.clone()).0.unwrap_err().to_string();
    assert!(err.contains("disagrees with the footer"), "{err}");
    let problems = check_file(MemFile::new(data), path());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, BlockKind::Properties);
    assert!(
        problems[0]
            .to_string()
            .contains("disagrees with the footer"),
        "{}",
        problems[0]
    );
}

/// Keys with several versions each (newest first), tombstones among them, random seqs.
fn versioned_entries(rng: &mut StdRng, keys: u32) -> Vec<TestEntry> {
    let mut out = Vec::new();
    for i in 0..keys {
        let n = rng.gen_range(1..=8);
        let mut seqs: Vec<u64> = (0..n).map(|_| rng.gen_range(1..1000)).collect();
        seqs.sort_unstable_by(|a, b| b.cmp(a));
        seqs.dedup();
        for seq in seqs {
            let kind = if rng.gen_bool(0.25) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = match kind {
                ValueKind::Put => format!("v{i}@{seq}").into_bytes(),
                ValueKind::Delete => Vec::new(),
            };
            out.push((format!("key{i:03}").into_bytes(), seq, kind, value));
        }
    }
    out
}

#[test]
fn versions_of_one_key_span_blocks_and_each_read_sequence_finds_its_own() {
    let mut rng = StdRng::seed_from_u64(17);
    for (block_size, block_align) in [1, 48, 200, 4096]
        .into_iter()
        .flat_map(|size| [(size, false), (size, true)])
    {
        let entries = versioned_entries(&mut rng, 40);
        let options = TableOptions {
            block_align,
            ..exact_options(block_size)
        };
        let (data, summary) = build(&entries, options);
        assert_eq!(summary.entries, entries.len() as u64);
        let (table, counters, file) = open(data);
        let table = table.unwrap();
        // Unaligned uncompressed tables stay version 2, readable by the code before
        // version 3; aligned ones are version 5.
        assert_eq!(
            table.properties().format_version,
            if block_align {
                super::footer::ALIGNED_FORMAT_VERSION
            } else {
                super::footer::UNCOMPRESSED_FORMAT_VERSION
            }
        );
        assert!(table.verify().is_empty(), "{:?}", table.verify());
        // Every version, in order, forwards; and backwards reversed.
        let all: Vec<crate::Entry> = table.iter().collect::<crate::Result<_>>().unwrap();
        assert_eq!(all.len(), entries.len());
        for (got, want) in all.iter().zip(&entries) {
            assert_entry(got, want);
        }
        let mut back: Vec<crate::Entry> = table
            .iter_rev(Bound::Unbounded, Bound::Unbounded)
            .collect::<crate::Result<_>>()
            .unwrap();
        back.reverse();
        assert_eq!(back, all);
        for i in 0..40u32 {
            let key = format!("key{i:03}").into_bytes();
            let versions: Vec<&TestEntry> = entries.iter().filter(|e| e.0 == key).collect();
            // Without a snapshot the newest version, at one data-block read.
            let before = file.reads.load(Ordering::Relaxed);
            assert_entry(&get(&table, &key).unwrap().unwrap(), versions[0]);
            assert_eq!(file.reads.load(Ordering::Relaxed) - before, 1);
            // As of every sequence number around every version.
            for probe in versions.iter().flat_map(|v| [v.1, v.1 - 1, v.1 + 1]) {
                let want = versions.iter().find(|v| v.1 <= probe);
                let mut tally = ReadTally::default();
                let got = table
                    .get_at(&key, KeyHash::of(&key), probe, &mut tally)
                    .unwrap();
                match (got, want) {
                    (Some(g), Some(w)) => assert_entry(&g, w),
                    (None, None) => {}
                    (g, w) => panic!("{key:?} at {probe}: got {g:?}, want {w:?}"),
                }
            }
            // An excluded start skips every version of the key, in every block.
            let after: Option<crate::Entry> = table
                .iter_from(Bound::Excluded(&key))
                .next()
                .transpose()
                .unwrap();
            let want_next = entries.iter().find(|e| e.0 > key);
            match (after, want_next) {
                (Some(g), Some(w)) => assert_entry(&g, w),
                (None, None) => {}
                (g, w) => panic!("after {key:?}: got {g:?}, want {w:?}"),
            }
            // A reverse walk below an excluded end starts at the previous key.
            let below = table
                .iter_rev(Bound::Unbounded, Bound::Excluded(&key))
                .next()
                .transpose()
                .unwrap();
            let want_below = entries.iter().rev().find(|e| e.0 < key);
            assert_eq!(
                below.map(|e| (e.key.to_vec(), e.seq)),
                want_below.map(|w| (w.0.clone(), w.1))
            );
        }
        drop(counters);
    }
}

#[test]
fn entries_out_of_version_order_are_refused() {
    let file = MemWritable::default();
    let mut b = TableBuilder::new(Box::new(file), path(), TableOptions::default());
    b.add(b"k", 5, ValueKind::Put, b"new").unwrap();
    b.add(b"k", 3, ValueKind::Put, b"old").unwrap();
    for (key, seq) in [(&b"k"[..], 3), (b"k", 4), (b"j", 1)] {
        let err = b.add(key, seq, ValueKind::Put, b"").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    b.add(b"l", 9, ValueKind::Put, b"").unwrap();
    assert_eq!(b.num_entries(), 3);
}

#[test]
fn a_version_1_table_is_still_read() {
    // Written by the version 1 builder (one version per key, strictly increasing
    // separators, no extractor field in the properties).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store_v1");
    let data = std::fs::read(dir.join("000005.sst")).unwrap();
    let (table, _, _) = open(data);
    let table = table.unwrap();
    assert_eq!(table.properties().format_version, 1);
    assert_eq!(table.properties().prefix_extractor, "");
    assert!(table.verify().is_empty());
    let all: Vec<crate::Entry> = table.iter().collect::<crate::Result<_>>().unwrap();
    assert_eq!(all.len(), 120); // 100 overwrites, 40 deletes, 20 keys had both
    assert!(all.windows(2).all(|w| w[0].key < w[1].key));
    let e = get(&table, b"k002").unwrap().unwrap();
    assert_eq!((e.kind, &e.value[..]), (ValueKind::Put, &b"new-2"[..]));
    assert_eq!(
        get(&table, b"k005").unwrap().unwrap().kind,
        ValueKind::Delete
    );
    let mut tally = ReadTally::default();
    let old = table
        .get_at(b"k002", KeyHash::of(b"k002"), e.seq - 1, &mut tally)
        .unwrap();
    assert_eq!(old, None, "the table holds no older version");
    let back: Vec<crate::Entry> = table
        .iter_rev(Bound::Unbounded, Bound::Unbounded)
        .collect::<crate::Result<_>>()
        .unwrap();
    assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), all);
}

/// Entries whose values LZ4 folds well (half of each is one repeated byte).
fn compressible_entries(n: usize) -> Vec<TestEntry> {
    (0..n)
        .map(|i| {
            let mut v = format!("{i:08}-{}", i * 7919).into_bytes();
            v.extend(std::iter::repeat_n(b'z', 40));
            (
                format!("key{i:06}").into_bytes(),
                i as u64 + 1,
                ValueKind::Put,
                v,
            )
        })
        .collect()
}

#[test]
fn lz4_tables_round_trip_and_are_version_3() {
    let entries = compressible_entries(600);
    let options = |compression| TableOptions {
        compression,
        ..exact_options(4096)
    };
    let (raw, _) = build(&entries, options(Compression::None));
    let (packed, _) = build(&entries, options(Compression::Lz4));
    assert!(
        packed.len() * 10 < raw.len() * 7,
        "{} vs {}",
        packed.len(),
        raw.len()
    );
    let (table, _, _) = open(packed);
    let table = table.unwrap();
    assert_eq!(table.properties().format_version, 3);
    assert!(table.verify().is_empty(), "{:?}", table.verify());
    let all: Vec<crate::Entry> = table.iter().collect::<crate::Result<_>>().unwrap();
    assert_eq!(all.len(), entries.len());
    for (e, (k, seq, _, v)) in all.iter().zip(&entries) {
        assert_eq!((&e.key[..], e.seq, &e.value[..]), (&k[..], *seq, &v[..]));
        let got = table.get(k, KeyHash::of(k)).unwrap().unwrap();
        assert_eq!(&got.value[..], &v[..]);
    }
}

#[test]
fn every_byte_flip_in_lz4_data_blocks_is_detected() {
    let entries = compressible_entries(150);
    let options = TableOptions {
        compression: Compression::Lz4,
        ..exact_options(1024)
    };
    let (data, _) = build(&entries, options);
    let (table, _, _) = open(data.clone());
    let data_size = table.unwrap().properties().data_size as usize;
    assert!(data_size > 0);
    for i in 0..data_size {
        let mut bad = data.clone();
        bad[i] ^= 0x01 << (i % 8);
        let (table, _, _) = open(bad);
        let table = table.unwrap(); // metadata untouched
        let failed = table
            .iter()
            .any(|e| matches!(e, Err(Error::Corruption { .. })));
        assert!(failed, "flip at byte {i} went unnoticed");
    }
}

/// Pages of `PAGE_SIZE` that `len` bytes at `offset` touch.
fn pages_touched(offset: u64, len: u64) -> u64 {
    (offset + len).div_ceil(PAGE_SIZE) - offset / PAGE_SIZE
}

/// Each data block's offset and length on disk (trailer included), in order.
fn data_block_spans(table: &Table) -> Vec<(u64, u64)> {
    let index = &table.inner.index;
    (0..index.len())
        .filter_map(|i| index.handle(i))
        .map(|h| (h.offset, h.size + trailer::BLOCK_TRAILER_SIZE as u64))
        .collect()
}

/// Mostly small values, one in a hundred larger than a page.
fn mixed_size_entries(rng: &mut StdRng, n: u32) -> Vec<TestEntry> {
    (0..n)
        .map(|i| {
            let len = if rng.gen_bool(0.01) {
                rng.gen_range(4096..10_000)
            } else {
                rng.gen_range(0..300)
            };
            let value = (0..len).map(|_| rng.gen()).collect();
            (format!("key{i:06}").into_bytes(), 1, ValueKind::Put, value)
        })
        .collect()
}

#[test]
fn aligned_blocks_touch_as_few_pages_as_their_size_allows() {
    let mut rng = StdRng::seed_from_u64(29);
    let entries = mixed_size_entries(&mut rng, 3000);
    for block_size in [1000, 4096, 8192] {
        let build_with = |block_align| {
            let options = TableOptions {
                block_align,
                ..exact_options(block_size)
            };
            let (data, summary) = build(&entries, options);
            assert_eq!(summary.file_size, data.len() as u64);
            let table = open(data.clone()).0.unwrap();
            (data, table)
        };
        // Unaligned, many blocks straddle a page boundary they need not: what
        // alignment is for (and what makes the checks below able to fail).
        let (_, plain) = build_with(false);
        let spans = data_block_spans(&plain);
        let straddling = spans
            .iter()
            .filter(|&&(offset, len)| pages_touched(offset, len) > len.div_ceil(PAGE_SIZE))
            .count();
        assert!(
            straddling * 10 > spans.len(),
            "{straddling} of {}",
            spans.len()
        );

        let plain_blocks = spans.len();
        let (data, table) = build_with(true);
        assert_eq!(
            table.properties().format_version,
            super::footer::ALIGNED_FORMAT_VERSION
        );
        let spans = data_block_spans(&table);
        // The tighter cap costs about one entry per block, not blocks of one entry.
        assert!(
            spans.len() * 2 < plain_blocks * 3,
            "{} aligned blocks against {plain_blocks}",
            spans.len()
        );
        let mut per_block = vec![0usize; spans.len()];
        for (key, ..) in &entries {
            per_block[table.inner.index.find(key)] += 1;
        }
        let mut end = 0;
        for (i, &(offset, len)) in spans.iter().enumerate() {
            let at = format!("block size {block_size}, block {i} at {offset}, {len} bytes");
            assert_eq!(pages_touched(offset, len), len.div_ceil(PAGE_SIZE), "{at}");
            // Over `block_size` only when one entry alone is.
            assert!(len <= block_size as u64 || per_block[i] == 1, "{at}");
            // In front of it, less than a page of zeros, and only where the block
            // would have touched a page more without them.
            assert!(offset - end < PAGE_SIZE, "{at}");
            if offset > end {
                assert!(
                    pages_touched(end, len) > len.div_ceil(PAGE_SIZE),
                    "{at}: padded but fits"
                );
            }
            assert!(data[end as usize..offset as usize].iter().all(|&b| b == 0));
            end = offset + len;
        }
        assert_eq!(end, table.properties().data_size);
        assert!(table.verify().is_empty(), "{:?}", table.verify());
        for e in &entries {
            assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
        }
        let all: Vec<crate::Entry> = table.iter().collect::<crate::Result<_>>().unwrap();
        assert_eq!(all.len(), entries.len());
    }
}

#[test]
fn compressed_tables_are_not_padded() {
    let entries = compressible_entries(300);
    let options = TableOptions {
        compression: Compression::Lz4,
        block_align: true,
        ..exact_options(4096)
    };
    let (data, _) = build(&entries, options);
    let table = open(data).0.unwrap();
    assert_eq!(table.properties().format_version, 3);
    let mut end = 0;
    for (offset, len) in data_block_spans(&table) {
        assert_eq!(offset, end);
        end = offset + len;
    }
}

#[test]
fn damaged_padding_is_reported_and_reads_go_on() {
    let mut rng = StdRng::seed_from_u64(31);
    let entries = mixed_size_entries(&mut rng, 400);
    let options = TableOptions {
        block_align: true,
        ..exact_options(4096)
    };
    let (data, _) = build(&entries, options);
    let table = open(data.clone()).0.unwrap();
    let spans = data_block_spans(&table);
    let (prev, next) = spans
        .windows(2)
        .map(|w| (w[0].0 + w[0].1, w[1].0))
        .find(|(end, start)| start > end)
        .expect("some block is padded");
    for at in [prev, next - 1] {
        let mut bad = data.clone();
        bad[at as usize] = 1;
        let table = open(bad).0.unwrap();
        let problems = table.verify();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].reason.contains("zero padding"), "{problems:?}");
        // Nothing reads padding: every entry is still there.
        for e in &entries {
            assert_entry(&get(&table, &e.0).unwrap().unwrap(), e);
        }
    }
}

/// A thread reuses the stored bytes of its last compressed block as the buffer of its
/// next read; raw and compressed blocks of every size, read in any order, still come
/// back whole.
#[test]
fn raw_and_lz4_blocks_read_in_any_order_by_one_thread() {
    let mut rng = StdRng::seed_from_u64(11);
    // Runs of compressible entries and of noise: LZ4 packs the first kind of block
    // and keeps the second raw. Some values are larger than a block.
    let entries: Vec<TestEntry> = (0..1_500u32)
        .map(|i| {
            let len = if rng.gen_bool(0.02) {
                rng.gen_range(4096..9_000)
            } else {
                rng.gen_range(20..200)
            };
            let value = if (i / 100) % 2 == 0 {
                vec![b'a' + (i % 26) as u8; len]
            } else {
                noise(u64::from(i), len)
            };
            (format!("key{i:06}").into_bytes(), 1, ValueKind::Put, value)
        })
        .collect();
    let options = TableOptions {
        compression: Compression::Lz4,
        ..exact_options(4096)
    };
    let (data, _) = build(&entries, options);
    let kinds: Vec<u8> = data_block_spans(&open(data.clone()).0.unwrap())
        .iter()
        .map(|&(offset, len)| data[(offset + len - 5) as usize])
        .collect();
    let packed = kinds
        .iter()
        .filter(|&&k| k == trailer::LZ4_COMPRESSION)
        .count();
    assert!(
        packed > 0 && packed < kinds.len(),
        "{packed} of {} blocks packed: the test needs both kinds",
        kinds.len()
    );
    let (table, _, _) = open(data);
    let table = table.unwrap();
    let mut order: Vec<usize> = (0..entries.len()).collect();
    for round in 0..3 {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        for &i in &order {
            let (key, _, _, value) = &entries[i];
            let got = get(&table, key).unwrap().unwrap();
            assert_eq!(&got.value[..], &value[..], "round {round}, entry {i}");
        }
    }
}

/// A range filter handle in checksummed properties that claims more bytes than the
/// file holds: `Table::open` leaves the range filter out, and `verify` reports it
/// without sizing a read by it (it allocated the claim, and aborted the process on
/// claims past memory).
#[test]
fn verify_bounds_a_range_filter_handle_before_reading_it() {
    let options = TableOptions {
        range_filter: Some(RangeFilterOptions::default()),
        ..exact_options(128)
    };
    let (data, _) = build(&small_entries(), options);
    let table = open(data.clone()).0.unwrap();
    let mut footer = file::read_footer(&table.inner.file, table.inner.file_size).unwrap();
    let mut props = table.properties().clone();
    let range = props.range_filter.expect("a range filter was built");
    // The properties are the last block before the footer: rewrite them in place.
    let p = footer.properties;
    assert_eq!(p.end(), Some((data.len() - footer::FOOTER_SIZE) as u64));
    props.range_filter = Some(BlockHandle {
        offset: range.offset,
        size: 1 << 50,
    });
    let mut bad = data[..p.offset as usize].to_vec();
    let start = bad.len();
    bad.extend_from_slice(&props.encode());
    trailer::seal(&mut bad, start);
    footer.properties = BlockHandle {
        offset: p.offset,
        size: (bad.len() - start - trailer::BLOCK_TRAILER_SIZE) as u64,
    };
    bad.extend_from_slice(&footer.encode());

    let table = open(bad.clone()).0.unwrap();
    let state = format!("{:?}", table.range_filter_state());
    assert!(state.contains("outside the metadata"), "{state}");
    let problems = check_file(MemFile::new(bad), path());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, BlockKind::Filter);
    assert!(
        problems[0].to_string().contains("outside the metadata"),
        "{}",
        problems[0]
    );
}

#[test]
fn zstd_tables_round_trip_and_are_version_6() {
    let entries = compressible_entries(600);
    let options = |compression| TableOptions {
        compression,
        ..exact_options(4096)
    };
    let (raw, _) = build(&entries, options(Compression::None));
    let (lz4, _) = build(&entries, options(Compression::Lz4));
    let (packed, _) = build(&entries, options(Compression::Zstd { level: 3 }));
    assert!(
        packed.len() * 10 < raw.len() * 7,
        "{} vs {}",
        packed.len(),
        raw.len()
    );
    // On these entries (a counter and a run of one byte) ZSTD's entropy coding beats LZ4.
    assert!(
        packed.len() < lz4.len(),
        "{} vs {}",
        packed.len(),
        lz4.len()
    );
    let (table, _, _) = open(packed.clone());
    let table = table.unwrap();
    assert_eq!(table.properties().format_version, 6);
    assert!(table.verify().is_empty(), "{:?}", table.verify());
    let kinds: Vec<u8> = data_block_spans(&table)
        .iter()
        .map(|&(offset, len)| packed[(offset + len - 5) as usize])
        .collect();
    assert!(
        kinds.iter().all(|&k| k == trailer::ZSTD_COMPRESSION),
        "{kinds:?}"
    );
    let all: Vec<crate::Entry> = table.iter().collect::<crate::Result<_>>().unwrap();
    assert_eq!(all.len(), entries.len());
    for (e, (k, seq, _, v)) in all.iter().zip(&entries) {
        assert_eq!((&e.key[..], e.seq, &e.value[..]), (&k[..], *seq, &v[..]));
        let got = table.get(k, KeyHash::of(k)).unwrap().unwrap();
        assert_eq!(&got.value[..], &v[..]);
    }
}

/// The corruption matrix LZ4 blocks get: a flip of any byte of the data blocks
/// (stored bytes, type, CRC) is reported as corruption, never a wrong entry or a panic.
#[test]
fn every_byte_flip_in_zstd_data_blocks_is_detected() {
    let entries = compressible_entries(150);
    let options = TableOptions {
        compression: Compression::Zstd { level: 3 },
        ..exact_options(1024)
    };
    let (data, _) = build(&entries, options);
    let (table, _, _) = open(data.clone());
    let data_size = table.unwrap().properties().data_size as usize;
    assert!(data_size > 0);
    for i in 0..data_size {
        let mut bad = data.clone();
        bad[i] ^= 0x01 << (i % 8);
        let (table, _, _) = open(bad);
        let table = table.unwrap(); // metadata untouched
        let failed = table
            .iter()
            .any(|e| matches!(e, Err(Error::Corruption { .. })));
        assert!(failed, "flip at byte {i} went unnoticed");
    }
}

/// Raw, LZ4 and ZSTD blocks interleaved in one thread's reads (the spare buffer and
/// the thread's ZSTD decoder are reused between them) come back whole.
#[test]
fn raw_and_zstd_blocks_read_in_any_order_by_one_thread() {
    let mut rng = StdRng::seed_from_u64(12);
    let entries: Vec<TestEntry> = (0..1_500u32)
        .map(|i| {
            let len = if rng.gen_bool(0.02) {
                rng.gen_range(4096..9_000)
            } else {
                rng.gen_range(20..200)
            };
            let value = if (i / 100) % 2 == 0 {
                vec![b'a' + (i % 26) as u8; len]
            } else {
                noise(u64::from(i), len)
            };
            (format!("key{i:06}").into_bytes(), 1, ValueKind::Put, value)
        })
        .collect();
    let build_with = |compression| {
        build(
            &entries,
            TableOptions {
                compression,
                ..exact_options(4096)
            },
        )
        .0
    };
    let zstd = build_with(Compression::Zstd { level: 1 });
    let kinds: Vec<u8> = data_block_spans(&open(zstd.clone()).0.unwrap())
        .iter()
        .map(|&(offset, len)| zstd[(offset + len - 5) as usize])
        .collect();
    let packed = kinds
        .iter()
        .filter(|&&k| k == trailer::ZSTD_COMPRESSION)
        .count();
    assert!(
        packed > 0 && packed < kinds.len(),
        "{packed} of {} blocks packed: the test needs both kinds",
        kinds.len()
    );
    let tables = [
        open(zstd).0.unwrap(),
        open(build_with(Compression::Lz4)).0.unwrap(),
    ];
    let mut order: Vec<usize> = (0..entries.len() * 2).collect();
    for round in 0..2 {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        for &j in &order {
            let (key, _, _, value) = &entries[j / 2];
            let got = get(&tables[j % 2], key).unwrap().unwrap();
            assert_eq!(&got.value[..], &value[..], "round {round}, entry {j}");
        }
    }
}
