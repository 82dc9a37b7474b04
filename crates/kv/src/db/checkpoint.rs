//! Checkpoints: a consistent, openable copy of a live store, made while writers run
//! (RocksDB's `Checkpoint`).
//!
//! ```text
//!  flush the memtables ─► under `maint`: pin the current version, note its sequence
//!    ─► link (or copy) each of its tables into OUT ─► copy SETTINGS ─► write PROBES
//!    and RELEASED ─► fsync OUT
//!    ─► MANIFEST.tmp, fsync, rename to MANIFEST, fsync OUT   (the commit point)
//! ```
//!
//! **One sequence number.** The memtables are flushed first and no log is copied: a
//! log that a writer is appending to could be copied with a torn last record, which
//! recovery would drop quietly, so the copy's sequence number would be whatever the
//! copy happened to catch. After the flush, the version current under `maint` holds
//! exactly the writes up to the manifest's `last_sequence` (memtables are flushed
//! oldest first, each holds a contiguous run of sequence numbers, and a batch never
//! spans two): the checkpoint is the store at that sequence number, which
//! [`Checkpoint::sequence`] reports. The price is one flush (at most a memtable of
//! writing), what RocksDB pays by default too. Writers are held only while the
//! memtable is frozen, as by any flush.
//!
//! **Pinned tables.** The version is held (an `Arc`) until every table is linked: a
//! compaction that retires one of them marks it obsolete, and its file is deleted only
//! when the last holder lets go, so no table vanishes mid-copy.
//!
//! **Links.** A table is immutable once written, so a hard link shares its bytes with
//! the store at no cost; where the file system cannot link (another device, no links)
//! the bytes are copied and synced ([`FileSystem::link`](crate::fs::FileSystem::link)).
//!
//! **Whole or not at all.** The new manifest (naming exactly the pinned tables, the
//! sequence number, and a log number above every table, so no log is looked for) is
//! written last, as every manifest is: `MANIFEST.tmp`, fsync, rename, fsync of the
//! directory, after the directory holding the tables and SETTINGS was fsynced. A
//! checkpoint without its `MANIFEST` is incomplete, and [`Db::open`](crate::Db::open)
//! refuses a directory that holds tables but no manifest, so a failed checkpoint is
//! never mistaken for a store. On failure the files made so far are deleted (best
//! effort); the source store is only read from, apart from the flush.
//!
//! **Keyspaces.** A store with named keyspaces is copied whole at one sequence number:
//! under the writer lock every keyspace's memtable is frozen at once, so all of them
//! stop at the same write; each keyspace then flushes through its frozen memtable and
//! its version is read under its `maint` (if a newer memtable was flushed first, the
//! copy starts again). Each keyspace goes to `OUT/keyspace-{id:06}/` with its own
//! manifest, then the `KEYSPACES` list, then the root's manifest, last, the commit
//! point.
//!
//! **What was learned.** Under `FilterAllocation::Adaptive` the copy gets the probe
//! statistics as they are at the checkpoint (`PROBES`), so its filters keep being
//! planned where lookups went; under a filter budget it gets the list of tables whose
//! filters are released (`RELEASED`), so it opens within the budget. The learned
//! negatives live in memory only, in the copy as in a reopened store: the workload
//! fills them again.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde::Serialize;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::Linked;
use crate::keyspaces::Registry;
use crate::memtable::Memtable;
use crate::store_dir::write_state;
use crate::types::{KeyspaceId, SeqNo};
use crate::version::Version;

use super::inner::{lock, Inner};

/// What [`Db::checkpoint`](crate::Db::checkpoint) made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Where the copy is.
    pub path: PathBuf,
    /// The copy holds exactly the writes up to this sequence number.
    pub sequence: SeqNo,
    /// Tables hard-linked from the store.
    pub linked: usize,
    /// Tables copied (the file system could not link them).
    pub copied: usize,
    /// Bytes of the tables, linked or copied.
    pub table_bytes: u64,
}

