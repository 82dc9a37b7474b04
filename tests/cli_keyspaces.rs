//! `--keyspace NAME` on the commands that read, write, inspect and verify: `put` makes a
//! keyspace, the others refuse an unknown one, and each keyspace's keys stay its own.

use std::process::{Command, Output};

fn bloomkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomkv"))
        .args(args)
        .output()
        .expect("run bloomkv")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn commands_take_a_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(bloomkv(&["put", d, "k", "in-default"]).status.success());
    let o = bloomkv(&["put", d, "k", "in-orders", "--keyspace", "orders"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(bloomkv(&["put", d, "k2", "x", "--keyspace", "orders"])
        .status
        .success());

    let o = bloomkv(&["get", d, "k", "--keyspace", "orders"]);
    assert_eq!(text(&o.stdout), "in-orders\n", "{}", text(&o.stderr));
    let o = bloomkv(&["get", d, "k"]);
    assert_eq!(text(&o.stdout), "in-default\n");
    let o = bloomkv(&["get", d, "k2"]);
    assert_eq!(o.status.code(), Some(1), "k2 is only in orders");

    let o = bloomkv(&["scan", d, "--keyspace", "orders"]);
    assert_eq!(text(&o.stdout), "k\tin-orders\nk2\tx\n");

    assert!(bloomkv(&["delete", d, "k", "--keyspace", "orders"])
        .status
        .success());
    let o = bloomkv(&["get", d, "k", "--keyspace", "orders"]);
    assert_eq!(o.status.code(), Some(1));
    let o = bloomkv(&["get", d, "k"]);
    assert_eq!(
        text(&o.stdout),
        "in-default\n",
        "the default keyspace kept its key"
    );

    // An unknown keyspace is refused by every command but `put`.
    for args in [
        vec!["get", d, "k", "--keyspace", "nope"],
        vec!["scan", d, "--keyspace", "nope"],
        vec!["delete", d, "k", "--keyspace", "nope"],
        vec!["inspect", d, "--keyspace", "nope"],
        vec!["verify", d, "--keyspace", "nope"],
    ] {
        let o = bloomkv(&args);
        assert_eq!(o.status.code(), Some(3), "{args:?}");
        assert!(
            text(&o.stderr).contains("no keyspace called"),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }

    // inspect and verify look at the keyspace's own tables.
    let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default()).unwrap();
    let orders = db.keyspace("orders", bloomkv::Options::default()).unwrap();
    for i in 0..200 {
        orders.put(format!("o{i:04}"), "v").unwrap();
    }
    orders.flush().unwrap();
    db.close().unwrap();
    drop(orders); // a keyspace handle holds the store, as a snapshot does
    let o = bloomkv(&["verify", d, "--keyspace", "orders", "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = bloomkv(&["inspect", d, "--keyspace", "orders", "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(info.to_string().contains("o0199"), "{info}");
    let o = bloomkv(&["inspect", d, "--format", "json"]);
    assert!(
        !text(&o.stdout).contains("o0199"),
        "the default keyspace has no orders"
    );
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info["keyspaces"], serde_json::json!(["orders"]));
    let o = bloomkv(&["inspect", d]);
    assert!(
        text(&o.stdout).contains("named keyspaces: orders"),
        "{}",
        text(&o.stdout)
    );

    // repair looks at every keyspace; this store needs none.
    let o = bloomkv(&["repair", d]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("needs no repair"),
        "{}",
        text(&o.stdout)
    );
}
