//! A write-ahead-log file written through a shared memory mapping: an append is a copy into
//! the page cache, not a `write(2)` system call.
//!
//! Why: at one writer every WAL group is one record, so the system call was a fixed
//! ~2–3 µs per write (a third of a read-modify-write), and the one leader doing `write(2)`
//! serialised writers. A byte copied into a `MAP_SHARED` mapping of the file is in the page
//! cache at once, which is exactly the durability `flush` promises (survives a process crash,
//! not a power loss); `sync` is `fdatasync`, which writes back pages dirtied through the
//! mapping like any others. The copy stores in ascending order (`copy_in_order`), so a
//! process killed mid-append leaves a prefix of what it appended, as `write(2)` would.
//!
//! The file grows in *windows* (a power of two between [`WINDOW_BYTES_MIN`] and
//! [`WINDOW_BYTES_MAX`], sized from the caller's hint so a small memtable's log does not
//! reserve megabytes): space for the next window is reserved
//! with `fallocate` (so a full disk is an `Io` error from `append`, never a `SIGBUS` on a
//! page fault), then mapped; the previous window is unmapped. Dropping the file cuts it back
//! to the bytes appended. After a crash the file ends in up to one window of zeros, which the
//! log reader already treats as a torn tail (a zero header is never a record: `wal` module).
//!
//! Power loss: `fallocate` and the final `trim` change the file's length, which (like the
//! bytes) is durable only after the next `sync`; `allocated_bytes` reports the reserved
//! length so fault injection can model both (`fs::fault`).
//!
//! Thread-safety contract: like every `WritableFile`, owned by one writer at a time
//! (`&mut self`); the WAL's group-commit leader is that writer.
//!
//! Invariants:
//! 1. `window` maps file bytes `[window_offset, window_offset + window_bytes)` when not null;
//!    `window_offset` is a multiple of the page size.
//! 2. `window_offset <= size_bytes <= window_offset + window_bytes` while a window is mapped.
//! 3. `size_bytes <= reserved_bytes`: every appended byte lies in space `fallocate` reserved.

use super::WritableFile;
use crate::error::{Error, Result};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Smallest window (a multiple of every base page size Linux uses, 4 to 64 KiB).
pub const WINDOW_BYTES_MIN: usize = 64 << 10;
/// Largest window: bounds the zero tail a crash can leave and the space reserved ahead.
pub const WINDOW_BYTES_MAX: usize = 4 << 20;

/// See the module documentation.
#[derive(Debug)]
pub struct MappedWritableFile {
    path: PathBuf,
    file: std::fs::File,
    window: *mut u8,
    window_bytes: usize,
    window_offset: u64,
    size_bytes: u64,
    reserved_bytes: u64,
}

// SAFETY: the mapping is private to this value (no other pointer into it is handed out) and
// is used only through `&mut self`; the raw pointer is what keeps the type from being Send.
unsafe impl Send for MappedWritableFile {}
// SAFETY: no method reads or writes the mapping through `&self`.
unsafe impl Sync for MappedWritableFile {}

