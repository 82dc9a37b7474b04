//! The command line as a careless user meets it: each mistake gets its exit code and
//! one line on stderr, never a panic; binary keys and values go in and out intact;
//! the read-only tools work beside a writer; `bench` touches only what it made.
//!
//! Exit codes: 0 success (`get`: found), 1 `get`: not found / `verify`: damage found,
//! 2 usage error, 3 any other error.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bloomkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(args)
        .output()
        .expect("run bloomkv")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit code `code`, nothing on stdout beyond `out`, and one `bloomkv: ` line on
/// stderr containing `says` (or no stderr at all when `says` is empty).
fn expect(o: &Output, code: i32, says: &str, case: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{case}: {err}");
    assert!(!err.contains("panicked"), "{case}: {err}");
    if says.is_empty() {
        return;
    }
    assert!(err.contains(says), "{case}: {err}");
    if code != 2 {
        // Usage errors are clap's (with a hint); ours are one line.
        assert_eq!(err.lines().count(), 1, "{case}: one line: {err}");
        assert!(err.starts_with("bloomkv: "), "{case}: {err}");
    }
}

fn store(dir: &Path, n: usize) {
    let db = bloomkv::Db::open(dir, bloomkv::Options::default()).unwrap();
    for i in 0..n {
        db.put(format!("key{i:06}"), format!("value{i}")).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_mistake_gets_its_exit_code_and_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    store(&db, 100);
    let d = db.to_str().unwrap();
    let missing = dir.path().join("missing");
    let m = missing.to_str().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("todo.txt"), "not a store").unwrap();
    let n = notes.to_str().unwrap();
    let file = notes.join("todo.txt");
    let f = file.to_str().unwrap();

    let cases: Vec<(&str, Vec<&str>, i32, &str)> = vec![
        ("found", vec!["get", d, "key000007"], 0, ""),
        ("not found", vec!["get", d, "nope"], 1, "not found"),
        (
            "no such directory",
            vec!["get", m, "k"],
            3,
            "does not exist",
        ),
        ("no store", vec!["get", n, "k"], 3, "holds no bloomkv store"),
        (
            "a file, not a directory",
            vec!["get", f, "k"],
            3,
            "todo.txt",
        ),
        (
            "scan of no store",
            vec!["scan", n],
            3,
            "holds no bloomkv store",
        ),
        ("inspect of no store", vec!["inspect", n], 3, "no MANIFEST"),
        ("verify of no store", vec!["verify", m], 3, "does not exist"),
        ("missing argument", vec!["get", d], 2, "KEY"),
        ("unknown flag", vec!["scan", d, "--nope"], 2, "--nope"),
        ("bad hex", vec!["get", d, "--hex", "xyz"], 2, "not hex"),
        ("bad format", vec!["scan", d, "--format", "xml"], 2, "xml"),
        (
            "huge lookups",
            vec!["bench", "--lookups", "1000000000000000000"],
            2,
            "--lookups",
        ),
        (
            "huge keys",
            vec!["bench", "--keys", "18446744073709551615"],
            2,
            "--keys",
        ),
        (
            "huge values",
            vec!["bench", "--value-size", "1000000000000"],
            2,
            "--value-size",
        ),
        (
            "zero tables",
            vec!["bench", "--tables", "0"],
            2,
            "greater than zero",
        ),
        (
            "bits per key",
            vec!["bench", "--bits-per-key", "NaN"],
            2,
            "--bits-per-key",
        ),
        (
            "impossible rate",
            vec!["sizing", "--items", "10", "--fp-rate", "1.5"],
            2,
            "rate",
        ),
        (
            "overflowing count",
            vec!["bench", "--keys", "99999999999999999999999"],
            2,
            "--keys",
        ),
        // Each of these once passed the flag check and failed (or, for the cache,
        // silently ran without one) only after the stores were built.
        (
            "bits per key the store refuses",
            vec!["bench", "--bits-per-key", "0.5"],
            2,
            "1..=100",
        ),
        (
            "a cache past the address space",
            vec!["bench", "--cache-mib", "17592186044416"],
            2,
            "--cache-mib",
        ),
        (
            "json into a directory",
            vec!["bench", "--json", n],
            2,
            "is a directory",
        ),
        (
            "prefix scans over too few keys",
            vec!["bench", "--keys", "4", "--tables", "1"],
            2,
            "--prefix-scans",
        ),
        (
            "range scans over too few keys",
            vec![
                "bench",
                "--keys",
                "2",
                "--tables",
                "1",
                "--lookups",
                "1",
                "--prefix-scans",
                "0",
                "--range-scans",
                "5",
            ],
            2,
            "--range-scans",
        ),
        ("bench dir is a file", vec!["bench", "--dir", f], 3, "--dir"),
        // Not a mistake: the leveled shape's tables are compaction's, and `--tables`
        // (default 10) does not apply to one key.
        (
            "leveled with one key",
            vec![
                "bench",
                "--shape",
                "leveled",
                "--keys",
                "1",
                "--lookups",
                "1",
                "--allocation",
                "uniform",
            ],
            0,
            "",
        ),
        (
            "more threads than lookups",
            vec!["bench", "--threads", "5", "--lookups", "2"],
            2,
            "--threads",
        ),
        (
            "repair of no store",
            vec!["repair", n],
            3,
            "no bloomkv store",
        ),
    ];
    for (case, args, code, says) in cases {
        let o = bloomkv(&args);
        expect(&o, code, says, case);
    }
    assert!(!missing.exists(), "nothing created");
    assert_eq!(listing(&notes), vec!["todo.txt"], "no LOCK left behind");

    // A store another process holds, even after its LOCK file was deleted.
    let holder = bloomkv::Db::open(&db, bloomkv::Options::default()).unwrap();
    std::fs::remove_file(db.join("LOCK")).unwrap();
    let o = bloomkv(&["put", d, "k", "v"]);
    expect(&o, 3, "locked", "put on a held store");
    // Reading beside the writer works.
    holder.put("fresh", "yes").unwrap();
    let o = bloomkv(&["get", d, "fresh"]);
    expect(&o, 0, "", "get beside a writer");
    assert_eq!(stdout(&o), "yes\n");
    let o = bloomkv(&["verify", d]);
    expect(&o, 0, "", "verify beside a writer");
    drop(holder);

    // A store that lost its MANIFEST is named as damaged, with the way out, by the
    // reading tools too (not "no store").
    let lost = dir.path().join("lost-manifest");
    store(&lost, 10);
    std::fs::remove_file(lost.join("MANIFEST")).unwrap();
    let l = lost.to_str().unwrap();
    for (case, args) in [
        ("get", vec!["get", l, "key000001"]),
        ("scan", vec!["scan", l]),
        ("inspect", vec!["inspect", l]),
    ] {
        expect(&bloomkv(&args), 3, "`repair` rebuilds it", case);
    }
    // verify finds it: damage (1), not "no store" (3).
    let o = bloomkv(&["verify", l]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("`repair` rebuilds it"),
        "{}",
        stdout(&o)
    );

    // verify: 1 for damage found.
    let table = listing(&db)
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    let mut bytes = std::fs::read(db.join(&table)).unwrap();
    bytes[50] ^= 0x10;
    std::fs::write(db.join(&table), bytes).unwrap();
    let o = bloomkv(&["verify", d]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("CORRUPT"));
    // A damaged data block does not keep the store from opening: verify says so
    // instead of "no recovery mode opens this store".
    assert!(
        stdout(&o).contains("reads that need a damaged block fail"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("no recovery mode opens"));
    for line in stdout(&o).lines().filter(|l| l.starts_with("CORRUPT")) {
        assert_eq!(line.matches("at offset").count(), 1, "said once: {line}");
    }
    let o = bloomkv(&["put", d, "after", "damage"]);
    expect(&o, 0, "", "put beside a damaged block");
}

/// Runs `bloomkv args`, reads one line of its output and hangs up (what `| head -1`
/// does); the line, and how the command ended.
fn first_line_then_hang_up(args: &[OsString]) -> (String, Output) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    (first, child.wait_with_output().unwrap())
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), 20_000);
    for args in [
        vec!["scan"],
        vec!["scan", "--format", "json"],
        vec!["scan", "--hex"],
    ] {
        let mut args: Vec<OsString> = args.iter().map(OsString::from).collect();
        args.push(dir.path().into());
        let (first, o) = first_line_then_hang_up(&args);
        assert!(!first.is_empty());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{args:?}");
    }
}

