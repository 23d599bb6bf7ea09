//! The inspection tools: `dump-table`, `dump-wal`, `dump-manifest`, `verify`, `sizes` and
//! `checkpoint`, printing what `cairn::inspect` reads, as text or (`--json`) one JSON
//! document. Keys and values print with the shell's escapes ([`crate::text::render`]).

use crate::json::Json;
use crate::open;
use crate::text::render;
use crate::Failure;
use cairn::inspect::manifest::{AddedTable, ManifestEdit};
use cairn::inspect::table::{BlockSpan, DataBlock, TableDump};
use cairn::inspect::verify::{FileCheck, VerifyReport};
use cairn::inspect::Entry;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

fn entry_json(entry: &Entry) -> Json {
    Json::Object(vec![
        ("key", render(&entry.key).into()),
        ("sequence", entry.sequence.into()),
        ("kind", entry.kind.name().into()),
        ("value", render(&entry.value).into()),
    ])
}

fn entry_line(entry: &Entry) -> String {
    match entry.kind {
        cairn::inspect::EntryKind::Put => format!(
            "{} @{} put {}",
            render(&entry.key),
            entry.sequence,
            render(&entry.value)
        ),
        cairn::inspect::EntryKind::PutWithExpiry => match entry.value.split_first_chunk::<8>() {
            Some((expiry, value)) => format!(
                "{} @{} put {} expiry-ms {}",
                render(&entry.key),
                entry.sequence,
                render(value),
                u64::from_le_bytes(*expiry)
            ),
            None => format!(
                "{} @{} put-with-expiry (short value) {}",
                render(&entry.key),
                entry.sequence,
                render(&entry.value)
            ),
        },
        cairn::inspect::EntryKind::Delete => {
            format!("{} @{} delete", render(&entry.key), entry.sequence)
        }
        other => format!(
            "{} @{} {} {}",
            render(&entry.key),
            entry.sequence,
            other.name(),
            render(&entry.value)
        ),
    }
}

fn span_json(span: BlockSpan) -> Json {
    Json::Object(vec![
        ("offset", span.offset.into()),
        ("size", span.size_bytes.into()),
    ])
}

fn span_text(span: BlockSpan) -> String {
    format!("offset {} size {}", span.offset, span.size_bytes)
}

/// The entries of one block of a table dump.
fn block_entries<'a>(
    dump: &'a TableDump,
    block: &DataBlock,
) -> impl Iterator<Item = &'a Entry> + 'a {
    dump.entries
        .iter()
        .skip(block.first_entry)
        .take(usize::try_from(block.entry_count).unwrap_or(usize::MAX))
}

fn table_json(path: &Path, dump: &TableDump) -> Json {
    let facts = &dump.facts;
    let blocks = dump.blocks.iter().map(|block| {
        Json::Object(vec![
            ("offset", block.span.offset.into()),
            ("size", block.span.size_bytes.into()),
            ("compressed", block.compressed.into()),
            (
                "entries",
                Json::Array(block_entries(dump, block).map(entry_json).collect()),
            ),
        ])
    });
    Json::Object(vec![
        ("file", path.display().to_string().into()),
        ("size", dump.size_bytes.into()),
        ("format_version", facts.format_version.into()),
        ("entry_count", facts.entry_count.into()),
        ("delete_count", facts.delete_count.into()),
        ("smallest_sequence", facts.smallest_sequence.into()),
        ("largest_sequence", facts.largest_sequence.into()),
        ("raw_key_bytes", facts.raw_key_bytes.into()),
        ("raw_value_bytes", facts.raw_value_bytes.into()),
        ("index", span_json(dump.index)),
        ("filter", span_json(dump.filter)),
        ("properties", span_json(dump.properties_block)),
        ("blocks", Json::Array(blocks.collect())),
    ])
}

/// `cairn dump-table FILE`.
pub fn dump_table(path: &Path, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let dump = cairn::inspect::table::dump_table(path)?;
    if json {
        writeln!(out, "{}", table_json(path, &dump))?;
        return Ok(());
    }
    let facts = &dump.facts;
    writeln!(
        out,
        "table {}: {} bytes, format version {}",
        path.display(),
        dump.size_bytes,
        facts.format_version
    )?;
    writeln!(
        out,
        "footer: index {}, filter {}, properties {}",
        span_text(dump.index),
        span_text(dump.filter),
        span_text(dump.properties_block)
    )?;
    writeln!(
        out,
        "properties: {} entries ({} deletes), sequences {}..={}, {} key bytes, {} value bytes, \
         {} data blocks",
        facts.entry_count,
        facts.delete_count,
        facts.smallest_sequence,
        facts.largest_sequence,
        facts.raw_key_bytes,
        facts.raw_value_bytes,
        facts.data_block_count
    )?;
    for (number, block) in dump.blocks.iter().enumerate() {
        let compressed = if block.compressed { ", compressed" } else { "" };
        writeln!(
            out,
            "block {number}: {}{compressed}, {} entries",
            span_text(block.span),
            block.entry_count
        )?;
        for entry in block_entries(&dump, block) {
            writeln!(out, "  {}", entry_line(entry))?;
        }
    }
    Ok(())
}

