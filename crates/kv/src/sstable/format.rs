//! The limits and constants of the table format that every part of `sstable/` shares,
//! drawn where bytes are concerned: how large an entry and a block may be, and the
//! page that aligned data blocks (format version 5) are laid out against.
//!
//! The builder writes by them; compression bounds what an LZ4 block may unpack to by
//! them, and `verify` holds a table's padding to the same rule the builder wrote it by.
//! They sit below every file that uses them, as in LevelDB's `table/format.h`.

/// The largest key plus value one entry may hold. Keeps every block, and so every
/// restart offset, far below 4 GiB.
pub const MAX_ENTRY_BYTES: usize = 1 << 30;

/// The largest `block_size` honoured; larger values are lowered to it.
pub const MAX_BLOCK_SIZE: usize = 1 << 30;

/// The page aligned data blocks are laid out against: the unit in which an OS caches
/// and reads a file (4 KiB on the platforms the store runs on).
pub const PAGE_SIZE: u64 = 4096;

/// Zero bytes to write at `offset` before a block of `len` bytes so that it touches no
/// more pages than it must: the rest of the page when the block would cross a page
/// boundary that starting on the next one avoids, else none. `verify` holds a version 5
/// table's gaps to the same rule.
pub(crate) fn padding_before(offset: u64, len: u64) -> u64 {
    let into_page = offset % PAGE_SIZE;
    let pages_here = (into_page + len).div_ceil(PAGE_SIZE);
    if into_page != 0 && pages_here > len.div_ceil(PAGE_SIZE) {
        PAGE_SIZE - into_page
    } else {
        0
    }
}