/// A benchmark asked for `--json` still writes it when its printout's reader hangs up
/// early (`bench --json F | head -1`): the run goes on without printing.
#[test]
fn a_closed_pipe_does_not_cost_bench_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let mut args: Vec<OsString> = [
        "bench",
        "--keys",
        "1000",
        "--lookups",
        "100",
        "--prefix-scans",
        "0",
        "--json",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.push(json.clone().into());
    let (first, o) = first_line_then_hang_up(&args);
    assert!(first.starts_with("bloomkv disk-I/O savings"), "{first}");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(written["rows"].as_array().map(Vec::len), Some(8));
}

#[test]
fn binary_keys_and_values_go_in_and_come_out_intact() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("db");
    let d = d.to_str().unwrap();
    // A key with a NUL, a tab and a non-UTF-8 byte; a value with a newline.
    let o = bloomkv(&["put", d, "--hex", "00ff0974", "0a0d00"]);
    expect(&o, 0, "", "put --hex");
    let o = bloomkv(&["put", d, "plain", "text"]);
    expect(&o, 0, "", "put");
    let o = bloomkv(&["get", d, "--hex", "00ff0974"]);
    expect(&o, 0, "", "get --hex");
    assert_eq!(stdout(&o), "0a0d00\n");
    let o = bloomkv(&["get", d, "plain"]);
    assert_eq!(o.stdout, b"text\n");
    let o = bloomkv(&["get", d, "--hex", "00ff"]);
    expect(&o, 1, "00ff not found", "get --hex absent");

    let o = bloomkv(&["scan", d, "--hex"]);
    assert_eq!(stdout(&o), "00ff0974\t0a0d00\n706c61696e\t74657874\n");
    let o = bloomkv(&["scan", d, "--hex", "--from", "01"]);
    assert_eq!(stdout(&o), "706c61696e\t74657874\n");
    let o = bloomkv(&["scan", d, "--format", "json"]);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            serde_json::json!({"key_hex": "00ff0974", "value": "\n\r\u{0}"}),
            serde_json::json!({"key": "plain", "value": "text"}),
        ]
    );

    let o = bloomkv(&["delete", d, "--hex", "00ff0974"]);
    expect(&o, 0, "", "delete --hex");
    let o = bloomkv(&["scan", d, "--format", "json", "--hex"]);
    assert_eq!(
        stdout(&o),
        "{\"key_hex\":\"706c61696e\",\"value_hex\":\"74657874\"}\n"
    );
}

