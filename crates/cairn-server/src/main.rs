//! The `cairn-server` binary: parses the command line and runs [`cairn_server::server::run`].
//!
//! Thread-safety contract: single-threaded until `run` starts the runtime.
//!
//! Invariants:
//! 1. Exits non-zero with a message on bad arguments or a failed start or close.

use cairn_server::server::{run, Config, Engine};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cairn-server [--engine db|memstore] [--dir PATH] [--port N] \
[--bind ADDR] [--sync always|never] [--memstore-bytes N] [--membuffer on|off] [--threads N]";

fn parse(mut args: impl Iterator<Item = String>) -> Result<Config, String> {
    let mut config = Config {
        engine: Engine::Db,
        dir: PathBuf::from("cairn-data"),
        port: 6379,
        bind: "127.0.0.1".to_string(),
        sync: false,
        memstore_bytes: 1 << 30,
        membuffer: false,
        // tokio's own default: one worker per CPU.
        threads: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    };
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_string());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let bad = || format!("bad value for {flag}: {value}\n{USAGE}");
        match flag.as_str() {
            "--engine" => {
                config.engine = match value.as_str() {
                    "db" => Engine::Db,
                    "memstore" => Engine::MemStore,
                    _ => return Err(bad()),
                }
            }
            "--dir" => config.dir = PathBuf::from(&value),
            "--port" => config.port = value.parse().map_err(|_| bad())?,
            "--bind" => config.bind = value.clone(),
            "--sync" => {
                config.sync = match value.as_str() {
                    "always" => true,
                    "never" => false,
                    _ => return Err(bad()),
                }
            }
            "--membuffer" => {
                config.membuffer = match value.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err(bad()),
                }
            }
            "--threads" => {
                config.threads = value.parse().map_err(|_| bad())?;
                if config.threads == 0 {
                    return Err(bad());
                }
            }
            "--memstore-bytes" => config.memstore_bytes = value.parse().map_err(|_| bad())?,
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    Ok(config)
}

fn main() -> ExitCode {
    // The library reports recovery warnings through `log`; RUST_LOG overrides the level.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let config = match parse(std::env::args().skip(1)) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cairn-server: {message}");
            ExitCode::FAILURE
        }
    }
}
