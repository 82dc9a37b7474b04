//! The `bloomkv` command line: the disk-I/O savings benchmark, the sizing calculator,
//! and tools to look inside (`inspect`, `verify`), mend (`repair`), copy (`checkpoint`) and
//! use (`get`, `put`, `delete`, `scan`) a store directory.
//!
//! Exit codes: 0 success (for `get`: found), 1 `get` found no such key or `verify`
//! found damage, 2 the command line was wrong, 3 any other error. Errors are one line
//! on stderr. Output cut short by its reader (`bloomkv scan DIR | head`) ends quietly.
//!
//! Every command that reads or writes keys, and `inspect` and `verify`, takes
//! `--keyspace NAME` (default: the store's default keyspace); `put` makes a keyspace
//! that does not exist yet, the others refuse an unknown name.
//!
//! Every command that opens a store opens it with the settings it records (its
//! `SETTINGS` file: filter, prefix extractor, range filter, block and level sizing),
//! not the defaults; a missing or damaged file is said on stderr and the defaults
//! are used. A filter policy or extractor the file names that this program does not
//! have is said too: readers go on (such tables are read without that filter), writers
//! (`put`, `delete`, `repair`) refuse.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloomkv::kv::{self, Db, Options};
use bloomkv::sizing;
use bloomkv_bench::{self as bench, BenchArgs};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "bloomkv",
    version,
    about = "Bloom filter blocks for an LSM store, and the disk reads they save",
    after_help = "Exit codes: 0 success (get: found), 1 get: not found / verify: damage found, \
                  2 usage error, 3 any other error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How `scan`, `inspect` and `verify` print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
enum Format {
    /// For people.
    #[default]
    Text,
    /// For scripts: `scan` prints one JSON object per line, `inspect` and `verify`
    /// one JSON document.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure the disk reads bits_per_key filters save (the main job).
    Bench(Box<BenchArgs>),
    /// The scale shape's fresh process: open a store, get, print memory as JSON.
    #[command(name = bench::PROBE_COMMAND, hide = true)]
    ScaleProbe {
        /// The store directory.
        #[arg(long)]
        dir: PathBuf,
        /// The workload, as JSON.
        #[arg(long)]
        workload: String,
        /// `Options::metadata_budget`.
        #[arg(long)]
        metadata_budget: Option<usize>,
    },
    /// Size a Bloom filter: bits, memory, probes for N items at a target FP rate.
    Sizing {
        /// Items the filter will hold.
        #[arg(long)]
        items: u64,
        /// Target false-positive rate, e.g. 0.01.
        #[arg(long)]
        fp_rate: f64,
    },
    /// Show a store's levels and tables with their filters (read-only; safe on a
    /// store another process has open).
    Inspect {
        /// The store directory.
        dir: PathBuf,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Check a store: the manifest, every block of its live tables (trailer CRCs,
    /// footer) and its logs under each recovery mode; exit 1 on any problem
    /// (read-only; safe on a store another process has open).
    Verify {
        /// The store directory.
        dir: PathBuf,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Rebuild a store whose manifest, tables or logs are damaged, with the settings
    /// it records (a store that needs no repair is left unchanged; damaged tables and
    /// tables the manifest does not name go to DIR/lost/).
    Repair {
        /// The store directory.
        dir: PathBuf,
    },
    /// Copy a store into OUT (which must not exist or be empty) as it is at one
    /// sequence number: its memtable is flushed, its tables hard-linked (copied where
    /// the file system cannot link), and the copy's MANIFEST written last, so a copy
    /// that failed half-way never opens. Opens DIR for writing: not while another
    /// process has it open (an application takes its own with `Db::checkpoint`).
    Checkpoint {
        /// The store directory.
        dir: PathBuf,
        /// Where the copy goes.
        out: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Print the values of one or more keys, one line per key in the order given, all
    /// read at one point in time (`multi_get`; a read-only open: works beside a writer
    /// and on a read-only directory). An absent key prints an empty line and a message
    /// on stderr. Exit 1 if any key is absent.
    Get {
        dir: PathBuf,
        #[arg(required = true, num_args = 1..)]
        keys: Vec<String>,
        /// The key is hex, and the value is printed in hex.
        #[arg(long)]
        hex: bool,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
    },
    /// Set a key (creates the store if the directory holds none, and the keyspace if
    /// the store has none of that name).
    Put {
        dir: PathBuf,
        key: String,
        value: String,
        /// The key and the value are hex (for bytes a shell cannot pass).
        #[arg(long)]
        hex: bool,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
    },
    /// Delete a key.
    Delete {
        dir: PathBuf,
        key: String,
        /// The key is hex.
        #[arg(long)]
        hex: bool,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
    },
    /// Delete every key in [START, END) with one range tombstone.
    DeleteRange {
        dir: PathBuf,
        start: String,
        end: String,
        /// START and END are hex.
        #[arg(long)]
        hex: bool,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
    },
    /// Print keys and values in [from, to), one pair per line, tab-separated (read-only
    /// open).
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
        /// Keys (also --from and --to) and values in hex: unambiguous for any bytes.
        #[arg(long)]
        hex: bool,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        /// The keyspace (see `Db::keyspace`); "default" is the store's own.
        #[arg(long, default_value = kv::DEFAULT_KEYSPACE)]
        keyspace: String,
    },
}

/// Why a command did not succeed, and so the exit code.
enum Failure {
    /// The command line was wrong (exit 2).
    Usage(String),
    /// The reader of stdout went away: stop quietly.
    Pipe,
    /// Anything else (exit 3).
    Error(String),
}

impl From<kv::Error> for Failure {
    fn from(e: kv::Error) -> Failure {
        Failure::Error(e.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::Pipe
        } else {
            Failure::Error(e.to_string())
        }
    }
}

impl From<bench::BenchError> for Failure {
    fn from(e: bench::BenchError) -> Failure {
        match e.downcast::<io::Error>() {
            Ok(e) => Failure::from(*e),
            Err(e) => Failure::Error(e.to_string()),
        }
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        if e.io_error_kind() == Some(io::ErrorKind::BrokenPipe) {
            Failure::Pipe
        } else {
            Failure::Error(e.to_string())
        }
    }
}

impl From<bloomkv::FilterError> for Failure {
    fn from(e: bloomkv::FilterError) -> Failure {
        Failure::Error(e.to_string())
    }
}

type CmdResult = Result<ExitCode, Failure>;

const NOT_FOUND: u8 = 1;
const USAGE: u8 = 2;
const ERROR: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(Failure::Pipe) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("bloomkv: {e}");
            ExitCode::from(USAGE)
        }
        Err(Failure::Error(e)) => {
            eprintln!("bloomkv: {e}");
            ExitCode::from(ERROR)
        }
    }
}

