//! The `cairn` command-line tool: one-off commands on a database directory, the shell (CS265
//! workload commands and text-key commands, interactive at a terminal), and the inspection
//! tools (`dump-table`, `dump-wal`, `dump-manifest`, `verify`, `checkpoint`, `sizes`).
//!
//! Exit status: 0 on success; 1 when `get` finds no value, when some shell lines failed or
//! when `verify` finds damage; 2 on any other error (bad arguments, a database that cannot be
//! opened, I/O failures, the shell's output closed before its last line ran). Errors are
//! printed to stderr as `error: <message>`. A one-off command whose output is closed (`| head`)
//! ends quietly with 0.

// `Options` is becoming `#[non_exhaustive]`: outside the library it is built by assigning
// fields of `Options::default()`, never by a struct literal, which this lint would ask for.
#![allow(clippy::field_reassign_with_default)]

mod cli;
mod cs265;
mod db_store;
mod interactive;
mod json;
mod levels;
mod open;
mod progress;
mod shell;
mod text;
mod tools;

use clap::Parser;
use std::io;
use std::process::ExitCode;

/// A failure that ends the program.
#[derive(Debug)]
pub enum Failure {
    /// Printed as `error: <message>`, exit status 2.
    Message(String),
    /// The reader of our output went away (e.g. `| head`): stop quietly, for commands that
    /// skip no work by stopping (the shell reports it as a `Message` instead).
    BrokenPipe,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Message(message)
    }
}

impl From<cairn::Error> for Failure {
    fn from(error: cairn::Error) -> Self {
        Failure::Message(error.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        if error.kind() == io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Message(error.to_string())
        }
    }
}

fn main() -> ExitCode {
    // The library reports recovery warnings through `log`; RUST_LOG overrides the level.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args = cli::Cli::parse();
    match cli::run(args.command) {
        Ok(code) => code,
        Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Message(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
