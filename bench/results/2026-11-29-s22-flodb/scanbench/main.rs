use cairn::{Db, Options, ReadOptions};
use std::time::Instant;
fn key(i: u64) -> [u8; 16] { let mut k = [0u8; 16]; k[..8].copy_from_slice(&i.to_be_bytes()); k }
struct Rng(u64);
impl Rng { fn next(&mut self) -> u64 { let mut x = self.0; x ^= x << 13; x ^= x >> 7; x ^= x << 17; self.0 = x; x } }
const N: u64 = 500_000;
fn open(on: bool, tag: &str) -> (Db, String) {
    let dir = format!("/tmp/scanbench-{}-{}", std::process::id(), tag);
    let _ = std::fs::remove_dir_all(&dir);
    let mut o = Options::default();
    o.membuffer_enabled = on;
    let db = Db::open(&dir, o).unwrap();
    let mut r = Rng(88172645463325252);
    for _ in 0..N { db.put(key(r.next() % (N * 4)), [7u8; 100]).unwrap(); }
    db.flush().unwrap(); db.compact_range(None, None).unwrap();
    let spread = std::env::var("SPREAD").is_ok();
    let ins: u64 = std::env::var("INS").ok().map(|v| v.parse().unwrap()).unwrap_or(20_000);
    for i in 0..ins { let k = if spread { r.next() % (N * 4) } else { N * 4 + i }; db.put(key(k), [7u8; 100]).unwrap(); }
    if std::env::var("FLUSH2").is_ok() { db.flush().unwrap(); }
    if std::env::var("REOPEN").is_ok() { drop(db); let mut o = Options::default(); o.membuffer_enabled = on; let db = Db::open(&dir, o).unwrap();
        let mut r = Rng(777); for i in 0..ins { let k = if spread { r.next() % (N * 4) } else { N * 4 + 20_000 + i }; db.put(key(k), [7u8; 100]).unwrap(); }
        return (db, dir); }
    if std::env::var("REOPEN_OFF").is_ok() { drop(db); let mut o = Options::default(); o.membuffer_enabled = false; return (Db::open(&dir, o).unwrap(), dir); }
    (db, dir)
}
fn scans(db: &Db, r: &mut Rng, count: usize, scans: usize) -> f64 {
    if std::env::var("MIX").is_ok() {
        let threads: usize = std::env::var("THREADS").ok().map(|v| v.parse().unwrap()).unwrap_or(1);
        if threads == 1 { return mix(db, r, count, scans * 5); }
        let t = Instant::now();
        let seeds: Vec<u64> = (0..threads).map(|_| r.next() | 1).collect();
        std::thread::scope(|s| { for seed in seeds { s.spawn(move || { let mut r = Rng(seed); mix(db, &mut r, count, scans * 5 / threads) }); } });
        return t.elapsed().as_nanos() as f64 / (scans * 5) as f64;
    }
    let t = Instant::now();
    let mut seen = 0usize;
    for _ in 0..scans {
        let start = key(r.next() % (N * 4));
        let mut c = db.cursor(&ReadOptions::default(), Some(&start), None).unwrap();
        c.seek(&start);
        let mut s = 0;
        while s < count && c.valid() { seen += c.value().len(); s += 1; if s < count { c.next(); } }
    }
    std::hint::black_box(seen);
    t.elapsed().as_nanos() as f64 / scans as f64
}
fn mix(db: &Db, r: &mut Rng, count: usize, ops: usize) -> f64 {
    // flodb_scan_write: 95 % updates of loaded keys, 5 % scans of `count`
    let t = Instant::now();
    let mut seen = 0usize;
    for _ in 0..ops {
        let x = r.next();
        if x % 20 != 0 { db.put(key(r.next() % (N * 4)), [9u8; 100]).unwrap(); continue; }
        let start = key(r.next() % (N * 4));
        let mut c = db.cursor(&ReadOptions::default(), Some(&start), None).unwrap();
        c.seek(&start);
        let mut s = 0;
        while s < count && c.valid() { seen += c.value().len(); s += 1; if s < count { c.next(); } }
    }
    std::hint::black_box(seen);
    t.elapsed().as_nanos() as f64 / ops as f64
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = args[1].parse().unwrap();
    let rounds: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(30);
    let both_off = std::env::var("BOTH_OFF").is_ok();
    let (on, d1) = open(!both_off, "on");
    let (off, d2) = open(false, "off");
    for (n, db) in [("on", &on), ("off", &off)] { let st = db.stats(); eprintln!("{n}: imm={} mem_entries={} undrained={} levels={:?}", st.immutable_memtables, st.memtable_entries, st.membuffer_undrained, st.levels); }
    let mut r = Rng(12345);
    scans(&on, &mut r, count, 50_000); scans(&off, &mut r, count, 50_000);
    let mut ratios = vec![]; let (mut a, mut b) = (0.0, 0.0);
    if let Ok(which) = std::env::var("ONLY") {
        let db = if which == "on" { &on } else { &off };
        let mut t = 0.0;
        for _ in 0..rounds { t += scans(db, &mut r, count, 20_000); }
        println!("only {} count={} {:.0} ns", which, count, t / rounds as f64);
        return;
    }
    for i in 0..rounds {
        let (x, y) = if i % 2 == 0 { let x = scans(&on, &mut r, count, 20_000); (x, scans(&off, &mut r, count, 20_000)) }
                     else { let y = scans(&off, &mut r, count, 20_000); (scans(&on, &mut r, count, 20_000), y) };
        ratios.push(x / y); a += x; b += y;
    }
    for (k, v) in on.stats().counters { if k.contains("membuffer") && v > 0 { eprintln!("  {k} = {v}"); } }
    ratios.sort_by(|x, y| x.partial_cmp(y).unwrap());
    println!("abl={} count={} on {:.0} ns off {:.0} ns  on/off sum {:.3} median {:.3}", std::env::var("CAIRN_ABL").unwrap_or("0".into()), count, a / rounds as f64, b / rounds as f64, a / b, ratios[rounds / 2]);
    drop(on); drop(off); let _ = std::fs::remove_dir_all(&d1); let _ = std::fs::remove_dir_all(&d2);
}
