//! The state log being written: a memory-mapped file that records are
//! appended to.
//!
//! Appending a record is a few stores into the map: no system call, no
//! fsync. The stores land in the page cache, which outlives the process, so
//! a locker killed at any instant (kill -9, a panic, the OOM killer) loses
//! nothing it recorded. Only a power loss or a kernel crash can lose what
//! the kernel had not yet written back; `sync` (called at the interval the
//! operator chose) bounds that. The file grows by remapping in large steps,
//! rarely; compaction rewrites it with only the live records and renames the
//! new file over the old one, so a crash during compaction leaves one or
//! the other, whole.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{compiler_fence, Ordering};

use memmap2::{Mmap, MmapMut, MmapOptions};

use super::collapse::collapse;
use super::file::{scan, Frames, Header, FRAME_LEN, HEADER_LEN};
use super::record::{group, Record};
use super::StateError;

/// The size a new file is mapped with.
const INITIAL_LEN: usize = 1 << 20;
/// How many times the live records' bytes are appended before compaction.
const GROWTH: usize = 3;
/// The most a file grows by at once.
const MAX_STEP: usize = 256 << 20;

/// The state file being appended to.
#[derive(Debug)]
pub struct StateLog {
    path: PathBuf,
    file: File,
    map: MmapMut,
    header: Header,
    /// Where the next frame goes.
    tail: usize,
    /// Bytes of records written by the last compaction (or creation).
    compacted: usize,
    /// Whether records were appended since the last `sync`.
    dirty: bool,
    /// While records are held together (see `hold`): where the group's
    /// payload ends so far.
    group: Option<usize>,
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Bytes of records before.
    pub before: usize,
    /// Bytes of records after.
    pub after: usize,
    /// Records kept.
    pub kept: usize,
}

