//! The directory one run's databases live under (`--db`); each engine gets a subdirectory.

use crate::error::{Context, Result};
use std::path::{Path, PathBuf};

/// Where databases go without `--db`.
const DEFAULT_ROOT: &str = "/tmp/cairn-bench-db";

/// The root directory of one run's databases.
#[derive(Debug)]
pub struct DbRoot {
    path: PathBuf,
}

impl DbRoot {
    /// The root for `--db` (`None`: not given), created if missing.
    pub fn acquire(requested: Option<&Path>) -> Result<DbRoot> {
        let path = requested.map_or_else(|| PathBuf::from(DEFAULT_ROOT), Path::to_path_buf);
        std::fs::create_dir_all(&path).context(format!("creating {}", path.display()))?;
        Ok(DbRoot { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
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
}
