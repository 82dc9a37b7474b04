//! The store's read counter agrees with the kernel's.
//!
//! Linux counts every read syscall a process makes in `/proc/self/io` (`syscr`). During
//! lookups the store's only reads are positioned reads of data blocks, one syscall each,
//! so `syscr` must rise by exactly `data_block_reads` (after subtracting what reading
//! `/proc/self/io` itself costs). This file holds one test so no other test thread
//! reads files meanwhile.

#![cfg(target_os = "linux")]

use bloomkv_kv::{Db, FilterKind, Options};

fn syscr() -> u64 {
    let text = std::fs::read_to_string("/proc/self/io").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("syscr line")
}

#[test]
fn data_block_reads_match_read_syscalls() {
    // Without a block cache every block a get needs is read; with a small one, some
    // come from memory, and only the others may count as reads.
    // 128 KiB: about 30 of the workload's 460 blocks. (At 64 KiB the cache's hot
    // section holds 15 aligned blocks and leaves its cold one no room for a 16th, so
    // every insert churns the hot set and this stride pattern never hits.)
    for cache in [0, 128 << 10] {
        reads_match_syscalls(cache);
    }
}

fn reads_match_syscalls(block_cache_size: usize) {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        filter: FilterKind::CacheLocalBloom,
        disable_auto_compaction: true,
        block_cache_size,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for t in 0..5u64 {
        for j in 0..3000u64 {
            let i = j * 5 + t;
            db.put(format!("key{:016}", 2 * i), [b'v'; 100]).unwrap();
        }
        db.flush().unwrap();
    }
    // What one call of `syscr()` costs in read syscalls.
    let a = syscr();
    let b = syscr();
    let overhead = b - a;

    for (label, parity) in [("present", 0u64), ("absent", 1u64)] {
        let before = db.stats();
        let before_store = before.data_block_reads;
        let before_os = syscr();
        for n in 0..3000u64 {
            let i = (n * 7919) % 14_999;
            let _ = db.get(format!("key{:016}", 2 * i + parity)).unwrap();
        }
        let after_os = syscr();
        let store = db.stats().data_block_reads - before_store;
        let os = after_os - before_os - overhead;
        assert!(store > 0, "{label}: the workload must read something");
        if block_cache_size > 0 {
            let s = db.stats();
            let hits = s.block_cache_hits - before.block_cache_hits;
            let misses = s.block_cache_misses - before.block_cache_misses;
            assert!(hits > 0, "{label}: a 128 KiB cache serves some blocks");
            assert_eq!(misses, store, "{label}: each miss is one read");
        }
        assert_eq!(
            os, store,
            "{label}: kernel read syscalls vs store data-block reads"
        );
    }
}
