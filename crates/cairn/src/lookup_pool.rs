//! A bounded pool of threads that runs read-path jobs: the probes of a point lookup that
//! must search several sorted runs (CS265 §2.4.2), run concurrently instead of one after
//! another (`Options::lookup_threads`).
//!
//! Why a pool of its own: the probes are short (a filter check, an index search, maybe one
//! block read), so a thread per probe would cost more than the probe; the pool's threads are
//! started once, with the database. Parallel probes help when the runs' blocks are not in
//! memory (each probe waits on a read, and the waits overlap); when every block is cached they
//! cost a hand-off per probe and are slower, which is why the option is off by default.
//!
//! Thread-safety contract: `LookupPool` is `Send + Sync`; any thread may submit. A job runs on
//! one pool thread; a panicking job is caught so the thread keeps serving.
//!
//! Invariants:
//! 1. At most [`QUEUE_JOBS_MAX`] jobs wait; beyond that `try_submit` hands the job back and the
//!    caller runs it itself (the pool never makes a lookup wait behind an unbounded queue).
//! 2. After drop no job is waiting and every pool thread has exited — unless the pool was
//!    dropped by one of its own jobs: that thread exits after finishing the queue.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// Jobs that may wait for a pool thread (invariant 1).
pub const QUEUE_JOBS_MAX: usize = 256;

/// A unit of work.
pub type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    shutdown: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Jobs run outside the lock, so a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// See the module documentation.
pub struct LookupPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for LookupPool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LookupPool")
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl LookupPool {
    /// Starts `threads` pool threads.
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let mut pool = LookupPool {
            shared,
            threads: Vec::with_capacity(threads),
        };
        for index in 0..threads {
            let shared = Arc::clone(&pool.shared);
            let thread = std::thread::Builder::new()
                .name(format!("cairn-lookup-{index}"))
                .spawn(move || serve(&shared))?;
            pool.threads.push(thread);
        }
        Ok(pool)
    }

    /// Queues `job`, or hands it back when the queue is full (invariant 1).
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        let mut queue = self.shared.lock();
        if queue.jobs.len() >= QUEUE_JOBS_MAX || queue.shutdown {
            return Err(job);
        }
        queue.jobs.push_back(job);
        drop(queue);
        self.shared.ready.notify_one();
        Ok(())
    }
}

/// A pool thread: runs jobs until shutdown and an empty queue.
fn serve(shared: &Shared) {
    loop {
        let job = {
            let mut queue = shared.lock();
            loop {
                if let Some(job) = queue.jobs.pop_front() {
                    break job;
                }
                if queue.shutdown {
                    return;
                }
                queue = shared
                    .ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        // A panic would only lose this job's answer (its caller sees the channel close).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

impl Drop for LookupPool {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.ready.notify_all();
        // A job may hold the last reference to what owns the pool (a lookup's table cache),
        // so the pool can be dropped on one of its own threads. That thread cannot join
        // itself (the join fails with EDEADLK and panics); it returns from the job, finishes
        // the queue and exits on the shutdown flag (invariant 2's exception).
        let current = std::thread::current().id();
        let mut on_own_thread = false;
        for thread in self.threads.drain(..) {
            if thread.thread().id() == current {
                on_own_thread = true;
                continue;
            }
            let _ = thread.join();
        }
        debug_assert!(
            on_own_thread || self.shared.lock().jobs.is_empty(),
            "invariant 2"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A job that drops the last reference to the pool (as a lookup holding the last table
    /// cache reference does) must not make the pool join the thread it runs on.
    #[test]
    fn a_pool_dropped_by_its_own_job_does_not_join_that_thread() {
        let pool = Arc::new(LookupPool::new(2).unwrap());
        let (go_sender, go) = mpsc::channel::<()>();
        let (result_sender, result) = mpsc::channel();
        let last = Arc::clone(&pool);
        let job: Job = Box::new(move || {
            go.recv().unwrap();
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(last)));
            result_sender.send(dropped.is_ok()).unwrap();
        });
        assert!(pool.try_submit(job).is_ok());
        drop(pool);
        go_sender.send(()).unwrap();
        assert_eq!(result.recv().ok(), Some(true), "dropping the pool panicked");
    }

    #[test]
    fn runs_every_job_and_survives_a_panic() {
        let pool = LookupPool::new(2).unwrap();
        let (sender, receiver) = mpsc::channel();
        pool.try_submit(Box::new(|| panic!("a failing job"))).ok();
        for index in 0..100 {
            let sender = sender.clone();
            let job: Job = Box::new(move || sender.send(index).unwrap());
            if let Err(job) = pool.try_submit(job) {
                job();
            }
        }
        drop(sender);
        let mut got: Vec<i32> = receiver.iter().collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        drop(pool);
    }
}
