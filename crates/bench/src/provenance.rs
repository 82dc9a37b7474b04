//! Which code a result file was measured with: the commit, and whether the tree had
//! changes. Every JSON file the benchmark and `bloomkv-peers` write records both, so
//! a figure can be traced to the code that produced it (and a figure from a dirty
//! tree is seen as one).
//!
//! Read with `git rev-parse HEAD` and `git status --porcelain --untracked-files=no`
//! in the working directory. Where git is absent or the directory is not a checkout,
//! both are `null`: never a guess.

use std::process::Command;

use serde::Serialize;

/// The commit a run measured, and whether the tree was clean.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// `git rev-parse HEAD`, or `None` where git could not say.
    pub commit: Option<String>,
    /// `true` if no tracked file differed from the commit; `None` where git could not
    /// say.
    pub clean: Option<bool>,
}

impl Provenance {
    /// The working directory's commit and state.
    pub fn here() -> Provenance {
        Provenance::from_git(|args| {
            let out = Command::new("git").args(args).output().ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).to_string())
        })
    }

    /// The commit and state from `git`, a function that runs git with the given
    /// arguments and returns its standard output (`None`: git failed or is absent).
    pub fn from_git(git: impl Fn(&[&str]) -> Option<String>) -> Provenance {
        let commit = git(&["rev-parse", "HEAD"])
            .map(|c| c.trim().to_string())
            .filter(|c| c.len() >= 7 && c.bytes().all(|b| b.is_ascii_hexdigit()));
        let clean = commit.as_ref().and_then(|_| {
            git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| s.trim().is_empty())
        });
        Provenance { commit, clean }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_and_state_or_null_without_git() {
        let clean = Provenance::from_git(|args| match args[0] {
            "rev-parse" => Some("0123456789abcdef0123456789abcdef01234567\n".into()),
            _ => Some(String::new()),
        });
        assert_eq!(
            clean.commit.as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
        assert_eq!(clean.clean, Some(true));

        let dirty = Provenance::from_git(|args| match args[0] {
            "rev-parse" => Some("0123456789abcdef0123456789abcdef01234567".into()),
            _ => Some(" M src/lib.rs\n".into()),
        });
        assert_eq!(dirty.clean, Some(false));

        let absent = Provenance::from_git(|_| None);
        assert_eq!(
            absent,
            Provenance {
                commit: None,
                clean: None
            }
        );
        let json = serde_json::to_value(&absent).unwrap();
        assert!(json["commit"].is_null() && json["clean"].is_null());

        // Not a checkout: git prints an error, not a hash.
        let garbage = Provenance::from_git(|_| Some("fatal: not a git repository".into()));
        assert_eq!(garbage.commit, None);
    }
}
