//! A global allocator that asks Linux for transparent huge pages (2 MiB) on large allocations.
//!
//! The big arrays of a fit and of a selection are read at scattered places: the users' rows in the
//! Gram pass, the dense Gram matrix in the Cholesky factorisation, `W_r` and `L` in the scoring and
//! the approximate inverse. With 4 KiB pages nearly every such read also misses the processor's
//! address-translation cache (a 2 MiB page covers 512 times as much), and where the kernel's
//! transparent huge pages are set to `madvise` — the default of many distributions, and of the
//! machines recsel is measured on — a program only gets them for the memory it marks. README,
//! "Scale and memory" gives the times with and without.
//!
//! [`HugePages`] is the system allocator plus one `madvise(MADV_HUGEPAGE)` on every allocation of
//! at least [`MIN_BYTES`]: a hint, never an error — where huge pages are off, or on another
//! system, it changes nothing, and no value ever depends on it. The `recsel` binary and the
//! Python module install it; a program using the library chooses for itself:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: recsel::hugepages::HugePages = recsel::hugepages::HugePages;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations from this size on are marked (smaller ones rarely span a whole huge page).
pub const MIN_BYTES: usize = 4 << 20;

/// The system allocator, with large allocations marked for huge pages (module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct HugePages;

/// Marks the whole 2 MiB pages inside `[ptr, ptr + size)` for huge pages. Large allocations are
/// fresh mappings that nothing has touched yet, so their pages are made huge at the first write.
#[cfg(target_os = "linux")]
fn advise(ptr: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    if ptr.is_null() || size < MIN_BYTES {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + size) & !(HUGE - 1);
    if end > start {
        // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE changes
        // no contents and no permissions, and its result is deliberately ignored (a hint).
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_ptr: *mut u8, _size: usize) {}

// SAFETY: every call is forwarded to `System` with the same arguments; `advise` only marks memory
// that the returned allocation owns.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        let ptr = unsafe { System.alloc(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; the caller guarantees `new_size` is valid for the layout.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        advise(new, new_size);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocations through the allocator, large and small, zeroed and grown, hold what is written
    /// to them (the hint never changes contents).
    #[test]
    fn large_and_small_allocations_keep_their_contents() {
        let a = HugePages;
        for size in [8, 4096, MIN_BYTES - 1, MIN_BYTES, 3 * MIN_BYTES + 12345] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: non-zero sizes with a valid alignment; every pointer is freed with its layout.
            unsafe {
                let z = a.alloc_zeroed(layout);
                assert!(!z.is_null());
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                let p = a.alloc(layout);
                std::ptr::write_bytes(p, 0xab, size);
                let q = a.realloc(p, layout, 2 * size);
                assert!(std::slice::from_raw_parts(q, size)
                    .iter()
                    .all(|&b| b == 0xab));
                a.dealloc(q, Layout::from_size_align(2 * size, 8).unwrap());
                a.dealloc(z, layout);
            }
        }
    }
}
