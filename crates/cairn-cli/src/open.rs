//! How the CLI opens a database directory: what it checks first so that a mistyped, empty
//! or foreign directory gets a clear message and no stray file, and the one place each kind
//! of open (read, write, checkpoint) goes through.
//!
//! Checks before any open: the path is a directory; it has a `CURRENT` file (else it is
//! empty or missing — "no database" — or holds other files — "not a cairn database");
//! `CURRENT` names a MANIFEST whose first record is a cairn edit (else "not a cairn
//! database"). Only then does the library open it, so a failed open never leaves a `LOCK`.
//!
//! Levels: the library refuses a MANIFEST with a table at a level at or past `level_count`,
//! and a compaction may move tables down to the last level. An application may have created
//! the database with fewer levels than the default, and the CLI cannot know how many: it
//! opens an existing database with as many levels as it already uses (one past its deepest
//! table), never more, so every application that could open it before still can; and never
//! fewer, so it always opens. `--levels N` chooses more.

use crate::Failure;
use cairn::{Db, FileSystem, Options, StdFs};
use std::path::Path;

/// What the directory at a `--db` path holds.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// A cairn database (`CURRENT` names a MANIFEST of cairn edits).
    Database,
    /// Nothing: the path does not exist.
    Missing,
    /// An empty directory.
    Empty,
}

fn not_cairn(dir: &Path, why: &str) -> Failure {
    Failure::Message(format!("{} is not a cairn database ({why})", dir.display()))
}

/// The sorted names in `dir`, or `None` if it does not exist; refuses a file.
fn names_in(dir: &Path) -> Result<Option<Vec<String>>, Failure> {
    let metadata = match std::fs::metadata(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot open {}: {error}", dir.display()).into()),
        Ok(metadata) => metadata,
    };
    if !metadata.is_dir() {
        return Err(not_cairn(dir, "it is a file, not a directory"));
    }
    let mut names = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot list {}: {error}", dir.display()))?
        .filter_map(|entry| Some(entry.ok()?.file_name().to_string_lossy().into_owned()))
        .collect::<Vec<_>>();
    names.sort();
    Ok(Some(names))
}

/// "not a cairn database": `lacking` what, and the first few of the `names` it holds instead.
fn foreign(dir: &Path, names: &[String], lacking: &str) -> Failure {
    let mut shown = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        shown.push_str(", …");
    }
    not_cairn(dir, &format!("{lacking}; it holds {shown}"))
}

/// Looks at `dir` without writing anything.
fn inspect_dir(dir: &Path) -> Result<Found, Failure> {
    let Some(names) = names_in(dir)? else {
        return Ok(Found::Missing);
    };
    if names.is_empty() {
        return Ok(Found::Empty);
    }
    if !names.iter().any(|name| name == "CURRENT") {
        return Err(foreign(dir, &names, "no CURRENT file"));
    }
    match cairn::inspect::manifest::dump_manifest(dir) {
        Ok(dump)
            if dump
                .edits
                .first()
                .is_some_and(|edit| edit.format_version.is_some()) =>
        {
            Ok(Found::Database)
        }
        Ok(dump) => Err(not_cairn(
            dir,
            &format!("{} holds no cairn MANIFEST record", dump.path.display()),
        )),
        Err(cairn::Error::Corruption { file, .. }) if file.ends_with("CURRENT") => Err(not_cairn(
            dir,
            "its CURRENT file does not name a cairn MANIFEST",
        )),
        Err(cairn::Error::Io { path, .. }) if path.ends_with("CURRENT") => {
            Err(not_cairn(dir, "its CURRENT file cannot be read"))
        }
        // A cairn MANIFEST that is damaged past its first record: the library's open says
        // where.
        Err(_) => Ok(Found::Database),
    }
}

fn no_database(dir: &Path, why: &str, hint: &str) -> Failure {
    Failure::Message(format!("no database at {} ({why}){hint}", dir.display()))
}

/// Fails with the "no database" message unless `dir` holds one.
fn require_database(dir: &Path, hint: &str) -> Result<(), Failure> {
    let why = match inspect_dir(dir)? {
        Found::Database => return Ok(()),
        Found::Missing => "the directory does not exist",
        Found::Empty => "the directory is empty",
    };
    Err(no_database(dir, why, hint))
}

