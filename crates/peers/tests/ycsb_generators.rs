//! The suite's request distributions and operation mixes against their definitions.

use bloomkv_peers::ycsb::generator::{
    fnv64, zeta, Chooser, Distribution, SplitMix64, Zipfian, ZIPF_THETA,
};
use bloomkv_peers::ycsb::workload::{Op, Workload, OP_KINDS};

/// Draws `draws` ranks from a Zipfian over `n` and checks the first ten ranks, and
/// all the others together, against `p_r = (r+1)^−θ / ζ(n, θ)`: each count within
/// 3σ of `draws · p` (σ = √(draws · p · (1 − p)), the binomial's). With eleven
/// checks a correct sampler fails one at a given seed with probability ≈ 3%; the
/// seed is fixed, so the test is repeatable.
fn zipf_matches_formula(n: u64, draws: u64, seed: u64) {
    let z = Zipfian::new(n, ZIPF_THETA);
    let mut rng = SplitMix64::new(seed);
    let mut counts = [0u64; 11];
    for _ in 0..draws {
        let r = z.sample(&mut rng);
        assert!(r < n);
        counts[(r as usize).min(10)] += 1;
    }
    let zn = zeta(n, ZIPF_THETA);
    let mut head = 0.0;
    for (r, &count) in counts.iter().enumerate().take(10) {
        let p = ((r + 1) as f64).powf(-ZIPF_THETA) / zn;
        head += p;
        check(count, draws, p, &format!("rank {r} of {n}"));
    }
    check(counts[10], draws, 1.0 - head, &format!("ranks 10.. of {n}"));
}

fn check(count: u64, draws: u64, p: f64, what: &str) {
    let expected = draws as f64 * p;
    let sigma = (draws as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (count as f64 - expected).abs() <= 3.0 * sigma,
        "{what}: {count} draws, expected {expected:.0} ± {:.0} (3σ)",
        3.0 * sigma
    );
}

#[test]
fn zipfian_rank_frequencies_match_the_formula_over_a_million_draws() {
    zipf_matches_formula(1000, 1_000_000, 1);
    zipf_matches_formula(100_000, 1_000_000, 2);
}

#[test]
fn zipfian_resized_matches_the_formula_of_its_new_size() {
    let mut z = Zipfian::new(10, ZIPF_THETA);
    z.resize(500);
    let mut rng = SplitMix64::new(3);
    let draws = 200_000;
    let mut first = 0;
    for _ in 0..draws {
        let r = z.sample(&mut rng);
        assert!(r < 500);
        first += (r == 0) as u64;
    }
    check(first, draws, 1.0 / zeta(500, ZIPF_THETA), "rank 0 of 500");
}

#[test]
fn latest_favours_the_newest_records_and_follows_inserts() {
    let mut rng = SplitMix64::new(4);
    let mut latest = Chooser::new(Distribution::Latest, 10_000);
    let draws = 200_000;
    let mut newest = 0;
    let mut newest_percent = 0;
    for _ in 0..draws {
        let id = latest.next(10_000, &mut rng);
        assert!(id < 10_000);
        newest += (id == 9_999) as u64;
        newest_percent += (id >= 9_900) as u64;
    }
    // The newest record is rank 0; the newest 1% are ranks 0..100.
    let zn = zeta(10_000, ZIPF_THETA);
    check(newest, draws, 1.0 / zn, "newest record");
    check(
        newest_percent,
        draws,
        zeta(100, ZIPF_THETA) / zn,
        "newest 1%",
    );
    // After 500 inserts the newest is the last insert, not the old newest.
    let mut after = 0;
    for _ in 0..draws {
        let id = latest.next(10_500, &mut rng);
        assert!(id < 10_500);
        after += (id == 10_499) as u64;
    }
    check(
        after,
        draws,
        1.0 / zeta(10_500, ZIPF_THETA),
        "newest after inserts",
    );
}

