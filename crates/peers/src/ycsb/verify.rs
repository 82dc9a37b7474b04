//! Checking what reads returned while writers ran.
//!
//! Every write and read of a sampled record is logged with two ticks of one shared
//! logical clock, taken just before the operation starts and just after it returns,
//! so `a.end < b.start` means a finished before b began. A read is correct if it
//! returns a value some write made (the record's load, or a logged write), that
//! write had begun before the read ended (nothing from the future), and no other
//! write both finished before the read began and began after that write finished
//! (nothing overwritten before the read started):
//!
//! ```text
//! time ──────────────────────────────────────────────▶
//! w1  [──────]                       read may return w1 or w2:
//! w2        [───────────]            w2 overlaps the read
//! read            [─────────]
//! w3  [─]  [──]                      a w3 that ends before the read starts and
//!                                    starts after w1 ends makes w1 stale
//! ```
//!
//! A read that finds nothing is correct only if no write of the record (the load
//! included) finished before it began.

use std::collections::HashMap;

/// What a logged operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Wrote the record at this version.
    Wrote(u64),
    /// Read the record: the version found, or nothing.
    Read(Option<u64>),
}

/// One logged operation on record `id`, between clock ticks `start` and `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The record.
    pub id: u64,
    /// Tick taken before the operation.
    pub start: u64,
    /// Tick taken after it returned.
    pub end: u64,
    /// What it did.
    pub seen: Seen,
}

/// The version of every loaded record's value; the load finished at tick 0, before
/// every logged operation.
pub const LOAD_VERSION: u64 = 0;

/// Checks `events`; `loaded(id)` says whether the load wrote record `id`. Returns the
/// number of reads checked, or the first violations found (at most ten).
pub fn check(events: &[Event], loaded: impl Fn(u64) -> bool) -> Result<usize, Vec<String>> {
    let mut by_id: HashMap<u64, Vec<&Event>> = HashMap::new();
    for e in events {
        by_id.entry(e.id).or_default().push(e);
    }
    let mut errors = Vec::new();
    let mut reads = 0;
    for (id, ops) in by_id {
        // The record's writes: (start, end) by version, and sorted by end with the
        // largest start among those ending at or before each.
        let mut writes: Vec<(u64, u64, u64)> = Vec::new(); // (end, start, version)
        if loaded(id) {
            writes.push((0, 0, LOAD_VERSION));
        }
        for e in &ops {
            if let Seen::Wrote(v) = e.seen {
                writes.push((e.end, e.start, v));
            }
        }
        writes.sort_unstable();
        let by_version: HashMap<u64, (u64, u64)> =
            writes.iter().map(|&(e, s, v)| (v, (s, e))).collect();
        let mut max_start = Vec::with_capacity(writes.len());
        let mut m = 0;
        for &(_, s, _) in &writes {
            m = m.max(s);
            max_start.push(m);
        }
        // Largest start among writes that ended before `tick`, if any ended.
        let finished_before = |tick: u64| -> Option<u64> {
            let n = writes.partition_point(|&(end, _, _)| end < tick);
            n.checked_sub(1).map(|i| max_start[i])
        };
        for e in &ops {
            let Seen::Read(got) = e.seen else { continue };
            reads += 1;
            let verdict = match got {
                None => match finished_before(e.start) {
                    Some(_) => Err("found nothing, though a write had finished".to_string()),
                    None => Ok(()),
                },
                Some(v) => match by_version.get(&v) {
                    None => Err(format!("found version {v:#x}, which no write made")),
                    Some(&(ws, _)) if ws > e.end => {
                        Err(format!("found version {v:#x}, written after the read"))
                    }
                    Some(&(_, we)) => match finished_before(e.start) {
                        Some(s) if s > we => Err(format!(
                            "found version {v:#x}, overwritten before the read began"
                        )),
                        _ => Ok(()),
                    },
                },
            };
            if let Err(why) = verdict {
                if errors.len() < 10 {
                    errors.push(format!(
                        "record {id}, read at ticks {}..{}: {why}",
                        e.start, e.end
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(reads)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: u64, start: u64, end: u64, v: u64) -> Event {
        Event {
            id,
            start,
            end,
            seen: Seen::Wrote(v),
        }
    }

    fn r(id: u64, start: u64, end: u64, got: Option<u64>) -> Event {
        Event {
            id,
            start,
            end,
            seen: Seen::Read(got),
        }
    }

    #[test]
    fn the_last_write_or_a_concurrent_one_passes() {
        let log = [
            w(1, 1, 2, 10),
            r(1, 3, 4, Some(10)),
            w(1, 5, 9, 11),
            r(1, 6, 7, Some(10)), // w11 still running: old value fine
            r(1, 6, 8, Some(11)), // or the new one
            r(1, 10, 11, Some(11)),
        ];
        assert_eq!(check(&log, |_| true), Ok(4));
    }

    #[test]
    fn stale_future_unknown_and_lost_reads_fail() {
        let stale = [w(1, 1, 2, 10), r(1, 3, 4, Some(LOAD_VERSION))];
        assert!(check(&stale, |_| true).is_err());
        let future = [r(1, 1, 2, Some(10)), w(1, 3, 4, 10)];
        assert!(check(&future, |_| true).is_err());
        let unknown = [r(1, 1, 2, Some(99))];
        assert!(check(&unknown, |_| true).is_err());
        let lost = [r(1, 1, 2, None)];
        assert!(check(&lost, |_| true).is_err());
        // Not loaded and not yet inserted: nothing is right.
        assert_eq!(check(&lost, |_| false), Ok(1));
        // Inserted concurrently: either answer.
        let racing = [w(2, 1, 5, 7), r(2, 2, 3, None), r(2, 2, 4, Some(7))];
        assert_eq!(check(&racing, |_| false), Ok(2));
    }
}
