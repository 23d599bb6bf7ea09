//! Expiry in the engine, end to end: a key set with `PX 100` is gone 150 ms later, stays
//! gone after a restart, and its bytes leave the disk once the database is compacted; TTLs
//! survive INCR and APPEND and PERSIST clears them, under `--sync always`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{temp_dir, Server};
use redis::Commands;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every file of `dir` whose bytes contain `marker`.
fn files_containing(dir: &Path, marker: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        if bytes.windows(marker.len()).any(|window| window == marker) {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn px_100_is_gone_after_150_ms_after_a_restart_and_from_disk_after_compaction() {
    let dir = temp_dir("expiry-disk");
    let marker = "px-marker-3b9e77a1c0d4";
    let server = Server::start_in(&dir, &["--sync", "always"]);
    let mut connection = server.client();
    let _: () = connection.set("before", "neighbour").unwrap();
    let _: () = connection.set("zafter", "neighbour").unwrap();
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg(marker)
        .arg("PX")
        .arg(100)
        .query(&mut connection)
        .unwrap();
    let set_at = Instant::now();
    std::thread::sleep(Duration::from_millis(150).saturating_sub(set_at.elapsed()));
    // Gone by now; poll with a generous deadline rather than trust one read.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let value: Option<String> = connection.get("short").unwrap();
        if value.is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "expired key still readable");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(connection);
    assert!(server.terminate().success());
    let server = Server::start_in(&dir, &[]);
    let mut connection = server.client();
    let value: Option<String> = connection.get("short").unwrap();
    assert_eq!(value, None, "still gone after a restart");
    let ttl: i64 = connection.ttl("short").unwrap();
    assert_eq!(ttl, -2);
    drop(connection);
    assert!(server.terminate().success());
    // Compact the server's database directly; obsolete files go at the next open.
    for _ in 0..2 {
        let db = cairn::Db::open(&dir, cairn::Options::default()).unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(db.get(b"mshort").unwrap(), None);
        db.close().unwrap();
    }
    assert_eq!(
        files_containing(&dir, marker.as_bytes()),
        Vec::<String>::new()
    );
    let server = Server::start_in(&dir, &[]);
    let mut connection = server.client();
    let neighbours: Vec<String> = connection.get(&["before", "zafter"]).unwrap();
    assert_eq!(neighbours, vec!["neighbour", "neighbour"]);
}

#[test]
fn counters_and_appends_keep_a_ttl_and_persist_clears_it_under_sync_always() {
    for engine in ["db", "memstore"] {
        let server = Server::start_with("expiry-rmw", &["--sync", "always", "--engine", engine]);
        let mut connection = server.client();
        let _: () = redis::cmd("SET")
            .arg("n")
            .arg(1)
            .arg("EX")
            .arg(3600)
            .query(&mut connection)
            .unwrap();
        let n: i64 = connection.incr("n", 41).unwrap();
        assert_eq!(n, 42);
        let ttl: i64 = connection.ttl("n").unwrap();
        assert!(
            (3500..=3600).contains(&ttl),
            "{engine}: INCR kept the TTL: {ttl}"
        );
        let length: i64 = connection.append("n", "0").unwrap();
        assert_eq!(length, 3);
        let ttl: i64 = connection.ttl("n").unwrap();
        assert!(
            (3500..=3600).contains(&ttl),
            "{engine}: APPEND kept the TTL: {ttl}"
        );
        let persisted: i64 = connection.persist("n").unwrap();
        assert_eq!(persisted, 1);
        let ttl: i64 = connection.ttl("n").unwrap();
        assert_eq!(ttl, -1, "{engine}: PERSIST cleared the TTL");
        let value: String = connection.get("n").unwrap();
        assert_eq!(value, "420");
        // An expiry in the past removes the key at once.
        let _: () = redis::cmd("PEXPIREAT")
            .arg("n")
            .arg(1)
            .query(&mut connection)
            .unwrap();
        let exists: i64 = connection.exists("n").unwrap();
        assert_eq!(exists, 0, "{engine}");
    }
}