impl Inner {
    pub(super) fn checkpoint(&self, out: &Path) -> Result<Checkpoint> {
        self.check_writable()?;
        let out = checkpoint_target(self, out)?;
        self.flush()?;
        // Under `maint` no flush or compaction installs: the view's version and the
        // sequence number its tables hold are read together.
        let (version, sequence, next_file) = {
            let maint = self.maint_for_caller();
            self.check_bg_error()?;
            (
                self.current().version.clone(),
                maint.last_sequence,
                self.next_file_number.load(Ordering::Relaxed),
            )
        };
        let mut made: Vec<PathBuf> = Vec::new();
        let mut info = Checkpoint {
            path: out.clone(),
            sequence,
            linked: 0,
            copied: 0,
            table_bytes: 0,
        };
        let result = self
            .copy_into(&out, &version, sequence, next_file, &mut made, &mut info)
            .map(|()| info);
        if result.is_err() {
            remove_made(self, &made);
        }
        result
    }

    /// Writes into `out` a store of `version`'s tables (linked or copied), this
    /// keyspace's settings, probe statistics and released filters, and last the
    /// manifest naming them at `sequence` (`next_file`: above every table's number).
    /// Every file made is pushed onto `made`, for the caller to remove on failure.
    fn copy_into(
        &self,
        out: &Path,
        version: &Version,
        sequence: SeqNo,
        next_file: u64,
        made: &mut Vec<PathBuf>,
        info: &mut Checkpoint,
    ) -> Result<()> {
        self.fs.create_dir_all(out)?;
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.fs.sync_dir(parent)?;
        }
        for (_, t) in version.tables() {
            let from = filename::table_path(&self.dir, t.number);
            let to = filename::table_path(out, t.number);
            let how = self.fs.link(&from, &to)?;
            made.push(to);
            match how {
                Linked::HardLink => info.linked += 1,
                Linked::Copied => info.copied += 1,
            }
            info.table_bytes += t.file_size();
        }
        let settings = filename::settings_path(&self.dir);
        if self.fs.exists(&settings) {
            let bytes = self.fs.read_all(&settings)?;
            let to = filename::settings_path(out);
            made.push(to.clone());
            let mut f = self.fs.create(&to)?;
            f.append(&bytes)?;
            f.sync()?;
        }
        // The probe statistics as they stand now, so the copy's adaptive allocation
        // starts from what this store learned rather than blind.
        if let Some((stats, _)) = self.probe_stats() {
            made.push(filename::probes_tmp_path(out));
            made.push(filename::probes_path(out));
            stats.write(self.fs.as_ref(), out)?;
        }
        // Under a filter budget, which of the copied tables have their filters
        // released, so the copy opens within the budget as the store is.
        if self.options.filter_memory_budget.is_some() {
            let live: std::collections::BTreeSet<u64> =
                version.tables().map(|(_, t)| t.number).collect();
            let released: std::collections::BTreeSet<u64> = super::inner::lock(&self.released)
                .intersection(&live)
                .copied()
                .collect();
            if !released.is_empty() {
                made.push(filename::released_tmp_path(out));
                made.push(filename::released_path(out));
                crate::filter_budget::write(self.fs.as_ref(), out, &released)?;
            }
        }
        self.fs.sync_dir(out)?;
        // No log: the number after every table's, and the next file after it.
        made.push(filename::manifest_tmp_path(out));
        made.push(filename::manifest_path(out));
        write_state(&self.fs, out, version, next_file, next_file + 1, sequence)?;
        Ok(())
    }

    /// Flushes every memtable this keyspace had when `frozen` was frozen (that one
    /// included), and returns, read under `maint`, the version holding them and the
    /// highest sequence number its tables hold. Newer memtables stay unflushed while
    /// `maint` is held, so unless one was flushed before this call took it, the
    /// version holds exactly the writes up to the freeze.
    fn flushed_through(&self, frozen: Option<&Arc<Memtable>>) -> Result<(Arc<Version>, SeqNo)> {
        let mut maint = self.maint_for_caller();
        while let Some(frozen) = frozen {
            let waiting = self
                .current()
                .imm
                .iter()
                .any(|(m, _)| Arc::ptr_eq(m, frozen));
            if !waiting || !self.flush_oldest(&mut maint)? {
                break;
            }
        }
        self.check_bg_error()?;
        Ok((self.current().version.clone(), maint.last_sequence))
    }
}

