use super::*;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn run_with(source: Source, input: &str) -> (Map, String, String, RunSummary) {
    let mut shell = Shell::new(Map::new(), Vec::new(), source);
    let mut errors = Vec::new();
    let summary = shell.run(input.as_bytes(), &mut errors).unwrap();
    let (map, out) = shell.into_parts();
    (
        map,
        String::from_utf8(out).unwrap(),
        String::from_utf8(errors).unwrap(),
        summary,
    )
}

fn run(input: &str) -> (String, String, RunSummary) {
    let (_, out, errors, summary) = run_with(Source::Stdin, input);
    (out, errors, summary)
}

#[test]
fn executes_integer_commands() {
    let input = "p 5 50\np -1 -10\np 5 55\ng 5\ng 6\n\nr -5 10\nr 10 -5\nr 5 5\nd 5\nd 42\n\
                 g 5\nr -9223372036854775808 9223372036854775807\np 1 -9223372036854775808\n\
                 g 1\np 4294967296 -4294967296\ng 4294967296\ns\n";
    let (out, errors, summary) = run(input);
    assert_eq!(
        out,
        "55\n\n-1:-10 5:55\n\n\n\n-1:-10\n-9223372036854775808\n-4294967296\nLogical Pairs: 3\nLVL1: 3\n-1:-10:L1 1:-9223372036854775808:L1 4294967296:-4294967296:L1\n"
    );
    assert_eq!(errors, "");
    assert_eq!(summary.commands, 17);
    assert_eq!(summary.errors, 0);
}

#[test]
fn executes_text_commands_and_round_trips_their_output() {
    let input = "put a\\\\x41 one\nput aA two\nput \"sp ace\" \"\"\nget a\\\\x41\nget aA\n\
                 get \"sp ace\"\nget missing\nscan\nincr n\nincr n 41\nscan a b 1\ndel aA\n\
                 scan aA\n";
    let (_, out, errors, _) = run_with(Source::Stdin, input);
    assert_eq!(errors, "");
    assert_eq!(
        out,
        "one\ntwo\n\"\"\n\n\
         aA two\na\\\\x41 one\nsp\\x20ace \"\"\n\n\
         1\n42\n\
         aA two\n\n\
         a\\\\x41 one\nn 42\nsp\\x20ace \"\"\n\n"
    );
    // Every printed key reads back as a key that was written.
    let written: [&[u8]; 4] = [b"a\\x41", b"aA", b"sp ace", b"n"];
    for line in out.lines().filter(|line| line.contains(' ')) {
        let tokens = crate::text::split_tokens(line).unwrap();
        assert!(written.contains(&tokens[0].as_slice()), "{line}");
    }
}

#[test]
fn integer_ranges_skip_text_keys_and_report_bad_values() {
    let (out, errors, summary) = run("put abcdefgh x\np 1 1\nr -5 5\nput 12345678 x\n");
    assert_eq!(out, "1:1\n");
    assert_eq!(summary.errors, 0, "{errors}");
    let (_, errors, _) = run("put \\x80\\0\\0\\0\\0\\0\\0\\x01 short\ng 1\n");
    assert_eq!(
        errors,
        "error: line 2: key 1 holds a 5-byte value, not an 8-byte shell integer\n"
    );
}

/// `r` over a store that text commands wrote to as well: an 8-byte key holding a value of
/// another width was not written by `p` either, and is skipped like a key of another width.
#[test]
fn integer_ranges_skip_keys_whose_value_is_not_an_integer() {
    let input = "p 1 10\nput \\x80\\0\\0\\0\\0\\0\\0\\x02 short\np 3 30\nput abc x\n\
                 put \\x80\\0\\0\\0\\0\\0\\0\\x04 \"\"\nr 0 9\nr 2 3\n";
    let (out, errors, summary) = run(input);
    assert_eq!(out, "1:10 3:30\n\n");
    assert_eq!((summary.errors, errors.as_str()), (0, ""));
}

#[test]
fn increment_reports_bad_counters() {
    let (out, errors, _) = run("put n x\nincr n\nput m 9223372036854775807\nincr m\n");
    assert_eq!(out, "");
    assert_eq!(
        errors,
        "error: line 2: value is not a decimal 64-bit integer\n\
         error: line 4: increment overflows a 64-bit integer\n"
    );
}

