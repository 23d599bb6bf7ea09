//! The progress bar of a long `l` load: nothing for a load that ends within a second, then
//! a bar with pairs done, pairs/s and the time left, drawn on stderr when it is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::{Duration, Instant};

/// Loads shorter than this draw nothing.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// Pairs between two looks at the clock (keeps the per-pair cost to a counter test).
const CHECK_EVERY: u64 = 4096;

/// Progress of one load.
#[derive(Debug)]
pub struct LoadProgress {
    enabled: bool,
    /// Pairs expected (`None`: a stream of unknown length, e.g. a FIFO).
    total: Option<u64>,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl LoadProgress {
    /// `enabled`: stderr is a terminal. `total`: pairs in the file, if its size tells.
    pub fn new(enabled: bool, total: Option<u64>) -> Self {
        LoadProgress {
            enabled,
            total,
            started: Instant::now(),
            bar: None,
        }
    }

    /// Whether a load that has run for `elapsed` should show a bar.
    pub fn due(enabled: bool, elapsed: Duration) -> bool {
        enabled && elapsed >= QUIET_FOR
    }

    /// Called after each pair; `done` pairs are applied.
    pub fn tick(&mut self, done: u64) {
        if !done.is_multiple_of(CHECK_EVERY) {
            return;
        }
        match &self.bar {
            Some(bar) => bar.set_position(done),
            None if Self::due(self.enabled, self.started.elapsed()) => {
                let bar = ProgressBar::with_draw_target(
                    self.total,
                    ProgressDrawTarget::stderr_with_hz(4),
                );
                // Without a length there is no bar to fill nor time left to tell.
                let template = match self.total {
                    Some(_) => {
                        "loading {bar:30} {human_pos}/{human_len} pairs, {per_sec}, {eta} left"
                    }
                    None => "loading {human_pos} pairs, {per_sec}",
                };
                bar.set_style(
                    ProgressStyle::with_template(template)
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar.set_position(done);
                self.bar = Some(bar);
            }
            None => {}
        }
    }

    /// Ends the bar with a summary line (pairs/s), if one was drawn.
    pub fn finish(&mut self, done: u64) {
        if let Some(bar) = self.bar.take() {
            let seconds = self.started.elapsed().as_secs_f64();
            let rate = if seconds > 0.0 {
                done as f64 / seconds
            } else {
                0.0
            };
            bar.finish_and_clear();
            eprintln!("loaded {done} pairs in {seconds:.1} s ({rate:.0} pairs/s)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loads_over_a_second_on_a_terminal_show_a_bar() {
        assert!(!LoadProgress::due(true, Duration::from_millis(999)));
        assert!(LoadProgress::due(true, Duration::from_secs(1)));
        assert!(!LoadProgress::due(false, Duration::from_secs(60)));
    }
}
