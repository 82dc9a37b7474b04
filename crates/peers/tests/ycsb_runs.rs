//! The suite on real stores, small: each adapter against a model, reads checked while
//! writers run (and a store that loses writes caught), every workload's mix in a
//! real run, and the JSON a run writes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bloomkv_bench::BenchError;
use bloomkv_peers::ycsb::generator::SplitMix64;
use bloomkv_peers::ycsb::record::{fill_value, key, read_head, ValueHead};
use bloomkv_peers::ycsb::runner::{RunConfig, StoreRun};
use bloomkv_peers::ycsb::stores::{self, Setting, YcsbStore};
use bloomkv_peers::ycsb::workload::{Workload, OP_KINDS};
use bloomkv_peers::ycsb::{run_suite, YcsbArgs};

const STORES: [&str; 3] = ["bloomkv", "fjall", "redb"];

fn config(records: u64, ops: u64, verify_every: u64) -> RunConfig {
    RunConfig {
        records,
        threads: 2,
        duration: Duration::from_secs(60),
        ops_per_thread: Some(ops),
        value_size: 64,
        seed: 11,
        verify_every,
        data: Default::default(),
    }
}

#[test]
fn each_adapter_puts_gets_and_scans_like_a_model() {
    for name in STORES {
        for setting in [Setting::Defaults, Setting::Equal] {
            let dir = tempfile::tempdir().unwrap();
            let store = stores::open(name, dir.path(), setting).unwrap();
            let mut model: BTreeMap<Vec<u8>, ValueHead> = BTreeMap::new();
            let mut rng = SplitMix64::new(17);
            let mut value = Vec::new();
            // A batch first, as the load writes.
            let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..300)
                .map(|id| {
                    fill_value(&mut value, id, 0, 40);
                    (key(id).to_vec(), value.clone())
                })
                .collect();
            store.load_batch(&batch).unwrap();
            for (k, v) in &batch {
                model.insert(k.clone(), read_head(v).unwrap());
            }
            for step in 1..=2000u64 {
                let id = rng.below(600);
                let k = key(id);
                match rng.below(3) {
                    0 => {
                        fill_value(&mut value, id, step, 20 + rng.below(100) as usize);
                        store.put(&k, &value).unwrap();
                        model.insert(k.to_vec(), read_head(&value).unwrap());
                    }
                    1 => {
                        let got = store.get(&k).unwrap();
                        assert_eq!(got, model.get(&k[..]).copied(), "{name} get {id} at {step}");
                    }
                    _ => {
                        let count = 1 + rng.below(30) as usize;
                        let mut rows = Vec::new();
                        let n = store
                            .scan(&k, count, &mut |k, h| rows.push((k.to_vec(), h)))
                            .unwrap();
                        let want: Vec<(Vec<u8>, ValueHead)> = model
                            .range(k.to_vec()..)
                            .take(count)
                            .map(|(k, h)| (k.clone(), *h))
                            .collect();
                        assert_eq!(n, rows.len());
                        assert_eq!(rows, want, "{name} scan from {id} at {step}");
                    }
                }
            }
            store.checkpoint().unwrap();
            store.close().unwrap();
        }
    }
}

#[test]
fn reads_during_writes_return_the_last_or_a_concurrent_write() {
    for name in STORES {
        let dir = tempfile::tempdir().unwrap();
        let store = stores::open(name, dir.path(), Setting::Equal).unwrap();
        // Few records, every one logged: the threads keep hitting the same keys.
        let run = StoreRun::new(store.as_ref(), config(200, 3000, 1));
        run.load().unwrap();
        for w in ["a", "f", "d", "e"] {
            let w = Workload::parse_list(w).unwrap()[0];
            let result = run.run(&w, 0).unwrap();
            assert!(
                result.reads_verified > 1000,
                "{name} {}: {}",
                w.name,
                result.reads_verified
            );
        }
        drop(run);
        store.close().unwrap();
    }
}

/// A store that drops every seventh write after the load: later reads find values
/// that were overwritten before they began.
struct Forgetful {
    inner: Box<dyn YcsbStore>,
    puts: AtomicU64,
}

impl YcsbStore for Forgetful {
    fn load_batch(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<(), BenchError> {
        self.inner.load_batch(rows)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        if self.puts.fetch_add(1, Ordering::Relaxed) % 7 == 6 {
            return Ok(());
        }
        self.inner.put(key, value)
    }
    fn get(&self, key: &[u8]) -> Result<Option<ValueHead>, BenchError> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        row: &mut dyn FnMut(&[u8], ValueHead),
    ) -> Result<usize, BenchError> {
        self.inner.scan(start, count, row)
    }
    fn close(self: Box<Self>) -> Result<(), BenchError> {
        self.inner.close()
    }
}

