//! The `bloomkv` command line: the disk-I/O savings benchmark, the sizing calculator,
//! and tools to look inside (`inspect`, `verify`), mend (`repair`) and use (`get`, `put`, `delete`,
//! `scan`) a store directory.

use std::path::PathBuf;
use std::process::ExitCode;

use bloomkv::bench::{self, BenchArgs};
use bloomkv::kv::{self, Db, Options};
use bloomkv::sizing;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bloomkv",
    version,
    about = "Bloom filter blocks for an LSM store, and the disk reads they save"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure the disk reads bits_per_key filters save (the main job).
    Bench(BenchArgs),
    /// Size a Bloom filter: bits, memory, probes for N items at a target FP rate.
    Sizing {
        /// Items the filter will hold.
        #[arg(long)]
        items: u64,
        /// Target false-positive rate, e.g. 0.01.
        #[arg(long)]
        fp_rate: f64,
    },
    /// Show a store's levels and tables with their filters (read-only).
    Inspect {
        /// The store directory.
        dir: PathBuf,
    },
    /// Check a store's manifest, every block of its live tables (trailer CRCs, footer)
    /// and its logs under each recovery mode; non-zero exit on any problem.
    Verify {
        /// The store directory.
        dir: PathBuf,
    },
    /// Rebuild a store whose manifest, tables or logs are damaged (a store that
    /// needs no repair is left unchanged; damaged tables go to DIR/lost/).
    Repair {
        /// The store directory.
        dir: PathBuf,
    },
    /// Print a key's value.
    Get { dir: PathBuf, key: String },
    /// Set a key (creates the store if the directory holds none).
    Put {
        dir: PathBuf,
        key: String,
        value: String,
    },
    /// Delete a key.
    Delete { dir: PathBuf, key: String },
    /// Print keys and values in [from, to).
    Scan {
        dir: PathBuf,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// End key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Print at most this many.
        #[arg(long)]
        limit: Option<usize>,
    },
}

type CmdResult = Result<ExitCode, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bloomkv: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> CmdResult {
    match command {
        Command::Bench(args) => {
            bench::run(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sizing { items, fp_rate } => sizing_cmd(items, fp_rate),
        Command::Inspect { dir } => {
            let info = kv::inspect(&dir)?;
            print!("{info}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify { dir } => {
            let report = kv::verify(&dir)?;
            print!("{report}");
            Ok(if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Repair { dir } => {
            print!("{}", kv::repair(&dir, Options::default())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { dir, key } => {
            let db = open(&dir)?;
            match db.get(&key)? {
                Some(v) => {
                    println!("{}", String::from_utf8_lossy(&v));
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("bloomkv: key {key:?} not found");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Command::Put { dir, key, value } => {
            let db = warn_dropped(Db::open(&dir, Options::default())?);
            db.put(&key, &value)?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Delete { dir, key } => {
            let db = open(&dir)?;
            db.delete(&key)?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Scan {
            dir,
            from,
            to,
            limit,
        } => {
            let db = open(&dir)?;
            let lo = from.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Included);
            let hi = to.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            for item in db
                .scan::<String, _>((lo, hi))
                .take(limit.unwrap_or(usize::MAX))
            {
                let (k, v) = item?;
                println!(
                    "{}\t{}",
                    String::from_utf8_lossy(&k),
                    String::from_utf8_lossy(&v)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Opens an existing store; the tools never create one by accident.
fn open(dir: &std::path::Path) -> Result<Db, kv::Error> {
    Db::open(
        dir,
        Options {
            create_if_missing: false,
            ..Options::default()
        },
    )
    .map(warn_dropped)
}

/// Says on stderr what recovery dropped from the logs, if anything.
fn warn_dropped(db: Db) -> Db {
    if !db.recovery_report().is_clean() {
        eprintln!("bloomkv: recovery {}", db.recovery_report());
    }
    db
}

fn sizing_cmd(items: u64, fp_rate: f64) -> CmdResult {
    let bits = sizing::optimal_num_bits(items, fp_rate)?;
    let k = sizing::optimal_num_hashes(bits, items)?;
    let fp = sizing::false_positive_rate(bits, items, k)?;
    println!("items               {items}");
    println!("target FP rate      {fp_rate}");
    println!("bits                {bits}");
    println!(
        "memory              {:.3} MiB ({} bytes)",
        bits as f64 / 8.0 / 1048576.0,
        bits.div_ceil(8)
    );
    println!("bits per key        {:.3}", bits as f64 / items as f64);
    println!("hash functions (k)  {k}");
    println!("expected FP rate    {:.6} ({:.4}%)", fp, fp * 100.0);
    Ok(ExitCode::SUCCESS)
}
