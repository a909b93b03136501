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
//! - `Window` (a `Count` of `Kept::Window`): at u64, run u32, limit u32, slot u64, count u32, key;
//! - `Bucket` (a `Count` of `Kept::Bucket`): at u64, run u32, limit u32, period u64, count u32, tat u64, key;
//! - `Lease` (of `Kept::Lease`): at u64, limit u32, count u32, ttl u64, until u64, lease bytes;
//! - `Release` (a `Lease` of `Kept::Released`): at u64, limit u32, lease bytes;
//! - `Clock`: run u32, boot id u128, wall clock at boot u64;
//! - `Exchange` (kind 21, a `Count` of `Kept::Exchange`): at u64, run u32, limit u32,
//!   period u64, gave u32, got u32, base u32, room u32, tat u64, key;
//! - `Terms`: limit u32, algorithm u8, max_requests u32, in_seconds f64,
//!   burst u32 (0: none), name bytes;
//!
//! where a key is one byte (0: none, 1: some) followed by its bytes. A
//! group (kind 17, see `group`) holds the records of one call in one
//! frame: each as its length u32 and its payload.
//!
//! Files written before the exchange had one kind are still read: each
//! kind's own ledger record (18: a fixed window's `gave, got`; 19: a
//! rolling window's, as 18; 20: a token bucket's `base, room, tat` in the
//! place of `gave, got, ...`) reads as the `Exchange` it now writes.

use crate::core::kinds::semaphore::kept::HeldLease;
use crate::core::kinds::Kept;
use crate::core::share::exchange::KeptExchange;
use crate::core::{Algorithm, Limit};

