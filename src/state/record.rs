//! One record of the state log and its bytes.
//!
//! A record says what one grant (or lease change) left behind: a run's
//! cumulative own count for a (limit, key, slot), a token bucket key's TAT,
//! a lease held until an instant. Counts are cumulative, so a later record
//! for the same thing replaces an earlier one and replaying a file twice
//! changes nothing. This module owns the bytes of a record and nothing else:
//! no file, no clock, no limits.
//!
//! Payload layout, little-endian, after a one-byte kind:
//! - `Run`: run u32, incarnation u64, node bytes;
//! - `Window`: at u64, run u32, limit u32, slot u64, count u32, key;
//! - `Bucket`: at u64, run u32, limit u32, period u64, count u32, tat u64, key;
//! - `Lease`: at u64, limit u32, count u32, ttl u64, until u64, lease bytes;
//! - `Release`: at u64, limit u32, lease bytes;
//! - `Clock`: run u32, boot id u128, wall clock at boot u64;
//!
//! where a key is one byte (0: none, 1: some) followed by its bytes.

/// One thing the state log remembers. Times are nanoseconds since the Unix
/// epoch, by the locker's clock; `at` is when the record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// Names a run of a locker (its node id and incarnation); the other
    /// records of that run carry its `run` tag.
    Run { run: u32, incarnation: u64, node: &'a str },
    /// A run's own cumulative count for (limit, key) in `slot` of a fixed
    /// window: the slot current when written, or a later one holding
    /// reservations. For a rolling window, `slot` is the peers' sub-slot
    /// the grants go in (the limit's kind tells which).
    Window { at: u64, run: u32, limit: u32, slot: u64, count: u32, key: Option<&'a str> },
    /// A token bucket key after a grant: its TAT (the instant its bucket is
    /// full again), and the run's own cumulative grants in `period`.
    Bucket { at: u64, run: u32, limit: u32, period: u64, count: u32, tat: u64, key: Option<&'a str> },
    /// A lease holding `count` of semaphore `limit` until `until`.
    Lease { at: u64, limit: u32, count: u32, ttl: u64, until: u64, lease: &'a str },
    /// A lease released: what an earlier `Lease` record said is void.
    Release { at: u64, limit: u32, lease: &'a str },
    /// The boot a run ran on and what the wall clock read at that boot by
    /// the run's reckoning: a later run on the same boot that reckons
    /// otherwise knows the wall clock was stepped in between.
    Clock { run: u32, boot: u128, wall_at_boot: u64 },
}

/// What a later record replaces: two records with the same identity say
/// the same thing at two instants, and the later one wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Identity<'a> {
    Run(u32),
    Window { run: u32, limit: u32, slot: u64, key: Option<&'a str> },
    Bucket { run: u32, limit: u32, period: u64, key: Option<&'a str> },
    Lease { limit: u32, lease: &'a str },
    Clock(u32),
}

const RUN: u8 = 1;
const WINDOW: u8 = 2;
const BUCKET: u8 = 3;
const LEASE: u8 = 4;
const RELEASE: u8 = 5;
const CLOCK: u8 = 6;

impl<'a> Record<'a> {
    /// What this record replaces.
    pub fn identity(&self) -> Identity<'a> {
        match *self {
            Record::Run { run, .. } => Identity::Run(run),
            Record::Window { run, limit, slot, key, .. } => Identity::Window { run, limit, slot, key },
            Record::Bucket { run, limit, period, key, .. } => Identity::Bucket { run, limit, period, key },
            Record::Lease { limit, lease, .. } | Record::Release { limit, lease, .. } => {
                Identity::Lease { limit, lease }
            }
            Record::Clock { run, .. } => Identity::Clock(run),
        }
    }

    /// When the record was written; a `Run` record carries its
    /// incarnation, a `Clock` record nothing (0).
    pub fn at(&self) -> u64 {
        match *self {
            Record::Run { incarnation, .. } => incarnation,
            Record::Clock { .. } => 0,
            Record::Window { at, .. }
            | Record::Bucket { at, .. }
            | Record::Lease { at, .. }
            | Record::Release { at, .. } => at,
        }
    }

    /// The limit a record is about, if any.
    pub fn limit(&self) -> Option<u32> {
        match *self {
            Record::Run { .. } | Record::Clock { .. } => None,
            Record::Window { limit, .. }
            | Record::Bucket { limit, .. }
            | Record::Lease { limit, .. }
            | Record::Release { limit, .. } => Some(limit),
        }
    }

    /// The same record about limit number `limit` instead (after a reload
    /// moved the limits).
    pub fn with_limit(self, to: u32) -> Record<'a> {
        match self {
            Record::Run { .. } | Record::Clock { .. } => self,
            Record::Window { at, run, slot, count, key, .. } => Record::Window { at, run, limit: to, slot, count, key },
            Record::Bucket { at, run, period, count, tat, key, .. } => {
                Record::Bucket { at, run, limit: to, period, count, tat, key }
            }
            Record::Lease { at, count, ttl, until, lease, .. } => {
                Record::Lease { at, limit: to, count, ttl, until, lease }
            }
            Record::Release { at, lease, .. } => Record::Release { at, limit: to, lease },
        }
    }

    /// The run a record belongs to: the run it names, or whose count it is.
    pub fn run(&self) -> Option<u32> {
        match *self {
            Record::Run { run, .. }
            | Record::Window { run, .. }
            | Record::Bucket { run, .. }
            | Record::Clock { run, .. } => Some(run),
            Record::Lease { .. } | Record::Release { .. } => None,
        }
    }

    /// The payload's length in bytes.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        let key = |k: Option<&str>| 1 + k.map_or(0, str::len);
        1 + match self {
            Record::Run { node, .. } => 12 + node.len(),
            Record::Window { key: k, .. } => 28 + key(*k),
            Record::Bucket { key: k, .. } => 36 + key(*k),
            Record::Lease { lease, .. } => 32 + lease.len(),
            Record::Release { lease, .. } => 12 + lease.len(),
            Record::Clock { .. } => 28,
        }
    }

    /// Writes the payload into `out`, which is exactly `encoded_len` long.
    #[inline]
    pub fn encode(&self, out: &mut [u8]) {
        let mut w = Writer { out, at: 0 };
        match *self {
            Record::Run { run, incarnation, node } => {
                w.u8(RUN).u32(run).u64(incarnation).bytes(node.as_bytes());
            }
            Record::Window { at, run, limit, slot, count, key } => {
                w.u8(WINDOW).u64(at).u32(run).u32(limit).u64(slot).u32(count).key(key);
            }
            Record::Bucket { at, run, limit, period, count, tat, key } => {
                w.u8(BUCKET).u64(at).u32(run).u32(limit).u64(period).u32(count).u64(tat).key(key);
            }
            Record::Lease { at, limit, count, ttl, until, lease } => {
                w.u8(LEASE).u64(at).u32(limit).u32(count).u64(ttl).u64(until).bytes(lease.as_bytes());
            }
            Record::Release { at, limit, lease } => {
                w.u8(RELEASE).u64(at).u32(limit).bytes(lease.as_bytes());
            }
            Record::Clock { run, boot, wall_at_boot } => {
                w.u8(CLOCK).u32(run).u64(boot as u64).u64((boot >> 64) as u64).u64(wall_at_boot);
            }
        }
        debug_assert_eq!(w.at, w.out.len(), "encoded_len disagrees with encode");
    }

    /// Reads a payload; `None` when the bytes are no record (a checksum
    /// that matched by chance, or a record of a newer kind).
    pub fn decode(bytes: &'a [u8]) -> Option<Record<'a>> {
        Record::read(Reader { bytes, checked: false })
    }

    /// Reads a payload that `decode` has already read once, without
    /// checking its text again: a compaction reads every record of a large
    /// file, and checking UTF-8 was a good part of its cost.
    ///
    /// # Safety
    ///
    /// `Record::decode(bytes)` must have returned `Some` for these bytes.
    pub(super) unsafe fn decode_checked(bytes: &'a [u8]) -> Option<Record<'a>> {
        Record::read(Reader { bytes, checked: true })
    }

    fn read(mut r: Reader<'a>) -> Option<Record<'a>> {
        let record = match r.u8()? {
            RUN => Record::Run { run: r.u32()?, incarnation: r.u64()?, node: r.rest_str()? },
            WINDOW => Record::Window {
                at: r.u64()?,
                run: r.u32()?,
                limit: r.u32()?,
                slot: r.u64()?,
                count: r.u32()?,
                key: r.key()?,
            },
            BUCKET => Record::Bucket {
                at: r.u64()?,
                run: r.u32()?,
                limit: r.u32()?,
                period: r.u64()?,
                count: r.u32()?,
                tat: r.u64()?,
                key: r.key()?,
            },
            LEASE => Record::Lease {
                at: r.u64()?,
                limit: r.u32()?,
                count: r.u32()?,
                ttl: r.u64()?,
                until: r.u64()?,
                lease: r.rest_str()?,
            },
            RELEASE => Record::Release { at: r.u64()?, limit: r.u32()?, lease: r.rest_str()? },
            CLOCK => {
                let run = r.u32()?;
                let boot = u128::from(r.u64()?) | (u128::from(r.u64()?) << 64);
                Record::Clock { run, boot, wall_at_boot: r.u64()? }
            }
            _ => return None,
        };
        r.bytes.is_empty().then_some(record)
    }
}

struct Writer<'o> {
    out: &'o mut [u8],
    at: usize,
}

impl Writer<'_> {
    #[inline]
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
        self
    }
    #[inline]
    fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes(&[v])
    }
    #[inline]
    fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    #[inline]
    fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    #[inline]
    fn key(&mut self, k: Option<&str>) -> &mut Self {
        match k {
            None => self.u8(0),
            Some(k) => self.u8(1).bytes(k.as_bytes()),
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    /// Whether the text in `bytes` is known to be UTF-8.
    checked: bool,
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let head: [u8; N] = self.bytes.get(..N)?.try_into().ok()?;
        self.bytes = &self.bytes[N..];
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn rest_str(&mut self) -> Option<&'a str> {
        let s = if self.checked {
            // SAFETY: `checked` is only set by `decode_checked`, whose
            // caller guarantees that `decode` accepted these very bytes,
            // text included.
            unsafe { std::str::from_utf8_unchecked(self.bytes) }
        } else {
            std::str::from_utf8(self.bytes).ok()?
        };
        self.bytes = &[];
        Some(s)
    }
    fn key(&mut self) -> Option<Option<&'a str>> {
        match self.u8()? {
            0 => Some(None),
            1 => self.rest_str().map(Some),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Record<'static>> {
        vec![
            Record::Run { run: 3, incarnation: 1_700_000_000_000_000_000, node: "host-42" },
            Record::Window { at: 5, run: 3, limit: 1, slot: 99, count: 60, key: None },
            Record::Window { at: 6, run: 3, limit: 2, slot: 100, count: 1, key: Some("user-7") },
            Record::Window { at: 6, run: 3, limit: 2, slot: 100, count: 1, key: Some("") },
            Record::Bucket { at: 7, run: 0, limit: 0, period: 12, count: 9, tat: 1234, key: Some("ключ") },
            Record::Lease { at: 8, limit: 4, count: 2, ttl: 30, until: 40, lease: "00ab-1" },
            Record::Release { at: 9, limit: 4, lease: "00ab-1" },
        ]
    }

    #[test]
    fn every_kind_round_trips_through_its_bytes() {
        for r in samples() {
            let mut buf = vec![0; r.encoded_len()];
            r.encode(&mut buf);
            assert_eq!(Record::decode(&buf), Some(r));
        }
    }

    #[test]
    fn a_window_record_has_pinned_bytes() {
        let r = Record::Window { at: 1, run: 2, limit: 3, slot: 4, count: 5, key: Some("k") };
        let mut buf = vec![0; r.encoded_len()];
        r.encode(&mut buf);
        let mut want = vec![WINDOW];
        want.extend(1u64.to_le_bytes());
        want.extend(2u32.to_le_bytes());
        want.extend(3u32.to_le_bytes());
        want.extend(4u64.to_le_bytes());
        want.extend(5u32.to_le_bytes());
        want.extend([1, b'k']);
        assert_eq!(buf, want);
    }

    #[test]
    fn short_long_or_unknown_payloads_are_no_record() {
        let r = Record::Window { at: 1, run: 2, limit: 3, slot: 4, count: 5, key: None };
        let mut buf = vec![0; r.encoded_len()];
        r.encode(&mut buf);
        assert_eq!(Record::decode(&buf[..buf.len() - 1]), None);
        buf.push(0);
        assert_eq!(Record::decode(&buf), None, "a none key has no bytes after it");
        assert_eq!(Record::decode(&[0xee, 1, 2]), None);
        assert_eq!(Record::decode(&[]), None);
    }

    #[test]
    fn a_lease_and_its_release_replace_each_other() {
        let s = samples();
        assert_eq!(s[5].identity(), s[6].identity());
        assert_ne!(s[1].identity(), s[2].identity());
    }
}
