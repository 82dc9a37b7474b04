//! Asking the CPU to start loading memory a get is about to read.
//!
//! A get over a large store reads a chain of memory that is rarely in the CPU's caches
//! — a table's index, a block's lines — and each read that misses waits for memory,
//! about 100–200 ns here. Where the get knows some addresses before it needs them, a
//! prefetch hint starts their loads early, so their misses overlap one another or the
//! work still under way instead of following it (docs/ARCHITECTURE.md, "What a get
//! waits for when its block is cached").

/// Starts loading every cache line that `items` occupies, last line first.
#[inline]
pub(crate) fn prefetch_lines<T>(items: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let bytes = std::mem::size_of_val(items);
        if bytes == 0 {
            return;
        }
        let start = items.as_ptr().cast::<u8>();
        let skew = start as usize % LINE;
        for k in (0..(skew + bytes).div_ceil(LINE)).rev() {
            let line = start.wrapping_sub(skew).wrapping_add(k * LINE);
            // SAFETY: a prefetch is only a hint to the cache: it reads nothing the
            // program sees and cannot fault, whatever the address; each one here is
            // a line `items` occupies. SSE, which it needs, is part of every x86-64
            // target.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}
