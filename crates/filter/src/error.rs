//! Errors of the filter crate.
//!
//! Two kinds only: the caller asked for something impossible (`InvalidArgument`), or
//! bytes handed to a decoder are not a filter we wrote (`Corrupt`). Both carry a
//! human-readable reason; neither is ever a panic.

use thiserror::Error;

/// What went wrong building, sizing or decoding a filter.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FilterError {
    /// A parameter is out of its domain (zero items, a rate outside (0, 1), NaN, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Serialized bytes failed validation: wrong length, checksum, version or sizes.
    #[error("corrupt filter: {0}")]
    Corrupt(String),
}
