//! LevelDB 1.22 (the real C++ library, built by `leveldb-sys`) through its C API
//! (feature `leveldb`).

use super::{Engine, EngineConfig};
use crate::error::{BenchError, Result};
use leveldb_sys::*;
use libc::{c_char, c_void, size_t};
use std::ffi::{CStr, CString};
use std::path::Path;
use std::ptr;

extern "C" {
    // In LevelDB 1.22's c.h but not declared by leveldb-sys.
    fn leveldb_options_set_max_file_size(options: *mut leveldb_options_t, size: size_t);
}

/// A LevelDB database and the option objects it borrows.
pub struct LevelEngine {
    db: *mut leveldb_t,
    options: *mut leveldb_options_t,
    cache: *mut leveldb_cache_t,
    filter: *mut leveldb_filterpolicy_t,
    read_options: *mut leveldb_readoptions_t,
    write_options: *mut leveldb_writeoptions_t,
}

// SAFETY: LevelDB's `DB` is safe for concurrent use from many threads without external
// synchronisation (include/leveldb/db.h); the option objects are only read after open.
unsafe impl Send for LevelEngine {}
// SAFETY: as above.
unsafe impl Sync for LevelEngine {}

impl std::fmt::Debug for LevelEngine {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("LevelEngine")
    }
}

/// The option mapping printed at startup.
pub fn mapping(config: &EngineConfig) -> Vec<String> {
    vec![
        format!("write_buffer_size={}", config.write_buffer_size),
        "sealed memtables=1 (fixed in LevelDB)".to_string(),
        format!("block_cache=LRU {}", config.block_cache_size),
        format!("filter_policy=bloom({}) (none if 0)", config.bloom_bits),
        format!("block_size={}", config.block_size),
        "compression=none".to_string(),
        format!(
            "WAL=on (cannot be disabled{}), sync={}",
            if config.wal {
                ""
            } else {
                ": --disable_wal ignored"
            },
            config.sync
        ),
        format!("max_file_size={}", config.target_file_size),
        "level-1 size=10 MiB, multiplier 10 (fixed in LevelDB)".to_string(),
        "level0 triggers compaction/slowdown/stop=4/8/12 (fixed in LevelDB)".to_string(),
        "background: 1 thread for flush and compaction (fixed)".to_string(),
        "flush: not in the C API (memtable stays in memory until full)".to_string(),
        "max_open_files=1000 (default)".to_string(),
        "verify_checksums=true on reads (as cairn and RocksDB; LevelDB's default is false)"
            .to_string(),
    ]
}

/// Turns a LevelDB error string (malloc'd) into an error and frees it.
fn check(error: *mut c_char, operation: &str) -> Result<()> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB sets `error` to a NUL-terminated string it allocated with malloc.
    let message = unsafe { CStr::from_ptr(error) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: the string came from LevelDB and is freed once.
    unsafe { leveldb_free(error as *mut c_void) };
    Err(BenchError::new(format!("leveldb {operation}: {message}")))
}

impl LevelEngine {
    /// Opens (creates) a database in `dir`.
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Self> {
        let name = CString::new(dir.to_string_lossy().as_bytes())
            .map_err(|_| BenchError::new("leveldb: directory path contains a NUL byte"))?;
        // SAFETY: plain constructor and setter calls on objects created here; every object
        // outlives the database (they are destroyed in `Drop` after `leveldb_close`).
        unsafe {
            let options = leveldb_options_create();
            leveldb_options_set_create_if_missing(options, 1);
            leveldb_options_set_write_buffer_size(options, config.write_buffer_size);
            leveldb_options_set_block_size(options, config.block_size);
            leveldb_options_set_compression(options, Compression::No);
            leveldb_options_set_max_file_size(options, config.target_file_size as size_t);
            let cache = leveldb_cache_create_lru(config.block_cache_size);
            leveldb_options_set_cache(options, cache);
            let filter = if config.bloom_bits > 0 {
                let filter = leveldb_filterpolicy_create_bloom(config.bloom_bits as i32);
                leveldb_options_set_filter_policy(options, filter);
                filter
            } else {
                ptr::null_mut()
            };
            let read_options = leveldb_readoptions_create();
            // cairn and RocksDB verify block checksums on every read by default.
            leveldb_readoptions_set_verify_checksums(read_options, 1);
            let write_options = leveldb_writeoptions_create();
            leveldb_writeoptions_set_sync(write_options, u8::from(config.sync));
            let mut engine = LevelEngine {
                db: ptr::null_mut(),
                options,
                cache,
                filter,
                read_options,
                write_options,
            };
            let mut error = ptr::null_mut();
            let db = leveldb_open(options, name.as_ptr(), &mut error);
            check(error, "open")?;
            engine.db = db;
            Ok(engine)
        }
    }
}

