//! `bloomkv-record`: runs one measuring program and commits its output to a JSON file
//! with what is needed to reproduce it.
//!
//! The examples and criterion benches print their figures as text. A figure quoted in
//! the docs must name a committed output; this wrapper makes one: it runs the program
//! (its output still reaches the terminal), then writes the command line, the commit
//! and whether the tree was clean, the machine, the date, the wall time, the exit code
//! and every line the program printed on standard output.
//!
//! ```text
//! cargo run --release -p bloomkv-bench --bin bloomkv-record -- \
//!     --json docs/results/point_get.json -- target/release/examples/point_get
//! ```
//!
//! It records, it does not interpret: the lines are the program's own, and the docs
//! quote them.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bloomkv_bench::{Machine, Provenance};
use serde::Serialize;

/// The file `--json` names.
#[derive(Serialize)]
struct Record {
    /// The program and its arguments, as run.
    command: Vec<String>,
    /// What produced it.
    #[serde(flatten)]
    provenance: Provenance,
    machine: Machine,
    /// Seconds since the Unix epoch when the program started.
    started_unix: u64,
    /// Wall time of the whole program.
    seconds: f64,
    /// The program's exit code (`None`: ended by a signal).
    exit_code: Option<i32>,
    /// Its standard output, line by line.
    stdout: Vec<String>,
}

fn usage() -> ExitCode {
    eprintln!("usage: bloomkv-record --json OUT -- PROGRAM [ARGS...]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, command) = match args.as_slice() {
        [flag, out, sep, command @ ..]
            if flag == "--json" && sep == "--" && !command.is_empty() =>
        {
            (out.clone(), command.to_vec())
        }
        _ => return usage(),
    };
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let provenance = Provenance::here();
    let start = Instant::now();
    let mut child = match Command::new(&command[0])
        .args(&command[1..])
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("bloomkv-record: cannot run {}: {e}", command[0]);
            return ExitCode::from(3);
        }
    };
    let mut stdout = Vec::new();
    if let Some(pipe) = child.stdout.take() {
        let mut terminal = std::io::stdout().lock();
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(terminal, "{line}");
            stdout.push(line);
        }
    }
    let status = match child.wait() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("bloomkv-record: waiting for {}: {e}", command[0]);
            return ExitCode::from(3);
        }
    };
    let record = Record {
        command,
        provenance,
        machine: Machine::here(),
        started_unix,
        seconds: start.elapsed().as_secs_f64(),
        exit_code: status.code(),
        stdout,
    };
    let written = serde_json::to_string_pretty(&record)
        .map_err(std::io::Error::other)
        .and_then(|text| std::fs::write(&out, text + "\n"));
    if let Err(e) = written {
        eprintln!("bloomkv-record: writing {out}: {e}");
        return ExitCode::from(3);
    }
    if status.success() {
        ExitCode::SUCCESS
    } else {
        eprintln!("bloomkv-record: the program failed ({status}); its output is in {out}");
        ExitCode::from(1)
    }
}
