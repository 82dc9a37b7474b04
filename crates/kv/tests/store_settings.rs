//! The store records its settings (`SETTINGS`) and the tools open it with them.
//!
//! * The file survives a crash at every file operation of the open that rewrites it
//!   (and of the open that creates the store): afterwards it is whole, the old
//!   settings or the new ones, and every key is there.
//! * A missing or damaged file is reported, the options given are used, nothing is
//!   lost, and the next writable open writes it again.
//! * The caller's options win at `Db::open`: the file is rewritten with them.
//! * `repair` rebuilds with the recorded settings: prefix and range filters come back.
//! * A policy or extractor the reader does not have is reported, never guessed.

use std::path::Path;
use std::sync::Arc;

use bloomkv_filter::{BloomPolicy, FilterBuilder, FilterError, FilterPolicy, FilterReader};
use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
use bloomkv_kv::fs::mem::{DirOps, MemFileSystem, UnsyncedData};
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{
    load_options, repair, Compression, Db, Error, FilterKind, FixedPrefix, Options,
    RangeFilterOptions, Settings, SettingsState,
};

const DIR: &str = "/db";
const KEYS: u32 = 300;

fn dir() -> &'static Path {
    Path::new(DIR)
}

fn key(i: u32) -> String {
    // Short, so the range filter's 8-byte key map sees every byte that differs.
    format!("t{:02}{i:05}", (i % 7) * 2)
}

/// The options the store is first written with.
fn first(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        file_system: fs,
        memtable_size: 4 << 10,
        disable_auto_compaction: true,
        ..Options::default()
    }
}

/// Options that differ from [`first`] in several recorded settings.
fn second(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        prefix_extractor: Some(Arc::new(FixedPrefix::new(3))),
        range_filter: Some(RangeFilterOptions::default()),
        compression: Compression::Lz4,
        filter: FilterKind::StandardBloom,
        ..first(fs)
    }
}

/// A store of [`KEYS`] keys in a few tables and a log, closed cleanly.
fn store(mem: &MemFileSystem) {
    let db = Db::open(DIR, first(Arc::new(mem.clone()))).unwrap();
    for i in 0..KEYS {
        db.put(key(i), format!("v{i}")).unwrap();
        if i % 100 == 99 {
            db.flush().unwrap();
        }
    }
    db.close().unwrap();
}

/// Every key is there, read with the options the store records.
fn check_keys(fs: Arc<dyn FileSystem>, when: &str) {
    let loaded = load_options(
        DIR,
        Options {
            read_only: true,
            ..first(fs)
        },
    )
    .unwrap();
    let db = Db::open(DIR, loaded.options).unwrap_or_else(|e| panic!("{when}: {e}"));
    for i in 0..KEYS {
        let got = db.get(key(i)).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(format!("v{i}").as_bytes()),
            "{when}: key {i}"
        );
    }
}

fn recorded(fs: &dyn FileSystem) -> Option<Settings> {
    Settings::read(fs, dir()).unwrap()
}

fn file_ops_of(work: impl Fn(&FaultFileSystem)) -> u64 {
    let mem = MemFileSystem::new();
    store(&mem);
    let fs = FaultFileSystem::new(Arc::new(mem));
    work(&fs);
    fs.ops()
}

fn reopen_with_second(fs: &FaultFileSystem) {
    if let Ok(db) = Db::open(DIR, second(Arc::new(fs.clone()))) {
        let _ = db.close();
    }
}

/// A power loss at every file operation of an open that rewrites the settings: the
/// file is then the old settings or the new ones, whole, and nothing is lost.
#[test]
fn settings_survive_a_power_loss_at_every_step_of_their_rewrite() {
    let ops = file_ops_of(reopen_with_second);
    assert!(ops > 10, "{ops} operations");
    let old = Settings::of(&first(Arc::new(MemFileSystem::new())));
    let new = Settings::of(&second(Arc::new(MemFileSystem::new())));
    let (mut saw_old, mut saw_new) = (false, false);
    for at in 1..=ops {
        for (n, data) in [UnsyncedData::Lose, UnsyncedData::KeepPrefix(at)]
            .into_iter()
            .enumerate()
        {
            let mem = MemFileSystem::new();
            store(&mem);
            let fs = FaultFileSystem::new(Arc::new(mem.clone()));
            fs.set_plan(FaultPlan::nth(at, &[], Fault::PowerLoss));
            reopen_with_second(&fs);
            drop(fs);
            let dir_ops = if n == 0 { DirOps::Lose } else { DirOps::Keep };
            mem.power_loss(data, dir_ops);
            let when = format!("power loss at operation {at} of {ops} ({data:?}, {dir_ops:?})");
            let got = recorded(&mem).unwrap_or_else(|| panic!("{when}: no SETTINGS"));
            assert!(got == old || got == new, "{when}: {got}");
            saw_old |= got == old;
            saw_new |= got == new;
            check_keys(Arc::new(mem.clone()), &when);
        }
    }
    assert!(
        saw_old && saw_new,
        "the sweep reached both sides of the rename"
    );
}