impl MappedWritableFile {
    /// Creates (or truncates) `path`, mapping windows sized for about `size_hint_bytes` of
    /// log. Returns `Ok(None)` where the file system cannot reserve space with `fallocate`
    /// (the caller then appends with `write(2)`): mapping a sparse file would turn a full disk
    /// into a `SIGBUS`.
    pub fn create(path: &Path, size_hint_bytes: u64) -> Result<Option<Self>> {
        let window_bytes = usize::try_from(size_hint_bytes)
            .unwrap_or(usize::MAX)
            .clamp(WINDOW_BYTES_MIN, WINDOW_BYTES_MAX)
            .next_power_of_two();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|error| Error::io("create", path, error))?;
        let mut mapped = MappedWritableFile {
            path: path.to_path_buf(),
            file,
            window: std::ptr::null_mut(),
            window_bytes,
            window_offset: 0,
            size_bytes: 0,
            reserved_bytes: 0,
        };
        match mapped.map_window_at(0) {
            Ok(()) => Ok(Some(mapped)),
            Err(error) if unsupported(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// `offset` as the kernel's signed file offset (a log past 2^63 bytes is an error, not a
    /// negative offset).
    fn file_offset(&self, offset: u64) -> Result<libc::off_t> {
        libc::off_t::try_from(offset).map_err(|_| {
            Error::io(
                "mmap",
                &self.path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset too large"),
            )
        })
    }

    /// Unmaps the current window (if any), reserves file space for the window starting at
    /// `offset` and maps it.
    fn map_window_at(&mut self, offset: u64) -> Result<()> {
        debug_assert_eq!(offset % self.window_bytes as u64, 0);
        self.unmap_window();
        let end = offset + self.window_bytes as u64;
        if end > self.reserved_bytes {
            let start = self.reserved_bytes;
            let length = end - start;
            let (start, length) = (self.file_offset(start)?, self.file_offset(length)?);
            // SAFETY: plain system call on a file descriptor we own; no memory is passed.
            let result = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, start, length) };
            if result != 0 {
                return Err(Error::io(
                    "fallocate",
                    &self.path,
                    std::io::Error::last_os_error(),
                ));
            }
            self.reserved_bytes = end;
        }
        let file_offset = self.file_offset(offset)?;
        // SAFETY: a new shared mapping of `[offset, offset + window_bytes)` of a file we own,
        // at an address of the kernel's choosing; the range lies inside the file (reserved
        // above), so touching it cannot fault past the end; checked for MAP_FAILED below.
        let pointer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                self.window_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.file.as_raw_fd(),
                file_offset,
            )
        };
        if pointer == libc::MAP_FAILED {
            return Err(Error::io(
                "mmap",
                &self.path,
                std::io::Error::last_os_error(),
            ));
        }
        self.window = pointer.cast::<u8>();
        self.window_offset = offset;
        Ok(())
    }

    /// Module invariants 1–3 (with the `invariants` feature; a no-op otherwise).
    fn check_invariants(&self) {
        if !cfg!(feature = "invariants") {
            return;
        }
        assert!(self.size_bytes <= self.reserved_bytes, "invariant 3");
        if !self.window.is_null() {
            let end = self.window_offset + self.window_bytes as u64;
            assert_eq!(
                self.window_offset % WINDOW_BYTES_MIN as u64,
                0,
                "invariant 1"
            );
            assert!(
                self.window_offset <= self.size_bytes && self.size_bytes <= end,
                "invariant 2"
            );
            assert!(
                end <= self.reserved_bytes,
                "invariant 1: window past the reservation"
            );
        }
    }

    fn unmap_window(&mut self) {
        if self.window.is_null() {
            return;
        }
        // SAFETY: `window` is the `window_bytes` mapping made by `map_window_at` (invariant 1),
        // unmapped once (the pointer is cleared); no reference into it outlives `append`.
        unsafe {
            libc::munmap(self.window.cast(), self.window_bytes);
        }
        self.window = std::ptr::null_mut();
    }
}

/// Copies `source` to `destination` with stores in ascending address order.
///
/// Why not `memcpy`: a process killed in the middle of a copy leaves in the page cache exactly
/// the stores it executed, and `memcpy` may store the end of a range before its start. The log
/// reader calls a damaged record followed by a valid one corruption, so a kill must leave a
/// *prefix* of the appended bytes — as `write(2)` does. Volatile stores keep the compiler from
/// reordering or merging them back into a `memcpy`; 8-byte stores keep it fast (a record is at
/// least 8 bytes, so no whole record can land before an earlier one).
///
/// # Safety
/// `destination .. destination + source.len()` must be valid for writes and not overlap
/// `source`.
unsafe fn copy_in_order(source: &[u8], destination: *mut u8) {
    let head = destination.align_offset(8).min(source.len());
    let (unaligned, rest) = source.split_at(head);
    let mut at = destination;
    for &byte in unaligned {
        // SAFETY: inside the destination range (caller), one byte at a time.
        unsafe {
            at.write_volatile(byte);
            at = at.add(1);
        }
    }
    let mut words = rest.chunks_exact(8);
    for word in words.by_ref() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        // SAFETY: `at` is 8-aligned here (the head above aligned it) and 8 bytes of the
        // destination range remain.
        unsafe {
            at.cast::<u64>().write_volatile(u64::from_ne_bytes(bytes));
            at = at.add(8);
        }
    }
    for &byte in words.remainder() {
        // SAFETY: the last bytes of the destination range.
        unsafe {
            at.write_volatile(byte);
            at = at.add(1);
        }
    }
}

