//! Learned negatives (`Options::learned_memory`): a filter's false positive, once read,
//! is remembered so the same absent lookup skips the table — and never hides a key.
//!
//! Most tests use a filter that says "maybe" to everything, so every absent lookup of
//! a covered table is a false positive and learning is certain, not a matter of luck.

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomkv_filter::{FilterBuilder, FilterError, FilterInfo, FilterPolicy, FilterReader, KeyHash};
use bloomkv_kv::learned::{fingerprint, SLOT_BYTES};
use bloomkv_kv::{Db, FilterKind, Options};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A filter with no information: every key may be present.
#[derive(Debug)]
struct AlwaysMaybe;

struct CountKeys(u64);

impl FilterBuilder for CountKeys {
    fn add_hash(&mut self, _hash: KeyHash) {
        self.0 += 1;
    }
    fn num_keys(&self) -> u64 {
        self.0
    }
    fn finish(&mut self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }
}

#[derive(Debug)]
struct MaybeReader(u64);

impl FilterReader for MaybeReader {
    fn may_contain_hash(&self, _hash: KeyHash) -> bool {
        true
    }
    fn info(&self) -> FilterInfo {
        FilterInfo {
            layout: "always-maybe",
            num_bits: 64,
            num_keys: self.0,
            num_probes: 0,
            fill_ratio: 1.0,
            estimated_fp_rate: 1.0,
        }
    }
    fn memory_bytes(&self) -> usize {
        8
    }
}

impl FilterPolicy for AlwaysMaybe {
    fn name(&self) -> &str {
        "test.always-maybe"
    }
    fn bits_per_key(&self) -> f64 {
        0.0
    }
    fn new_builder(&self) -> Box<dyn FilterBuilder> {
        Box::new(CountKeys(0))
    }
    fn open_reader(&self, block: &[u8]) -> Result<Box<dyn FilterReader>, FilterError> {
        let bytes: [u8; 8] = block
            .try_into()
            .map_err(|_| FilterError::Corrupt("length".into()))?;
        Ok(Box::new(MaybeReader(u64::from_le_bytes(bytes))))
    }
}

fn options(learned_memory: usize) -> Options {
    Options {
        filter: FilterKind::Custom(Arc::new(AlwaysMaybe)),
        disable_auto_compaction: true,
        block_cache_size: 0, // every read the learned negatives do not stop is counted
        learned_memory,
        ..Options::default()
    }
}

fn present(i: u32) -> String {
    format!("key{:08}", 2 * i)
}

fn absent(i: u32) -> String {
    format!("key{:08}", 2 * i + 1)
}

const TABLES: u32 = 3;
const KEYS: u32 = 600;

