//! `bloomkv bench --multi-get N`: batched rows beside the single-get rows, as a user
//! runs it.

use std::process::Command;

#[test]
fn bench_multi_get_adds_batched_rows_beside_the_single_rows() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let o = Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args([
            "bench",
            "--keys",
            "3000",
            "--tables",
            "3",
            "--lookups",
            "300",
        ])
        .args([
            "--filters",
            "none,ribbon",
            "--prefix-scans",
            "0",
            "--multi-get",
            "16",
        ])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("run bloomkv");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "two filters, two phases, two batch sizes");
    for store in ["no filter", "ribbon"] {
        for phase in ["absent", "present"] {
            let row = |batch: u64| {
                rows.iter()
                    .find(|r| r["filter"] == store && r["phase"] == phase && r["batch"] == batch)
                    .unwrap_or_else(|| panic!("no {store} {phase} row of batch {batch}"))
            };
            let (one, many) = (row(1), row(16));
            for field in ["lookups", "found", "table_probes", "filter_negatives"] {
                assert_eq!(one[field], many[field], "{store} {phase}: {field}");
            }
            assert!(one["open_ms"].as_f64().is_some_and(|ms| ms >= 0.0));
            assert_eq!(one["open_ms"], many["open_ms"], "one reopen before both");
            assert!(many["ns_per_lookup"].as_f64().is_some_and(|ns| ns > 0.0));
        }
    }
    // Refused where it means nothing.
    let o = Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(["bench", "--shape", "leveled", "--multi-get", "8"])
        .output()
        .expect("run bloomkv");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--multi-get"));
}
