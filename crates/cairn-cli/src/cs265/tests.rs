use super::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn parse(line: &str) -> Command {
    parse_line(line).unwrap().unwrap()
}

fn error(line: &str) -> String {
    parse_line(line).unwrap_err()
}

#[test]
fn encoding_round_trips_extremes() {
    for value in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
        assert_eq!(decode_i64(encode_i64(value)), value);
        assert_eq!(decode_i64_slice(&encode_i64(value)), Some(value));
    }
    assert_eq!(encode_i64(i64::MIN), [0; 8]);
    assert_eq!(
        encode_i64(-1),
        [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(encode_i64(0), [0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(encode_i64(i64::MAX), [0xff; 8]);
    assert_eq!(decode_i64_slice(&[1, 2, 3]), None);
    assert_eq!(decode_i64_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]), None);
}

#[test]
fn encoding_preserves_order() {
    let mut rng = SmallRng::seed_from_u64(265);
    let specials = [
        i64::MIN,
        i64::MIN + 1,
        i64::from(i32::MIN),
        -1,
        0,
        1,
        i64::from(i32::MAX),
        i64::MAX - 1,
        i64::MAX,
    ];
    for round in 0..100_000 {
        let (a, b) = if round < specials.len() * specials.len() {
            (
                specials[round / specials.len()],
                specials[round % specials.len()],
            )
        } else if round % 2 == 0 {
            (rng.gen::<i64>(), rng.gen::<i64>())
        } else {
            (i64::from(rng.gen::<i32>()), i64::from(rng.gen::<i32>()))
        };
        assert_eq!(
            encode_i64(a).cmp(&encode_i64(b)),
            a.cmp(&b),
            "order of {a} and {b}"
        );
    }
}

#[test]
fn parses_every_command() {
    assert_eq!(parse("p 1 2"), Command::Put { key: 1, value: 2 });
    assert_eq!(
        parse("p -9223372036854775808 9223372036854775807"),
        Command::Put {
            key: i64::MIN,
            value: i64::MAX
        }
    );
    assert_eq!(parse("g -7"), Command::Get { key: -7 });
    assert_eq!(parse("r 3 9"), Command::Range { lower: 3, upper: 9 });
    assert_eq!(parse("d +4"), Command::Delete { key: 4 });
    assert_eq!(parse("s"), Command::Stats(None));
    assert_eq!(parse("s 3"), Command::Stats(Some(3)));
    assert_eq!(parse("help"), Command::Help);
    assert_eq!(
        parse("l \"data/one.bin\""),
        Command::Load {
            path: "data/one.bin".into()
        }
    );
    assert_eq!(
        parse("put \"a b\" c\\\\d"),
        Command::TextPut {
            key: b"a b".to_vec(),
            value: b"c\\d".to_vec()
        }
    );
    assert_eq!(parse("get k"), Command::TextGet { key: b"k".to_vec() });
    assert_eq!(parse("del k"), Command::TextDelete { key: b"k".to_vec() });
    assert_eq!(
        parse("scan"),
        Command::Scan {
            from: Vec::new(),
            to: None,
            limit: None
        }
    );
    assert_eq!(
        parse("scan a z 10"),
        Command::Scan {
            from: b"a".to_vec(),
            to: Some(b"z".to_vec()),
            limit: Some(10)
        }
    );
    assert_eq!(
        parse("incr n"),
        Command::Increment {
            key: b"n".to_vec(),
            by: 1
        }
    );
    assert_eq!(
        parse("incr n -5"),
        Command::Increment {
            key: b"n".to_vec(),
            by: -5
        }
    );
}

#[test]
fn tolerates_whitespace_and_skips_blank_lines() {
    assert_eq!(
        parse("  p\t1    2  \r\n"),
        Command::Put { key: 1, value: 2 }
    );
    assert_eq!(parse("\tg 5\n"), Command::Get { key: 5 });
    assert_eq!(parse("s \r\n"), Command::Stats(None));
    assert_eq!(parse_line("").unwrap(), None);
    assert_eq!(parse_line("   \t \r\n").unwrap(), None);
}

#[test]
fn quoted_paths() {
    assert_eq!(
        parse("l   \"dir with spaces/f.bin\"  "),
        Command::Load {
            path: "dir with spaces/f.bin".into()
        }
    );
    assert_eq!(
        parse("l 'single.bin'"),
        Command::Load {
            path: "single.bin".into()
        }
    );
    assert!(error("l \"unterminated.bin").contains("unterminated"));
    assert!(error("l \"a.bin\" extra").contains("after the closing quote"));
    assert!(error("l a.bin b.bin").contains("expected one path"));
    assert!(error("l a\"b").contains("stray quote"));
    assert!(error("l \"\"").contains("empty path"));
    assert!(error("l").contains("expected a file path after 'l', got nothing"));
}

#[test]
fn rejects_bad_integers() {
    assert_eq!(
        error("p 1 x"),
        "expected 2 integers after 'p', got \"1 x\": \"x\" is not an integer"
    );
    assert!(error("g 1.5").contains("\"1.5\" is not an integer"));
    assert_eq!(
        error("p 9223372036854775808 1"),
        "expected 2 integers after 'p', got \"9223372036854775808 1\": 9223372036854775808 is \
         outside the 64-bit range [-9223372036854775808, 9223372036854775807]"
    );
    assert!(error("d -9223372036854775809").contains("outside the 64-bit range"));
    assert!(error("r 0x10 20").contains("not an integer"));
    // 32-bit overflow is fine now: the shell speaks 64-bit integers.
    assert_eq!(
        parse("p 2147483648 -2147483649"),
        Command::Put {
            key: 2_147_483_648,
            value: -2_147_483_649
        }
    );
}

#[test]
fn rejects_missing_and_extra_arguments() {
    assert_eq!(
        error("p 12"),
        "expected 2 integers after 'p', got 1 argument: \"12\""
    );
    assert_eq!(error("p"), "expected 2 integers after 'p', got nothing");
    assert_eq!(
        error("p 1 2 3"),
        "expected 2 integers after 'p', got 3 arguments: \"1 2 3\""
    );
    assert_eq!(error("g"), "expected 1 integer after 'g', got nothing");
    assert_eq!(
        error("s x"),
        "expected a pair limit (a count) after 's', got \"x\""
    );
    assert_eq!(
        error("s 1 2"),
        "expected at most a pair limit after 's', got \"1 2\""
    );
    assert_eq!(
        error("put k"),
        "expected a key and a value after 'put', got 1"
    );
    assert_eq!(error("get"), "expected one key after 'get', got 0");
    assert_eq!(error("del a b"), "expected one key after 'del', got 2");
    assert_eq!(
        error("scan a b c d"),
        "expected at most FROM, TO and LIMIT after 'scan', got 4"
    );
    assert_eq!(
        error("scan a b x"),
        "expected an integer after the keys of 'scan', got \"x\""
    );
    assert_eq!(
        error("incr"),
        "expected a key and an optional integer after 'incr', got 0"
    );
    assert_eq!(
        error("incr k 1.5"),
        "expected an integer after the keys of 'incr', got \"1.5\""
    );
    assert_eq!(
        error("put a\\q b"),
        "unknown escape \\q (expected \\\\, \\\", \\t, \\n, \\r, \\0 or \\xHH) in: a\\q b"
    );
}

#[test]
fn rejects_unknown_commands() {
    assert_eq!(
        error("x 1 2"),
        "unknown command \"x\" (expected one of p, g, r, d, l, s, put, get, del, scan, incr, \
         help)"
    );
    assert!(error("P 1 2").contains("unknown command"));
    assert!(error("p1 2").contains("unknown command \"p1\""));
}
