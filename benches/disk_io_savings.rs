//! `cargo bench --bench disk_io_savings [-- FLAGS]`: the same benchmark as
//! `cargo run --release -- bench [FLAGS]`, run by cargo's bench harness.

use bloomkv_bench::{self as bench, BenchArgs};
use clap::Parser;

#[derive(Parser)]
#[command(name = "disk_io_savings")]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = bench::run(&cli.args) {
        eprintln!("disk_io_savings: {e}");
        std::process::exit(1);
    }
}
