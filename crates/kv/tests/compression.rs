//! LZ4 data blocks in the store: stores change setting (and block alignment) and keep
//! reading every table, old fixtures open under LZ4, and compressible values take less
//! disk.

use std::path::Path;

use bloomkv_kv::fs::{FileSystem, OsFileSystem};
use bloomkv_kv::{Compression, Db, Options};

fn options(compression: Compression) -> Options {
    Options {
        compression,
        disable_auto_compaction: true,
        block_cache_size: 0,
        ..Options::default()
    }
}

/// Half random bytes, half one repeated byte: about as compressible as typical records.
fn value(i: u64, round: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round;
    let mut v: Vec<u8> = (0..50)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    v.extend(std::iter::repeat_n(b'r', 50));
    v
}

fn key(i: u64) -> String {
    format!("key{i:08}")
}

fn write(db: &Db, range: std::ops::Range<u64>, round: u64) {
    for i in range {
        db.put(key(i), value(i, round)).unwrap();
    }
    db.flush().unwrap();
}

fn check(db: &Db, n: u64, round_of: impl Fn(u64) -> u64) {
    for i in 0..n {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(&value(i, round_of(i))[..]),
            "{}",
            key(i)
        );
    }
    assert_eq!(db.scan::<&str, _>(..).count() as u64, n);
}

fn table_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// The format version of each of the store's tables.
fn table_versions(db: &Db) -> Vec<u32> {
    db.table_infos()
        .iter()
        .map(|t| {
            let table = bloomkv_kv::sstable::Table::open(
                OsFileSystem.open_random(&t.path).unwrap(),
                t.path.clone(),
                Default::default(),
                &[],
            )
            .unwrap();
            table.properties().format_version
        })
        .collect()
}

#[test]
fn a_store_switches_between_raw_and_lz4_and_reads_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let n = 6_000;
    {
        // Raw blocks back to back (version 2), as before aligned blocks.
        let unaligned = Options {
            block_align: false,
            ..options(Compression::None)
        };
        let db = Db::open(dir.path(), unaligned).unwrap();
        write(&db, 0..n, 1);
        assert_eq!(table_versions(&db), [2]);
    }
    {
        // Raw tables read under LZ4; new tables come out compressed.
        let db = Db::open(dir.path(), options(Compression::Lz4)).unwrap();
        check(&db, n, |_| 1);
        write(&db, 0..n / 2, 2);
        check(&db, n, |i| if i < n / 2 { 2 } else { 1 });
        let versions = table_versions(&db);
        assert!(
            versions.contains(&2) && versions.contains(&3),
            "{versions:?}"
        );
    }
    {
        // And back to raw, aligned (the default): LZ4 tables read without the setting,
        // all three layouts side by side, and compaction rewrites them all aligned.
        let db = Db::open(dir.path(), options(Compression::None)).unwrap();
        write(&db, n / 4..n / 3, 3);
        let round_of = |i| match i {
            _ if (n / 4..n / 3).contains(&i) => 3,
            _ if i < n / 2 => 2,
            _ => 1,
        };
        check(&db, n, round_of);
        let mut versions = table_versions(&db);
        versions.sort_unstable();
        assert_eq!(versions, [2, 3, 5]);
        db.compact().unwrap();
        check(&db, n, round_of);
        let versions = table_versions(&db);
        assert!(!versions.is_empty());
        assert!(versions.iter().all(|&v| v == 5), "{versions:?}");
    }
}

#[test]
fn lz4_stores_half_compressible_values_in_well_under_the_raw_size() {
    let n = 20_000;
    let sizes: Vec<u64> = [Compression::None, Compression::Lz4]
        .into_iter()
        .map(|c| {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path(), options(c)).unwrap();
            write(&db, 0..n, 1);
            check(&db, n, |_| 1);
            db.close().unwrap();
            table_bytes(dir.path())
        })
        .collect();
    let ratio = sizes[1] as f64 / sizes[0] as f64;
    println!("raw {} bytes, lz4 {} bytes: {ratio:.3}", sizes[0], sizes[1]);
    // Each 100-byte value is half repetition LZ4 folds to a few bytes, and keys share
    // long prefixes: the data blocks shrink by at least a third.
    assert!(ratio < 0.67, "lz4/raw = {ratio:.3}");
}

#[test]
fn a_format_version_1_store_opens_and_compacts_under_lz4() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store_v1");
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let db = Db::open(dir.path(), options(Compression::Lz4)).unwrap();
    let before: Vec<_> = db
        .scan::<&str, _>(..)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    assert!(!before.is_empty());
    db.compact().unwrap();
    let after: Vec<_> = db
        .scan::<&str, _>(..)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    assert_eq!(before, after);
    for (k, v) in &after {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
}

