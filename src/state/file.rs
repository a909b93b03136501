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
//! there at all. Reading stops at the first frame that is zero, runs past
//! the end of the file or fails its checksum: what came before is the good
//! prefix, and what stopped the reading is reported. This module reads;
//! `log` writes.

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

use super::record::Record;
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

/// A state file read back: its header and its good prefix of records.
#[derive(Debug)]
pub struct Replay {
    map: Mmap,
    end: usize,
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
        let (end, problem) = scan(&map);
        // One pass over the good prefix for what a restart needs first.
        let (mut latest, mut next_run) = (header.written, 0);
        for r in Frames::new(&map, end) {
            latest = latest.max(r.at());
            next_run = next_run.max(r.run().map_or(0, |run| run.saturating_add(1)));
        }
        Ok(Some(Replay { map, end, header, problem, latest, next_run }))
    }

    /// The records of the good prefix, oldest first.
    pub fn records(&self) -> Frames<'_> {
        Frames { bytes: &self.map[..self.end], at: HEADER_LEN }
    }

    /// Bytes of the good prefix, header included.
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
}

impl<'a> Frames<'a> {
    /// The frames in `bytes[HEADER_LEN..end]`, which must all have been
    /// checked by `scan` or written by `StateLog::append`.
    pub(super) fn new(bytes: &'a [u8], end: usize) -> Frames<'a> {
        Frames { bytes: &bytes[..end], at: HEADER_LEN }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Record<'a>;

    /// The next record. Its checksum is not checked again: the frames were
    /// checked when the file was read back, or written by this locker.
    fn next(&mut self) -> Option<Record<'a>> {
        let head = self.bytes.get(self.at..self.at + FRAME_LEN)?;
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let payload = self.bytes.get(self.at + FRAME_LEN..self.at + FRAME_LEN + len).filter(|_| len > 0)?;
        self.at += FRAME_LEN + len;
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
    if crc != crc32fast::hash(payload) || Record::decode(payload).is_none() {
        return Err(Problem::Corrupt { offset: at });
    }
    Ok(Some((payload, next)))
}

/// Finds the end of the good prefix of a whole file (header included) and
/// what, if anything, stopped it before a clean end.
pub fn scan(bytes: &[u8]) -> (usize, Option<Problem>) {
    let mut at = HEADER_LEN;
    loop {
        match frame(bytes, at) {
            Ok(Some((_, next))) => at = next,
            Ok(None) => return (at, after_end(bytes, at)),
            Err(problem) => return (at, Some(problem)),
        }
    }
}

/// Past a clean end the file must be zeros. Nonzero bytes right after it
/// are a record that was being written; farther ones mean damage (a frame
/// length that was zeroed, hiding the records after it).
fn after_end(bytes: &[u8], end: usize) -> Option<Problem> {
    let last = bytes.get(end..)?.iter().rposition(|&b| b != 0)?;
    Some(if last < UNFINISHED_SPAN { Problem::Truncated { offset: end } } else { Problem::Corrupt { offset: end } })
}
