//! `--absent-skew`, `--absent-warmup` and `--learned-bits-per-key`: the streams they draw
//! and what the rows record, on a small store (counts only).

use bloomkv_bench::{
    absent_warmup_keys, key, lookup_keys, run_store, zipf, BloomkvStore, FilterSetting, NoProgress,
    Phase, Workload,
};

fn workload() -> Workload {
    Workload {
        keys: 20_000,
        tables: 5,
        lookups: 4_000,
        bits_per_key: 4.0, // many false positives, so learning has something to do
        ..Workload::default()
    }
}

fn id_of(k: &[u8]) -> u64 {
    std::str::from_utf8(&k[3..]).unwrap().parse().unwrap()
}

#[test]
fn a_skewed_stream_is_absent_keys_continued_after_its_warm_up() {
    let w = Workload {
        absent_skew: Some(0.99),
        absent_warmup: 1_000,
        ..workload()
    };
    let warm = absent_warmup_keys(&w);
    let measured = lookup_keys(&w, Phase::Absent);
    assert_eq!((warm.len(), measured.len()), (1_000, 4_000));
    let whole = lookup_keys(
        &Workload {
            absent_warmup: 0,
            lookups: 5_000,
            ..w.clone()
        },
        Phase::Absent,
    );
    assert_eq!([warm, measured.clone()].concat(), whole);
    assert!(whole
        .iter()
        .all(|k| id_of(k) % 2 == 1 && id_of(k) < 2 * w.keys));
    // Rank 0 maps to fnv64(0) mod keys; its share is 1/ζ(n, θ). Over 5,000 draws the
    // count is binomial: within 5σ of its mean.
    let hot = key(2 * (zipf::fnv64(0) % w.keys) + 1);
    let p = 1.0 / zipf::zeta(w.keys, 0.99);
    let n = whole.len() as f64;
    let count = whole.iter().filter(|k| **k == hot).count() as f64;
    let sigma = (n * p * (1.0 - p)).sqrt();
    assert!(
        (count - n * p).abs() <= 5.0 * sigma,
        "rank 0 drawn {count} times, expected {:.0} ± {sigma:.0}",
        n * p
    );
    // Uniform without warm-up is the stream it always was.
    assert_eq!(
        lookup_keys(&workload(), Phase::Absent),
        lookup_keys(
            &Workload {
                absent_skew: None,
                ..workload()
            },
            Phase::Absent
        )
    );
}

/// The absent row of `w` on a fresh Ribbon store without a block cache.
fn absent_row(w: &Workload) -> bloomkv_bench::Row {
    let dir = tempfile::tempdir().unwrap();
    let mut store = BloomkvStore::create_with_cache(
        dir.path().join("s"),
        FilterSetting::Ribbon,
        w.bits_per_key,
        0,
    )
    .unwrap();
    store.set_learned_memory(w.learned_memory());
    let rows = run_store(&mut store, w, &NoProgress).unwrap();
    rows.into_iter().find(|r| r.phase == Phase::Absent).unwrap()
}

#[test]
fn learned_negatives_only_remove_reads_and_rows_record_them() {
    for skew in [None, Some(0.99)] {
        let w = Workload {
            absent_skew: skew,
            absent_warmup: 8_000,
            ..workload()
        };
        let plain = absent_row(&w);
        let learned = absent_row(&Workload {
            learned_bits_per_key: 2.0,
            ..w.clone()
        });
        assert_eq!(plain.absent_skew, w.absent_skew_name());
        assert_eq!(plain.absent_warmup, 8_000);
        assert_eq!(plain.learned_bytes, None);
        let bytes = learned.learned_bytes.unwrap();
        assert!(bytes > 0 && bytes <= w.keys * 2 / 8, "{bytes} bytes");
        let skips = learned.learned_skips.unwrap();
        // Same keys, same filters: every read the learned store did not make, it
        // skipped, and no other.
        assert_eq!(
            learned.data_block_reads + skips,
            plain.data_block_reads,
            "{skew:?}"
        );
        if skew.is_some() {
            // Hot keys repeat: most of the wasted reads are gone.
            assert!(
                learned.data_block_reads * 2 < plain.data_block_reads,
                "{} vs {}",
                learned.data_block_reads,
                plain.data_block_reads
            );
        }
    }
}
