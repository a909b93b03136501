//! Hand-written MessagePack for the messages on every structured request's
//! path: a go (straight into an ask), every other request map (read once,
//! held to the contract as it is read), the go reply out (and the go
//! reply's first field read back, for the load generator). They give the
//! same values and the same bytes as the serde definitions in `wire` (the
//! tests in `fast/tests.rs` check this on generated values and on any
//! bytes), at a fraction of the cost.
//!
//! The decoders read the common shapes only: `decode_go_prefix` a flat map
//! of a go's fields (and its `parents`, a map of strings read where it
//! lies), `read_request` any request map whose values have their
//! common types, a batch's `asks` included (each entry checked, and a go in
//! its common shape decoded as it is checked, for the caller to keep:
//! `read_request_into`). Anything else they leave to the serde decoder, which gives the
//! same values or the same errors, after `check_fields` has held the map to
//! the contract. The encoder destructures `GoReply` field by field, so a
//! field added to it fails to compile here until this module learns it.
//! This module holds no state and makes no decisions; `request` and
//! `batch` call it.

use super::ask::Ask;
use super::parents::{Parents, MAX_PARENTS};
use super::reply::GoReply;
use super::{RequestMap, WireError, BATCH_LEVELS, MAX_BATCH_ASKS, MAX_DEPTH};

/// A request map as `read_request` gives it: its fields, and a batch's
/// asks, stepped over and checked but still as bytes, with their number.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fields<'a> {
    pub map: RequestMap<'a>,
    pub asks: Option<(&'a [u8], usize)>,
}

/// Reads a request map once, holding it to the contract as it goes (every
/// field name a string, every string field a string, and the same of each
/// entry of a batch's `asks`: `check_fields`' errors, in the same order):
/// every field of `RequestMap` and a batch's `asks`, other fields stepped
/// over as serde ignores them. `Ok(None)` leaves the map to the serde
/// decoder, which gives its value or its error: a field whose value is not
/// of the common type (a signed cost, a string that is not UTF-8), a field
/// given twice, a map cut short or followed by more bytes. A batch reads
/// only `op` and `asks`, so other fields do not make it fall back; one
/// whose `asks` is not an array of whole values does, and so reaches
/// serde's error or "needs one array of asks". Decoding goes through
/// `read_request_into`; this is its form for the tests.
#[cfg(test)]
pub fn read_request(body: &[u8]) -> Result<Option<Fields<'_>>, WireError> {
    read_request_into(body, &mut |_| {})
}

