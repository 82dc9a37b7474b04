//! The read path: a point lookup (`get`, a snapshot's `get_at`) and the start of a
//! scan, both against one loaded view and one sequence number.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bloomkv_filter::KeyHash;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::memtable::READ_LATEST;
use crate::prefix::prefix_successor;
use crate::range_del::Fragments;
use crate::scan::ScanIter;
use crate::sstable::{BatchKey, BatchTally, Table};
use crate::stats::{add, bump, ReadTally};
use crate::types::Hit;
use crate::types::{SeqNo, MAX_KEY_LEN};

use super::inner::{Inner, View};

impl Inner {
    /// The last sequence number whose batch is wholly visible.
    pub(super) fn visible_seq(&self) -> SeqNo {
        self.journal.visible_seq.load(Ordering::Acquire)
    }

    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        // The view first, then the sequence number: every table in the view was
        // flushed from writes at or below it, so memtables and tables agree on one
        // point in time, and the tables' newest version is the answer: no walk down
        // older versions (READ_LATEST). A guard, not a clone: nothing shared is written.
        let view = self.view.load();
        let read_seq = self.journal.visible_seq.load(Ordering::Acquire);
        self.read(&view, key, read_seq, READ_LATEST)
    }

    /// A snapshot's `get`: the current memtables and tables read as of `read_seq`.
    pub(super) fn get_at(&self, key: &[u8], read_seq: SeqNo) -> Result<Option<Bytes>> {
        let view = self.view.load();
        self.read(&view, key, read_seq, read_seq)
    }

    /// `get` for many keys against ONE view and ONE sequence number, so the batch sees
    /// the store at a single point in time: a write batch committed meanwhile is in all
    /// of the answers or in none. `read_seq` is a snapshot's number (`None`: now).
    /// Every key's length is checked before any lookup, so an argument error does no
    /// work. Answers come in the order asked.
    ///
    /// ```text
    ///  keys ─► memtables, each key ─► answered ones out        (memtable_hits)
    ///       ─► hash each once
    ///       ─► Version::multi_get: L0 newest first, then by level
    ///            filter each key's tables (lines prefetched ahead)  (filter_*)
    ///            group survivors by block; missing blocks read together
    ///            one search per key in its block; found keys leave the batch
    ///       ─► answers back in the order asked
    /// ```
    pub(super) fn multi_get_at<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
        read_seq: Option<SeqNo>,
    ) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        if let Some(key) = keys
            .iter()
            .map(AsRef::as_ref)
            .find(|k| k.len() > MAX_KEY_LEN)
        {
            return Err(Error::InvalidArgument(format!(
                "multi_get: key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
                key.len()
            )));
        }
        // As in `get`: the view first, then the number (see there).
        let view = self.view.load();
        let (mem_seq, table_seq) = match read_seq {
            Some(seq) => (seq, seq),
            None => (
                self.journal.visible_seq.load(Ordering::Acquire),
                READ_LATEST,
            ),
        };
        let n = keys.len() as u64;
        let counters = self.counters.local();
        bump(&counters.multi_gets);
        add(&counters.multi_get_keys, n);
        add(&counters.gets, n);

        // The memtables answer what they hold; the rest go to the tables, hashed once.
        let mut answers: Vec<Option<Bytes>> = vec![None; keys.len()];
        let mut batch: Vec<BatchKey> = Vec::with_capacity(keys.len());
        let mut slots: Vec<u32> = Vec::with_capacity(keys.len());
        let mut memtable_hits = 0;
        for (slot, key) in keys.iter().enumerate() {
            let key = key.as_ref();
            let in_memory = view.mem.hit_at(key, mem_seq).or_else(|| {
                view.imm
                    .iter()
                    .rev()
                    .find_map(|(mem, _)| mem.hit_at(key, mem_seq))
            });
            match in_memory {
                Some(hit) => {
                    memtable_hits += 1;
                    answers[slot] = hit.live_value();
                }
                None => {
                    batch.push(BatchKey {
                        key,
                        hash: KeyHash::of(key),
                    });
                    slots.push(slot as u32);
                }
            }
        }
        add(&counters.memtable_hits, memtable_hits);
        if batch.is_empty() {
            return Ok(answers);
        }
        let mut found: Vec<Option<Hit>> = vec![None; batch.len()];
        let mut tally = ReadTally::default();
        let mut batch_tally = BatchTally::default();
        let pending = (0..batch.len() as u32).collect();
        let result = view.version.multi_get(
            &batch,
            pending,
            table_seq,
            &mut tally,
            &mut batch_tally,
            &mut found,
        );
        // Counted whether or not the batch finished: what it did, it did.
        self.counters.add_tally(&tally);
        let counters = self.counters.local();
        add(&counters.multi_get_shared_blocks, batch_tally.shared_blocks);
        add(&counters.multi_get_lookups_saved, batch_tally.lookups_saved);
        add(
            &counters.multi_get_overlapped_reads,
            batch_tally.overlapped_reads,
        );
        result?;
        for (hit, slot) in found.into_iter().zip(slots) {
            answers[slot as usize] = hit.and_then(Hit::live_value);
        }
        Ok(answers)
    }

    /// One lookup in `view`: memtables at `mem_seq`, then the tables at `table_seq`.
    fn read(
        &self,
        view: &View,
        key: &[u8],
        mem_seq: SeqNo,
        table_seq: SeqNo,
    ) -> Result<Option<Bytes>> {
        bump(&self.counters.local().gets);
        let in_memory = view.mem.hit_at(key, mem_seq).or_else(|| {
            view.imm
                .iter()
                .rev()
                .find_map(|(mem, _)| mem.hit_at(key, mem_seq))
        });
        if let Some(hit) = in_memory {
            bump(&self.counters.local().memtable_hits);
            return Ok(hit.live_value());
        }
        // Hash once; every table's filter is probed with the same hash.
        let hash = KeyHash::of(key);
        let mut tally = ReadTally::default();
        let found = view.version.get(key, hash, table_seq, &mut tally);
        self.counters.add_tally(&tally);
        Ok(found?.and_then(Hit::live_value))
    }

    /// A scan of `start..end` as of a snapshot's `read_seq`, or as of now for `None`.
    /// `prefix`: every key in the range has this prefix of the store's extractor, so
    /// tables whose filter rules it out are left out. Without one, a range whose two
    /// bounds share a prefix gets the same.
    pub(super) fn scan_at(
        self: &Arc<Self>,
        start: Bound<Bytes>,
        end: Bound<Bytes>,
        read_seq: Option<SeqNo>,
        prefix: Option<&[u8]>,
    ) -> ScanIter {
        // The view first, then "now", as `get` does. A snapshot's number is registered,
        // so every flush and compaction since kept the versions it sees, and any later
        // view serves it. An unregistered number read before the view is not safe: a
        // compaction finishing in between keeps only the newest version of each key,
        // which may be newer than that number, and the scan would then fall through to
        // an older version in another table and go back in time. Read after the view,
        // the number is at least every version the view's tables hold, so whatever a
        // compaction dropped was shadowed by a version the scan sees.
        let view = self.current();
        #[cfg(test)]
        tests::between_scan_loads();
        let read_seq = read_seq.unwrap_or_else(|| self.visible_seq());
        let extractor = self.options.prefix_extractor.as_deref();
        let prefix = prefix.or_else(|| match (extractor, &start, &end) {
            (
                Some(x),
                Bound::Included(s) | Bound::Excluded(s),
                Bound::Included(e) | Bound::Excluded(e),
            ) => x.prefix_of(s).filter(|p| x.prefix_of(e) == Some(*p)),
            _ => None,
        });
        let prefix_probe = extractor
            .zip(prefix)
            .map(|(x, p)| (x.name(), KeyHash::of(p)));
        let mems = std::iter::once(&view.mem)
            .chain(view.imm.iter().map(|(m, _)| m))
            .cloned()
            .collect();
        // The tables in runs: each L0 table alone, each deeper level's tables together
        // (disjoint, in key order), so the scan opens a level's next table only once
        // it has walked past the one before.
        let mut runs: Vec<Vec<Table>> = Vec::new();
        let mut run_level = None;
        // A table opened for the first time here may fail to open: the scan then
        // yields that error as its first item.
        let mut failed = None;
        let mut range_dels: Vec<Arc<Fragments>> = std::iter::once(&view.mem)
            .chain(view.imm.iter().map(|(m, _)| m))
            .filter_map(|m| m.range_dels())
            .collect();
        let mut table_dels: Vec<Table> = Vec::new();
        for (level, h) in view.version.tables() {
            if !range_overlaps(&start, &end, h.smallest(), h.largest()) {
                continue;
            }
            let table = match h.table() {
                Ok(t) => t,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            if table.range_dels().is_some() {
                table_dels.push(table.clone());
            }
            let maybe = match prefix_probe {
                Some((name, hash)) => table.may_contain_prefix(name, hash),
                None => true,
            };
            if maybe && table.may_contain_range(as_slice(&start), as_slice(&end)) {
                match runs.last_mut() {
                    Some(run) if level > 0 && run_level == Some(level) => run.push(table.clone()),
                    _ => runs.push(vec![table.clone()]),
                }
                run_level = Some(level);
            }
        }
        let range_dels = if range_dels.is_empty() && table_dels.is_empty() {
            None
        } else if range_dels.len() == 1 && table_dels.is_empty() {
            range_dels.pop().map(|r| (*r).clone())
        } else {
            let sets = range_dels
                .iter()
                .map(|r| &**r)
                .chain(table_dels.iter().filter_map(|t| t.range_dels()));
            Some(Fragments::merge(sets))
        };
        ScanIter::new(self.clone(), mems, runs, read_seq, start, end)
            .with_range_dels(range_dels)
            .failing(failed)
    }

    /// The keys starting with `prefix`, as of `read_seq` (see [`Inner::scan_at`]).
    pub(super) fn scan_prefix_at(
        self: &Arc<Self>,
        prefix: &[u8],
        read_seq: Option<SeqNo>,
    ) -> ScanIter {
        let start = Bound::Included(Bytes::copy_from_slice(prefix));
        let end = match prefix_successor(prefix) {
            Some(e) => Bound::Excluded(Bytes::from(e)),
            None => Bound::Unbounded,
        };
        let extractor = self.options.prefix_extractor.as_deref();
        // Only where the extractor promises that every key starting with `prefix` has
        // the prefix it extracts from `prefix` (a fixed-length one at least as long):
        // the extractor's contract alone does not, and asking the filter about a
        // shorter prefix than the keys' would skip tables holding them.
        let filter_prefix = extractor
            .filter(|x| x.covers_extensions(prefix))
            .and_then(|x| x.prefix_of(prefix));
        self.scan_at(start, end, read_seq, filter_prefix)
    }
}