/// One thing the state log remembers. Times are nanoseconds since the Unix
/// epoch, by the locker's clock; `at` is when the record was written.
///
/// What a grant or a lease request left in its limit is the limit's own
/// kept form (`Kept`), carried whole: this module only says how its fields
/// are laid out in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// Names a run of a locker (its node id and incarnation); the other
    /// records of that run carry its `run` tag.
    Run { run: u32, incarnation: u64, node: &'a str },
    /// A run's own cumulative count for (limit, key) after a grant: a
    /// window's (`Kept::Window`: in the slot current when written, or a
    /// later one holding reservations; for a rolling window, the peers'
    /// sub-slot the grants go in) or a token bucket's (`Kept::Bucket`: its
    /// TAT, and the run's own grants in a period); or what a shared kind's
    /// exchange of conserved permits left in a period (`Kept::Exchange`,
    /// written before a gift leaves). Never a lease's.
    Count { at: u64, run: u32, limit: u32, key: Option<&'a str>, kept: Kept },
    /// Lease `lease` of semaphore `limit` after a lease request: held
    /// (`Kept::Lease`), or released (`Kept::Released`), which voids what
    /// an earlier record of it said.
    Lease { at: u64, limit: u32, lease: &'a str, kept: Kept },
    /// The boot a run ran on and what the wall clock read at that boot by
    /// the run's reckoning: a later run on the same boot that reckons
    /// otherwise knows the wall clock was stepped in between.
    Clock { run: u32, boot: u128, wall_at_boot: u64 },
    /// Limit number `limit` was created from terms sent with an ask
    /// (`--runtime-limits`): its name and terms, to create it again before
    /// its counts are put back.
    Terms { limit: u32, name: &'a str, terms: RuntimeTerms },
}

/// A runtime limit's terms as a `Terms` record keeps them: the fields an
/// ask's terms carry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuntimeTerms {
    pub algorithm: Algorithm,
    pub max_requests: u32,
    pub in_seconds: f64,
}

/// Terms are equal when every field is, `in_seconds` bit for bit.
impl Eq for RuntimeTerms {}

impl RuntimeTerms {
    /// The terms of `limit`, which was made by `Limit::from_terms`.
    pub fn of(limit: &Limit) -> RuntimeTerms {
        let q = limit.quota();
        RuntimeTerms { algorithm: limit.algorithm(), max_requests: q.max_requests(), in_seconds: limit.in_seconds() }
    }

    /// The limit `name` of these terms, or `None` when they make none
    /// (a record of a newer build's kind, or damage).
    pub fn limit(&self, name: &str) -> Option<Limit> {
        let burst = match self.algorithm {
            Algorithm::TokenBucket { burst } => Some(u64::from(burst.get())),
            _ => None,
        };
        let alg = self.algorithm.name();
        Limit::from_terms(name, alg, u64::from(self.max_requests), self.in_seconds, burst).ok()
    }
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
    Exchange { run: u32, limit: u32, period: u64, key: Option<&'a str> },
    Terms(u32),
}

const RUN: u8 = 1;
const WINDOW: u8 = 2;
const BUCKET: u8 = 3;
const LEASE: u8 = 4;
const RELEASE: u8 = 5;
const CLOCK: u8 = 6;
/// Kinds from 16 on are this build's additions beyond version 1's first
/// six; a build that does not know one skips its records.
const TERMS: u8 = 16;
/// Earlier builds' exchanges, read and never written: a peered fixed
/// window's gifts (18: 17 is a group, see `group`), a peered rolling
/// window's rights, a peered token bucket's share as a gift left it.
const LEDGER: u8 = 18;
const RIGHTS: u8 = 19;
const FILL: u8 = 20;
/// A shared kind's exchange of conserved permits.
const EXCHANGE: u8 = 21;

/// Why a `Count` record cannot hold a lease's kept form: its bytes have
/// no room for one.
const COUNTS_ONLY: &str = "a count record keeps a count or an exchange, never a lease";

impl<'a> Record<'a> {
    /// What this record replaces.
    pub fn identity(&self) -> Identity<'a> {
        match *self {
            Record::Run { run, .. } => Identity::Run(run),
            Record::Count { run, limit, key, kept: Kept::Window { slot, .. }, .. } => {
                Identity::Window { run, limit, slot, key }
            }
            Record::Count { run, limit, key, kept: Kept::Bucket { period, .. }, .. } => {
                Identity::Bucket { run, limit, period, key }
            }
            Record::Count { run, limit, key, kept: Kept::Exchange(e), .. } => {
                Identity::Exchange { run, limit, period: e.period, key }
            }
            Record::Count { .. } => unreachable!("{COUNTS_ONLY}"),
            Record::Lease { limit, lease, .. } => Identity::Lease { limit, lease },
            Record::Clock { run, .. } => Identity::Clock(run),
            Record::Terms { limit, .. } => Identity::Terms(limit),
        }
    }

    /// When the record was written; a `Run` record carries its
    /// incarnation, a `Clock` record nothing (0).
    pub fn at(&self) -> u64 {
        match *self {
            Record::Run { incarnation, .. } => incarnation,
            Record::Clock { .. } | Record::Terms { .. } => 0,
            Record::Count { at, .. } | Record::Lease { at, .. } => at,
        }
    }

    /// The limit a record is about, if any.
    pub fn limit(&self) -> Option<u32> {
        let mut record = *self;
        record.limit_mut().map(|limit| *limit)
    }

    /// The field that names the limit a record is about, if any.
    fn limit_mut(&mut self) -> Option<&mut u32> {
        match self {
            Record::Run { .. } | Record::Clock { .. } => None,
            Record::Count { limit, .. } | Record::Lease { limit, .. } | Record::Terms { limit, .. } => Some(limit),
        }
    }

    /// The kept form a record of a count or a held lease carries, and its
    /// key (a lease's id); `None` for the records of runs, clocks and
    /// released leases.
    pub fn kept(&self) -> Option<(Kept, Option<&'a str>)> {
        match *self {
            Record::Count { key, kept, .. } => Some((kept, key)),
            Record::Lease { lease, kept: kept @ Kept::Lease(_), .. } => Some((kept, Some(lease))),
            _ => None,
        }
    }

    /// The same record about limit number `to` instead (after a reload
    /// moved the limits).
    pub fn with_limit(mut self, to: u32) -> Record<'a> {
        if let Some(limit) = self.limit_mut() {
            *limit = to;
        }
        self
    }

    /// The same record written `step` nanoseconds later, carrying `kept`
    /// instead (a count or a lease moved with its instants).
    pub fn moved(mut self, step: i64, to: Kept) -> Record<'a> {
        if let Record::Count { at, kept, .. } | Record::Lease { at, kept, .. } = &mut self {
            *at = at.saturating_add_signed(step);
            *kept = to;
        }
        self
    }

    /// The run a record belongs to: the run it names, or whose count it is.
    pub fn run(&self) -> Option<u32> {
        match *self {
            Record::Run { run, .. } | Record::Count { run, .. } | Record::Clock { run, .. } => Some(run),
            Record::Lease { .. } | Record::Terms { .. } => None,
        }
    }

    /// The payload's length in bytes.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        let key = |k: Option<&str>| 1 + k.map_or(0, str::len);
        1 + match self {
            Record::Run { node, .. } => 12 + node.len(),
            Record::Count { key: k, kept: Kept::Window { .. }, .. } => 28 + key(*k),
            Record::Count { key: k, kept: Kept::Bucket { .. }, .. } => 36 + key(*k),
            Record::Count { key: k, kept: Kept::Exchange(_), .. } => 48 + key(*k),
            Record::Count { .. } => unreachable!("{COUNTS_ONLY}"),
            Record::Lease { lease, kept: Kept::Lease(_), .. } => 32 + lease.len(),
            Record::Lease { lease, .. } => 12 + lease.len(),
            Record::Clock { .. } => 28,
            Record::Terms { name, .. } => 21 + name.len(),
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
            Record::Count { at, run, limit, key, kept: Kept::Window { slot, count } } => {
                w.u8(WINDOW).u64(at).u32(run).u32(limit).u64(slot).u32(count).key(key);
            }
            Record::Count { at, run, limit, key, kept: Kept::Bucket { tat, period, count } } => {
                w.u8(BUCKET).u64(at).u32(run).u32(limit).u64(period).u32(count).u64(tat).key(key);
            }
            Record::Count { at, run, limit, key, kept: Kept::Exchange(e) } => {
                w.u8(EXCHANGE).u64(at).u32(run).u32(limit).u64(e.period).u32(e.gave).u32(e.got);
                w.u32(e.base).u32(e.room).u64(e.tat).key(key);
            }
            Record::Count { .. } => unreachable!("{COUNTS_ONLY}"),
            Record::Lease { at, limit, lease, kept: Kept::Lease(HeldLease { count, ttl, until }) } => {
                w.u8(LEASE).u64(at).u32(limit).u32(count).u64(ttl).u64(until).bytes(lease.as_bytes());
            }
            Record::Lease { at, limit, lease, .. } => {
                w.u8(RELEASE).u64(at).u32(limit).bytes(lease.as_bytes());
            }
            Record::Clock { run, boot, wall_at_boot } => {
                w.u8(CLOCK).u32(run).u64(boot as u64).u64((boot >> 64) as u64).u64(wall_at_boot);
            }
            Record::Terms { limit, name, terms } => {
                let (kind, burst) = match terms.algorithm {
                    Algorithm::FixedWindow => (0, 0),
                    Algorithm::TokenBucket { burst } => (1, burst.get()),
                    Algorithm::RollingWindow => (2, 0),
                    Algorithm::Semaphore => (3, 0),
                };
                w.u8(TERMS).u32(limit).u8(kind).u32(terms.max_requests).u64(terms.in_seconds.to_bits()).u32(burst);
                w.bytes(name.as_bytes());
            }
        }
        debug_assert_eq!(w.at, w.out.len(), "encoded_len disagrees with encode");
    }

    /// Reads a payload; `None` when the bytes are no record (a checksum
    /// that matched by chance, or a record of a newer kind).
    pub fn decode(bytes: &'a [u8]) -> Option<Record<'a>> {
        Record::read(RecordReader { bytes, checked: false })
    }

    /// Reads a payload that `decode` has already read once, without
    /// checking its text again: a compaction reads every record of a large
    /// file, and checking UTF-8 was a good part of its cost.
    ///
    /// # Safety
    ///
    /// `Record::decode(bytes)` must have returned `Some` for these bytes.
    pub(super) unsafe fn decode_checked(bytes: &'a [u8]) -> Option<Record<'a>> {
        Record::read(RecordReader { bytes, checked: true })
    }

    fn read(mut r: RecordReader<'a>) -> Option<Record<'a>> {
        let record = match r.u8()? {
            RUN => Record::Run { run: r.u32()?, incarnation: r.u64()?, node: r.rest_str()? },
            WINDOW => r.count(|r| Some(Kept::Window { slot: r.u64()?, count: r.u32()? }))?,
            BUCKET => r.count(|r| {
                let (period, count) = (r.u64()?, r.u32()?);
                Some(Kept::Bucket { tat: r.u64()?, period, count })
            })?,
            LEASE => {
                let (at, limit) = (r.u64()?, r.u32()?);
                let held = HeldLease { count: r.u32()?, ttl: r.u64()?, until: r.u64()? };
                Record::Lease { at, limit, lease: r.rest_str()?, kept: Kept::Lease(held) }
            }
            RELEASE => Record::Lease { at: r.u64()?, limit: r.u32()?, lease: r.rest_str()?, kept: Kept::Released },
            CLOCK => {
                let run = r.u32()?;
                let boot = u128::from(r.u64()?) | (u128::from(r.u64()?) << 64);
                Record::Clock { run, boot, wall_at_boot: r.u64()? }
            }
            LEDGER | RIGHTS => r.count(|r| {
                Some(Kept::Exchange(KeptExchange {
                    period: r.u64()?,
                    gave: r.u32()?,
                    got: r.u32()?,
                    ..Default::default()
                }))
            })?,
            FILL => r.count(|r| {
                let (period, base, room, tat) = (r.u64()?, r.u32()?, r.u32()?, r.u64()?);
                Some(Kept::Exchange(KeptExchange { period, base, room, tat, ..Default::default() }))
            })?,
            EXCHANGE => r.count(|r| {
                let (period, gave, got) = (r.u64()?, r.u32()?, r.u32()?);
                let (base, room, tat) = (r.u32()?, r.u32()?, r.u64()?);
                Some(Kept::Exchange(KeptExchange { period, gave, got, base, room, tat }))
            })?,
            TERMS => {
                let (limit, kind, max_requests) = (r.u32()?, r.u8()?, r.u32()?);
                let (in_seconds, burst) = (f64::from_bits(r.u64()?), r.u32()?);
                let algorithm = match kind {
                    0 => Algorithm::FixedWindow,
                    1 => Algorithm::token_bucket(burst).ok()?,
                    2 => Algorithm::RollingWindow,
                    _ => return None,
                };
                Record::Terms {
                    limit,
                    name: r.rest_str()?,
                    terms: RuntimeTerms { algorithm, max_requests, in_seconds },
                }
            }
            _ => return None,
        };
        r.bytes.is_empty().then_some(record)
    }
}

/// A group of records in one frame: the records one call left behind (an
/// `all`'s parts, a batch's grants), kept whole or not at all. A reader
/// sees its records one by one, as if each had a frame of its own; a build
/// that does not know the kind steps over the group as damage.
pub mod group {
    use super::Record;

    /// The kind byte that starts a group's payload.
    pub const KIND: u8 = 17;
    /// Bytes before each record's payload in a group: its length.
    pub const PART_LEN: usize = 4;

    /// The records in a group's `payload` after its kind byte, or `None`
    /// when it is not a group.
    pub fn parts(payload: &[u8]) -> Option<Parts<'_>> {
        (payload.first() == Some(&KIND)).then(|| Parts(&payload[1..]))
    }

    /// Whether every record of a group reads well.
    pub fn is_whole(parts: Parts) -> bool {
        let mut parts = parts;
        loop {
            match parts.next_payload() {
                None => return parts.0.is_empty(),
                Some(p) if Record::decode(p).is_none() => return false,
                Some(_) => {}
            }
        }
    }

    /// The records of a group not yet read.
    #[derive(Debug, Clone, Copy)]
    pub struct Parts<'a>(&'a [u8]);

    impl<'a> Parts<'a> {
        /// The next record's payload, if a whole one is left.
        pub fn next_payload(&mut self) -> Option<&'a [u8]> {
            let len = u32::from_le_bytes(self.0.get(..PART_LEN)?.try_into().expect("4 bytes")) as usize;
            let payload = self.0.get(PART_LEN..PART_LEN + len)?;
            self.0 = &self.0[PART_LEN + len..];
            Some(payload)
        }
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

struct RecordReader<'a> {
    bytes: &'a [u8],
    /// Whether the text in `bytes` is known to be UTF-8.
    checked: bool,
}

