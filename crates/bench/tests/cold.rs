//! `--cold` at a small scale: a filtered absent phase after the page cache is dropped
//! fetches from the device what the store says it read, page for page.
//!
//! The claim checked: a cold row's counted reads are device reads when the phase
//! touches few enough pages that repeats are rare: `r` random reads over `P` pages
//! repeat a page about `r / 2P` of the time (here ~200 reads over ~6,400 pages,
//! ~1.5%; with twice the lookups over half the keys the page cache served 10%). Linux only (`/proc/self/io`'s
//! `read_bytes`); skipped, with a note, where the OS does not count device bytes
//! or cannot drop pages (the stores' directory on tmpfs, say).

#[cfg(target_os = "linux")]
#[test]
fn a_cold_filtered_absent_phase_reads_from_the_device_what_it_claims() {
    use bloomkv_bench::{
        load, run_phase, BloomkvStore, FilterSetting, NoProgress, Phase, Workload,
    };

    const PAGE: u64 = 4096;
    let dir = tempfile::tempdir().unwrap();
    let w = Workload {
        keys: 200_000,
        tables: 4,
        lookups: 5_000,
        cold: true,
        ..Workload::default()
    };
    // No block cache: every block a lookup needs is a read of its file.
    let mut store =
        BloomkvStore::create_with_cache(dir.path().join("s"), FilterSetting::CacheLocal, 10.0, 0)
            .unwrap();
    load(&mut store, &w, &NoProgress).unwrap();
    let bytes_before = store.db().unwrap().stats().bytes_read;
    let r = run_phase(&store, &w, Phase::Absent, &NoProgress).unwrap();
    let bytes = store.db().unwrap().stats().bytes_read - bytes_before;
    let reads = r.counters.data_block_reads.unwrap();
    let Some(os) = r.os else {
        eprintln!("skipped: this OS has no /proc/self/io");
        return;
    };
    // Filtered absent: about 1% of 4 tables per lookup, so ~200 reads.
    assert!((100..=400).contains(&reads), "{reads} reads");
    assert_eq!(os.syscalls, reads, "one pread per counted read");
    if os.device_bytes == 0 {
        eprintln!(
            "skipped: {reads} reads fetched no device bytes (the page cache could not be \
             dropped here, or the OS does not count device reads)"
        );
        return;
    }
    // Page-aligned blocks: each read of `bytes / reads` bytes spans whole pages.
    let per_read = bytes.div_ceil(reads);
    let pages_per_read = per_read.div_ceil(PAGE);
    let claimed = reads * pages_per_read * PAGE;
    let device = os.device_bytes;
    assert!(
        device.abs_diff(claimed) * 10 <= claimed,
        "device fetched {device} bytes for {reads} reads of ~{per_read} bytes \
         (claimed {claimed} bytes in {pages_per_read} page(s) each)"
    );
    // The disks' own count (machine-wide, so only a lower bound here).
    if let Some(device_reads) = os.device_reads {
        assert!(
            device_reads * 10 >= reads * 9,
            "the disks completed {device_reads} reads for {reads} counted ({device} bytes, {claimed} claimed)"
        );
    }
}
