//! Where a comparison ran: the commit, the CPU, memory, kernel and file system.
//!
//! Read at run time from what the system already says — git (`Provenance`),
//! `/proc/cpuinfo`, `/proc/meminfo`, `/proc/sys/kernel/osrelease` and the mount table
//! in `/proc/self/mounts` (the file system that holds the stores' directory) — so a
//! result file carries its own context. Anything the system does not say is
//! `"unknown"` (or `null`), never a guess.

use std::path::Path;

use bloomkv_bench::Provenance;
use serde::Serialize;

/// The machine and the code a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// `git rev-parse HEAD` of the working directory (`None`: git could not say).
    pub commit: Option<String>,
    /// Whether no tracked file differed from it (`None`: git could not say).
    pub clean: Option<bool>,
    /// The CPU's model name, or `"unknown"`.
    pub cpu_model: String,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// Total memory in bytes (`MemTotal`), if known.
    pub memory_bytes: Option<u64>,
    /// The kernel release, or `"unknown"`.
    pub kernel: String,
    /// Type of the file system holding the stores (`ext4`, `tmpfs`, ...), or
    /// `"unknown"`.
    pub file_system: String,
    /// Operating system and architecture.
    pub os: String,
    /// bloomkv's version.
    pub bloomkv_version: &'static str,
}

impl Environment {
    /// Describes this machine, with the stores living under `store_dir`.
    pub fn here(store_dir: &Path) -> Environment {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let Provenance { commit, clean } = Provenance::here();
        let canonical =
            std::fs::canonicalize(store_dir).unwrap_or_else(|_| store_dir.to_path_buf());
        Environment {
            commit,
            clean,
            cpu_model: read("/proc/cpuinfo")
                .and_then(|s| cpu_model(&s))
                .unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_bytes: read("/proc/meminfo").and_then(|s| mem_total(&s)),
            kernel: read("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown".into()),
            file_system: read("/proc/self/mounts")
                .and_then(|m| file_system_of(&m, &canonical))
                .unwrap_or_else(|| "unknown".into()),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            bloomkv_version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// The first `model name` line of `/proc/cpuinfo`.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .filter(|m| !m.is_empty())
}

/// `MemTotal` of `/proc/meminfo`, in bytes (the file says kB, meaning KiB).
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The type of the file system mounted at the longest mount point that contains
/// `path`, from a mount table in `/proc/self/mounts` form (`device mountpoint type
/// options ...`; spaces in a mount point are written `\040`).
fn file_system_of(mounts: &str, path: &Path) -> Option<String> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, point, kind) = (f.next()?, f.next()?, f.next()?);
            let point = point.replace("\\040", " ");
            path.starts_with(&point)
                .then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_memory_and_the_longest_matching_mount() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: X\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);

        assert_eq!(
            mem_total("MemTotal:       24684132 kB\nMemFree: 1 kB\n"),
            Some(24_684_132 * 1024)
        );
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);

        let mounts = "/dev/vda / ext4 rw,relatime 0 0\n\
                      tmpfs /tmp tmpfs rw 0 0\n\
                      /dev/vdb /tmp/my\\040disk xfs rw 0 0\n";
        let fs = |p: &str| file_system_of(mounts, Path::new(p));
        assert_eq!(fs("/srv/stores").as_deref(), Some("ext4"));
        assert_eq!(fs("/tmp/x").as_deref(), Some("tmpfs"));
        assert_eq!(fs("/tmp/my disk/a").as_deref(), Some("xfs"));
        // A path component must match whole: /tmpfoo is not under /tmp.
        assert_eq!(fs("/tmpfoo").as_deref(), Some("ext4"));
        assert_eq!(file_system_of("", Path::new("/a")), None);
    }
}
