//! Running the `cairn` binary from integration tests, in a fresh temporary directory.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockWriteGuard};

/// Held shared across each spawn of the binary. Between its fork and its exec a child holds a
/// copy of every descriptor of the test process, a database's LOCK included, and an flock
/// lasts while any copy does: a test that opens a database in-process holds this exclusively
/// ([`no_spawns`]) while it is open, so no child of a concurrent test keeps its LOCK alive
/// and makes the next command find the database locked.
static SPAWNS: RwLock<()> = RwLock::new(());

/// Keeps every test of this binary from spawning `cairn` until the guard is dropped.
pub fn no_spawns() -> RwLockWriteGuard<'static, ()> {
    SPAWNS.write().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "cairn-cli-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one run printed.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cairn <args>` in `cwd` with `stdin` as its input.
pub fn cairn(cwd: &Path, args: &[&str], stdin: &str) -> Run {
    finish(spawn(cwd, args), stdin)
}

/// Runs `cairn <args>` in `cwd` with `stdin` as its input and its stdout a pipe whose reading
/// end is closed before the child prints anything (as `| head -0` would); `stdout` is empty.
pub fn cairn_with_closed_stdout(cwd: &Path, args: &[&str], stdin: &str) -> Run {
    let mut child = spawn(cwd, args);
    drop(child.stdout.take());
    finish(child, stdin)
}

/// Starts `cairn <args>` in `cwd` with piped standard streams.
fn spawn(cwd: &Path, args: &[&str]) -> Child {
    // `spawn` returns once the child has exec'd (or failed to), dropping its copies.
    let spawning = SPAWNS.read().unwrap_or_else(PoisonError::into_inner);
    let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cairn");
    drop(spawning);
    child
}

/// Feeds `stdin` to `child` from a thread and waits for it. The child may stop reading part
/// way (a closed output stops the shell): a failed write here is expected.
fn finish(mut child: Child, stdin: &str) -> Run {
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.as_bytes().to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let output: Output = child.wait_with_output().expect("wait for cairn");
    feeder.join().unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `cairn <args>` and requires success; returns stdout.
pub fn ok(cwd: &Path, args: &[&str]) -> String {
    let run = cairn(cwd, args, "");
    assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
    run.stdout
}

/// The sorted file names in `dir`.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