/// True for the errors that mean "this file system cannot do it" rather than a real failure.
fn unsupported(error: &Error) -> bool {
    match error {
        Error::Io { source, .. } => matches!(
            source.raw_os_error(),
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::ENODEV | libc::EINVAL)
        ),
        _ => false,
    }
}

impl WritableFile for MappedWritableFile {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let window_end = self.window_offset + self.window_bytes as u64;
            if self.window.is_null() || self.size_bytes >= window_end {
                // Invariant 2: the window is full exactly when size reaches its end.
                let next = if self.window.is_null() {
                    self.size_bytes - self.size_bytes % self.window_bytes as u64
                } else {
                    window_end
                };
                self.map_window_at(next)?;
                continue;
            }
            // The append point lies inside the mapped window (a `usize` long): exact.
            #[allow(clippy::cast_possible_truncation)]
            let at = (self.size_bytes - self.window_offset) as usize;
            let room = self.window_bytes - at;
            let count = room.min(data.len());
            let (now, later) = data.split_at(count);
            // SAFETY: `[at, at + count)` lies inside the mapped window (`count <= room`), the
            // window is writable and only this `&mut self` writes it.
            unsafe { copy_in_order(now, self.window.add(at)) };
            self.size_bytes += count as u64;
            data = later;
        }
        self.check_invariants();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Bytes copied into a shared mapping are already in the page cache.
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|error| Error::io("sync", &self.path, error))
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn allocated_bytes(&self) -> u64 {
        self.reserved_bytes
    }

    fn appends_in_memory(&self) -> bool {
        true
    }

    fn sync_handle(&self) -> Option<Box<dyn super::SyncHandle>> {
        // fdatasync writes back pages dirtied through any shared mapping of the inode.
        super::std::StdSyncHandle::of(&self.file, &self.path)
    }

    fn trim(&mut self) -> Result<bool> {
        if self.reserved_bytes == self.size_bytes {
            return Ok(false);
        }
        // The window may reach past the new end: unmap it first, so no page of it can be
        // touched beyond the end of the file; the next append maps (and reserves) again.
        self.unmap_window();
        self.file
            .set_len(self.size_bytes)
            .map_err(|error| Error::io("truncate", &self.path, error))?;
        self.reserved_bytes = self.size_bytes;
        Ok(true)
    }
}

