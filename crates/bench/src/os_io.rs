//! The operating system's own count of a process's reads, to check ours against.
//!
//! Linux keeps per-process I/O accounting in `/proc/self/io`:
//!
//! ```text
//! rchar: 323934931        bytes returned by read-like syscalls (page cache included)
//! wchar: 323929600
//! syscr: 632687           read-like syscalls (read, pread64, readv, ...)
//! syscw: 625648
//! read_bytes: 0           bytes actually fetched from the storage device
//! ...
//! ```
//!
//! `syscr` must rise by the store's `data_block_reads` during lookups (one `pread` per
//! block); `read_bytes` shows whether those reads reached the device (`--cold`).

/// A reading of `/proc/self/io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsIo {
    /// Read syscalls.
    pub syscr: u64,
    /// Bytes returned by read syscalls.
    pub rchar: u64,
    /// Bytes fetched from the device.
    pub read_bytes: u64,
}

impl OsIo {
    /// The current counters, or `None` where the OS does not provide them.
    pub fn now() -> Option<OsIo> {
        let text = std::fs::read_to_string("/proc/self/io").ok()?;
        let field = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
                .and_then(|v| v.trim().parse().ok())
        };
        Some(OsIo {
            syscr: field("syscr")?,
            rchar: field("rchar")?,
            read_bytes: field("read_bytes")?,
        })
    }

    /// Read syscalls that one call of [`OsIo::now`] itself makes, measured.
    pub fn self_cost() -> Option<u64> {
        let a = OsIo::now()?;
        let b = OsIo::now()?;
        Some(b.syscr - a.syscr)
    }
}

/// The OS's reads between two readings, net of the readings' own cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OsReads {
    /// Read syscalls.
    pub syscalls: u64,
    /// Bytes fetched from the device.
    pub device_bytes: u64,
}

impl OsReads {
    /// `after - before`, minus `self_cost` read syscalls.
    pub fn between(before: OsIo, after: OsIo, self_cost: u64) -> OsReads {
        OsReads {
            syscalls: after
                .syscr
                .saturating_sub(before.syscr)
                .saturating_sub(self_cost),
            device_bytes: after.read_bytes.saturating_sub(before.read_bytes),
        }
    }
}