/// An I/O error or a short write at every operation of the rewrite: the open fails or
/// succeeds, and the file is whole either way.
#[test]
fn settings_survive_an_error_at_every_step_of_their_rewrite() {
    let ops = file_ops_of(reopen_with_second);
    let old = Settings::of(&first(Arc::new(MemFileSystem::new())));
    let new = Settings::of(&second(Arc::new(MemFileSystem::new())));
    for at in 1..=ops {
        for fault in [Fault::Error, Fault::ShortWrite] {
            let mem = MemFileSystem::new();
            store(&mem);
            let fs = FaultFileSystem::new(Arc::new(mem.clone()));
            fs.set_plan(FaultPlan::nth(at, &[], fault));
            reopen_with_second(&fs);
            let when = format!("{fault:?} at operation {at} of {ops}");
            let got = recorded(&mem).unwrap_or_else(|| panic!("{when}: no SETTINGS"));
            assert!(got == old || got == new, "{when}: {got}");
            assert!(
                !mem.paths().iter().any(|p| p.ends_with("SETTINGS.tmp")) || fs.fired(),
                "{when}"
            );
            check_keys(Arc::new(mem.clone()), &when);
        }
    }
}

/// A power loss at every operation of the open that creates a store: a store whose
/// manifest survived has its settings, whole.
#[test]
fn a_new_store_with_a_manifest_has_its_settings_after_any_crash() {
    let create = |fs: &FaultFileSystem| {
        if let Ok(db) = Db::open(DIR, second(Arc::new(fs.clone()))) {
            let _ = db.put("k", "v");
            let _ = db.close();
        }
    };
    let ops = {
        let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
        create(&fs);
        fs.ops()
    };
    let new = Settings::of(&second(Arc::new(MemFileSystem::new())));
    for at in 1..=ops {
        let mem = MemFileSystem::new();
        let fs = FaultFileSystem::new(Arc::new(mem.clone()));
        fs.set_plan(FaultPlan::nth(at, &[], Fault::PowerLoss));
        create(&fs);
        drop(fs);
        mem.power_loss(UnsyncedData::Lose, DirOps::Lose);
        if mem.file_bytes(&dir().join("MANIFEST")).is_some() {
            assert_eq!(recorded(&mem), Some(new.clone()), "power loss at {at}");
        }
    }
}

#[test]
fn a_missing_settings_file_is_reported_and_written_again_and_nothing_is_lost() {
    let mem = MemFileSystem::new();
    store(&mem);
    mem.remove(&dir().join("SETTINGS")).unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let loaded = load_options(DIR, second(fs.clone())).unwrap();
    assert_eq!(loaded.state, SettingsState::Missing);
    // The options given are used as they are.
    assert_eq!(
        Settings::of(&loaded.options),
        Settings::of(&second(fs.clone()))
    );
    let ro = Db::open(
        DIR,
        Options {
            read_only: true,
            ..first(fs.clone())
        },
    )
    .unwrap();
    assert_eq!(ro.settings_report().found, SettingsState::Missing);
    assert!(!ro.settings_report().written);
    drop(ro);
    assert!(recorded(&mem).is_none(), "a read-only open writes nothing");
    check_keys(fs.clone(), "settings missing");
    let db = Db::open(DIR, first(fs.clone())).unwrap();
    assert_eq!(db.settings_report().found, SettingsState::Missing);
    assert!(db.settings_report().written);
    db.close().unwrap();
    assert_eq!(recorded(&mem), Some(Settings::of(&first(fs))));
}