fn run(command: Command) -> CmdResult {
    let mut out = io::stdout().lock();
    let code = match command {
        Command::Bench(args) => {
            if let Err(e) = args.validate() {
                return Err(Failure::Usage(e.to_string()));
            }
            bench::run(&args)?;
            ExitCode::SUCCESS
        }
        Command::ScaleProbe {
            dir,
            workload,
            metadata_budget,
        } => {
            let w: bench::Workload = serde_json::from_str(&workload)
                .map_err(|e| Failure::Usage(format!("--workload: {e}")))?;
            let fresh = bench::probe_fresh(&dir, &w, metadata_budget)?;
            let json = serde_json::to_string(&fresh).map_err(|e| Failure::Error(e.to_string()))?;
            writeln!(out, "{json}")?;
            ExitCode::SUCCESS
        }
        Command::Sizing { items, fp_rate } => sizing_cmd(&mut out, items, fp_rate)?,
        Command::Inspect {
            dir,
            format,
            keyspace,
        } => {
            let info = kv::inspect(&kv::keyspace_path(&dir, &keyspace)?)?;
            match format {
                Format::Text => write!(out, "{info}")?,
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&info)?)?,
            }
            ExitCode::SUCCESS
        }
        Command::Verify {
            dir,
            format,
            keyspace,
        } => {
            let report = kv::verify(&kv::keyspace_path(&dir, &keyspace)?)?;
            if !report.settled {
                return Err(Failure::Error(report.to_string().trim_end().to_string()));
            }
            match format {
                Format::Text => write!(out, "{report}")?,
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
            }
            if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(NOT_FOUND)
            }
        }
        Command::Repair { dir } => {
            write!(out, "{}", kv::repair(&dir, Options::default())?)?;
            ExitCode::SUCCESS
        }
        Command::Checkpoint {
            dir,
            out: to,
            format,
        } => {
            let options = Options {
                create_if_missing: false,
                ..Options::default()
            };
            let db = warn_recovery(Db::open(&dir, stored_options(&dir, options)?)?);
            let made = db.checkpoint(&to)?;
            db.close()?;
            match format {
                Format::Text => writeln!(
                    out,
                    "checkpoint {} at sequence {}: {} tables linked, {} copied, {} bytes",
                    made.path.display(),
                    made.sequence,
                    made.linked,
                    made.copied,
                    made.table_bytes
                )?,
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&made)?)?,
            }
            ExitCode::SUCCESS
        }
        Command::Get {
            dir,
            keys,
            hex,
            keyspace,
        } => {
            let keys = keys
                .iter()
                .map(|k| arg_bytes("key", k, hex))
                .collect::<Result<Vec<_>, _>>()?;
            let db = open_read_only(&dir)?;
            let ks = existing_keyspace(&db, &keyspace)?;
            let mut code = ExitCode::SUCCESS;
            for (key, value) in keys.iter().zip(ks.multi_get(&keys)?) {
                match value {
                    Some(v) if hex => writeln!(out, "{}", to_hex(&v))?,
                    Some(v) => {
                        out.write_all(&v)?;
                        out.write_all(b"\n")?;
                    }
                    None => {
                        eprintln!("bloomkv: key {} not found", show_arg(key, hex));
                        if keys.len() > 1 {
                            out.write_all(b"\n")?; // keeps one line per key
                        }
                        code = ExitCode::from(NOT_FOUND);
                    }
                }
            }
            code
        }
        Command::Put {
            dir,
            key,
            value,
            hex,
            keyspace,
        } => {
            let key = arg_bytes("key", &key, hex)?;
            let value = arg_bytes("value", &value, hex)?;
            let db = warn_recovery(Db::open(&dir, stored_options(&dir, Options::default())?)?);
            db.keyspace(&keyspace, Options::default())?
                .put(&key, &value)?;
            db.close()?;
            ExitCode::SUCCESS
        }
        Command::Delete {
            dir,
            key,
            hex,
            keyspace,
        } => {
            let key = arg_bytes("key", &key, hex)?;
            let options = Options {
                create_if_missing: false,
                ..Options::default()
            };
            let db = warn_recovery(Db::open(&dir, stored_options(&dir, options)?)?);
            existing_keyspace(&db, &keyspace)?.delete(&key)?;
            db.close()?;
            ExitCode::SUCCESS
        }
        Command::DeleteRange {
            dir,
            start,
            end,
            hex,
            keyspace,
        } => {
            let start = arg_bytes("start", &start, hex)?;
            let end = arg_bytes("end", &end, hex)?;
            let options = Options {
                create_if_missing: false,
                ..Options::default()
            };
            let db = warn_recovery(Db::open(&dir, stored_options(&dir, options)?)?);
            existing_keyspace(&db, &keyspace)?.delete_range(&start, &end)?;
            db.close()?;
            ExitCode::SUCCESS
        }
        Command::Scan {
            dir,
            from,
            to,
            limit,
            hex,
            format,
            keyspace,
        } => {
            let bound = |name: &str, b: Option<String>| match b {
                Some(k) => arg_bytes(name, &k, hex).map(Some),
                None => Ok(None),
            };
            let lo = bound("--from", from)?
                .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Included);
            let hi =
                bound("--to", to)?.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let db = open_read_only(&dir)?;
            for item in existing_keyspace(&db, &keyspace)?
                .scan::<Vec<u8>, _>((lo, hi))
                .take(limit.unwrap_or(usize::MAX))
            {
                let (k, v) = item?;
                match (format, hex) {
                    (Format::Text, false) => writeln!(
                        out,
                        "{}\t{}",
                        String::from_utf8_lossy(&k),
                        String::from_utf8_lossy(&v)
                    )?,
                    (Format::Text, true) => writeln!(out, "{}\t{}", to_hex(&k), to_hex(&v))?,
                    (Format::Json, _) => {
                        let mut line = serde_json::Map::new();
                        json_field(&mut line, "key", &k, hex);
                        json_field(&mut line, "value", &v, hex);
                        writeln!(out, "{}", serde_json::Value::Object(line))?;
                    }
                }
            }
            ExitCode::SUCCESS
        }
    };
    out.flush()?;
    Ok(code)
}

