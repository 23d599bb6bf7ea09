//! The RESP parser's fuzz target body (`cairn_server::resp::fuzz::fuzz_parse`) fed thousands
//! of seeded inputs — random bytes, RESP-shaped requests, and mutations of both — so CI
//! exercises it in seconds without cargo-fuzz. A failing input is printed as hex, to replay
//! or to drop into `fuzz/corpus/resp/`.
//!
//! Scale with `CAIRN_FUZZ_ITERATIONS` (default 20000) and `CAIRN_FUZZ_SEED`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_server::resp::fuzz::fuzz_parse;
use std::panic::AssertUnwindSafe;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: enough spread for input generation, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// A pipeline of one to four requests: multibulk (sometimes with lying lengths), inline
/// (sometimes with quotes and escapes), or header-only fragments.
fn resp_shaped(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..=rng.below(3) {
        match rng.below(4) {
            0 | 1 => {
                let count = rng.below(4);
                out.extend_from_slice(format!("*{count}\r\n").as_bytes());
                for _ in 0..count {
                    let word: Vec<u8> = (0..rng.below(24)).map(|_| rng.byte()).collect();
                    let claimed = if rng.below(8) == 0 {
                        rng.below(40) as i64 - 4
                    } else {
                        word.len() as i64
                    };
                    out.extend_from_slice(format!("${claimed}\r\n").as_bytes());
                    out.extend_from_slice(&word);
                    out.extend_from_slice(b"\r\n");
                }
            }
            2 => {
                const PIECES: [&[u8]; 8] = [
                    b"SET",
                    b" ",
                    b"\"a\\x41\\n\"",
                    b"'it\\'s'",
                    b"\"",
                    b"k",
                    b"\t",
                    b"\\",
                ];
                for _ in 0..rng.below(6) {
                    out.extend_from_slice(PIECES[rng.below(PIECES.len() as u64) as usize]);
                }
                out.extend_from_slice(if rng.below(2) == 0 { b"\r\n" } else { b"\n" });
            }
            _ => {
                const HEADERS: [&[u8]; 6] = [
                    b"*-10\r\n",
                    b"*0\r\n",
                    b"$blabla\r\n",
                    b"*3000000000\r\n",
                    b"*1\r\nfoo\r\n",
                    b"*1\r\n$-1\r\n",
                ];
                out.extend_from_slice(HEADERS[rng.below(HEADERS.len() as u64) as usize]);
            }
        }
    }
    out
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..=rng.below(4) {
        match rng.below(4) {
            0 if !input.is_empty() => {
                let at = rng.below(input.len() as u64) as usize;
                input[at] ^= 1 << rng.below(8);
            }
            1 => {
                let at = rng.below(input.len() as u64 + 1) as usize;
                let byte = rng.byte();
                input.insert(at, byte);
            }
            2 if !input.is_empty() => {
                let at = rng.below(input.len() as u64) as usize;
                input.remove(at);
            }
            _ => {
                let length = rng.below(input.len() as u64 + 1) as usize;
                input.truncate(length);
            }
        }
    }
}

#[test]
fn resp_parser_survives_seeded_fuzzing() {
    let mut rng = Rng(env_or("CAIRN_FUZZ_SEED", 0x5e55_1011) | 1);
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    for iteration in 0..env_or("CAIRN_FUZZ_ITERATIONS", 20000) {
        let input = match rng.below(4) {
            0 if !corpus.is_empty() => {
                let mut input = corpus[rng.below(corpus.len() as u64) as usize].clone();
                mutate(&mut rng, &mut input);
                input
            }
            1 => (0..rng.below(200)).map(|_| rng.byte()).collect(),
            _ => resp_shaped(&mut rng),
        };
        if std::panic::catch_unwind(AssertUnwindSafe(|| fuzz_parse(&input))).is_err() {
            let hex: String = input.iter().map(|byte| format!("{byte:02x}")).collect();
            panic!("resp: input {iteration} failed: {hex}");
        }
        if corpus.len() < 512 {
            corpus.push(input);
        }
    }
}
