//! The state file's layout: a header, then framed records, then zeros.
//!
//! ```text
//! header (40 bytes): magic "LOCKSTAT", version u32, 0 u32, limits digest u64,
//!                    written u64, crc32 of the 32 bytes before u32, 0 u32
//! frame:             length u32, crc32 of the payload u32, payload
//! end:               a frame length of 0 (the file is zero past its records)
//! ```
//!
//! A frame's length is written last, after its checksum and payload, so a
//! locker killed while appending leaves a zero length, and the frame is not
//! there at all. Reading stops at the first frame that is zero or runs past
//! the end of the file. A frame that fails its checksum is damage: reading
//! steps over it (by its length when the frame after it reads well, else
//! to the next offset where a whole frame with a good checksum starts) and
//! goes on, so one bad byte costs one record, not every record after it.
//! What was skipped is counted and the first problem is reported. This
//! module reads; `log` writes.

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

use super::record::{group, Record};
use super::StateError;

/// The first bytes of every state file.
pub const MAGIC: [u8; 8] = *b"LOCKSTAT";
/// The record layout this build writes and reads.
pub const VERSION: u32 = 1;
/// Bytes before the first frame.
pub const HEADER_LEN: usize = 40;
/// Bytes of a frame before its payload.
pub const FRAME_LEN: usize = 8;
/// Nonzero bytes closer than this after the last frame are taken for a
/// record the locker stopped writing half way; farther ones mean damage.
const UNFINISHED_SPAN: usize = 1 << 20;

/// What a state file says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// A digest of the limits' definitions the records' limit numbers refer to.
    pub limits: u64,
    /// When the file was written, nanoseconds since the Unix epoch.
    pub written: u64,
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.limits.to_le_bytes());
        out[24..32].copy_from_slice(&self.written.to_le_bytes());
        let crc = crc32fast::hash(&out[..32]);
        out[32..36].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a header, checking that this build can read the file and that
    /// it was written for limits with the digest `limits`.
    pub fn decode(bytes: &[u8], limits: u64, path: &Path) -> Result<Header, StateError> {
        let path = path.display().to_string();
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if bytes.len() < HEADER_LEN || bytes[..8] != MAGIC {
            return Err(StateError::NotState { path });
        }
        let crc = u32::from_le_bytes(bytes[32..36].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&bytes[..32]) {
            return Err(StateError::DamagedHeader { path });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(StateError::Version { path, found: version });
        }
        let header = Header { limits: word(16), written: word(24) };
        if header.limits != limits {
            return Err(StateError::OtherLimits { path });
        }
        Ok(header)
    }
}

/// What stopped the reading before a clean end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// The last record was not finished: the locker stopped while writing
    /// it, or the file was cut short. Everything before `offset` is kept.
    Truncated { offset: usize },
    /// A record at `offset` fails its checksum or is no record, or data
    /// follows the end: the file was damaged. Everything before is kept.
    Corrupt { offset: usize },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Truncated { offset } => write!(f, "the record at byte {offset} is unfinished (cut short)"),
            Problem::Corrupt { offset } => write!(f, "the record at byte {offset} is damaged (checksum)"),
        }
    }
}

/// The longest payload a frame may claim when reading resumes past
/// damage: far above any record, so that no real frame is missed, and a
/// bound on the bytes checked at each offset tried.
const MOST_FRAME: usize = 1 << 16;

/// A state file read back: its header and its good records.
#[derive(Debug)]
pub struct Replay {
    map: Mmap,
    /// The byte ranges of good frames, in file order: one, unless damage
    /// was stepped over.
    runs: Vec<(usize, usize)>,
    end: usize,
    /// Damaged stretches stepped over (each one record, or several whose
    /// frames could not be told apart).
    pub skipped: usize,
    /// The file's header.
    pub header: Header,
    /// Why reading stopped before a clean end, if it did.
    pub problem: Option<Problem>,
    latest: u64,
    next_run: u32,
}