/// The fewest levels the library accepts (`Options::level_count`).
const LEVELS_MIN: usize = 2;

/// The deepest level holding a table in `dir`'s MANIFEST (`Some(None)`: no table yet), or
/// `None` when there is no MANIFEST to read: a new database, or damage that the library's
/// open then names.
fn deepest_table_level(dir: &Path) -> Option<Option<usize>> {
    let tables = cairn::inspect::manifest::live_tables(dir).ok()?;
    Some(tables.iter().map(|live| live.table.level).max())
}

/// The `level_count` to open `dir` with: `requested` (`--levels`) if given and deep enough
/// for every table; else, for an existing database, one past its deepest table (see the
/// module comment); else the library's default.
fn level_count(dir: &Path, requested: Option<usize>) -> Result<usize, Failure> {
    let Some(deepest) = deepest_table_level(dir) else {
        return Ok(requested.unwrap_or(Options::default().level_count));
    };
    let needed = deepest.map_or(LEVELS_MIN, |level| (level + 1).max(LEVELS_MIN));
    match (requested, deepest) {
        (Some(levels), Some(level)) if levels < needed => Err(Failure::Message(format!(
            "--levels {levels} is too few for {}: it holds tables at level {level}, so it needs \
             at least {needed} levels",
            dir.display()
        ))),
        (Some(levels), _) => Ok(levels),
        (None, _) => Ok(needed),
    }
}

/// Opens `dir` for reading: every read-only command goes through here. `levels` is
/// `--levels`.
pub fn open_for_read(dir: &Path, levels: Option<usize>) -> Result<Db, Failure> {
    require_database(dir, "")?;
    let mut options = Options::default();
    options.level_count = level_count(dir, levels)?;
    // Read-only: no LOCK, no WAL, no MANIFEST or CURRENT rewrite, so it runs beside a
    // process that holds the database and leaves every file as it was.
    Ok(Db::open_read_only(dir, options)?)
}

/// Opens `dir` for writing (`put`, and the shell); creates the database only when `create`
/// is set (`put --create`, and the shell), and then only in a missing or empty directory.
/// `options.level_count` is replaced by the choice of [`level_count`].
pub fn open_for_write(
    dir: &Path,
    create: bool,
    mut options: Options,
    levels: Option<usize>,
) -> Result<Db, Failure> {
    if create {
        inspect_dir(dir)?;
    } else {
        require_database(dir, "; pass --create to create one")?;
    }
    options.create_if_missing = create;
    options.level_count = level_count(dir, levels)?;
    Ok(Db::open(dir, options)?)
}

/// Opens the database in `dir` for a command that changes but never creates one (`delete`,
/// `compact`).
pub fn open_existing(dir: &Path, levels: Option<usize>) -> Result<Db, Failure> {
    require_database(dir, "")?;
    let mut options = Options::default();
    options.create_if_missing = false;
    options.level_count = level_count(dir, levels)?;
    Ok(Db::open(dir, options)?)
}

/// Checks that `dir` holds a database, for the tools that read its files directly.
pub fn require_for_tools(dir: &Path) -> Result<(), Failure> {
    require_database(dir, "")
}

/// Checks that `dir` is a directory holding a `CURRENT` or a MANIFEST, for `verify`: whether
/// those files are sound is what verify judges, so a garbled or lost `CURRENT` must reach
/// it as damage rather than be turned away as "not a cairn database".
pub fn require_for_verify(dir: &Path) -> Result<(), Failure> {
    let why = match names_in(dir)? {
        None => "the directory does not exist",
        Some(names) if names.is_empty() => "the directory is empty",
        Some(names) => {
            let ours = |name: &String| name == "CURRENT" || name.starts_with("MANIFEST-");
            return if names.iter().any(ours) {
                Ok(())
            } else {
                Err(foreign(dir, &names, "no CURRENT file or MANIFEST"))
            };
        }
    };
    Err(no_database(dir, why, ""))
}

