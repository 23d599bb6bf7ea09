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
