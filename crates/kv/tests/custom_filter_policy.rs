//! The plug-in, plugged in: a user's own `FilterPolicy` builds the store's filters;
//! the name recorded in each table picks the reader when the store reopens; an
//! unregistered name fails open and is counted; a policy that breaks the hash
//! contract is refused before it can lose data.

use std::sync::Arc;

use bloomkv_filter::{
    BloomPolicy, FilterBuilder, FilterError, FilterPolicy, FilterReader, KeyHash,
};
use bloomkv_kv::{Db, DbStats, Error, FilterKind, Options};

/// A user's policy: the standard Bloom layout at 12 bits/key under its own name.
#[derive(Debug)]
struct MyBloom(BloomPolicy);

impl MyBloom {
    fn shared() -> Arc<dyn FilterPolicy> {
        Arc::new(MyBloom(BloomPolicy::standard(12.0).unwrap()))
    }
}

impl FilterPolicy for MyBloom {
    fn name(&self) -> &str {
        "example.MyBloom"
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

const TABLES: u32 = 4;
const KEYS_PER_TABLE: u32 = 2_000;

fn present(table: u32, i: u32) -> String {
    format!("key{:08}", (i * TABLES + table) * 2)
}

fn absent(n: u32) -> String {
    format!("key{:08}", n * 2 + 1)
}

fn options(filter: FilterKind, extra: Vec<Arc<dyn FilterPolicy>>) -> Options {
    Options {
        filter,
        extra_filter_policies: extra,
        disable_auto_compaction: true,
        // Every lookup a filter does not stop reads its table: no block cache.
        block_cache_size: 0,
        ..Options::default()
    }
}

/// Every present key found, every absent one not; returns the counters' change.
fn lookups(db: &Db) -> DbStats {
    let before = db.stats();
    for t in 0..TABLES {
        for i in (0..KEYS_PER_TABLE).step_by(7) {
            assert!(db.get(present(t, i)).unwrap().is_some(), "false negative");
        }
    }
    for n in 0..5_000 {
        assert!(db.get(absent(n)).unwrap().is_none());
    }
    let after = db.stats();
    DbStats {
        filter_checks: after.filter_checks - before.filter_checks,
        filter_negatives: after.filter_negatives - before.filter_negatives,
        data_block_reads: after.data_block_reads - before.data_block_reads,
        filter_unknown_policy: after.filter_unknown_policy,
        ..after
    }
}

#[test]
fn a_custom_policy_builds_filters_and_its_name_reopens_them() {
    let dir = tempfile::tempdir().unwrap();
    let policy = MyBloom::shared();
    {
        let db = Db::open(
            dir.path(),
            options(FilterKind::Custom(policy.clone()), vec![]),
        )
        .unwrap();
        for t in 0..TABLES {
            for i in 0..KEYS_PER_TABLE {
                db.put(present(t, i), "v").unwrap();
            }
            db.flush().unwrap();
        }
        let infos = db.table_infos();
        assert_eq!(infos.len(), TABLES as usize);
        let used = lookups(&db);
        assert!(used.filter_checks > 0);
        // 5,000 absent keys against 4 tables: nearly every check a negative.
        assert!(
            used.filter_negatives * 100 > used.filter_checks * 80,
            "{used:?}"
        );
        assert_eq!(used.filter_unknown_policy, 0);
        db.close().unwrap();
    }

    // Reopened without the policy: tables fail open, counted, answers unchanged.
    {
        let db = Db::open(dir.path(), options(FilterKind::CacheLocalBloom, vec![])).unwrap();
        // Counted as each table is opened, by the first lookup that reaches it.
        let used = lookups(&db);
        assert_eq!(used.filter_unknown_policy, u64::from(TABLES));
        assert_eq!(db.stats().filter_corrupt, 0, "unknown is not corrupt");
        assert_eq!(used.filter_checks, 0, "no filter consulted");
        assert!(used.data_block_reads >= 5_000, "{used:?}");
        db.close().unwrap();
    }

    // Reopened with the policy registered: the filters are used again.
    let db = Db::open(
        dir.path(),
        options(FilterKind::CacheLocalBloom, vec![policy.clone()]),
    )
    .unwrap();
    assert_eq!(db.stats().filter_unknown_policy, 0);
    let used = lookups(&db);
    assert!(used.filter_negatives * 100 > used.filter_checks * 80);
    assert!(used.data_block_reads < 5_000, "{used:?}");
}

/// A policy whose builder hashes keys its own way: `add_key` disagrees with the
/// `KeyHash` the store probes with.
#[derive(Debug)]
struct OwnHash(BloomPolicy);

struct OwnHashBuilder(Box<dyn FilterBuilder>);

impl FilterBuilder for OwnHashBuilder {
    fn add_key(&mut self, key: &[u8]) {
        let mut salted = key.to_vec();
        salted.push(0x5a);
        self.0.add_hash(KeyHash::of(&salted));
    }
    fn add_hash(&mut self, hash: KeyHash) {
        self.0.add_hash(hash)
    }
    fn num_keys(&self) -> u64 {
        self.0.num_keys()
    }
    fn finish(&mut self) -> Vec<u8> {
        self.0.finish()
    }
}

impl FilterPolicy for OwnHash {
    fn name(&self) -> &str {
        "example.OwnHash"
    }
    fn bits_per_key(&self) -> f64 {
        self.0.bits_per_key()
    }
    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(OwnHashBuilder(self.0.new_builder()))
    }
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        self.0.open_reader(block)
    }
}

#[test]
fn a_policy_that_breaks_the_hash_contract_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let bad: Arc<dyn FilterPolicy> = Arc::new(OwnHash(BloomPolicy::standard(10.0).unwrap()));
    match Db::open(dir.path(), options(FilterKind::Custom(bad), vec![])) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("hash contract"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // The same wrapper without the salt passes.
    let good = MyBloom::shared();
    Db::open(dir.path(), options(FilterKind::Custom(good), vec![])).unwrap();
}
