//! The block cache: hits serve the bytes a read would, damaged blocks never enter it,
//! it stays within its budget, scans keep only the block their start seeks into, and
//! compaction's deleted tables are never served from it.

use bloomkv_kv::{Db, DbStats, Error, Options};

fn key(i: u64) -> String {
    format!("k{i:06}")
}

fn value(i: u64, round: u64) -> String {
    format!("{round}:{i}:{}", "v".repeat(90))
}

fn options(block_cache_size: usize) -> Options {
    Options {
        disable_auto_compaction: true,
        block_cache_size,
        ..Options::default()
    }
}

fn fill(db: &Db, n: u64, round: u64) {
    for i in 0..n {
        db.put(key(i), value(i, round)).unwrap();
    }
    db.flush().unwrap();
}

fn all(db: &Db, n: u64) -> Vec<Option<Vec<u8>>> {
    (0..n)
        .map(|i| db.get(key(i)).unwrap().map(|v| v.to_vec()))
        .collect()
}

fn delta(after: &DbStats, before: &DbStats) -> (u64, u64, u64) {
    (
        after.block_cache_hits - before.block_cache_hits,
        after.block_cache_misses - before.block_cache_misses,
        after.data_block_reads - before.data_block_reads,
    )
}

#[test]
fn a_hit_returns_the_bytes_a_read_returns_and_costs_no_read() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    let uncached = {
        let db = Db::open(dir.path(), options(0)).unwrap();
        fill(&db, n, 1);
        let s0 = db.stats();
        let v = all(&db, n);
        let s1 = db.stats();
        assert_eq!(delta(&s1, &s0), (0, 0, n), "no cache: one read per get");
        v
    };
    let db = Db::open(dir.path(), options(4 << 20)).unwrap();
    db.open_tables().unwrap(); // its reads are not the gets'
    let s0 = db.stats();
    let first = all(&db, n);
    let s1 = db.stats();
    let second = all(&db, n);
    let s2 = db.stats();
    assert_eq!(first, uncached);
    assert_eq!(second, uncached);
    // First pass: each block missed (and read) once, then served from memory; about
    // 35 entries share a 4 KiB block.
    let (hits, misses, reads) = delta(&s1, &s0);
    assert_eq!(hits + misses, n);
    assert_eq!(misses, reads);
    assert!(misses > 0 && misses * 20 < n, "{misses} misses");
    // Second pass: all hits, no read at all.
    assert_eq!(delta(&s2, &s1), (n, 0, 0));
    assert!(s2.block_cache_bytes > 0 && s2.block_cache_bytes <= 4 << 20);
}

#[test]
fn a_corrupt_block_is_an_error_every_time_and_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options(0)).unwrap();
        fill(&db, 1_000, 1);
    }
    // Flip a byte inside the first data block, which holds the smallest keys.
    let sst = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&sst).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&sst, bytes).unwrap();

    let db = Db::open(dir.path(), options(1 << 20)).unwrap();
    db.open_tables().unwrap(); // its reads are not the gets'
    for attempt in 0..3 {
        let s0 = db.stats();
        match db.get(key(0)) {
            Err(Error::Corruption { .. }) => {}
            other => panic!("attempt {attempt}: {other:?}"),
        }
        // A miss and a read each time: the damaged block was not kept.
        assert_eq!(delta(&db.stats(), &s0), (0, 1, 1), "attempt {attempt}");
    }
    // Blocks that check out are cached as usual.
    assert!(db.get(key(999)).unwrap().is_some());
    let s0 = db.stats();
    assert!(db.get(key(999)).unwrap().is_some());
    assert_eq!(delta(&db.stats(), &s0), (1, 0, 0));
}

