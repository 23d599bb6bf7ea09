//! `verify`: every checksum of every table, WAL and the live MANIFEST of a directory.
//!
//! Each file is read whole through the other inspection tools ([`super::table`],
//! [`super::wal`], [`super::manifest`]), which verify as they read; the MANIFEST's live set
//! is then checked against the directory (every live table present, with the size the
//! MANIFEST records).
//!
//! Thread-safety contract: a pure function of the files' bytes; see the parent module.
//!
//! Invariants:
//! 1. [`VerifyReport::is_ok`] is true only if every file checked was read whole without a
//!    problem and every live table is present with its recorded size.
//! 2. Every problem names its file and, for damage, the byte offset.

use super::manifest::{dump_manifest, live_tables};
use super::table::dump_table;
use super::wal::dump_wal;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use std::path::{Path, PathBuf};

/// The outcome for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheck {
    /// The file.
    pub path: PathBuf,
    /// What was found when it was fine (e.g. `"table: 3 blocks, 120 entries"`).
    pub summary: String,
    /// What is wrong with it, if anything (names the file and offset).
    pub problem: Option<String>,
}

/// Everything [`verify_dir`] checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// One line per file checked, in directory-name order.
    pub files: Vec<FileCheck>,
    /// Facts worth a look that are not damage (a torn WAL tail, an old MANIFEST).
    pub warnings: Vec<String>,
}

impl VerifyReport {
    /// True if no file has a problem.
    ///
    /// ```
    /// assert!(cairn::inspect::verify::VerifyReport::default().is_ok());
    /// ```
    pub fn is_ok(&self) -> bool {
        self.files.iter().all(|file| file.problem.is_none())
    }

    /// The files with a problem.
    ///
    /// ```
    /// let report = cairn::inspect::verify::VerifyReport::default();
    /// assert_eq!(report.problems().count(), 0);
    /// ```
    pub fn problems(&self) -> impl Iterator<Item = &FileCheck> {
        self.files.iter().filter(|file| file.problem.is_some())
    }
}

/// Checks every table, WAL and the live MANIFEST in `directory`. `Err` only if the directory
/// cannot be listed or holds no database; damage is reported in the [`VerifyReport`].
///
/// ```
/// # fn main() -> cairn::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("cairn-verify-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut options = cairn::Options::default();
/// options.create_if_missing = true;
/// let db = cairn::Db::open(&dir, options)?;
/// db.put(b"k", b"v")?;
/// drop(db);
/// assert!(cairn::inspect::verify::verify_dir(&dir)?.is_ok());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn verify_dir(directory: &Path) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let manifest = match dump_manifest(directory) {
        Err(error @ Error::NotFound { .. }) => return Err(error),
        Ok(dump) => {
            if let Some(offset) = dump.torn_tail {
                report.warnings.push(format!(
                    "{}: torn tail at offset {offset} (a record only partly written)",
                    dump.path.display()
                ));
            }
            let summary = format!("MANIFEST: {} edits", dump.edits.len());
            check(dump.path, Ok(summary))
        }
        Err(error) => check(directory.join("CURRENT"), Err(error)),
    };
    let current = manifest.path.clone();
    report.files.push(manifest);
    let mut names = std::fs::read_dir(directory)
        .map_err(|error| Error::io("list", directory, error))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect::<Vec<_>>();
    names.sort();
    for name in names {
        let path = directory.join(&name);
        match filename::parse_file_name(&name) {
            Some(FileKind::Table(_)) => report.files.push(check_table(path)),
            Some(FileKind::Wal(_)) => report.files.push(check_wal(path, &mut report.warnings)),
            Some(FileKind::Manifest(_)) if path != current => report.warnings.push(format!(
                "{}: not the MANIFEST that CURRENT names; not checked",
                path.display()
            )),
            _ => {}
        }
    }
    if report
        .files
        .first()
        .is_some_and(|file| file.problem.is_none())
    {
        check_live_set(directory, &mut report)?;
    }
    Ok(report)
}

fn check(path: PathBuf, outcome: Result<String>) -> FileCheck {
    match outcome {
        Ok(summary) => FileCheck {
            path,
            summary,
            problem: None,
        },
        Err(error) => FileCheck {
            path,
            summary: String::new(),
            problem: Some(error.to_string()),
        },
    }
}

fn check_table(path: PathBuf) -> FileCheck {
    let outcome = dump_table(&path).map(|dump| {
        format!(
            "table: {} blocks, {} entries",
            dump.blocks.len(),
            dump.entries.len()
        )
    });
    check(path, outcome)
}

fn check_wal(path: PathBuf, warnings: &mut Vec<String>) -> FileCheck {
    let outcome = dump_wal(&path).map(|dump| {
        if let Some(offset) = dump.torn_tail {
            warnings.push(format!(
                "{}: torn tail at offset {offset} (the writer stopped mid-record; recovery \
                 ignores it)",
                path.display()
            ));
        }
        let entries: usize = dump.records.iter().map(|record| record.entries.len()).sum();
        format!("WAL: {} records, {entries} entries", dump.records.len())
    });
    check(path, outcome)
}

/// Every table the MANIFEST lists must exist with the size it records.
fn check_live_set(directory: &Path, report: &mut VerifyReport) -> Result<()> {
    for live in live_tables(directory)? {
        let problem = match std::fs::metadata(&live.path) {
            Err(error) => Some(format!(
                "{}: listed as live in the MANIFEST but cannot be read: {error}",
                live.path.display()
            )),
            Ok(meta) if meta.len() != live.table.size_bytes => Some(format!(
                "{}: {} bytes, but the MANIFEST records {}",
                live.path.display(),
                meta.len(),
                live.table.size_bytes
            )),
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            match report.files.iter_mut().find(|file| file.path == live.path) {
                Some(file) if file.problem.is_none() => file.problem = Some(problem),
                Some(_) => {}
                None => report.files.push(FileCheck {
                    path: live.path,
                    summary: String::new(),
                    problem: Some(problem),
                }),
            }
        }
    }
    Ok(())
}
