//! The state file on disk: round trips, damage, refusals, growth,
//! compaction and a simulated crash.

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::*;
use crate::core::kinds::semaphore::kept::HeldLease;
use crate::core::kinds::Kept;

const LIMITS: u64 = 0x1111_2222_3333_4444;
const HEADER: Header = Header { limits: LIMITS, written: 1_000 };

/// A fresh directory for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("locker-state-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
    fn file(&self) -> PathBuf {
        self.0.join("s.log")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn window(at: u64, slot: u64, count: u32, key: Option<&str>) -> Record<'_> {
    Record::Count { at, run: 1, limit: 0, key, kept: Kept::Window { slot, count } }
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("user-{i}")).collect()
}

fn read(path: &Path) -> Replay {
    Replay::read(path, LIMITS).unwrap().expect("a state file")
}

/// Offsets of the frames in a file with `records`, after the header.
fn offsets(records: &[Record]) -> Vec<usize> {
    records.iter().scan(40, |at, r| Some(std::mem::replace(at, *at + 8 + r.encoded_len()))).collect()
}

/// Writes `records` as a new state file in `dir`; returns where each of
/// their frames starts.
fn written(dir: &Dir, records: &[Record]) -> Vec<usize> {
    StateLog::create(&dir.file(), HEADER, records.iter().copied(), false).unwrap();
    offsets(records)
}

/// Overwrites `dir`'s file with `bytes` at `offset` and reads it back.
fn damaged(dir: &Dir, offset: usize, bytes: &[u8]) -> Replay {
    write_at(&dir.file(), offset, bytes);
    read(&dir.file())
}

/// `records` but the one at `i`.
fn without<'a>(records: &[Record<'a>], i: usize) -> Vec<Record<'a>> {
    records[..i].iter().chain(&records[i + 1..]).copied().collect()
}

fn write_at(path: &Path, offset: usize, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset as u64)).unwrap();
    f.write_all(bytes).unwrap();
}

/// A run's records for `n` keys, then a lease. The keys live as long as
/// the test process, so that the records can be passed around freely.
fn sample(n: usize) -> Vec<Record<'static>> {
    let names: &'static [String] = keys(n).leak();
    let mut records = vec![
        Record::Run { run: 1, incarnation: 900, node: "host-1" },
        Record::Clock { run: 1, boot: u128::MAX - 5, wall_at_boot: 1_700_000_000_000_000_000 },
    ];
    records.extend(names.iter().enumerate().map(|(i, k)| window(1_000 + i as u64, 7, i as u32 + 1, Some(k))));
    let held = Kept::Lease(HeldLease { count: 1, ttl: 30, until: 2_030 });
    records.push(Record::Lease { at: 2_000, limit: 2, lease: "ab-1", kept: held });
    records
}

#[test]
fn records_round_trip_through_a_file_without_any_sync() {
    let dir = Dir::new("round-trip");
    let records = sample(3);
    let mut log = StateLog::create(&dir.file(), HEADER, records[..2].iter().copied(), false).unwrap();
    for r in &records[2..] {
        log.append(r).unwrap();
    }
    drop(log);
    let replay = read(&dir.file());
    assert_eq!(replay.records().collect::<Vec<_>>(), records);
    assert_eq!((replay.problem, replay.header), (None, HEADER));
    assert_eq!(replay.latest(), 2_000);
}

#[test]
fn a_missing_or_empty_file_is_no_state() {
    let dir = Dir::new("missing");
    assert!(Replay::read(&dir.file(), LIMITS).unwrap().is_none());
    fs::write(dir.file(), b"").unwrap();
    assert!(Replay::read(&dir.file(), LIMITS).unwrap().is_none());
}

#[test]
fn a_crash_loses_nothing_that_was_appended() {
    // A killed process never syncs or unmaps cleanly; its stores are in the
    // page cache. Leaking the log is that crash, as far as the file can tell.
    let dir = Dir::new("crash");
    let records = sample(1000);
    let mut log = StateLog::create(&dir.file(), HEADER, [], false).unwrap();
    for r in &records {
        log.append(r).unwrap();
    }
    std::mem::forget(log);
    let replay = read(&dir.file());
    assert_eq!(replay.problem, None);
    assert_eq!(replay.records().count(), records.len());
}

#[test]
fn a_record_killed_half_way_is_dropped_and_reported_as_unfinished() {
    let dir = Dir::new("half-way");
    let records = sample(3);
    StateLog::create(&dir.file(), HEADER, records.iter().copied(), false).unwrap();
    // The payload and checksum of a next frame were stored, its length not.
    let end = offsets(&records).last().unwrap() + 8 + records.last().unwrap().encoded_len();
    let replay = damaged(&dir, end + 4, &[0xde, 0xad, 0xbe, 0xef, 2, 1, 0]);
    assert_eq!(replay.problem, Some(Problem::Truncated { offset: end }));
    assert_eq!(replay.records().count(), records.len());
}