/// `out` as a store directory, refused if it holds anything.
fn checkpoint_target(inner: &Inner, out: &Path) -> Result<PathBuf> {
    let out = crate::store_dir::store_dir(out)?;
    if inner.fs.exists(&out) && !inner.fs.list(&out)?.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "checkpoint target {} exists and is not empty",
            out.display()
        )));
    }
    Ok(out)
}

/// Removes what a failed checkpoint made, newest first: the manifest goes first, so
/// while tables remain, a directory without one is refused by open.
fn remove_made(inner: &Inner, made: &[PathBuf]) {
    for path in made.iter().rev() {
        let _ = inner.fs.remove(path);
    }
}

/// How many times a checkpoint of several keyspaces starts again when a memtable newer
/// than its freeze was flushed before it could read a keyspace's version.
const CHECKPOINT_ATTEMPTS: usize = 10;

/// A checkpoint of a store with named keyspaces (see the module docs): every
/// keyspace's memtable is frozen at one moment, under the writer lock, so all of them
/// stop at the same sequence number; each keyspace then flushes through its frozen
/// memtable and its version is read under `maint`. The named keyspaces' directories
/// and the `KEYSPACES` list are written first, the root's manifest last: the copy
/// opens only once it is whole.
pub(super) fn checkpoint_keyspaces(
    root: &Arc<Inner>,
    named: &[(KeyspaceId, Arc<Inner>)],
    registry: &Registry,
    out: &Path,
) -> Result<Checkpoint> {
    root.check_writable()?;
    let out = checkpoint_target(root, out)?;
    let all: Vec<&Arc<Inner>> = std::iter::once(root)
        .chain(named.iter().map(|(_, k)| k))
        .collect();
    let mut attempt = 0;
    let (versions, sequence) = loop {
        attempt += 1;
        let (frozen, sequence) = {
            let mut w = lock(&root.journal.writer);
            root.check_bg_error()?;
            let mut frozen = Vec::new();
            for k in &all {
                let mem = k.current().mem.clone();
                frozen.push(if mem.is_empty() {
                    None
                } else {
                    k.freeze(&mut w)?;
                    Some(mem)
                });
            }
            (frozen, root.journal.visible_seq())
        };
        let mut versions = Vec::new();
        let mut newer = false;
        for (k, frozen) in all.iter().zip(&frozen) {
            let (version, last) = k.flushed_through(frozen.as_ref())?;
            newer |= last > sequence;
            versions.push(version);
        }
        if !newer {
            break (versions, sequence);
        }
        if attempt >= CHECKPOINT_ATTEMPTS {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "checkpoint: writes kept filling memtables faster than {attempt} \
                     attempts could copy one point in time; try again"
                ),
            )));
        }
    };
    let next_file = root.next_file_number.load(Ordering::Relaxed);
    let mut info = Checkpoint {
        path: out.clone(),
        sequence,
        linked: 0,
        copied: 0,
        table_bytes: 0,
    };
    let mut made: Vec<PathBuf> = Vec::new();
    let result = (|| {
        for ((id, k), version) in named.iter().zip(&versions[1..]) {
            let dir = filename::keyspace_dir(&out, id.get());
            k.copy_into(&dir, version, sequence, next_file, &mut made, &mut info)?;
        }
        root.fs.create_dir_all(&out)?;
        made.push(filename::keyspaces_tmp_path(&out));
        made.push(filename::keyspaces_path(&out));
        crate::keyspaces::write(root.fs.as_ref(), &out, registry)?;
        // The root's manifest last: the commit point.
        root.copy_into(
            &out,
            &versions[0],
            sequence,
            next_file,
            &mut made,
            &mut info,
        )
    })();
    if let Err(e) = result {
        remove_made(root, &made);
        for (id, _) in named {
            let _ = root.fs.remove_dir(&filename::keyspace_dir(&out, id.get()));
        }
        return Err(e);
    }
    Ok(info)
}
