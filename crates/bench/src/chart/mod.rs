//! Hand-written SVG charts of the benchmark's results (no plotting dependency):
//! `layout.rs` is the layout engine (panels, axes, ticks, labels that never collide,
//! legends), `figures.rs` the particular figures the benchmarks draw with it.
//!
//! Why not a plotting crate: `plotters` needs a font backend to measure text (its
//! `ttf` feature links the system's fontconfig and FreeType, its `ab_glyph` feature
//! wants a font file embedded in the binary), and it would not keep labels apart
//! either: that is layout work the chart has to do anyway. The charts here are a few
//! hundred lines of plain SVG with no dependency.

mod figures;
mod layout;

pub use figures::{render_leveled_svg, render_range_svg, render_savings_svg, render_sweep_svg};
