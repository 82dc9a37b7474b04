//! The scale shape at a small scale: its two stores are built and measured, and what
//! it reports holds together. Memtables and tables are shrunk (the shape's own are
//! the store's 64 MiB defaults) so that 30,000 keys make a tree of many tables.

use bloomkv_bench::{run_scale_with, NoProgress, WorkDir, Workload, COLD_GETS, KEY_LEN};
use bloomkv_kv::Options;

fn small(o: Options) -> Options {
    Options {
        memtable_size: 512 << 10,
        target_file_size: 128 << 10,
        level1_max_bytes: 512 << 10,
        ..o
    }
}

#[test]
fn the_scale_shape_builds_both_stores_and_its_figures_hold_together() {
    let w = Workload {
        keys: 30_000,
        lookups: 2_000,
        // No block cache: every data block a get needs is a read of its file.
        cache_mib: 0,
        ..Workload::default()
    };
    let work = WorkDir::new(None).unwrap();
    let rows = run_scale_with(&w, None, None, &work, &NoProgress, small).unwrap();
    let [default, budget] = &rows[..] else {
        panic!("{} rows, not two", rows.len());
    };

    // Both stores hold the same keys in a tree of many tables.
    assert_eq!(
        (default.label.as_str(), budget.label.as_str()),
        ("default", "budget")
    );
    let tables: usize = default.levels.iter().map(|(_, n)| n).sum();
    assert!(tables >= 10, "{tables} tables: {:?}", default.levels);
    assert_eq!(default.logical_bytes, 30_000 * (KEY_LEN as u64 + 100));

    // The budget is a quarter of the default store's metadata, and holds it down.
    assert_eq!(default.metadata_budget_bytes, None);
    assert_eq!(
        budget.metadata_budget_bytes,
        Some(default.metadata_bytes_all_open / 4)
    );
    assert!(
        budget.metadata_bytes < default.metadata_bytes_all_open,
        "budgeted store holds {} bytes of metadata, the default {}",
        budget.metadata_bytes,
        default.metadata_bytes_all_open
    );

    for r in &rows {
        // Every key went to disk at least once (flushes), and the tables hold about
        // what was written: neither counter is zero or absurd.
        assert!(r.table_write_amplification >= 0.5, "{r:?}");
        assert!((0.3..3.0).contains(&r.space_amplification), "{r:?}");
        if let Some(wa) = r.write_amplification {
            // The log alone writes every key and value once.
            assert!(wa >= 1.0, "write amplification {wa}");
        }
        // The gets ran, each phase over its keys (a wrong answer fails the run).
        assert_eq!(r.cold.gets, COLD_GETS.min(w.lookups as usize) as u64);
        assert_eq!((r.absent.gets, r.present.gets), (w.lookups, w.lookups));
        // Open reads no table: the cold gets open them.
        assert!(r.cold.tables_opened > 0, "{r:?}");
        // Without a block cache a present get reads its data block, at least.
        assert!(r.present.reads_per_get >= 1.0, "{r:?}");
        assert!(r.open_warm_ms > 0.0 && r.open_cold_ms > 0.0);
        if cfg!(target_os = "linux") {
            assert!(r.rss_bytes.is_some());
        }
    }
    // With every filter in memory an absent get reads a block only on a false
    // positive: about 1% per table it falls inside, a handful of tables at most.
    assert!(
        default.absent.reads_per_get < 0.2,
        "{} reads per absent get",
        default.absent.reads_per_get
    );
}