#[test]
fn a_store_that_loses_writes_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let store = Forgetful {
        inner: stores::open("bloomkv", dir.path(), Setting::Equal).unwrap(),
        puts: AtomicU64::new(0),
    };
    let run = StoreRun::new(&store, config(50, 3000, 1));
    run.load().unwrap();
    let err = run.run(&Workload::named('a').unwrap(), 0).unwrap_err();
    assert!(
        err.to_string()
            .contains("overwritten before the read began"),
        "{err}"
    );
}

#[test]
fn a_real_runs_operation_mix_is_within_one_percent_of_its_definition() {
    let dir = tempfile::tempdir().unwrap();
    let store = stores::open("bloomkv", dir.path(), Setting::Defaults).unwrap();
    let run = StoreRun::new(store.as_ref(), config(2000, 20_000, 64));
    run.load().unwrap();
    let before = run.count();
    // 40,000 operations: at a share of one half, 1% is 4σ.
    for w in Workload::all() {
        let result = run.run(&w, 1).unwrap();
        assert_eq!(result.ops, 2 * 20_000, "workload {}", w.name);
        for k in OP_KINDS {
            let share = result.count(k) as f64 / result.ops as f64;
            assert!(
                (share - w.mix[k.index()]).abs() <= 0.01,
                "workload {}: {} {share:.4} against {}",
                w.name,
                k.name(),
                w.mix[k.index()]
            );
        }
    }
    // D, E and X inserted; every insert is acknowledged.
    assert!(run.count() > before);
    drop(run);
    store.close().unwrap();
}

#[test]
fn the_json_report_has_the_contracts_fields() {
    let dir = tempfile::tempdir().unwrap();
    let args = YcsbArgs {
        records: 500,
        seconds: 1.0,
        ops: Some(300),
        threads: 2,
        stores: "bloomkv,fjall,redb".into(),
        settings: "defaults,equal".into(),
        workloads: "a,e,x".into(),
        runs: 2,
        value_size: 100,
        seed: 1,
        verify_every: 4,
        data: "ycsb".into(),
        tpch_pool_mib: 1,
        dir: Some(dir.path().to_path_buf()),
        json: None,
    };
    let report = run_suite(&args).unwrap();
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 2 * 3, "stores × settings × workloads");
    let numbers = ["records", "threads", "seconds", "ops_per_sec", "max_us"];
    let optional = [
        "read_p50_us",
        "read_p99_us",
        "read_p999_us",
        "update_p99_us",
    ];
    for row in rows {
        assert!(
            row["store"].is_string() && row["workload"].is_string(),
            "{row}"
        );
        assert!(["defaults", "equal"].contains(&row["setting"].as_str().unwrap()));
        for f in numbers {
            assert!(row[f].is_number(), "{f} in {row}");
        }
        for f in optional {
            assert!(row.get(f).is_some(), "{f} missing in {row}");
        }
        let w = row["workload"].as_str().unwrap();
        // E reads by scans only; A and X have gets.
        assert_eq!(row["read_p99_us"].is_null(), w == "e", "{row}");
        assert!(
            row["read_p50_us"].as_f64().unwrap_or(0.0)
                <= row["read_p99_us"].as_f64().unwrap_or(0.0)
        );
        assert!(row["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["kind"] == "all"));
        assert!(row["ops_per_sec_spread"]["n"] == 2);
    }
    assert_eq!(json["run_rows"].as_array().unwrap().len(), 2 * rows.len());
    assert_eq!(json["load"].as_array().unwrap().len(), 6);
    let ratios = json["ratios"].as_array().unwrap();
    // bloomkv against fjall and redb, per setting, for the load and three workloads.
    assert_eq!(ratios.len(), 2 * 2 * 4);
    for r in ratios {
        for f in ["row", "versus", "phase", "median", "ci95", "runs"] {
            assert!(r.get(f).is_some(), "{f} missing in {r}");
        }
        assert_eq!(r["runs"], 2);
    }
    assert_eq!(json["settings"].as_array().unwrap().len(), 6);
    assert!(json["environment"]["commit"].is_string());
}

#[test]
fn tpch_rows_run_through_the_suite_with_their_reads_checked() {
    let dir = tempfile::tempdir().unwrap();
    let args = YcsbArgs {
        records: 3000,
        seconds: 1.0,
        ops: Some(2000),
        threads: 2,
        stores: "bloomkv,redb".into(),
        settings: "equal".into(),
        workloads: "c,x,e,a".into(),
        runs: 1,
        value_size: 100,
        seed: 3,
        verify_every: 2,
        data: "tpch".into(),
        tpch_pool_mib: 1,
        dir: Some(dir.path().to_path_buf()),
        json: None,
    };
    let report = run_suite(&args).unwrap();
    assert_eq!(report.data, "tpch");
    assert_eq!(report.rows.len(), 2 * 4);
    assert!(report.rows.iter().all(|r| r.ops == 4000));
    assert!(report
        .rows
        .iter()
        .filter(|r| r.workload != "e")
        .all(|r| r.reads_verified > 0));
}
