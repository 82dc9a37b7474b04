//! The store's error type.
//!
//! Every error says what failed and, for anything read from disk, which file. A
//! checksum or length that does not add up is `Corruption`, never a panic.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// A specialised `Result` for store operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a store operation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an operation.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    /// Bytes on disk failed validation (length, checksum, magic, version, ordering).
    #[error("corruption in {}: {reason}", file.display())]
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// What exactly did not validate, e.g. "data block at offset 4096: checksum mismatch".
        reason: String,
    },

    /// The caller passed something the store cannot accept (an invalid option, an empty key).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Another `Db` (in this or another process) holds the directory's lock; in this
    /// process, a closed `Db`'s live snapshots, scans and keyspace handles hold it too.
    #[error(
        "database directory {} is locked by another instance (or by a snapshot, scan or \
         keyspace handle still alive from a closed one)",
        .0.display()
    )]
    Locked(PathBuf),

    /// The store was closed, or a background task failed and the store stopped writing.
    #[error("database is closed: {0}")]
    Closed(String),

    /// A write, flush or compaction on a store opened with `Options::read_only`.
    #[error("database {} is open read-only: writes are refused", .0.display())]
    ReadOnly(PathBuf),
}

impl Error {
    /// Shorthand for a [`Error::Corruption`] in `file`.
    pub fn corruption(file: impl Into<PathBuf>, reason: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.into(),
            reason: reason.into(),
        }
    }
}
