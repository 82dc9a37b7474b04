//! The filter budget: which live filters to let go of so that `Options::filter_memory_budget`
//! goes where the plan puts it, and the `RELEASED` file that keeps that choice.
//!
//! Every new table's filter is planned for the whole tree within the budget
//! (`filter_plan::plan_within`): each level's planned *share* is its planned bits per
//! key times its keys. The filters already live were built under earlier plans, for a
//! smaller tree: when the tree grows, a level written early (the deepest, typically,
//! written while it was the whole tree) holds more than its share, and without a
//! correction the budget would be spent first come, first served.
//!
//! So when a new table's planned filter does not fit in what the live filters leave,
//! filters are *released* from levels holding more than their share: the level most
//! over its share first, and there the filter with the most bits per key (the oldest
//! plan) first, until the new filter fits or no level other than the new table's own is
//! over its share. A released table stays live and is read as a table without a filter:
//! every lookup within its range reads a data block, so it never misses a key. Its
//! filter's memory goes when the last reader of the version that held it lets go, and
//! it comes back only when compaction rewrites the table (with the plan's bits then).
//!
//! ```text
//!  new table on L3 wants 12 KiB; the budget leaves 2 KiB
//!  level   share (plan)   held      over by
//!  L3         40 KiB       28 KiB      -
//!  L6        300 KiB      410 KiB   110 KiB  ◄ release L6's 10-bit filters, oldest
//!                                              plan first, until 10 KiB are freed
//! ```
//!
//! The released tables' numbers are kept in the store's `RELEASED` file (written
//! durably after each release; docs/FORMAT.md), so a reopen does not load those filters
//! again. A missing or damaged file releases nothing (the next table built releases
//! again as needed); without a budget the file is ignored and every filter loads.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use crate::filename;
use crate::fs::FileSystem;

/// A live filter as the budget sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Held {
    pub number: u64,
    pub level: usize,
    /// Bytes the filter holds in memory.
    pub bytes: u64,
    /// Keys the table holds (its bits per key are `8 · bytes / keys`).
    pub keys: u64,
}

/// The filters to release so that `need` bytes are freed for a new table on
/// `level`: only from other levels whose `held` filters exceed their planned
/// `shares` (bytes per level), the level most over its share first and there the
/// filter with the most bits per key (ties: the lowest number, the oldest), and no
/// more once `need` is freed. May free less than `need` (nothing left over its share).
pub(crate) fn choose_releases(held: &[Held], shares: &[f64], level: usize, need: u64) -> Vec<u64> {
    let levels = shares.len();
    let mut over: Vec<f64> = (0..levels)
        .map(|l| {
            let h: u64 = held.iter().filter(|t| t.level == l).map(|t| t.bytes).sum();
            h as f64 - shares[l]
        })
        .collect();
    let mut left: Vec<&Held> = held
        .iter()
        .filter(|t| t.level != level && t.level < levels && t.bytes > 0)
        .collect();
    let bits = |t: &Held| t.bytes as f64 / t.keys.max(1) as f64;
    let mut chosen = Vec::new();
    let mut freed = 0u64;
    while freed < need {
        let Some(l) = (0..levels)
            .filter(|&l| over[l] > 0.0 && left.iter().any(|t| t.level == l))
            .max_by(|&a, &b| over[a].total_cmp(&over[b]))
        else {
            break;
        };
        let Some(at) = left
            .iter()
            .enumerate()
            .filter(|(_, t)| t.level == l)
            .max_by(|(_, a), (_, b)| bits(a).total_cmp(&bits(b)).then(b.number.cmp(&a.number)))
            .map(|(i, _)| i)
        else {
            break;
        };
        let t = left.swap_remove(at);
        over[l] -= t.bytes as f64;
        freed += t.bytes;
        chosen.push(t.number);
    }
    chosen
}

const MAGIC: &[u8; 8] = b"BKRELEAS";
const VERSION: u32 = 1;

