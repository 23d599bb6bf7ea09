//! The TCP server: configuration, opening the engine, the accept loop, one task per
//! connection (read, parse, run, reply, with pipelining), limits, and shutdown.
//!
//! Thread-safety contract: a tokio runtime of `--threads` threads (one: the current-thread
//! runtime, every connection on one thread; more: the multi-threaded runtime with that many
//! workers, the default one per CPU); each connection is one task that
//! owns its buffers and `Session`; everything shared lives in the `Context` (an `Arc`).
//! Command handlers run inline on the connection's task: engine calls are short (a memtable
//! insert, a cached read), except an fsync under `--sync always`, which holds that worker.
//!
//! Invariants:
//! 1. Replies go out in request order: a connection parses and runs every complete request in
//!    its buffer (`pipeline`), appending replies to one output buffer, and writes that buffer
//!    with one write before it reads again (pipelining without reordering); when the output
//!    passes `pipeline::OUTPUT_LIMIT` it is written at once, and the rest of the buffer run
//!    before the connection reads again.
//! 2. A protocol error is answered with Redis's text and the connection closed; bytes after
//!    it are never run.
//! 3. A connection never buffers more than `client-query-buffer-limit` bytes of unfinished
//!    requests, and a single bulk larger than `proto-max-bulk-len` is refused from its header;
//!    its buffers' capacity returns to a few times what a round uses (`shrink_buffer`).
//! 4. Shutdown (SIGTERM, SIGINT or SHUTDOWN) stops accepting, lets every connection finish
//!    the requests it already read, then closes the store before `run` returns.

use crate::context::{Context, Session};
use crate::expiry;
use crate::pipeline::{run_requests, shrink_buffer, Next, Scratch};
use crate::store::{DbStore, MemStoreStore, SharedStore};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// How long the accept loop pauses after a failed accept (usually out of descriptors).
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Which engine serves the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The LSM tree (`cairn::Db`): persistent.
    Db,
    /// The in-memory log-structured store (`cairn::MemStore`): lost at exit.
    MemStore,
}

/// Server configuration (the command line).
#[derive(Debug, Clone)]
pub struct Config {
    /// The engine.
    pub engine: Engine,
    /// The database directory (`db` engine).
    pub dir: PathBuf,
    /// TCP port (0: any free port, printed at start).
    pub port: u16,
    /// Address to bind.
    pub bind: String,
    /// fsync the log before acknowledging each write.
    pub sync: bool,
    /// Log capacity of the `memstore` engine.
    pub memstore_bytes: usize,
    /// The `db` engine's Membuffer (`cairn::Options::membuffer_enabled`).
    pub membuffer: bool,
    /// Runtime threads serving connections: 1 is one thread for everything (tokio's
    /// current-thread runtime), more is a multi-threaded runtime with that many workers.
    pub threads: usize,
}

/// Opens the configured engine.
pub fn open_store(config: &Config) -> Result<SharedStore, String> {
    match config.engine {
        Engine::Db => {
            let mut options = cairn::Options::default();
            options.membuffer_enabled = config.membuffer;
            let db = cairn::Db::open(&config.dir, options)
                .map_err(|error| format!("cannot open {}: {error}", config.dir.display()))?;
            Ok(Arc::new(DbStore::new(db, config.sync)))
        }
        Engine::MemStore => {
            let options = cairn::MemStoreOptions {
                capacity_bytes: config.memstore_bytes,
                ..cairn::MemStoreOptions::default()
            };
            let store = cairn::MemStore::new(options)
                .map_err(|error| format!("cannot create the memstore: {error}"))?;
            Ok(Arc::new(MemStoreStore::new(store)))
        }
    }
}