#[test]
fn a_truncated_file_keeps_its_good_prefix() {
    let dir = Dir::new("truncated");
    let records = sample(3);
    let last = *written(&dir, &records).last().unwrap();
    OpenOptions::new().write(true).open(dir.file()).unwrap().set_len(last as u64 + 10).unwrap();
    let replay = read(&dir.file());
    assert_eq!(replay.problem, Some(Problem::Truncated { offset: last }));
    assert_eq!(replay.records().collect::<Vec<_>>(), records[..records.len() - 1]);
}

/// Damage to one record costs that record alone. A flipped byte (in
/// record 3 of 3, and in record 250 of 501) is stepped over by the frame's
/// length. A damaged or zeroed length hides where the next frame starts:
/// reading resumes at the next offset where a whole frame with a good
/// checksum starts, and finds the records it hid again.
#[test]
fn a_damaged_record_is_stepped_over_and_every_record_after_it_kept() {
    // (keys, the damaged record, where in its frame, the bytes written there)
    let cases: [(usize, usize, usize, &[u8]); 4] = [
        (3, 2, 8 + 20, &[0xff]),
        (501, 249, 8 + 3, &[0x5a]),
        (100, 10, 0, &[0x7f, 0x01]),
        (40_000, 1, 0, &[0, 0, 0, 0]),
    ];
    for (n, bad, within, bytes) in cases {
        let dir = Dir::new(&format!("damaged-{n}"));
        let records = sample(n);
        let at = written(&dir, &records)[bad];
        let replay = damaged(&dir, at + within, bytes);
        assert_eq!(replay.problem, Some(Problem::Corrupt { offset: at }), "{n} records");
        assert_eq!(replay.skipped, 1, "{n} records");
        assert_eq!(replay.records().collect::<Vec<_>>(), without(&records, bad), "{n} records");
    }
}

/// Rewrites the header with `edit` applied to its first 32 bytes and a
/// matching checksum.
fn edit_header(path: &Path, edit: impl FnOnce(&mut [u8])) {
    let mut bytes = fs::read(path).unwrap();
    edit(&mut bytes[..32]);
    let crc = crc32fast::hash(&bytes[..32]);
    bytes[32..36].copy_from_slice(&crc.to_le_bytes());
    fs::write(path, bytes).unwrap();
}

