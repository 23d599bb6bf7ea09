//! The write buffer counts the Membuffer's real bytes, not its budget: with the Membuffer
//! on and (nearly) empty, the memtable may fill the write buffer instead of being sealed
//! once it holds three quarters of it (the default Membuffer share is one quarter).

use cairn::fs::MemFs;
use cairn::{Db, Options};
use std::sync::Arc;

const WRITE_BUFFER_BYTES: usize = 1 << 20;
const VALUE_BYTES: usize = 1000;

/// Read-modify-writes go to the memtable directly, so the Membuffer stays empty while the
/// memtable fills; 85 % of the write buffer in payload (the memtable's per-entry overhead
/// is about 5 % with 1,000-byte values) must not seal the buffer.
#[test]
fn an_empty_membuffer_does_not_take_a_quarter_of_the_write_buffer() {
    let mut options = Options::default();
    options.file_system = Arc::new(MemFs::new());
    options.membuffer_enabled = true;
    options.write_buffer_size_bytes = WRITE_BUFFER_BYTES;
    let db = Db::open("/db", options).unwrap();
    let value = vec![b'v'; VALUE_BYTES];
    let mut payload = 0usize;
    let mut key_index = 0u32;
    while payload < WRITE_BUFFER_BYTES / 100 * 85 {
        let key = format!("key{key_index:08}");
        assert!(db
            .put_if_absent(key.as_bytes(), &value)
            .unwrap()
            .is_written());
        payload += key.len() + VALUE_BYTES;
        key_index += 1;
    }
    let stats = db.stats();
    assert_eq!(
        stats.counter("memtable_switches"),
        0,
        "sealed before the memtable reached the write buffer size: {stats}"
    );
    assert_eq!(stats.counter("membuffer_writes"), 0, "{stats}");
    assert!(
        stats.memtable_bytes >= (WRITE_BUFFER_BYTES / 100 * 80) as u64,
        "{stats}"
    );
}

/// Puts new keys (16 bytes, 100-byte values, in a scattered order) until the first write
/// buffer is sealed; returns how many it took.
fn puts_until_the_first_seal(membuffer_enabled: bool) -> cairn::Result<u64> {
    let mut options = Options::default();
    options.file_system = Arc::new(MemFs::new());
    options.membuffer_enabled = membuffer_enabled;
    options.write_buffer_size_bytes = WRITE_BUFFER_BYTES;
    let db = Db::open("/db", options)?;
    let value = [b'v'; 100];
    for index in 0u64.. {
        if index % 64 == 0 && db.stats().counter("memtable_switches") > 0 {
            return Ok(index);
        }
        let key = format!("{:016x}", index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        db.put(key, value)?;
    }
    unreachable!("the loop returns")
}

/// A write buffer with the Membuffer on is sealed holding as many versions as one with it
/// off: the limit counts versions (the Membuffer's records, and not after a drain moved them
/// to the memtable), not the Membuffer's slot arrays. Counting those sealed it ~6 % early.
#[test]
fn a_write_buffer_with_the_membuffer_holds_as_many_versions_when_sealed() {
    let off = puts_until_the_first_seal(false).unwrap();
    let on = puts_until_the_first_seal(true).unwrap();
    assert!(
        on * 100 >= off * 99,
        "sealed after {on} puts with the Membuffer on, {off} with it off"
    );
}
