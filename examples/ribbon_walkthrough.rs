//! A Ribbon filter you can read: ten fruits in 16 slots, rows 8 slots wide, 4 result
//! bits per slot. Prints each key's equation under its slots, the band after each
//! elimination step, the back-substitution slot by slot, the interleaved words, and
//! how many absent keys get through (about 1 in 2^4).
//!
//! Change `KEYS`, `SLOTS`, `WIDTH` or `RESULT_BITS` and rerun: with more keys or
//! narrower rows, seeds start to fail (the printed "seed" line says how many). The
//! last table builds real filter blocks at fixed slots per key (`SLOT_FACTORS`):
//! too few slots and construction fails, so the policy writes a Bloom block instead.
//! The filter block's Ribbon does the same with 64-slot rows and thousands of slots
//! (`docs/GUIDE.md`, "Ribbon").
//!
//! Run: `cargo run --example ribbon_walkthrough`

use std::fmt::Write;

use bloomkv::{
    FilterError, FilterPolicy, RibbonPolicy, TeachingEquation, TeachingRibbon, RIBBON_MAX_ATTEMPTS,
};

const KEYS: [&str; 10] = [
    "apple", "banana", "cherry", "date", "elder", "fig", "grape", "kiwi", "lemon", "mango",
];
const SLOTS: usize = 16;
const WIDTH: u32 = 8;
const RESULT_BITS: u32 = 4;
const ABSENT_QUERIES: u32 = 10_000;
/// Section 7: the real policy at fixed slots per key.
const REAL_KEYS: u32 = 10_000;
const REAL_SETS: u32 = 10;
const SLOT_FACTORS: [f64; 5] = [1.00, 1.02, 1.05, 1.10, 1.15];

/// An equation's coefficients drawn under the slot ruler: two characters per slot.
fn draw_row(start: usize, coeff: u64) -> String {
    let mut s = String::new();
    for slot in 0..SLOTS {
        let cell = match slot.checked_sub(start) {
            Some(j) if j < WIDTH as usize => {
                if (coeff >> j) & 1 == 1 {
                    " 1"
                } else {
                    " 0"
                }
            }
            _ => "  ",
        };
        s.push_str(cell);
    }
    s
}

fn bits(v: u8) -> String {
    format!("{v:0width$b}", width = RESULT_BITS as usize)
}

fn ruler() -> String {
    (0..SLOTS).map(|s| format!("{s:>2x}")).collect()
}

