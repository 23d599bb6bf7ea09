//! Writes a seeded CS265 workload, its load files and the oracle's expected output to a
//! directory, for manual runs of `cairn shell`.
//!
//! ```text
//! cargo run -p cairn-cli --example cs265_gen -- --seed 1 --commands 100000 --out /tmp/w
//! cargo run --release -p cairn-cli -- shell --db /tmp/w/db --file /tmp/w/workload.txt > /tmp/w/out.txt
//! cmp /tmp/w/out.txt /tmp/w/expected.txt
//! ```
//!
//! With `--name NAME` the files are `NAME.txt`, `NAME.expected.txt` and `NAME_load_XX.bin`.
//! The bundled demo was made, from the repository root, with
//!
//! ```text
//! cargo run -p cairn-cli --example cs265_gen -- --seed 2026 --commands 20000 --loads 4 \
//!     --load-pairs 2000 --name demo --load-path-prefix crates/cairn-cli/workloads/ \
//!     --out crates/cairn-cli/workloads
//! ```
//! The generator and the oracle live in
//! `tests/support/workload.rs`; the oracle is independent of the shell's executor.

#[path = "../tests/support/workload.rs"]
mod workload;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Generate a CS265 workload and its expected output.
#[derive(Debug, Parser)]
struct Args {
    /// Seed (the same seed gives the same files)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of commands
    #[arg(long, default_value_t = 100_000)]
    commands: usize,
    /// Number of `l` loads (default: from the command count)
    #[arg(long)]
    loads: Option<usize>,
    /// Pairs per load file (default: from the command count)
    #[arg(long)]
    load_pairs: Option<usize>,
    /// Per-mille of ranges that are large (thousands of keys)
    #[arg(long)]
    large_ranges_per_mille: Option<u64>,
    /// File name stem; without it: workload.txt, expected.txt, load_XX.bin
    #[arg(long)]
    name: Option<String>,
    /// Directory written before each file name in the `l` lines, for workloads meant to be run
    /// from elsewhere (the demo uses `crates/cairn-cli/workloads/`, relative to the repository
    /// root); by default `l` lines name the bare files
    #[arg(long, default_value = "")]
    load_path_prefix: String,
    /// Output directory (created if missing)
    #[arg(long)]
    out: PathBuf,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let mut config = workload::Config::new(args.seed, args.commands);
    if let Some(loads) = args.loads {
        config.loads = loads;
    }
    if let Some(pairs) = args.load_pairs {
        config.load_pairs = pairs;
    }
    if let Some(per_mille) = args.large_ranges_per_mille {
        config.large_range_per_mille = per_mille;
    }
    config.path_prefix = args.load_path_prefix.clone();
    let (text_name, expected_name) = match &args.name {
        Some(name) => {
            config.file_prefix = format!("{name}_");
            (format!("{name}.txt"), format!("{name}.expected.txt"))
        }
        None => ("workload.txt".to_string(), "expected.txt".to_string()),
    };
    let workload = workload::generate(&config);
    let expected = workload::oracle(&workload.text, &|name| {
        workload.file(name).map(<[u8]>::to_vec)
    })?;
    std::fs::create_dir_all(&args.out)
        .map_err(|error| format!("cannot create {}: {error}", args.out.display()))?;
    let write = |name: &str, bytes: &[u8]| {
        let path = args.out.join(name);
        std::fs::write(&path, bytes)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    };
    write(&text_name, workload.text.as_bytes())?;
    for (name, bytes) in &workload.files {
        write(name, bytes)?;
    }
    write(&expected_name, expected.stdout.as_bytes())?;
    eprintln!(
        "wrote {} ({:?}), {} load files and {} ({} lines) to {}",
        text_name,
        workload::command_counts(&workload.text),
        workload.files.len(),
        expected_name,
        expected.sources.len(),
        args.out.display()
    );
    Ok(())
}
