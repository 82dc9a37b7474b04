//! Three loose ends from an outside review, each closed and kept closed:
//!
//! * the clean-close mark (`CLOSED`) is created durably (a power loss right after a
//!   clean close keeps it, so the next open keeps its log) and removed durably (a
//!   power loss right after the open that used it does not bring it back);
//! * `repair` moves a table the manifest does not name into `lost/`, as open does,
//!   instead of deleting it;
//! * the hash-contract check at open covers `add_hash` (prefixes go in through it),
//!   not only `add_key`;
//! * and `DbStats::open_micros` (issue 39, item 2's counter) says how long open took.

use std::path::Path;
use std::sync::Arc;

use bloomkv_filter::{
    BloomPolicy, FilterBuilder, FilterError, FilterPolicy, FilterReader, KeyHash,
};
use bloomkv_kv::fs::mem::{DirOps, MemFileSystem, UnsyncedData};
use bloomkv_kv::{repair, Db, Error, FilterKind, Options};

const DIR: &str = "/db";

fn options(mem: &MemFileSystem) -> Options {
    Options {
        file_system: Arc::new(mem.clone()),
        disable_auto_compaction: true,
        ..Options::default()
    }
}

fn closed() -> std::path::PathBuf {
    Path::new(DIR).join("CLOSED")
}

#[test]
fn the_closed_mark_survives_a_power_loss_after_a_clean_close() {
    let mem = MemFileSystem::new();
    let db = Db::open(DIR, options(&mem)).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    mem.power_loss(UnsyncedData::Lose, DirOps::Lose);
    let mark = mem
        .file_bytes(&closed())
        .expect("the mark was made durable");
    assert_eq!(mark.len(), 20);
    // The mark vouches for the log: the next open keeps it instead of flushing.
    let db = Db::open(DIR, options(&mem)).unwrap();
    assert!(db.recovery_report().kept_in_memtable);
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn the_closed_mark_stays_removed_after_a_power_loss() {
    let mem = MemFileSystem::new();
    let db = Db::open(DIR, options(&mem)).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    assert!(mem.file_bytes(&closed()).is_some());
    let db = Db::open(DIR, options(&mem)).unwrap();
    assert!(mem.file_bytes(&closed()).is_none());
    std::mem::forget(db); // the process dies: no close, no new mark
    mem.power_loss(UnsyncedData::Lose, DirOps::Lose);
    assert!(
        mem.file_bytes(&closed()).is_none(),
        "the removal was made durable before the open went on"
    );
}

#[test]
fn repair_moves_a_table_the_manifest_does_not_name_into_lost() {
    let mem = MemFileSystem::new();
    let db = Db::open(DIR, options(&mem)).unwrap();
    for t in 0..2 {
        for i in 0..200 {
            db.put(format!("key{t}{i:04}"), "v").unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
    let mut tables: Vec<_> = mem
        .paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    tables.sort();
    assert_eq!(tables.len(), 2);
    // A table no manifest names (a copy of a live one under a number of its own),
    // and damage in a live one, so repair rebuilds.
    let stranger = Path::new(DIR).join("000900.sst");
    let bytes = mem.file_bytes(&tables[1]).unwrap();
    mem.set_file_bytes(&stranger, bytes.clone());
    let mut damaged = mem.file_bytes(&tables[0]).unwrap();
    damaged[20] ^= 0x10;
    mem.set_file_bytes(&tables[0], damaged);

    let report = repair(DIR, options(&mem)).unwrap();
    assert!(report.repaired, "{report}");
    let moved = report
        .tables_moved_aside
        .iter()
        .find(|m| m.number == 900)
        .unwrap_or_else(|| panic!("000900.sst not moved aside: {report}"));
    assert!(moved.reason.contains("not named"), "{}", moved.reason);
    assert!(mem.file_bytes(&stranger).is_none());
    assert_eq!(
        mem.file_bytes(&moved.to),
        Some(bytes),
        "kept whole in lost/, never deleted"
    );
    assert!(moved.to.starts_with(Path::new(DIR).join("lost")));
}

/// A builder whose `add_key` keeps the contract but whose `add_hash` does not.
struct BadAddHash(Box<dyn FilterBuilder>);

impl FilterBuilder for BadAddHash {
    fn add_key(&mut self, key: &[u8]) {
        self.0.add_hash(KeyHash::of(key));
    }
    fn add_hash(&mut self, hash: KeyHash) {
        self.0.add_hash(KeyHash::from_halves(!hash.h1, hash.h2));
    }
    fn num_keys(&self) -> u64 {
        self.0.num_keys()
    }
    fn finish(&mut self) -> Vec<u8> {
        self.0.finish()
    }
}

#[derive(Debug)]
struct BadPolicy(BloomPolicy);

impl FilterPolicy for BadPolicy {
    fn name(&self) -> &str {
        "example.BadAddHash"
    }
    fn bits_per_key(&self) -> f64 {
        self.0.bits_per_key()
    }
    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(BadAddHash(self.0.new_builder()))
    }
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        self.0.open_reader(block)
    }
}

#[test]
fn a_policy_whose_add_hash_breaks_the_contract_is_refused() {
    let policy = Arc::new(BadPolicy(BloomPolicy::standard(10.0).unwrap()));
    let options = Options {
        filter: FilterKind::Custom(policy),
        file_system: Arc::new(MemFileSystem::new()),
        ..Options::default()
    };
    match options.validate() {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("add_hash"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let fs = options.file_system.clone();
    assert!(matches!(
        Db::open(DIR, options),
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        !fs.exists(Path::new(DIR)),
        "refused before anything is written"
    );
}

/// `DbStats::open_micros` is the open's own time: within the time the caller measured
/// around the call, and fixed afterwards whatever the handle does.
#[test]
fn open_micros_is_the_time_the_open_took() {
    let mem = MemFileSystem::new();
    let db = Db::open(DIR, options(&mem)).unwrap();
    for i in 0..100 {
        db.put(format!("k{i}"), "v").unwrap();
    }
    db.close().unwrap();
    let started = std::time::Instant::now();
    let db = Db::open(DIR, options(&mem)).unwrap();
    let outer = started.elapsed().as_micros() as u64;
    let open = db.stats().open_micros;
    assert!(open <= outer, "{open} µs inside a call of {outer} µs");
    db.flush().unwrap();
    assert_eq!(db.stats().open_micros, open);
}
