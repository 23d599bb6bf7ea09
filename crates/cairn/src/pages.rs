//! Page-granular anonymous memory taken straight from the operating system, for the `MemStore`'s
//! log arena and hash-index tables.
//!
//! Job: memory whose residency the store controls. A region is mapped zero-filled and costs no
//! resident memory until a page is written; [`Pages::release`] hands pages back so they leave
//! the process's resident set at once (`madvise(MADV_DONTNEED)`), and dropping a region unmaps
//! it, so freed memory is never kept by a heap allocator that may not return it.
//!
//! On Linux (outside Miri) regions are `mmap`ed; elsewhere they come from `std::alloc`
//! zero-initialised, `release` is a no-op and `populate` does nothing, which is correct but keeps
//! the memory resident.
//!
//! Thread-safety contract: `Pages` is `Send + Sync`; it only owns the mapping. Whoever hands out
//! the bytes (the log's block pool, a hash table) decides who may read or write them, and must
//! call `release` only on bytes nobody accesses any more.
//!
//! Invariants:
//! 1. `base .. base + len` is one live mapping (or allocation) of `len` bytes, `len` a positive
//!    multiple of [`PAGE_BYTES`], page aligned, and zero-filled when created.
//! 2. After `release`, the released bytes read as zero on Linux and are unspecified elsewhere;
//!    they are never unmapped before the `Pages` is dropped.

use crate::error::{Error, Result};
use std::ptr::NonNull;

/// The granularity regions are sized in (4 KiB; larger system pages are multiples of it).
/// Memory goes back to the system in whole pages of [`system_page_bytes`], which may be
/// larger (16 or 64 KiB on some ARM64 kernels).
pub const PAGE_BYTES: usize = 4096;

/// The operating system's page size (at least [`PAGE_BYTES`]). `release` and `populate` act
/// only on whole pages of it: the kernel rounds an `madvise` length up to whole pages, so a
/// 4 KiB-granular `MADV_DONTNEED` on a 64 KiB-page kernel would zero up to 60 KiB of live
/// bytes past the range released.
pub fn system_page_bytes() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            // SAFETY: `sysconf` only reads a system constant.
            let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(size) = usize::try_from(size) {
                if size.is_power_of_two() && size >= PAGE_BYTES {
                    return size;
                }
            }
        }
        PAGE_BYTES
    })
}

/// A zero-filled, page-aligned region of memory owned by the store.
#[derive(Debug)]
pub struct Pages {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: `Pages` owns a plain memory region; the owner of the bytes decides who accesses them
// (module contract), so moving or sharing the handle between threads is harmless.
unsafe impl Send for Pages {}
// SAFETY: as above; `&Pages` only exposes the base pointer and `madvise` calls.
unsafe impl Sync for Pages {}

impl Pages {
    /// Maps `bytes` (rounded up to whole pages, at least one) zero-filled bytes. Nothing is
    /// resident until written.
    pub fn zeroed(bytes: usize) -> Result<Pages> {
        let len = bytes
            .max(1)
            .checked_next_multiple_of(PAGE_BYTES)
            .ok_or_else(|| Error::InvalidArgument(format!("cannot map {bytes} bytes")))?;
        let base = map(len).ok_or_else(|| {
            Error::InvalidArgument(format!("could not reserve {len} bytes of memory"))
        })?;
        Ok(Pages { base, len })
    }

    /// First byte of the region.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    #[cfg(test)]
    /// Length in bytes (a multiple of [`PAGE_BYTES`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns the whole pages inside `offset .. offset + len` to the operating system. The
    /// caller guarantees that no thread reads or writes those bytes concurrently.
    pub fn release(&self, offset: usize, len: usize) {
        if let Some((start, length)) = self.page_range(offset, len) {
            release(self.base, start, length);
        }
    }

