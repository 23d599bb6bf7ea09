//! Golden files of the on-disk format: compare bytes written today with the checked-in ones,
//! reporting the first byte that differs. `CAIRN_BLESS_GOLDEN=1` writes a missing file (a new
//! format version's goldens); an existing golden file is never overwritten.

use std::path::Path;

/// The bytes of golden file `name` in `directory`.
pub fn golden_in(directory: &str, name: &str) -> Vec<u8> {
    std::fs::read(Path::new(directory).join(name)).unwrap()
}

/// Compares `actual` with golden file `name` in `directory`, reporting the first differing
/// byte.
pub fn check_golden_in(directory: &str, name: &str, actual: &[u8]) {
    let path = Path::new(directory).join(name);
    let expected = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(_) if std::env::var_os("CAIRN_BLESS_GOLDEN").is_some() => {
            std::fs::create_dir_all(directory).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        Err(error) => panic!("golden file {} unreadable: {error}", path.display()),
    };
    if expected == actual {
        return;
    }
    let first = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let window = |bytes: &[u8]| hex(&bytes[first.min(bytes.len())..(first + 16).min(bytes.len())]);
    panic!(
        "on-disk bytes changed: {name} differs from its golden file at byte {first} \
         (golden {} bytes, now {} bytes; golden {} / now {}). A format change needs a new \
         format version and new golden files (docs/format.md, \"Changing the format\").",
        expected.len(),
        actual.len(),
        window(&expected),
        window(actual),
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
