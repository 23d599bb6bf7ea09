//! Server commands: PING ECHO INFO COMMAND CONFIG CLIENT SELECT TIME QUIT SHUTDOWN HELLO.
//!
//! Thread-safety contract: as every handler (see `commands`); CONFIG SET stores into the
//! context's atomics, which connections read for every request.
//!
//! Invariants:
//! 1. Replies follow Redis's shapes closely enough for clients that probe at connect
//!    (`redis-cli`, `redis-benchmark`, the `redis` crate): HELLO 2 answers a map as a flat
//!    array, COMMAND DOCS an empty array, CONFIG GET a flat name/value array.

use super::{arg, is, parse_i64, Args, Failure, Outcome, Spec};
use crate::context::{Context, Session};
use crate::resp::Reply;
use std::sync::atomic::Ordering;

/// The server commands.
pub const SPECS: &[Spec] = &[
    super::spec("ping", -1, false, (0, 0, 0), ping),
    super::spec("echo", 2, false, (0, 0, 0), echo),
    super::spec("info", -1, false, (0, 0, 0), info),
    super::spec("command", -1, false, (0, 0, 0), command),
    super::spec("config", -2, false, (0, 0, 0), config),
    super::spec("client", -2, false, (0, 0, 0), client),
    super::spec("select", 2, false, (0, 0, 0), select),
    super::spec("time", 1, false, (0, 0, 0), time),
    super::spec("quit", -1, false, (0, 0, 0), quit),
    super::spec("shutdown", -1, false, (0, 0, 0), shutdown),
    super::spec("hello", -1, false, (0, 0, 0), hello),
];

/// The Redis version reported to clients (the command set follows Redis 7).
const REDIS_VERSION: &str = "7.0.0";

fn ping(_: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    match args.len() {
        1 => Ok(Reply::Simple("PONG".to_string())),
        2 => Ok(Reply::bulk(arg(args, 1))),
        _ => Err(Failure::err("wrong number of arguments for 'ping' command")),
    }
}

fn echo(_: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    Ok(Reply::bulk(arg(args, 1)))
}

fn info(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let wanted = args.get(1).map(|section| section.to_ascii_lowercase());
    let uptime = context.started.elapsed().as_secs();
    let sections: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "Server",
            vec![
                ("redis_version".into(), REDIS_VERSION.into()),
                (
                    "cairn_server_version".into(),
                    env!("CARGO_PKG_VERSION").into(),
                ),
                ("redis_mode".into(), "standalone".into()),
                ("process_id".into(), std::process::id().to_string()),
                ("tcp_port".into(), context.port.to_string()),
                ("uptime_in_seconds".into(), uptime.to_string()),
            ],
        ),
        (
            "Clients",
            vec![(
                "connected_clients".into(),
                context.clients.load(Ordering::Relaxed).to_string(),
            )],
        ),
        (
            "Stats",
            vec![(
                "total_commands_processed".into(),
                context.commands_processed().to_string(),
            )],
        ),
        ("Engine", {
            let mut lines = vec![(
                "engine".to_string(),
                context.store.engine_name().to_string(),
            )];
            lines.extend(context.store.info());
            lines
        }),
    ];
    let mut text = String::new();
    for (name, lines) in sections {
        let selected = wanted.as_deref().is_none_or(|wanted| {
            wanted == b"all"
                || wanted == b"everything"
                || wanted == b"default"
                || wanted == name.to_ascii_lowercase().as_bytes()
        });
        if !selected {
            continue;
        }
        text.push_str(&format!("# {name}\r\n"));
        for (key, value) in lines {
            text.push_str(&format!("{key}:{value}\r\n"));
        }
        text.push_str("\r\n");
    }
    Ok(Reply::bulk(text))
}

