//! How far apart the host placed this process's CPUs: the round trip of one cache line
//! between two threads pinned to two different CPUs.
//!
//! Why: on a virtual machine the host may put two vCPUs in one cache complex, where a line
//! moves between them in tens of nanoseconds, or in two, where it takes hundreds. It may also
//! move them during a run. On the 2-vCPU machine this project measures on, the round trip
//! flips between ~55 ns and ~350 ns from minute to minute. Any engine whose threads share
//! memory (all of them) runs slower in the second placement: there, 2-thread cairn puts cost
//! ~4.0 µs of CPU instead of ~3.0 µs. So a scaling figure can only be read next to the
//! placement it was measured under. Each phase records a probe before and after it.
//!
//! Thread-safety contract: `round_trip_ns` spawns its own two threads. It pins only those
//! threads, so the caller's affinity and its later threads are untouched. It takes both CPUs
//! for a few milliseconds.
//!
//! Limits: at most `TRIALS * ROUND_TRIPS` round trips, and it gives up after
//! `DEADLINE` (a loaded machine may not run both threads at once). Then it answers `None`,
//! as it does off Linux or with fewer than two CPUs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Round trips per trial.
const ROUND_TRIPS: u64 = 20_000;
/// Trials; the answer is their median.
const TRIALS: usize = 3;
/// The whole probe gives up after this long.
const DEADLINE: Duration = Duration::from_millis(300);

/// The ping-pong word, alone on its cache lines so nothing else moves with it.
#[repr(align(128))]
struct Line(AtomicU64);

/// Median round trip, in nanoseconds, of a cache line between the first two CPUs this
/// process may run on; `None` if it cannot be measured.
pub fn round_trip_ns() -> Option<f64> {
    let (first, second) = two_cpus()?;
    let started = Instant::now();
    let mut trials = Vec::with_capacity(TRIALS);
    for _ in 0..TRIALS {
        trials.push(one_trial(first, second, started + DEADLINE)?);
    }
    trials.sort_by(f64::total_cmp);
    trials.get(TRIALS / 2).copied()
}

/// One trial: `ROUND_TRIPS` hand-offs of `line` between the two pinned threads.
fn one_trial(first: usize, second: usize, deadline: Instant) -> Option<f64> {
    let line = Line(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    let elapsed = std::thread::scope(|scope| {
        let answerer = scope.spawn(|| {
            if !pin_current_thread(second) {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            for round in 0..ROUND_TRIPS {
                if !wait_for(&line.0, 2 * round + 1, &stop, deadline) {
                    return;
                }
                line.0.store(2 * round + 2, Ordering::Release);
            }
        });
        let asker = scope.spawn(|| {
            if !pin_current_thread(first) {
                stop.store(true, Ordering::Relaxed);
                return None;
            }
            let started = Instant::now();
            for round in 0..ROUND_TRIPS {
                if !wait_for(&line.0, 2 * round, &stop, deadline) {
                    return None;
                }
                line.0.store(2 * round + 1, Ordering::Release);
            }
            if !wait_for(&line.0, 2 * ROUND_TRIPS, &stop, deadline) {
                return None;
            }
            Some(started.elapsed())
        });
        let elapsed = asker.join().ok().flatten();
        // The answerer stops at the deadline or on `stop` if the asker gave up early.
        stop.store(true, Ordering::Relaxed);
        let _ = answerer.join();
        elapsed
    })?;
    Some(elapsed.as_nanos() as f64 / ROUND_TRIPS as f64)
}

/// Spins until `line` holds `value`; false if stopped or past the deadline.
fn wait_for(line: &AtomicU64, value: u64, stop: &AtomicBool, deadline: Instant) -> bool {
    let mut spins = 0u32;
    while line.load(Ordering::Acquire) != value {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        // Checking the clock and the flag every spin would slow the hand-off being timed.
        if spins.is_multiple_of(4096)
            && (stop.load(Ordering::Relaxed) || Instant::now() >= deadline)
        {
            stop.store(true, Ordering::Relaxed);
            return false;
        }
    }
    true
}

/// The first two CPUs in this thread's affinity mask.
#[cfg(target_os = "linux")]
fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size and pointer describe `set`.
    let status =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if status != 0 {
        return None;
    }
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&cpu| {
        // SAFETY: `cpu` is below CPU_SETSIZE, the capacity of the set.
        unsafe { libc::CPU_ISSET(cpu, &set) }
    });
    Some((cpus.next()?, cpus.next()?))
}

#[cfg(not(target_os = "linux"))]
fn two_cpus() -> Option<(usize, usize)> {
    None
}

/// Pins the calling thread to `cpu`; false if the system refused.
#[cfg(target_os = "linux")]
fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: as in `two_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from the affinity mask, so it is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the size and pointer describe `set`.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpu: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_is_measured_and_plausible_or_absent() {
        let started = Instant::now();
        let answer = round_trip_ns();
        // The deadline bounds the probe even when the two threads cannot run together.
        assert!(started.elapsed() < DEADLINE + Duration::from_millis(200));
        if let Some(nanoseconds) = answer {
            // A hand-off each way cannot beat a nanosecond, and a trial that finished did so
            // before the deadline.
            assert!(nanoseconds > 1.0, "{nanoseconds} ns");
            assert!(
                nanoseconds < DEADLINE.as_nanos() as f64 / ROUND_TRIPS as f64,
                "{nanoseconds} ns"
            );
        }
        // `None` is a legitimate answer: one CPU, or a machine too busy (parallel tests) to
        // run both threads before the deadline.
    }

    #[test]
    fn the_caller_keeps_its_affinity() {
        let before = two_cpus();
        let _ = round_trip_ns();
        assert_eq!(two_cpus(), before);
    }
}
