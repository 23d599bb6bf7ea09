//! `cairn shell` at a terminal: under a pseudo-terminal each answer appears before the next
//! line is typed (the batch path would print nothing until input ends).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/run.rs"]
mod run;

use rexpect::session::spawn_command;
use std::process::Command;

/// How long one expectation may wait. Not a performance bound: it only turns a hang (an
/// answer that never comes) into a failure instead of a stuck test run.
const HANG_MS: u64 = 120_000;

#[test]
fn each_line_is_answered_before_the_next_is_typed() {
    let dir = run::TempDir::new("pty");
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command.args(["shell", "--db"]).arg(dir.path().join("db"));
    // A known terminal type: CI may run with none, or a dumb one, set.
    command.env("TERM", "xterm");
    let mut session = spawn_command(command, Some(HANG_MS)).unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("p 1 9000000000").unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("g 1").unwrap();
    // The answer arrives while the shell waits for more input: nothing else was sent.
    session.exp_regex("(?m)^9000000000\r$").unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("put greeting \"hello world\"").unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("get greeting").unwrap();
    session.exp_regex("(?m)^hello\\\\x20world\r$").unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("incr visits 5").unwrap();
    session.exp_regex("(?m)^5\r$").unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("bogus").unwrap();
    session
        .exp_string("error: line 6: unknown command \"bogus\"")
        .unwrap();
    session.exp_string("cairn> ").unwrap();
    session.send_line("quit").unwrap();
    session
        .exp_string("cairn shell: 6 commands (1 failed)")
        .unwrap();
    session.exp_eof().unwrap();
}
