//! The real server driven by Debian's `redis-cli`. CI installs redis-tools; a missing
//! redis-cli fails these tests rather than skipping them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Server;
use std::process::Command;

fn cli(server: &Server, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &server.port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli must be installed (Debian package redis-tools)");
    assert!(output.status.success(), "redis-cli {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn redis_cli_round_trip() {
    let server = Server::start("cli");
    assert_eq!(cli(&server, &["PING"]), "PONG\n");
    assert_eq!(cli(&server, &["SET", "k", "v", "EX", "100"]), "OK\n");
    assert_eq!(cli(&server, &["GET", "k"]), "v\n");
    assert_eq!(cli(&server, &["TTL", "k"]), "100\n");
    assert_eq!(cli(&server, &["HSET", "h", "f", "1", "g", "2"]), "2\n");
    assert_eq!(cli(&server, &["HGETALL", "h"]), "f\n1\ng\n2\n");
    assert_eq!(cli(&server, &["TYPE", "h"]), "hash\n");
    let mut keys: Vec<String> = cli(&server, &["--scan"])
        .lines()
        .map(str::to_string)
        .collect();
    keys.sort();
    assert_eq!(keys, vec!["h", "k"]);
    assert_eq!(cli(&server, &["RANGE", "a", "z"]), "k\nv\n");
    assert!(cli(&server, &["INFO", "engine"]).contains("engine:db"));
    assert!(cli(&server, &["NOSUCH", "x"]).contains("unknown command 'NOSUCH'"));
}
