//! The store against a model over the option space, range deletes among the writes:
//! every filter kind, LZ4 or raw
//! blocks (ZSTD on the bottommost level in one variant of four), Monkey allocation, prefix extractors of several lengths, range filters,
//! dynamic levels, tiny blocks and restart intervals. Up to six live snapshots, each
//! with a copy of the model; every check is a get, a forward scan with values, then
//! the same range walked with a random mix of `next` and `next_back` (bounds of every
//! kind, inverted ones too), and a prefix scan walked the same way. Keys are built
//! from the bytes 00, `a`, `b` and FF, or share long prefixes (`long_keys`), so ties
//! on the index's and L0's search words and keys too long to store inline come up.
//!
//! `model_variants_sweep` (ignored) walks the option space over many seeds:
//! `SEEDS=200 BASE=1000 cargo test --release -p bloomkv-kv --test model_variants --
//! --ignored` (`LONGKEYS=1` for the long-prefix keys).

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bloomkv_kv::{Db, FixedPrefix, Options, RangeFilterOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One point of the option space.
#[derive(Clone, Copy, Debug, Default)]
struct Cfg {
    /// Keys sharing long prefixes instead of short ones (see `key`).
    long_keys: bool,
    /// Picks the filter kind, compression, allocation, frozen memtables and whether
    /// compaction runs on its own, each from its own residue (see `options`).
    variant: u8,
    /// A `FixedPrefix` of this length, or no extractor.
    prefix_len: Option<usize>,
    range_filter: bool,
    /// `dynamic_level_bytes`.
    dynamic: bool,
    block_size: usize,
    restart: usize,
}

fn options(c: Cfg) -> Options {
    Options {
        memtable_size: 8 * 1024,
        block_size: c.block_size,
        restart_interval: c.restart,
        l0_compaction_trigger: 2,
        level1_max_bytes: 16 * 1024,
        target_file_size: 4 * 1024,
        block_cache_size: 8 * 1024,
        dynamic_level_bytes: c.dynamic,
        prefix_extractor: c
            .prefix_len
            .map(|n| Arc::new(FixedPrefix::new(n)) as Arc<dyn bloomkv_kv::PrefixExtractor>),
        range_filter: c.range_filter.then(RangeFilterOptions::default),
        filter: match c.variant % 4 {
            0 => bloomkv_kv::FilterKind::CacheLocalBloom,
            1 => bloomkv_kv::FilterKind::Ribbon,
            2 => bloomkv_kv::FilterKind::None,
            _ => bloomkv_kv::FilterKind::StandardBloom,
        },
        compression: if c.variant % 2 == 1 {
            bloomkv_kv::Compression::Lz4
        } else {
            bloomkv_kv::Compression::None
        },
        // One variant in four writes its bottommost level as ZSTD (format 6).
        bottommost_compression: (c.variant % 4 == 2)
            .then_some(bloomkv_kv::Compression::Zstd { level: 3 }),
        filter_allocation: if c.variant % 3 == 1 {
            bloomkv_kv::FilterAllocation::Monkey
        } else {
            bloomkv_kv::FilterAllocation::Uniform
        },
        optimize_filters_for_hits: c.variant % 5 == 2,
        max_immutable_memtables: 1 + (c.variant % 3) as usize,
        disable_auto_compaction: c.variant % 7 == 3,
        ..Options::default()
    }
}

thread_local! {
    /// `Cfg::long_keys` of the run on this thread (`key` is called from everywhere).
    static LONG: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

const ALPHA: [u8; 4] = [0x00, b'a', b'b', 0xff];

/// A key: 0–4 bytes of 00/`a`/`b`/FF (one in seven one of the three hot keys "",
/// "a", "ab", which gather many versions), or with `LONG` set a cut of one long
/// prefix plus up to 3 such bytes.
fn key(rng: &mut StdRng) -> Vec<u8> {
    if LONG.with(|l| l.get()) {
        const BASE: &[u8] = b"user:0000000000000000000000000000000000000000:";
        let mut k = BASE[..rng.gen_range(0..=BASE.len())].to_vec();
        if rng.gen_bool(0.5) {
            k.truncate(rng.gen_range(30..=BASE.len()).min(k.len()));
        }
        let len = rng.gen_range(0..4);
        k.extend((0..len).map(|_| ALPHA[rng.gen_range(0..4)]));
        return k;
    }
    // Hot keys get many versions.
    if rng.gen_bool(0.15) {
        return vec![b'a', b'b'][..rng.gen_range(0..3).min(2)].to_vec();
    }
    let len = rng.gen_range(0..5);
    (0..len).map(|_| ALPHA[rng.gen_range(0..4)]).collect()
}

fn value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let len = if rng.gen_bool(0.1) {
        rng.gen_range(100..400)
    } else {
        rng.gen_range(0..20)
    };
    let mut v = format!("v{step}-").into_bytes();
    v.extend(std::iter::repeat_n(b'x', len));
    v
}

type Items = Vec<(Vec<u8>, Vec<u8>)>;

/// Each step of a walk: whether it went backwards, and the key it returned.
type Walk = Vec<(bool, Option<Vec<u8>>)>;

/// Walks `scan` with a random mix of next/next_back, returns what came out and what
/// the model says should have come out, in the same order.
fn mixed(mut scan: bloomkv_kv::ScanIter, want_all: &Items, rng: &mut StdRng) -> (Walk, Walk) {
    let (mut i, mut j) = (0usize, want_all.len());
    let mut got = Vec::new();
    let mut want = Vec::new();
    let mode = rng.gen_range(0..3); // 0: forward, 1: backward, 2: mixed
    for _ in 0..(want_all.len() + 2) {
        let back = match mode {
            0 => false,
            1 => true,
            _ => rng.gen_bool(0.5),
        };
        let g = if back { scan.next_back() } else { scan.next() };
        let g = g.map(|r| r.expect("scan error").0.to_vec());
        let w = if i < j {
            if back {
                j -= 1;
                Some(want_all[j].0.clone())
            } else {
                i += 1;
                Some(want_all[i - 1].0.clone())
            }
        } else {
            None
        };
        got.push((back, g));
        want.push((back, w));
    }
    (got, want)
}

trait Reader {
    fn get(&self, k: &[u8]) -> Option<Vec<u8>>;
    fn scan(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> bloomkv_kv::ScanIter;
    fn scan_prefix(&self, p: &[u8]) -> bloomkv_kv::ScanIter;
}

impl Reader for Db {
    fn get(&self, k: &[u8]) -> Option<Vec<u8>> {
        Db::get(self, k).unwrap().map(|b| b.to_vec())
    }
    fn scan(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> bloomkv_kv::ScanIter {
        Db::scan::<Vec<u8>, _>(self, (lo, hi))
    }
    fn scan_prefix(&self, p: &[u8]) -> bloomkv_kv::ScanIter {
        Db::scan_prefix(self, p)
    }
}

impl Reader for bloomkv_kv::Snapshot {
    fn get(&self, k: &[u8]) -> Option<Vec<u8>> {
        bloomkv_kv::Snapshot::get(self, k)
            .unwrap()
            .map(|b| b.to_vec())
    }
    fn scan(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> bloomkv_kv::ScanIter {
        bloomkv_kv::Snapshot::scan::<Vec<u8>, _>(self, (lo, hi))
    }
    fn scan_prefix(&self, p: &[u8]) -> bloomkv_kv::ScanIter {
        bloomkv_kv::Snapshot::scan_prefix(self, p)
    }
}

fn check(r: &dyn Reader, model: &Model, rng: &mut StdRng, what: &str) {
    let k = key(rng);
    assert_eq!(r.get(&k), model.get(&k).cloned(), "{what}: get({k:?})");
    let (lo, hi) = (
        common::random_bound(rng, key),
        common::random_bound(rng, key),
    );
    let want: Items = model
        .iter()
        .filter(|(k, _)| common::in_range(k, &lo, &hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // Values too, forward.
    let got: Items = r
        .scan(lo.clone(), hi.clone())
        .map(|x| x.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(got, want, "{what}: scan({lo:?}, {hi:?})");
    let (g, w) = mixed(r.scan(lo.clone(), hi.clone()), &want, rng);
    assert_eq!(g, w, "{what}: mixed scan({lo:?}, {hi:?})");
    let src = key(rng);
    let p = &src[..rng.gen_range(0..=src.len())];
    let want: Items = model
        .iter()
        .filter(|(k, _)| k.starts_with(p))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (g, w) = mixed(r.scan_prefix(p), &want, rng);
    assert_eq!(g, w, "{what}: mixed scan_prefix({p:?})");
}

fn run(seed: u64, steps: usize, cfg: Cfg) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model: Model = BTreeMap::new();
    let mut snaps: Vec<(bloomkv_kv::Snapshot, Model)> = Vec::new();
    LONG.with(|l| l.set(cfg.long_keys));
    let mut db = Db::open(dir.path(), options(cfg)).unwrap();
    for step in 0..steps {
        let what = format!("seed {seed} step {step} cfg {cfg:?}");
        match rng.gen_range(0..100) {
            0..=34 => {
                let (k, v) = (key(&mut rng), value(&mut rng, step));
                common::put(&db, &mut model, k, v);
            }
            35..=44 => common::delete(&db, &mut model, key(&mut rng)),
            45..=49 => {
                common::random_batch(&db, &mut model, &mut rng, key, |r| value(r, step));
            }
            50..=54 if snaps.len() < 6 => snaps.push((db.snapshot(), model.clone())),
            55..=57 if !snaps.is_empty() => {
                let i = rng.gen_range(0..snaps.len());
                snaps.swap_remove(i);
            }
            58..=74 if !snaps.is_empty() => {
                let i = rng.gen_range(0..snaps.len());
                let (snap, m) = &snaps[i];
                check(
                    snap,
                    m,
                    &mut rng,
                    &format!("{what} snapshot {}", snap.sequence_number()),
                );
            }
            75..=89 => check(&db, &model, &mut rng, &what),
            90..=93 => db.flush().unwrap(),
            94..=95 => db.compact().unwrap(),
            96 => db.wait_for_compaction().unwrap(),
            97 => {
                snaps.clear();
                db.close().unwrap();
                db = Db::open(dir.path(), options(cfg)).unwrap();
            }
            98..=99 => {
                // A range tombstone over [a, b): every key the model holds there goes.
                let (mut a, mut b) = (key(&mut rng), key(&mut rng));
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                if a < b {
                    db.delete_range(&a, &b).unwrap();
                    model.retain(|k, _| !(a <= *k && *k < b));
                }
            }
            _ => {}
        }
    }
    for (snap, m) in &snaps {
        check(snap, m, &mut rng, "final snapshot");
    }
}

/// Each filter kind (and none), raw and LZ4 blocks, no extractor; the last run with
/// long shared prefixes.
#[test]
fn mixed_direction_scans_and_snapshots_match_the_model() {
    for seed in 0..4 {
        let cfg = Cfg {
            block_size: 256,
            restart: 2,
            variant: seed as u8,
            long_keys: seed == 3,
            ..Cfg::default()
        };
        run(seed, 4000, cfg);
    }
}

/// A 2-byte prefix extractor, range filters and levels sized from the bottom up; then
/// a 1-byte extractor over 128-byte blocks with a restart at every entry.
#[test]
fn prefix_and_range_filters_match_the_model() {
    for (seed, prefix_len, block_size, restart) in [(100, 2, 256, 3), (200, 1, 128, 1)] {
        let cfg = Cfg {
            prefix_len: Some(prefix_len),
            range_filter: true,
            dynamic: seed == 100,
            block_size,
            restart,
            variant: 5,
            ..Cfg::default()
        };
        run(seed, 4000, cfg);
    }
}

#[test]
#[ignore]
fn model_variants_sweep() {
    let n: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let base: u64 = std::env::var("BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    for seed in base..base + n {
        let cfg = Cfg {
            prefix_len: [None, Some(0), Some(1), Some(2), Some(3)][(seed % 5) as usize],
            range_filter: seed % 2 == 0,
            dynamic: seed % 3 == 0,
            block_size: [64, 128, 256, 512][(seed % 4) as usize],
            restart: [1, 2, 3, 16][(seed / 4 % 4) as usize],
            long_keys: std::env::var("LONGKEYS").is_ok(),
            variant: (seed % 60) as u8,
        };
        run(seed, 6000, cfg);
    }
}
