//! A full disk while the WAL is written through a memory mapping: the write that needs more
//! log space fails with an I/O error (never a `SIGBUS` from touching unbacked mapped pages),
//! later writes are refused, and every acknowledged write is there after reopening.
//!
//! "Disk full" is simulated with `RLIMIT_FSIZE`, which makes `fallocate` past the limit fail
//! with `EFBIG` (the limit is per process, so it is set in a child: this test binary
//! re-executed with `CAIRN_FSIZE_CHILD` set; `SIGXFSZ` is ignored there so the call fails
//! instead of killing the process). The child prints `ack N` per acknowledged put and a final
//! `error <message>` line.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use cairn::{Db, Error, Options};
use std::process::Command;

/// Bytes the child may write per file: the first 4 MiB WAL window fits, the second does not.
const FILE_SIZE_LIMIT_BYTES: u64 = 6 << 20;

fn options() -> Options {
    let mut options = Options::default();
    // Large enough that no flush happens: the WAL is the only file that grows.
    options.write_buffer_size_bytes = 256 << 20;
    options
}

fn key(counter: u64) -> Vec<u8> {
    common::key(counter, 10)
}

#[test]
fn file_size_limit_child() {
    let Ok(directory) = std::env::var("CAIRN_FSIZE_CHILD") else {
        return;
    };
    // SAFETY: plain system calls with valid arguments, made before any thread of the child
    // touches files; `SIG_IGN` for SIGXFSZ turns the signal into an EFBIG error return.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: FILE_SIZE_LIMIT_BYTES,
            rlim_max: FILE_SIZE_LIMIT_BYTES,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let db = Db::open(&directory, options()).unwrap();
    let value = vec![b'v'; 1000];
    let mut failure = None;
    for counter in 0..20_000u64 {
        match db.put(&key(counter), &value) {
            Ok(()) => println!("ack {counter}"),
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    let Some(error) = failure else {
        println!("error none");
        return;
    };
    let kind = match &error {
        Error::Io { operation, .. } => format!("io {operation}"),
        other => format!("other {other}"),
    };
    // Once the log failed, writes stay refused.
    let after = match db.put(b"after", b"x") {
        Ok(()) => "accepted".to_string(),
        Err(Error::WritesStopped { .. }) => "stopped".to_string(),
        Err(other) => format!("other {other}"),
    };
    println!("error {kind}; then {after}");
    drop(db);
}

#[test]
fn a_full_disk_fails_the_mapped_wal_write_cleanly_and_loses_nothing_acknowledged() {
    let directory = std::env::temp_dir().join(format!("cairn-fsize-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "file_size_limit_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CAIRN_FSIZE_CHILD", &directory)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the child must exit normally, not die of a signal: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let acknowledged = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("ack "))
        .filter_map(|number| number.trim().parse::<u64>().ok())
        .max()
        .expect("some puts were acknowledged before the limit");
    let error_line = stdout
        .lines()
        .find(|line| line.starts_with("error "))
        .expect("the child reports how the writes ended");
    assert_eq!(
        error_line, "error io fallocate; then stopped",
        "the put that needed a new WAL window fails with the fallocate error"
    );
    // ~4 MiB of log fit before the limit: thousands of 1 KB puts.
    assert!(acknowledged > 3000, "only {acknowledged} puts fit");

    let db = Db::open(&directory, options()).unwrap();
    for counter in 0..=acknowledged {
        assert_eq!(
            db.get(&key(counter)).unwrap().as_deref(),
            Some(&[b'v'; 1000][..]),
            "acknowledged put {counter} lost"
        );
    }
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&directory);
}
