//! A batch's reads agree with the kernel's count, however they are issued.
//!
//! Blocks a batch lacks in the cache are read together: after a readahead hint (not a
//! read syscall) with one `pread` each, or, with the `io-uring` feature, in one
//! io_uring submission, whose reads the kernel's `syscr` does not see. Either way
//! `syscr` must rise by exactly `data_block_reads - uring_reads` around a batch. One
//! test in its own binary: `/proc/self/io` counts every thread of the process.

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
fn a_batchs_reads_match_the_kernels_count() {
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        filter: FilterKind::Ribbon,
        disable_auto_compaction: true,
        block_cache_size: 0, // every block a batch needs is read
        ..Options::default()
    };
    let db = Db::open(dir.path(), options()).unwrap();
    for t in 0..5u64 {
        for j in 0..3_000u64 {
            db.put(format!("key{:016}", 2 * (j * 5 + t)), [b'v'; 100])
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let a = syscr();
    let overhead = syscr() - a;
    for parity in [0u64, 1] {
        let keys: Vec<String> = (0..3_000u64)
            .map(|n| format!("key{:016}", 2 * ((n * 7919) % 14_999) + parity))
            .collect();
        for batch in keys.chunks(64) {
            let before = db.stats();
            let os_before = syscr();
            let found = db.multi_get(batch).unwrap();
            let os = syscr() - os_before - overhead;
            let after = db.stats();
            assert_eq!(
                found.iter().flatten().count(),
                if parity == 0 { batch.len() } else { 0 }
            );
            let reads = after.data_block_reads - before.data_block_reads;
            let uring = after.uring_reads - before.uring_reads;
            assert_eq!(os, reads - uring, "{reads} reads, {uring} through io_uring");
        }
    }
    let s = db.stats();
    assert!(s.multi_get_overlapped_reads > 1_000, "{s:?}");
    if cfg!(not(feature = "io-uring")) {
        assert_eq!(s.uring_reads, 0);
    }
    eprintln!(
        "{} reads, {} overlapped, {} through io_uring",
        s.data_block_reads, s.multi_get_overlapped_reads, s.uring_reads
    );
}