impl StateLog {
    /// Writes a new state file at `path` holding `header` and `records`
    /// (next to it first, then renamed over it), and opens it for
    /// appending. With `durable`, the new file and its directory entry are
    /// synced before this returns.
    pub fn create<'r>(
        path: &Path,
        header: Header,
        records: impl IntoIterator<Item = Record<'r>>,
        durable: bool,
    ) -> Result<StateLog, StateError> {
        let tmp = sibling(path, "new");
        let mut log = StateLog::fresh(&tmp, header)?;
        for r in records {
            log.append(&r)?;
        }
        if durable {
            log.file.sync_all().map_err(log.io_err())?;
        }
        std::fs::rename(&tmp, path).map_err(|source| StateError::Io { path: path.display().to_string(), source })?;
        if durable {
            sync_dir(path)?;
        }
        log.path = path.to_owned();
        log.compacted = log.tail;
        log.dirty = false;
        Ok(log)
    }

    /// An empty file at `path` (replaced if it exists), mapped.
    fn fresh(path: &Path, header: Header) -> Result<StateLog, StateError> {
        let io_err = |source| StateError::Io { path: path.display().to_string(), source };
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).map_err(io_err)?;
        reserve(&file, INITIAL_LEN).map_err(io_err)?;
        // SAFETY: the file was just created by this locker, which alone
        // writes it; the map lives no longer than the log that owns the file.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io_err)?;
        map[..HEADER_LEN].copy_from_slice(&header.encode());
        Ok(StateLog {
            path: path.to_owned(),
            file,
            map,
            header,
            tail: HEADER_LEN,
            compacted: HEADER_LEN,
            dirty: true,
            group: None,
        })
    }

    /// Appends `record`: a few stores into the map, and rarely (when the
    /// file is full) a remap to a larger file.
    #[inline]
    pub fn append(&mut self, record: &Record) -> Result<(), StateError> {
        if let Some(end) = self.group {
            return self.append_part(end, record);
        }
        let len = record.encoded_len();
        let next = self.tail + FRAME_LEN + len;
        if next > self.map.len() {
            self.grow(next)?;
        }
        let frame = &mut self.map[self.tail..next];
        let (head, payload) = frame.split_at_mut(FRAME_LEN);
        record.encode(payload);
        head[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        // The length goes last: until it is stored the frame reads as the
        // end of the log, so a process killed half way leaves no half record.
        compiler_fence(Ordering::Release);
        head[..4].copy_from_slice(&(len as u32).to_le_bytes());
        self.tail = next;
        self.dirty = true;
        Ok(())
    }

    /// Holds the records appended from now until `release` together: they
    /// go into one frame, a group (see `record::group`), whose length is
    /// stored at `release`. A process killed in between leaves none of
    /// them, as it leaves no half record.
    pub fn hold(&mut self) -> Result<(), StateError> {
        let start = self.tail + FRAME_LEN;
        if start + 1 > self.map.len() {
            self.grow(start + 1)?;
        }
        self.map[start] = group::KIND;
        self.group = Some(start + 1);
        Ok(())
    }

    /// Appends `record` to the group being held, whose payload ends at `end`.
    fn append_part(&mut self, end: usize, record: &Record) -> Result<(), StateError> {
        let len = record.encoded_len();
        let next = end + group::PART_LEN + len;
        if next > self.map.len() {
            self.grow(next)?;
        }
        self.map[end..end + group::PART_LEN].copy_from_slice(&(len as u32).to_le_bytes());
        record.encode(&mut self.map[end + group::PART_LEN..next]);
        self.group = Some(next);
        Ok(())
    }

    /// Ends `hold`: the group's checksum, then its length, stored last,
    /// so that its records count from now on, all together.
    pub fn release(&mut self) {
        let Some(end) = self.group.take() else { return };
        let (head, payload) = self.map[self.tail..end].split_at_mut(FRAME_LEN);
        head[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        compiler_fence(Ordering::Release);
        head[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        self.tail = end;
        self.dirty = true;
    }

    /// Grows the file so that `need` bytes fit: doubling, by at most
    /// `MAX_STEP` at once.
    #[cold]
    fn grow(&mut self, need: usize) -> Result<(), StateError> {
        let len = self.map.len();
        let step = len.clamp(INITIAL_LEN, MAX_STEP);
        let new_len = need.max(len + step);
        // On a nearly full disk a step may not fit where `need` still does.
        reserve(&self.file, new_len).or_else(|_| reserve(&self.file, need)).map_err(self.io_err())?;
        // SAFETY: as in `fresh`; the old map is dropped by the assignment,
        // and what was stored through it is in the file.
        self.map = unsafe { MmapMut::map_mut(&self.file) }.map_err(self.io_err())?;
        Ok(())
    }

    /// Bytes that can still be appended without growing the file: space the
    /// disk has already given it.
    pub fn room(&self) -> usize {
        self.map.len() - self.tail
    }

    /// Grows the file, if needed, so that at least `want` more bytes can be
    /// appended without asking the disk for space. Fails, changing nothing,
    /// when the disk has no room (`ENOSPC`) or the file cannot grow.
    pub fn make_room(&mut self, want: usize) -> Result<(), StateError> {
        if self.room() < want {
            self.grow(self.tail + want)?;
        }
        Ok(())
    }

    /// Writes what was appended since the last call to the disk and waits
    /// for it: what a power loss can cost is bounded by the time between
    /// two calls. Does nothing when nothing was appended.
    pub fn sync(&mut self) -> Result<(), StateError> {
        if std::mem::take(&mut self.dirty) {
            // On Linux fdatasync also writes pages dirtied through the map,
            // and the file's length after a grow.
            self.file.sync_data().map_err(self.io_err())?;
        }
        Ok(())
    }

    /// The records in the file, oldest first.
    pub fn records(&self) -> Frames<'_> {
        Frames::new(&self.map, self.tail)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// Bytes of records and header.
    pub fn len(&self) -> usize {
        self.tail
    }

    /// Whether no record was appended since the file was created.
    pub fn is_empty(&self) -> bool {
        self.tail == HEADER_LEN
    }

    /// Whether the records appended since the last compaction make up at
    /// least `GROWTH` times as many bytes as what it kept, and at least
    /// `min` bytes: then a compaction reads no more than a third more than
    /// was appended, and the file stays within `GROWTH + 1` times the live
    /// state.
    pub fn wants_compaction(&self, min: usize) -> bool {
        let appended = self.tail - self.compacted;
        appended >= min && appended >= GROWTH * (self.compacted - HEADER_LEN)
    }

    /// Rewrites the file with the latest record of each thing (see
    /// `Record::identity`) for which `keep` says it is still live, and runs
    /// no longer needed; a new file is renamed over the old one. This is
    /// `prefix`, `Prefix::compact` and `adopt` in one go, on this thread.
    pub fn compact(&mut self, keep: impl FnMut(&Record) -> bool, durable: bool) -> Result<Compaction, StateError> {
        let compacted = self.prefix()?.compact(keep, None)?;
        self.adopt(compacted, durable)
    }

    /// What was appended so far, readable on another thread while appends
    /// go on: a frame never changes once written, and a mapping of its own
    /// is not disturbed when this log grows.
    pub fn prefix(&self) -> Result<Prefix, StateError> {
        // SAFETY: the bytes mapped are the log's written prefix, which
        // nothing writes again (appends go after it).
        let map = unsafe { MmapOptions::new().len(self.tail).map(&self.file) }.map_err(self.io_err())?;
        Ok(Prefix { map, header: self.header, path: self.path.clone() })
    }

    /// Puts a compacted file in place: appends to it what was appended
    /// here after its prefix, renames it over this log's file, and goes on
    /// in it. With `durable`, the new file and the rename are synced first.
    pub fn adopt(&mut self, new: Compacted, durable: bool) -> Result<Compaction, StateError> {
        let tmp = new.log.path.clone();
        // A compacted file that could not be put in place (a full disk)
        // takes space and is of no use.
        self.put_in_place(new, durable).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    fn put_in_place(&mut self, mut new: Compacted, durable: bool) -> Result<Compaction, StateError> {
        let later = self.tail - new.upto;
        let kept = new.log.tail;
        new.log.append_frames(&self.map[new.upto..self.tail])?;
        if durable {
            new.log.file.sync_all().map_err(new.log.io_err())?;
        }
        std::fs::rename(&new.log.path, &self.path).map_err(self.io_err())?;
        if durable {
            sync_dir(&self.path)?;
        }
        new.log.path = self.path.clone();
        new.log.compacted = kept;
        new.log.dirty = true;
        let after = new.log.tail - HEADER_LEN;
        *self = new.log;
        Ok(Compaction { before: new.before + later, after, kept: new.kept })
    }

    /// Copies whole frames, already checksummed, to the end.
    fn append_frames(&mut self, frames: &[u8]) -> Result<(), StateError> {
        let next = self.tail + frames.len();
        if next > self.map.len() {
            self.grow(next)?;
        }
        self.map[self.tail..next].copy_from_slice(frames);
        self.tail = next;
        Ok(())
    }

    /// Checks the whole mapped file as a reader would; for tests.
    pub fn check(&self) -> (usize, Option<super::Problem>) {
        scan(&self.map)
    }

    fn io_err(&self) -> impl Fn(io::Error) -> StateError + '_ {
        |source| StateError::Io { path: self.path.display().to_string(), source }
    }
}

/// The records of a log up to some instant, mapped on their own.
#[derive(Debug)]
pub struct Prefix {
    map: Mmap,
    header: Header,
    path: PathBuf,
}

/// A compacted file next to the log, not yet in place (see `StateLog::adopt`).
#[derive(Debug)]
pub struct Compacted {
    log: StateLog,
    /// Where in the old log the compacted records ended.
    upto: usize,
    /// Bytes of records in the old log up to `upto`.
    before: usize,
    kept: usize,
}

impl Prefix {
    /// Writes `first`, then the latest record of each thing that `keep`
    /// keeps (see `collapse`), into a new file next to the log. Runs on any
    /// thread; the log goes on taking appends meanwhile.
    pub fn compact(self, keep: impl FnMut(&Record) -> bool, first: Option<Record>) -> Result<Compacted, StateError> {
        let upto = self.map.len();
        let mut written = self.header.written;
        let records = Frames::new(&self.map, upto).inspect(|r| written = written.max(r.at()));
        let live = collapse(records, keep);
        let kept = live.len();
        let tmp = sibling(&self.path, "new");
        let written = StateLog::fresh(&tmp, Header { written, ..self.header })
            .and_then(|mut log| first.iter().chain(&live).try_for_each(|r| log.append(r)).map(|()| log));
        match written {
            Ok(log) => Ok(Compacted { log, upto, before: upto - HEADER_LEN, kept }),
            Err(e) => {
                // A half-written file (a full disk) takes space and is of no use.
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// `path` with `.suffix` added.
/// Makes `file` `len` bytes long with every block of it allocated on the
/// disk, so that stores through a map of it never meet a full disk: a map
/// over a sparse file turns a full disk into SIGBUS, which kills the
/// process, where this returns `ENOSPC`.
#[cfg(target_os = "linux")]
fn reserve(file: &File, len: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a plain system call on a descriptor this file owns.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        // A file system without fallocate (some network ones): the file is
        // grown sparse, as before, and the disk is trusted to have room.
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(len as u64),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Makes `file` `len` bytes long (no way to reserve space on this OS).
#[cfg(not(target_os = "linux"))]
fn reserve(file: &File, len: usize) -> io::Result<()> {
    file.set_len(len as u64)
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// Syncs the directory holding `path`, so that a rename survives a power loss.
fn sync_dir(path: &Path) -> Result<(), StateError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| StateError::Io { path: dir.display().to_string(), source })
}