#[cfg(test)]
thread_local! {
    /// Maps read on this thread by `decode_go_prefix` and
    /// `read_request_into`, the readers every decoding of a request and of
    /// each of its entries and parts goes through: what the service's
    /// tests count to see that nothing is decoded twice.
    static READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many maps `decode_go_prefix` and `read_request_into` have read on
/// this thread.
#[cfg(test)]
pub fn reads() -> u64 {
    READS.with(std::cell::Cell::get)
}

#[cfg(test)]
fn count_read() {
    READS.with(|n| n.set(n.get() + 1));
}

/// An entry of a batch's `asks` as the check passes it on: a go in its
/// common shape, decoded, or the bytes of any other entry, checked whole.
pub type Checked<'a> = Result<Ask<'a>, &'a [u8]>;

/// `read_request`, handing each entry of every `asks` array to `entry` as
/// the check reads it, so that a caller keeps what was decoded instead of
/// decoding it again. What `entry` was given counts only when the map is
/// read as a batch.
pub fn read_request_into<'a>(
    body: &'a [u8],
    entry: &mut impl FnMut(Checked<'a>),
) -> Result<Option<Fields<'a>>, WireError> {
    #[cfg(test)]
    count_read();
    let mut r = Reader::new(body);
    let Some(fields) = r.map_len() else { return Ok(None) };
    let mut f = Fields::default();
    // Fields serde would read otherwise (or refuse); for a batch, `op` or
    // `asks` not as a batch needs them.
    let (mut irregular, mut irregular_batch) = (false, false);
    let mut parents_seen = false;
    for _ in 0..fields {
        let kind = r.kind();
        let Some(name) = r.str_bytes() else { return Err(WireError::FieldNameNotAString(kind)) };
        check_value(&r, name)?;
        let took = match name {
            b"op" => field(&mut r, &mut f.map.op, Reader::str).inspect(|&ok| irregular_batch |= !ok),
            b"limit" => field(&mut r, &mut f.map.limit, Reader::str),
            b"key" => field(&mut r, &mut f.map.key, Reader::str),
            b"lease" => field(&mut r, &mut f.map.lease, Reader::str),
            b"cost" => field(&mut r, &mut f.map.cost, Reader::uint),
            b"up_to" => field(&mut r, &mut f.map.up_to, Reader::bool),
            b"max_wait_ms" => field(&mut r, &mut f.map.max_wait_ms, Reader::uint),
            b"hold_ms" => field(&mut r, &mut f.map.hold_ms, Reader::uint),
            b"shadow" => field(&mut r, &mut f.map.shadow, Reader::bool),
            b"count" => field(&mut r, &mut f.map.count, Reader::uint),
            b"ttl_ms" => field(&mut r, &mut f.map.ttl_ms, Reader::uint),
            // Every `asks` array is held to the contract, a repeated one too.
            b"asks" if matches!(body.get(r.at), Some(0x90..=0x9f | 0xdc | 0xdd)) => {
                let Some(asks) = asks(&mut r, entry)? else { return Ok(None) };
                irregular_batch |= f.asks.replace(asks).is_some();
                continue;
            }
            // Read by hand wherever the map is read: serde leaves them.
            b"parents" => {
                let parents = read_parents(&mut r)?;
                let again = std::mem::replace(&mut parents_seen, true);
                if !again {
                    f.map.parents = Some(parents).filter(|p| !p.is_empty());
                }
                Some(!again)
            }
            // A go's terms are a map: serde reads them.
            b"terms" => r.skip(MAX_DEPTH - 1).ok().map(|()| false),
            b"asks" => {
                irregular_batch = true;
                r.skip(MAX_DEPTH - 1).ok().map(|()| true)
            }
            _ => r.skip(MAX_DEPTH - 1).ok().map(|()| true),
        };
        match took {
            Some(ok) => irregular |= !ok,
            // A value that cannot be stepped over: serde says what is wrong.
            None => return Ok(None),
        }
    }
    if r.at != body.len() {
        return Ok(None);
    }
    if f.map.op != Some("batch") {
        return Ok((!irregular).then_some(f));
    }
    match f.asks {
        _ if irregular_batch => Ok(None),
        None => Err(WireError::NoAsks),
        Some((_, len)) if len > MAX_BATCH_ASKS => Err(WireError::TooManyAsks(len)),
        Some(_) => Ok(Some(f)),
    }
}

/// Reads a field's value with `read` into `slot`: `Some(false)` when the
/// value is not of the type `read` takes or the field came before (the
/// value is then stepped over), `None` when it cannot be stepped over.
fn field<'a, T>(
    r: &mut Reader<'a>,
    slot: &mut Option<T>,
    read: impl FnOnce(&mut Reader<'a>) -> Option<T>,
) -> Option<bool> {
    let mut probe = Reader { ..*r };
    match read(&mut probe) {
        Some(value) if slot.is_none() => {
            *r = probe;
            *slot = Some(value);
            Some(true)
        }
        _ => r.skip(MAX_DEPTH - 1).ok().map(|()| false),
    }
}

/// Steps over a batch's `asks` array, holding each entry to the contract
/// and checking it is a whole value, and hands each on to `entry`: the
/// entries' bytes and their number, or `None` when an entry is cut short
/// or nested too deep.
fn asks<'a>(r: &mut Reader<'a>, entry: &mut impl FnMut(Checked<'a>)) -> Result<Option<(&'a [u8], usize)>, WireError> {
    let Some(len) = r.array_len().and_then(|n| usize::try_from(n).ok()) else { return Ok(None) };
    let start = r.at;
    for _ in 0..len {
        // An entry that reads as a go in its common shape is whole and
        // holds to the contract (its names and strings were read as
        // such): no second pass over it.
        if let Some((ask, taken)) = decode_go_prefix(&r.body[r.at..]) {
            r.at += taken;
            entry(Ok(ask));
            continue;
        }
        // An entry's own `asks` (an `all`'s parts) are held to it too.
        check_map(&mut Reader { body: r.body, at: r.at }, 1)?;
        let at = r.at;
        if r.skip(MAX_DEPTH - BATCH_LEVELS).is_err() {
            return Ok(None);
        }
        entry(Err(&r.body[at..r.at]));
    }
    Ok(Some((&r.body[start..r.at], len)))
}