/// `TABLES` overlapping tables of the even keys below `2 * KEYS`.
fn load(dir: &std::path::Path, opts: &Options) -> Db {
    let db = Db::open(dir, opts.clone()).unwrap();
    for t in 0..TABLES {
        for i in (t..KEYS).step_by(TABLES as usize) {
            db.put(present(i), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
    }
    db
}

/// Asks `key` `n` times, each answer checked absent.
fn ask_absent(db: &Db, key: &str, n: usize) {
    for _ in 0..n {
        assert_eq!(db.get(key).unwrap(), None, "{key}");
    }
}

/// `key` is found with `value` by every read the store has.
fn found_everywhere(db: &Db, key: &str, value: &str) {
    let want = Some(Bytes::from(value.to_owned()));
    assert_eq!(db.get(key).unwrap(), want, "get {key}");
    assert_eq!(
        db.multi_get([key, "zzz", key]).unwrap(),
        vec![want.clone(), None, want.clone()],
        "multi_get {key}"
    );
    assert_eq!(db.snapshot().get(key).unwrap(), want, "snapshot get {key}");
    assert_eq!(
        db.snapshot().multi_get([key]).unwrap(),
        vec![want.clone()],
        "snapshot multi_get {key}"
    );
    let scanned: Vec<_> = db
        .scan(key.as_bytes()..=key.as_bytes())
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(scanned.len(), 1, "scan {key}");
    assert_eq!(Some(scanned[0].1.clone()), want, "scan {key}");
}

#[test]
fn a_key_asked_a_thousand_times_while_absent_is_found_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(64 << 10);
    let mut db = load(dir.path(), &opts);
    let keys: Vec<String> = (0..5).map(|i| absent(i * 97 + 11)).collect();

    let before = db.stats();
    for key in &keys {
        ask_absent(&db, key, 1_000);
    }
    let s = db.stats();
    // The first ask of each key reads each table once and learns; the other 999
    // skip every table (none refused: the test's keys were checked to learn).
    let reads = s.data_block_reads - before.data_block_reads;
    assert_eq!(s.learned_refused, 0);
    assert_eq!(reads, keys.len() as u64 * u64::from(TABLES), "reads");
    assert_eq!(
        s.learned_skips - before.learned_skips,
        keys.len() as u64 * 999 * u64::from(TABLES)
    );
    assert_eq!(s.learned_entries, keys.len() as u64 * u64::from(TABLES));
    let old_snapshot = db.snapshot();

    // In the memtable.
    db.put(&keys[0], "w0").unwrap();
    found_everywhere(&db, &keys[0], "w0");
    assert_eq!(
        old_snapshot.get(&keys[0]).unwrap(),
        None,
        "the old snapshot"
    );

    // After a flush: a new table, beside the tables that learned the key absent.
    db.put(&keys[1], "w1").unwrap();
    db.flush().unwrap();
    for (k, v) in [(&keys[0], "w0"), (&keys[1], "w1")] {
        found_everywhere(&db, k, v);
    }

    // After a compaction: every table that learned is retired.
    ask_absent(&db, &keys[2], 1_000);
    db.put(&keys[2], "w2").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    for (k, v) in [(&keys[0], "w0"), (&keys[1], "w1"), (&keys[2], "w2")] {
        found_everywhere(&db, k, v);
    }
    // What the compaction's output learns is about it alone.
    ask_absent(&db, &keys[3], 1_000);
    assert!(db.stats().learned_skips > s.learned_skips);
    db.put(&keys[3], "w3").unwrap();
    found_everywhere(&db, &keys[3], "w3");
    drop(old_snapshot);

    // After a reopen: learned again, then written.
    db.close().unwrap();
    db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.stats().learned_entries, 0, "a reopen starts empty");
    ask_absent(&db, &keys[4], 1_000);
    assert!(db.stats().learned_skips >= 999);
    db.put(&keys[4], "w4").unwrap();
    found_everywhere(&db, &keys[4], "w4");
    db.flush().unwrap();
    for (i, k) in keys.iter().enumerate() {
        found_everywhere(&db, k, &format!("w{i}"));
    }
}

#[test]
fn multi_get_learns_and_skips_like_get() {
    let dir = tempfile::tempdir().unwrap();
    let db = load(dir.path(), &options(64 << 10));
    let keys: Vec<String> = (0..50).map(|i| absent(i * 7)).collect();
    assert!(db.multi_get(&keys).unwrap().iter().all(Option::is_none));
    let first = db.stats();
    // Every key a false positive in every table covering it: each learned or refused.
    assert_eq!(first.filter_true_positives, 0);
    assert_eq!(
        first.learned_recorded + first.learned_refused,
        first.filter_positives
    );
    assert!(first.filter_positives >= (keys.len() as u64 - 1) * u64::from(TABLES));
    for _ in 0..10 {
        assert!(db.multi_get(&keys).unwrap().iter().all(Option::is_none));
    }
    let after = db.stats();
    assert!(
        after.data_block_reads - first.data_block_reads <= 10 * first.learned_refused,
        "only refused negatives are read again"
    );
    assert_eq!(
        after.learned_skips - first.learned_skips,
        10 * first.learned_recorded
    );
    // Half of them written, the rest still absent.
    for k in keys.iter().step_by(2) {
        db.put(k, "now").unwrap();
    }
    db.flush().unwrap();
    let got = db.multi_get(&keys).unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g.is_some(), i % 2 == 0, "{}", keys[i]);
    }
}

