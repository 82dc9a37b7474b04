//! The write path: one writer at a time appends a batch to the log, then applies it
//! to the memtables of the keyspaces it names and publishes its sequence number;
//! before that it makes room in each (backpressure, freezing a full memtable onto a
//! new log).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::stats::{add, bump};
use crate::write_batch::{self, WriteBatch};

use super::inner::{lock, Inner, View, Writer};
use super::journal::Journal;

/// Sets the store's background error if dropped during a panic.
struct StopWritesOnPanic<'a>(&'a Journal);

impl Drop for StopWritesOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .set_bg_error_message("a write panicked; the log's tail is unknown".into());
        }
    }
}

impl Inner {
    /// Writes `batch`: to this keyspace, and to every other keyspace it names (`self`
    /// is whichever handle it was given to).
    pub(super) fn write(&self, batch: WriteBatch) -> Result<()> {
        self.check_writable()?;
        if batch.is_empty() {
            return Ok(());
        }
        // Every argument is checked before the log is touched: a bad write is refused
        // alone and the store goes on taking writes.
        batch.check_limits()?;
        let journal = &self.journal;
        // The other keyspaces the batch writes to (none, in the common case).
        let others = batch
            .keyspaces()
            .filter(|&id| id != self.id)
            .map(|id| journal.keyspace(id))
            .collect::<Result<Vec<_>>>()?;
        let to_self = batch.keyspaces().any(|id| id == self.id);
        let mut w = lock(&journal.writer);
        journal.check_bg_error()?;
        // A drop takes the writer lock: checked under it, no batch lands half in a
        // dropped keyspace.
        for other in &others {
            other.check_not_dropped()?;
        }
        self.check_not_dropped()?;
        // A panic below (a file system's append or sync, say) leaves the log's tail
        // and the sequence numbers unknown: stop taking writes, as an error does.
        let _poison = StopWritesOnPanic(journal);
        if to_self {
            w = self.make_room(w)?;
        }
        for other in &others {
            w = other.make_room(w)?;
        }
        let seq = w.next_seq;
        let n = batch.len() as u64;
        let payload = batch.into_record(seq)?;
        // Checked before it is logged: a payload the log holds always replays.
        write_batch::check(&payload, Path::new("(write batch)"))?;
        // A failed append may leave half a record; appending after it would turn a torn
        // tail into corruption in the middle, so the store stops taking writes.
        let logged = w.wal.add_record(&payload).and_then(|()| {
            if self.options.sync_writes {
                w.wal.sync()
            } else {
                Ok(())
            }
        });
        if let Err(e) = logged {
            if !matches!(e, Error::InvalidArgument(_)) {
                self.set_bg_error(&e);
            }
            return Err(e);
        }
        let view = self.view.load();
        let other_views: Vec<_> = others.iter().map(|o| (o.id, o.view.load())).collect();
        // A small record's values are copied into the writer's value arena and the
        // writer frees the record: a memtable entry then costs one allocation of its
        // own (its skip-list node), and a flush that drops it frees nothing the
        // writer allocates from meanwhile. A large record is shared by its values
        // instead of copied.
        let share = payload.len() > COPY_RECORD_MAX;
        let (owned, shared) = if share {
            (Vec::new(), Bytes::from(payload))
        } else {
            (payload, Bytes::new())
        };
        let record: &[u8] = if share { &shared } else { &owned };
        let values = &mut w.values;
        let mut next = seq;
        // The payload was checked above, and every keyspace it names was found:
        // every operation is applied.
        write_batch::for_each_op(
            record,
            Path::new("(write batch)"),
            |keyspace, kind, key, value| {
                let value = if share {
                    shared.slice(value)
                } else {
                    values.copy(&record[value])
                };
                let mem = if keyspace == self.id {
                    Some(&view.mem)
                } else {
                    other_views
                        .iter()
                        .find(|(id, _)| *id == keyspace)
                        .map(|(_, v)| &v.mem)
                };
                if let Some(mem) = mem {
                    mem.apply_op(next, kind, &record[key], value);
                }
                next += 1;
            },
        )?;
        w.next_seq = seq + n;
        // The whole batch is in the memtables: make it visible at once.
        journal.visible_seq.store(seq + n - 1, Ordering::Release);
        Ok(())
    }