#[test]
fn files_of_another_version_other_limits_or_no_locker_are_refused() {
    let dir = Dir::new("refused");
    let path = dir.file();
    StateLog::create(&path, HEADER, [], false).unwrap();
    let err = Replay::read(&path, LIMITS + 1).unwrap_err();
    assert!(matches!(err, StateError::OtherLimits { .. }) && err.is_refusal());
    assert!(err.to_string().contains("other limits") && err.to_string().contains("--state-discard"), "{err}");

    edit_header(&path, |h| h[8..12].copy_from_slice(&99u32.to_le_bytes()));
    let err = Replay::read(&path, LIMITS).unwrap_err();
    assert!(matches!(err, StateError::Version { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("version 99"), "{err}");

    write_at(&path, 20, &[0x55]);
    assert!(matches!(Replay::read(&path, LIMITS), Err(StateError::DamagedHeader { .. })));

    fs::write(&path, b"bind = \"tcp://*:7777\"\n").unwrap();
    assert!(matches!(Replay::read(&path, LIMITS), Err(StateError::NotState { .. })));
}

#[test]
fn the_file_grows_in_steps_and_keeps_every_record() {
    let dir = Dir::new("grow");
    let names = keys(100_000); // about 4 MB of records
    let mut log = StateLog::create(&dir.file(), HEADER, [], false).unwrap();
    for (i, k) in names.iter().enumerate() {
        log.append(&window(i as u64, 7, 1, Some(k))).unwrap();
    }
    assert_eq!(log.records().count(), names.len());
    assert_eq!(log.check(), (log.len(), None));
    let size = fs::metadata(dir.file()).unwrap().len() as usize;
    assert!(size >= log.len() && size < 4 * log.len(), "file {size} for {} bytes of records", log.len());
    drop(log);
    assert_eq!(read(&dir.file()).records().count(), names.len());
}

#[test]
fn compaction_keeps_the_latest_live_records_only() {
    let dir = Dir::new("compact");
    let mut log = StateLog::create(&dir.file(), Header { written: 0, ..HEADER }, [], false).unwrap();
    for (at, r) in [
        Record::Run { run: 1, incarnation: 1, node: "n" },
        window(2, 7, 1, Some("a")),
        window(3, 7, 2, Some("a")),
        window(4, 8, 1, Some("a")),
        Record::Lease { at: 5, limit: 2, lease: "l", kept: Kept::Lease(HeldLease { count: 1, ttl: 9, until: 14 }) },
        Record::Lease { at: 6, limit: 2, lease: "l", kept: Kept::Released },
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(r.at(), at as u64 + 1);
        log.append(r).unwrap();
    }
    let done = log.compact(|r| !matches!(r, Record::Count { kept: Kept::Window { slot: 7, .. }, .. }), false).unwrap();
    assert_eq!(done.kept, 2);
    let live: Vec<_> = log.records().collect();
    assert_eq!(live, vec![Record::Run { run: 1, incarnation: 1, node: "n" }, window(4, 8, 1, Some("a"))]);
    assert_eq!(read(&dir.file()).header.written, 6, "the header keeps the latest instant written");
    log.append(&window(7, 8, 2, Some("a"))).unwrap();
    assert_eq!(read(&dir.file()).records().count(), 3, "appends go to the new file");
}

#[test]
fn compaction_keeps_the_file_bounded_under_a_unique_key_flood() {
    // Every ask names a new key; slots change every 10 000 asks. Compacting
    // when the appends outweigh what the last compaction kept (and at slot
    // changes) keeps the file near one slot's worth of keys.
    let dir = Dir::new("flood");
    let names = keys(200_000);
    let mut log = StateLog::create(&dir.file(), HEADER, [], false).unwrap();
    let per_slot = 10_000;
    let mut largest = 0;
    for (i, k) in names.iter().enumerate() {
        let slot = (i / per_slot) as u64;
        if i % per_slot == 0 || log.wants_compaction(64 << 10) {
            log.compact(|r| matches!(r, Record::Count { kept: Kept::Window { slot: s, .. }, .. } if *s >= slot), false)
                .unwrap();
        }
        log.append(&window(i as u64, slot, 1, Some(k))).unwrap();
        largest = largest.max(log.len());
    }
    let one_slot = per_slot * (8 + window(0, 0, 1, Some("user-199999")).encoded_len());
    assert!(largest <= 2 * one_slot, "largest {largest} bytes, one slot {one_slot}");
    let on_disk = fs::metadata(dir.file()).unwrap().len() as usize;
    assert!(on_disk <= 4 * one_slot, "file of {on_disk} bytes");
}

#[test]
fn a_file_written_by_compaction_is_read_back_whole() {
    let dir = Dir::new("compact-read");
    let records = sample(500);
    let mut log = StateLog::create(&dir.file(), HEADER, records.iter().copied(), false).unwrap();
    log.compact(|_| true, true).unwrap();
    drop(log);
    let replay = read(&dir.file());
    assert_eq!(replay.problem, None);
    assert_eq!(replay.records().collect::<Vec<_>>(), records);
    assert!(!dir.0.join("s.log.new").exists(), "the new file was renamed over the old");
}

#[test]
fn digests_differ_for_different_limits() {
    assert_eq!(digest("api 5/0.8s"), digest("api 5/0.8s"));
    assert_ne!(digest("api 5/0.8s"), digest("api 6/0.8s"));
}

#[test]
fn a_runtime_limits_terms_round_trip_and_make_the_same_limit() {
    use crate::core::Limit;
    for limit in [
        Limit::from_terms("tenant", "fixed-window", 5, 0.8, None).unwrap(),
        Limit::from_terms("b", "token-bucket", 10, 1.0, Some(20)).unwrap(),
        Limit::from_terms("r", "rolling-window", 7, 86_400.0, None).unwrap(),
    ] {
        let record = Record::Terms { limit: 3, name: limit.name(), terms: RuntimeTerms::of(&limit) };
        let mut bytes = vec![0; record.encoded_len()];
        record.encode(&mut bytes);
        let read = Record::decode(&bytes).expect("a record");
        assert_eq!(read, record);
        assert_eq!((read.limit(), read.identity()), (Some(3), Identity::Terms(3)));
        let Record::Terms { name, terms, .. } = read else { unreachable!() };
        assert_eq!(terms.limit(name).unwrap().digest(), limit.digest(), "{name}");
    }
}

#[test]
fn records_held_together_are_all_there_or_none_after_a_crash() {
    let dir = Dir::new("together");
    let records = sample(3);
    let (first, parts) = records.split_at(2);
    // Killed before the release: none of the parts, read as unfinished.
    let mut log = StateLog::create(&dir.file(), HEADER, first.iter().copied(), false).unwrap();
    log.hold().unwrap();
    for r in parts {
        log.append(r).unwrap();
    }
    std::mem::forget(log);
    let replay = read(&dir.file());
    assert_eq!(replay.records().collect::<Vec<_>>(), first);
    let end = offsets(first).last().unwrap() + 8 + first.last().unwrap().encoded_len();
    assert_eq!(replay.problem, Some(Problem::Truncated { offset: end }));
    // Released: every part, in frames any reader reads.
    let mut log = StateLog::create(&dir.file(), HEADER, first.iter().copied(), false).unwrap();
    log.hold().unwrap();
    for r in parts {
        log.append(r).unwrap();
    }
    log.release();
    log.append(&records[0]).unwrap();
    std::mem::forget(log);
    let replay = read(&dir.file());
    assert_eq!(replay.problem, None);
    assert_eq!(replay.records().count(), records.len() + 1);
}
