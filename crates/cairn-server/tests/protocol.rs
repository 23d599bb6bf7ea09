//! Bad input as Redis handles it (its tests/unit/protocol.tcl): each case gets Redis's error
//! text and a closed connection, and a second connection still answers PING.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Server;

fn expect_error_and_close(server: &Server, request: &[u8], error: &str) {
    let mut raw = server.raw();
    raw.send(request);
    let reply = raw.read_reply();
    assert_eq!(
        String::from_utf8_lossy(&reply),
        format!("-ERR Protocol error: {error}\r\n")
    );
    assert!(raw.is_closed(), "connection closed after {error}");
    server.assert_alive();
}

#[test]
fn malformed_requests_get_redis_errors() {
    let server = Server::start("protocol");
    expect_error_and_close(&server, b"*1\r\n$blabla\r\n", "invalid bulk length");
    expect_error_and_close(&server, b"*3000000000\r\n", "invalid multibulk length");
    expect_error_and_close(&server, b"*1\r\n$-10\r\n", "invalid bulk length");
    expect_error_and_close(&server, b"*1\r\nfoo\r\n", "expected '$', got 'f'");
    expect_error_and_close(&server, b"set \"foo\r\n", "unbalanced quotes in request");
    expect_error_and_close(&server, b"*1\r\n$600000000\r\n", "invalid bulk length");
    expect_error_and_close(&server, &[b'a'; 70 * 1024], "too big inline request");
}

