//! The README's results table says what its committed JSON says: every row's counts,
//! false-positive rate and times are the medians in `docs/results/peers-warm.json`,
//! printed as the table prints them, and the run count and commit quoted under the
//! table are the file's. A re-run that is not copied into the README (or a README
//! edited by hand) fails here.

use std::path::Path;

use serde_json::Value;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `1234.5` as the table prints a time: no decimals, thousands separated by commas.
fn ns(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The JSON's summary for one row and phase.
fn summary<'a>(json: &'a Value, store: &str, phase: &str) -> &'a Value {
    json["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["store"] == store && s["phase"] == phase)
        .unwrap_or_else(|| panic!("no {store} {phase} summary in peers-warm.json"))
}

#[test]
fn the_results_table_is_its_json() {
    let readme = read("README.md");
    let json: Value = serde_json::from_str(&read("docs/results/peers-warm.json")).unwrap();
    let section = readme
        .split("## Results")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Results section");
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| store"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace("**", ""))
                .collect()
        })
        .collect();
    assert!(rows.len() >= 4, "the table has {} rows", rows.len());
    for row in &rows {
        let store = row[0].as_str();
        let (a, p) = (
            summary(&json, store, "absent"),
            summary(&json, store, "present"),
        );
        let median = |s: &Value, field: &str| s[field]["median"].as_f64().unwrap();
        let fp = match a["observed_fp"].as_f64() {
            Some(fp) => format!("{:.3}%", fp * 100.0),
            None => "—".to_string(),
        };
        let want = vec![
            store.to_string(),
            format!("{:.3}", median(a, "reads_per_lookup")),
            format!("{:.3}", median(p, "reads_per_lookup")),
            fp,
            ns(median(a, "ns_per_lookup")),
            ns(median(p, "ns_per_lookup")),
        ];
        assert_eq!(row, &want, "README row for {store}");
    }
    let runs = json["runs"].as_u64().unwrap();
    assert!(
        section.contains(&format!("medians of {runs} interleaved runs")),
        "the README should say the table is medians of {runs} interleaved runs"
    );
    let commit = json["commit"].as_str().unwrap();
    assert!(
        section.contains(&format!("`{}`", &commit[..7])),
        "the README should name the measured commit {}",
        &commit[..7]
    );
}

#[test]
fn times_print_with_thousands_separators() {
    assert_eq!(ns(17_206.6), "17,207");
    assert_eq!(ns(312.0), "312");
    assert_eq!(ns(1_000.0), "1,000");
}