/// The whole walkthrough as text; `main` prints it, the tests read it.
fn walkthrough() -> Result<String, FilterError> {
    let keys: Vec<&[u8]> = KEYS.iter().map(|k| k.as_bytes()).collect();
    let ribbon = TeachingRibbon::build(&keys, SLOTS, WIDTH, RESULT_BITS, 0, 64)?;
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "{} keys, {SLOTS} slots, rows {WIDTH} wide, r = {RESULT_BITS} result bits: {} bits, {:.1} per key",
        KEYS.len(),
        SLOTS as u32 * RESULT_BITS,
        f64::from(SLOTS as u32 * RESULT_BITS) / KEYS.len() as f64
    );
    let _ = writeln!(
        w,
        "seed {} (seeds that contradicted: {:?})",
        ribbon.seed(),
        ribbon.failed_seeds()
    );

    let _ = writeln!(
        w,
        "\n1. One key, one equation: XOR of S[slot] over its 1s = f"
    );
    let _ = writeln!(w, "  {:<8}{}   f", "slot", ruler());
    let equations: Vec<(&str, TeachingEquation)> = KEYS
        .iter()
        .map(|k| (*k, ribbon.equation(k.as_bytes())))
        .collect();
    for (key, eq) in &equations {
        let _ = writeln!(
            w,
            "  {key:<8}{}   {}",
            draw_row(eq.start, eq.coeff),
            bits(eq.fingerprint)
        );
    }

    // 2. Banding by hand: the same elimination `TeachingRibbon::build` runs.
    let _ = writeln!(
        w,
        "\n2. Banding: each key goes to its start slot; a taken slot is XORed in"
    );
    let mut band: Vec<Option<(u64, u8)>> = vec![None; SLOTS];
    for (key, eq) in &equations {
        let (mut p, mut c, mut f) = (eq.start, eq.coeff, eq.fingerprint);
        let mut steps = Vec::new();
        loop {
            match band[p] {
                None => {
                    band[p] = Some((c, f));
                    steps.push(format!("stored at slot {p:x}"));
                    break;
                }
                Some((rc, rf)) => {
                    c ^= rc;
                    f ^= rf;
                    if c == 0 {
                        steps.push(format!("slot {p:x} taken: XOR leaves 0 = {}", bits(f)));
                        break;
                    }
                    let tz = c.trailing_zeros() as usize;
                    c >>= tz;
                    steps.push(format!(
                        "slot {p:x} taken: XOR, pivot moves to {:x}",
                        p + tz
                    ));
                    p += tz;
                }
            }
        }
        let _ = writeln!(w, "  {key:<8}s={:x}: {}", eq.start, steps.join("; "));
    }
    let _ = writeln!(w, "\n  the band in echelon form (row p starts at slot p):");
    let _ = writeln!(w, "  {:<8}{}   result", "slot", ruler());
    for (p, row) in band.iter().enumerate() {
        match row {
            Some((c, f)) => {
                let _ = writeln!(w, "  row {p:<4x}{}   {}", draw_row(p, *c), bits(*f));
            }
            None => {
                let _ = writeln!(w, "  row {p:<4x}{}   (free)", " ".repeat(2 * SLOTS));
            }
        }
    }
    assert_eq!(band, ribbon.band(), "the hand elimination is the library's");

    let _ = writeln!(
        w,
        "\n3. Back-substitution, last slot first (a free slot is 0):"
    );
    let solution = ribbon.solution();
    for p in (0..SLOTS).rev() {
        match band[p] {
            None => {
                let _ = writeln!(w, "  S[{p:x}] = {}  (free)", bits(solution[p]));
            }
            Some((c, f)) => {
                let terms: Vec<String> = (1..WIDTH as usize)
                    .filter(|j| (c >> j) & 1 == 1)
                    .map(|j| format!("S[{:x}]", p + j))
                    .collect();
                let rhs = if terms.is_empty() {
                    bits(f)
                } else {
                    format!("{} ^ {}", bits(f), terms.join(" ^ "))
                };
                let _ = writeln!(w, "  S[{p:x}] = {rhs} = {}", bits(solution[p]));
            }
        }
    }
    let _ = writeln!(
        w,
        "  solution: {}",
        solution
            .iter()
            .map(|&s| bits(s))
            .collect::<Vec<_>>()
            .join(" ")
    );

    let _ = writeln!(
        w,
        "\n4. Stored interleaved: per block of {WIDTH} slots, {RESULT_BITS} column words side by side\n   (bit i of a word = slot i of the block, drawn slot 0 first)"
    );
    let words = ribbon.interleaved();
    for (i, word) in words.iter().enumerate() {
        let (block, col) = (i / RESULT_BITS as usize, i % RESULT_BITS as usize);
        let slots: String = (0..WIDTH)
            .map(|i| if (word >> i) & 1 == 1 { '1' } else { '0' })
            .collect();
        let _ = writeln!(w, "  word {i}: block {block} column {col}: {slots}");
    }

    let _ = writeln!(w, "\n5. Queries");
    let mut all_hold = true;
    for key in KEYS {
        let holds =
            ribbon.contains(key.as_bytes()) && ribbon.contains_interleaved(&words, key.as_bytes());
        all_hold &= holds;
    }
    let _ = writeln!(
        w,
        "  every key's equation holds: {}",
        if all_hold { "yes" } else { "NO" }
    );
    let passed = (0..ABSENT_QUERIES)
        .filter(|i| ribbon.contains(format!("absent-{i}").as_bytes()))
        .count();
    let _ = writeln!(
        w,
        "  absent keys passed: {passed} of {ABSENT_QUERIES} ({:.2}%; 2^-{RESULT_BITS} = {:.2}%)",
        100.0 * passed as f64 / f64::from(ABSENT_QUERIES),
        100.0 / f64::from(1u32 << RESULT_BITS)
    );

    let _ = writeln!(
        w,
        "\n6. Slack: of 100 seeds, how many band 240 keys into 256 slots, by row width"
    );
    for width in [8, 16, 32, 64] {
        let ok = TeachingRibbon::banding_successes(240, 256, width, 100)?;
        let _ = writeln!(w, "  width {width:>2}: {ok:>3} of 100");
    }

    let _ = writeln!(
        w,
        "\n7. The filter block's standard Ribbon (format version 3, 64-slot rows; version 4's bumped\n   layers need no slack), {REAL_KEYS} keys, {REAL_SETS} key sets: blocks that\n   came out Ribbon (the rest fell back to Bloom after {RIBBON_MAX_ATTEMPTS} seeds), by slots per key"
    );
    for factor in SLOT_FACTORS {
        let policy = RibbonPolicy::new(10.0)?
            .with_format_version(3)?
            .with_slots_per_key(factor)?;
        let mut ribbons = 0;
        for set in 0..REAL_SETS {
            let mut builder = policy.new_builder();
            for i in 0..REAL_KEYS {
                builder.add_key(format!("set{set}-key{i}").as_bytes());
            }
            let block = builder.finish();
            if policy.open_reader(&block)?.info().layout == "ribbon" {
                ribbons += 1;
            }
        }
        let _ = writeln!(
            w,
            "  {factor:.2} slots per key: {ribbons:>2} of {REAL_SETS}"
        );
    }
    Ok(out)
}