/// Decodes a go in its common shape from the start of `body` straight into
/// an ask, with the bytes it took: what `read_request` followed by
/// `Ask::from_map` gives for a map whose `op` is absent or
/// `"go"`, and `None` for everything else (any other op included), without
/// building the request map. The path of every structured ask and batch
/// entry, so it compares field names by length first and reads each value
/// once.
#[inline]
pub fn decode_go_prefix(body: &[u8]) -> Option<(Ask<'_>, usize)> {
    #[cfg(test)]
    count_read();
    let mut r = Reader { body, at: 0 };
    let fields = r.map_len()?;
    let mut ask = Ask::default();
    // One bit per field seen: a repeated field is an error for serde.
    let mut seen = 0u16;
    for _ in 0..fields {
        let name = r.str_bytes()?;
        let bit = match name {
            b"op" => (r.str()? == "go").then_some(1)?,
            b"key" => {
                ask.key = Some(r.str()?);
                2
            }
            b"cost" => {
                ask.cost = r.uint()?;
                4
            }
            b"limit" => {
                ask.limit = Some(r.str()?);
                8
            }
            b"up_to" => {
                ask.up_to = r.bool()?;
                16
            }
            b"max_wait_ms" => {
                ask.max_wait_ms = Some(r.uint()?);
                32
            }
            b"hold_ms" => {
                ask.hold_ms = Some(r.uint()?);
                64
            }
            // A map the general reader refuses with the contract's words.
            b"parents" => {
                ask.parents = Some(read_parents(&mut r).ok()?).filter(|p| !p.is_empty());
                128
            }
            b"shadow" => {
                ask.shadow = r.bool()?;
                256
            }
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
    }
    Some((ask, r.at))
}

/// Appends the encoding of `reply` to `out`: the bytes `wire::encode` gives
/// (a map of five named fields, integers in their shortest form).
pub fn encode_go_reply(reply: &GoReply, out: &mut Vec<u8>) {
    let GoReply { ok, limit, remaining, retry_after_ms, reset_after_ms, granted, wait_ms, shadow_sorry } = *reply;
    // Written on the stack and appended once: one capacity check for the
    // reply instead of one per piece. The longest reply is 133 bytes.
    let mut buf = Buf { bytes: [0; 136], len: 0 };
    // A fixmap: five fields, plus the optional ones that are present.
    buf.put(&[0x85 + u8::from(granted.is_some()) + u8::from(wait_ms.is_some()) + u8::from(shadow_sorry)]);
    buf.put(if ok { b"\xa2ok\xc3" } else { b"\xa2ok\xc2" });
    buf.put(b"\xa5limit");
    buf.uint(u64::from(limit));
    buf.put(b"\xa9remaining");
    buf.uint(u64::from(remaining));
    buf.put(b"\xaeretry_after_ms");
    buf.uint(retry_after_ms);
    buf.put(b"\xaereset_after_ms");
    buf.uint(reset_after_ms);
    if let Some(granted) = granted {
        buf.put(b"\xa7granted");
        buf.uint(u64::from(granted));
    }
    if let Some(wait_ms) = wait_ms {
        buf.put(b"\xa7wait_ms");
        buf.uint(wait_ms);
    }
    if shadow_sorry {
        buf.put(b"\xacshadow_sorry\xc3");
    }
    out.extend_from_slice(&buf.bytes[..buf.len]);
}

/// A reply being written, on the stack.
struct Buf {
    bytes: [u8; 136],
    len: usize,
}

impl Buf {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// An unsigned integer in its shortest MessagePack form.
    #[inline]
    fn uint(&mut self, v: u64) {
        match v {
            0..=0x7f => self.put(&[v as u8]),
            0x80..=0xff => self.put(&[0xcc, v as u8]),
            0x100..=0xffff => {
                self.put(&[0xcd]);
                self.put(&(v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.put(&[0xce]);
                self.put(&(v as u32).to_be_bytes());
            }
            _ => {
                self.put(&[0xcf]);
                self.put(&v.to_be_bytes());
            }
        }
    }
}

/// Whether a reply that starts as `encode_go_reply` writes it (a map whose
/// first field is `ok`) says ok, read from its first five bytes; `None` for
/// anything else.
pub fn go_reply_ok(reply: &[u8]) -> Option<bool> {
    match reply {
        [0x80..=0x8f, 0xa2, b'o', b'k', 0xc3, ..] => Some(true),
        [0x80..=0x8f, 0xa2, b'o', b'k', 0xc2, ..] => Some(false),
        _ => None,
    }
}

/// The length in bytes of the one MessagePack value `body` starts with,
/// nested at most `depth` deep; `None` when `body` does not start with a
/// whole value (a reserved marker, or a value cut short). The serde path
/// asks this after decoding, since its decoder does not say where it stopped.
pub fn value_len(body: &[u8], depth: usize) -> Option<usize> {
    let mut r = Reader { body, at: 0 };
    // `skip` counts the levels below the value; serde counts the value too.
    r.skip(depth.saturating_sub(1)).ok()?;
    Some(r.at)
}

/// The `parents` of request map `body`, for the serde reading of the map,
/// which leaves them (see `RequestMap::parents`): held to the contract as
/// `read_request` holds them; given twice, an error as serde's for any
/// field given twice.
pub fn parents_of(body: &[u8]) -> Result<Option<Parents<'_>>, WireError> {
    let mut r = Reader::new(body);
    let Some(fields) = r.map_len() else { return Ok(None) };
    let (mut found, mut seen) = (None, false);
    for _ in 0..fields {
        let Some(name) = r.str_bytes() else { return Ok(found) };
        if name != b"parents" {
            if r.skip(MAX_DEPTH).is_err() {
                return Ok(found);
            }
            continue;
        }
        if std::mem::replace(&mut seen, true) {
            return Err(WireError::Malformed("duplicate field `parents`".to_owned()));
        }
        found = Some(read_parents(&mut r)?).filter(|p| !p.is_empty());
    }
    Ok(found)
}

/// Reads the `parents` map at `r` and steps over it, holding it to the
/// contract: a map of at most [`MAX_PARENTS`] limit names, each named
/// once, to keys, all strings.
fn read_parents<'a>(r: &mut Reader<'a>) -> Result<Parents<'a>, WireError> {
    let bad = WireError::BadParents;
    let start = r.at;
    let found = r.kind();
    let Some(len) = r.map_len() else {
        return Err(bad(format!("field \"parents\" must be a map of limit names to keys, found {found}")));
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > MAX_PARENTS {
        return Err(bad(format!("\"parents\" names at most {MAX_PARENTS} limits, this one names {len}")));
    }
    let mut names = [""; MAX_PARENTS];
    for i in 0..len {
        let name = parents_string(r)?;
        if names[..i].contains(&name) {
            return Err(bad(format!("\"parents\" names {name:?} twice")));
        }
        names[i] = name;
        parents_string(r)?;
    }
    Ok(Parents::checked(&r.body[start..r.at]))
}

/// A limit name or a key of `parents`, read at `r`.
fn parents_string<'a>(r: &mut Reader<'a>) -> Result<&'a str, WireError> {
    let found = match r.body.get(r.at) {
        Some(0xa0..=0xbf | 0xd9..=0xdb) => "a string that is not UTF-8",
        _ => r.kind(),
    };
    r.str().ok_or_else(|| {
        WireError::BadParents(format!("field \"parents\" maps limit names to keys, both strings, found {found}"))
    })
}