/// A bound over owned bytes as a bound over a slice.
fn as_slice(bound: &Bound<Bytes>) -> Bound<&[u8]> {
    bound.as_ref().map(|k| &k[..])
}

fn range_overlaps(
    start: &Bound<Bytes>,
    end: &Bound<Bytes>,
    smallest: &[u8],
    largest: &[u8],
) -> bool {
    let after_start = match start {
        Bound::Included(s) => largest >= &s[..],
        Bound::Excluded(s) => largest > &s[..],
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => smallest <= &e[..],
        Bound::Excluded(e) => smallest < &e[..],
        Bound::Unbounded => true,
    };
    after_start && before_end
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::db::Db;
    use crate::options::Options;

    thread_local! {
        /// What a test lets happen between a scan's two loads, once.
        static PAUSE: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// Runs what a test queued for the gap between a scan's view and its sequence
    /// number (`Inner::scan_at`), as a scan thread descheduled there would let it.
    pub(super) fn between_scan_loads() {
        if let Some(f) = PAUSE.with(|p| p.borrow_mut().take()) {
            f();
        }
    }

    /// The value a get returns is a slice of the data block it was found in, not a
    /// copy (issue: "no copy on a hit"): its bytes lie inside the cached block's
    /// buffer. It stays right after the block is pushed out of the cache, and after the
    /// store is gone. A value shorter than `PIN_MIN_VALUE` is copied instead.
    #[test]
    fn a_value_is_a_slice_of_its_cached_block_and_outlives_the_block_in_the_cache() {
        use crate::sstable::PIN_MIN_VALUE;
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            disable_auto_compaction: true,
            block_cache_size: 64 << 10,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        let key = |i: u32| format!("key{i:05}");
        let value = |i: u32| format!("{i:05}|").repeat(200).into_bytes(); // 1,200 bytes
        for i in 0..2_000 {
            db.put(key(i), value(i)).unwrap();
        }
        db.put("short", "tiny").unwrap();
        db.flush().unwrap();
        for (k, pinned) in [(key(7), true), ("short".to_string(), false)] {
            let got = db.get(&k).unwrap().expect("written");
            assert_eq!(got.len() >= PIN_MIN_VALUE, pinned);
            // The block the get used, as the cache holds it now.
            let view = db.inner.view.load();
            let table = view.version.level(0)[0].table().unwrap();
            let t = &*table.inner;
            let handle = t.index.handle(t.index.find(k.as_bytes())).unwrap();
            let hits = db.stats().block_cache_hits;
            let block = t.file.read_data_block(handle).unwrap();
            assert_eq!(
                db.stats().block_cache_hits,
                hits + 1,
                "not the cached block"
            );
            let start = block.bytes(0..0).as_ptr() as usize;
            let inside = (start..start + block.memory_bytes()).contains(&(got.as_ptr() as usize));
            assert_eq!(inside, pinned, "{k}: value inside the block's buffer");
        }
        let held = db.get(key(7)).unwrap().expect("written");
        // Push the block out: other blocks, each asked for several times (the cache
        // admits a block on its second miss and keeps what is hit again), through a
        // 64 KiB cache.
        for i in (100..2_000).step_by(3) {
            for round in 0..3 {
                assert_eq!(
                    db.get(key(i)).unwrap().as_deref(),
                    Some(&value(i)[..]),
                    "{round}"
                );
            }
        }
        let misses = db.stats().block_cache_misses;
        assert!(db.get(key(7)).unwrap().is_some());
        assert_eq!(
            db.stats().block_cache_misses,
            misses + 1,
            "the block was evicted"
        );
        assert_eq!(held, value(7));
        drop(db);
        assert_eq!(held, value(7), "the value outlives the store");
    }

    /// A scan must not go back in time however long it is held up between its two
    /// loads. In the gap a newer version is written, flushed and compacted with the
    /// older one away (no snapshot asks for it). Reading the number after the view,
    /// the scan sees the version its view holds or the newer one; reading it before
    /// (as `Db::scan` once did), it would find only a version newer than its number
    /// and return nothing: the failure `tests/fresh_reads.rs` caught under load.
    #[test]
    fn a_compaction_between_a_scans_two_loads_does_not_send_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            disable_auto_compaction: true,
            ..Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), options).unwrap());
        db.put("k", "v0").unwrap();
        db.flush().unwrap();
        for (round, prefix) in [(1, false), (2, true)] {
            let before = format!("v{}", round - 1);
            let after = format!("v{round}");
            let writer = Arc::clone(&db);
            let newer = after.clone();
            PAUSE.with(|p| {
                *p.borrow_mut() = Some(Box::new(move || {
                    writer.put("k", newer).unwrap();
                    writer.flush().unwrap();
                    writer.compact().unwrap();
                }))
            });
            let scan = if prefix {
                db.scan_prefix("k")
            } else {
                db.scan::<&str, _>(..)
            };
            let seen: Vec<Bytes> = scan.map(|kv| kv.unwrap().1).collect();
            assert!(
                PAUSE.with(|p| p.borrow().is_none()),
                "the pause did not run"
            );
            assert!(
                seen == [before.as_str()] || seen == [after.as_str()],
                "round {round}: the scan saw {seen:?}"
            );
        }
    }
}
