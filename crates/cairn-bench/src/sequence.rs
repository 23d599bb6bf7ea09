//! Running a workload sequence on a database: one engine after another (the default), or
//! several engines advanced phase by phase together (`--interleave_phases`), so that two
//! configurations compared on one machine see the same minute of it.
//!
//! Invariants:
//! 1. Every sequence starts on a fresh directory under the run's database root, its own even
//!    when an engine is listed twice, and removes it at the end.
//! 2. A workload whose preload needs a fresh database reopens the engine on an emptied
//!    directory; one that needs the key space loaded loads it once.
//! 3. Interleaved, phase `i` of every engine runs before phase `i + 1` of any engine, and each
//!    engine's phases run in list order, so each engine's database goes through exactly the
//!    states it would alone. Phase `i` starts with engine `i mod n` (the engines take turns
//!    going first), so neither side of a pair always runs second.

use crate::engine::{self, Engine, EngineConfig};
use crate::error::{BenchError, Context, Result};
use crate::runner::{self, DbState, Params};
use crate::workloads::{Preload, Workload};
use std::path::{Path, PathBuf};

/// What every sequence of one run shares.
pub struct RunContext<'a> {
    pub config: &'a EngineConfig,
    pub workloads: &'a [Workload],
    pub db_root: &'a Path,
    pub progress: bool,
}

/// Empties (or creates) `dir`.
pub fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).context(format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).context(format!("creating {}", dir.display()))
}

/// One engine's database going through the workload list.
struct Sequence<'a> {
    name: &'a str,
    dir: PathBuf,
    /// None only between closing and reopening it for a fresh database.
    engine: Option<Box<dyn Engine>>,
    state: DbState,
}

impl<'a> Sequence<'a> {
    /// Opens `name` on a fresh directory `dir_name` under the run's root (invariant 1).
    fn open(context: &RunContext<'_>, name: &'a str, dir_name: &str) -> Result<Self> {
        let dir = context.db_root.join(dir_name);
        fresh_dir(&dir)?;
        let engine = engine::open(name, &dir, context.config)
            .map_err(|error| error.context(format!("opening {name} in {}", dir.display())))?;
        Ok(Sequence {
            name,
            dir,
            engine: Some(engine),
            state: DbState::default(),
        })
    }

    /// Runs workload `index` (after its preload, invariant 2); None if the engine cannot.
    fn run_phase(
        &mut self,
        context: &RunContext<'_>,
        index: usize,
        threads: usize,
        params: &Params,
        tag: &str,
    ) -> Result<Option<runner::PhaseOutput>> {
        let workload = &context.workloads[index];
        // Reported as unsupported in the results; skipped before any load it would need.
        if workload.needs_scan() && !engine::supports_scan(self.name) {
            return Ok(None);
        }
        let needs_fresh = matches!(
            workload.preload,
            Preload::Fresh | Preload::Sequential | Preload::Half
        );
        if needs_fresh && self.state.used {
            if let Some(engine) = self.engine.take() {
                engine.close()?;
            }
            fresh_dir(&self.dir)?;
            self.engine = Some(engine::open(self.name, &self.dir, context.config)?);
            self.state = DbState::default();
        }
        let Some(engine) = self.engine.as_deref() else {
            return Err(BenchError::new(format!("{} is not open", self.name)));
        };
        let load = match workload.preload {
            Preload::Sequential | Preload::Half => Some(workload.preload),
            Preload::Existing if !self.state.loaded => Some(Preload::Existing),
            _ => None,
        };
        if let Some(kind) = load {
            runner::load(
                engine,
                params,
                &mut self.state,
                kind,
                threads,
                &self.dir,
                context.progress,
            )
            .map_err(|error| error.context(format!("{} load for {}", self.name, workload.name)))?;
        }
        let label = format!("{tag} {} {} t={threads}", self.name, workload.name);
        let output = runner::measure(
            engine,
            params,
            &mut self.state,
            workload,
            threads,
            &self.dir,
            context.progress.then_some(label.as_str()),
        )
        .map_err(|error| error.context(format!("{} {}", self.name, workload.name)))?;
        Ok(Some(output))
    }

    /// Closes the engine and removes its directory (invariant 1).
    fn close(self) -> Result<()> {
        if let Some(engine) = self.engine {
            engine.close()?;
        }
        std::fs::remove_dir_all(&self.dir).context(format!("removing {}", self.dir.display()))
    }
}

/// Runs the workload sequence for one engine and thread count on a fresh database; `sink`
/// gets each phase's workload index and output.
pub fn run_sequence(
    context: &RunContext<'_>,
    engine_name: &str,
    threads: usize,
    params: &Params,
    tag: &str,
    mut sink: impl FnMut(usize, runner::PhaseOutput),
) -> Result<()> {
    let mut sequence = Sequence::open(context, engine_name, engine_name)?;
    for index in 0..context.workloads.len() {
        if let Some(output) = sequence.run_phase(context, index, threads, params, tag)? {
            sink(index, output);
        }
    }
    sequence.close()
}

/// Runs the workload sequence of every engine at once, phase by phase (invariant 3); `sink`
/// gets each phase's engine index, workload index and output.
pub fn run_interleaved(
    context: &RunContext<'_>,
    engine_names: &[String],
    threads: usize,
    params: &Params,
    tag: &str,
    mut sink: impl FnMut(usize, usize, runner::PhaseOutput),
) -> Result<()> {
    let mut sequences = Vec::with_capacity(engine_names.len());
    // Numbered directories: the same engine may be listed twice (an A/A noise check).
    for (index, name) in engine_names.iter().enumerate() {
        sequences.push(Sequence::open(context, name, &format!("{index}-{name}"))?);
    }
    let count = sequences.len();
    for index in 0..context.workloads.len() {
        // Turns (invariant 3): in an A/A run the engine that went first measured about
        // 2.5 % slower (bench/results/2026-11-27-s9-flodb/ycsb-e), which a fixed order
        // charges to one side of every pair.
        for offset in 0..count {
            let engine_index = (index + offset) % count;
            let Some(sequence) = sequences.get_mut(engine_index) else {
                continue;
            };
            if let Some(output) = sequence.run_phase(context, index, threads, params, tag)? {
                sink(engine_index, index, output);
            }
        }
    }
    for sequence in sequences {
        sequence.close()?;
    }
    Ok(())
}