    /// Makes room for a write, applying backpressure (LevelDB's and RocksDB's rules):
    ///
    /// - L0 at `level0_slowdown_writes_trigger` tables: the write first yields up to
    ///   1 ms to compaction (once per write), spreading a stall over many writes;
    /// - memtable full and `max_immutable_memtables` frozen ones waiting for flush, or
    ///   L0 at `level0_stop_writes_trigger`: the writer waits until background work
    ///   makes progress (a condition variable, signalled after every flush and
    ///   compaction), so L0 stays bounded by the stop trigger plus the frozen memtables;
    /// - memtable full otherwise: it is frozen and a fresh one takes the write.
    ///
    /// The L0 triggers apply only while auto compaction runs: with it off nothing
    /// would ever lower L0, and a stop would be forever.
    fn make_room<'a>(&'a self, mut w: MutexGuard<'a, Writer>) -> Result<MutexGuard<'a, Writer>> {
        let mut slowed = false;
        let mut stalled_since = None;
        let result = loop {
            let view = self.current();
            let l0 = if self.options.disable_auto_compaction {
                0
            } else {
                view.version.level(0).len()
            };
            if !slowed && l0 >= self.options.level0_slowdown_writes_trigger {
                slowed = true;
                stalled_since.get_or_insert_with(Instant::now);
                self.schedule();
                w = self
                    .progress
                    .wait_timeout(w, Duration::from_millis(1))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                // The background thread may have failed meanwhile, and the one
                // notification it sent may have ended this wait: waiting again below
                // would be forever, and writing would ignore the error.
                if let Err(e) = self.check_bg_error() {
                    break Err(e);
                }
                continue;
            }
            if view.mem.approximate_size() < self.options.memtable_size {
                break Ok(());
            }
            if view.imm.len() >= self.options.max_immutable_memtables
                || l0 >= self.options.level0_stop_writes_trigger
            {
                stalled_since.get_or_insert_with(Instant::now);
                self.schedule();
                w = self.progress.wait(w).unwrap_or_else(|p| p.into_inner());
                if let Err(e) = self.check_bg_error() {
                    break Err(e);
                }
                continue;
            }
            break self.freeze(&mut w).map(|()| {
                self.schedule();
            });
        };
        if let Some(since) = stalled_since {
            bump(&self.counters.write_stalls);
            add(
                &self.counters.write_stall_micros,
                since.elapsed().as_micros() as u64,
            );
        }
        result.map(|()| w)
    }

    /// Makes the memtable immutable and starts a new one backed by a new WAL.
    /// The old WAL is synced first, so only the newest WAL can ever have a torn tail.
    pub(super) fn freeze(&self, w: &mut Writer) -> Result<()> {
        let _poison = StopWritesOnPanic(&self.journal);
        let number = self.journal.new_log(w)?;
        // Read and replace the view under one lock: with a separate read, a version
        // installed in between by the background thread would be overwritten by the
        // older one, and the next install would drop (and delete) its tables.
        self.update_view(|view| {
            let mut imm = view.imm.clone();
            imm.push((view.mem.clone(), view.mem_wal));
            View {
                mem: Arc::new(Memtable::new()),
                mem_wal: number,
                imm,
                version: view.version.clone(),
            }
        });
        Ok(())
    }
}

/// The largest encoded batch whose values a write copies into the memtable; the
/// values of a larger one share its buffer.
const COPY_RECORD_MAX: usize = 16 << 10;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::db::inner::lock;
    use crate::db::Db;
    use crate::error::Error;
    use crate::options::Options;

    /// A background failure while a writer yields to compaction (L0 at the slowdown
    /// trigger) and will next have to wait for a flush: the writer must wake to the
    /// error, not wait forever. Before the fix, the failure's one notification ended
    /// the writer's 1 ms yield, the writer then waited untimed for progress, and the
    /// background thread, finding the error set, never notified again. The old code
    /// hangs here only if the failure lands within that 1 ms (it did in both of two
    /// runs; a slow wake-up of the background thread would let it pass); the fixed
    /// code returns the error whenever the failure lands.
    #[test]
    fn a_writer_yielding_to_a_failing_compaction_gets_the_error() {
        use crate::fs::fault::{Fault, FaultFileSystem, FaultPlan, OpKind};
        use crate::fs::mem::MemFileSystem;

        let fs = FaultFileSystem::new(Arc::new(MemFileSystem::new()));
        let options = Options {
            file_system: Arc::new(fs.clone()),
            memtable_size: 4096,
            max_immutable_memtables: 1,
            l0_compaction_trigger: 1,
            level0_slowdown_writes_trigger: 1,
            level0_stop_writes_trigger: 1000,
            ..Options::default()
        };
        let db = Arc::new(Db::open("/db", options).unwrap());
        let value = [b'v'; 100];
        let mut n = 0u32;
        let mut put = |db: &Db| {
            n += 1;
            db.put(format!("key{n:06}"), value).unwrap();
        };
        // Hold the background thread off while the stage is set.
        let mut maint = lock(&db.inner.maint);
        while db.inner.current().imm.is_empty() {
            put(&db);
        }
        assert!(db.inner.flush_oldest(&mut maint).unwrap());
        assert_eq!(db.inner.current().version.level(0).len(), 1);
        // L0 is at the slowdown trigger now: every write yields first.
        while db.inner.current().imm.is_empty() {
            put(&db);
        }
        while db.inner.current().mem.approximate_size() < 4096 {
            put(&db);
        }
        // The background work's first new file (a table) will find the disk full.
        fs.set_plan(FaultPlan::nth(1, &[OpKind::Create], Fault::NoSpace));
        lock(&db.inner.signal).pending = false;
        let (done, result) = std::sync::mpsc::channel();
        let writer = Arc::clone(&db);
        std::thread::spawn(move || {
            let _ = done.send(writer.put("late", "write"));
        });
        // The writer has scheduled background work and is in its yield.
        while !lock(&db.inner.signal).pending {
            std::thread::yield_now();
        }
        drop(maint);
        let got = result
            .recv_timeout(Duration::from_secs(60))
            .expect("the writer never woke to the background error");
        assert!(matches!(got, Err(Error::Closed(_))), "{got:?}");
        assert!(
            db.get("late").unwrap().is_none(),
            "a refused write was applied"
        );
    }
}