impl Drop for MappedWritableFile {
    fn drop(&mut self) {
        self.unmap_window();
        // Cut the reserved zeros: a clean close leaves exactly the appended bytes. A failure
        // leaves a zero tail, which readers treat as a torn tail, so it is ignored here.
        let _ = self.file.set_len(self.size_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temporary_path(name: &str) -> PathBuf {
        let directory =
            std::env::temp_dir().join(format!("cairn-mapped-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        directory.join("file")
    }

    #[test]
    fn appends_across_windows_read_back_and_drop_cuts_the_reserved_tail() {
        let path = temporary_path("windows");
        let Some(mut file) = MappedWritableFile::create(&path, WINDOW_BYTES_MAX as u64).unwrap()
        else {
            return; // this file system cannot reserve space: nothing to test
        };
        let mut expected = Vec::new();
        let mut round = 0u32;
        // Pieces of awkward sizes so some straddle a window boundary, plus one bigger than a
        // whole window.
        while expected.len() < 2 * WINDOW_BYTES_MAX + 12_345 {
            let size = if round == 3 {
                WINDOW_BYTES_MAX + 77
            } else {
                1 + (round as usize * 7919) % 65_536
            };
            let piece: Vec<u8> = (0..size).map(|i| (i as u32 ^ round) as u8).collect();
            file.append(&piece).unwrap();
            expected.extend_from_slice(&piece);
            round += 1;
            assert_eq!(file.size_bytes(), expected.len() as u64);
        }
        file.sync().unwrap();
        // Before the drop the file holds the bytes, then zeros up to the reservation.
        let before = std::fs::read(&path).unwrap();
        assert!(before.len() >= expected.len());
        assert_eq!(&before[..expected.len()], &expected[..]);
        assert!(before[expected.len()..].iter().all(|&byte| byte == 0));
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn copy_in_order_copies_every_length_at_every_alignment() {
        let source: Vec<u8> = (0..100u8).map(|byte| byte.wrapping_mul(37) | 1).collect();
        for offset in 0..8 {
            for length in 0..40 {
                let mut destination = vec![0u8; 64];
                // SAFETY: offset + length <= 47 < 64, and the vectors are distinct.
                unsafe { copy_in_order(&source[..length], destination.as_mut_ptr().add(offset)) };
                assert!(destination[..offset].iter().all(|&byte| byte == 0));
                assert_eq!(&destination[offset..offset + length], &source[..length]);
                assert!(destination[offset + length..].iter().all(|&byte| byte == 0));
            }
        }
    }

    #[test]
    fn a_small_hint_maps_small_windows_and_a_crash_leaves_at_most_one_of_zeros() {
        let path = temporary_path("small");
        let Some(mut file) = MappedWritableFile::create(&path, 1000).unwrap() else {
            return;
        };
        assert_eq!(file.window_bytes, WINDOW_BYTES_MIN);
        let piece: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8 + 1).collect();
        for _ in 0..200 {
            file.append(&piece).unwrap();
        }
        let size = file.size_bytes() as usize;
        assert_eq!(size, 200_000);
        std::mem::forget(file); // a crash: no trim
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), size.next_multiple_of(WINDOW_BYTES_MIN));
        assert_eq!(bytes[..size], piece.repeat(200)[..]);
        assert!(bytes[size..].iter().all(|&byte| byte == 0));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn trim_cuts_the_reservation_and_appending_afterwards_still_works() {
        let path = temporary_path("trim");
        let Some(mut file) = MappedWritableFile::create(&path, WINDOW_BYTES_MAX as u64).unwrap()
        else {
            return;
        };
        file.append(b"first").unwrap();
        assert!(file.trim().unwrap());
        assert!(!file.trim().unwrap(), "nothing left to trim");
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        file.append(b" second").unwrap();
        file.sync().unwrap();
        assert!(file.trim().unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"first second");
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"first second");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_process_crash_leaves_the_records_then_zeros_which_the_reader_calls_a_tail() {
        let path = temporary_path("crash");
        let Some(file) = MappedWritableFile::create(&path, WINDOW_BYTES_MAX as u64).unwrap() else {
            return;
        };
        let mut writer = crate::wal::LogWriter::new(Box::new(file), path.clone());
        for index in 0..1000u32 {
            writer.add_record(&index.to_le_bytes().repeat(9)).unwrap();
        }
        // A crash runs no destructor: the reserved zeros stay behind the records.
        std::mem::forget(writer);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), WINDOW_BYTES_MAX);
        let contents = crate::wal::parse_log(bytes, &path).unwrap();
        let payloads: Vec<Vec<u8>> = contents.records().map(|(_, p)| p.to_vec()).collect();
        assert_eq!(payloads.len(), 1000);
        assert_eq!(payloads[999], 999u32.to_le_bytes().repeat(9));
        assert!(contents.torn_tail_offset.is_some());
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