impl Engine for LevelEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut error = ptr::null_mut();
        // SAFETY: `db` is open; key and value are valid for their lengths during the call.
        unsafe {
            leveldb_put(
                self.db,
                self.write_options,
                key.as_ptr() as *const c_char,
                key.len(),
                value.as_ptr() as *const c_char,
                value.len(),
                &mut error,
            );
        }
        check(error, "put")
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        let mut error = ptr::null_mut();
        let mut length: size_t = 0;
        // SAFETY: `db` is open; the returned buffer is malloc'd by LevelDB, copied, then freed.
        unsafe {
            let found = leveldb_get(
                self.db,
                self.read_options,
                key.as_ptr() as *const c_char,
                key.len(),
                &mut length,
                &mut error,
            );
            check(error, "get")?;
            if found.is_null() {
                return Ok(false);
            }
            value.clear();
            value.extend_from_slice(std::slice::from_raw_parts(found as *const u8, length));
            leveldb_free(found as *mut c_void);
        }
        Ok(true)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        let mut error = ptr::null_mut();
        // SAFETY: `db` is open; key is valid for its length during the call.
        unsafe {
            leveldb_delete(
                self.db,
                self.write_options,
                key.as_ptr() as *const c_char,
                key.len(),
                &mut error,
            );
        }
        check(error, "delete")
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut seen = 0;
        // SAFETY: the iterator is created from the open `db`, used only here and destroyed
        // before returning; key/value slices are valid until the next move of the iterator.
        unsafe {
            let cursor = leveldb_create_iterator(self.db, self.read_options);
            leveldb_iter_seek(cursor, start.as_ptr() as *const c_char, start.len());
            while seen < count && leveldb_iter_valid(cursor) != 0 {
                let mut key_length: size_t = 0;
                let mut value_length: size_t = 0;
                // leveldb-sys declares these out-parameters `*const`, but LevelDB writes
                // through them: pass pointers derived from `&mut`.
                let key = leveldb_iter_key(cursor, ptr::addr_of_mut!(key_length).cast_const());
                let value =
                    leveldb_iter_value(cursor, ptr::addr_of_mut!(value_length).cast_const());
                visit(
                    std::slice::from_raw_parts(key as *const u8, key_length),
                    std::slice::from_raw_parts(value as *const u8, value_length),
                );
                seen += 1;
                // As db_bench: no move past the last entry asked for.
                if seen < count {
                    leveldb_iter_next(cursor);
                }
            }
            let mut error: *const c_char = ptr::null();
            leveldb_iter_get_error(cursor, ptr::addr_of_mut!(error).cast_const());
            leveldb_iter_destroy(cursor);
            check(error as *mut c_char, "scan")?;
        }
        Ok(seen)
    }

    fn flush(&self) -> Result<()> {
        // LevelDB's C API has no flush; the memtable is written when full or at reopen.
        Ok(())
    }

    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

impl Drop for LevelEngine {
    fn drop(&mut self) {
        // SAFETY: each object was created in `open` and is destroyed once, the database first.
        unsafe {
            if !self.db.is_null() {
                leveldb_close(self.db);
            }
            leveldb_readoptions_destroy(self.read_options);
            leveldb_writeoptions_destroy(self.write_options);
            leveldb_options_destroy(self.options);
            if !self.filter.is_null() {
                leveldb_filterpolicy_destroy(self.filter);
            }
            leveldb_cache_destroy(self.cache);
        }
    }
}
