//! fjall driven through bloomkv's benchmark workload, at a small scale: the flat
//! shape with each filter setup, and the fill and leveled shape with compaction on.

use bloomkv::kv::{FilterAllocation, FilterKind};
use bloomkv_bench::{run_store, BenchStore, NoProgress, Phase, Workload};
use bloomkv_peers::bloomkv_auto::BloomkvSetup;
use bloomkv_peers::fill::{self, AutoStore};
use bloomkv_peers::{check_lookups, open_auto, CacheSize, FjallFilter, FjallStore, Layout};

fn small() -> Workload {
    Workload {
        keys: 5_000,
        tables: 3,
        lookups: 500,
        ..Workload::default()
    }
}

fn flat(label: &str, dir: &std::path::Path, filter: FjallFilter) -> FjallStore {
    FjallStore::create(
        label,
        dir.join(label.replace(' ', "-")),
        filter,
        CacheSize::Default,
        Layout::Flat,
    )
    .unwrap()
}

#[test]
fn fjall_finds_every_present_key_and_no_absent_one_across_all_tables() {
    let dir = tempfile::tempdir().unwrap();
    let w = small();
    let mut store = flat("fjall", dir.path(), FjallFilter::BitsPerKey(10.0));
    let rows = run_store(&mut store, &w, &NoProgress).unwrap();

    // Compaction held off: one table per `end_table`, still there after reopen.
    assert_eq!(store.tables(), 3);
    check_lookups(&rows).unwrap();

    let absent = rows.iter().find(|r| r.phase == Phase::Absent).unwrap();
    let present = rows.iter().find(|r| r.phase == Phase::Present).unwrap();
    assert_eq!((absent.lookups, absent.found), (500, 0));
    assert_eq!((present.lookups, present.found), (500, 500));
    assert_eq!(absent.filter_probes, 6);
    // fjall's own count of its filter blocks: 10 bits/key and each block's header
    // (about 0.27 bits/key at 1,667 keys a table; 0.005 at 100,000).
    let bpk = absent.filter_bits_per_key;
    assert!((10.0..10.5).contains(&bpk), "{bpk} bits/key");

    // Every absent lookup meets every table (they all span the key range), and a 10
    // bits/key filter turns away ~99% of them: fjall's counter must show it when it
    // counts, and must not be there when it does not.
    if cfg!(feature = "fjall-metrics") {
        let negatives = absent.filter_negatives.unwrap();
        assert!(
            negatives > 3 * 500 * 95 / 100,
            "{negatives} filter negatives"
        );
    } else {
        assert_eq!(absent.filter_negatives, None);
    }
}

#[test]
fn fjall_without_filters_still_answers_right() {
    let dir = tempfile::tempdir().unwrap();
    let w = small();
    let mut store = flat("fjall no filter", dir.path(), FjallFilter::None);
    let rows = run_store(&mut store, &w, &NoProgress).unwrap();
    assert_eq!(store.tables(), 3);
    check_lookups(&rows).unwrap();
    assert!(rows.iter().all(|r| r.filter_negatives.is_none()));
    assert!(rows.iter().all(|r| r.filter_mib == 0.0));
}

#[test]
fn fjalls_own_policy_builds_stricter_l0_filters() {
    let dir = tempfile::tempdir().unwrap();
    let w = small();
    let mut store = flat("fjall own", dir.path(), FjallFilter::Default);
    let rows = run_store(&mut store, &w, &NoProgress).unwrap();
    assert_eq!(store.tables(), 3);
    check_lookups(&rows).unwrap();
    // Every table was flushed into L0 and built for 0.01% (−ln(1e-4)/ln²2 ≈ 19.17
    // bits/key); the one fjall moved deeper kept its filter. fjall's own count adds
    // each block's header.
    let bpk = rows[0].filter_bits_per_key;
    assert!(bpk > 19.17 && bpk < 19.7, "{bpk} bits/key");
    assert!(rows[0].formula_fp.unwrap() < 0.01);
}

#[test]
fn fill_and_leveled_shape_on_fjall_and_bloomkv() {
    let dir = tempfile::tempdir().unwrap();
    let w = Workload {
        keys: 20_000,
        lookups: 500,
        ..Workload::default()
    };
    // The fill at fjall's defaults: every key written, nothing lost after settling.
    let mut store = AutoStore::Fjall(Box::new(
        FjallStore::create(
            "fjall fill",
            dir.path().join("fill"),
            FjallFilter::Default,
            CacheSize::Default,
            Layout::Defaults,
        )
        .unwrap(),
    ));
    let filled = fill::fill(&mut store, &w).unwrap();
    assert_eq!(filled.keys, 20_000);
    assert!(filled.total_ms >= filled.settle_ms);
    assert!(!filled.levels.is_empty());

    // The leveled shape: compaction on, small budgets, then both phases.
    for mut store in [
        AutoStore::Fjall(Box::new(
            FjallStore::create(
                "fjall",
                dir.path().join("fjall"),
                FjallFilter::BitsPerKey(10.0),
                CacheSize::Default,
                Layout::SmallLevels,
            )
            .unwrap(),
        )),
        AutoStore::Bloomkv(Box::new(
            open_auto(
                "bloomkv",
                dir.path().join("bloomkv"),
                BloomkvSetup {
                    filter: FilterKind::CacheLocalBloom,
                    bits_per_key: 10.0,
                    allocation: FilterAllocation::Uniform,
                    no_last_level_filter: false,
                    cache: CacheSize::Default,
                },
                Layout::SmallLevels,
            )
            .unwrap(),
        )),
    ] {
        let (filled, rows) = fill::run_leveled(&mut store, &w).unwrap();
        let name = store.store().label();
        check_lookups(&rows).unwrap();
        assert_eq!(rows.len(), 2);
        let tables: usize = filled.levels.iter().map(|l| l.1).sum();
        assert_eq!(tables, store.store().tables(), "{name}");
        // 20,000 keys of ~120 bytes in 1 MiB tables: more than one table.
        assert!(tables >= 2, "{name}: {:?}", filled.levels);
        // Filters cover the keys at about 10 bits each (fjall: plus block headers).
        let bpk = rows[0].filter_bits_per_key;
        assert!((9.5..11.5).contains(&bpk), "{name}: {bpk} bits/key");
    }
}

#[test]
fn fjall_with_lz4_answers_right_and_stores_fewer_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let w = small();
    let mut bytes = Vec::new();
    for lz4 in [false, true] {
        let label = if lz4 { "fjall lz4" } else { "fjall" };
        let mut store = FjallStore::create_compressed(
            label,
            dir.path().join(label.replace(' ', "-")),
            FjallFilter::BitsPerKey(10.0),
            CacheSize::Default,
            Layout::Flat,
            lz4,
        )
        .unwrap();
        let rows = run_store(&mut store, &w, &NoProgress).unwrap();
        check_lookups(&rows).unwrap();
        assert_eq!(store.tables(), 3);
        bytes.push(store.disk_bytes().unwrap());
    }
    // Half of every value is one repeated byte: LZ4 leaves well under 3/4 of the
    // raw tables (about 0.6x); a store that ignored the setting would match them.
    let (raw, lz4) = (bytes[0], bytes[1]);
    assert!(
        raw > 5_000 * 100,
        "raw tables of {raw} bytes hold less than the values"
    );
    assert!(
        lz4 * 4 < raw * 3,
        "LZ4 tables {lz4} bytes against raw {raw}"
    );
}
