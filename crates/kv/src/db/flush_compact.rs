//! Flush and compaction, run one at a time under `maint`: each builds the next
//! version off to the side, records it in the manifest, and only then makes it
//! current (`install`) and deletes what it retired.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bloomkv_filter::FilterPolicy;
use bytes::Bytes;

use crate::compaction;
use crate::error::Result;
use crate::filter_budget::{self, choose_releases, Held};
use crate::filter_plan::{self, FilterAllocation};
use crate::memtable::Memtable;
use crate::merge::{MergeIter, Source};
use crate::options::{FilterKind, Options};
use crate::range_del::{successor, Fragments};
use crate::retain::Retain;
use crate::sstable::Table;
use crate::sstable::{Compression, FilterState};
use crate::stats::{add, bump};
use crate::store_dir::{discard_unrecorded, remove_obsolete, write_state};
use crate::table_files::TableFiles;
use crate::types::Entry;
use crate::types::NUM_LEVELS;
use crate::version::{TableHandle, Version};

use super::inner::{lock, Inner, Maint, View};

impl Inner {
    pub(super) fn flush(&self) -> Result<()> {
        self.check_writable()?;
        {
            let mut w = lock(&self.journal.writer);
            self.check_bg_error()?;
            if !self.current().mem.is_empty() {
                self.freeze(&mut w)?;
            }
        }
        let mut maint = self.maint_for_caller();
        while self.flush_oldest(&mut maint)? {}
        Ok(())
    }
    /// Writes the oldest frozen memtable as an L0 table. `false` when none waits.
    pub(super) fn flush_oldest(&self, maint: &mut Maint) -> Result<bool> {
        let flushed = self.write_oldest(maint);
        // The view that held the memtable is freed here, not by a get.
        self.drop_retired();
        flushed
    }

    fn write_oldest(&self, maint: &mut Maint) -> Result<bool> {
        let view = self.current();
        let Some((mem, _)) = view.imm.first().cloned() else {
            return Ok(false);
        };
        let number = self.next_file_number.fetch_add(1, Ordering::Relaxed);
        // Every version a live snapshot sees goes to the table; the newest always does.
        let snapshots = self.journal.snapshots.sequence_numbers();
        let versions = Retain::new(mem.versions().map(Ok), snapshots, false);
        // The memtable's range tombstones go with its entries, whole (L0 tables may
        // overlap, so nothing is clipped).
        let range_dels = mem.range_dels().map(|r| (*r).clone());
        let added = self
            .build_table(number, 0, (&[], mem.len() as u64, 0), versions, |_| {
                range_dels
            })?
            .map(|h| vec![(0, Arc::new(h))])
            .unwrap_or_default();
        add(&self.counters.flush_bytes_written, table_bytes(&added));
        // The current version, not the one the flush began from: building the table
        // may have released filters under the budget (a new version of the same tables).
        let version = self.current().version.apply(&[], added);
        // The oldest WAL still needed backs the next frozen memtable, or the live one.
        let live_wal = view.imm.get(1).map(|(_, w)| *w).unwrap_or(view.mem_wal);
        maint.last_sequence = maint.last_sequence.max(mem.max_seq());
        self.install(maint, version, live_wal, |current| {
            current.imm.iter().skip(1).cloned().collect()
        })?;
        self.notify_progress();
        self.save_probe_stats();
        Ok(true)
    }

