//! Reading several blocks of one file with one io_uring submission (the `io-uring`
//! feature, Linux only): what a batch of lookups uses for the blocks a table lacks in
//! the block cache, so that their device reads are all in flight at once.
//!
//! ```text
//!  thread's ring (64 entries, made at its first batch; refused ─► never asked again)
//!  reads (offset, len) ─► one Read entry each ─► submit, wait for all ─► buffers
//! ```
//!
//! These reads are not read syscalls: the kernel's `syscr` and `rchar` do not see
//! them (a probe here: 32 reads of 4 KiB moved both by 0). The store therefore counts
//! each one twice over — in `data_block_reads`, as every table read, and in
//! `uring_reads` — and the kernel's `syscr` is checked against the difference.
//!
//! Buffers belong to this module until their reads complete: each is allocated here,
//! handed to the kernel, and returned only once its completion has been reaped. If
//! the ring fails while reads may still be in flight, their buffers and the ring are
//! leaked rather than freed under the kernel's writes, and the thread reads through
//! `pread` from then on.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

/// Submission entries per ring: reads beyond it go in further rounds.
const ENTRIES: usize = 64;

enum Ring {
    /// Not made yet on this thread.
    Untried,
    /// Boxed: the ring's state is a few hundred bytes, the other variants none.
    Ready(Box<IoUring>),
    /// Refused by the kernel, or given up after a failure: `pread` instead.
    Unavailable,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
}

/// Why a round of reads failed, and whether the kernel may still write into its
/// buffers.
struct Failure {
    error: io::Error,
    in_flight: bool,
}

/// Reads `len` bytes at each `(offset, len)` of `reads` from `fd`, submitted together.
/// `Ok(None)`: this thread has no ring (the kernel refused one, or it was given up),
/// so the caller reads the blocks itself. A short read is an `UnexpectedEof` error.
pub(crate) fn read_at_many(fd: RawFd, reads: &[(u64, usize)]) -> io::Result<Option<Vec<Vec<u8>>>> {
    if reads.iter().any(|&(_, len)| u32::try_from(len).is_err()) {
        return Ok(None); // a read the ring cannot name: `pread` it
    }
    RING.try_with(|cell| {
        let Ok(mut state) = cell.try_borrow_mut() else {
            return Ok(None);
        };
        if matches!(*state, Ring::Untried) {
            *state = match IoUring::new(ENTRIES as u32) {
                Ok(ring) => Ring::Ready(Box::new(ring)),
                Err(_) => Ring::Unavailable,
            };
        }
        let Ring::Ready(ring) = &mut *state else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(reads.len());
        for round in reads.chunks(ENTRIES) {
            match read_round(ring, fd, round) {
                Ok(buffers) => out.extend(buffers),
                Err(Failure { error, in_flight }) => {
                    if in_flight {
                        if let Ring::Ready(ring) = std::mem::replace(&mut *state, Ring::Unavailable)
                        {
                            std::mem::forget(ring);
                        }
                    }
                    return Err(error);
                }
            }
        }
        Ok(Some(out))
    })
    .unwrap_or(Ok(None))
}

/// One submission of at most [`ENTRIES`] reads, waited for whole.
fn read_round(
    ring: &mut IoUring,
    fd: RawFd,
    reads: &[(u64, usize)],
) -> Result<Vec<Vec<u8>>, Failure> {
    let mut buffers: Vec<Vec<u8>> = reads.iter().map(|&(_, len)| vec![0; len]).collect();
    for (i, (buffer, &(offset, len))) in buffers.iter_mut().zip(reads).enumerate() {
        // `read_at_many` checked every length fits.
        let len = u32::try_from(len).unwrap_or(0);
        let entry = opcode::Read::new(types::Fd(fd), buffer.as_mut_ptr(), len)
            .offset(offset)
            .build()
            .user_data(i as u64);
        // SAFETY: the entry points into `buffers[i]`, a heap buffer of `len` bytes that
        // is neither moved nor freed until the entry's completion has been reaped
        // below; if the ring fails with entries queued or in flight, the buffers are
        // leaked (never freed), and the ring with them. The descriptor is the caller's,
        // open for the whole call.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            std::mem::forget(buffers);
            return Err(Failure {
                error: io::Error::other("io_uring submission queue full"),
                in_flight: true,
            });
        }
    }
    let mut results: Vec<Option<i32>> = vec![None; reads.len()];
    let mut done = 0;
    while done < reads.len() {
        match ring.submit_and_wait(reads.len() - done) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                std::mem::forget(buffers);
                return Err(Failure {
                    error,
                    in_flight: true,
                });
            }
        }
        for cqe in ring.completion() {
            if let Some(slot @ None) = results.get_mut(cqe.user_data() as usize) {
                *slot = Some(cqe.result());
                done += 1;
            }
        }
    }
    // Every read has completed: the buffers are ours again.
    for (result, &(offset, len)) in results.iter().zip(reads) {
        let n = result.unwrap_or(-1);
        let error = if n < 0 {
            io::Error::from_raw_os_error(-n)
        } else if n as usize != len {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read {n} of {len} bytes at offset {offset}"),
            )
        } else {
            continue;
        };
        return Err(Failure {
            error,
            in_flight: false,
        });
    }
    Ok(buffers)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// Reads of many blocks, more than one ring's worth, come back as `pread` would
    /// give them; a read past the end is an error, after which the thread still reads.
    #[test]
    fn reads_submitted_together_return_the_files_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let reads: Vec<(u64, usize)> = (0..150u64).map(|i| (i * 1_999, 100 + i as usize)).collect();
        let Some(got) = read_at_many(file.as_raw_fd(), &reads).unwrap() else {
            eprintln!("no io_uring on this system: nothing to test");
            return;
        };
        for (buf, &(offset, len)) in got.iter().zip(&reads) {
            assert_eq!(&buf[..], &bytes[offset as usize..offset as usize + len]);
        }
        let past = [(0, 10), (299_990, 20)];
        let err = read_at_many(file.as_raw_fd(), &past).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        let again = read_at_many(file.as_raw_fd(), &past[..1]).unwrap().unwrap();
        assert_eq!(&again[0][..], &bytes[..10]);
    }
}
