//! Errors that say what happened: an operating system's refusal is `Error::Io` with
//! the operation and the path, not corruption; a bad option is refused by
//! `Options::validate` with the one message `Db::open` would give.

use std::path::Path;
use std::sync::Arc;

use bloomkv_filter::{BloomPolicy, FilterBuilder, FilterError, FilterPolicy, FilterReader};
use bloomkv_kv::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
use bloomkv_kv::fs::mem::MemFileSystem;
use bloomkv_kv::fs::FileSystem;
use bloomkv_kv::{Db, Error, FilterKind, Options, PrefixExtractor};

#[test]
fn validate_refuses_what_open_refuses_with_one_message() {
    let cases: Vec<(&str, Options)> = vec![
        (
            "bits_per_key",
            Options {
                bits_per_key: 0.5,
                ..Options::default()
            },
        ),
        (
            "bits_per_key",
            Options {
                bits_per_key: 0.5,
                filter: FilterKind::None,
                ..Options::default()
            },
        ),
        (
            "bits_per_key",
            Options {
                bits_per_key: f64::NAN,
                ..Options::default()
            },
        ),
        (
            "bits_per_key",
            Options {
                bits_per_key: 100.5,
                filter: FilterKind::StandardBloom,
                ..Options::default()
            },
        ),
        (
            "memtable_size",
            Options {
                memtable_size: 0,
                ..Options::default()
            },
        ),
        // A stop trigger under the compaction trigger: writes would wait for a
        // compaction that is never due (see `backpressure.rs`).
        (
            "level0_stop_writes_trigger",
            Options {
                l0_compaction_trigger: 4,
                level0_slowdown_writes_trigger: 1,
                level0_stop_writes_trigger: 2,
                ..Options::default()
            },
        ),
        (
            "level0_slowdown_writes_trigger",
            Options {
                l0_compaction_trigger: 8,
                level0_slowdown_writes_trigger: 4,
                ..Options::default()
            },
        ),
        // Tables written without an extractor or a filter record an empty name: a
        // new extractor or policy named "" would pass for theirs (an extractor named
        // "" once made scans ask such tables' whole-key filters about prefixes and
        // skip every one of them).
        (
            "prefix_extractor",
            Options {
                prefix_extractor: Some(Arc::new(Unnamed)),
                ..Options::default()
            },
        ),
        (
            "filter policy",
            Options {
                filter: FilterKind::Custom(Arc::new(Unnamed)),
                ..Options::default()
            },
        ),
        (
            "filter policy",
            Options {
                extra_filter_policies: vec![Arc::new(Unnamed)],
                ..Options::default()
            },
        ),
    ];
    for (field, options) in cases {
        let checked = options.validate().unwrap_err();
        let dir = tempfile::tempdir().unwrap();
        let opened = Db::open(dir.path(), options.clone()).unwrap_err();
        let (Error::InvalidArgument(a), Error::InvalidArgument(b)) = (&checked, &opened) else {
            panic!("{options:?}: {checked:?} / {opened:?}");
        };
        assert_eq!(a, b, "validate and open say the same");
        assert!(a.contains(field), "{a}");
        let text = opened.to_string();
        assert_eq!(
            text.matches("invalid argument").count(),
            1,
            "one prefix: {text}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "refused before anything is written"
        );
    }
    for bpk in [1.0, 10.0, 100.0] {
        Options {
            bits_per_key: bpk,
            ..Options::default()
        }
        .validate()
        .unwrap();
    }
}

/// A prefix extractor and a filter policy (a Bloom filter's) that both go by "".
#[derive(Debug)]
struct Unnamed;

impl PrefixExtractor for Unnamed {
    fn name(&self) -> &str {
        ""
    }
    fn in_domain(&self, key: &[u8]) -> bool {
        key.len() >= 4
    }
    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        &key[..4]
    }
    fn covers_extensions(&self, prefix: &[u8]) -> bool {
        prefix.len() >= 4
    }
}

impl FilterPolicy for Unnamed {
    fn name(&self) -> &str {
        ""
    }
    fn bits_per_key(&self) -> f64 {
        10.0
    }
    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        BloomPolicy::standard(10.0).unwrap().new_builder()
    }
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        BloomPolicy::standard(10.0).unwrap().open_reader(block)
    }
}

/// A store on an in-memory disk with one table, and the fault layer in front of it.
fn store_with_a_table() -> (MemFileSystem, FaultFileSystem, Options) {
    let mem = MemFileSystem::new();
    let fs = FaultFileSystem::new(Arc::new(mem.clone()));
    let options = Options {
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    };
    let db = Db::open("/db", options.clone()).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    (mem, fs, options)
}

#[test]
fn a_live_table_the_os_refuses_to_open_is_an_io_error_not_corruption() {
    let (_, fs, options) = store_with_a_table();
    // What "Too many open files" or "Permission denied" look like to the store.
    fs.set_plan(FaultPlan::nth(1, &[OpKind::OpenRandom], Fault::Error));
    match Db::open("/db", options.clone()) {
        Err(Error::Io(e)) => assert!(e.to_string().contains("injected"), "{e}"),
        other => panic!("expected Io, got {other:?}"),
    }
    assert!(fs.fired());
    fs.set_plan(FaultPlan::none());
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_missing_live_table_is_corruption() {
    let (mem, _, options) = store_with_a_table();
    let table = mem
        .list(Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    mem.remove(&Path::new("/db").join(&table)).unwrap();
    match Db::open("/db", options) {
        Err(Error::Corruption { file, .. }) => assert!(file.ends_with(&table)),
        other => panic!("expected Corruption, got {other:?}"),
    }
}

#[test]
fn os_errors_name_the_operation_and_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("notes.txt");
    std::fs::write(&not_a_dir, "not a store").unwrap();
    let e = Db::open(&not_a_dir, Options::default()).unwrap_err();
    assert!(matches!(e, Error::Io(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&*not_a_dir.to_string_lossy()), "{text}");
    assert!(text.contains("create") || text.contains("list"), "{text}");
}
