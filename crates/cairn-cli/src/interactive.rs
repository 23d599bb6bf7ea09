//! The shell at a terminal: a prompt, each line answered as soon as it is entered, history
//! and line editing through `rustyline`. Pipes and `--file` take the batch path instead
//! ([`Shell::run`]), which buffers its output for speed.

use crate::shell::{RunError, RunSummary, Shell, Store};
use rustyline::error::ReadlineError;
use std::io::{self, Write};
use std::time::{Duration, Instant};

/// The prompt, also what the pty test waits for.
pub const PROMPT: &str = "cairn> ";

/// Reads lines from the terminal until `quit`, `exit` or end of input (Ctrl-D); Ctrl-C
/// abandons the line being typed.
pub fn run<S: Store, W: Write>(shell: &mut Shell<S, W>) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let mut summary = RunSummary {
        commands: 0,
        errors: 0,
        elapsed: Duration::ZERO,
    };
    let mut editor = rustyline::DefaultEditor::new()
        .map_err(|error| RunError::Input(io::Error::other(error)))?;
    eprintln!("cairn shell: type help for the commands, quit or Ctrl-D to leave");
    let mut line_number = 0u64;
    loop {
        let line = match editor.readline(PROMPT) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(RunError::Input(io::Error::other(error))),
        };
        line_number += 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        // History is a convenience: a failure to record a line is not worth stopping for.
        let _ = editor.add_history_entry(trimmed);
        if matches!(trimmed, "quit" | "exit") {
            break;
        }
        let mut errors = io::stderr().lock();
        let ran = shell
            .run_line(line_number, line.as_bytes(), &mut errors)
            .and_then(|ran| shell.out().flush().map(|()| ran));
        let ran = ran.map_err(|error| RunError::Output {
            line: line_number,
            error,
        })?;
        if let Some(failed) = ran {
            summary.commands += 1;
            summary.errors += u64::from(failed);
        }
    }
    shell.out().flush().map_err(RunError::Flush)?;
    summary.elapsed = started.elapsed();
    Ok(summary)
}