    /// Faults in the pages of `offset .. offset + len` ahead of writing them (one system call
    /// instead of a page fault per page). Best effort: nothing happens where unsupported.
    pub fn populate(&self, offset: usize, len: usize) {
        if let Some((start, length)) = self.page_range(offset, len) {
            populate(self.base, start, length);
        }
    }

    /// Asks for transparent huge pages over the region (`MADV_HUGEPAGE`), before its pages
    /// are first written. Best effort: kernels without them, or with them off, ignore it.
    pub fn advise_huge_pages(&self) {
        advise_huge_pages(self.base, self.len);
    }

    /// The whole system pages inside the range, clipped to the region.
    fn page_range(&self, offset: usize, len: usize) -> Option<(usize, usize)> {
        whole_pages(offset, len, self.len, system_page_bytes())
    }
}

/// `(start, length)` of the whole `page_bytes` pages inside `offset .. offset + len`, clipped
/// to a region of `region_len` bytes whose base is page aligned; None if there is none.
fn whole_pages(
    offset: usize,
    len: usize,
    region_len: usize,
    page_bytes: usize,
) -> Option<(usize, usize)> {
    let start = offset.checked_next_multiple_of(page_bytes)?;
    let end = offset.checked_add(len)?.min(region_len) / page_bytes * page_bytes;
    (end > start).then(|| (start, end - start))
}

impl Drop for Pages {
    fn drop(&mut self) {
        unmap(self.base, self.len);
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
fn map(len: usize) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory; the result is checked for MAP_FAILED below.
    let pointer = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if pointer == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(pointer.cast::<u8>())
}

#[cfg(all(target_os = "linux", not(miri)))]
fn unmap(base: NonNull<u8>, len: usize) {
    // SAFETY: `base .. base + len` is exactly the mapping made by `map` (invariant 1), unmapped
    // once, from `Drop`, when no reference into it can remain.
    unsafe {
        libc::munmap(base.as_ptr().cast(), len);
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
fn release(base: NonNull<u8>, start: usize, len: usize) {
    // SAFETY: `start .. start + len` lies inside the mapping and is page aligned (`page_range`);
    // MADV_DONTNEED on a private anonymous mapping only replaces those pages by zero pages, and
    // the caller guarantees nobody accesses them meanwhile. A failure leaves them resident,
    // which is harmless.
    unsafe {
        libc::madvise(base.as_ptr().add(start).cast(), len, libc::MADV_DONTNEED);
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
fn populate(base: NonNull<u8>, start: usize, len: usize) {
    // SAFETY: the range lies inside the mapping and is page aligned (`page_range`);
    // MADV_POPULATE_WRITE only faults pages in (as a write would) without changing their bytes.
    // Kernels before 5.14 answer EINVAL, and the pages then fault in when written.
    unsafe {
        libc::madvise(
            base.as_ptr().add(start).cast(),
            len,
            libc::MADV_POPULATE_WRITE,
        );
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages(base: NonNull<u8>, len: usize) {
    // SAFETY: `base .. base + len` is exactly the mapping (invariant 1); MADV_HUGEPAGE only
    // marks it eligible for huge pages and changes no byte. A failure is harmless.
    unsafe {
        libc::madvise(base.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise_huge_pages(_base: NonNull<u8>, _len: usize) {}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn layout(len: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(len, PAGE_BYTES).ok()
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn map(len: usize) -> Option<NonNull<u8>> {
    let layout = layout(len)?;
    // SAFETY: the layout has a non-zero size (`len` is at least one page).
    NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn unmap(base: NonNull<u8>, len: usize) {
    if let Some(layout) = layout(len) {
        // SAFETY: `base` came from `alloc_zeroed` with this same layout and is freed once.
        unsafe { std::alloc::dealloc(base.as_ptr(), layout) }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn release(_base: NonNull<u8>, _start: usize, _len: usize) {}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn populate(_base: NonNull<u8>, _start: usize, _len: usize) {}

#[cfg(all(test, target_os = "linux", not(miri)))]
/// Resident bytes of `pages`' own mapping (`mincore`), which other threads' allocations do
/// not move (the whole process's resident set did, and made a test flaky).
pub fn resident_bytes(pages: &Pages) -> Option<u64> {
    let page = system_page_bytes();
    let mut vector = vec![0u8; pages.len.div_ceil(page)];
    // SAFETY: `base .. base + len` is one live mapping (invariant 1), page aligned;
    // `vector` holds one byte per page of it, as `mincore` writes.
    let result =
        unsafe { libc::mincore(pages.base.as_ptr().cast(), pages.len, vector.as_mut_ptr()) };
    (result == 0).then(|| {
        let resident = vector.iter().filter(|&&byte| byte & 1 == 1).count();
        (resident * page) as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_region_is_writable_and_release_keeps_it_mapped() {
        let page = system_page_bytes();
        let pages = Pages::zeroed(3 * page + 1).unwrap();
        assert_eq!(pages.len(), (3 * page + 1).next_multiple_of(PAGE_BYTES));
        // SAFETY: the region is ours, at least four system pages long, and nobody else uses it.
        let bytes = unsafe { std::slice::from_raw_parts_mut(pages.as_ptr(), pages.len()) };
        assert!(bytes.iter().all(|&byte| byte == 0));
        bytes.fill(7);
        pages.populate(0, pages.len());
        // Only whole pages inside the range are released: page 1 and 2 here.
        pages.release(page - 1, 2 * page + 2);
        // SAFETY: as above; the release finished before this read.
        let bytes = unsafe { std::slice::from_raw_parts(pages.as_ptr(), pages.len()) };
        assert_eq!(bytes[page - 1], 7);
        assert_eq!(bytes[3 * page], 7);
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            assert_eq!(bytes[page], 0);
            assert_eq!(bytes[3 * page - 1], 0);
        }
        assert_eq!(pages.page_range(10, 0), None);
        assert_eq!(pages.page_range(usize::MAX - 5, 10), None);
    }

    /// With pages larger than 4 KiB, a release covers only the whole large pages inside its
    /// range (the kernel would round a shorter length up and zero live bytes past it).
    #[test]
    fn a_release_covers_whole_system_pages_only() {
        const KIB: usize = 1024;
        let region = 1 << 20;
        // A 4 KiB block inside one 64 KiB page: nothing may be released.
        assert_eq!(whole_pages(64 * KIB, 4 * KIB, region, 64 * KIB), None);
        assert_eq!(whole_pages(68 * KIB, 8 * KIB, region, 64 * KIB), None);
        // Only the 64 KiB page wholly inside 4 KiB .. 132 KiB.
        assert_eq!(
            whole_pages(4 * KIB, 128 * KIB, region, 64 * KIB),
            Some((64 * KIB, 64 * KIB))
        );
        // 4 KiB pages: as before.
        assert_eq!(
            whole_pages(64 * KIB, 4 * KIB, region, 4 * KIB),
            Some((64 * KIB, 4 * KIB))
        );
        // Clipped to the region.
        assert_eq!(
            whole_pages(0, 4 * region, region, 64 * KIB),
            Some((0, region))
        );
        assert!(system_page_bytes() >= PAGE_BYTES && system_page_bytes().is_power_of_two());
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn released_pages_leave_the_resident_set() {
        const BYTES: usize = 64 << 20;
        let pages = Pages::zeroed(BYTES).unwrap();
        assert_eq!(resident_bytes(&pages), Some(0), "nothing written yet");
        // SAFETY: the region is ours and nobody else uses it.
        unsafe { std::ptr::write_bytes(pages.as_ptr(), 1, BYTES) };
        assert_eq!(resident_bytes(&pages), Some(BYTES as u64), "all written");
        pages.release(0, BYTES);
        assert_eq!(resident_bytes(&pages), Some(0), "all released");
    }
}