fn main() -> Result<(), FilterError> {
    print!("{}", walkthrough()?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_bits(s: &str) -> u8 {
        u8::from_str_radix(s, 2).expect("printed bits")
    }

    /// Reads the printed equations and the printed solution back and checks every key's
    /// equation against the solution, by the printed numbers alone.
    #[test]
    fn printed_solution_answers_every_printed_equation() {
        let out = walkthrough().expect("a seed bands");
        let solution: Vec<u8> = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("solution: "))
            .expect("a solution line")
            .split(' ')
            .map(parse_bits)
            .collect();
        assert_eq!(solution.len(), SLOTS);
        let mut checked = 0;
        let header = 2 + 8; // indent and key column
        for line in out.lines() {
            let Some(key) = KEYS.iter().find(|k| {
                line.starts_with(&format!("  {k:<8}")) && line.len() > header + 2 * SLOTS
            }) else {
                continue;
            };
            if !line[header..].starts_with(' ') || line.contains("s=") {
                continue; // the banding trace, not the equation table
            }
            let cells = &line[header..header + 2 * SLOTS];
            let f = parse_bits(line[header + 2 * SLOTS..].trim());
            let mut acc = 0u8;
            for slot in 0..SLOTS {
                if &cells[2 * slot..2 * slot + 2] == " 1" {
                    acc ^= solution[slot];
                }
            }
            assert_eq!(
                acc, f,
                "{key}'s printed equation fails on the printed solution"
            );
            checked += 1;
        }
        assert_eq!(
            checked,
            KEYS.len(),
            "every key's equation was printed and checked"
        );
        assert!(out.contains("every key's equation holds: yes"));
    }

    /// The absent keys that pass are about 2^-r of them: within 5 σ of a binomial.
    #[test]
    fn printed_false_positives_are_near_two_to_the_minus_r() {
        let out = walkthrough().expect("a seed bands");
        let line = out
            .lines()
            .find(|l| l.contains("absent keys passed:"))
            .expect("the absent line");
        let passed: f64 = line
            .split_whitespace()
            .nth(3)
            .and_then(|n| n.parse().ok())
            .expect("a count");
        let (n, p) = (
            f64::from(ABSENT_QUERIES),
            1.0 / f64::from(1u32 << RESULT_BITS),
        );
        let sigma = (n * p * (1.0 - p)).sqrt();
        assert!((passed - n * p).abs() <= 5.0 * sigma, "{passed} of {n}");
    }

    /// Wider rows band more often at the same slack (the last table of the output).
    #[test]
    fn printed_slack_table_grows_with_width() {
        let out = walkthrough().expect("a seed bands");
        let counts: Vec<u32> = out
            .lines()
            .filter(|l| l.trim_start().starts_with("width"))
            .map(|l| {
                l.split(':')
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                    .expect("a count")
            })
            .collect();
        assert_eq!(counts.len(), 4);
        assert!(counts[0] < counts[3], "{counts:?}");
    }

    /// More slots per key never make fewer blocks band, and 1.15 bands all of them
    /// where 1.00 (no slack) bands none.
    #[test]
    fn printed_fallbacks_fall_with_slack() {
        let out = walkthrough().expect("a seed bands");
        let counts: Vec<u32> = out
            .lines()
            .filter(|l| l.contains("slots per key:"))
            .map(|l| {
                l.split(':')
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                    .expect("a count")
            })
            .collect();
        assert_eq!(counts.len(), SLOT_FACTORS.len());
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        assert_eq!(
            (counts[0], counts[SLOT_FACTORS.len() - 1]),
            (0, REAL_SETS),
            "{counts:?}"
        );
    }
}