/// The keyspace called `name`, which must exist (only `put` makes one).
fn existing_keyspace(db: &Db, name: &str) -> Result<kv::Keyspace, Failure> {
    if name != kv::DEFAULT_KEYSPACE && !db.keyspace_names().iter().any(|n| n == name) {
        return Err(Failure::Error(format!(
            "{} has no keyspace called {name:?}",
            db.path().display()
        )));
    }
    Ok(db.keyspace(name, Options::default())?)
}

/// Opens an existing store read-only: the tools that only read never create a store,
/// take the lock or write a byte, so they work beside a writer and on a read-only
/// directory.
fn open_read_only(dir: &Path) -> Result<Db, Failure> {
    let loaded = kv::load_options(
        dir,
        Options {
            read_only: true,
            ..Options::default()
        },
    )?;
    // A reader may go on without a policy or extractor: a table whose filter it
    // cannot read is read without it, and a scan without the extractor skips fewer
    // tables. Said, not hidden.
    for name in &loaded.unresolved {
        eprintln!("bloomkv: settings: this program does not have the {name}");
    }
    warn_settings(dir, &loaded);
    Ok(warn_recovery(Db::open(dir, loaded.options)?))
}

/// The options a store records (its `SETTINGS`) over `base`, for a command that
/// writes: refused when the store names a filter policy or prefix extractor this
/// program does not have, since new tables would be built without it.
fn stored_options(dir: &Path, base: Options) -> Result<Options, Failure> {
    let loaded = kv::load_options(dir, base)?;
    if !loaded.unresolved.is_empty() {
        return Err(Failure::Error(format!(
            "{} was written with the {}; this program does not have it and would write \
             tables without it (use a program that registers it)",
            dir.display(),
            loaded.unresolved.join(" and the ")
        )));
    }
    warn_settings(dir, &loaded);
    Ok(loaded.options)
}