/// `cairn dump-wal FILE`.
pub fn dump_wal(path: &Path, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let dump = cairn::inspect::wal::dump_wal(path)?;
    if json {
        let records = dump.records.iter().map(|record| {
            Json::Object(vec![
                ("offset", record.offset.into()),
                ("first_sequence", record.first_sequence.into()),
                (
                    "entries",
                    Json::Array(record.entries.iter().map(entry_json).collect()),
                ),
            ])
        });
        let value = Json::Object(vec![
            ("file", path.display().to_string().into()),
            ("size", dump.size_bytes.into()),
            ("torn_tail", dump.torn_tail.into()),
            ("records", Json::Array(records.collect())),
        ]);
        writeln!(out, "{value}")?;
        return Ok(());
    }
    writeln!(
        out,
        "wal {}: {} bytes, {} records",
        path.display(),
        dump.size_bytes,
        dump.records.len()
    )?;
    for record in &dump.records {
        writeln!(
            out,
            "record at offset {}: sequence {}, {} entries",
            record.offset,
            record.first_sequence,
            record.entries.len()
        )?;
        for entry in &record.entries {
            writeln!(out, "  {}", entry_line(entry))?;
        }
    }
    if let Some(offset) = dump.torn_tail {
        writeln!(
            out,
            "torn tail at offset {offset} (ignored, as recovery does)"
        )?;
    }
    Ok(())
}

fn added_json(table: &AddedTable) -> Json {
    Json::Object(vec![
        ("level", table.level.into()),
        ("number", table.number.into()),
        ("size", table.size_bytes.into()),
        ("smallest_key", render(&table.smallest_key).into()),
        ("largest_key", render(&table.largest_key).into()),
        ("smallest_sequence", table.smallest_sequence.into()),
        ("largest_sequence", table.largest_sequence.into()),
    ])
}

fn edit_json(edit: &ManifestEdit) -> Json {
    let pointers = edit.compact_pointers.iter().map(|(level, key)| {
        Json::Object(vec![
            ("level", (*level).into()),
            ("key", render(key).into()),
        ])
    });
    let deleted = edit.deleted_tables.iter().map(|(level, number)| {
        Json::Object(vec![
            ("level", (*level).into()),
            ("number", (*number).into()),
        ])
    });
    Json::Object(vec![
        ("offset", edit.offset.into()),
        ("format_version", edit.format_version.into()),
        ("log_number", edit.log_number.into()),
        ("next_file_number", edit.next_file_number.into()),
        ("last_sequence", edit.last_sequence.into()),
        ("compact_pointers", Json::Array(pointers.collect())),
        ("deleted", Json::Array(deleted.collect())),
        (
            "added",
            Json::Array(edit.added_tables.iter().map(added_json).collect()),
        ),
    ])
}

fn edit_lines(edit: &ManifestEdit, out: &mut dyn Write) -> std::io::Result<()> {
    let mut fields = Vec::new();
    let named = [
        ("format version", edit.format_version.map(u64::from)),
        ("log number", edit.log_number),
        ("next file number", edit.next_file_number),
        ("last sequence", edit.last_sequence),
    ];
    for (name, value) in named {
        if let Some(value) = value {
            fields.push(format!("{name} {value}"));
        }
    }
    writeln!(out, "edit at offset {}: {}", edit.offset, fields.join(", "))?;
    for (level, key) in &edit.compact_pointers {
        writeln!(out, "  compact pointer L{level}: {}", render(key))?;
    }
    for (level, number) in &edit.deleted_tables {
        writeln!(out, "  delete L{level} #{number}")?;
    }
    for table in &edit.added_tables {
        writeln!(
            out,
            "  add L{} #{}: {} bytes, keys {} ..= {}, sequences {}..={}",
            table.level,
            table.number,
            table.size_bytes,
            render(&table.smallest_key),
            render(&table.largest_key),
            table.smallest_sequence,
            table.largest_sequence
        )?;
    }
    Ok(())
}

