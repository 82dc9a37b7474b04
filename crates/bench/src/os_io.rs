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
//! block); `read_bytes` shows how many bytes of them the device served (`--cold`):
//! a read the page cache answered adds nothing to it.
//!
//! How many reads the device served is not kept per process: `/proc/diskstats`
//! counts reads completed per disk, for the whole machine. [`OsIo::device_reads`]
//! sums it over the real disks (loop, RAM and device-mapper devices left out, so
//! nothing is counted twice); on a quiet machine the benchmark is the only reader.

/// A reading of `/proc/self/io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsIo {
    /// Read syscalls.
    pub syscr: u64,
    /// Bytes returned by read syscalls.
    pub rchar: u64,
    /// Bytes fetched from the device.
    pub read_bytes: u64,
    /// Bytes passed to write syscalls (the page cache's writes included).
    pub wchar: u64,
    /// Reads completed by the machine's disks (machine-wide), where the OS says.
    pub device_reads: Option<u64>,
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
            wchar: field("wchar")?,
            device_reads: std::fs::read_to_string("/proc/diskstats")
                .ok()
                .and_then(|t| disk_reads(&t)),
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
    /// Reads the machine's disks completed meanwhile (machine-wide: on a quiet
    /// machine, the phase's), where the OS says.
    pub device_reads: Option<u64>,
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
            device_reads: after
                .device_reads
                .zip(before.device_reads)
                .map(|(a, b)| a.saturating_sub(b)),
        }
    }
}

/// Reads completed, summed over the real disks of a `/proc/diskstats` text (`major
/// minor name reads_completed …`): partitions are left out where their disk is listed
/// (a partition's reads are its disk's too), and so are loop, RAM, zram and
/// device-mapper devices. `None` if no disk is listed.
fn disk_reads(diskstats: &str) -> Option<u64> {
    let lines: Vec<(&str, u64)> = diskstats
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_major, _minor, name, reads) = (f.next()?, f.next()?, f.next()?, f.next()?);
            Some((name, reads.parse().ok()?))
        })
        .collect();
    let virtual_device = |n: &str| {
        ["loop", "ram", "zram", "dm-", "md", "sr"]
            .iter()
            .any(|p| n.starts_with(p))
    };
    let disks: Vec<&(&str, u64)> = lines
        .iter()
        .filter(|(name, _)| !virtual_device(name))
        // A partition (vda1, nvme0n1p1, sda2) is its disk's name and more.
        .filter(|(name, _)| {
            !lines.iter().any(|(other, _)| {
                other != name && !virtual_device(other) && name.starts_with(other)
            })
        })
        .collect();
    (!disks.is_empty()).then(|| disks.iter().map(|d| d.1).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_reads_sum_whole_disks_only() {
        let text = "   7       0 loop0 5 0 0 0 0 0 0 0 0 0 0
                     254       0 vda 407869 39662 54669226 425747 2756033
                     254       1 vda1 400000 0 0 0 0
                     259       0 nvme0n1 100 0 0 0 0
                     259       1 nvme0n1p1 90 0 0 0 0
                     253       0 zram0 7 0 0 0
                     252       0 dm-0 11 0 0 0
";
        assert_eq!(disk_reads(text), Some(407_869 + 100));
        assert_eq!(
            disk_reads(
                "   7 0 loop0 5 0 0
"
            ),
            None
        );
        assert_eq!(disk_reads(""), None);
    }
}
