//! Nibble's fragmentation benchmark (§5.2, Fig. 9) and a Postmark-style churn workload.
//!
//! Fragmentation: for each pattern (sizes A → B) fill with objects of size A until the live
//! payload (key + value bytes) reaches `--live-mib`, delete 90 % at random, refill with objects
//! of size B until the live payload is back at `--live-mib`, then report resident memory ÷ live
//! bytes. Each (system, pattern) runs in its own child process so RSS is not shared:
//!   memstore  cairn::MemStore (RSS from /proc/self/statm, and the store's own accounting)
//!   hashmap   HashMap<Vec<u8>, Vec<u8>> under the system allocator
//!   redis     redis-server on a loopback port (--save '' --appendonly no), loaded over RESP;
//!             used_memory_rss and used_memory from INFO
//!
//! Churn (`--churn`): MemStore at 80 % of capacity, 10 % inserts, 10 % deletes, 20 % overwrites,
//! 60 % reads, values 500–4096 bytes, on `--threads` threads; reports time and overheads.
//!
//! Usage:
//!   cargo run --release -p cairn --example fragmentation -- [--live-mib 1024]
//!       [--patterns P1,P2,...] [--systems memstore,hashmap,redis] [--capacity-factor 1.10]
//!   cargo run --release -p cairn --example fragmentation -- --churn [--capacity-mib 1024]
//!       [--operations 20000000] [--threads 2] [--compaction-threads 1] [--compaction-trigger 0.2]

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{Error, MemStore, MemStoreOptions};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PATTERNS: [(&str, usize, usize); 6] = [
    ("P1", 60, 70),
    ("P2", 1000, 1024),
    ("P3", 1000, 1030),
    ("P4", 1024, 10 * 1024),
    ("P5", 10 * 1024, 100 * 1024),
    ("P6", 500 * 1024, 600 * 1024),
];
const KEY_BYTES: usize = 8;

fn argument(name: &str) -> Option<String> {
    let arguments: Vec<String> = std::env::args().collect();
    arguments
        .iter()
        .position(|argument| argument == name)
        .and_then(|position| arguments.get(position + 1).cloned())
}

/// The value of option `name` parsed as a `T`, or `default` when the option is absent; a
/// value that does not parse ends the program with a message instead of a panic.
fn number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match argument(name) {
        None => default,
        Some(value) => value.parse().unwrap_or_else(|_| {
            eprintln!("fragmentation: {name} {value}: not a valid number");
            std::process::exit(2)
        }),
    }
}

fn flag(name: &str) -> bool {
    std::env::args().any(|argument| argument == name)
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let resident: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    resident * 4096
}