#[test]
fn ignored_and_pipelined_requests() {
    let server = Server::start("pipeline");
    let mut raw = server.raw();
    raw.send(b"*-10\r\nPING\r\n");
    assert_eq!(raw.read_reply(), b"+PONG\r\n");
    let mut pipeline = Vec::new();
    for index in 0..100 {
        pipeline.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$3\r\nk{index:02}\r\n$1\r\nv\r\n").as_bytes(),
        );
    }
    pipeline.extend_from_slice(b"GET k42\r\n");
    raw.send(&pipeline);
    let mut expected = b"+OK\r\n".repeat(100);
    expected.extend_from_slice(b"$1\r\nv\r\n");
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let more = raw.read_reply();
        assert!(!more.is_empty(), "connection closed early");
        got.extend(more);
    }
    assert_eq!(got, expected);
    raw.send(b"*2\r\n$4\r\nECHO\r\n$4\r\n\x00\r\n\xff\r\n");
    assert_eq!(raw.read_reply(), b"$4\r\n\x00\r\n\xff\r\n");
    raw.send(b"FOO a b\r\n");
    assert_eq!(
        raw.read_reply(),
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
    raw.send(b"GET\r\n");
    assert_eq!(
        raw.read_reply(),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    raw.send(b"HELLO 2\r\n");
    assert!(raw.read_reply().starts_with(b"*14\r\n$6\r\nserver\r\n"));
    raw.send(b"HELLO 3\r\n");
    assert_eq!(
        raw.read_reply(),
        b"-NOPROTO unsupported protocol version\r\n"
    );
    raw.send(b"QUIT\r\n");
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    assert!(raw.is_closed());
}

#[test]
fn configured_limits() {
    let server = Server::start("limits");
    let mut raw = server.raw();
    raw.send(b"CONFIG SET proto-max-bulk-len 1048576\r\n");
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    expect_error_and_close(
        &server,
        b"*2\r\n$3\r\nGET\r\n$1048577\r\n",
        "invalid bulk length",
    );
    raw.send(b"CONFIG SET client-query-buffer-limit 1048576\r\n");
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    let mut greedy = server.raw();
    // A bulk within proto-max-bulk-len but beyond the query buffer limit closes the client.
    raw.send(b"CONFIG SET proto-max-bulk-len 4194304\r\n");
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    greedy.send(b"*2\r\n$3\r\nGET\r\n$3000000\r\n");
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..2 {
        // The server may close while these are in flight.
        let _ = std::io::Write::write_all(&mut greedy.stream, &chunk);
    }
    assert!(greedy.is_closed());
    server.assert_alive();
    raw.send(b"CONFIG SET maxclients 2\r\n");
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    // A connection is counted when the server's task for it runs, not at the TCP accept: a
    // round trip makes sure `second` holds the last slot before `third` connects (without it,
    // `third`'s task could run first under load and `second` would be the one refused). The
    // closed `greedy` frees its slot just after its close, so `second` may be refused once.
    let mut second = server.raw();
    for _ in 0..50 {
        // A refused connection may already be closed: a failed send is a refusal too.
        let _ = std::io::Write::write_all(&mut second.stream, b"PING\r\n");
        if second.read_reply() == b"+PONG\r\n" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        second = server.raw();
    }
    let mut third = server.raw();
    assert_eq!(
        third.read_reply(),
        b"-ERR max number of clients reached\r\n"
    );
    drop(second);
    std::thread::sleep(std::time::Duration::from_millis(200));
    server.assert_alive();
}

#[test]
fn oversized_keys_and_values() {
    let server = Server::start("sizes");
    let mut raw = server.raw();
    let key = vec![b'k'; 70 * 1024];
    let mut request = format!("*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).into_bytes();
    request.extend_from_slice(&key);
    request.extend_from_slice(b"\r\n$1\r\nv\r\n");
    raw.send(&request);
    assert!(raw.read_reply().starts_with(b"-ERR key too large"));
    raw.send(b"SETRANGE k 268435456 x\r\n");
    assert!(raw.read_reply().starts_with(b"-ERR value too large"));
    raw.send(b"APPEND k x\r\n");
    assert_eq!(raw.read_reply(), b":1\r\n");
    server.assert_alive();
}

#[test]
fn a_pipelined_run_of_sets_replies_per_command_and_later_commands_see_it() {
    let server = Server::start("set-run");
    let mut raw = server.raw();
    let set = |key: &[u8], value: &[u8]| {
        let mut out = format!("*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).into_bytes();
        out.extend_from_slice(key);
        out.extend_from_slice(format!("\r\n${}\r\n", value.len()).as_bytes());
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
        out
    };
    let long_key = vec![b'k'; 70 * 1024];
    let mut pipeline = Vec::new();
    pipeline.extend(set(b"a", b"1"));
    pipeline.extend(set(&long_key, b"x"));
    pipeline.extend(set(b"a", b"2"));
    pipeline.extend(set(b"b", b"3"));
    pipeline.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n");
    pipeline.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1\r\nb\r\n");
    pipeline.extend(set(b"b", b"9"));
    pipeline.extend_from_slice(b"*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n");
    raw.send(&pipeline);
    let expected = "+OK\r\n-ERR key too large: 71680 bytes (the limit is 65535 bytes)\r\n\
                    +OK\r\n+OK\r\n$1\r\n2\r\n:4\r\n+OK\r\n*2\r\n$1\r\n2\r\n$1\r\n9\r\n";
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let more = raw.read_reply();
        assert!(!more.is_empty(), "connection closed early");
        got.extend(more);
    }
    assert_eq!(String::from_utf8_lossy(&got), expected);
    server.assert_alive();
}

/// Replies of one read buffer past the server's output limit (64 MiB): the server writes a
/// round of them, then runs the requests it already holds without waiting for more input.
#[test]
fn a_pipeline_whose_replies_pass_the_output_limit_is_answered_whole() {
    use std::io::Read;
    let server = Server::start("large-replies");
    let mut raw = server.raw();
    let value = vec![b'v'; 1 << 20];
    let mut set = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", value.len()).into_bytes();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n");
    raw.send(&set);
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    let mut reply = format!("${}\r\n", value.len()).into_bytes();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\n");
    let gets = 80;
    raw.send(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(gets));
    raw.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut replies = vec![0; gets * reply.len()];
    raw.stream.read_exact(&mut replies).unwrap();
    assert!(replies.chunks(reply.len()).all(|one| one == reply));
    raw.send(b"PING\r\n");
    assert_eq!(raw.read_reply(), b"+PONG\r\n");
}