/// A key whose fingerprint equals `target`'s: `prefix` followed by a counter.
fn colliding(target: &str, prefix: &str) -> String {
    let fp = fingerprint(KeyHash::of(target.as_bytes()));
    (0u64..1 << 24)
        .map(|n| format!("{prefix}{n}"))
        .find(|k| k != target && fingerprint(KeyHash::of(k.as_bytes())) == fp)
        .unwrap()
}

#[test]
fn a_present_key_sharing_the_fingerprint_in_the_same_block_blocks_learning() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        filter: FilterKind::Custom(Arc::new(AlwaysMaybe)),
        disable_auto_compaction: true,
        block_cache_size: 0,
        learned_memory: 64 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..KEYS {
        db.put(present(i), "v").unwrap();
    }
    db.flush().unwrap();
    // Each absent key sorts right after its present twin (`twin` + "/n"), before the
    // next present key: the index sends both to the same block, except when the twin
    // ends its block and the separator sits at the twin (then the absent key goes to
    // the next block and learning is right to go ahead).
    let twins: Vec<String> = (0..KEYS).step_by(37).map(present).collect();
    let absents: Vec<String> = twins
        .iter()
        .map(|p| colliding(p, &format!("{p}/")))
        .collect();
    for a in &absents {
        ask_absent(&db, a, 50);
    }
    let s = db.stats();
    assert!(
        s.learned_refused as usize >= absents.len() - 2,
        "refused {} of {}",
        s.learned_refused,
        absents.len()
    );
    // Only an absent key sent to the block after its twin's can have been learned.
    assert!(s.learned_recorded <= 2, "recorded {}", s.learned_recorded);
    // Whatever was learned, each twin is found.
    for p in &twins {
        assert_eq!(db.get(p).unwrap().as_deref(), Some(&b"v"[..]), "{p}");
    }
    let mut both: Vec<&String> = twins.iter().chain(&absents).collect();
    both.sort();
    let got = db.multi_get(&both).unwrap();
    for (k, g) in both.iter().zip(got) {
        assert_eq!(g.is_some(), twins.contains(k), "{k}");
    }
}

#[test]
fn a_learned_fingerprint_in_another_block_never_hides_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(64 << 10)).unwrap();
    for i in 0..KEYS {
        db.put(present(i), "v").unwrap();
    }
    db.flush().unwrap();
    // Absent keys far from their present twins (just after the next-to-last present
    // key: in the table's last block, the twins in its first half), same fingerprint.
    let twins: Vec<String> = (0..KEYS / 2).step_by(41).map(present).collect();
    let far = format!("{}/", present(KEYS - 2));
    let absents: Vec<String> = twins.iter().map(|p| colliding(p, &far)).collect();
    let before = db.stats();
    for a in &absents {
        ask_absent(&db, a, 100);
    }
    let s = db.stats();
    assert!(s.learned_recorded - before.learned_recorded >= absents.len() as u64 - 1);
    assert!(s.learned_skips - before.learned_skips >= 99 * (absents.len() as u64 - 1));
    for p in &twins {
        assert_eq!(db.get(p).unwrap().as_deref(), Some(&b"v"[..]), "{p}");
        assert_eq!(db.snapshot().get(p).unwrap().as_deref(), Some(&b"v"[..]));
    }
    let got = db.multi_get(twins.iter().chain(&absents)).unwrap();
    assert_eq!(got.iter().filter(|g| g.is_some()).count(), twins.len());
}

#[test]
fn learned_memory_stays_within_its_budget() {
    for budget in [64usize, 200, 1_000, 4_096, 65_536] {
        let dir = tempfile::tempdir().unwrap();
        let db = load(dir.path(), &options(budget));
        for i in 0..2_000 {
            ask_absent(&db, &absent(i % KEYS), 1);
        }
        let s = db.stats();
        assert!(s.learned_bytes <= budget as u64, "budget {budget}: {s:?}");
        assert!(
            s.learned_entries * SLOT_BYTES as u64 <= s.learned_bytes,
            "budget {budget}"
        );
        if budget >= 1_000 {
            assert!(s.learned_entries > 0, "budget {budget}");
        }
    }
    // No budget, nothing held or learned.
    let dir = tempfile::tempdir().unwrap();
    let db = load(dir.path(), &options(0));
    ask_absent(&db, &absent(3), 10);
    let s = db.stats();
    assert_eq!(
        (s.learned_bytes, s.learned_entries, s.learned_skips),
        (0, 0, 0)
    );
}