    /// Records `version` in the manifest, makes it current, and deletes what it retired.
    fn install(
        &self,
        maint: &Maint,
        version: Version,
        live_wal: u64,
        imm: impl FnOnce(&View) -> Vec<(Arc<Memtable>, u64)>,
    ) -> Result<()> {
        let next = self.next_file_number.load(Ordering::Relaxed);
        if let Err(e) = write_state(
            &self.fs,
            &self.dir,
            &version,
            live_wal,
            next,
            maint.last_sequence,
        ) {
            self.set_bg_error(&e);
            // A writer stalled for this flush or compaction wakes to the error (this
            // may be a caller's thread, whose failure nothing else announces). Taking
            // the writer lock here is safe: `install` runs under `maint` and never
            // under the writer lock, and the lock order is `maint` → writer.
            self.notify_progress();
            // Tables this version adds that no manifest names: delete them now, so a
            // full disk gets their space back.
            let old: HashSet<u64> = self
                .current()
                .version
                .tables()
                .map(|(_, t)| t.number)
                .collect();
            let added: Vec<u64> = version
                .tables()
                .map(|(_, t)| t.number)
                .filter(|n| !old.contains(n))
                .collect();
            discard_unrecorded(&self.fs, &self.dir, &added);
            return Err(e);
        }
        let live: HashSet<u64> = version.tables().map(|(_, t)| t.number).collect();
        self.update_view(|current| {
            // The manifest no longer names these tables: each file goes when its last
            // reader lets go of it (see `table_cache`).
            for (_, t) in current.version.tables() {
                if !live.contains(&t.number) {
                    t.mark_obsolete();
                }
            }
            View {
                mem: current.mem.clone(),
                mem_wal: current.mem_wal,
                imm: imm(current),
                version: Arc::new(version),
            }
        });
        // Leftover temporary files of this keyspace's directory; the logs are the
        // journal's, deleted when no keyspace needs them.
        remove_obsolete(&self.fs, &self.dir, None, 0);
        self.journal.retire_logs(self.id, live_wal);
        Ok(())
    }

    /// Writes table `number` for `level`, with the filter the level's plan calls for
    /// (`incoming`: about how many keys the table will hold).
    fn build_table(
        &self,
        number: u64,
        level: usize,
        (inputs, incoming, pending): (&[u64], u64, u64),
        entries: impl Iterator<Item = Result<Entry>>,
        range_dels: impl FnOnce(Option<&[u8]>) -> Option<Fragments>,
    ) -> Result<Option<TableHandle>> {
        let policy = self.policy_for_level(level, inputs, incoming, pending)?;
        match self.bottommost_compression(level) {
            Some(compression) => {
                let options = Options {
                    compression,
                    ..self.options.clone()
                };
                let files = TableFiles {
                    options: &options,
                    ..self.table_files()
                };
                files.build_with_range_dels(number, &policy, entries, range_dels)
            }
            None => self
                .table_files()
                .build_with_range_dels(number, &policy, entries, range_dels),
        }
    }

    /// The compression a table written to `level` takes instead of the store's own:
    /// `bottommost_compression`, when set, differing, and `level` is bottommost (a
    /// compaction's output below which no level holds a table).
    fn bottommost_compression(&self, level: usize) -> Option<Compression> {
        let bottom = self
            .options
            .bottommost_compression
            .filter(|c| *c != self.options.compression)?;
        let version = self.current().version.clone();
        let below_empty = version
            .levels()
            .get(level + 1..)
            .is_none_or(|deeper| deeper.iter().all(|l| l.is_empty()));
        (level > 0 && below_empty).then_some(bottom)
    }

    /// The filter policy for a new table on `level` (see `filter_plan.rs`): the store's
    /// policy under the uniform allocation, otherwise the plan for the live tree plus
    /// the `incoming` keys. Under `FilterAllocation::Adaptive` the plan weighs levels
    /// by the measured probes (`probe_stats.rs`) and leaves the learned negatives their
    /// share; under `filter_memory_budget` it spends at most the budget on the tree,
    /// and the table gets no more bits than fit beside the live tables' filters and
    /// the `pending` bytes of filters this compaction has written so far.
    fn policy_for_level(
        &self,
        level: usize,
        inputs: &[u64],
        incoming: u64,
        pending: u64,
    ) -> Result<Option<Arc<dyn FilterPolicy>>> {
        let options = &self.options;
        let hybrid = options.filter == FilterKind::Ribbon && options.bloom_before_level > 0;
        if options.filter_allocation == FilterAllocation::Uniform
            && !options.optimize_filters_for_hits
            && !hybrid
            && options.filter_memory_budget.is_none()
        {
            return Ok(self.policy.clone());
        }
        let plan = self.budget_plan(level, inputs, incoming);
        let mut bits = plan.plan.bits_per_key[level];
        if let (Some(budget), Some(b)) = (&plan.budget, bits) {
            let sizes = (inputs, incoming, pending);
            bits = self.fit_budget(&plan, budget, level, sizes, b)?;
        }
        filter_plan::policy_for(&plan.kinds[level], bits)
    }

