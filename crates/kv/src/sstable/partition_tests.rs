//! Partitioned tables (format version 8) answer exactly as whole ones, and a damaged
//! partition is read around (filter) or reported (index), never answered "absent".

use std::ops::Bound;
use std::sync::atomic::Ordering;

use bloomkv_filter::KeyHash;

use super::test_util::*;
use super::*;
use crate::error::Error;
use crate::stats::ReadTally;
use crate::types::ValueKind;

/// 600 keys, every fifth with three versions (so some continue into the next block),
/// values long enough for a few entries per 128-byte block.
fn entries() -> Vec<TestEntry> {
    let mut out = Vec::new();
    let mut seq = 10_000;
    for i in 0..600u32 {
        let key = format!("key{:05}", i * 2).into_bytes();
        let versions = if i % 5 == 0 { 3 } else { 1 };
        for v in 0..versions {
            seq -= 1;
            let kind = if (i + v) % 7 == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            out.push((
                key.clone(),
                seq,
                kind,
                format!("value-{i}-{v}").into_bytes(),
            ));
        }
    }
    out
}

fn partitioned_options() -> TableOptions {
    TableOptions {
        metadata_partition: Some(128),
        ..exact_options(128)
    }
}

/// A key whose newest version lies in partition `p`.
fn key_in(table: &Table, p: usize) -> Vec<u8> {
    let parts = table.inner.parts.as_ref().expect("partitioned");
    table
        .iter()
        .map(|e| e.unwrap().key.to_vec())
        .find(|k| parts.partition_of(k) == p)
        .expect("a key in the partition")
}

#[test]
fn a_partitioned_table_answers_as_the_whole_one() {
    let entries = entries();
    let (whole, _) = build(&entries, exact_options(128));
    let (parted, _) = build(&entries, partitioned_options());
    let (whole, _, _) = open(whole);
    let (parted, counters, _) = open(parted);
    let (whole, parted) = (whole.unwrap(), parted.unwrap());
    assert!(parted.is_partitioned() && !whole.is_partitioned());
    assert_eq!(parted.properties().format_version, 8);
    assert!(
        parted.properties().partitions >= 5,
        "{:?}",
        parted.properties()
    );
    assert_eq!(parted.num_data_blocks(), whole.num_data_blocks());
    assert!(parted.verify().is_empty(), "{:?}", parted.verify());
    // Every key, present or absent, at the newest and at older sequence numbers.
    for i in 0..1201u32 {
        let key = format!("key{i:05}").into_bytes();
        let hash = KeyHash::of(&key);
        for read_seq in [u64::MAX >> 8, 9_990, 9_700, 9_500] {
            let (mut a, mut b) = (ReadTally::default(), ReadTally::default());
            assert_eq!(
                parted.get_at(&key, hash, read_seq, &mut a).unwrap(),
                whole.get_at(&key, hash, read_seq, &mut b).unwrap(),
                "{i} at {read_seq}"
            );
        }
    }
    assert!(counters.coarse_filter_negatives.load(Ordering::Relaxed) > 0);
    // Scans both ways, from and to every kind of bound.
    let all = |it: &mut dyn Iterator<Item = crate::Result<crate::Entry>>| -> Vec<crate::Entry> {
        it.collect::<crate::Result<_>>().unwrap()
    };
    assert_eq!(all(&mut parted.iter()), all(&mut whole.iter()));
    for i in (0..1210u32).step_by(37) {
        let k = format!("key{i:05}").into_bytes();
        for start in [Bound::Included(&k[..]), Bound::Excluded(&k[..])] {
            assert_eq!(
                all(&mut parted.iter_from(start)),
                all(&mut whole.iter_from(start))
            );
            assert_eq!(
                all(&mut parted.iter_rev(Bound::Unbounded, start)),
                all(&mut whole.iter_rev(Bound::Unbounded, start))
            );
            assert_eq!(
                all(&mut parted.iter_rev(start, Bound::Unbounded)),
                all(&mut whole.iter_rev(start, Bound::Unbounded))
            );
        }
    }
}

/// Bytes of `data` with one byte flipped in the middle of `handle`'s block.
fn damaged(mut data: Vec<u8>, handle: BlockHandle) -> Vec<u8> {
    data[(handle.offset + handle.size / 2) as usize] ^= 0x55;
    data
}

