//! The workloads: YCSB's core workloads A–F as YCSB's `workloads/` files define them,
//! and X, the existence checks bloomkv is built for.
//!
//! ```text
//! workload  read  update  insert  scan  rmw   request distribution
//! a         50%   50%                         scrambled Zipfian
//! b         95%    5%                         scrambled Zipfian
//! c        100%                               scrambled Zipfian
//! d         95%            5%                 latest
//! e                        5%     95%         scrambled Zipfian (scan start), lengths uniform 1–100
//! f         50%                         50%   scrambled Zipfian (rmw = read, then update)
//! x         95%            5%                 scrambled Zipfian; 90% of the reads ask absent keys
//! ```
//!
//! Inserts add records past the loaded ones (ids `records`, `records + 1`, …); reads
//! and scans choose among the records loaded plus the inserts acknowledged so far.

use super::generator::{Distribution, SplitMix64};

/// One operation of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Get a record that exists.
    Read,
    /// Get a key that was never written (workload X).
    ReadAbsent,
    /// Overwrite an existing record.
    Update,
    /// Write a new record.
    Insert,
    /// Read up to `len` records from a start key on.
    Scan,
    /// Read a record, then write it back changed.
    ReadModifyWrite,
}

/// The operation kinds, in report order.
pub const OP_KINDS: [Op; 6] = [
    Op::Read,
    Op::ReadAbsent,
    Op::Update,
    Op::Insert,
    Op::Scan,
    Op::ReadModifyWrite,
];

impl Op {
    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::ReadAbsent => "read_absent",
            Op::Update => "update",
            Op::Insert => "insert",
            Op::Scan => "scan",
            Op::ReadModifyWrite => "rmw",
        }
    }

    /// Position in [`OP_KINDS`].
    pub fn index(self) -> usize {
        match self {
            Op::Read => 0,
            Op::ReadAbsent => 1,
            Op::Update => 2,
            Op::Insert => 3,
            Op::Scan => 4,
            Op::ReadModifyWrite => 5,
        }
    }
}

/// Scan lengths in workload E: uniform over `1..=MAX_SCAN`.
pub const MAX_SCAN: u64 = 100;

/// A workload: its operation mix and its request distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// `a` … `f`, `x`.
    pub name: char,
    /// Shares of each operation, in [`OP_KINDS`] order, summing to 1.
    pub mix: [f64; 6],
    /// How a record is picked.
    pub distribution: Distribution,
}

impl Workload {
    /// The workload called `name` (`a`–`f`, `x`), if there is one.
    pub fn named(name: char) -> Option<Workload> {
        // [read, read_absent, update, insert, scan, rmw]
        let (mix, distribution) = match name.to_ascii_lowercase() {
            'a' => ([0.5, 0.0, 0.5, 0.0, 0.0, 0.0], Distribution::Zipfian),
            'b' => ([0.95, 0.0, 0.05, 0.0, 0.0, 0.0], Distribution::Zipfian),
            'c' => ([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], Distribution::Zipfian),
            'd' => ([0.95, 0.0, 0.0, 0.05, 0.0, 0.0], Distribution::Latest),
            'e' => ([0.0, 0.0, 0.0, 0.05, 0.95, 0.0], Distribution::Zipfian),
            'f' => ([0.5, 0.0, 0.0, 0.0, 0.0, 0.5], Distribution::Zipfian),
            // 95% gets, 90% of them absent: 0.095 present, 0.855 absent.
            'x' => ([0.095, 0.855, 0.0, 0.05, 0.0, 0.0], Distribution::Zipfian),
            _ => return None,
        };
        Some(Workload {
            name: name.to_ascii_lowercase(),
            mix,
            distribution,
        })
    }

    /// Every workload, in the order a run goes through them.
    pub fn all() -> Vec<Workload> {
        "abcdefx".chars().filter_map(Workload::named).collect()
    }

    /// Parses `a,b,c` (or `all`).
    pub fn parse_list(list: &str) -> Result<Vec<Workload>, String> {
        if list == "all" {
            return Ok(Workload::all());
        }
        list.split(',')
            .map(|s| {
                let s = s.trim();
                let mut chars = s.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Workload::named(c),
                    _ => None,
                }
                .ok_or_else(|| format!("unknown workload {s:?}: expected a–f or x"))
            })
            .collect()
    }

    /// Draws the next operation.
    pub fn next_op(&self, rng: &mut SplitMix64) -> Op {
        let u = rng.next_f64();
        let mut acc = 0.0;
        for (i, share) in self.mix.iter().enumerate() {
            acc += share;
            if u < acc {
                return OP_KINDS[i];
            }
        }
        // Rounding left u past the last share: the last operation with a share.
        self.mix
            .iter()
            .rposition(|&s| s > 0.0)
            .map(|i| OP_KINDS[i])
            .unwrap_or(Op::Read)
    }

    /// Whether the workload writes.
    pub fn writes(&self) -> bool {
        self.mix[Op::Update.index()]
            + self.mix[Op::Insert.index()]
            + self.mix[Op::ReadModifyWrite.index()]
            > 0.0
    }
}
