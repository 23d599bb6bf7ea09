//! The directory one run's databases live under (`--db`). Each engine gets a subdirectory of
//! it, wiped before and removed after each of its sequences (`run_sequence` in `main.rs`).
//!
//! Two runs must never share a root: one run wiping another's tables under a live engine
//! shows up in the other as a checksum mismatch, and an engine's own LOCK file cannot help
//! because the wipe comes before the open. So:
//! - without `--db` a run gets a fresh root of its own, `cairn-bench-<pid>-<random>` under
//!   the system temporary directory (`TMPDIR`, else `/tmp`), removed with everything in it
//!   when the run ends, on success or error (a run killed by a signal leaves it behind; the
//!   pid in its name says whose it was);
//! - with `--db DIR` the run first takes an exclusive advisory lock (`flock`) on
//!   `DIR.cairn-bench-lock` beside DIR and writes its pid there; another cairn-bench naming
//!   DIR while the first is alive is refused, with an error naming the holder, before it
//!   creates or removes anything. The kernel drops the lock when the holder exits, however it
//!   exits; a run that ends normally also removes the lock file. DIR itself is kept.
//!
//! Thread-safety: a `DbRoot` belongs to the run's main thread; nothing in it is shared.
//!
//! Invariants:
//! 1. Nothing under a root is removed before the root is held: made by this run (private)
//!    or locked by it (`--db`).
//! 2. A private root is made with `create_dir`, never adopted: when the name exists, another
//!    random name is tried.
//! 3. A lock counts only while the path still names the file that was locked (same device
//!    and inode after locking): a holder unlinks the file when it lets go, and a contender
//!    that opened the old file just before must not take the lock of a file nobody else sees.

use crate::error::{BenchError, Context, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Appended to `--db`'s file name to name its lock file, beside it.
const LOCK_SUFFIX: &str = ".cairn-bench-lock";

/// Tries at a fresh private name or at a lock file replaced under us before giving up.
const ATTEMPTS: usize = 16;

/// The root directory of one run's databases, held for as long as the value lives.
#[derive(Debug)]
pub struct DbRoot {
    path: PathBuf,
    hold: Hold,
}

/// How a root is held.
#[derive(Debug)]
enum Hold {
    /// Made by this run under the temporary directory; removed with its contents on drop.
    Private,
    /// Named by `--db`: its lock file and the open handle that holds the lock (closing it
    /// releases the lock).
    Locked { lock_path: PathBuf, _file: File },
}

impl DbRoot {
    /// The root for `--db` (`None`: not given): a fresh private directory, or the named one
    /// once its lock is taken, created if missing. Errors when another live cairn-bench
    /// holds the named one.
    pub fn acquire(requested: Option<&Path>) -> Result<DbRoot> {
        match requested {
            None => DbRoot::private(&std::env::temp_dir()),
            Some(path) => DbRoot::locked(path),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One line for the run's header: where the databases are and how the root is held.
    pub fn describe(&self) -> String {
        match &self.hold {
            Hold::Private => format!(
                "{} (private to this run, removed at its end)",
                self.path.display()
            ),
            Hold::Locked { lock_path, .. } => format!(
                "{} (--db, held through {} until the run ends)",
                self.path.display(),
                lock_path.display()
            ),
        }
    }

    fn private(temp: &Path) -> Result<DbRoot> {
        for _ in 0..ATTEMPTS {
            let path = temp.join(format!(
                "cairn-bench-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(DbRoot {
                        path,
                        hold: Hold::Private,
                    })
                }
                Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(BenchError::from(error)
                        .context(format!("creating private database root {}", path.display())))
                }
            }
        }
        Err(BenchError::new(format!(
            "no free name for a private database root under {} after {ATTEMPTS} tries",
            temp.display()
        )))
    }

    fn locked(path: &Path) -> Result<DbRoot> {
        let lock_path = lock_path(path)?;
        let file = lock(path, &lock_path)?;
        std::fs::create_dir_all(path).context(format!("creating {}", path.display()))?;
        Ok(DbRoot {
            path: path.to_path_buf(),
            hold: Hold::Locked {
                lock_path,
                _file: file,
            },
        })
    }
}

impl Drop for DbRoot {
    fn drop(&mut self) {
        match &self.hold {
            Hold::Private => {
                if let Err(error) = std::fs::remove_dir_all(&self.path) {
                    eprintln!(
                        "cairn-bench: warning: could not remove {}: {error}",
                        self.path.display()
                    );
                }
            }
            // Unlinked while still locked; the handle closes after this, releasing the lock
            // (invariant 3 keeps a contender that opened the old file from using it).
            Hold::Locked { lock_path, .. } => {
                let _ = std::fs::remove_file(lock_path);
            }
        }
    }
}

/// `DIR.cairn-bench-lock` in DIR's parent, the parent resolved (and created) so that every
/// spelling of the same directory finds the same lock.
fn lock_path(dir: &Path) -> Result<PathBuf> {
    let name = dir.file_name().ok_or_else(|| {
        BenchError::new(format!(
            "--db {}: name a directory (its lock file goes beside it)",
            dir.display()
        ))
    })?;
    let parent = match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent).context(format!("creating {}", parent.display()))?;
    let parent =
        std::fs::canonicalize(parent).context(format!("resolving {}", parent.display()))?;
    let mut lock_name = name.to_os_string();
    lock_name.push(LOCK_SUFFIX);
    Ok(parent.join(lock_name))
}