fn command(_: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let specs = super::table();
    let describe = |spec: &Spec| {
        let flags = if spec.write { "write" } else { "readonly" };
        Reply::Array(vec![
            Reply::bulk(spec.name),
            Reply::Integer(i64::from(spec.arity)),
            Reply::Array(vec![Reply::Simple(flags.to_string())]),
            Reply::Integer(i64::from(spec.keys.0)),
            Reply::Integer(i64::from(spec.keys.1)),
            Reply::Integer(i64::from(spec.keys.2)),
        ])
    };
    match args.get(1) {
        None => Ok(Reply::Array(specs.iter().map(describe).collect())),
        Some(sub) if is(sub, "COUNT") => Ok(Reply::Integer(specs.len() as i64)),
        // No documentation is served; clients that probe it get an empty map.
        Some(sub) if is(sub, "DOCS") => Ok(Reply::Array(Vec::new())),
        Some(sub) if is(sub, "INFO") => Ok(Reply::Array(
            args.iter()
                .skip(2)
                .map(|name| super::find(name).map_or(Reply::NilArray, |spec| describe(&spec)))
                .collect(),
        )),
        Some(sub) => Err(Failure::err(format!(
            "unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        ))),
    }
}

/// The parameters CONFIG GET answers (name, current value).
fn config_values(context: &Context) -> Vec<(&'static str, String)> {
    let config = &context.config;
    vec![
        (
            "proto-max-bulk-len",
            config
                .proto_max_bulk_len
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "client-query-buffer-limit",
            config
                .query_buffer_limit
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "maxclients",
            config.max_clients.load(Ordering::Relaxed).to_string(),
        ),
        ("save", String::new()),
        ("appendonly", "no".to_string()),
        ("databases", "1".to_string()),
        ("port", context.port.to_string()),
    ]
}

fn config(context: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    let sub = arg(args, 1);
    if is(sub, "GET") && args.len() >= 3 {
        let mut reply = Vec::new();
        for (name, value) in config_values(context) {
            if args.iter().skip(2).any(|pattern| {
                super::keys::glob_match(&pattern.to_ascii_lowercase(), name.as_bytes())
            }) {
                reply.push(Reply::bulk(name));
                reply.push(Reply::bulk(value));
            }
        }
        return Ok(Reply::Array(reply));
    }
    if is(sub, "SET") && args.len() >= 4 && args.len().is_multiple_of(2) {
        for pair in args.get(2..).unwrap_or_default().chunks_exact(2) {
            if let [name, value] = pair {
                config_set(context, name, value)?;
            }
        }
        return Ok(Reply::ok());
    }
    if is(sub, "RESETSTAT") || is(sub, "REWRITE") {
        return Ok(Reply::ok());
    }
    Err(Failure::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
        String::from_utf8_lossy(sub)
    )))
}

fn config_set(context: &Context, name: &[u8], value: &[u8]) -> Result<(), Failure> {
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    let invalid = || {
        Failure::err(format!("CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"))
    };
    let number = || {
        parse_i64(value)
            .ok()
            .and_then(|value| u64::try_from(value).ok())
            .ok_or_else(invalid)
    };
    let config = &context.config;
    match name.as_str() {
        "proto-max-bulk-len" => config
            .proto_max_bulk_len
            .store(number()?.max(1024 * 1024), Ordering::Relaxed),
        "client-query-buffer-limit" => config
            .query_buffer_limit
            .store(number()?.max(1024 * 1024) as usize, Ordering::Relaxed),
        "maxclients" => config
            .max_clients
            .store(number()?.max(1) as usize, Ordering::Relaxed),
        // Accepted and ignored, so tools that turn persistence knobs do not fail.
        "save" | "appendonly" | "appendfsync" => {}
        _ => {
            return Err(Failure::err(format!(
                "Unknown option or number of arguments for CONFIG SET - '{name}'"
            )))
        }
    }
    Ok(())
}

fn client(_: &Context, session: &mut Session, args: &Args<'_>) -> Outcome {
    let sub = arg(args, 1);
    match args.len() {
        3 if is(sub, "SETNAME") => {
            let name = arg(args, 2);
            if name.iter().any(|byte| *byte <= b' ' || *byte > b'~') {
                return Err(Failure::err(
                    "Client names cannot contain spaces, newlines or special characters.",
                ));
            }
            session.name = (!name.is_empty()).then(|| name.to_vec());
            Ok(Reply::ok())
        }
        2 if is(sub, "GETNAME") => Ok(Reply::optional(session.name.clone())),
        2 if is(sub, "ID") => Ok(Reply::Integer(session.id as i64)),
        // Client libraries announce themselves; nothing to record.
        _ if is(sub, "SETINFO") => Ok(Reply::ok()),
        _ => Err(Failure::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        ))),
    }
}

fn select(_: &Context, _: &mut Session, args: &Args<'_>) -> Outcome {
    match parse_i64(arg(args, 1)) {
        Ok(0) => Ok(Reply::ok()),
        Ok(_) => Err(Failure::err("DB index is out of range")),
        Err(failure) => Err(failure),
    }
}

fn time(_: &Context, _: &mut Session, _: &Args<'_>) -> Outcome {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::bulks([
        now.as_secs().to_string().into_bytes(),
        now.subsec_micros().to_string().into_bytes(),
    ]))
}

fn quit(_: &Context, session: &mut Session, _: &Args<'_>) -> Outcome {
    session.close = true;
    Ok(Reply::ok())
}

fn shutdown(context: &Context, session: &mut Session, args: &Args<'_>) -> Outcome {
    for option in args.iter().skip(1) {
        let known = ["NOSAVE", "SAVE", "NOW", "FORCE", "ABORT"]
            .iter()
            .any(|name| is(option, name));
        if !known || is(option, "ABORT") {
            return Err(Failure::syntax());
        }
    }
    context.shutting_down.store(true, Ordering::Release);
    session.shutdown = true;
    Ok(Reply::ok())
}

fn hello(_: &Context, session: &mut Session, args: &Args<'_>) -> Outcome {
    if let Some(version) = args.get(1) {
        match parse_i64(version) {
            Ok(2) => {}
            Ok(_) => {
                return Err(Failure(Reply::Error(
                    "NOPROTO unsupported protocol version".to_string(),
                )))
            }
            Err(_) => {
                return Err(Failure::err(
                    "Protocol version is not an integer or out of range",
                ))
            }
        }
    }
    let mut index = 2;
    while index < args.len() {
        let option = arg(args, index);
        if is(option, "SETNAME") && index + 1 < args.len() {
            session.name = Some(arg(args, index + 1).to_vec());
            index += 2;
        } else if is(option, "AUTH") {
            return Err(Failure::err(
                "AUTH is not supported (the server has no users)",
            ));
        } else {
            return Err(Failure::syntax());
        }
    }
    Ok(Reply::Array(vec![
        Reply::bulk("server"),
        Reply::bulk("redis"),
        Reply::bulk("version"),
        Reply::bulk(REDIS_VERSION),
        Reply::bulk("proto"),
        Reply::Integer(2),
        Reply::bulk("id"),
        Reply::Integer(session.id as i64),
        Reply::bulk("mode"),
        Reply::bulk("standalone"),
        Reply::bulk("role"),
        Reply::bulk("master"),
        Reply::bulk("modules"),
        Reply::Array(Vec::new()),
    ]))
}