/// Says on stderr when a store's settings file is damaged, missing from a store that
/// has a manifest, or holds settings this build cannot apply: defaults are used.
fn warn_settings(dir: &Path, loaded: &kv::LoadedOptions) {
    match &loaded.state {
        kv::SettingsState::Damaged(_) => eprintln!("bloomkv: settings {}", loaded.state),
        kv::SettingsState::Missing if dir.join(kv::filename::MANIFEST).exists() => {
            eprintln!("bloomkv: settings {}", loaded.state)
        }
        _ => {}
    }
    for i in &loaded.ignored {
        eprintln!("bloomkv: settings: ignored {i}");
    }
}

/// Says on stderr what recovery dropped from the logs or moved aside, if anything.
fn warn_recovery(db: Db) -> Db {
    let report = db.recovery_report();
    if !report.is_clean() || !report.tables_moved_aside.is_empty() {
        eprintln!("bloomkv: recovery {report}");
    }
    db
}

/// A command-line key or value as bytes: as given, or decoded from hex.
fn arg_bytes(what: &str, arg: &str, hex: bool) -> Result<Vec<u8>, Failure> {
    if !hex {
        return Ok(arg.as_bytes().to_vec());
    }
    from_hex(arg).ok_or_else(|| {
        Failure::Usage(format!(
            "{what} {arg:?} is not hex (an even number of 0-9, a-f, A-F)"
        ))
    })
}

fn show_arg(bytes: &[u8], hex: bool) -> String {
    if hex {
        to_hex(bytes)
    } else {
        format!("{:?}", String::from_utf8_lossy(bytes))
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// `name` as a JSON string when it is text and hex was not asked for, else
/// `name_hex` as hex: every byte string has an exact JSON form.
fn json_field(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
    bytes: &[u8],
    hex: bool,
) {
    match std::str::from_utf8(bytes) {
        Ok(text) if !hex => {
            obj.insert(name.into(), text.into());
        }
        _ => {
            obj.insert(format!("{name}_hex"), to_hex(bytes).into());
        }
    }
}

fn sizing_cmd(out: &mut impl Write, items: u64, fp_rate: f64) -> CmdResult {
    let usage = |e: bloomkv::FilterError| Failure::Usage(e.to_string());
    let bits = sizing::optimal_num_bits(items, fp_rate).map_err(usage)?;
    let k = sizing::optimal_num_hashes(bits, items).map_err(usage)?;
    let fp = sizing::false_positive_rate(bits, items, k)?;
    writeln!(out, "items               {items}")?;
    writeln!(out, "target FP rate      {fp_rate}")?;
    writeln!(out, "bits                {bits}")?;
    writeln!(
        out,
        "memory              {:.3} MiB ({} bytes)",
        bits as f64 / 8.0 / 1048576.0,
        bits.div_ceil(8)
    )?;
    writeln!(out, "bits per key        {:.3}", bits as f64 / items as f64)?;
    writeln!(out, "hash functions (k)  {k}")?;
    writeln!(out, "expected FP rate    {:.6} ({:.4}%)", fp, fp * 100.0)?;
    Ok(ExitCode::SUCCESS)
}