    /// The plan for the tree a table of `incoming` keys from `inputs` on `level` makes
    /// (see `policy_for_level`), and under a budget what the live filters hold.
    fn budget_plan(&self, level: usize, inputs: &[u64], incoming: u64) -> BudgetPlan {
        let options = &self.options;
        let version = self.current().version.clone();
        let mut loads = filter_plan::loads(&version, options, level, inputs, incoming);
        let kinds = filter_plan::level_kinds(options);
        let uniform_bits: f64 =
            options.bits_per_key * loads.iter().map(|l| l.keys as f64).sum::<f64>();
        let mut memory_bits = None;
        if let Some((stats, share)) = self.probe_stats() {
            for (load, w) in loads.iter_mut().zip(stats.weights()) {
                if let Some(w) = w {
                    load.probes = w;
                }
            }
            memory_bits = Some(uniform_bits * (1.0 - share));
        }
        // Under `Adaptive` its learned negatives count against the budget too.
        let learned = if options.filter_allocation == FilterAllocation::Adaptive {
            self.counters.learned.get().map_or(0, |l| l.stats().bytes)
        } else {
            0
        };
        let budget = options.filter_memory_budget.map(|b| {
            let held = held_filters(&version, inputs);
            // Filters take a little more than their bits per key (cache-line rounding,
            // the policies' own rounding, headers): measured on the live ones, so
            // that the plan is made in the bytes the budget counts.
            let (actual, nominal) = held.iter().fold((0.0, 0.0), |(a, n), h| {
                (a + h.held.bytes as f64, n + h.nominal_bytes)
            });
            let overhead = if nominal > 0.0 {
                (actual / nominal).clamp(1.0, 1.5)
            } else {
                1.0
            };
            Budget {
                bytes: (b as u64).saturating_sub(learned),
                held,
                overhead,
            }
        });
        if let Some(b) = &budget {
            let cap = b.bytes as f64 * 8.0 / b.overhead;
            memory_bits = Some(memory_bits.map_or(cap, |m: f64| m.min(cap)));
        }
        let plan = filter_plan::plan_within(
            options.filter_allocation,
            options.bits_per_key,
            options.optimize_filters_for_hits,
            &kinds,
            &loads,
            memory_bits,
        );
        // Each level's planned share of the budget, in the bytes the budget counts.
        let overhead = budget.as_ref().map_or(1.0, |b| b.overhead);
        let shares: Vec<f64> = loads
            .iter()
            .zip(&plan.bits_per_key)
            .map(|(l, b)| l.keys as f64 * b.unwrap_or(0.0) / 8.0 * overhead)
            .collect();
        BudgetPlan {
            version,
            kinds,
            plan,
            shares,
            budget,
        }
    }

    /// `bits` per key, or fewer (`None`: no filter) so that a table of about as many
    /// keys as this one will hold gets a filter within what the `budget` leaves beside
    /// the live tables' filters (the `inputs` are leaving) and the `pending` bytes.
    /// When it does not fit, filters of other levels holding more than their planned
    /// shares are released first (`filter_budget.rs`).
    fn fit_budget(
        &self,
        plan: &BudgetPlan,
        budget: &Budget,
        level: usize,
        (inputs, incoming, pending): (&[u64], u64, u64),
        bits: f64,
    ) -> Result<Option<f64>> {
        let held: Vec<Held> = budget.held.iter().map(|h| h.held).collect();
        let mut live: u64 = held.iter().map(|h| h.bytes).sum();
        let keys = self.expected_keys(&plan.version, level, inputs, incoming);
        let per_bit = keys as f64 / 8.0 * budget.overhead;
        let want = (bits * per_bit).ceil() as u64 + FILTER_SLACK_BYTES;
        let left = budget.bytes.saturating_sub(live + pending);
        if want > left {
            let chosen = choose_releases(&held, &plan.shares, level, want - left);
            if !chosen.is_empty() {
                self.release_filters(&chosen)?;
                live -= held
                    .iter()
                    .filter(|h| chosen.contains(&h.number))
                    .map(|h| h.bytes)
                    .sum::<u64>();
            }
        }
        let left = budget.bytes.saturating_sub(live + pending);
        // A filter's bits round up to whole cache lines, and its block has a header.
        let fits = left.saturating_sub(FILTER_SLACK_BYTES) as f64 / per_bit;
        let bits = bits.min(fits);
        Ok((bits >= 1.0).then_some(bits))
    }