#[test]
fn memory_stays_within_the_budget_under_random_gets() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 128 << 10;
    let db = Db::open(dir.path(), options(budget)).unwrap();
    let n = 20_000; // about 2.3 MB of blocks: 18 times the budget
    fill(&db, n, 1);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut peak = 0;
    for round in 0..20_000u64 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let i = state % n;
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(value(i, 1).as_bytes())
        );
        if round % 100 == 0 {
            let used = db.stats().block_cache_bytes;
            assert!(used <= budget as u64, "{used} bytes held, budget {budget}");
            peak = peak.max(used);
        }
    }
    println!("peak {peak} of {budget} bytes");
    assert!(peak > budget as u64 / 2, "the cache was used: peak {peak}");
    let s = db.stats();
    assert!(s.block_cache_hits > 0);
}

#[test]
fn scans_read_through_the_cache_without_filling_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    {
        let db = Db::open(dir.path(), options(0)).unwrap();
        fill(&db, n, 1);
    }
    let db = Db::open(dir.path(), options(4 << 20)).unwrap();
    assert_eq!(db.scan::<&str, _>(..).count() as u64, n);
    assert_eq!(db.stats().block_cache_bytes, 0, "a scan fills nothing");
    // A get fills; a scan then finds that block in the cache.
    db.get(key(0)).unwrap();
    let s0 = db.stats();
    assert_eq!(db.scan::<&str, _>(..).count() as u64, n);
    let (hits, _, _) = delta(&db.stats(), &s0);
    assert_eq!(hits, 1);
}

#[test]
fn a_scan_keeps_the_block_its_start_seeks_into_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    {
        let db = Db::open(dir.path(), options(0)).unwrap();
        fill(&db, n, 1);
    }
    let db = Db::open(dir.path(), options(4 << 20)).unwrap();
    // A scan from the middle walks many blocks; only the first is kept.
    let s0 = db.stats();
    let walked = db.scan(key(1_500)..).count() as u64;
    assert_eq!(walked, n - 1_500);
    let (hits, misses, _) = delta(&db.stats(), &s0);
    assert_eq!(hits, 0);
    assert!(misses > 1, "{misses} misses");
    let kept = db.stats().block_cache_bytes;
    assert!(kept > 0, "the seek block was not kept");
    // Another short scan from the same key finds it in the cache.
    let s1 = db.stats();
    let first: Vec<_> = db
        .scan(key(1_500)..)
        .take(1)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(first[0].0, key(1_500).as_bytes());
    assert_eq!(
        delta(&db.stats(), &s1).0,
        1,
        "the seek block was not found again"
    );
    // Exactly one block was kept: a get of a key in another block reads it.
    assert_eq!(db.stats().block_cache_bytes, kept);
    let s2 = db.stats();
    db.get(key(2_999)).unwrap();
    assert_eq!(delta(&db.stats(), &s2).2, 1);
}

#[test]
fn blocks_of_tables_compaction_deleted_are_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2_000;
    let db = Db::open(dir.path(), options(8 << 20)).unwrap();
    fill(&db, n, 1);
    // Every block of round 1 cached.
    all(&db, n);
    all(&db, n);
    // Round 2 overwrites every key, and deletes a third; compaction merges both
    // tables into a new one and deletes the old ones, whose blocks sit in the cache.
    for i in 0..n {
        if i.is_multiple_of(3) {
            db.delete(key(i)).unwrap();
        } else {
            db.put(key(i), value(i, 2)).unwrap();
        }
    }
    db.compact().unwrap();
    assert_eq!(db.stats().num_tables(), 1);
    for _ in 0..2 {
        for (i, got) in all(&db, n).into_iter().enumerate() {
            let i = i as u64;
            let want = (!i.is_multiple_of(3)).then(|| value(i, 2).into_bytes());
            assert_eq!(got, want, "{}", key(i));
        }
    }
    // And the same after reopening, where tables get fresh ids.
    drop(db);
    let db = Db::open(dir.path(), options(8 << 20)).unwrap();
    assert_eq!(
        db.get(key(1)).unwrap().as_deref(),
        Some(value(1, 2).as_bytes())
    );
    assert_eq!(db.get(key(3)).unwrap(), None);
}
