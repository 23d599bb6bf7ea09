//! `Db::checkpoint`: a consistent copy of the database in another directory that opens as a
//! database of its own.
//!
//! The checkpoint holds exactly the writes up to one sequence number S: the database is
//! flushed, then the current version and the MANIFEST's last sequence are read together
//! under the `versions` lock (a flush installs both in one edit, so the version's tables hold
//! every write <= S and none above). Its tables are hard-linked (copied where the file
//! system has no links: tables are immutable, so either is the same file), and a fresh
//! MANIFEST listing them at S is written into the destination, followed by CURRENT. No WAL
//! is needed: nothing <= S lives only in a WAL after the flush.
//!
//! Thread-safety contract: runs on the caller's thread beside writers, flushes and
//! compactions. Holding the `Arc` of the version keeps its tables in the live set, so
//! obsolete-file deletion cannot remove one while it is being linked.
//!
//! Invariants:
//! 1. The destination's MANIFEST lists exactly the tables of one installed version, with the
//!    last sequence installed with it.
//! 2. CURRENT is written last: a checkpoint interrupted before it is not a database (opening
//!    it fails with `NotFound`), never a partial one.

use super::inner::DbInner;
use crate::error::{Error, Result};
use crate::filename;
use crate::version::{AddedFile, VersionEdit, VersionSet};
use std::path::Path;
use std::sync::Arc;

impl DbInner {
    /// Writes a checkpoint of the current state into `destination` (which must not exist or
    /// be empty); returns its sequence number.
    pub(super) fn checkpoint(&self, destination: &Path) -> Result<crate::SequenceNumber> {
        let file_system = &self.file_system;
        if file_system.exists(destination)? && !file_system.list(destination)?.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint destination {} is not empty",
                destination.display()
            )));
        }
        self.flush()?;
        let (version, last_sequence) = {
            let versions = super::inner::lock(&self.versions);
            (versions.current(), versions.last_sequence)
        };
        file_system.create_dir_all(destination)?;
        let mut checkpoint = VersionSet::new(
            destination,
            Arc::clone(file_system),
            self.options.level_count,
            self.options.manifest_size_bytes_max,
        );
        let mut edit = VersionEdit {
            last_sequence: Some(last_sequence),
            ..VersionEdit::default()
        };
        for level in 0..version.level_count() {
            let runs = version.level(level);
            for (index, run) in runs.runs().enumerate() {
                // Each file with its run, as the MANIFEST records them: without it the
                // level's runs would fold into one. Level-0 run ids are file numbers.
                let run_id = runs.run_id(index).filter(|_| level > 0);
                if let Some(id) = run_id {
                    // Run ids share the file numbers' space: a run made later in the copy
                    // must get a larger id than every run it holds now.
                    checkpoint.reserve_file_numbers_through(id);
                }
                for file in run.files() {
                    file_system.hard_link(
                        &filename::table_path(&self.directory, file.number),
                        &filename::table_path(destination, file.number),
                    )?;
                    checkpoint.reserve_file_numbers_through(file.number);
                    edit.added_files.push((level, AddedFile::from_meta(file)));
                    if let Some(id) = run_id {
                        edit.file_runs.push((file.number, id));
                    }
                }
            }
        }
        file_system.sync_dir(destination)?;
        // WALs numbered below the first free number are "flushed": there are none to replay.
        edit.log_number = Some(checkpoint.new_file_number());
        checkpoint.apply_unlogged(&edit)?;
        checkpoint.write_snapshot()?;
        // The destination's own directory entry: without this sync a power loss could take
        // the whole checkpoint after it was reported written.
        let parent = destination
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        file_system.sync_dir(parent)?;
        #[cfg(feature = "invariants")]
        {
            let listed: Vec<u64> = checkpoint.current().file_numbers().collect();
            let source: Vec<u64> = version.file_numbers().collect();
            assert_eq!(listed, source, "checkpoint invariant 1");
        }
        Ok(last_sequence)
    }
}
