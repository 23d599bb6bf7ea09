//! Starts the real `cairn-server` binary on a free port for integration tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh, empty directory under the system temp directory, removed when dropped (every
/// test run used to leave its servers' databases behind in the temp directory).
pub struct TempDir(PathBuf);

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `<tmp>/cairn-server-<name>-<pid>-<n>`, emptying it first if a crashed run left it.
pub fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!(
        "cairn-server-{name}-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// A running server process; killed when dropped (then its own directory, if it has one,
/// is removed).
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    owned: Option<TempDir>,
}

impl Server {
    /// Starts the server on `dir`, which the caller keeps, and waits until it listens.
    pub fn start_in(dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-server"))
            .args(["--port", "0", "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        reader.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server {
            child,
            port,
            dir: dir.to_path_buf(),
            owned: None,
        }
    }

    /// Starts the server on a fresh directory of its own with extra arguments.
    pub fn start_with(name: &str, extra: &[&str]) -> Server {
        let dir = temp_dir(name);
        let mut server = Server::start_in(&dir, extra);
        server.owned = Some(dir);
        server
    }

    /// Starts a `db` server on a fresh directory of its own.
    pub fn start(name: &str) -> Server {
        Server::start_with(name, &[])
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        self.wait()
    }

    /// Waits (at most 20 s) for the process to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asserts that a fresh connection still answers PING.
    pub fn assert_alive(&self) {
        let mut raw = self.raw();
        raw.send(b"PING\r\n");
        assert_eq!(raw.read_reply(), b"+PONG\r\n");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw TCP connection for protocol tests.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw { stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads whatever arrives until the server pauses briefly (or closes).
    pub fn read_reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buffer = [0u8; 65536];
        loop {
            let count = match self.stream.read(&mut buffer) {
                Ok(count) => count,
                Err(_) => return out,
            };
            if count == 0 {
                return out;
            }
            out.extend_from_slice(&buffer[..count]);
            if out.ends_with(b"\r\n") {
                self.stream
                    .set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
            }
        }
    }

    /// True once the server has closed the connection.
    pub fn is_closed(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buffer = [0u8; 1024];
        matches!(self.stream.read(&mut buffer), Ok(0) | Err(_))
    }
}
