//! The list of a store's named keyspaces: the `KEYSPACES` file.
//!
//! A store has a default keyspace (the store as it always was: its tables and manifest
//! in the root directory) and any number of named ones, each a directory of its own
//! (`keyspace-000003/`: tables, manifest, settings) whose writes go to the root's logs,
//! tagged with the keyspace's number (see `write_batch.rs`). This file says which
//! numbers are live and what they are called:
//!
//! ```text
//! frame (coding::frame): magic "BKVKEYSP", version 1, payload, CRC-32
//! payload:  next_id: u32 | count: u32 | count x ( id: u32 | name_len: u16 | name )
//! ```
//!
//! **Never a number twice.** `next_id` only grows: a dropped keyspace's number is not
//! given again, so a log record that names it (written before the drop, replayed after
//! a crash) is skipped, never replayed into a newer keyspace.
//!
//! **The file is the commit point.** A keyspace is made by creating its directory and
//! an empty store in it, then writing a list that names it; it is dropped by writing a
//! list without it, then deleting its directory. Open deletes the files of every
//! `keyspace-*` directory the list does not name, so a crash at any step leaves either
//! the keyspace whole or nothing of it. The file is replaced as the manifest is:
//! `KEYSPACES.tmp`, fsync, rename, fsync of the directory.

use std::path::Path;

use crate::coding::{frame, unframe};
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::types::KeyspaceId;

const MAGIC: &[u8; 8] = b"BKVKEYSP";
const VERSION: u32 = 1;

/// The longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME: usize = 64;

/// The name of the default keyspace.
pub const DEFAULT_KEYSPACE: &str = "default";

/// The named keyspaces of a store, as `KEYSPACES` records them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Registry {
    /// The number the next keyspace made gets (at least 1).
    pub(crate) next_id: u32,
    /// The live keyspaces, in the order they were made.
    pub(crate) entries: Vec<(KeyspaceId, String)>,
}

impl Registry {
    /// The list of a store that has never made a keyspace.
    pub(crate) fn empty() -> Registry {
        Registry {
            next_id: 1,
            entries: Vec::new(),
        }
    }

    /// The number of the keyspace called `name`.
    pub(crate) fn find(&self, name: &str) -> Option<KeyspaceId> {
        self.entries
            .iter()
            .find(|(_, n)| n == name)
            .map(|(id, _)| *id)
    }

    /// Whether `id` is a live named keyspace.
    pub(crate) fn contains(&self, id: KeyspaceId) -> bool {
        self.entries.iter().any(|(i, _)| *i == id)
    }

    fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        payload.extend_from_slice(&self.next_id.to_le_bytes());
        payload.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (id, name) in &self.entries {
            payload.extend_from_slice(&id.get().to_le_bytes());
            payload.extend_from_slice(&(name.len() as u16).to_le_bytes());
            payload.extend_from_slice(name.as_bytes());
        }
        frame(MAGIC, VERSION, &payload)
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Registry, String> {
        let payload = unframe(bytes, MAGIC, VERSION, "keyspace list")?;
        let mut pos = 0;
        let mut take = |n: usize| -> std::result::Result<&[u8], String> {
            let part = payload
                .get(pos..pos + n)
                .ok_or_else(|| format!("ends at byte {pos}, inside an entry"))?;
            pos += n;
            Ok(part)
        };
        let u32_at = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let next_id = u32_at(take(4)?);
        let count = u32_at(take(4)?) as usize;
        // Each entry takes at least 7 bytes: checked before anything is allocated.
        if count > payload.len() / 7 {
            return Err(format!(
                "{count} entries cannot fit in {} bytes",
                payload.len()
            ));
        }
        let mut registry = Registry {
            next_id,
            entries: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let id = u32_at(take(4)?);
            let len_bytes = take(2)?;
            let len = u16::from_le_bytes([len_bytes[0], len_bytes[1]]) as usize;
            let name = std::str::from_utf8(take(len)?)
                .map_err(|_| "a name is not UTF-8".to_string())?
                .to_string();
            check_name(&name).map_err(|e| e.to_string())?;
            if id == 0 || id >= next_id {
                return Err(format!(
                    "keyspace {name:?} has number {id}, not in 1..{next_id}"
                ));
            }
            if registry.contains(KeyspaceId::new(id)) || registry.find(&name).is_some() {
                return Err(format!("keyspace {name:?} (number {id}) is listed twice"));
            }
            registry.entries.push((KeyspaceId::new(id), name));
        }
        if pos != payload.len() {
            return Err(format!(
                "{} bytes after the last entry",
                payload.len() - pos
            ));
        }
        Ok(registry)
    }
}