/// `cairn checkpoint DIR DEST`: a copy of the database in `dest` that opens on its own,
/// sharing table files with `dir` through hard links. Returns the number of files written.
///
/// Crash safety: `CURRENT` is what makes the copy a database, so it is written last — every
/// other file copied and synced and the directory synced first, then `CURRENT.tmp` synced and
/// renamed over, then the directory synced again. A copy that fails or is cut short by a
/// power loss has no `CURRENT` and never opens as a database missing WAL data.
pub fn checkpoint(dir: &Path, dest: &Path) -> Result<usize, Failure> {
    require_database(dir, "")?;
    // `Db::checkpoint` needs the writing handle and flushes first, changing the source; the
    // CLI copies a closed database instead, as it is: holding its lock keeps every file
    // still while they are copied. (An application checkpoints a live database through it.)
    let lock = StdFs.lock(&dir.join("LOCK")).map_err(|error| match error {
        cairn::Error::Locked { .. } => Failure::Message(format!(
            "{} is open in another process; close it first (this build's checkpoint copies a \
             closed database)",
            dir.display()
        )),
        other => other.into(),
    })?;
    if dest.exists()
        && std::fs::read_dir(dest)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(true)
    {
        return Err(format!("{} already exists and is not empty", dest.display()).into());
    }
    std::fs::create_dir_all(dest)
        .map_err(|error| format!("cannot create {}: {error}", dest.display()))?;
    let incomplete = |failure: Failure| match failure {
        Failure::Message(message) => Failure::Message(format!(
            "{message}; {} is incomplete (it has no CURRENT, so it does not open): remove it",
            dest.display()
        )),
        other => other,
    };
    let names = checkpoint_files(dir)?;
    for name in &names {
        copy_file(&dir.join(name), &dest.join(name)).map_err(incomplete)?;
    }
    sync_dir(dest).map_err(incomplete)?;
    write_current(dir, dest).map_err(incomplete)?;
    // `dest` itself may be new: its own entry in its parent.
    let parent = dest
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty());
    sync_dir(parent.unwrap_or(Path::new(".")))?;
    drop(lock);
    Ok(names.len() + 1)
}

/// The files of `dir` that a copy needs besides `CURRENT`, sorted: the tables, the WALs and
/// the MANIFEST that `CURRENT` names. LOCK, older MANIFESTs and foreign files are not part
/// of the database's state.
fn checkpoint_files(dir: &Path) -> Result<Vec<String>, Failure> {
    let manifest = cairn::inspect::manifest::dump_manifest(dir)?;
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|error| format!("cannot list {}: {error}", dir.display()))?
    {
        let entry = entry.map_err(|error| format!("cannot list {}: {error}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".sst") || name.ends_with(".log") || entry.path() == manifest.path {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Hard-links a table (its bytes are the source's, already durable), copies anything else or
/// a table the file system cannot link, and syncs a copy.
fn copy_file(from: &Path, to: &Path) -> Result<(), Failure> {
    let table = from.extension().is_some_and(|extension| extension == "sst");
    if table && std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    let failed = |error: std::io::Error| {
        Failure::Message(format!(
            "cannot copy {} to {}: {error}",
            from.display(),
            to.display()
        ))
    };
    std::fs::copy(from, to).map_err(failed)?;
    std::fs::File::open(to)
        .and_then(|file| file.sync_all())
        .map_err(failed)
}

/// Writes `dest/CURRENT` with `dir`'s contents through a synced `CURRENT.tmp` and a rename
/// (the library's own way), then syncs `dest` so the rename is durable.
fn write_current(dir: &Path, dest: &Path) -> Result<(), Failure> {
    let (temporary, current) = (dest.join("CURRENT.tmp"), dest.join("CURRENT"));
    copy_file(&dir.join("CURRENT"), &temporary)?;
    std::fs::rename(&temporary, &current).map_err(|error| {
        format!(
            "cannot rename {} to {}: {error}",
            temporary.display(),
            current.display()
        )
    })?;
    sync_dir(dest)
}

/// Makes the entries of `dir` (files created, linked or renamed there) durable.
fn sync_dir(dir: &Path) -> Result<(), Failure> {
    Ok(StdFs.sync_dir(dir)?)
}
