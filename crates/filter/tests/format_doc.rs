//! docs/FORMAT.md's filter examples checked against the encoder: each fenced block
//! after a line `<!-- filter-hex: NAME -->` is regenerated from the code and must be
//! byte for byte what the document shows. A line holds bytes when it starts with
//! two-digit hex tokens separated by single spaces; anything after two spaces is
//! commentary.

use std::path::Path;

use bloomkv_filter::{FilterPolicy, RibbonPolicy};

fn format_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `<!-- filter-hex: NAME -->` example in `doc`, with its bytes.
fn examples(doc: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- filter-hex: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        assert!(
            lines.next().is_some_and(|l| l.starts_with("```")),
            "{name}: a fence follows the marker"
        );
        let mut bytes = Vec::new();
        for l in lines.by_ref().take_while(|l| !l.starts_with("```")) {
            let data = l.split("  ").next().unwrap_or_default();
            for token in data.split(' ') {
                match u8::from_str_radix(token, 16) {
                    Ok(b) if token.len() == 2 => bytes.push(b),
                    _ => break,
                }
            }
        }
        out.push((name.to_string(), bytes));
    }
    out
}

fn generate(name: &str) -> Option<Vec<u8>> {
    match name {
        "bumped-ribbon-tail" => {
            let policy = RibbonPolicy::new(10.0).ok()?;
            let mut b = policy.new_builder();
            for i in 0..5000u32 {
                b.add_key(format!("kav:{i}").as_bytes());
            }
            let block = b.finish();
            assert_eq!(block.len(), 6248, "the document gives the block's length");
            Some(block[block.len() - 80..].to_vec())
        }
        _ => None,
    }
}

#[test]
fn the_bumped_ribbon_example_is_what_the_encoder_writes() {
    let found = examples(&format_md());
    assert!(
        found.iter().any(|(n, _)| n == "bumped-ribbon-tail"),
        "FORMAT.md lost the bumped-ribbon-tail example"
    );
    for (name, shown) in &found {
        let written = generate(name).unwrap_or_else(|| panic!("no encoder for example {name}"));
        assert_eq!(
            shown, &written,
            "FORMAT.md example {name} disagrees with the encoder"
        );
    }
}

#[test]
fn a_changed_byte_is_a_different_example() {
    let doc = "<!-- filter-hex: x -->\n```text\n00 05 03  comment 01\nmore words\nff\n```\n";
    assert_eq!(examples(doc), vec![("x".to_string(), vec![0, 5, 3, 0xff])]);
}
