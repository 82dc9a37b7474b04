//! docs/OPTIONS.md lists every public field of `Options`, and no field that is gone:
//! a new option without its row (or a row left behind by a removed one) fails here.

use std::collections::BTreeSet;
use std::path::Path;

/// The public fields of `struct Options`, read from its source.
fn option_fields() -> BTreeSet<String> {
    let src = include_str!("../src/options.rs");
    let body = src
        .split("pub struct Options {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("struct Options in options.rs");
    body.lines()
        .filter_map(|l| l.strip_prefix("    pub "))
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect()
}

/// The options the table in docs/OPTIONS.md has a row for.
fn documented() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/OPTIONS.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_option_has_a_row_and_every_row_an_option() {
    let fields = option_fields();
    assert!(fields.len() >= 20, "parsed too few fields: {fields:?}");
    let rows = documented();
    let missing: Vec<_> = fields.difference(&rows).collect();
    let stale: Vec<_> = rows.difference(&fields).collect();
    assert!(
        missing.is_empty(),
        "options without a row in docs/OPTIONS.md: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "rows in docs/OPTIONS.md for no option: {stale:?}"
    );
}