#[test]
fn reports_errors_and_continues() {
    let (out, errors, summary) = run("p 1 2\np 1\nbogus\ng 1\nl \"/nonexistent/x.bin\"\ng 2\n");
    assert_eq!(out, "2\n\n");
    let lines: Vec<&str> = errors.lines().collect();
    assert_eq!(lines.len(), 3, "{errors}");
    assert!(lines[0].starts_with("error: line 2: expected 2 integers after 'p'"));
    assert!(lines[1].starts_with("error: line 3: unknown command"));
    assert!(lines[2].starts_with("error: line 5: cannot open load file /nonexistent/x.bin"));
    assert_eq!(summary.commands, 6);
    assert_eq!(summary.errors, 3);
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cairn-shell-unit-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn loads_every_complete_pair_and_reports_trailing_bytes() {
    let dir = temp_dir("load");
    let mut good = Vec::new();
    for (key, value) in [(3, 30), (i32::MIN, i32::MAX), (3, 33), (i32::MAX, i32::MIN)] {
        good.extend_from_slice(&i32::to_ne_bytes(key));
        good.extend_from_slice(&i32::to_ne_bytes(value));
    }
    std::fs::write(dir.join("good.bin"), &good).unwrap();
    std::fs::write(dir.join("odd.bin"), &good[..19]).unwrap();
    let file = dir.join("workload.txt");
    let (_, out, errors, summary) = run_with(
        Source::File(file),
        "l \"odd.bin\"\nr -2147483648 2147483647\nl good.bin\nr -2147483648 2147483648\n",
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        out,
        "-2147483648:2147483647 3:30\n-2147483648:2147483647 3:33 2147483647:-2147483648\n"
    );
    assert_eq!(summary.errors, 0);
    assert_eq!(
        errors,
        format!(
            "warning: line 1: load file {}/odd.bin is 19 bytes, not a multiple of 8 (pairs of \
             32-bit integers): loaded 2 pairs and ignored the last 3 bytes\n",
            dir.display()
        )
    );
}

#[test]
fn missing_load_file_hints_name_the_right_directory() {
    let (_, _, errors, _) = run_with(Source::Stdin, "l nope.bin\n");
    assert!(
        errors.ends_with(
            "(relative paths resolve against the current directory when the workload comes \
             from stdin)\n"
        ),
        "{errors}"
    );
    // `--file workload.txt` in the current directory: the file's directory is the current one.
    let (_, _, errors, _) = run_with(Source::File("workload.txt".into()), "l nope.bin\n");
    assert!(
        errors.starts_with("error: line 1: cannot open load file nope.bin: ")
            && errors.ends_with(
                "(relative paths resolve against the current directory, which holds the \
                 workload file)\n"
            ),
        "{errors}"
    );
    let (_, _, errors, _) = run_with(Source::File("w/workload.txt".into()), "l nope.bin\n");
    assert!(
        errors.starts_with("error: line 1: cannot open load file w/nope.bin: ")
            && errors.ends_with(
                "(relative paths are tried against the workload file's directory, then the \
                 current directory)\n"
            ),
        "{errors}"
    );
}

#[test]
fn resolves_relative_paths_against_the_base_directory() {
    let shell = Shell::new(Map::new(), Vec::new(), Source::File("/w/x.txt".into()));
    assert_eq!(shell.resolve("a.bin"), PathBuf::from("/w/a.bin"));
    assert_eq!(shell.resolve("/x/a.bin"), PathBuf::from("/x/a.bin"));
    // Falls back to the working directory when only that has the file.
    assert_eq!(shell.resolve("Cargo.toml"), PathBuf::from("Cargo.toml"));
    let here = Shell::new(Map::new(), Vec::new(), Source::File("src/x.txt".into()));
    assert_eq!(here.resolve("main.rs"), PathBuf::from("src/main.rs"));
    let shell = Shell::new(Map::new(), Vec::new(), Source::Stdin);
    assert_eq!(shell.resolve("a.bin"), PathBuf::from("a.bin"));
}

#[test]
fn rejects_non_utf8_lines() {
    let mut shell = Shell::new(Map::new(), Vec::new(), Source::Stdin);
    let mut errors = Vec::new();
    let summary = shell
        .run(&b"p 1 2\n\xff\xfe\ng 1\n"[..], &mut errors)
        .unwrap();
    assert_eq!(summary.errors, 1);
    assert_eq!(
        String::from_utf8(errors).unwrap(),
        "error: line 2: line is not valid UTF-8\n"
    );
}

/// Output whose reader has gone away (`| head`).
struct ClosedOutput;

impl Write for ClosedOutput {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::BrokenPipe.into())
    }

    fn flush(&mut self) -> io::Result<()> {
        Err(io::ErrorKind::BrokenPipe.into())
    }
}

#[test]
fn a_closed_output_stops_the_run_at_the_line_that_wrote() {
    for listing in ["scan", "g 1", "r 0 9"] {
        let mut shell = Shell::new(Map::new(), ClosedOutput, Source::Stdin);
        let mut errors = Vec::new();
        let input = format!("p 1 1\n{listing}\np 2 2\n");
        let stopped = shell.run(input.as_bytes(), &mut errors);
        assert!(
            matches!(stopped, Err(RunError::Output { line: 2, .. })),
            "{listing}: {stopped:?}"
        );
        assert_eq!(String::from_utf8(errors).unwrap(), "", "{listing}");
        let (map, _) = shell.into_parts();
        assert_eq!(map.len(), 1, "{listing}: the line after the failure ran");
    }
}

/// `l` on a FIFO a generator writes into: its size says 0, yet it holds pairs.
#[cfg(unix)]
#[test]
fn loads_from_a_fifo_to_its_end() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("pairs.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&i32::to_ne_bytes(7));
    bytes.extend_from_slice(&i32::to_ne_bytes(-70));
    bytes.extend_from_slice(b"abc");
    let writer = {
        let fifo = fifo.clone();
        // Opening a FIFO for writing waits for the reader: the shell's load. The write fails
        // (EPIPE) if the load stops reading early; the output below tells.
        std::thread::spawn(move || std::fs::write(fifo, bytes).is_ok())
    };
    let input = format!("l {}\ng 7\n", fifo.display());
    let (_, out, errors, summary) = run_with(Source::Stdin, &input);
    writer.join().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out, "-70\n");
    assert_eq!(summary.errors, 0, "{errors}");
    assert_eq!(
        errors,
        format!(
            "warning: line 1: load file {} is 11 bytes, not a multiple of 8 (pairs of 32-bit \
             integers): loaded 1 pairs and ignored the last 3 bytes\n",
            fifo.display()
        )
    );
}

#[test]
fn read_record_gathers_a_record_handed_over_in_pieces() {
    let mut reader = (&b"abc"[..]).chain(&b"defgh"[..]).chain(&b"ij"[..]);
    let mut record = [0u8; 8];
    assert_eq!(read_record(&mut reader, &mut record).unwrap(), 8);
    assert_eq!(&record, b"abcdefgh");
    assert_eq!(read_record(&mut reader, &mut record).unwrap(), 2);
    assert_eq!(read_record(&mut reader, &mut record).unwrap(), 0);
}
