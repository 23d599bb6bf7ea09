//! A Membuffer table's slot array: zeroed record pointers, mapped straight from the operating
//! system with a transparent huge page hint once the array spans a huge page.
//!
//! Why: a probe lands on a random slot of an array of several MiB, so with 4 KiB pages
//! nearly every probe also misses the TLB, and in a virtual machine a page walk is itself a
//! chain of misses. Measured before this: the writer's prefetch of its slot — a hint the
//! processor may not drop while it walks the page tables — took 8.6 % of a 2 GiB
//! `flodb_burst`'s CPU on the instruction after it. With 2 MiB pages a whole partition's
//! array needs a few TLB entries.
//!
//! Small arrays (under one huge page) and platforms or moments where the mapping fails come
//! from the heap instead: the hint is a speed-up, never a requirement.
//!
//! Thread-safety contract: the array is `Sync` like the `AtomicPtr`s it holds.
//!
//! Invariants:
//! 1. `len()` slots, each a valid `AtomicPtr` that starts null, live as long as the array.

use super::record::Record;
use crate::pages::Pages;
use std::sync::atomic::AtomicPtr;

/// Arrays of at least this many bytes are mapped and hinted (the x86-64 huge page).
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// See the module documentation.
pub(super) enum SlotArray {
    /// A mapping of at least `len` slots' bytes (invariant 1).
    Mapped {
        pages: Pages,
        len: usize,
    },
    Heap(Box<[AtomicPtr<Record>]>),
}

impl SlotArray {
    /// `len` null slots.
    pub(super) fn new(len: usize) -> SlotArray {
        let bytes = len.saturating_mul(std::mem::size_of::<AtomicPtr<Record>>());
        if bytes >= HUGE_PAGE_BYTES {
            if let Ok(pages) = Pages::zeroed(bytes) {
                // Before any slot is written: pages fault in huge from the first write on.
                pages.advise_huge_pages();
                return SlotArray::Mapped { pages, len };
            }
        }
        SlotArray::Heap((0..len).map(|_| AtomicPtr::default()).collect())
    }
}

impl std::ops::Deref for SlotArray {
    type Target = [AtomicPtr<Record>];

    fn deref(&self) -> &[AtomicPtr<Record>] {
        match self {
            // SAFETY: the mapping is zero-filled, page aligned (more than an `AtomicPtr`
            // needs) and at least `len` slots long (`Pages` invariant 1); all-zero bits are a
            // null `AtomicPtr`; the slice borrows `self`, which owns the mapping.
            SlotArray::Mapped { pages, len } => unsafe {
                std::slice::from_raw_parts(pages.as_ptr().cast::<AtomicPtr<Record>>(), *len)
            },
            SlotArray::Heap(slots) => slots,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SlotArray;
    use std::sync::atomic::Ordering;

    /// Both kinds start null, hold what is stored, and have the length asked for.
    #[test]
    fn mapped_and_heap_arrays_start_null_and_keep_stores() {
        for len in [4, 1 << 10, 1 << 18, (1 << 18) + 3] {
            let slots = SlotArray::new(len);
            assert_eq!(slots.len(), len);
            assert_eq!(
                matches!(slots, SlotArray::Mapped { .. }),
                len >= 1 << 18,
                "{len}"
            );
            assert!(slots
                .iter()
                .all(|slot| slot.load(Ordering::Relaxed).is_null()));
            let mut marker = 0u8;
            let pointer = std::ptr::from_mut(&mut marker).cast();
            if let Some(last) = slots.last() {
                last.store(pointer, Ordering::Relaxed);
                assert_eq!(last.load(Ordering::Relaxed), pointer);
            }
        }
    }
}
