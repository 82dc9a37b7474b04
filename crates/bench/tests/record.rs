//! `bloomkv-record` keeps what the program printed, its exit code and the command.

#![cfg(unix)]

use std::process::Command;

fn record(out: &std::path::Path, program: &[&str]) -> std::process::ExitStatus {
    Command::new(env!("CARGO_BIN_EXE_bloomkv-record"))
        .arg("--json")
        .arg(out)
        .arg("--")
        .args(program)
        .output()
        .unwrap()
        .status
}

#[test]
fn records_lines_command_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    assert!(record(
        &out,
        &["sh", "-c", "echo 'rows: 3'; echo 'ns per get: 120'"]
    )
    .success());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        json["stdout"],
        serde_json::json!(["rows: 3", "ns per get: 120"])
    );
    assert_eq!(json["command"][0], "sh");
    assert_eq!(json["exit_code"], 0);
    assert!(json.get("commit").is_some() && json.get("clean").is_some());
    assert_eq!(json["machine"]["cpus"].as_u64().unwrap() as usize, {
        std::thread::available_parallelism().map_or(0, |n| n.get())
    });

    // A failing program still leaves its output, and the wrapper says it failed.
    let failed = record(&out, &["sh", "-c", "echo partial; exit 4"]);
    assert_eq!(failed.code(), Some(1));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(json["exit_code"], 4);
    assert_eq!(json["stdout"], serde_json::json!(["partial"]));
}

#[test]
fn usage_errors_exit_2() {
    let status = Command::new(env!("CARGO_BIN_EXE_bloomkv-record"))
        .arg("--json")
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(2));
}
