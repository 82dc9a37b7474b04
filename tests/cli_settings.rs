//! The command line opens a store with the settings it records, not the defaults.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use bloomkv::kv::{
    load_options, Compression, Db, FilterKind, FixedPrefix, Options, RangeFilterOptions,
    SettingsState,
};
use bloomkv::{BloomPolicy, FilterBuilder, FilterError, FilterPolicy, FilterReader};

fn bloomkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Options far from the defaults in what the store records.
fn written() -> Options {
    Options {
        prefix_extractor: Some(Arc::new(FixedPrefix::new(3))),
        range_filter: Some(RangeFilterOptions::default()),
        compression: Compression::Lz4,
        filter: FilterKind::Ribbon,
        memtable_size: 1 << 20,
        ..Options::default()
    }
}

fn store(dir: &Path, options: Options) {
    let db = Db::open(dir, options).unwrap();
    for i in 0..500 {
        db.put(format!("k{:02}{i:04}", (i % 5) * 2), "v").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
}

/// The prefix extractor and compression the store records.
fn recorded(dir: &Path) -> (Option<String>, Compression) {
    let options = load_options(dir, Options::default()).unwrap().options;
    (
        options.prefix_extractor.map(|p| p.name().to_string()),
        options.compression,
    )
}

#[test]
fn put_and_delete_keep_the_stores_settings() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), written());
    let d = dir.path().to_str().unwrap();
    let before = recorded(dir.path());
    assert_eq!(
        before,
        (Some("bloomkv.FixedPrefix.3".into()), Compression::Lz4)
    );
    // With the defaults, either command would rewrite SETTINGS to say no prefix, no LZ4.
    assert!(bloomkv(&["put", d, "k00zz", "v"]).status.success());
    assert!(bloomkv(&["delete", d, "k000001"]).status.success());
    assert_eq!(recorded(dir.path()), before);
    let loaded = load_options(dir.path(), Options::default()).unwrap();
    assert_eq!(loaded.state, SettingsState::Recorded);
    assert_eq!(loaded.options.filter, FilterKind::Ribbon);
    assert_eq!(loaded.options.memtable_size, 1 << 20);
}

#[test]
fn repair_on_the_command_line_keeps_prefix_and_range_filters() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), written());
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    let out = bloomkv(&["repair", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let loaded = load_options(dir.path(), Options::default()).unwrap();
    let db = Db::open(dir.path(), loaded.options).unwrap();
    // A prefix inside the table's key range that no key has: the rebuilt table's
    // filter holds prefixes, so the scan skips it.
    // (prefixes are k00, k02, .., k08).
    assert_eq!(db.scan_prefix("k02").count(), 100);
    assert_eq!(db.scan_prefix("k03").count(), 0);
    let s = db.stats();
    assert!(s.prefix_negatives >= 1, "{s:?}");
}

#[test]
fn a_damaged_settings_file_is_said_and_the_defaults_are_used() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), written());
    let path = dir.path().join("SETTINGS");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[70] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let out = bloomkv(&["get", dir.path().to_str().unwrap(), "k000000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("settings damaged"),
        "{}",
        stderr(&out)
    );
}

#[derive(Debug)]
struct AppPolicy(BloomPolicy);

impl FilterPolicy for AppPolicy {
    fn name(&self) -> &str {
        "example.AppPolicy"
    }
    fn bits_per_key(&self) -> f64 {
        self.0.bits_per_key()
    }
    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        self.0.new_builder()
    }
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        self.0.open_reader(block)
    }
}

#[test]
fn a_policy_the_command_line_lacks_is_reported_readers_go_on_writers_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let policy = Arc::new(AppPolicy(BloomPolicy::standard(12.0).unwrap()));
    store(
        dir.path(),
        Options {
            filter: FilterKind::Custom(policy),
            ..Options::default()
        },
    );
    let d = dir.path().to_str().unwrap();
    let get = bloomkv(&["get", d, "k000000"]);
    assert!(get.status.success(), "{}", stderr(&get));
    assert!(
        stderr(&get).contains("example.AppPolicy"),
        "{}",
        stderr(&get)
    );
    for args in [
        vec!["put", d, "a", "b"],
        vec!["delete", d, "k000000"],
        vec!["repair", d],
    ] {
        let out = bloomkv(&args);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("example.AppPolicy"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn verify_reports_a_damaged_settings_file() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), written());
    let d = dir.path().to_str().unwrap();
    assert!(bloomkv(&["verify", d]).status.success());
    let path = dir.path().join("SETTINGS");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[70] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let out = bloomkv(&["verify", d]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SETTINGS"), "{text}");
}