/// The `RELEASED` file's bytes: magic, version, count, the table numbers (u64 LE,
/// ascending), CRC-32 of all before it.
pub(crate) fn encode(numbers: &BTreeSet<u64>) -> Vec<u8> {
    let mut payload = Vec::with_capacity(4 + 8 * numbers.len());
    payload.extend_from_slice(&(numbers.len() as u32).to_le_bytes());
    for n in numbers {
        payload.extend_from_slice(&n.to_le_bytes());
    }
    crate::coding::frame(MAGIC, VERSION, &payload)
}

/// Decodes a `RELEASED` file, checking its length, checksum, magic and version.
pub(crate) fn decode(bytes: &[u8]) -> Result<BTreeSet<u64>, String> {
    let payload = crate::coding::unframe(bytes, MAGIC, VERSION, "released-filters")?;
    let count = crate::coding::u32_at(payload, 0).ok_or("truncated")? as usize;
    let numbers = &payload[4..];
    if numbers.len() != 8 * count {
        return Err(format!("{} bytes for {count} numbers", numbers.len()));
    }
    Ok(numbers
        .chunks_exact(8)
        .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
        .collect())
}

/// Reads `dir`'s `RELEASED` file: empty when there is none or it does not decode
/// (nothing is released then; the next table built under the budget releases again).
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> BTreeSet<u64> {
    let read = || -> Result<BTreeSet<u64>, String> {
        let file = fs
            .open_random(&filename::released_path(dir))
            .map_err(|e| e.to_string())?;
        let len = file.len().map_err(|e| e.to_string())?;
        if len > 8 * (u32::MAX as u64) {
            return Err(format!("{len} bytes"));
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| e.to_string())?;
        decode(&bytes)
    };
    read().unwrap_or_default()
}

/// Writes `dir`'s `RELEASED` file durably: `RELEASED.tmp`, fsync, rename, fsync of
/// the directory. A crash leaves the old file or the new one.
pub(crate) fn write(fs: &dyn FileSystem, dir: &Path, numbers: &BTreeSet<u64>) -> io::Result<()> {
    let (tmp, dest) = (
        filename::released_tmp_path(dir),
        filename::released_path(dir),
    );
    crate::fs::replace_durably(fs, &tmp, &dest, &encode(numbers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(number: u64, level: usize, bytes: u64, keys: u64) -> Held {
        Held {
            number,
            level,
            bytes,
            keys,
        }
    }

    /// L6 holds 3,000 bytes against a share of 1,000; L4 is within its share: 1,500
    /// bytes needed come from L6 only, its densest filters first.
    #[test]
    fn releases_come_from_the_level_over_its_share_densest_first() {
        let held = [
            t(1, 6, 1_000, 1_000), // 8 bits per key
            t(2, 6, 1_250, 1_000), // 10
            t(3, 6, 750, 1_000),   // 6
            t(4, 4, 900, 600),     // 12, but L4 is within its share
        ];
        let shares = [0.0, 0.0, 0.0, 0.0, 1_000.0, 0.0, 1_000.0];
        assert_eq!(choose_releases(&held, &shares, 3, 1_500), vec![2, 1]);
        assert_eq!(choose_releases(&held, &shares, 3, 1), vec![2]);
        // Once L6 is down to its share, nothing more is taken from it.
        assert_eq!(choose_releases(&held, &shares, 3, 10_000), vec![2, 1]);
        // The new table's own level is never a source.
        assert!(choose_releases(&held, &shares, 6, 1_500).is_empty());
        assert!(choose_releases(&held, &shares, 3, 0).is_empty());
    }

    #[test]
    fn the_released_file_round_trips_and_damage_is_refused() {
        let numbers: BTreeSet<u64> = [7, 42, 1 << 40].into_iter().collect();
        let bytes = encode(&numbers);
        assert_eq!(bytes.len(), 20 + 24);
        assert_eq!(decode(&bytes), Ok(numbers));
        assert_eq!(decode(&encode(&BTreeSet::new())), Ok(BTreeSet::new()));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(decode(&bad).is_err(), "byte {i}");
        }
        assert!(decode(&bytes[..bytes.len() - 8]).is_err());
    }
}
