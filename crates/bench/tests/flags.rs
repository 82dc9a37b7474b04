//! A flag the chosen shape does not use is refused, and its defaults match the checks.

use bloomkv_bench::BenchArgs;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn check(args: &[&str]) -> Result<(), String> {
    let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    cli.bench.validate().map_err(|e| e.to_string())
}

#[test]
fn flags_a_shape_ignores_are_errors() {
    // The defaults, and each shape with its own flags, pass.
    assert_eq!(check(&[]), Ok(()));
    assert_eq!(
        check(&["--shape", "leveled", "--allocation", "monkey"]),
        Ok(())
    );
    assert_eq!(check(&["--filters", "ribbon", "--tables", "4"]), Ok(()));
    assert_eq!(
        check(&[
            "--shape",
            "scale",
            "--keys",
            "100000000",
            "--metadata-budget-bytes",
            "1048576"
        ]),
        Ok(())
    );
    assert_eq!(
        check(&["--range-scans", "10", "--range-max-len", "16"]),
        Ok(())
    );
    for (args, flag) in [
        (
            &["--shape", "leveled", "--filters", "ribbon"][..],
            "--filters",
        ),
        (&["--shape", "leveled", "--tables", "4"], "--tables"),
        (
            &["--shape", "leveled", "--compression", "lz4"],
            "--compression",
        ),
        (
            &["--shape", "leveled", "--block-align", "false"],
            "--block-align",
        ),
        (
            &["--shape", "leveled", "--prefix-scans", "0"],
            "--prefix-scans",
        ),
        (
            &["--shape", "leveled", "--range-scans", "5"],
            "--range-scans",
        ),
        (&["--allocation", "monkey"], "--allocation"),
        (&["--range-max-len", "16"], "--range-max-len"),
        (&["--shape", "scale", "--tables", "4"], "--tables"),
        (&["--shape", "scale", "--filters", "ribbon"], "--filters"),
        (
            &["--shape", "scale", "--allocation", "monkey"],
            "--allocation",
        ),
        (&["--shape", "scale", "--cold"], "--cold"),
        (&["--shape", "scale", "--multi-get", "8"], "--multi-get"),
        (&["--shape", "sideways"], "--shape"),
    ] {
        let err = check(args).expect_err(&format!("{args:?} passed"));
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}
