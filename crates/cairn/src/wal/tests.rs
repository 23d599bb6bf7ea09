//! The log reader's and writer's tests: framing, torn tails, damage rules, WAL versions.

use super::*;
use crate::fs::MemFs;

fn write_log(fs: &MemFs, path: &Path, payloads: &[&[u8]]) {
    let mut writer = LogWriter::new(fs.create(path).unwrap(), path.to_path_buf());
    for payload in payloads {
        writer.add_record(payload).unwrap();
    }
    writer.sync().unwrap();
}

#[test]
fn round_trip_and_torn_tail() {
    let fs = MemFs::new();
    let path = Path::new("/log");
    write_log(&fs, path, &[b"one", b"two", &[7u8; 1000]]);
    let contents = read_log(&fs, path).unwrap();
    let payloads: Vec<_> = contents.records().map(|(_, p)| p.to_vec()).collect();
    assert_eq!(
        payloads,
        vec![b"one".to_vec(), b"two".to_vec(), vec![7u8; 1000]]
    );
    assert_eq!(contents.torn_tail_offset, None);

    let full = fs.file_contents(path).unwrap();
    // Every truncation is a torn tail that keeps exactly the complete records.
    for cut in 0..full.len() {
        let contents = parse_log(full[..cut].to_vec(), path).unwrap();
        let expected = [16usize, 32, 1040]
            .iter()
            .filter(|&&end| end <= cut)
            .count();
        assert_eq!(contents.record_count(), expected, "cut {cut}");
    }
    // Garbage or zeros appended after the last record are a tail too.
    let mut zeros = full.clone();
    zeros.extend_from_slice(&[0u8; 100]);
    assert_eq!(parse_log(zeros, path).unwrap().record_count(), 3);
}

#[test]
fn damage_before_a_valid_record_is_corruption() {
    let fs = MemFs::new();
    let path = Path::new("/log");
    write_log(&fs, path, &[b"one", b"two", b"three"]);
    let full = fs.file_contents(path).unwrap();
    for position in (0..32).filter(|position| !(11..16).contains(position)) {
        let mut damaged = full.clone();
        damaged[position] ^= 0x10;
        match parse_log(damaged, path) {
            Err(Error::Corruption { offset, .. }) => assert!(offset <= position as u64),
            other => panic!("flip at {position}: expected corruption, got {other:?}"),
        }
    }
    // Damage in the last record is indistinguishable from a torn write: a tail.
    let mut damaged = full.clone();
    let last = damaged.len() - 4;
    damaged[last] ^= 1;
    let contents = parse_log(damaged, path).unwrap();
    assert_eq!(contents.record_count(), 2);
    assert_eq!(contents.torn_tail_offset, Some(32));
}

/// Bug (found in review): past a damaged record, the rescan took a header record inside
/// the damaged record's payload (a user's value may hold any bytes, a WAL's among them)
/// for a header past the start of the WAL and reported corruption, so a torn last write
/// of such a value made the database fail to open instead of losing that write alone.
#[test]
fn a_header_inside_a_torn_record_is_part_of_the_tear() {
    let (mut bytes, _) = v2_wal();
    let torn_at = bytes.len();
    let mut payload = 4u64.to_le_bytes().to_vec();
    payload.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9, 9]);
    payload.extend(wal_header_record(NONCE));
    payload.extend(vec![7u8; 64]);
    let record = encode_record(&payload);
    // Torn after the embedded header: the record's checksum fails, the header's holds.
    bytes.extend(&record[..record.len() - 32]);
    let contents = read(bytes, false, WalRecovery::PointInTime).unwrap();
    assert_eq!(contents.record_count(), 3, "batches A, B and C");
    let lost = contents.lost_unsynced_tail.map(|lost| lost.offset);
    let torn = contents.torn_tail_offset;
    assert_eq!(lost.or(torn), Some(torn_at as u64));
}

/// The nonce of the WALs these tests build.
const NONCE: u64 = 0x5eed_0fc0_ffee;

/// A WAL of today's version: header, batch A, marker (A synced), batch B, batch C.
/// Returns the bytes and each record's offset.
fn v2_wal() -> (Vec<u8>, Vec<usize>) {
    let batch = |sequence: u64| {
        let mut payload = sequence.to_le_bytes().to_vec();
        payload.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9, 9]);
        encode_record(&payload)
    };
    let mut bytes = wal_header_record(NONCE);
    let mut offsets = vec![0];
    offsets.push(bytes.len());
    bytes.extend(batch(1));
    offsets.push(bytes.len());
    bytes.extend(sync_marker_record(NONCE, bytes.len() as u64));
    for sequence in [2, 3] {
        offsets.push(bytes.len());
        bytes.extend(batch(sequence));
    }
    (bytes, offsets)
}

fn read(bytes: Vec<u8>, expect_header: bool, recovery: WalRecovery) -> Result<LogContents> {
    parse_wal(bytes, Path::new("/w.log"), 1 << 20, expect_header, recovery)
}