/// `cairn dump-manifest DIR`.
pub fn dump_manifest(dir: &Path, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    open::require_for_tools(dir)?;
    let dump = cairn::inspect::manifest::dump_manifest(dir)?;
    if json {
        let value = Json::Object(vec![
            ("file", dump.path.display().to_string().into()),
            ("torn_tail", dump.torn_tail.into()),
            (
                "edits",
                Json::Array(dump.edits.iter().map(edit_json).collect()),
            ),
        ]);
        writeln!(out, "{value}")?;
        return Ok(());
    }
    writeln!(
        out,
        "manifest {}: {} edits",
        dump.path.display(),
        dump.edits.len()
    )?;
    for edit in &dump.edits {
        edit_lines(edit, out)?;
    }
    if let Some(offset) = dump.torn_tail {
        writeln!(out, "torn tail at offset {offset}")?;
    }
    Ok(())
}

/// What `verify` reports for a directory that holds a MANIFEST but no `CURRENT`, which
/// `verify_dir` refuses as holding no database: damage, since nothing else names the MANIFEST
/// and the database does not open.
fn missing_current(dir: &Path) -> VerifyReport {
    let mut manifests: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("MANIFEST-"))
        .collect();
    manifests.sort();
    VerifyReport {
        files: vec![FileCheck {
            path: dir.join("CURRENT"),
            summary: String::new(),
            problem: Some(format!(
                "missing: nothing names the live MANIFEST, so the database does not open (the \
                 directory holds {})",
                manifests.join(", ")
            )),
        }],
        warnings: vec!["tables and WALs were not checked: verify starts from CURRENT".into()],
    }
}

/// `cairn verify DIR`: exit status 0 if every file checks out, 1 if any is damaged.
pub fn verify(dir: &Path, json: bool, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    open::require_for_verify(dir)?;
    let report = match cairn::inspect::verify::verify_dir(dir) {
        Err(cairn::Error::NotFound { .. }) => missing_current(dir),
        report => report?,
    };
    if json {
        let files = report.files.iter().map(|file| {
            Json::Object(vec![
                ("file", file.path.display().to_string().into()),
                ("ok", file.problem.is_none().into()),
                ("summary", file.summary.as_str().into()),
                ("problem", file.problem.clone().into()),
            ])
        });
        let warnings = report.warnings.iter().map(|w| Json::from(w.as_str()));
        let value = Json::Object(vec![
            ("ok", report.is_ok().into()),
            ("files", Json::Array(files.collect())),
            ("warnings", Json::Array(warnings.collect())),
        ]);
        writeln!(out, "{value}")?;
    } else {
        for file in &report.files {
            match &file.problem {
                None => writeln!(out, "ok {}: {}", file.path.display(), file.summary)?,
                Some(problem) => writeln!(out, "FAILED {}: {problem}", file.path.display())?,
            }
        }
        for warning in &report.warnings {
            writeln!(out, "warning: {warning}")?;
        }
        let failed = report.problems().count();
        if failed == 0 {
            writeln!(out, "verified {} files: all ok", report.files.len())?;
        } else {
            writeln!(
                out,
                "verified {} files: {failed} damaged",
                report.files.len()
            )?;
        }
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `cairn sizes DIR [FROM TO]`.
pub fn sizes(
    dir: &Path,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    open::require_for_tools(dir)?;
    let sizes = cairn::inspect::sizes::approximate_sizes(dir, from, to)?;
    if json {
        let levels = sizes.level_bytes.iter().map(|bytes| Json::from(*bytes));
        let value = Json::Object(vec![
            ("from", from.map(render).into()),
            ("to", to.map(render).into()),
            ("tables", sizes.table_count.into()),
            ("total_bytes", sizes.total_bytes.into()),
            ("level_bytes", Json::Array(levels.collect())),
        ]);
        writeln!(out, "{value}")?;
        return Ok(());
    }
    for (level, bytes) in sizes.level_bytes.iter().enumerate() {
        writeln!(out, "L{level}: {bytes} bytes")?;
    }
    writeln!(
        out,
        "total: {} bytes in {} tables (approximate; memtables and WALs not counted)",
        sizes.total_bytes, sizes.table_count
    )?;
    Ok(())
}

/// `cairn checkpoint DIR DEST`.
pub fn checkpoint(dir: &Path, dest: &Path, out: &mut dyn Write) -> Result<(), Failure> {
    let files = open::checkpoint(dir, dest)?;
    writeln!(
        out,
        "checkpoint of {} written to {} ({files} files)",
        dir.display(),
        dest.display()
    )?;
    Ok(())
}
