//! What a short scan reads: a level's tables are disjoint and in key order, so a scan
//! opens the next one only when it has walked past the one before. A scan of a few
//! keys from the middle of a level of many tables reads the table holding its start,
//! not every table to its right; a walk across the whole level still yields every key
//! once, in order, both ways.

use bloomkv_kv::{Db, Options};

fn key(i: u64) -> String {
    format!("k{i:06}")
}

/// One level of many small tables, no block cache (every block is a counted read).
fn one_level_of_many_tables(n: u64) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            disable_auto_compaction: true,
            target_file_size: 16 << 10,
            block_cache_size: 0,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..n {
        db.put(key(i), format!("{i}:{}", "v".repeat(90))).unwrap();
    }
    db.compact().unwrap();
    (dir, db)
}

#[test]
fn a_short_scan_reads_one_table_of_a_level_not_every_table_to_its_right() {
    let n = 6_000;
    let (_dir, db) = one_level_of_many_tables(n);
    let tables = db.table_infos();
    assert!(tables.len() >= 20, "{} tables", tables.len());
    assert!(
        tables.iter().all(|t| t.level == tables[0].level),
        "not one level"
    );
    for start in [0, 1_234, 3_000, 5_990] {
        let before = db.stats().data_block_reads;
        let got: Vec<_> = db
            .scan(key(start)..)
            .take(5)
            .map(|kv| kv.unwrap().0)
            .collect();
        let want: Vec<_> = (start..(start + 5).min(n)).map(key).collect();
        assert_eq!(got, want);
        let reads = db.stats().data_block_reads - before;
        // The block holding the start, the next one if the five keys cross into it
        // (possibly the next table's first), and one more the merge pulls ahead.
        assert!(reads <= 3, "scan from {start}: {reads} reads");
    }
}

#[test]
fn a_walk_across_a_level_of_many_tables_yields_every_key_once_both_ways() {
    let n = 6_000;
    let (_dir, db) = one_level_of_many_tables(n);
    let forward: Vec<_> = db
        .scan(key(1_000)..key(5_000))
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(forward, (1_000..5_000).map(key).collect::<Vec<_>>());
    let backward: Vec<_> = db
        .scan(key(1_000)..key(5_000))
        .rev()
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(backward, (1_000..5_000).rev().map(key).collect::<Vec<_>>());
    // Both ends at once meet in the middle, every key once.
    let mut scan = db.scan::<&str, _>(..);
    let mut seen = Vec::new();
    loop {
        let step = if seen.len() % 3 == 0 {
            scan.next_back()
        } else {
            scan.next()
        };
        match step {
            Some(kv) => seen.push(kv.unwrap().0),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, (0..n).map(key).collect::<Vec<_>>());
}
