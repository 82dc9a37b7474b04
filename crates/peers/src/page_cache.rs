//! Best-effort eviction of a peer's files from the OS page cache (`--cold`).
//!
//! Peers do not offer a hook for it, so this walks the store's directory and asks the
//! OS (`posix_fadvise` DONTNEED, through bloomkv's file layer) to drop every file's
//! cached pages. A peer's own block cache is not touched.

use std::path::Path;

use bloomkv::kv::fs::{FileSystem, OsFileSystem};

/// Drops every file under `dir` from the page cache; errors are ignored (best effort).
pub fn drop_dir(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => drop_dir(&path),
            Ok(t) if t.is_file() => {
                if let Ok(file) = OsFileSystem.open_random(&path) {
                    let _ = file.drop_cache();
                }
            }
            _ => {}
        }
    }
}