/// The versions of one key that snapshots keep pack into about 4 stored bytes each
/// under LZ4, fewer than the smallest raw entry: the table's own properties check
/// once refused such a table as corrupt, so every flush failed while the snapshots
/// lived. The versions alternate between an empty value and a tombstone, so each
/// snapshot can tell its own from its neighbours', through a flush, a compaction and
/// a reopen.
#[test]
fn lz4_tables_of_versions_kept_by_snapshots_flush_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(Compression::Lz4)).unwrap();
    let snaps: Vec<_> = (0..5_000u32)
        .map(|i| {
            if i % 2 == 0 {
                db.put("k", "").unwrap();
            } else {
                db.delete("k").unwrap();
            }
            db.snapshot()
        })
        .collect();
    db.flush().unwrap();
    db.compact().unwrap();
    let tables = db.table_infos();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].entries, 5_000);
    assert!(
        tables[0].file_size < 5 * 5_000,
        "the table ({} bytes) does not hold entries under 5 bytes: the case is not made",
        tables[0].file_size
    );
    for (i, snap) in snaps.iter().enumerate() {
        let want = (i % 2 == 0).then_some(&b""[..]);
        assert_eq!(snap.get("k").unwrap().as_deref(), want, "snapshot {i}");
    }
    drop(snaps);
    db.close().unwrap();
    let db = Db::open(dir.path(), options(Compression::Lz4)).unwrap();
    assert_eq!(db.get("k").unwrap(), None);
}

/// `bottommost_compression`: tables a compaction writes to the bottom of the tree are
/// ZSTD (format 6) while flushes stay LZ4 (format 3); every table reads under any
/// later setting, and reopening with ZSTD off changes nothing that was written.
#[test]
fn the_bottommost_level_is_zstd_and_the_rest_lz4() {
    let dir = tempfile::tempdir().unwrap();
    let n = 6_000;
    let zstd_bottom = || Options {
        bottommost_compression: Some(Compression::Zstd { level: 3 }),
        ..options(Compression::Lz4)
    };
    {
        let db = Db::open(dir.path(), zstd_bottom()).unwrap();
        write(&db, 0..n, 1);
        assert_eq!(table_versions(&db), [3], "a flush is never bottommost");
        db.compact().unwrap();
        let bottom = db.table_infos();
        assert!(
            bottom.iter().all(|t| t.level > 0 && t.format_version == 6),
            "{bottom:?}"
        );
        check(&db, n, |_| 1);
        write(&db, 0..n / 3, 2);
        let mut versions = table_versions(&db);
        versions.sort_unstable();
        assert_eq!(versions.first(), Some(&3));
        assert_eq!(versions.last(), Some(&6));
        check(&db, n, |i| if i < n / 3 { 2 } else { 1 });
    }
    // The settings file remembers the choice; without ZSTD, every table still reads.
    let loaded = bloomkv_kv::load_options(dir.path(), Options::default()).unwrap();
    assert_eq!(
        loaded.options.bottommost_compression,
        Some(Compression::Zstd { level: 3 })
    );
    let db = Db::open(dir.path(), options(Compression::None)).unwrap();
    check(&db, n, |i| if i < n / 3 { 2 } else { 1 });
    db.compact().unwrap();
    assert!(table_versions(&db).iter().all(|&v| v == 5));
    check(&db, n, |i| if i < n / 3 { 2 } else { 1 });
}

/// Under ZSTD the versions of one key kept by snapshots pack into far fewer stored
/// bytes each than LZ4's 255× bound allows for: the properties check of format 6
/// must not refuse such a table.
#[test]
fn zstd_tables_of_versions_kept_by_snapshots_flush_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(Compression::Zstd { level: 3 })).unwrap();
    let snaps: Vec<_> = (0..5_000u32)
        .map(|i| {
            if i % 2 == 0 {
                db.put("k", "").unwrap();
            } else {
                db.delete("k").unwrap();
            }
            db.snapshot()
        })
        .collect();
    db.flush().unwrap();
    db.compact().unwrap();
    let tables = db.table_infos();
    assert_eq!(tables.len(), 1);
    assert_eq!((tables[0].entries, tables[0].format_version), (5_000, 6));
    for (i, snap) in snaps.iter().enumerate() {
        let want = (i % 2 == 0).then_some(&b""[..]);
        assert_eq!(snap.get("k").unwrap().as_deref(), want, "snapshot {i}");
    }
    drop(snaps);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("k").unwrap(), None);
}