/// Deterministic "random" choice of the 90 % to delete.
fn deleted(key: u64) -> bool {
    let mixed = (key ^ (key >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // Keep one key in ten.
    (mixed >> 40) % 10 != 3
}

fn value_for(key: u64, size: usize) -> Vec<u8> {
    vec![(key % 251) as u8; size]
}

/// The operations the benchmark needs from each system.
trait System {
    fn put(&mut self, key: u64, value: &[u8]) -> bool;
    fn delete(&mut self, key: u64);
    fn flush(&mut self) {}
    fn report(&mut self) -> String;
}

struct MemStoreSystem(MemStore);

impl System for MemStoreSystem {
    fn put(&mut self, key: u64, value: &[u8]) -> bool {
        match self.0.put(&key.to_be_bytes(), value) {
            Ok(()) => true,
            Err(Error::Full { .. }) => false,
            Err(error) => panic!("put failed: {error}"),
        }
    }
    fn delete(&mut self, key: u64) {
        self.0.delete(&key.to_be_bytes()).unwrap();
    }
    fn report(&mut self) -> String {
        let stats = self.0.stats();
        format!(
            "store_used={} store_live={} index={} index_entries={} index_slots={} index_resizes={} index_rehashed={} index_resize_ms={} touched={} released={} compactions={} relocated={} wait_ms={} capacity={}",
            stats.used_bytes,
            stats.live_bytes,
            stats.index_bytes,
            stats.index_entries,
            stats.index_slots,
            stats.index_resizes,
            stats.index_rehashed_entries,
            stats.index_resize_nanos / 1_000_000,
            stats.touched_bytes,
            stats.released_bytes,
            stats.compactions,
            stats.relocated_bytes,
            stats.writer_wait_nanos / 1_000_000,
            stats.capacity_bytes
        )
    }
}

struct HashMapSystem(HashMap<Vec<u8>, Vec<u8>>);

impl System for HashMapSystem {
    fn put(&mut self, key: u64, value: &[u8]) -> bool {
        self.0.insert(key.to_be_bytes().to_vec(), value.to_vec());
        true
    }
    fn delete(&mut self, key: u64) {
        self.0.remove(&key.to_be_bytes()[..]);
    }
    fn report(&mut self) -> String {
        format!("entries={}", self.0.len())
    }
}

/// A minimal pipelined RESP2 client for redis-server.
struct RedisSystem {
    server: std::process::Child,
    writer: std::io::BufWriter<TcpStream>,
    reader: BufReader<TcpStream>,
    pending: usize,
}

impl RedisSystem {
    fn start(port: u16) -> RedisSystem {
        let server = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server not installed (apt-get install -y redis-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(error) => panic!("cannot connect to redis: {error}"),
            }
        };
        RedisSystem {
            server,
            writer: std::io::BufWriter::with_capacity(1 << 20, stream.try_clone().unwrap()),
            reader: BufReader::with_capacity(1 << 20, stream),
            pending: 0,
        }
    }

    fn send(&mut self, parts: &[&[u8]]) {
        write!(self.writer, "*{}\r\n", parts.len()).unwrap();
        for part in parts {
            write!(self.writer, "${}\r\n", part.len()).unwrap();
            self.writer.write_all(part).unwrap();
            self.writer.write_all(b"\r\n").unwrap();
        }
        self.pending += 1;
        if self.pending >= 512 {
            self.drain();
        }
    }

    fn read_reply(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        match line.first() {
            Some(b'$') => {
                let length: i64 = std::str::from_utf8(&line[1..line.len() - 2])
                    .unwrap()
                    .parse()
                    .unwrap();
                if length < 0 {
                    return Vec::new();
                }
                let mut body = vec![0u8; length as usize + 2];
                self.reader.read_exact(&mut body).unwrap();
                body.truncate(length as usize);
                body
            }
            Some(b'-') => panic!("redis error: {}", String::from_utf8_lossy(&line)),
            _ => line,
        }
    }

    fn drain(&mut self) {
        self.writer.flush().unwrap();
        while self.pending > 0 {
            self.read_reply();
            self.pending -= 1;
        }
    }
}

impl System for RedisSystem {
    fn put(&mut self, key: u64, value: &[u8]) -> bool {
        self.send(&[b"SET", &key.to_be_bytes(), value]);
        true
    }
    fn delete(&mut self, key: u64) {
        self.send(&[b"DEL", &key.to_be_bytes()]);
    }
    fn flush(&mut self) {
        self.drain();
    }
    fn report(&mut self) -> String {
        self.drain();
        self.send(&[b"INFO", b"memory"]);
        self.writer.flush().unwrap();
        self.pending -= 1;
        let info = String::from_utf8_lossy(&self.read_reply()).to_string();
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(&format!("{name}:")))
                .unwrap_or("0")
                .trim()
                .to_string()
        };
        format!(
            "redis_used_memory_rss={} redis_used_memory={}",
            field("used_memory_rss"),
            field("used_memory")
        )
    }
}