    /// Under a budget, a live table below L0 to rewrite (a compaction of that table
    /// alone into its own level, which builds it with the plan's filter): first one
    /// on a level holding more than its planned share whose filter has more bits per
    /// key than the plan gives the level (a quarter more, and at least half a bit;
    /// the oldest plans, from when the tree was smaller), so that it shrinks; then one
    /// without a filter (released, or built when the budget had no room) whose level's
    /// plan gives it one that now fits, both in what the live filters leave and in its
    /// level's share. Upper levels first. A table a rewrite wrote (`skip`) is not
    /// rewritten again.
    fn pick_filter_rewrite(&self, skip: &HashSet<u64>) -> Option<compaction::Pick> {
        self.options.filter_memory_budget?;
        let plan = self.budget_plan(0, &[], 0);
        let budget = plan.budget.as_ref()?;
        let live: u64 = budget.held.iter().map(|h| h.held.bytes).sum();
        let left = budget.bytes.saturating_sub(live);
        let level_held = |level: usize| -> u64 {
            budget
                .held
                .iter()
                .filter(|h| h.held.level == level)
                .map(|h| h.held.bytes)
                .sum()
        };
        let pick = |t: &Arc<TableHandle>, level: usize| compaction::Pick {
            inputs: vec![Arc::clone(t)],
            output_level: level,
        };
        let unfiltered = |t: &Arc<TableHandle>| {
            !skip.contains(&t.number)
                && t.table().is_ok_and(|t| {
                    matches!(
                        t.filter_state(),
                        FilterState::Released | FilterState::NotWritten
                    )
                })
        };
        for level in 1..NUM_LEVELS {
            let bits = plan.plan.bits_per_key[level].unwrap_or(0.0);
            // Over its share, or at it with tables the plan gives a filter to waiting
            // for room: the level's densest filter, if well over the plan, shrinks.
            let waiting = bits >= 1.0 && plan.version.level(level).iter().any(unfiltered);
            let over_share = level_held(level) as f64 > plan.shares[level];
            if !over_share && !waiting {
                continue;
            }
            let densest = plan
                .version
                .level(level)
                .iter()
                .filter(|t| !skip.contains(&t.number))
                .filter_map(|t| {
                    let o = t.table().ok()?;
                    o.has_filter().then(|| (t, o.properties().bits_per_key))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((t, built)) = densest {
                let margin = if over_share { 0.25 } else { 0.1 };
                if built > (bits * (1.0 + margin)).max(bits + 0.5) {
                    return Some(pick(t, level));
                }
            }
        }
        for level in 1..NUM_LEVELS {
            let Some(bits) = plan.plan.bits_per_key[level] else {
                continue;
            };
            let held = level_held(level);
            for t in plan.version.level(level) {
                if !unfiltered(t) {
                    continue;
                }
                let want = (bits * t.entries() as f64 / 8.0 * budget.overhead).ceil() as u64
                    + FILTER_SLACK_BYTES;
                if want <= left && (held + want) as f64 <= plan.shares[level] {
                    return Some(pick(t, level));
                }
            }
        }
        None
    }

    /// Lets go of the filters of live tables `numbers` (see `filter_budget.rs`): the
    /// current version's handles on them are replaced by handles on the same tables
    /// without filters, and the `RELEASED` file records them (pruned to live tables).
    /// Runs under `maint`, so the version does not change meanwhile.
    fn release_filters(&self, numbers: &[u64]) -> Result<()> {
        let current = self.current();
        let mut replaced = Vec::new();
        for (level, t) in current.version.tables() {
            if numbers.contains(&t.number) {
                replaced.push((level, Arc::new(t.without_filter()?)));
            }
        }
        let numbers: Vec<u64> = replaced.iter().map(|(_, h)| h.number).collect();
        self.update_view(|current| View {
            mem: current.mem.clone(),
            mem_wal: current.mem_wal,
            imm: current.imm.clone(),
            version: Arc::new(current.version.apply(&numbers, replaced)),
        });
        add(&self.counters.filters_released, numbers.len() as u64);
        if self.options.read_only {
            return Ok(());
        }
        let live: HashSet<u64> = self
            .current()
            .version
            .tables()
            .map(|(_, t)| t.number)
            .collect();
        let mut released = lock(&self.released);
        released.extend(numbers);
        released.retain(|n| live.contains(n));
        // Not written: the next open loads those filters, and the next table built
        // releases again what the budget needs.
        let _ = filter_budget::write(self.fs.as_ref(), &self.dir, &released);
        Ok(())
    }

    /// About how many keys a table written to `level` from `inputs` will hold: a
    /// flush writes `incoming` keys; a compaction's output stops near the target size
    /// (measured in entries at the inputs' average size, with a margin).
    fn expected_keys(&self, version: &Version, level: usize, inputs: &[u64], incoming: u64) -> u64 {
        if level == 0 || inputs.is_empty() {
            incoming
        } else {
            let (bytes, entries) = version
                .tables()
                .filter(|(_, t)| inputs.contains(&t.number))
                .fold((0u64, 0u64), |(b, e), (_, t)| {
                    (b + t.record.data_size, e + t.record.entries)
                });
            let per_table = if bytes == 0 {
                incoming
            } else {
                (1.25 * self.options.target_file_size as f64 * entries as f64 / bytes as f64) as u64
                    + 16
            };
            incoming.min(per_table)
        }
        .max(1)
    }

    /// Merges `inputs` into tables on `output_level`, splitting at the target size.
    pub(super) fn compact(
        &self,
        maint: &mut Maint,
        inputs: Vec<Arc<TableHandle>>,
        output_level: usize,
    ) -> Result<()> {
        let merged = self.merge_tables(maint, inputs, output_level);
        // The view that held the replaced tables is freed here, not by a get.
        self.drop_retired();
        merged
    }

    fn merge_tables(
        &self,
        maint: &mut Maint,
        inputs: Vec<Arc<TableHandle>>,
        output_level: usize,
    ) -> Result<()> {
        let view = self.current();
        let version = &view.version;
        // A tombstone may go only when no deeper level could hold an older value.
        let drop_tombstones = version.levels()[output_level + 1..]
            .iter()
            .all(|l| l.is_empty());
        let sources = inputs
            .iter()
            .map(|h| Ok(Box::new(h.table()?.iter_from(Bound::Unbounded)) as Source))
            .collect::<Result<Vec<Source>>>()?;
        // Read after the inputs were chosen: a snapshot taken later sees at least
        // every write the inputs hold, so it needs only their newest versions.
        let snapshots = self.journal.snapshots.sequence_numbers();
        // The inputs' range tombstones: they drop the versions they hide from every
        // reader, and go on into the outputs, except at the bottom those no snapshot
        // is older than (every reader sees them, and what they hid is gone).
        let input_dels: Vec<Table> = inputs
            .iter()
            .map(|h| h.table().cloned())
            .collect::<Result<Vec<Table>>>()?
            .into_iter()
            .filter(|t| t.range_dels().is_some())
            .collect();
        let range_dels = (!input_dels.is_empty())
            .then(|| Fragments::merge(input_dels.iter().filter_map(|t| t.range_dels())));
        let out_dels = range_dels.as_ref().map(|r| {
            if drop_tombstones {
                r.retain_seqs(|t| snapshots.first().is_some_and(|&oldest| oldest < t))
            } else {
                r.clone()
            }
        });
        let mut merged = Retain::new(MergeIter::new(sources), snapshots, drop_tombstones)
            .with_range_dels(range_dels)
            .peekable();
        // Keys joining the output level (its own inputs are already counted there).
        let incoming: u64 = inputs.iter().map(|h| h.entries()).sum();
        let removed: Vec<u64> = inputs.iter().map(|h| h.number).collect();
        let mut added: Vec<(usize, Arc<TableHandle>)> = Vec::new();
        let written = self.write_outputs(
            maint,
            &mut merged,
            output_level,
            (&removed, incoming),
            out_dels.filter(|d| !d.is_empty()),
            &mut added,
        );
        if !matches!(written, Ok(true)) {
            // An error, or a closing store: the inputs stay live, and the outputs so
            // far are in no manifest, so their files go with their last handle (here)
            // rather than wait in the directory for the next open to set them aside.
            for (_, h) in &added {
                h.mark_obsolete();
            }
            return written.map(|_| ());
        }
        // The edit applies to the current version, which may hold tables flushed
        // during the merge, and the oldest WAL still needed is read now: a flush may
        // have retired one since the merge began, and the manifest must never name an
        // older log again.
        bump(&self.counters.compactions);
        add(
            &self.counters.compaction_bytes_read,
            inputs.iter().map(|h| h.file_size()).sum(),
        );
        add(&self.counters.compaction_bytes_written, table_bytes(&added));
        let current = self.current();
        let next = current.version.apply(&removed, added);
        self.install(maint, next, current.mem_wal_min(), |current| {
            current.imm.clone()
        })?;
        self.notify_progress();
        self.save_probe_stats();
        Ok(())
    }

    /// Writes the merge into tables on `output_level`, split at the target size,
    /// pushing each onto `added`; `Ok(false)` if the store began closing first.
    fn write_outputs(
        &self,
        maint: &mut Maint,
        merged: &mut std::iter::Peekable<impl Iterator<Item = Result<Entry>>>,
        output_level: usize,
        (removed, incoming): (&[u64], u64),
        range_dels: Option<Fragments>,
        added: &mut Vec<(usize, Arc<TableHandle>)>,
    ) -> Result<bool> {
        // Each output carries the tombstone pieces of its own key range, so that the
        // outputs' ranges stay disjoint: a table ending at key `k` takes the pieces
        // below `k\0` (`largest` = `k`), the next one those from `k\0` on, and the last
        // one everything after. Output of tombstones alone (every entry they covered
        // gone) is one table.
        let mut lo: Option<Bytes> = None;
        let mut first = true;
        while merged.peek().is_some() || (first && range_dels.is_some()) {
            first = false;
            // A long compaction must not hold writers up: a memtable frozen meanwhile
            // is flushed between two output tables. Its L0 table is newer than every
            // input and is not one, so the merge below is unaffected.
            while self.flush_oldest(maint)? {}
            // Nor a closing store: its background work is dropped between two output
            // tables.
            if self.closing() {
                return Ok(false);
            }
            let number = self.next_file_number.fetch_add(1, Ordering::Relaxed);
            let target = self.options.target_file_size;
            let exhausted = std::cell::Cell::new(false);
            let chunk = ChunkUntil {
                inner: merged,
                written: 0,
                target,
                last_key: None,
                exhausted: &exhausted,
            };
            // Filter bytes this compaction's outputs hold so far (for the budget).
            let pending: u64 = added
                .iter()
                .map(|(_, h)| h.table().map_or(0, |t| t.filter_memory_bytes() as u64))
                .sum();
            let sizes = (removed, incoming, pending);
            let mut next_lo = None;
            let pieces = |last: Option<&[u8]>| {
                let dels = range_dels.as_ref()?;
                let hi = match last {
                    Some(k) if !exhausted.get() => Some(successor(k)),
                    _ => None,
                };
                let clipped = dels.clip(lo.as_deref(), hi.as_deref());
                next_lo = hi;
                Some(clipped)
            };
            let built = self.build_table(number, output_level, sizes, chunk, pieces)?;
            lo = next_lo;
            if let Some(h) = built {
                added.push((output_level, Arc::new(h)));
            }
        }
        Ok(true)
    }

    pub(super) fn compact_all(&self, maint: &mut Maint) -> Result<()> {
        let version = self.current().version.clone();
        let inputs: Vec<Arc<TableHandle>> = version.tables().map(|(_, t)| t.clone()).collect();
        if inputs.is_empty() {
            return Ok(());
        }
        let output_level = match version.deepest_nonempty_level() {
            // Sized from the bottom up, a tree whose data is all in L0 has its base on
            // the last level: any level above would be over its budget of nothing, and
            // the data would move down again one level at a time.
            0 if self.options.dynamic_level_bytes => NUM_LEVELS - 1,
            deepest => deepest.max(1),
        };
        self.compact(maint, inputs, output_level)
    }

    /// The most urgent size-triggered compaction, if any (see `compaction.rs`).
    pub(super) fn pick_compaction(&self, maint: &mut Maint) -> Option<compaction::Pick> {
        let version = self.current().version.clone();
        // A table a filter rewrite wrote is not rewritten again (the plan may have
        // moved between the pick and the build): no rewrite repeats itself.
        if let Some(first) = maint.rewrite_outputs.take() {
            let live: HashSet<u64> = version.tables().map(|(_, t)| t.number).collect();
            maint.rewritten.retain(|n| live.contains(n));
            maint
                .rewritten
                .extend(live.iter().filter(|&&n| n >= first).copied());
        }
        if let Some(pick) = compaction::pick(&version, &self.options, &mut maint.compact_pointer) {
            return Some(pick);
        }
        let pick = self.pick_filter_rewrite(&maint.rewritten)?;
        maint.rewrite_outputs = Some(self.next_file_number.load(Ordering::Relaxed));
        Some(pick)
    }
}

/// What `budget_plan` found: the version it planned, each level's filter kind, the
/// plan, each level's share of the budget in bytes, and the budget (`None`: none).
struct BudgetPlan {
    version: Arc<Version>,
    kinds: Vec<FilterKind>,
    plan: filter_plan::FilterPlan,
    shares: Vec<f64>,
    budget: Option<Budget>,
}

/// The budget as a plan spends it: bytes left for filters (learned negatives taken
/// off), the live filters, and how much more than their nominal bits they take.
struct Budget {
    bytes: u64,
    held: Vec<HeldFilter>,
    overhead: f64,
}

/// A live filter and its nominal bytes (bits per key it was built with × keys / 8).
struct HeldFilter {
    held: Held,
    nominal_bytes: f64,
}

/// The live tables' filters, `inputs` left out (they are leaving). Counting opens
/// every live table once (its filter is what it counts).
fn held_filters(version: &Version, inputs: &[u64]) -> Vec<HeldFilter> {
    version
        .tables()
        .filter(|(_, t)| !inputs.contains(&t.number))
        .map(|(l, t)| {
            let (bytes, nominal_bytes) = t.table().map_or((0, 0.0), |t| {
                let bytes = t.filter_memory_bytes() as u64;
                let nominal = if bytes > 0 {
                    t.properties().bits_per_key * t.properties().entries as f64 / 8.0
                } else {
                    0.0
                };
                (bytes, nominal)
            });
            HeldFilter {
                held: Held {
                    number: t.number,
                    level: l,
                    bytes,
                    keys: t.entries(),
                },
                nominal_bytes,
            }
        })
        .collect()
}

/// Bytes a filter may take beyond `bits per key × keys / 8`: Bloom filters round up
/// to whole 64-byte cache lines, and every block has a small header and trailer.
const FILTER_SLACK_BYTES: u64 = 96;

/// Passes entries through until the table being written reaches its target size, and
/// then to the end of the current key: a key's versions never straddle two tables, so
/// tables on one level keep disjoint key ranges.
struct ChunkUntil<'a, I: Iterator<Item = Result<Entry>>> {
    inner: &'a mut std::iter::Peekable<I>,
    written: u64,
    target: u64,
    last_key: Option<Bytes>,
    /// Set when the merge has nothing more: this table is the last.
    exhausted: &'a std::cell::Cell<bool>,
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for ChunkUntil<'_, I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.inner.peek().is_none() {
            self.exhausted.set(true);
            return None;
        }
        if self.written >= self.target {
            let same_key = match (self.inner.peek(), &self.last_key) {
                (Some(Ok(next)), Some(last)) => next.key == *last,
                _ => false,
            };
            if !same_key {
                return None;
            }
        }
        let item = self.inner.next()?;
        if let Ok(e) = &item {
            self.written += (e.key.len() + e.value.len() + 16) as u64;
            self.last_key = Some(e.key.clone());
        }
        Some(item)
    }
}

/// Bytes of the tables a flush or compaction added.
fn table_bytes(added: &[(usize, Arc<TableHandle>)]) -> u64 {
    added.iter().map(|(_, h)| h.file_size()).sum()
}
