//! The `bloomkv-peers` command at a tiny scale: its JSON report carries the runs, the
//! environment, per-row medians and spreads, the fills and every run's own rows.

use std::process::Command;

/// A workload small enough for a test.
const TINY: [&str; 6] = ["--keys", "2000", "--tables", "2", "--lookups", "100"];

/// Runs `bloomkv-peers` with `args`, its stores and report under `dir`, and returns
/// the report.
fn run_with_json(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let json = dir.join("peers.json");
    let out = Command::new(env!("CARGO_BIN_EXE_bloomkv-peers"))
        .args(args)
        .arg("--dir")
        .arg(dir.join("stores"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// Runs `bloomkv-peers` with `args` and the `refused` flags, and checks that it fails
/// saying `names`.
fn assert_refused(dir: &std::path::Path, args: &[&str], refused: &[&str], names: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomkv-peers"))
        .args(args)
        .args(refused)
        .arg("--dir")
        .arg(dir.join("refused"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{refused:?} ran");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(names), "{refused:?}: {err}");
}

#[test]
fn json_report_has_runs_environment_spreads_and_fills() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_with_json(
        dir.path(),
        &[&TINY[..], &["--runs", "2", "--filters", "none,cache-local"]].concat(),
    );

    assert_eq!(report["runs"], 2);
    assert_eq!(report["shape"], "flat");
    let command = report["command"].as_str().unwrap();
    assert!(
        command.starts_with("bloomkv-peers --keys 2000"),
        "{command}"
    );
    assert_eq!(
        report["fjall_metrics"].as_bool().unwrap(),
        cfg!(feature = "fjall-metrics")
    );
    let env = &report["environment"];
    // The commit and tree state, at the top as in every JSON the benchmark writes
    // (null only where git cannot say).
    assert_eq!(report["commit"], env["commit"]);
    assert!(report["clean"].is_boolean() || report["clean"].is_null());
    assert!(report["commit"].is_string() || report["commit"].is_null());
    assert_eq!(report["counted"], cfg!(feature = "fjall-metrics"));
    for field in ["cpu_model", "kernel", "file_system", "os"] {
        assert!(
            !env[field].as_str().unwrap().is_empty(),
            "environment.{field}"
        );
    }
    assert!(env["cores"].as_u64().unwrap() >= 1);
    assert!(env.get("memory_bytes").is_some());

    // Rows: two bloomkv filters + the 32 MiB and 512 MiB rows + five fjall rows (no
    // filter, 10 bits/key, 8 MiB, its own filters, 512 MiB) (+ three RocksDB rows with
    // the feature), each with both phases.
    let stores = if cfg!(feature = "rocksdb") { 12 } else { 9 };
    let summary = report["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 2 * stores);
    for s in summary {
        assert_eq!(s["runs"], 2);
        let ns = &s["ns_per_lookup"];
        let (min, median, max) = (
            ns["min"].as_f64().unwrap(),
            ns["median"].as_f64().unwrap(),
            ns["max"].as_f64().unwrap(),
        );
        assert!(min <= median && median <= max, "{s}");
        assert!(s["reads_per_lookup"]["median"].as_f64().is_some());
    }
    assert_eq!(report["rows"].as_array().unwrap().len(), 2 * stores);
    let settings = report["settings"].as_array().unwrap();
    assert!(settings.iter().any(|s| s["store"] == "fjall"
        && s["cache_bytes"] == 32 << 20
        && s["default_cache"] == true));

    // Both runs recorded, each store once per run, the order rotated by one.
    let records = report["run_records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    let order = |r: usize| -> Vec<String> {
        records[r]["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let (first, second) = (order(0), order(1));
    assert_eq!(first.len(), second.len());
    assert_eq!(first[1..], second[..second.len() - 1]);
    assert_eq!(first[0], second[second.len() - 1]);

    // The timed fill of each store, in every run.
    let fills = report["fill"].as_array().unwrap();
    let fill_stores = if cfg!(feature = "rocksdb") { 3 } else { 2 };
    assert_eq!(fills.len(), fill_stores);
    for f in fills {
        assert_eq!(f["runs"], 2);
        assert!(f["ns_per_put"]["median"].as_f64().unwrap() > 0.0);
    }
    assert!(dir.path().join("peers.svg").exists());

    // Ratios: per pair of rows and phase, the median of the per-run ratios with its
    // interval; two runs give a full-range interval covering 50%.
    let ratios = report["ratios"].as_array().unwrap();
    let find = |row: &str, versus: &str, phase: &str| {
        ratios
            .iter()
            .find(|r| r["row"] == row && r["versus"] == versus && r["phase"] == phase)
            .unwrap_or_else(|| panic!("no ratio {row} / {versus} {phase}"))
    };
    for phase in ["absent", "present"] {
        let r = find("bloomkv cache-local", "fjall 8M", phase);
        assert_eq!(r["runs"], 2);
        let (lo, median, hi) = (
            r["ci95"][0].as_f64().unwrap(),
            r["median"].as_f64().unwrap(),
            r["ci95"][1].as_f64().unwrap(),
        );
        assert!(lo <= median && median <= hi && lo > 0.0, "{r}");
        assert!((r["coverage"].as_f64().unwrap() - 0.5).abs() < 1e-12, "{r}");
        find("fjall no filter", "fjall", phase);
    }
    find("bloomkv fill", "fjall fill", "put");
    find("bloomkv fill", "fjall fill", "settled");
    assert!(report["ratio_interval"]
        .as_str()
        .unwrap()
        .contains("order statistics"));
    // The present-get target, judged on the interval: two runs cannot meet it.
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1);
    assert_ne!(targets[0]["verdict"], "met");
    for f in report["run_records"][0]["fills"].as_array().unwrap() {
        assert!(f["settle_polls"].as_u64().unwrap() >= 2, "{f}");
    }
}

/// `--multi-get N` adds a twin of every flat row with the same lookups, and
/// ratios against its own single gets; flags a shape does not use are refused.
#[test]
fn multi_get_twins_and_ignored_flags() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = [&TINY[..], &["--runs", "1", "--filters", "cache-local"]].concat();
    let report = run_with_json(
        dir.path(),
        &[&tiny[..], &["--no-fill", "--multi-get", "8"]].concat(),
    );
    let rows = report["rows"].as_array().unwrap();
    for store in ["bloomkv cache-local", "fjall", "fjall 8M"] {
        let twin = format!("{store} multi-get 8");
        for phase in ["absent", "present"] {
            let row = rows
                .iter()
                .find(|r| r["filter"] == twin.as_str() && r["phase"] == phase)
                .unwrap_or_else(|| panic!("no row {twin} {phase}"));
            assert_eq!(row["lookups"], 100);
            assert_eq!(row["found"], if phase == "present" { 100 } else { 0 });
        }
        assert!(report["ratios"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["row"] == twin.as_str() && r["versus"] == store));
    }

    for (refused, names) in [
        (&["--prefix-scans", "5"][..], "--prefix-scans"),
        (&["--allocation", "uniform"], "--allocation"),
        (&["--cache-mib", "8"], "--cache-mib"),
        (&["--fill-only"], "--filters is about lookups"),
        (&["--multi-get", "1"], "--multi-get"),
    ] {
        assert_refused(dir.path(), &tiny, refused, names);
    }
}

/// `--lz4-rows` adds LZ4 twins whose settings say so, and `--compression lz4` is
/// refused where some rows would stay uncompressed.
#[test]
fn lz4_rows_are_added_and_partial_compression_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = [&TINY[..], &["--runs", "1", "--filters", "cache-local"]].concat();
    let report = run_with_json(
        dir.path(),
        &[&tiny[..], &["--no-fill", "--lz4-rows"]].concat(),
    );
    let settings = report["settings"].as_array().unwrap();
    let notes = |store: &str| {
        settings
            .iter()
            .find(|s| s["store"] == store)
            .unwrap_or_else(|| panic!("no setting for {store}"))["notes"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for twin in ["bloomkv cache-local lz4", "fjall lz4"] {
        assert!(notes(twin).ends_with("LZ4 data blocks"), "{}", notes(twin));
    }
    for raw in ["bloomkv cache-local", "fjall"] {
        assert!(!notes(raw).contains("LZ4"), "{}", notes(raw));
    }
    let summary = report["summary"].as_array().unwrap();
    assert!(summary
        .iter()
        .any(|r| r["store"] == "fjall lz4" && r["phase"] == "present"));
    // Each twin's tables are well under its raw row's: compression is really on.
    let table_bytes = |store: &str| {
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["filter"] == store && r["phase"] == "absent")
            .unwrap_or_else(|| panic!("no row for {store}"))["table_bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("{store} reports no table bytes"))
    };
    for raw in ["bloomkv cache-local", "fjall"] {
        let (plain, lz4) = (table_bytes(raw), table_bytes(&format!("{raw} lz4")));
        assert!(
            lz4 * 4 < plain * 3,
            "{raw}: {lz4} bytes with LZ4, {plain} without"
        );
    }

    for refused in [
        &["--compression", "lz4"][..],
        &["--shape", "leveled", "--lz4-rows"],
        &["--no-fill", "--compression", "lz4", "--lz4-rows"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bloomkv-peers"))
            .args(&tiny)
            .args(refused)
            .arg("--dir")
            .arg(dir.path().join("refused"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{refused:?} ran");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("lz4"), "{refused:?}: {err}");
    }
}

/// `--shape scale`: each store at its defaults is filled (timed, settled), then
/// answers the absent and present gets; the report has a fill and both rows per store,
/// and flags of other shapes are refused.
#[test]
fn the_scale_shape_fills_every_store_at_its_defaults_then_gets() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--shape", "scale", "--keys", "3000", "--lookups", "200"];
    let report = run_with_json(dir.path(), &[&args[..], &["--runs", "1"]].concat());
    assert_eq!(report["shape"], "scale");
    let rows = report["rows"].as_array().unwrap();
    for store in ["bloomkv", "fjall"] {
        for phase in ["absent", "present"] {
            let row = rows
                .iter()
                .find(|r| r["filter"] == store && r["phase"] == phase)
                .unwrap_or_else(|| panic!("no row {store} {phase}"));
            assert_eq!(row["found"], if phase == "present" { 200 } else { 0 });
        }
        let fill = report["fill"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["store"] == store)
            .unwrap_or_else(|| panic!("no fill of {store}"));
        assert_eq!(fill["runs"], 1, "{fill}");
    }
    for (refused, names) in [
        (&["--tables", "3"][..], "--tables"),
        (&["--allocation", "uniform"], "--allocation"),
        (&["--fill-only"], "--fill-only"),
    ] {
        assert_refused(dir.path(), &args, refused, names);
    }
}