impl Replay {
    /// Reads the state file at `path` written for limits with digest
    /// `limits`. `Ok(None)` when there is no file or it is empty (a locker
    /// that stopped before writing its header).
    pub fn read(path: &Path, limits: u64) -> Result<Option<Replay>, StateError> {
        let io_err = |source: io::Error| StateError::Io { path: path.display().to_string(), source };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        if file.metadata().map_err(io_err)?.len() == 0 {
            return Ok(None);
        }
        // SAFETY: the locker owns its state file; nothing else is expected
        // to change it while it is read (a change shows up as damage).
        let map = unsafe { Mmap::map(&file) }.map_err(io_err)?;
        let header = Header::decode(&map, limits, path)?;
        let Scan { runs, problem, skipped } = scan_all(&map);
        let end = runs.last().map_or(HEADER_LEN, |r| r.1);
        // One pass over the good records for what a restart needs first.
        let (mut latest, mut next_run) = (header.written, 0);
        for r in runs.iter().flat_map(|&(from, to)| Frames::between(&map, from, to)) {
            latest = latest.max(r.at());
            next_run = next_run.max(r.run().map_or(0, |run| run.saturating_add(1)));
        }
        Ok(Some(Replay { map, runs, end, skipped, header, problem, latest, next_run }))
    }

    /// The good records, oldest first.
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> + Clone + '_ {
        self.runs.iter().flat_map(|&(from, to)| Frames::between(&self.map, from, to))
    }

    /// Bytes up to the end of the last good record, header included.
    pub fn len(&self) -> usize {
        self.end
    }

    /// Whether the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.end == HEADER_LEN
    }

    /// The latest instant any record or the header speaks of having been
    /// written: the clock of a restarted locker must not be before it.
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// A run tag no record in the file uses, for the next run.
    pub fn next_run(&self) -> u32 {
        self.next_run
    }
}

/// Records in framed bytes that `scan` has checked.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The rest of a group being read, record by record.
    group: Option<group::Parts<'a>>,
}