/// Zipf-like ranks: `P(r) ∝ 1 / (r + 1)`.
struct Zipfish(Vec<f64>);

impl Zipfish {
    fn new(n: usize) -> Zipfish {
        let mut acc = 0.0;
        Zipfish(
            (0..n)
                .map(|r| {
                    acc += 1.0 / (r as f64 + 1.0);
                    acc
                })
                .collect(),
        )
    }
    fn sample(&self, rng: &mut StdRng) -> usize {
        let u = rng.gen::<f64>() * self.0[self.0.len() - 1];
        self.0.partition_point(|&c| c < u).min(self.0.len() - 1)
    }
}

#[test]
fn zipf_absent_lookups_mixed_with_writes_match_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        filter: FilterKind::Custom(Arc::new(AlwaysMaybe)),
        block_cache_size: 0,
        block_size: 256, // many blocks, so learned negatives name many
        l0_compaction_trigger: 3,
        learned_memory: 300, // a few sets: constant eviction
        ..Options::default()
    };
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(0x1ea2);
    const SPACE: usize = 400;
    // Ranks scrambled over the key space, so hot keys are everywhere.
    let mut order: Vec<usize> = (0..SPACE).collect();
    for i in (1..SPACE).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    let zipf = Zipfish::new(SPACE);
    let key = |i: usize| format!("m{i:05}");
    let mut skips_seen = 0;
    for step in 0..6_000u32 {
        let k = key(order[zipf.sample(&mut rng)]);
        match rng.gen_range(0..100) {
            0..=11 => {
                let v = format!("v{step}");
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            12..=16 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            17..=79 => assert_eq!(
                db.get(&k).unwrap().as_deref(),
                model.get(&k).map(|v| v.as_bytes()),
                "step {step}: get {k}"
            ),
            80..=89 => {
                let ks: Vec<String> = (0..6).map(|_| key(order[zipf.sample(&mut rng)])).collect();
                let got = db.multi_get(&ks).unwrap();
                for (k, g) in ks.iter().zip(got) {
                    assert_eq!(
                        g.as_deref(),
                        model.get(k).map(|v| v.as_bytes()),
                        "step {step}: multi_get {k}"
                    );
                }
            }
            90..=93 => {
                let snap = db.snapshot();
                let frozen = model.clone();
                // Writes after the snapshot must not show through it.
                db.put(&k, "after").unwrap();
                model.insert(k.clone(), "after".into());
                for _ in 0..5 {
                    let k = key(order[zipf.sample(&mut rng)]);
                    assert_eq!(
                        snap.get(&k).unwrap().as_deref(),
                        frozen.get(&k).map(|v| v.as_bytes()),
                        "step {step}: snapshot get {k}"
                    );
                }
            }
            94..=96 => db.flush().unwrap(),
            97 => db.compact().unwrap(),
            98 => {
                let (a, b) = (rng.gen_range(0..SPACE), rng.gen_range(0..SPACE));
                let (lo, hi) = (key(a.min(b)), key(a.max(b)));
                let got: Vec<(Bytes, Bytes)> = db
                    .scan(lo.as_bytes()..hi.as_bytes())
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<(Bytes, Bytes)> = model
                    .range(lo.clone()..hi.clone())
                    .map(|(k, v)| (Bytes::from(k.clone()), Bytes::from(v.clone())))
                    .collect();
                assert_eq!(got, want, "step {step}: scan");
            }
            _ => {
                skips_seen += db.stats().learned_skips;
                db.close().unwrap();
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_bytes()), "{k}");
    }
    let s = db.stats();
    assert!(s.learned_bytes <= 300);
    assert!(
        skips_seen + s.learned_skips > 100,
        "the model test must exercise learned skips: {}",
        skips_seen + s.learned_skips
    );
}