/// Fields whose values the contract (docs/wire.md) says are strings.
const STRING_FIELDS: [&[u8]; 4] = [b"op", b"limit", b"key", b"lease"];

/// Checks a request map against the contract before anything reads it by
/// field: every field name is a string (MessagePack decoders would
/// otherwise read an integer name as a field's position), every string
/// field holds a string (not binary data that happens to be UTF-8), and so
/// does each map of a batch's `asks`, and of the `asks` of an entry (an
/// `all` in a batch). Other values are left to the decoder.
pub fn check_fields(body: &[u8]) -> Result<(), WireError> {
    check_map(&mut Reader::new(body), 2)
}

/// Checks the map at `r`, and the maps of its `asks` down `levels` levels.
fn check_map(r: &mut Reader, levels: u8) -> Result<(), WireError> {
    // Not a map, or cut short: the decoder says what is wrong.
    let Some(fields) = r.map_len() else { return Ok(()) };
    for _ in 0..fields {
        let kind = r.kind();
        let Some(name) = r.str_bytes() else { return Err(WireError::FieldNameNotAString(kind)) };
        if r.at >= r.body.len() {
            return Ok(()); // cut short: the decoder says so
        }
        check_value(r, name)?;
        if name == b"parents" {
            read_parents(&mut Reader { body: r.body, at: r.at })?;
        }
        let asks = levels > 0 && name == b"asks" && matches!(r.body.get(r.at), Some(0x90..=0x9f | 0xdc | 0xdd));
        if asks {
            let Some(len) = r.array_len() else { return Ok(()) };
            for _ in 0..len {
                check_map(&mut Reader { body: r.body, at: r.at }, levels - 1)?;
                if r.skip(MAX_DEPTH).is_err() {
                    return Ok(());
                }
            }
        } else if r.skip(MAX_DEPTH).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// Checks that the value at `r` of the field `name` is a string, if the
/// contract says it is one.
fn check_value(r: &Reader, name: &[u8]) -> Result<(), WireError> {
    if STRING_FIELDS.contains(&name) && !matches!(r.body.get(r.at), None | Some(0xa0..=0xbf | 0xd9..=0xdb)) {
        return Err(WireError::NotAString(String::from_utf8_lossy(name).into_owned(), r.kind()));
    }
    Ok(())
}

/// Whether `bytes` is ASCII, as `<[u8]>::is_ascii` says, in a few
/// instructions for the short names and keys of a request: up to 16 bytes
/// are two overlapping words.
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    match bytes.len() {
        0..=7 => bytes.iter().fold(0, |all, b| all | b) < 0x80,
        n @ 8..=16 => (word(0) | word(n - 8)) & HIGH == 0,
        _ => bytes.is_ascii(),
    }
}

/// A cursor over a message; every read answers `None` past the end or on
/// a marker it does not handle.
pub(super) struct Reader<'a> {
    pub(super) body: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `body`.
    pub(super) fn new(body: &'a [u8]) -> Reader<'a> {
        Reader { body, at: 0 }
    }

    /// Steps over one value of any type, nested at most `depth` levels
    /// (a map or an array is one level, a scalar none); `Err(true)` when nested deeper,
    /// `Err(false)` when the message ends inside it or holds a byte that is
    /// no MessagePack marker. Every step consumes at least one byte, so a
    /// length that claims more than the message holds fails at its end.
    pub(super) fn skip(&mut self, depth: usize) -> Result<(), bool> {
        let marker = self.byte().ok_or(false)?;
        let (items, bytes) = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (2 * u64::from(marker & 0x0f), 0),
            0x90..=0x9f => (u64::from(marker & 0x0f), 0),
            0xa0..=0xbf => (0, u64::from(marker & 0x1f)),
            0xc4 | 0xd9 => (0, self.be(1).ok_or(false)?),
            0xc5 | 0xda => (0, self.be(2).ok_or(false)?),
            0xc6 | 0xdb => (0, self.be(4).ok_or(false)?),
            0xc7 => (0, self.be(1).ok_or(false)? + 1),
            0xc8 => (0, self.be(2).ok_or(false)? + 1),
            0xc9 => (0, self.be(4).ok_or(false)? + 1),
            0xca => (0, 4),
            0xcb => (0, 8),
            0xcc | 0xd0 => (0, 1),
            0xcd | 0xd1 => (0, 2),
            0xce | 0xd2 => (0, 4),
            0xcf | 0xd3 => (0, 8),
            0xd4 => (0, 2),
            0xd5 => (0, 3),
            0xd6 => (0, 5),
            0xd7 => (0, 9),
            0xd8 => (0, 17),
            0xdc => (self.be(2).ok_or(false)?, 0),
            0xdd => (self.be(4).ok_or(false)?, 0),
            0xde => (2 * self.be(2).ok_or(false)?, 0),
            0xdf => (2 * self.be(4).ok_or(false)?, 0),
            0xc1 => return Err(false),
        };
        self.take(usize::try_from(bytes).map_err(|_| false)?).ok_or(false)?;
        let container = matches!(marker, 0x80..=0x9f | 0xdc..=0xdf);
        if container && depth == 0 {
            return Err(true);
        }
        for _ in 0..items {
            // Names and small values, most of what a request holds, are
            // stepped over here rather than by a call each.
            match self.body.get(self.at) {
                Some(&m @ 0xa0..=0xbf) => {
                    self.take(1 + usize::from(m & 0x1f)).ok_or(false)?;
                }
                Some(0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3) => self.at += 1,
                _ => self.skip(depth - 1)?,
            }
        }
        Ok(())
    }

    /// The kind of value at the cursor, in words, for an error message.
    pub(super) fn kind(&self) -> &'static str {
        match self.body.get(self.at) {
            None => "nothing (the message ends)",
            Some(0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3) => "an integer",
            Some(0x80..=0x8f | 0xde | 0xdf) => "a map",
            Some(0x90..=0x9f | 0xdc | 0xdd) => "an array",
            Some(0xa0..=0xbf | 0xd9..=0xdb) => "a string",
            Some(0xc0) => "nil",
            Some(0xc2 | 0xc3) => "a boolean",
            Some(0xc4..=0xc6) => "binary data",
            Some(0xca | 0xcb) => "a float",
            Some(_) => "an extension or reserved byte",
        }
    }

    /// The length of an array (fixarray, array16 or array32).
    #[inline]
    pub(super) fn array_len(&mut self) -> Option<u64> {
        self.len_after(0x90, 0xdc)
    }

    /// The length of a map (fixmap, map16 or map32).
    #[inline]
    pub(super) fn map_len(&mut self) -> Option<u64> {
        self.len_after(0x80, 0xde)
    }

    /// The length an array's or a map's marker gives: `fix` to `fix + 15`
    /// carry it in their low four bits, `wide` is followed by 2 bytes of
    /// it and `wide + 1` by 4.
    #[inline]
    fn len_after(&mut self, fix: u8, wide: u8) -> Option<u64> {
        match self.byte()? {
            m if m & 0xf0 == fix => Some(u64::from(m & 0x0f)),
            m if m == wide => self.be(2),
            m if m == wide + 1 => self.be(4),
            _ => None,
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let bytes = self.body.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }

    #[inline]
    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A big-endian unsigned integer of `n` bytes.
    #[inline]
    pub(super) fn be(&mut self, n: usize) -> Option<u64> {
        Some(self.take(n)?.iter().fold(0, |acc, &b| acc << 8 | u64::from(b)))
    }

    /// A string's bytes, not yet checked to be UTF-8.
    #[inline]
    pub(super) fn str_bytes(&mut self) -> Option<&'a [u8]> {
        let len = match self.byte()? {
            m @ 0xa0..=0xbf => u64::from(m & 0x1f),
            0xd9 => self.be(1)?,
            0xda => self.be(2)?,
            0xdb => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(len).ok()?)
    }

    #[inline]
    pub(super) fn str(&mut self) -> Option<&'a str> {
        let bytes = self.str_bytes()?;
        if is_ascii(bytes) {
            // SAFETY: ASCII is UTF-8. Checking ASCII a word at a time is far
            // cheaper than full UTF-8 validation for the short names and
            // keys of a request; anything else takes the full check.
            return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        std::str::from_utf8(bytes).ok()
    }

    #[inline]
    pub(super) fn bool(&mut self) -> Option<bool> {
        match self.byte()? {
            0xc2 => Some(false),
            0xc3 => Some(true),
            _ => None,
        }
    }

    #[inline]
    pub(super) fn uint(&mut self) -> Option<u64> {
        match self.byte()? {
            m @ 0x00..=0x7f => Some(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
