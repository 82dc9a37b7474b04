//! Scans held open while the store changes under them: puts, deletes, batches,
//! flushes, compactions and snapshot drops happen between their steps, and each step
//! (a `next` or a `next_back`, at random) must match a model taken when the scan
//! opened. Scans read the live store or a snapshot, by range or by prefix, under a
//! prefix extractor that is not fixed-length (up to the first `:`), a fixed one or
//! none, and range filters with settings away from the defaults. Keys are 0-4 bytes
//! of {00, `:`, `a`, `b`, FF}: the empty key, keys that prefix each other, and 0xFF.
//! `SEEDS=N` runs N seeds (default 6).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomkv_kv::{Db, FixedPrefix, Options, PrefixExtractor, RangeFilterOptions, ScanIter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The key up to and including its first ':'; keys without one are out of the domain.
#[derive(Debug)]
struct UpToColon;

impl PrefixExtractor for UpToColon {
    fn name(&self) -> &str {
        "test.UpToColon"
    }
    fn in_domain(&self, key: &[u8]) -> bool {
        key.contains(&b':')
    }
    fn transform<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        match key.iter().position(|&b| b == b':') {
            Some(i) => &key[..=i],
            None => key,
        }
    }
    fn covers_extensions(&self, prefix: &[u8]) -> bool {
        prefix.contains(&b':')
    }
}

const ALPHA: [u8; 5] = [0x00, b':', b'a', b'b', 0xff];

fn key(rng: &mut StdRng) -> Vec<u8> {
    if rng.gen_bool(0.1) {
        return vec![b'a', b':'][..rng.gen_range(0..3)].to_vec();
    }
    let len = rng.gen_range(0..5);
    (0..len).map(|_| ALPHA[rng.gen_range(0..5)]).collect()
}

struct Open {
    what: String,
    scan: ScanIter,
    want: Vec<(Vec<u8>, Vec<u8>)>,
    i: usize,
    j: usize,
    ended: bool,
}

impl Open {
    fn step(&mut self, rng: &mut StdRng) {
        let back = rng.gen_bool(0.5);
        let got = if back {
            self.scan.next_back()
        } else {
            self.scan.next()
        };
        let got = got.map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        });
        let want = if self.i < self.j {
            if back {
                self.j -= 1;
                Some(self.want[self.j].clone())
            } else {
                self.i += 1;
                Some(self.want[self.i - 1].clone())
            }
        } else {
            None
        };
        assert_eq!(got, want, "{} back={back}", self.what);
        if want.is_none() {
            self.ended = true;
        }
    }
}

fn options(variant: u64) -> Options {
    Options {
        memtable_size: if variant.is_multiple_of(2) {
            8 * 1024
        } else {
            64 * 1024
        },
        block_size: 128,
        restart_interval: 2,
        l0_compaction_trigger: 2,
        level1_max_bytes: 16 * 1024,
        target_file_size: 4 * 1024,
        prefix_extractor: match variant % 3 {
            0 => Some(Arc::new(UpToColon) as Arc<dyn PrefixExtractor>),
            1 => Some(Arc::new(FixedPrefix::new(2)) as Arc<dyn PrefixExtractor>),
            _ => None,
        },
        range_filter: (variant % 4 < 3).then(|| RangeFilterOptions {
            bits_per_key: [3.0, 5.5, 40.0][(variant % 3) as usize],
            max_range_len: [1, 3, 1 << 40, 64][(variant / 3 % 4) as usize],
        }),
        max_immutable_memtables: 2,
        ..Options::default()
    }
}

/// Runs one seed; returns the scans' filter skips (range, prefix) of the store's last
/// opening.
fn run(seed: u64, steps: usize) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let opts = || options(seed);
    let mut db = Db::open(dir.path(), opts()).unwrap();
    let mut model = Model::new();
    let mut snaps: Vec<(bloomkv_kv::Snapshot, Model)> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    for step in 0..steps {
        let what = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=39 => {
                let v = format!("v{step}").into_bytes();
                common::put(&db, &mut model, key(&mut rng), v);
            }
            40..=49 => common::delete(&db, &mut model, key(&mut rng)),
            50..=52 if snaps.len() < 4 => snaps.push((db.snapshot(), model.clone())),
            53 if !snaps.is_empty() => {
                let i = rng.gen_range(0..snaps.len());
                snaps.swap_remove(i);
            }
            54..=64 if open.len() < 6 => {
                // Open a scan (db or a snapshot; range or prefix) and keep it.
                let (reader_model, snap) = if !snaps.is_empty() && rng.gen_bool(0.4) {
                    let i = rng.gen_range(0..snaps.len());
                    (snaps[i].1.clone(), Some(snaps[i].0.clone()))
                } else {
                    (model.clone(), None)
                };
                let (scan, want, desc) = if rng.gen_bool(0.5) {
                    let (lo, hi) = (
                        common::random_bound(&mut rng, key),
                        common::random_bound(&mut rng, key),
                    );
                    let want: Vec<_> = reader_model
                        .iter()
                        .filter(|(k, _)| common::in_range(k, &lo, &hi))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let desc = format!("scan({lo:?}, {hi:?})");
                    let scan = match &snap {
                        Some(s) => s.scan::<Vec<u8>, _>((lo, hi)),
                        None => db.scan::<Vec<u8>, _>((lo, hi)),
                    };
                    (scan, want, desc)
                } else {
                    let src = key(&mut rng);
                    let p = src[..rng.gen_range(0..=src.len())].to_vec();
                    let want: Vec<_> = reader_model
                        .iter()
                        .filter(|(k, _)| k.starts_with(&p))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let desc = format!("scan_prefix({p:?})");
                    let scan = match &snap {
                        Some(s) => s.scan_prefix(&p),
                        None => db.scan_prefix(&p),
                    };
                    (scan, want, desc)
                };
                let n = want.len();
                open.push(Open {
                    what: format!("{what} opened {desc} snap={}", snap.is_some()),
                    scan,
                    want,
                    i: 0,
                    j: n,
                    ended: false,
                });
            }
            65..=84 if !open.is_empty() => {
                let i = rng.gen_range(0..open.len());
                for _ in 0..rng.gen_range(1..4) {
                    open[i].step(&mut rng);
                }
                if open[i].ended {
                    open.swap_remove(i);
                }
            }
            85..=89 => db.flush().unwrap(),
            90..=91 => db.compact().unwrap(),
            92 => {
                common::random_batch(&db, &mut model, &mut rng, key, |r| {
                    format!("b{}", r.gen::<u32>()).into_bytes()
                });
            }
            93 if open.is_empty() => {
                snaps.clear();
                db.close().unwrap();
                db = Db::open(dir.path(), opts()).unwrap();
            }
            _ => {}
        }
    }
    for mut o in open {
        while !o.ended {
            o.step(&mut rng);
        }
    }
    let stats = db.stats();
    (stats.range_filter_negatives, stats.prefix_negatives)
}

#[test]
fn open_scans_across_mutations() {
    let seeds: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let (mut range_skips, mut prefix_skips) = (0, 0);
    for seed in 0..seeds {
        let (range, prefix) = run(seed, 3000);
        range_skips += range;
        prefix_skips += prefix;
    }
    // The filters' skip paths ran, or the test says little about them.
    assert!(
        range_skips > 0 && prefix_skips > 0,
        "{range_skips} {prefix_skips}"
    );
}