impl<'a> RecordReader<'a> {
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
    /// A count record after its kind: at, run, limit, the kept form
    /// `kept` reads, then the key.
    fn count(&mut self, kept: impl FnOnce(&mut Self) -> Option<Kept>) -> Option<Record<'a>> {
        let (at, run, limit) = (self.u64()?, self.u32()?, self.u32()?);
        let kept = kept(self)?;
        Some(Record::Count { at, run, limit, kept, key: self.key()? })
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

    fn window(at: u64, limit: u32, slot: u64, count: u32, key: Option<&str>) -> Record<'_> {
        Record::Count { at, run: 3, limit, key, kept: Kept::Window { slot, count } }
    }

    fn exchange(at: u64, key: Option<&str>, kept: KeptExchange) -> Record<'_> {
        Record::Count { at, run: 3, limit: 1, key, kept: Kept::Exchange(kept) }
    }

    fn samples() -> Vec<Record<'static>> {
        let held = Kept::Lease(HeldLease { count: 2, ttl: 30, until: 40 });
        vec![
            Record::Run { run: 3, incarnation: 1_700_000_000_000_000_000, node: "host-42" },
            window(5, 1, 99, 60, None),
            window(6, 2, 100, 1, Some("user-7")),
            window(6, 2, 100, 1, Some("")),
            Record::Count {
                at: 7,
                run: 0,
                limit: 0,
                key: Some("ключ"),
                kept: Kept::Bucket { tat: 1234, period: 12, count: 9 },
            },
            Record::Lease { at: 8, limit: 4, lease: "00ab-1", kept: held },
            Record::Lease { at: 9, limit: 4, lease: "00ab-1", kept: Kept::Released },
            exchange(10, Some("k"), KeptExchange { period: 99, gave: 2, got: 1, ..KeptExchange::default() }),
            exchange(11, None, KeptExchange { period: 99, gave: 0, got: 4, ..KeptExchange::default() }),
            exchange(13, Some("k"), KeptExchange { period: 7, gave: 1, got: 3, base: 2, room: 4, tat: 99 }),
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
        let r = Record::Count { at: 1, run: 2, limit: 3, key: Some("k"), kept: Kept::Window { slot: 4, count: 5 } };
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
    fn an_exchange_record_has_pinned_bytes_and_its_own_identity_per_period() {
        let kept = KeptExchange { period: 4, gave: 5, got: 6, base: 7, room: 8, tat: 9 };
        let r = exchange(1, Some("k"), kept);
        let mut buf = vec![0; r.encoded_len()];
        r.encode(&mut buf);
        let head = [&1u64.to_le_bytes()[..], &3u32.to_le_bytes(), &1u32.to_le_bytes(), &4u64.to_le_bytes()].concat();
        let figures = [5u32, 6, 7, 8].map(u32::to_le_bytes).concat();
        let want = [&[EXCHANGE][..], &head, &figures, &9u64.to_le_bytes(), &[1, b'k']].concat();
        assert_eq!(buf, want);
        let later = exchange(9, Some("k"), KeptExchange { gave: 7, ..kept });
        assert_eq!(r.identity(), later.identity(), "a later exchange of the same period replaces it");
        assert_ne!(r.identity(), exchange(1, Some("k"), KeptExchange { period: 5, ..kept }).identity());
        assert_ne!(r.identity(), window(1, 1, 4, 5, Some("k")).identity());
    }

    /// The bytes an earlier build wrote for a ledger of `kind`: at 1, run
    /// 3, limit 1, period 4, then `figures`, and the key "k".
    fn old_record(kind: u8, figures: &[u8]) -> Vec<u8> {
        let head = [&1u64.to_le_bytes()[..], &3u32.to_le_bytes(), &1u32.to_le_bytes(), &4u64.to_le_bytes()].concat();
        [&[kind][..], &head, figures, &[1, b'k']].concat()
    }

    #[test]
    fn an_earlier_builds_ledger_rights_and_fill_records_read_as_exchanges() {
        let gave_got = [5u32, 6].map(u32::to_le_bytes).concat();
        let ledger = KeptExchange { period: 4, gave: 5, got: 6, ..KeptExchange::default() };
        assert_eq!(Record::decode(&old_record(LEDGER, &gave_got)), Some(exchange(1, Some("k"), ledger)));
        assert_eq!(Record::decode(&old_record(RIGHTS, &gave_got)), Some(exchange(1, Some("k"), ledger)));
        let fill = [&7u32.to_le_bytes()[..], &8u32.to_le_bytes(), &9u64.to_le_bytes()].concat();
        let kept = KeptExchange { period: 4, base: 7, room: 8, tat: 9, ..KeptExchange::default() };
        assert_eq!(Record::decode(&old_record(FILL, &fill)), Some(exchange(1, Some("k"), kept)));
        assert_eq!(Record::decode(&old_record(FILL, &gave_got)), None, "a fill is longer");
    }

    #[test]
    fn short_long_or_unknown_payloads_are_no_record() {
        let r = Record::Count { at: 1, run: 2, limit: 3, key: None, kept: Kept::Window { slot: 4, count: 5 } };
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