#[test]
fn scrambled_zipfian_spreads_the_hot_records_over_the_key_range() {
    let n = 100_000u64;
    // The 100 hottest ranks land in every tenth of the id range (where plain
    // Zipfian puts them all in the first thousandth).
    let mut tenths = [0u32; 10];
    for rank in 0..100 {
        tenths[(fnv64(rank) % n * 10 / n) as usize] += 1;
    }
    assert!(tenths.iter().all(|&c| c > 0), "{tenths:?}");
    // And the chooser's draws follow: the hottest record gets rank 0's share.
    let mut rng = SplitMix64::new(5);
    let mut chooser = Chooser::new(Distribution::Zipfian, n);
    let hottest = fnv64(0) % n;
    let draws = 200_000;
    let mut hits = 0;
    let mut low_half = 0;
    for _ in 0..draws {
        let id = chooser.next(n, &mut rng);
        assert!(id < n);
        hits += (id == hottest) as u64;
        low_half += (id < n / 2) as u64;
    }
    // fnv64 mod n may send a second hot rank to the same record: at least rank 0's share.
    let p0 = 1.0 / zeta(n, ZIPF_THETA);
    assert!(hits as f64 >= draws as f64 * p0 - 3.0 * (draws as f64 * p0 * (1.0 - p0)).sqrt());
    // Neither half of the key range holds nearly all the draws.
    assert!(
        (0.2..0.8).contains(&(low_half as f64 / draws as f64)),
        "{low_half}"
    );
}

#[test]
fn uniform_covers_the_range_evenly() {
    let mut rng = SplitMix64::new(6);
    let mut c = Chooser::new(Distribution::Uniform, 10);
    let draws = 100_000;
    let mut counts = [0u64; 10];
    for _ in 0..draws {
        counts[c.next(10, &mut rng) as usize] += 1;
    }
    for (i, &n) in counts.iter().enumerate() {
        check(n, draws, 0.1, &format!("id {i}"));
    }
}

#[test]
fn every_workloads_operation_mix_is_within_one_percent_of_its_definition() {
    let draws = 1_000_000u64;
    for w in Workload::all() {
        let mut rng = SplitMix64::new(w.name as u64);
        let mut counts = [0u64; 6];
        for _ in 0..draws {
            counts[w.next_op(&mut rng).index()] += 1;
        }
        for k in OP_KINDS {
            let share = counts[k.index()] as f64 / draws as f64;
            let want = w.mix[k.index()];
            assert!(
                (share - want).abs() <= 0.01,
                "workload {}: {} is {share:.4}, defined {want}",
                w.name,
                k.name()
            );
            if want == 0.0 {
                assert_eq!(counts[k.index()], 0, "workload {}: {}", w.name, k.name());
            }
        }
    }
}

#[test]
fn the_workloads_are_ycsbs() {
    let mix = |c: char| Workload::named(c).unwrap().mix;
    let share = |c: char, op: Op| mix(c)[op.index()];
    assert_eq!((share('a', Op::Read), share('a', Op::Update)), (0.5, 0.5));
    assert_eq!((share('b', Op::Read), share('b', Op::Update)), (0.95, 0.05));
    assert_eq!(share('c', Op::Read), 1.0);
    assert_eq!((share('d', Op::Read), share('d', Op::Insert)), (0.95, 0.05));
    assert_eq!(
        Workload::named('d').unwrap().distribution,
        Distribution::Latest
    );
    assert_eq!((share('e', Op::Scan), share('e', Op::Insert)), (0.95, 0.05));
    assert_eq!(
        (share('f', Op::Read), share('f', Op::ReadModifyWrite)),
        (0.5, 0.5)
    );
    // X: 95% gets, of which 90% absent; 5% inserts.
    let gets = share('x', Op::Read) + share('x', Op::ReadAbsent);
    assert!((gets - 0.95).abs() < 1e-12);
    assert!((share('x', Op::ReadAbsent) / gets - 0.9).abs() < 1e-12);
    assert_eq!(share('x', Op::Insert), 0.05);
    for w in Workload::all() {
        assert!(
            (w.mix.iter().sum::<f64>() - 1.0).abs() < 1e-12,
            "{}",
            w.name
        );
    }
    assert!(Workload::parse_list("a,q").is_err());
    assert_eq!(Workload::parse_list("all").unwrap().len(), 7);
}