/// Refuses a name that is not a keyspace name: 1 to [`MAX_KEYSPACE_NAME`] bytes of ASCII
/// letters, digits, `_`, `-` and `.`, not starting with `.`.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_KEYSPACE_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "keyspace name {name:?}: use 1 to {MAX_KEYSPACE_NAME} ASCII letters, digits, \
             '_', '-' or '.', not starting with '.'"
        )))
    }
}

/// The store in `dir`'s keyspace list: empty when the file does not exist (a store
/// that never made a keyspace); a damaged file is `Corruption`, since guessing would
/// lose a keyspace's unflushed writes or resurrect a dropped one.
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Registry> {
    let path = filename::keyspaces_path(dir);
    if !fs.exists(&path) {
        return Ok(Registry::empty());
    }
    let bytes = fs.read_all(&path)?;
    Registry::decode(&bytes).map_err(|why| Error::corruption(&path, why))
}

/// The directory of the keyspace called `name` in the store at `store` (the store's
/// own directory for `"default"`): what `inspect` and `verify` are pointed at to look
/// at one keyspace's tables. Reads the store's `KEYSPACES` file; an unknown name is
/// `InvalidArgument`.
///
/// ```
/// use bloomkv_kv::{keyspace_path, Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let orders = db.keyspace("orders", Options::default())?;
/// assert_eq!(keyspace_path(dir.path(), "orders")?, orders.path());
/// assert_eq!(keyspace_path(dir.path(), "default")?, dir.path());
/// assert!(keyspace_path(dir.path(), "missing").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn keyspace_path(store: impl AsRef<Path>, name: &str) -> Result<std::path::PathBuf> {
    let store = store.as_ref();
    if name == DEFAULT_KEYSPACE {
        return Ok(store.to_path_buf());
    }
    let registry = read(&crate::fs::OsFileSystem, store)?;
    match registry.find(name) {
        Some(id) => Ok(filename::keyspace_dir(store, id.get())),
        None => Err(Error::InvalidArgument(format!(
            "{} has no keyspace called {name:?}",
            store.display()
        ))),
    }
}

/// Writes `dir`'s keyspace list durably (see the module docs).
pub(crate) fn write(fs: &dyn FileSystem, dir: &Path, registry: &Registry) -> Result<()> {
    crate::fs::replace_durably(
        fs,
        &filename::keyspaces_tmp_path(dir),
        &filename::keyspaces_path(dir),
        &registry.encode(),
    )?;
    Ok(())
}

/// Deletes a keyspace directory's files (and its `lost/` folder's), then the directory;
/// best effort beyond the files: a file system that cannot remove directories keeps
/// an empty one, which open ignores.
pub(crate) fn remove_dir_files(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    if !fs.exists(dir) {
        return Ok(());
    }
    for name in fs.list(dir)? {
        let path = dir.join(&name);
        if name == filename::LOST_DIR {
            for inner in fs.list(&path)? {
                fs.remove(&path.join(inner))?;
            }
            let _ = fs.remove_dir(&path);
        } else {
            match fs.remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    if let Some(parent) = dir.parent() {
        let _ = fs.remove_dir(dir);
        fs.sync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Registry {
        Registry {
            next_id: 5,
            entries: vec![
                (KeyspaceId::new(1), "orders".into()),
                (KeyspaceId::new(4), "stock.v2".into()),
            ],
        }
    }

    #[test]
    fn round_trips() {
        let r = sample();
        assert_eq!(Registry::decode(&r.encode()).unwrap(), r);
        let e = Registry::empty();
        assert_eq!(Registry::decode(&e.encode()).unwrap(), e);
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(Registry::decode(&b).is_err(), "bit {i}");
        }
        for cut in 0..bytes.len() {
            assert!(Registry::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// Payloads whose checksum holds but whose content does not: each is refused.
    #[test]
    fn inconsistent_lists_are_refused() {
        let framed = |next_id: u32, entries: &[(u32, &str)]| {
            let r = Registry {
                next_id,
                entries: entries
                    .iter()
                    .map(|(i, n)| (KeyspaceId::new(*i), n.to_string()))
                    .collect(),
            };
            Registry::decode(&r.encode())
        };
        assert!(framed(3, &[(1, "a"), (2, "b")]).is_ok());
        assert!(framed(2, &[(2, "a")]).is_err(), "number not below next_id");
        assert!(
            framed(3, &[(0, "a")]).is_err(),
            "number 0 is the default keyspace"
        );
        assert!(framed(3, &[(1, "a"), (1, "b")]).is_err(), "number twice");
        assert!(framed(3, &[(1, "a"), (2, "a")]).is_err(), "name twice");
        assert!(framed(3, &[(1, "no/slash")]).is_err(), "bad name");
    }

    #[test]
    fn names() {
        for good in ["a", "orders", "Stock_2024-01.v2", &"x".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
