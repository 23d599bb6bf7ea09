//! Names of the files in a database directory.
//!
//! | file | name |
//! | --- | --- |
//! | write-ahead log | `NNNNNN.log` |
//! | `SSTable` | `NNNNNN.sst` |
//! | MANIFEST | `MANIFEST-NNNNNN` |
//! | pointer to the live MANIFEST | `CURRENT` (and `CURRENT.tmp` while it is replaced) |
//! | directory lock | `LOCK` |
//!
//! All numbered files share one counter (`next_file_number` in the MANIFEST), so a number names
//! exactly one file for the life of the database.

use std::path::{Path, PathBuf};

/// What a file in the database directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A write-ahead log.
    Wal(u64),
    /// An `SSTable`.
    Table(u64),
    /// A MANIFEST.
    Manifest(u64),
    /// `CURRENT`.
    Current,
    /// `CURRENT.tmp`, left behind by a crash while CURRENT was replaced.
    CurrentTemporary,
    /// `LOCK`.
    Lock,
}

/// Path of WAL `number`.
pub fn wal_path(directory: &Path, number: u64) -> PathBuf {
    directory.join(format!("{number:06}.log"))
}

/// Path of `SSTable` `number`.
pub fn table_path(directory: &Path, number: u64) -> PathBuf {
    directory.join(format!("{number:06}.sst"))
}

/// Path of MANIFEST `number`.
pub fn manifest_path(directory: &Path, number: u64) -> PathBuf {
    directory.join(manifest_name(number))
}

/// File name of MANIFEST `number`.
pub fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// Path of `CURRENT`.
pub fn current_path(directory: &Path) -> PathBuf {
    directory.join("CURRENT")
}

/// Path of `CURRENT.tmp`.
pub fn current_temporary_path(directory: &Path) -> PathBuf {
    directory.join("CURRENT.tmp")
}

/// Path of `LOCK`.
pub fn lock_path(directory: &Path) -> PathBuf {
    directory.join("LOCK")
}

/// Classifies a file name; `None` for files cairn does not own.
pub fn parse_file_name(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "CURRENT.tmp" => return Some(FileKind::CurrentTemporary),
        "LOCK" => return Some(FileKind::Lock),
        _ => {}
    }
    if let Some(number) = name.strip_prefix("MANIFEST-") {
        return parse_number(number).map(FileKind::Manifest);
    }
    if let Some(number) = name.strip_suffix(".log") {
        return parse_number(number).map(FileKind::Wal);
    }
    if let Some(number) = name.strip_suffix(".sst") {
        return parse_number(number).map(FileKind::Table);
    }
    None
}

/// File numbers (and run ids, which share their space) are below this. A name or a MANIFEST
/// field with a larger number is not cairn's: taking it would bring the counter that numbers
/// new files near `u64::MAX`, where it would wrap onto live files.
pub(crate) const FILE_NUMBER_MAX: u64 = 1 << 62;

fn parse_number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits
        .parse()
        .ok()
        .filter(|number| *number < FILE_NUMBER_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let directory = Path::new("/d");
        for (path, kind) in [
            (wal_path(directory, 7), FileKind::Wal(7)),
            (table_path(directory, 1_234_567), FileKind::Table(1_234_567)),
            (manifest_path(directory, 3), FileKind::Manifest(3)),
            (current_path(directory), FileKind::Current),
            (lock_path(directory), FileKind::Lock),
        ] {
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_file_name(name), Some(kind));
        }
        for bad in [
            "x.log",
            ".sst",
            "MANIFEST-",
            "MANIFEST-1a",
            "notes.txt",
            "-1.log",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }
}
