//! fjall driven through bloomkv's benchmark workload, at a small scale.

use bloomkv::bench::{run_store, BenchStore, NoProgress, Phase, Workload};
use bloomkv_peers::{check_lookups, FjallStore};

fn small() -> Workload {
    Workload {
        keys: 5_000,
        tables: 3,
        lookups: 500,
        ..Workload::default()
    }
}

#[test]
fn fjall_finds_every_present_key_and_no_absent_one_across_all_tables() {
    let dir = tempfile::tempdir().unwrap();
    let w = small();
    let mut store = FjallStore::create("fjall", dir.path().join("fjall"), Some(10.0)).unwrap();
    let rows = run_store(&mut store, &w, &NoProgress).unwrap();

    // Compaction held off: one table per `end_table`, still there after reopen.
    assert_eq!(store.tables(), 3);
    check_lookups(&rows).unwrap();

    let absent = rows.iter().find(|r| r.phase == Phase::Absent).unwrap();
    let present = rows.iter().find(|r| r.phase == Phase::Present).unwrap();
    assert_eq!((absent.lookups, absent.found), (500, 0));
    assert_eq!((present.lookups, present.found), (500, 500));

    // Every absent lookup meets every table (they all span the key range), and a 10
    // bits/key filter turns away ~99% of them: its counter must show it.
    let negatives = absent.filter_negatives.unwrap();
    assert!(
        negatives > 3 * 500 * 95 / 100,
        "{negatives} filter negatives"
    );
    assert_eq!(absent.filter_probes, 6);
    assert!((absent.filter_bits_per_key - 10.0).abs() < 0.01);
}

#[test]
fn fjall_without_filters_still_answers_right() {
    let dir = tempfile::tempdir().unwrap();
    let w = small();
    let mut store = FjallStore::create("fjall no filter", dir.path().join("f"), None).unwrap();
    let rows = run_store(&mut store, &w, &NoProgress).unwrap();
    assert_eq!(store.tables(), 3);
    check_lookups(&rows).unwrap();
    assert!(rows.iter().all(|r| r.filter_negatives.is_none()));
}
