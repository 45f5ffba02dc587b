//! Transparent huge pages (2 MiB) for the few large arrays that are read at scattered places.
//!
//! The Gram pass reads the users' rows at scattered places of the 190 MB index array (the netflix
//! shape): with 4 KiB pages nearly every such read also misses the processor's address-translation
//! cache, which a 2 MiB page, covering 512 times as much, avoids. Where the kernel's transparent
//! huge pages are set to `madvise` — the default of many distributions, and of the machines recsel
//! is measured on — a program only gets them for the memory it marks, and it must mark it before
//! writing it. [`zeroed`] does both for a new array; docs/sansa.md, "Memory", gives the times.
//!
//! Only chosen arrays are marked. Marking every large allocation (a global allocator) was tried:
//! it sped the dense path up as much, but raised the peak memory of the sparse path (`icf`) by
//! 0.8–1 GB and slowed its Gram pass, whose arrays grow by reallocation.
//!
//! A hint, never an error: where huge pages are off, or on another system, nothing changes, and no
//! value ever depends on it.

/// Marks the whole 2 MiB pages of `v`'s memory for transparent huge pages. Effective on memory
/// that nothing has touched yet, such as a large zeroed allocation ([`zeroed`]): its pages are
/// made huge as they are first written.
pub fn advise<T>(v: &[T]) {
    advise_raw(v.as_ptr() as *mut u8, std::mem::size_of_val(v));
}

/// A vector of `len` zeros (default values of a number type) whose pages are huge where the
/// system allows: `vec!` of zeros gets fresh, untouched memory from the allocator (`calloc`),
/// which is marked before anything writes it.
pub fn zeroed<T: Clone + Default>(len: usize) -> Vec<T> {
    let v = vec![T::default(); len];
    advise(&v);
    v
}

#[cfg(target_os = "linux")]
fn advise_raw(ptr: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    if ptr.is_null() || size < 2 * HUGE {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + size) & !(HUGE - 1);
    if end > start {
        // SAFETY: the range lies inside an allocation this process owns (a slice's memory);
        // MADV_HUGEPAGE changes no contents and no permissions, and its result is deliberately
        // ignored (a hint).
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_raw(_ptr: *mut u8, _size: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Marked vectors, small and large, start zero and keep what is written to them (the hint
    /// never changes contents).
    #[test]
    fn marked_vectors_start_zero_and_keep_their_contents() {
        for len in [0, 1, 1000, 3 << 20, 5_000_001] {
            let mut v: Vec<u32> = zeroed(len);
            assert!(v.iter().all(|&x| x == 0));
            for (i, x) in v.iter_mut().enumerate() {
                *x = i as u32;
            }
            advise(&v);
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        }
    }
}