#[test]
fn wal_holes_are_corruption_in_synced_bytes_and_a_lost_tail_after_them() {
    let (pristine, offsets) = v2_wal();
    let contents = read(pristine.clone(), false, WalRecovery::Strict).unwrap();
    assert_eq!(
        (contents.wal_version, contents.record_count()),
        (WAL_FORMAT_VERSION, 3)
    );
    // A hole in batch B (unsynced) followed by C: a lost tail, or corruption if strict.
    let mut holed = pristine.clone();
    holed[offsets[3]..offsets[3] + 8].fill(0);
    let contents = read(holed.clone(), false, WalRecovery::PointInTime).unwrap();
    assert_eq!(contents.record_count(), 1);
    let lost = contents.lost_unsynced_tail.unwrap();
    assert_eq!(
        (lost.offset, lost.resumes_at),
        (offsets[3] as u64, offsets[4] as u64)
    );
    assert_eq!(
        (lost.durable_bytes, lost.dropped_records),
        (offsets[2] as u64, 1)
    );
    assert!(read(holed, false, WalRecovery::Strict)
        .unwrap_err()
        .is_corruption());
    // A hole in the header or batch A, which the marker says were synced: corruption,
    // also when the header is gone and only the MANIFEST says the WAL is version 2.
    for (record, expect_header) in [(0, true), (1, false)] {
        let mut damaged = pristine.clone();
        damaged[offsets[record]..offsets[record] + 8].fill(0);
        match read(damaged, expect_header, WalRecovery::PointInTime) {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, offsets[record] as u64),
            other => panic!("record {record}: {other:?}"),
        }
    }
    // Without the MANIFEST's word, a WAL without a header is version 1: a hole is
    // corruption, as before sync markers existed.
    let mut headless = pristine.clone();
    headless[..8].fill(0);
    assert!(read(headless, false, WalRecovery::PointInTime).is_err());
    // A marker claiming bytes past itself is corruption (invariant 2).
    let (mut bytes, _) = v2_wal();
    bytes.extend(sync_marker_record(NONCE, 1 << 20));
    assert!(read(bytes, false, WalRecovery::PointInTime)
        .unwrap_err()
        .is_corruption());
}

/// A batch record whose value holds `inner` (a whole record) at an 8-aligned offset of
/// the file when appended at `at`, torn after it: its checksum fails, `inner`'s holds.
fn torn_record_holding(at: usize, inner: &[u8]) -> Vec<u8> {
    let mut payload = 4u64.to_le_bytes().to_vec();
    payload.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9, 9]);
    assert_eq!(
        (at + RECORD_HEADER_BYTES + payload.len()) % RECORD_ALIGNMENT,
        0
    );
    payload.extend_from_slice(inner);
    payload.extend(vec![7u8; 64]);
    let record = encode_record(&payload);
    record[..record.len() - 32].to_vec()
}

/// Bug (found in review): past a damaged record the rescan believed a sync marker inside
/// the damaged record's payload. A value shaped like a marker naming the bytes up to
/// itself, torn by a crash, made the open fail with corruption ("bad WAL record in
/// synced bytes") instead of losing the torn write alone. Markers now carry the WAL's
/// nonce, which no value can know.
#[test]
fn a_sync_marker_inside_a_torn_record_is_part_of_the_tear() {
    let (mut bytes, _) = v2_wal();
    let torn_at = bytes.len();
    // The forged marker sits 24 bytes into the torn record and names that offset.
    let claims = (torn_at + 24) as u64;
    for forged in [
        sync_marker_record(NONCE ^ 1, claims),
        sync_marker_record_v2(claims),
    ] {
        let mut damaged = bytes.clone();
        damaged.extend(torn_record_holding(torn_at, &forged));
        let contents = read(damaged, false, WalRecovery::PointInTime).unwrap();
        assert_eq!(contents.record_count(), 3, "batches A, B and C");
        let lost = contents.lost_unsynced_tail.map(|lost| lost.offset);
        assert_eq!(lost.or(contents.torn_tail_offset), Some(torn_at as u64));
    }
    // A marker carrying this WAL's nonce is believed wherever it lies (invariant 4).
    bytes.extend(torn_record_holding(
        torn_at,
        &sync_marker_record(NONCE, claims),
    ));
    assert!(read(bytes, false, WalRecovery::PointInTime)
        .unwrap_err()
        .is_corruption());
}

/// Invariant 4 in records read in order: a marker of another WAL, or of the old shape in
/// a WAL of today's version, is corruption; so is a header whose shape does not match
/// its version.
#[test]
fn a_foreign_marker_or_a_misshapen_header_is_corruption() {
    for foreign in [sync_marker_record(NONCE + 1, 0), sync_marker_record_v2(0)] {
        let (mut bytes, _) = v2_wal();
        let at = bytes.len() as u64;
        bytes.extend(foreign);
        match read(bytes, false, WalRecovery::PointInTime) {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, at),
            other => panic!("{other:?}"),
        }
    }
    // A version-3 header is 12 bytes: one of 20 naming version 3 is misshapen.
    let mut payload = WAL_HEADER_MAGIC.to_vec();
    payload.extend_from_slice(&3u32.to_le_bytes());
    payload.extend_from_slice(&NONCE.to_le_bytes());
    let error = read(encode_record(&payload), false, WalRecovery::Strict).unwrap_err();
    assert!(error.is_corruption(), "{error}");
    // A version-3 WAL (no nonce) still reads its markers.
    let mut bytes = encode_record(&payload[..WAL_HEADER_V2_PAYLOAD_BYTES]);
    bytes.extend(sync_marker_record_v2(0));
    let contents = read(bytes, false, WalRecovery::Strict).unwrap();
    assert_eq!((contents.wal_version, contents.record_count()), (3, 0));
}

/// A damaged header loses the WAL's version and nonce: markers of either shape still count,
/// so damage to synced bytes of a version-3 WAL is corruption, not a dropped tail.
#[test]
fn a_damaged_header_believes_markers_of_either_shape() {
    let mut header = WAL_HEADER_MAGIC.to_vec();
    header.extend_from_slice(&3u32.to_le_bytes());
    let mut bytes = encode_record(&header);
    let mut batch = 1u64.to_le_bytes().to_vec();
    batch.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9, 9]);
    bytes.extend(encode_record(&batch));
    bytes.extend(sync_marker_record_v2(bytes.len() as u64));
    bytes[..8].fill(0);
    match read(bytes, true, WalRecovery::PointInTime) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 0),
        other => panic!("{other:?}"),
    }
}