impl<'a> Frames<'a> {
    /// The frames in `bytes[HEADER_LEN..end]`, which must all have been
    /// checked by `scan` or written by `StateLog::append`.
    pub(super) fn new(bytes: &'a [u8], end: usize) -> Frames<'a> {
        Frames::between(bytes, HEADER_LEN, end)
    }

    /// The frames in `bytes[from..to]`, checked as for `new`.
    fn between(bytes: &'a [u8], from: usize, to: usize) -> Frames<'a> {
        Frames { bytes: &bytes[..to], at: from, group: None }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Record<'a>;

    /// The next record. Its checksum is not checked again: the frames were
    /// checked when the file was read back, or written by this locker.
    fn next(&mut self) -> Option<Record<'a>> {
        if let Some(payload) = self.group.as_mut().and_then(group::Parts::next_payload) {
            // SAFETY: as below, for each record of a checked group.
            return unsafe { Record::decode_checked(payload) };
        }
        let head = self.bytes.get(self.at..self.at + FRAME_LEN)?;
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let payload = self.bytes.get(self.at + FRAME_LEN..self.at + FRAME_LEN + len).filter(|_| len > 0)?;
        self.at += FRAME_LEN + len;
        if let Some(parts) = group::parts(payload) {
            self.group = Some(parts);
            return self.next();
        }
        // SAFETY: every frame here was read with `Record::decode` by `scan`
        // (a file read back) or encoded from a `Record` by this locker (its
        // own log); see `Frames::new`.
        unsafe { Record::decode_checked(payload) }
    }
}

/// The frame at `at`: `Ok(None)` at a clean end (a zero length or the end
/// of the bytes), `Err` when the frame is cut short or damaged.
fn frame(bytes: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, Problem> {
    let Some(head) = bytes.get(at..at + FRAME_LEN) else {
        return if at >= bytes.len() { Ok(None) } else { Err(Problem::Truncated { offset: at }) };
    };
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    if len == 0 {
        return Ok(None);
    }
    let next = at + FRAME_LEN + len;
    let payload = bytes.get(at + FRAME_LEN..next).ok_or(Problem::Truncated { offset: at })?;
    let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
    let reads = match group::parts(payload) {
        Some(parts) => group::is_whole(parts),
        None => Record::decode(payload).is_some(),
    };
    if crc != crc32fast::hash(payload) || !reads {
        return Err(Problem::Corrupt { offset: at });
    }
    Ok(Some((payload, next)))
}

/// Finds the end of the good prefix of a whole file (header included) and
/// what, if anything, stopped it before a clean end.
pub fn scan(bytes: &[u8]) -> (usize, Option<Problem>) {
    scan_from(bytes, HEADER_LEN)
}

/// What reading a whole file found: the good frames, the first problem, and
/// how many damaged stretches were stepped over.
struct Scan {
    runs: Vec<(usize, usize)>,
    problem: Option<Problem>,
    skipped: usize,
}

/// Reads every good frame of a whole file, stepping over damage: after a
/// damaged or cut frame (or data past a zeroed length), reading resumes at
/// the next offset where a whole, checked frame starts; an unfinished last
/// frame has none after it, and ends the reading as in `scan`.
fn scan_all(bytes: &[u8]) -> Scan {
    let mut found = Scan { runs: Vec::new(), problem: None, skipped: 0 };
    let mut from = HEADER_LEN;
    loop {
        let (end, problem) = scan_from(bytes, from);
        if end > from {
            found.runs.push((from, end));
        }
        let Some(problem) = problem else { return found };
        found.problem.get_or_insert(problem);
        let (Problem::Corrupt { offset } | Problem::Truncated { offset }) = problem;
        let Some(next) = resume(bytes, offset) else { return found };
        found.skipped += 1;
        from = next;
    }
}

/// `scan`, from the frame at `from`.
fn scan_from(bytes: &[u8], from: usize) -> (usize, Option<Problem>) {
    let mut at = from;
    loop {
        match frame(bytes, at) {
            Ok(Some((_, next))) => at = next,
            Ok(None) => return (at, after_end(bytes, at)),
            Err(problem) => return (at, Some(problem)),
        }
    }
}

/// Where reading may resume after damage at `at`: past the damaged frame
/// by its own length when a good frame follows there, else the first later
/// offset where a whole frame of plausible length with a good checksum
/// starts (a random match is about one in four billion, and must also
/// decode as a record).
fn resume(bytes: &[u8], at: usize) -> Option<usize> {
    let good = |o: usize| {
        let len = bytes.get(o..o + 4).map_or(0, |h| u32::from_le_bytes(h.try_into().expect("4 bytes")) as usize);
        len <= MOST_FRAME && matches!(frame(bytes, o), Ok(Some(_)))
    };
    let by_length = bytes
        .get(at..at + 4)
        .map(|h| at + FRAME_LEN + u32::from_le_bytes(h.try_into().expect("4 bytes")) as usize)
        .filter(|&o| o > at && good(o));
    by_length.or_else(|| {
        // A frame's length is not zero, so one starts at most 3 bytes before
        // a nonzero byte: runs of zeros (the unwritten rest of the file,
        // after every kill mid-append) are stepped over at memory speed.
        let end = bytes.len().saturating_sub(FRAME_LEN);
        let mut from = at + 1;
        while from < end {
            let nonzero = from + bytes[from..end].iter().position(|&b| b != 0)?;
            if let Some(o) = (nonzero.saturating_sub(3).max(from)..=nonzero).find(|&o| good(o)) {
                return Some(o);
            }
            from = nonzero + 1;
        }
        None
    })
}

/// Past a clean end the file must be zeros. Nonzero bytes right after it
/// are a record that was being written; farther ones mean damage (a frame
/// length that was zeroed, hiding the records after it).
fn after_end(bytes: &[u8], end: usize) -> Option<Problem> {
    let last = bytes.get(end..)?.iter().rposition(|&b| b != 0)?;
    Some(if last < UNFINISHED_SPAN { Problem::Truncated { offset: end } } else { Problem::Corrupt { offset: end } })
}