impl Drop for RedisSystem {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Runs one (system, pattern) in this process and prints a RESULT line.
fn child(system_name: &str, pattern_name: &str, live_target: u64, capacity_factor: f64) {
    let &(_, first_size, second_size) = PATTERNS
        .iter()
        .find(|(name, _, _)| *name == pattern_name)
        .expect("unknown pattern");
    let baseline_rss = rss_bytes();
    let started = Instant::now();
    let mut system: Box<dyn System> = match system_name {
        "memstore" => {
            // Segments scale with the store (1–8 MiB) so the compaction reserve stays ~1 %.
            let wanted = (live_target as f64 * capacity_factor) as usize;
            let segment_bytes = (wanted / 128).clamp(1 << 20, 8 << 20).next_power_of_two();
            let capacity = wanted.max(8 * segment_bytes).div_ceil(segment_bytes) * segment_bytes;
            Box::new(MemStoreSystem(
                MemStore::new(MemStoreOptions {
                    capacity_bytes: capacity,
                    segment_bytes,
                    block_bytes: 64 << 10,
                    max_value_bytes: 1 << 20,
                    index_partitions: 256,
                    ..MemStoreOptions::default()
                })
                .unwrap(),
            ))
        }
        "hashmap" => Box::new(HashMapSystem(HashMap::new())),
        "redis" => Box::new(RedisSystem::start(
            16_379 + (std::process::id() % 1000) as u16,
        )),
        other => panic!("unknown system {other}"),
    };
    let mut live: u64 = 0;
    let mut next_key: u64 = 0;
    let first_value = value_for(0, first_size);
    while live < live_target {
        if !system.put(next_key, &first_value) {
            break;
        }
        live += (KEY_BYTES + first_size) as u64;
        next_key += 1;
    }
    let first_keys = next_key;
    for key in 0..first_keys {
        if deleted(key) {
            system.delete(key);
            live -= (KEY_BYTES + first_size) as u64;
        }
    }
    system.flush();
    let second_value = value_for(1, second_size);
    let mut full = false;
    while live < live_target {
        if !system.put(next_key, &second_value) {
            full = true;
            break;
        }
        live += (KEY_BYTES + second_size) as u64;
        next_key += 1;
    }
    system.flush();
    let rss = rss_bytes();
    let details = system.report();
    println!(
        "RESULT system={system_name} pattern={pattern_name} live={live} rss={rss} baseline_rss={baseline_rss} full={full} seconds={:.1} {details}",
        started.elapsed().as_secs_f64()
    );
}

fn parse_result(line: &str) -> HashMap<String, String> {
    line.split_whitespace()
        .filter_map(|field| field.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

fn fragmentation() {
    let live_mib: u64 = number("--live-mib", 1024);
    let capacity_factor: f64 = number("--capacity-factor", 1.10);
    let patterns = argument("--patterns").unwrap_or_else(|| "P1,P2,P3,P4,P5,P6".into());
    let systems = argument("--systems").unwrap_or_else(|| "memstore,hashmap,redis".into());
    println!(
        "live target {live_mib} MiB per pattern, MemStore capacity factor {capacity_factor}; ratio = resident bytes / live key+value bytes"
    );
    println!("| pattern | system | live MiB | RSS / live | store used / live | (store used + index) / live | redis used_memory / live | seconds | notes |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for pattern in patterns.split(',') {
        for system in systems.split(',') {
            let output = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--child",
                    system,
                    pattern,
                    "--live-mib",
                    &live_mib.to_string(),
                    "--capacity-factor",
                    &capacity_factor.to_string(),
                ])
                .stderr(Stdio::inherit())
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            let Some(line) = stdout.lines().find(|line| line.starts_with("RESULT")) else {
                println!(
                    "| {pattern} | {system} | - | failed | | | | | {} |",
                    output.status
                );
                continue;
            };
            let fields = parse_result(line);
            let number = |name: &str| -> f64 {
                fields
                    .get(name)
                    .and_then(|value| value.parse().ok())
                    .unwrap_or(0.0)
            };
            let live = number("live").max(1.0);
            let (rss_ratio, used_ratio, used_index_ratio, redis_used_ratio) = match system {
                "redis" => (
                    number("redis_used_memory_rss") / live,
                    String::new(),
                    String::new(),
                    format!("{:.3}", number("redis_used_memory") / live),
                ),
                "memstore" => (
                    number("rss") / live,
                    format!("{:.3}", number("store_used") / live),
                    format!("{:.3}", (number("store_used") + number("index")) / live),
                    String::new(),
                ),
                _ => (
                    number("rss") / live,
                    String::new(),
                    String::new(),
                    String::new(),
                ),
            };
            let notes = match system {
                "memstore" => format!(
                    "capacity {:.0} MiB, index load {:.3} ({:.3} x live), resident log {:.3} x live, baseline RSS {:.1} MiB, compactions {}, writer wait {} ms{}",
                    number("capacity") / 1048576.0,
                    number("index_entries") / number("index_slots").max(1.0),
                    number("index") / live,
                    number("touched") / live,
                    number("baseline_rss") / 1048576.0,
                    number("compactions"),
                    number("wait_ms"),
                    if fields.get("full").map(String::as_str) == Some("true") {
                        ", FULL before target"
                    } else {
                        ""
                    }
                ),
                _ => String::new(),
            };
            println!(
                "| {pattern} | {system} | {:.0} | {rss_ratio:.3} | {used_ratio} | {used_index_ratio} | {redis_used_ratio} | {} | {notes} |",
                live / 1048576.0,
                fields.get("seconds").cloned().unwrap_or_default(),
            );
        }
    }
}

fn churn() {
    let capacity_mib: usize = number("--capacity-mib", 1024);
    let operations: u64 = number("--operations", 20_000_000);
    let threads: u64 = number("--threads", 2);
    let compaction_threads: usize = number("--compaction-threads", 1);
    let trigger: f64 = number("--compaction-trigger", 0.2);
    let capacity = capacity_mib << 20;
    let store = MemStore::new(MemStoreOptions {
        capacity_bytes: capacity,
        segment_bytes: 8 << 20,
        block_bytes: 64 << 10,
        index_partitions: 256,
        compaction_threads,
        compaction_trigger_free_fraction: trigger,
        ..MemStoreOptions::default()
    })
    .unwrap();
    let target_live = (capacity as f64 * 0.8) as u64;
    let per_thread_target = target_live / threads;
    let started = Instant::now();
    let results: Vec<(u64, u64, u64, Vec<u64>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let store = &store;
                scope.spawn(move || {
                    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ (thread + 1);
                    let mut random = move || {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state
                    };
                    let mut live_keys: Vec<(u64, u32)> = Vec::new();
                    let mut next = 0u64;
                    let mut live = 0u64;
                    let key_of = |index: u64| ((thread << 48) | index).to_be_bytes();
                    let value = vec![0x5au8; 4096];
                    // Preload to 80 % of capacity.
                    while live < per_thread_target {
                        let size = 500 + (random() % 3597) as u32;
                        store.put(&key_of(next), &value[..size as usize]).unwrap();
                        live_keys.push((next, size));
                        live += u64::from(size) + 8;
                        next += 1;
                    }
                    let preload_done = Instant::now();
                    let (mut full_errors, mut reads_found) = (0u64, 0u64);
                    let mut latencies = Vec::new();
                    for operation in 0..operations / threads {
                        let choice = random() % 100;
                        let op_started = if operation % 1024 == 0 {
                            Some(Instant::now())
                        } else {
                            None
                        };
                        if choice < 10 {
                            let size = 500 + (random() % 3597) as u32;
                            match store.put(&key_of(next), &value[..size as usize]) {
                                Ok(()) => {
                                    live_keys.push((next, size));
                                    next += 1;
                                }
                                Err(Error::Full { .. }) => full_errors += 1,
                                Err(error) => panic!("{error}"),
                            }
                        } else if choice < 20 {
                            if !live_keys.is_empty() {
                                let position = (random() % live_keys.len() as u64) as usize;
                                let (key, _) = live_keys.swap_remove(position);
                                store.delete(&key_of(key)).unwrap();
                            }
                        } else if choice < 40 {
                            if !live_keys.is_empty() {
                                let position = (random() % live_keys.len() as u64) as usize;
                                let size = 500 + (random() % 3597) as u32;
                                match store
                                    .put(&key_of(live_keys[position].0), &value[..size as usize])
                                {
                                    Ok(()) => live_keys[position].1 = size,
                                    Err(Error::Full { .. }) => full_errors += 1,
                                    Err(error) => panic!("{error}"),
                                }
                            }
                        } else if !live_keys.is_empty() {
                            let position = (random() % live_keys.len() as u64) as usize;
                            let (key, size) = live_keys[position];
                            let found = store.get(&key_of(key)).unwrap();
                            assert_eq!(found.map(|value| value.len()), Some(size as usize));
                            reads_found += 1;
                        }
                        if let Some(op_started) = op_started {
                            latencies.push(op_started.elapsed().as_nanos() as u64);
                        }
                    }
                    let _ = preload_done;
                    (
                        full_errors,
                        reads_found,
                        live_keys.iter().map(|(_, size)| u64::from(*size) + 8).sum(),
                        latencies,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    let elapsed = started.elapsed();
    let stats = store.stats();
    let full_errors: u64 = results.iter().map(|result| result.0).sum();
    let live_payload: u64 = results.iter().map(|result| result.2).sum();
    let mut latencies: Vec<u64> = results.iter().flat_map(|result| result.3.clone()).collect();
    latencies.sort_unstable();
    let percentile = |fraction: f64| {
        latencies
            .get(
                ((latencies.len() as f64 * fraction) as usize)
                    .min(latencies.len().saturating_sub(1)),
            )
            .copied()
            .unwrap_or(0)
    };
    println!("churn: capacity {capacity_mib} MiB, {threads} threads, {compaction_threads} compaction threads, trigger {trigger}, {operations} operations after preload to 80 %");
    println!("| metric | value |\n|---|---|");
    println!(
        "| wall time incl. preload (s) | {:.1} |",
        elapsed.as_secs_f64()
    );
    println!(
        "| throughput incl. preload (ops/s) | {:.0} |",
        operations as f64 / elapsed.as_secs_f64()
    );
    println!(
        "| sampled latency p50 / p99 / max (µs) | {:.1} / {:.1} / {:.1} |",
        percentile(0.5) as f64 / 1e3,
        percentile(0.99) as f64 / 1e3,
        percentile(1.0) as f64 / 1e3
    );
    println!("| Full errors | {full_errors} |");
    println!(
        "| live payload (MiB) | {:.1} |",
        live_payload as f64 / 1048576.0
    );
    println!(
        "| store live / used / capacity (MiB) | {:.1} / {:.1} / {:.1} |",
        stats.live_bytes as f64 / 1048576.0,
        stats.used_bytes as f64 / 1048576.0,
        stats.capacity_bytes as f64 / 1048576.0
    );
    println!(
        "| index (MiB) | {:.1} |",
        stats.index_bytes as f64 / 1048576.0
    );
    println!(
        "| RSS / live payload | {:.3} |",
        rss_bytes() as f64 / live_payload as f64
    );
    println!(
        "| (used + index) / live payload | {:.3} |",
        (stats.used_bytes + stats.index_bytes) as f64 / live_payload as f64
    );
    println!("| segments compacted | {} |", stats.compactions);
    println!(
        "| bytes relocated by compaction (MiB) | {:.0} |",
        stats.relocated_bytes as f64 / 1048576.0
    );
    println!(
        "| writer wait for space (ms) | {} |",
        stats.writer_wait_nanos / 1_000_000
    );
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    if let Some(position) = arguments.iter().position(|argument| argument == "--child") {
        let live_mib: u64 = number("--live-mib", 1024);
        let capacity_factor: f64 = number("--capacity-factor", 1.10);
        child(
            &arguments[position + 1],
            &arguments[position + 2],
            live_mib << 20,
            capacity_factor,
        );
    } else if flag("--churn") {
        churn();
    } else {
        fragmentation();
    }
}