#[test]
fn inspect_and_verify_speak_json() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path(), 300);
    let d = dir.path().to_str().unwrap();
    let o = bloomkv(&["inspect", d, "--format", "json"]);
    expect(&o, 0, "", "inspect json");
    let info: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(info["tables"].as_array().unwrap().len(), 1);
    assert_eq!(info["tables"][0]["entries"], 300);
    let o = bloomkv(&["verify", d, "--format", "json"]);
    expect(&o, 0, "", "verify json");
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["problems"].as_array().unwrap().len(), 0);
    assert_eq!(report["settled"], true);
}

const SMALL_BENCH: [&str; 7] = [
    "bench",
    "--keys",
    "2000",
    "--tables",
    "2",
    "--lookups",
    "200",
];

#[test]
fn bench_removes_only_what_it_made_and_creates_no_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    // A directory holding a user's files is refused, and left as it was.
    let mine = dir.path().join("mine");
    std::fs::create_dir_all(mine.join("no-filter")).unwrap();
    std::fs::write(mine.join("no-filter/keep.txt"), "precious").unwrap();
    let mut args = SMALL_BENCH.to_vec();
    args.extend(["--dir", mine.to_str().unwrap()]);
    let o = bloomkv(&args);
    expect(&o, 3, "did not make", "bench --dir with a user's files");
    assert_eq!(
        std::fs::read_to_string(mine.join("no-filter/keep.txt")).unwrap(),
        "precious"
    );
    assert_eq!(listing(&mine), vec!["no-filter"]);

    // A new directory is the benchmark's: it runs there, twice.
    let work = dir.path().join("work");
    let mut args = SMALL_BENCH.to_vec();
    args.extend(["--dir", work.to_str().unwrap()]);
    expect(&bloomkv(&args), 0, "", "bench --dir new");
    expect(&bloomkv(&args), 0, "", "bench --dir again");
    assert!(listing(&work).contains(&"no-filter".to_string()));

    // --json into a directory that does not exist: refused, nothing created.
    let json = dir.path().join("nonexistent/x.json");
    let mut args = SMALL_BENCH.to_vec();
    args.extend(["--json", json.to_str().unwrap()]);
    expect(&bloomkv(&args), 2, "does not exist", "bench --json");
    assert!(!dir.path().join("nonexistent").exists());
}
