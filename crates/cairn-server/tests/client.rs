//! The real server driven by the `redis` crate: both engines, expiry across a restart, and
//! clean shutdown by SIGTERM and by SHUTDOWN.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{temp_dir, Server};
use redis::Commands;
use std::time::Duration;

#[test]
fn strings_hashes_and_scan_over_db() {
    let server = Server::start("client-db");
    exercise(&mut server.client());
}

#[test]
fn strings_hashes_and_scan_over_memstore() {
    let server = Server::start_with(
        "client-mem",
        &["--engine", "memstore", "--memstore-bytes", "67108864"],
    );
    exercise(&mut server.client());
}

fn exercise(connection: &mut redis::Connection) {
    let _: () = connection.set("greeting", "hello").unwrap();
    let value: String = connection.get("greeting").unwrap();
    assert_eq!(value, "hello");
    let binary = vec![0u8, 13, 10, 255, 0];
    let _: () = connection.set(&binary[..], &binary[..]).unwrap();
    let back: Vec<u8> = connection.get(&binary[..]).unwrap();
    assert_eq!(back, binary);
    let count: i64 = connection.incr("counter", 5).unwrap();
    assert_eq!(count, 5);
    let _: () = connection
        .hset_multiple("h", &[("a", "1"), ("b", "2")])
        .unwrap();
    let all: Vec<(String, String)> = connection.hgetall("h").unwrap();
    assert_eq!(
        all,
        vec![
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string())
        ]
    );
    let error = connection.get::<_, String>("h").unwrap_err();
    assert_eq!(error.code(), Some("WRONGTYPE"));
    for index in 0..30 {
        let _: () = connection.set(format!("scan:{index}"), index).unwrap();
    }
    let mut keys: Vec<String> = connection.scan_match("scan:*").unwrap().collect();
    keys.sort();
    assert_eq!(keys.len(), 30);
    let size: i64 = redis::cmd("DBSIZE").query(connection).unwrap();
    assert_eq!(size, 34);
    let (first, second): (String, i64) = redis::pipe()
        .get("greeting")
        .incr("counter", 1)
        .query(connection)
        .unwrap();
    assert_eq!((first.as_str(), second), ("hello", 6));
    let info: String = redis::cmd("INFO").query(connection).unwrap();
    assert!(info.contains("# Engine"), "{info}");
}

#[test]
fn expiry_holds_across_restart_and_sigterm_closes_cleanly() {
    let dir = temp_dir("expiry");
    let server = Server::start_in(&dir, &["--sync", "always"]);
    let mut connection = server.client();
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(100)
        .query(&mut connection)
        .unwrap();
    // Never read before the restart: only the envelope's expiry can hide it afterwards.
    let _: () = redis::cmd("SET")
        .arg("unread")
        .arg("v")
        .arg("PX")
        .arg(100)
        .query(&mut connection)
        .unwrap();
    let _: () = connection.set("kept", "v").unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let gone: Option<String> = connection.get("short").unwrap();
    assert_eq!(gone, None);
    drop(connection);
    let status = server.terminate();
    assert!(status.success(), "SIGTERM exit: {status}");
    let server = Server::start_in(&dir, &[]);
    let mut connection = server.client();
    let gone: Option<String> = connection.get("short").unwrap();
    assert_eq!(gone, None, "still gone after a restart");
    let kept: String = connection.get("kept").unwrap();
    assert_eq!(kept, "v");
    let exists: i64 = connection.exists(&["short", "unread"]).unwrap();
    assert_eq!(exists, 0);
    let ttl: i64 = connection.ttl("unread").unwrap();
    assert_eq!(ttl, -2);
}

#[test]
fn shutdown_command_stops_the_server() {
    let dir = temp_dir("shutdown");
    let mut server = Server::start_in(&dir, &[]);
    let mut connection = server.client();
    let _: () = connection.set("durable", "yes").unwrap();
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut connection);
    let status = server.wait();
    assert!(status.success(), "SHUTDOWN exit: {status}");
    drop(server);
    let server = Server::start_in(&dir, &[]);
    let value: String = server.client().get("durable").unwrap();
    assert_eq!(value, "yes");
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = temp_dir("kill");
    let server = Server::start_in(&dir, &["--sync", "never"]);
    let mut connection = server.client();
    let _: () = connection.set("a", "1").unwrap();
    let _: () = connection.hset("h", "f", "v").unwrap();
    let count: i64 = connection.incr("n", 3).unwrap();
    assert_eq!(count, 3);
    // Dropping the server kills it with SIGKILL: no flush, no close.
    drop(server);
    let server = Server::start_in(&dir, &[]);
    let mut connection = server.client();
    let (a, f, n): (String, String, i64) = redis::pipe()
        .get("a")
        .hget("h", "f")
        .get("n")
        .query(&mut connection)
        .unwrap();
    assert_eq!((a.as_str(), f.as_str(), n), ("1", "v", 3));
}

#[test]
fn one_runtime_thread_serves_every_command() {
    let server = Server::start_with("client-one-thread", &["--threads", "1"]);
    exercise(&mut server.client());
    concurrent_clients(&server);
}

#[test]
fn concurrent_increments_and_msetnx_are_atomic() {
    concurrent_clients(&Server::start("concurrent"));
}

/// Four clients at once: INCR, HINCRBY and MSETNX stay atomic.
fn concurrent_clients(server: &Server) {
    let url = server.url();
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut won = 0;
                for round in 0..100 {
                    let _: i64 = connection.incr("shared", 1).unwrap();
                    let _: i64 = connection
                        .hincr("hash", format!("f{}", round % 7), 1)
                        .unwrap();
                    let set: i64 = redis::cmd("MSETNX")
                        .arg(format!("x{round}"))
                        .arg(thread)
                        .arg(format!("y{round}"))
                        .arg(thread)
                        .query(&mut connection)
                        .unwrap();
                    won += set;
                }
                won
            })
        })
        .collect();
    let won: i64 = threads
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .sum();
    assert_eq!(won, 100, "exactly one MSETNX wins each round");
    let mut connection = server.client();
    let total: i64 = connection.get("shared").unwrap();
    assert_eq!(total, 400);
    let fields: i64 = connection.hlen("hash").unwrap();
    assert_eq!(fields, 7);
    let values: Vec<i64> = connection.hvals("hash").unwrap();
    assert_eq!(values.iter().sum::<i64>(), 400);
    for round in 0..100 {
        let (x, y): (String, String) = redis::pipe()
            .get(format!("x{round}"))
            .get(format!("y{round}"))
            .query(&mut connection)
            .unwrap();
        assert_eq!(x, y, "both keys of one MSETNX come from one client");
    }
}
