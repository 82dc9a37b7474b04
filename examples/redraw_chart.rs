//! Redraws the savings chart of a result file (`bloomkv bench --json` or
//! `bloomkv-peers --json`) from its rows, without running anything: for when the
//! chart code changes and the committed figures should follow.
//!
//! ```text
//! cargo run --release --example redraw_chart -- docs/results/peers.json [more.json ...]
//! ```
//!
//! Each `FILE.json` gets its `FILE.svg` rewritten.

use bloomkv::bench::{render_savings_svg, Row};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        return Err("usage: redraw_chart FILE.json [FILE.json ...]".into());
    }
    for file in files {
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
        let rows: Vec<Row> = serde_json::from_value(
            report
                .get("rows")
                .cloned()
                .ok_or_else(|| format!("{file}: no \"rows\""))?,
        )?;
        let svg = std::path::Path::new(&file).with_extension("svg");
        std::fs::write(&svg, render_savings_svg(&rows))?;
        println!("{file}: {} rows -> {}", rows.len(), svg.display());
    }
    Ok(())
}
