//! The `bloomkv` command line, run as a user would run it.

use std::path::Path;
use std::process::{Command, Output};

fn bloomkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(args)
        .output()
        .expect("run bloomkv")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A store with one flushed table of 300 keys.
fn small_store(dir: &Path) {
    let db = bloomkv::Db::open(dir, bloomkv::Options::default()).unwrap();
    for i in 0..300 {
        db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
}

fn table_file(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table file")
}

#[test]
fn sizing_reproduces_the_source_documents_numbers() {
    let o = bloomkv(&["sizing", "--items", "1000", "--fp-rate", "0.01"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("bits                9586"), "{out}");
    assert!(out.contains("hash functions (k)  7"), "{out}");
}

#[test]
fn sizing_rejects_an_impossible_rate_with_one_line() {
    let o = bloomkv(&["sizing", "--items", "1000", "--fp-rate", "1.5"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.starts_with("bloomkv: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn put_get_delete_scan_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("db");
    let d = d.to_str().unwrap();
    for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
        assert!(bloomkv(&["put", d, k, v]).status.success());
    }
    let o = bloomkv(&["get", d, "b"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "2\n");
    assert!(bloomkv(&["delete", d, "b"]).status.success());
    let o = bloomkv(&["get", d, "b"]);
    assert_eq!(o.status.code(), Some(1), "a missing key exits 1");
    let o = bloomkv(&["scan", d]);
    assert_eq!(stdout(&o), "a\t1\nc\t3\n");
    let o = bloomkv(&["scan", d, "--from", "b", "--limit", "5"]);
    assert_eq!(stdout(&o), "c\t3\n");
    assert!(bloomkv(&["put", d, "d", "4"]).status.success());
    assert!(bloomkv(&["delete-range", d, "b", "d"]).status.success());
    let o = bloomkv(&["scan", d]);
    assert_eq!(stdout(&o), "a\t1\nd\t4\n");
    // An empty range is refused, and changes nothing.
    assert!(!bloomkv(&["delete-range", d, "d", "a"]).status.success());
    assert_eq!(stdout(&bloomkv(&["scan", d])), "a\t1\nd\t4\n");
}

#[test]
fn get_answers_several_keys_one_line_each_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("db");
    let d = d.to_str().unwrap();
    for (k, v) in [("a", "1"), ("c", "3")] {
        assert!(bloomkv(&["put", d, k, v]).status.success());
    }
    let o = bloomkv(&["get", d, "c", "a", "c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "3\n1\n3\n");
    let o = bloomkv(&["get", d, "c", "b", "a"]);
    assert_eq!(o.status.code(), Some(1), "one absent key exits 1");
    assert_eq!(stdout(&o), "3\n\n1\n", "the absent key's line is empty");
    assert!(stderr(&o).contains("key \"b\" not found"), "{}", stderr(&o));
    let o = bloomkv(&["get", d, "--hex", "63", "61"]);
    assert_eq!(stdout(&o), "33\n31\n");
}

#[test]
fn a_hundred_command_line_puts_leave_at_most_a_handful_of_tables() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("db");
    let d = d.to_str().unwrap();
    for i in 0..100 {
        let (k, v) = (format!("key{i:03}"), format!("value{i}"));
        let o = bloomkv(&["put", d, &k, &v]);
        assert!(o.status.success(), "put {i}: {}", stderr(&o));
    }
    let files: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let tables = files.iter().filter(|n| n.ends_with(".sst")).count();
    let logs = files.iter().filter(|n| n.ends_with(".wal")).count();
    assert!(tables <= 3, "{tables} tables: {files:?}");
    assert_eq!(logs, 1, "the runs share one log: {files:?}");
    let o = bloomkv(&["scan", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let expected: String = (0..100).map(|i| format!("key{i:03}\tvalue{i}\n")).collect();
    assert_eq!(stdout(&o), expected);
}

#[test]
fn tools_refuse_a_directory_without_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    for cmd in ["get", "inspect", "verify"] {
        let mut args = vec![cmd, missing.to_str().unwrap()];
        if cmd == "get" {
            args.push("k");
        }
        let o = bloomkv(&args);
        assert!(!o.status.success(), "{cmd} must fail");
        assert!(stderr(&o).starts_with("bloomkv: "), "{cmd}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
        assert!(!missing.exists(), "{cmd} must not create a store");
    }
}

#[test]
fn get_on_an_empty_directory_does_not_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let o = bloomkv(&["get", dir.path().to_str().unwrap(), "k"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("holds no bloomkv store"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("MANIFEST").exists());
}

#[test]
fn inspect_shows_levels_tables_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let o = bloomkv(&["inspect", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("L0: 1 table(s)"), "{out}");
    assert!(out.contains("300 entries"), "{out}");
    // Written with the default options: page-aligned data blocks.
    assert!(out.contains("format 5"), "{out}");
    assert!(out.contains("bloomkv.BloomFilter.cache-local"), "{out}");
    assert!(out.contains("6 probes"), "{out}");
}

#[test]
fn verify_passes_a_clean_store_and_finds_a_flipped_byte() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let d = dir.path().to_str().unwrap();
    let o = bloomkv(&["verify", d]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("0 problem(s)"));

    let table = table_file(dir.path());
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0x40; // inside the first data block
    std::fs::write(&table, bytes).unwrap();
    let o = bloomkv(&["verify", d]);
    assert!(!o.status.success());
    let out = stdout(&o);
    let name = table.file_name().unwrap().to_str().unwrap();
    assert!(out.contains("CORRUPT") && out.contains(name), "{out}");
    assert!(
        out.contains("at offset 0"),
        "the first block starts at offset 0: {out}"
    );
}

#[test]
fn repair_rebuilds_a_store_without_a_manifest_and_then_has_nothing_to_do() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let d = dir.path().to_str().unwrap();
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    assert!(!bloomkv(&["get", d, "key0007"]).status.success());
    let o = bloomkv(&["repair", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("MANIFEST is missing"), "{}", stdout(&o));
    let o = bloomkv(&["get", d, "key0007"]);
    assert_eq!(stdout(&o), "value7\n", "{}", stderr(&o));
    let o = bloomkv(&["repair", d]);
    assert!(stdout(&o).contains("needs no repair"), "{}", stdout(&o));
}

/// A store whose log holds 20 unflushed writes; returns the log's path.
fn store_with_a_log(dir: &Path) -> std::path::PathBuf {
    let db = bloomkv::Db::open(dir, bloomkv::Options::default()).unwrap();
    for i in 0..20 {
        db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
    }
    db.close().unwrap();
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .expect("a log")
}

#[test]
fn verify_says_which_recovery_mode_opens_a_damaged_log_and_what_it_drops() {
    let dir = tempfile::tempdir().unwrap();
    let wal = store_with_a_log(dir.path());
    let d = dir.path().to_str().unwrap();
    let clean = std::fs::read(&wal).unwrap();

    // Garbage after the last record: the default mode opens it, dropping 77 bytes.
    let mut bytes = clean.clone();
    bytes.extend_from_slice(&[0x5a; 77]);
    std::fs::write(&wal, &bytes).unwrap();
    let o = bloomkv(&["verify", d]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("TolerateCorruptTail (default): opens"),
        "{out}"
    );
    assert!(out.contains("dropped 77 byte(s)"), "{out}");
    assert!(out.contains("AbsoluteConsistency: does not open"), "{out}");

    // Damage in the middle: the default mode refuses; skipping or stopping opens it.
    let mut bytes = clean;
    bytes[20] ^= 0x01;
    std::fs::write(&wal, &bytes).unwrap();
    let o = bloomkv(&["verify", d]);
    let out = stdout(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("TolerateCorruptTail (default): does not open"),
        "{out}"
    );
    assert!(out.contains("SkipCorrupted: opens"), "{out}");
    assert!(out.contains("PointInTime: opens"), "{out}");
}

#[test]
fn inspect_names_the_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let manifest = dir.path().join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&manifest, bytes).unwrap();
    let o = bloomkv(&["inspect", dir.path().to_str().unwrap()]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("MANIFEST") && err.contains("corrupt"), "{err}");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
}

/// `bloomkv bench` over a small workload (3,000 keys in 3 tables, 300 lookups per
/// phase), with `extra` flags after.
fn small_bench(extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "--keys",
        "3000",
        "--tables",
        "3",
        "--lookups",
        "300",
    ];
    args.extend_from_slice(extra);
    bloomkv(&args)
}

#[test]
fn bench_writes_a_json_report_with_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out/bench.json");
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let o = small_bench(&["--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "four filters, two phases");
    for field in [
        "filter",
        "phase",
        "lookups",
        "found",
        "table_probes",
        "filter_negatives",
        "data_block_reads",
        "reads_per_lookup",
        "reads_avoided_pct",
        "observed_fp",
        "formula_fp",
        "ns_per_lookup",
        "filter_bits_per_key",
        "filter_mib",
        "os_read_syscalls",
        "os_read_bytes",
    ] {
        for row in rows {
            assert!(row.get(field).is_some(), "row lacks {field}: {row}");
        }
    }
    assert!(report["machine"]["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(report["workload"]["keys"], 3000);
    assert!(json.with_extension("svg").exists());
}

#[test]
fn bench_range_scans_skip_tables_and_write_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let o = bloomkv(&[
        "bench",
        "--keys",
        "3000",
        "--tables",
        "3",
        "--lookups",
        "100",
        "--filters",
        "none",
        "--prefix-scans",
        "0",
        "--range-scans",
        "200",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let range: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("bench-range.json")).unwrap(),
    )
    .unwrap();
    let rows = range["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 24, "three stores, four lengths, two phases");
    for row in rows {
        let skipped = row["tables_skipped"].as_u64().unwrap();
        let checks = row["filter_checks"].as_u64().unwrap();
        match (
            row["filter"].as_str().unwrap(),
            row["range_len"].as_u64().unwrap(),
        ) {
            ("none", _) => assert_eq!(checks, 0, "{row}"),
            ("prefix-8", _) => assert!(skipped <= checks, "{row}"),
            // Within L = 64 the filter rules out most tables; 1024 is "maybe".
            ("grafite", len) if len <= 64 => assert!(skipped * 10 > checks * 6, "{row}"),
            _ => assert_eq!(skipped, 0, "{row}"),
        }
    }
    assert!(range["filter_times"]["build_ns_per_key"].as_f64().unwrap() > 0.0);
    assert!(dir.path().join("bench-range.svg").exists());
    assert!(stdout(&o).contains("grafite"));
}

/// The format version of every table of the store in `dir`, as `inspect` reports it.
fn table_versions(dir: &Path) -> Vec<u64> {
    let o = bloomkv(&["inspect", dir.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    info["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["format_version"].as_u64().unwrap())
        .collect()
}

#[test]
fn bench_writes_aligned_tables_unless_told_not_to() {
    for (flag, version) in [(None, 5), (Some("false"), 2)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let mut args = vec![
            "--filters",
            "cache-local",
            "--prefix-scans",
            "0",
            "--dir",
            d,
        ];
        if let Some(f) = flag {
            args.extend(["--block-align", f]);
        }
        let o = small_bench(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert_eq!(out.contains("unaligned blocks"), flag.is_some(), "{out}");
        assert!(out.contains("dev KiB/lkp"), "{out}");
        let versions = table_versions(&dir.path().join("cache-local-bloom"));
        assert_eq!(versions, [version; 3], "{flag:?}");
    }
}
