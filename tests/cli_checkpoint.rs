//! `bloomkv checkpoint DIR OUT`: the copy opens with the source's contents, later
//! writes to the source stay out of it, and a target that holds files is refused.

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
fn checkpoint_copies_a_store_at_one_point() {
    let dir = tempfile::tempdir().unwrap();
    let (live, copy) = (dir.path().join("live"), dir.path().join("copy"));
    {
        let db = bloomkv::Db::open(&live, bloomkv::Options::default()).unwrap();
        for i in 0..300 {
            db.put(format!("key{i:04}"), format!("value{i}")).unwrap();
        }
        db.flush().unwrap();
        db.put("unflushed", "in the log only").unwrap();
        db.close().unwrap();
    }
    let (l, c) = (live.to_str().unwrap(), copy.to_str().unwrap());
    let o = bloomkv(&["checkpoint", l, c]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("at sequence 301"), "{out}");
    assert!(out.contains("tables linked"), "{out}");

    assert!(bloomkv(&["put", l, "later", "x"]).status.success());
    let o = bloomkv(&["get", c, "key0007", "unflushed"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "value7\nin the log only\n");
    let o = bloomkv(&["get", c, "later"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let o = bloomkv(&["verify", c]);
    assert!(o.status.success(), "{}", text(&o.stdout));

    // The same target again: it holds a store now.
    let o = bloomkv(&["checkpoint", l, c, "--format", "json"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("bloomkv: ") && err.contains("not empty"),
        "{err}"
    );
    // JSON output for scripts.
    let other = dir.path().join("other");
    let o = bloomkv(&["checkpoint", l, other.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sequence"], 302);
}
