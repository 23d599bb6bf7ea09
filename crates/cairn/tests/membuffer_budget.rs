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