/// Runs the server until shutdown; returns after the store is closed.
pub fn run(config: Config) -> Result<(), String> {
    let runtime = if config.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads)
            .enable_all()
            .build()
    }
    .map_err(|error| format!("cannot start the runtime: {error}"))?;
    let store = open_store(&config)?;
    let served = runtime.block_on(async {
        let listener = TcpListener::bind((config.bind.as_str(), config.port))
            .await
            .map_err(|error| {
                format!("cannot listen on {}:{}: {error}", config.bind, config.port)
            })?;
        let port = listener
            .local_addr()
            .map_err(|error| error.to_string())?
            .port();
        println!(
            "cairn-server ready: engine {:?}, port {port}",
            config.engine
        );
        let context = Arc::new(Context::new(Arc::clone(&store), port));
        serve(listener, context).await;
        Ok::<(), String>(())
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    let closed = store
        .close()
        .map_err(|error| format!("closing the store: {error}"));
    served.and(closed)
}

/// Accepts connections until SIGTERM, SIGINT or SHUTDOWN.
pub async fn serve(listener: TcpListener, context: Arc<Context>) {
    let (stop_sender, stop) = watch::channel(false);
    let wake = Arc::new(Notify::new());
    let sampler = tokio::spawn(expiry::run_sampler(Arc::clone(&context)));
    let mut connections = tokio::task::JoinSet::new();
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    loop {
        let terminated = async {
            match terminate.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors (EMFILE) or memory, accept fails at once until a
                    // connection closes: pause instead of spinning a core on it.
                    tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                    continue;
                };
                let task = connection(stream, Arc::clone(&context), stop.clone(), Arc::clone(&wake));
                connections.spawn(task);
            }
            _ = wake.notified() => break,
            _ = terminated => break,
            _ = tokio::signal::ctrl_c() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    context.shutting_down.store(true, Ordering::Release);
    let _ = stop_sender.send(true);
    drop(listener);
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        while connections.join_next().await.is_some() {}
    });
    if drained.await.is_err() {
        connections.abort_all();
    }
    sampler.abort();
}

/// Serves one client.
async fn connection(
    mut stream: TcpStream,
    context: Arc<Context>,
    mut stop: watch::Receiver<bool>,
    wake: Arc<Notify>,
) {
    let max_clients = context.config.max_clients.load(Ordering::Relaxed);
    if context.clients.fetch_add(1, Ordering::AcqRel) >= max_clients {
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        context.clients.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let _ = stream.set_nodelay(true);
    let mut session = Session {
        id: context.next_client_id.fetch_add(1, Ordering::Relaxed),
        ..Session::default()
    };
    serve_client(&mut stream, &context, &mut session, &mut stop).await;
    let _ = stream.shutdown().await;
    context.clients.fetch_sub(1, Ordering::AcqRel);
    if session.shutdown {
        wake.notify_one();
    }
}

async fn serve_client(
    stream: &mut TcpStream,
    context: &Context,
    session: &mut Session,
    stop: &mut watch::Receiver<bool>,
) {
    let mut input: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut output: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut scratch = Scratch::default();
    // One wait for the stop signal for the connection's whole life, not one per read: each
    // `changed()` registers with the channel, a cost an unpipelined request would pay.
    let stopped = stop.changed();
    tokio::pin!(stopped);
    loop {
        let (next, consumed) = run_requests(&input, &mut output, context, session, &mut scratch);
        input.drain(..consumed);
        let written = output.len();
        if !output.is_empty() {
            if stream.write_all(&output).await.is_err() {
                return;
            }
            output.clear();
        }
        shrink_buffer(&mut output, written);
        shrink_buffer(&mut input, consumed);
        match next {
            Next::Close => return,
            // Whole requests may remain in `input`: run them before reading (a read could
            // wait forever for a client that sent everything already). Also while shutting
            // down: they were read (invariant 4).
            Next::Flush => continue,
            Next::Read => {}
        }
        // `shutting_down` is set before the stop signal is sent.
        if context.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if input.len() > context.config.query_buffer_limit.load(Ordering::Relaxed) {
            // Redis closes such a client (and logs it); there is no reply.
            return;
        }
        input.reserve(16 * 1024);
        tokio::select! {
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = &mut stopped => return,
        }
    }
}
