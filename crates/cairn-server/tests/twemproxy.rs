//! Scale-out through twemproxy (`nutcracker`, Debian package `nutcracker`): three
//! cairn-server processes on loopback behind one proxy with ketama hashing. The `redis` client
//! crate writes through the proxy; one node is killed with SIGKILL mid-run and restarted on
//! its directory and port; every write the proxy acknowledged (under `--sync always`) must
//! read back afterwards, through the proxy and from the node that owns it.
//!
//! Needs `nutcracker` on the PATH or at `/usr/sbin/nutcracker` (`.ci/run` installs it); the
//! test fails, naming the package, when it is missing. `CAIRN_NUTCRACKER` names another
//! binary. The setup is the one the README's "Scale-out with twemproxy" section documents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{temp_dir, Server};
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The nutcracker binary.
fn nutcracker_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CAIRN_NUTCRACKER") {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nutcracker"))
        .find(|path| path.exists());
    on_path.expect("nutcracker not found: install Debian's `nutcracker` package (.ci/run does)")
}

/// A port that was free a moment ago (nutcracker cannot be told to pick one itself).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The proxy configuration: ketama over three named nodes, no ejection (a dead node's keys
/// fail instead of moving, so no acknowledged write lands on a node that does not own it).
fn config(listen: u16, nodes: &[u16]) -> String {
    let mut text = format!(
        "cairn:\n  listen: 127.0.0.1:{listen}\n  hash: fnv1a_64\n  distribution: ketama\n  \
         redis: true\n  auto_eject_hosts: false\n  timeout: 2000\n  \
         server_retry_timeout: 100\n  server_failure_limit: 1\n  servers:\n"
    );
    for (index, port) in nodes.iter().enumerate() {
        text.push_str(&format!("   - 127.0.0.1:{port}:1 node{index}\n"));
    }
    text
}

/// A running nutcracker; killed when dropped.
struct Proxy {
    child: Child,
    port: u16,
}

impl Proxy {
    fn start(dir: &Path, nodes: &[u16]) -> Proxy {
        let binary = nutcracker_binary();
        for _ in 0..5 {
            let port = free_port();
            let conf = dir.join("nutcracker.yml");
            std::fs::write(&conf, config(port, nodes)).unwrap();
            let mut child = Command::new(&binary)
                .arg("-c")
                .arg(&conf)
                .arg("-o")
                .arg(dir.join("nutcracker.log"))
                .args(["-a", "127.0.0.1", "-s", &free_port().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Proxy { child, port };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // lost the port race: try another
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "nutcracker did not start (see its log in {})",
            dir.display()
        );
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(10))
            .unwrap()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `SET key value` through the proxy; true if acknowledged. A broken connection is replaced.
fn try_set(proxy: &Proxy, connection: &mut redis::Connection, key: &str, value: &str) -> bool {
    let outcome: redis::RedisResult<()> = redis::cmd("SET").arg(key).arg(value).query(connection);
    match outcome {
        Ok(()) => true,
        Err(error) => {
            if error.is_connection_dropped() || error.is_io_error() {
                *connection = proxy.client();
            }
            false
        }
    }
}

#[test]
fn a_killed_node_behind_twemproxy_loses_no_acknowledged_write() {
    let root = temp_dir("twemproxy");
    let mut nodes: Vec<Server> = (0..3)
        .map(|index| {
            let dir = root.join(format!("node{index}"));
            std::fs::create_dir_all(&dir).unwrap();
            Server::start_in(&dir, &["--sync", "always"])
        })
        .collect();
    let ports: Vec<u16> = nodes.iter().map(|node| node.port).collect();
    let proxy = Proxy::start(&root, &ports);
    let mut connection = proxy.client();
    let mut acknowledged: BTreeMap<String, String> = BTreeMap::new();
    // Phase 1: every node up, every write must succeed.
    for index in 0..300 {
        let (key, value) = (format!("key:{index}"), format!("value-{index}"));
        assert!(try_set(&proxy, &mut connection, &key, &value), "{key}");
        acknowledged.insert(key, value);
    }
    // Phase 2: node 1 dies without warning; keys it owns fail, the rest go on.
    let victim_dir = nodes[1].dir.clone();
    let victim = nodes.remove(1);
    drop(victim); // SIGKILL: no flush, no close
    let mut failed = 0;
    for index in 300..600 {
        let (key, value) = (format!("key:{index}"), format!("value-{index}"));
        if try_set(&proxy, &mut connection, &key, &value) {
            acknowledged.insert(key, value);
        } else {
            failed += 1;
        }
    }
    assert!(failed > 0, "some keys hash to the killed node");
    // Phase 3: restart it on its directory and port; the proxy reconnects on its own.
    let restarted = Server::start_in(&victim_dir, &["--port", &ports[1].to_string()]);
    assert_eq!(restarted.port, ports[1]);
    nodes.insert(1, restarted);
    let deadline = Instant::now() + Duration::from_secs(30);
    for index in 600..900 {
        let (key, value) = (format!("key:{index}"), format!("value-{index}"));
        while !try_set(&proxy, &mut connection, &key, &value) {
            assert!(
                Instant::now() < deadline,
                "proxy never reached the restarted node"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        acknowledged.insert(key, value);
    }
    // Every acknowledged write reads back through the proxy, and exactly one node has it.
    let mut direct: Vec<redis::Connection> = nodes.iter().map(Server::client).collect();
    for (key, value) in &acknowledged {
        let read: Option<String> = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
        assert_eq!(read.as_ref(), Some(value), "{key} through the proxy");
        let mut holders = 0;
        for node in &mut direct {
            let read: Option<String> = redis::cmd("GET").arg(key).query(node).unwrap();
            holders += usize::from(read.as_ref() == Some(value));
        }
        assert_eq!(holders, 1, "{key} lives on exactly one node");
    }
    // A multi-key command the proxy splits across nodes, and a counter.
    let _: () = redis::cmd("MSET")
        .arg("m:a")
        .arg("1")
        .arg("m:b")
        .arg("2")
        .arg("m:c")
        .arg("3")
        .query(&mut connection)
        .unwrap();
    let values: Vec<String> = redis::cmd("MGET")
        .arg("m:a")
        .arg("m:b")
        .arg("m:c")
        .query(&mut connection)
        .unwrap();
    assert_eq!(values, vec!["1", "2", "3"]);
    let count: i64 = redis::cmd("INCRBY")
        .arg("counter")
        .arg(5)
        .query(&mut connection)
        .unwrap();
    assert_eq!(count, 5);
    report_throughput(&proxy, &nodes[0]);
}

/// Prints (does not assert: timing) SETs per second through the proxy and to one node
/// directly, one client, unpipelined — a debug build's numbers, for orientation only.
fn report_throughput(proxy: &Proxy, node: &Server) {
    let rate = |connection: &mut redis::Connection| {
        let started = Instant::now();
        for index in 0..2000 {
            let _: () = redis::cmd("SET")
                .arg(format!("rate:{index}"))
                .arg("x")
                .query(connection)
                .unwrap();
        }
        2000.0 / started.elapsed().as_secs_f64()
    };
    let through_proxy = rate(&mut proxy.client());
    let direct = rate(&mut node.client());
    eprintln!("twemproxy: {through_proxy:.0} SET/s through the proxy, {direct:.0} SET/s direct");
}