#[test]
fn a_damaged_settings_file_is_reported_not_used_and_nothing_is_lost() {
    let mem = MemFileSystem::new();
    store(&mem);
    let path = dir().join("SETTINGS");
    let mut bytes = mem.file_bytes(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x04;
    mem.set_file_bytes(&path, bytes);
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let loaded = load_options(DIR, second(fs.clone())).unwrap();
    assert!(
        matches!(&loaded.state, SettingsState::Damaged(why) if why.contains("checksum")),
        "{:?}",
        loaded.state
    );
    assert_eq!(
        Settings::of(&loaded.options),
        Settings::of(&second(fs.clone()))
    );
    check_keys(fs.clone(), "settings damaged");
    // Repair of an otherwise sound store mends only the settings file.
    let report = repair(DIR, first(fs.clone())).unwrap();
    assert!(report.repaired, "{report}");
    assert!(matches!(report.settings, SettingsState::Damaged(_)));
    assert!(report.tables_written.is_empty(), "{report}");
    assert_eq!(recorded(&mem), Some(Settings::of(&first(fs.clone()))));
    check_keys(fs, "settings mended");
}

/// At `Db::open` the caller's options win: new tables are built with them and the
/// file is rewritten to say so.
#[test]
fn the_callers_options_win_and_the_file_says_so() {
    let mem = MemFileSystem::new();
    store(&mem);
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let db = Db::open(DIR, second(fs.clone())).unwrap();
    let report = db.settings_report().clone();
    assert_eq!(report.found, SettingsState::Recorded);
    assert!(report.differed && report.written, "{report}");
    db.close().unwrap();
    assert_eq!(recorded(&mem), Some(Settings::of(&second(fs.clone()))));
    // The same options again: nothing differs, nothing is written.
    let db = Db::open(DIR, second(fs)).unwrap();
    assert!(!db.settings_report().differed && !db.settings_report().written);
    db.close().unwrap();
}

/// Tables built with a prefix extractor and a range filter, then their manifest lost:
/// `repair` with default options rebuilds them with both, because the store says so.
#[test]
fn repair_of_a_store_with_prefix_and_range_filters_keeps_them() {
    let skips = |keep_settings: bool| {
        let mem = MemFileSystem::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let written = Options {
            memtable_size: 64 << 20,
            ..second(fs.clone())
        };
        let db = Db::open(DIR, written).unwrap();
        for i in 0..KEYS {
            db.put(key(i), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
        mem.remove(&dir().join("MANIFEST")).unwrap();
        if !keep_settings {
            mem.remove(&dir().join("SETTINGS")).unwrap();
        }
        let report = repair(
            DIR,
            Options {
                file_system: fs.clone(),
                ..Options::default()
            },
        )
        .unwrap();
        assert!(
            report.repaired && !report.tables_written.is_empty(),
            "{report}"
        );
        // Opened the way the command line opens it: with what the store records.
        let loaded = load_options(
            DIR,
            Options {
                file_system: fs.clone(),
                read_only: true,
                ..Options::default()
            },
        )
        .unwrap();
        let db = Db::open(DIR, loaded.options).unwrap();
        check_keys(fs, "after repair");
        // Inside the table's key range: a prefix no key has (prefixes are t00,
        // t02, .., t12), and a short empty range under a prefix that has keys
        // (t02 holds t0200001, t0200008, ..).
        assert_eq!(db.scan_prefix("t03").count(), 0);
        assert_eq!(db.scan("t0200002".."t0200007").count(), 0);
        let stats = db.stats();
        (stats.prefix_negatives, stats.range_filter_negatives)
    };
    let (prefix, range) = skips(true);
    assert!(prefix >= 1, "the rebuilt tables hold prefixes: {prefix}");
    assert!(range >= 1, "the rebuilt tables hold range filters: {range}");
    // Without the file, repair cannot know: the same check finds neither.
    assert_eq!(skips(false), (0, 0));
}

/// The standard Bloom layout under a name of the application's own.
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
fn a_policy_the_reader_lacks_is_reported_and_repair_refuses_to_guess() {
    let mem = MemFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let policy: Arc<dyn FilterPolicy> = Arc::new(AppPolicy(BloomPolicy::standard(12.0).unwrap()));
    let written = Options {
        filter: FilterKind::Custom(policy.clone()),
        ..first(fs.clone())
    };
    let db = Db::open(DIR, written).unwrap();
    db.put("a", "1").unwrap();
    db.flush().unwrap();
    db.close().unwrap();

    let loaded = load_options(DIR, first(fs.clone())).unwrap();
    assert_eq!(loaded.unresolved.len(), 1);
    assert!(loaded.unresolved[0].contains("example.AppPolicy"));
    assert_eq!(loaded.options.filter, FilterKind::CacheLocalBloom);

    mem.remove(&dir().join("MANIFEST")).unwrap();
    match repair(DIR, first(fs.clone())) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("example.AppPolicy"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Given the policy (by name, among the extra ones), repair rebuilds with it.
    let with_it = Options {
        extra_filter_policies: vec![policy],
        ..first(fs.clone())
    };
    let loaded = load_options(DIR, with_it.clone()).unwrap();
    assert!(loaded.unresolved.is_empty());
    assert!(
        matches!(&loaded.options.filter, FilterKind::Custom(p) if p.name() == "example.AppPolicy"),
        "{:?}",
        loaded.options.filter
    );
    assert!(repair(DIR, with_it).unwrap().repaired);
}

#[test]
fn the_settings_write_is_temp_fsync_rename_dirsync() {
    let mem = MemFileSystem::new();
    store(&mem);
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    fs.record();
    Settings::of(&second(Arc::new(mem.clone())))
        .write(&fs, dir())
        .unwrap();
    assert_eq!(
        fs.take_log(),
        vec![
            OpKind::Create,
            OpKind::Append,
            OpKind::Sync,
            OpKind::Rename,
            OpKind::SyncDir
        ]
    );
}