#[test]
fn a_damaged_filter_partition_fails_open_and_is_counted() {
    let entries = entries();
    let (data, _) = build(&entries, partitioned_options());
    let (table, _, _) = open(data.clone());
    let table = table.unwrap();
    let parts = table.inner.parts.as_ref().unwrap();
    let p = parts.len() / 2;
    let (_, filter) = parts.handles(p).unwrap();
    let victim = key_in(&table, p);
    let (bad, counters, _) = open(damaged(data, filter.unwrap()));
    let bad = bad.unwrap();
    // Every key still answers with its newest version: never a false "absent".
    for (i, (key, seq, kind, value)) in entries.iter().enumerate() {
        if i > 0 && entries[i - 1].0 == *key {
            continue; // an older version
        }
        let got = bad
            .get(key, KeyHash::of(key))
            .unwrap()
            .expect("never a false negative");
        assert_eq!(
            (got.seq, got.kind, &got.value[..]),
            (*seq, *kind, &value[..])
        );
    }
    assert!(bad.get(&victim, KeyHash::of(&victim)).unwrap().is_some());
    assert!(counters.metadata_partition_failures.load(Ordering::Relaxed) > 0);
    let problems = bad.verify();
    assert!(
        problems.iter().any(|p| p.kind == BlockKind::Filter),
        "{problems:?}"
    );
}

#[test]
fn a_damaged_index_partition_is_corruption_naming_the_file() {
    let entries = entries();
    let (data, _) = build(&entries, partitioned_options());
    let (table, _, _) = open(data.clone());
    let table = table.unwrap();
    let parts = table.inner.parts.as_ref().unwrap();
    let p = parts.len() / 2;
    let (index, _) = parts.handles(p).unwrap();
    let victim = key_in(&table, p);
    let (bad, _, _) = open(damaged(data, index));
    let bad = bad.unwrap();
    // The filters still answer; the index partition behind a "maybe" is refused.
    let err = bad.get(&victim, KeyHash::of(&victim)).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("000042.sst"), "{err}");
    assert!(bad.iter().any(|e| e.is_err()));
    assert!(!bad.verify().is_empty());
}

#[test]
fn every_flipped_byte_of_the_top_level_is_refused_or_read_correctly() {
    let entries = entries();
    let (data, _) = build(&entries, partitioned_options());
    let footer = {
        let (table, _, _) = open(data.clone());
        let _ = table.unwrap();
        let n = data.len();
        footer::Footer::decode(&data[n - footer::FOOTER_SIZE..], n as u64).unwrap()
    };
    let top = footer.index;
    for i in top.offset..top.offset + top.size + 5 {
        let mut bad = data.clone();
        bad[i as usize] ^= 0x21;
        let (table, _, _) = open(bad);
        // The block's CRC covers it: the table does not open.
        assert!(table.is_err(), "byte {i}");
    }
}

#[test]
fn a_partitioned_table_without_a_filter_reads_through_its_index_partitions() {
    let entries = entries();
    let options = TableOptions {
        filter_policy: None,
        ..partitioned_options()
    };
    let (data, _) = build(&entries, options);
    let (table, _, _) = open(data);
    let table = table.unwrap();
    assert!(table.is_partitioned() && !table.has_filter());
    assert!(table.verify().is_empty());
    let last = entries.last().unwrap();
    assert!(table.get(&last.0, KeyHash::of(&last.0)).unwrap().is_some());
    assert!(table
        .get(b"key00001", KeyHash::of(b"key00001"))
        .unwrap()
        .is_none());
}

#[test]
fn a_present_key_costs_one_read_of_its_partition_and_one_of_its_block() {
    let entries = entries();
    let (data, _) = build(&entries, partitioned_options());
    let (table, counters, _) = open(data);
    let table = table.unwrap();
    let reads = || counters.snapshot().data_block_reads;
    // Outside a store there is no metadata cache: every lookup reads its partition.
    for (key, ..) in entries.iter().step_by(11) {
        let before = reads();
        assert!(table.get(key, KeyHash::of(key)).unwrap().is_some());
        // Index and filter partitions are neighbours: one read brings both.
        assert_eq!(reads() - before, 2, "{}", String::from_utf8_lossy(key));
    }
}