/// Takes the lock on `lock_path` for `dir` without waiting, and writes this process's pid in it.
fn lock(dir: &Path, lock_path: &Path) -> Result<File> {
    let context = || format!("locking {}", lock_path.display());
    for _ in 0..ATTEMPTS {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock_path)
            .context(context())?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(held(dir, lock_path, &mut file)),
            Err(TryLockError::Error(error)) => {
                return Err(BenchError::from(error).context(context()))
            }
        }
        if !still_named(lock_path, &file)? {
            continue; // its holder let go and unlinked it: lock the file the path names now
        }
        file.set_len(0).context(context())?;
        writeln!(file, "{}", std::process::id()).context(context())?;
        return Ok(file);
    }
    Err(BenchError::new(format!(
        "{}: the lock file kept being replaced, {ATTEMPTS} tries",
        context()
    )))
}

/// Whether `lock_path` still names the open `file` (invariant 3).
fn still_named(lock_path: &Path, file: &File) -> Result<bool> {
    let held = file.metadata()?;
    match std::fs::metadata(lock_path) {
        Ok(named) => Ok(named.dev() == held.dev() && named.ino() == held.ino()),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(error) => {
            Err(BenchError::from(error).context(format!("checking {}", lock_path.display())))
        }
    }
}

/// The refusal when another process holds the lock, naming it by the pid it wrote.
fn held(dir: &Path, lock_path: &Path, file: &mut File) -> BenchError {
    let mut holder = String::new();
    let holder = match file.read_to_string(&mut holder) {
        Ok(_) if !holder.trim().is_empty() => format!("pid {}", holder.trim()),
        _ => "pid not yet written".to_string(),
    };
    BenchError::new(format!(
        "--db {} is in use by another cairn-bench ({holder}, lock {}): nothing was removed; \
         wait for that run, pass another --db, or leave --db out for a private directory",
        dir.display(),
        lock_path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of this test's own under the system temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "cairn-bench-dbroot-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn runs_without_db_never_share_a_root() {
        let first = DbRoot::acquire(None).unwrap();
        let second = DbRoot::acquire(None).unwrap();
        assert_ne!(
            first.path(),
            second.path(),
            "two runs without --db got the same database root"
        );
        assert!(first.path().is_dir() && second.path().is_dir());
        let (first_path, second_path) = (first.path().to_path_buf(), second.path().to_path_buf());
        drop(first);
        assert!(!first_path.exists(), "a private root outlived its run");
        assert!(second_path.is_dir(), "dropping one root removed another");
        drop(second);
        assert!(!second_path.exists(), "a private root outlived its run");
    }

    #[test]
    fn a_held_db_is_refused_and_left_alone() {
        let parent = scratch("held");
        let dir = parent.join("db");
        let first = DbRoot::acquire(Some(&dir)).unwrap();
        // What a live engine of the first run has on disk.
        std::fs::create_dir_all(dir.join("cairn")).unwrap();
        std::fs::write(dir.join("cairn").join("000001.sst"), b"live table").unwrap();

        let refused = DbRoot::acquire(Some(&dir));
        let message = match refused {
            Ok(_) => panic!(
                "a second run took --db {} while the first held it",
                dir.display()
            ),
            Err(error) => error.to_string(),
        };
        assert!(message.contains("in use"), "unclear refusal: {message}");
        assert!(
            message.contains(&std::process::id().to_string()),
            "the refusal does not name the holder: {message}"
        );
        assert_eq!(
            std::fs::read(dir.join("cairn").join("000001.sst")).unwrap(),
            b"live table",
            "the refused run touched the holder's tables"
        );

        // Released at the end of the run: the next run gets it, and an explicit root stays.
        drop(first);
        let again = DbRoot::acquire(Some(&dir)).unwrap();
        drop(again);
        assert!(dir.is_dir(), "an explicit --db was removed");
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn every_spelling_of_a_db_finds_the_same_lock() {
        let parent = scratch("spelling");
        let held = DbRoot::acquire(Some(&parent.join("db"))).unwrap();
        let respelled = parent.join(".").join("db/");
        assert!(DbRoot::acquire(Some(&respelled)).is_err());
        let lock_file = parent.join(format!("db{LOCK_SUFFIX}"));
        assert!(lock_file.is_file());
        drop(held);
        assert!(!lock_file.exists(), "the lock file outlived its run");
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn a_replaced_lock_file_is_not_the_lock() {
        let parent = scratch("replaced");
        let lock_path = parent.join("lock");
        let old = File::create(&lock_path).unwrap();
        assert!(still_named(&lock_path, &old).unwrap());
        std::fs::remove_file(&lock_path).unwrap();
        assert!(!still_named(&lock_path, &old).unwrap());
        let _new = File::create(&lock_path).unwrap();
        assert!(!still_named(&lock_path, &old).unwrap());
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn a_db_without_a_name_is_refused() {
        assert!(DbRoot::acquire(Some(Path::new("/"))).is_err());
    }
}
