//! `bloomkv bench --shape scale`: each store is measured again in a fresh process (the
//! `bloomkv` executable as `scale-probe`), whose memory is held against the bound.

use std::process::Command;

#[test]
fn bench_scale_measures_each_store_again_in_a_fresh_process() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("scale.json");
    let o = Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(["bench", "--shape", "scale", "--keys", "20000"])
        .args(["--lookups", "1000", "--json", json.to_str().unwrap()])
        .output()
        .expect("run bloomkv");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = report["scale"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let bytes = |v: &serde_json::Value| v.as_u64().unwrap();
    for row in rows {
        let fresh = &row["fresh"];
        assert!(fresh.is_object(), "no fresh-process figures: {row}");
        // The fresh process made the same gets: every present key found (it fails
        // otherwise), as many as the benchmark's own.
        for phase in ["absent", "present"] {
            assert_eq!(fresh[phase]["gets"], 1000, "{phase}: {fresh}");
        }
        let (open, after, peak) = (
            bytes(&fresh["rss_at_open"]),
            bytes(&fresh["rss_after_gets"]),
            bytes(&fresh["peak_rss"]),
        );
        assert!(0 < open && open <= peak && after <= peak, "{fresh}");
        // A process that only opened and read holds less than the bound a user
        // plans with (metadata, block cache, memtables and 64 MiB).
        assert!(peak <= bytes(&row["memory_bound_bytes"]), "{row}");
    }
    // The budgeted store's fresh process holds less metadata than the default store
    // does with its table open (the budget caps the partitions; the top levels stay).
    assert!(
        bytes(&rows[1]["fresh"]["metadata_bytes"]) < bytes(&rows[0]["metadata_bytes_all_open"]),
        "{rows:?}"
    );
}

#[test]
fn the_fresh_process_refuses_a_workload_it_cannot_read() {
    let o = Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(["scale-probe", "--dir", ".", "--workload", "{not json"])
        .output()
        .expect("run bloomkv");
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--workload"));
}
