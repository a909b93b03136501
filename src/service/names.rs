//! Finding the limit a request names, quickly: the last plain body and the
//! limit it selects, and the limit the last structured ask named, are
//! remembered, since a caller sends the same body or name over and over
//! and comparing a few bytes costs less than hashing them again.
//!
//! What is remembered stays true while the table's limits stay put; the
//! service forgets it when they move (a reload, idle runtime limits
//! dropped) or a limit is created. It reads no clock and touches no socket.

use crate::core::{LimitId, Locker, TableError};

/// The longest plain body whose limit is remembered: longer than any limit
/// name, so every body that names a limit fits.
const PLAIN_MEMO_BYTES: usize = 64;

/// The limits last named, remembered.
#[derive(Debug)]
pub(super) struct Names {
    /// The last plain body and the limit it selects.
    plain_memo: (Vec<u8>, LimitId),
    /// The limit the last structured ask named: asks in a row, and the asks
    /// of a batch, usually name the same one, and comparing its name costs
    /// less than hashing it.
    last_named: Option<LimitId>,
}

impl Names {
    /// Nothing remembered yet, for `locker`'s limits.
    pub(super) fn new(locker: &Locker) -> Names {
        let default = locker.find_plain(b"");
        Names { plain_memo: (Vec::with_capacity(PLAIN_MEMO_BYTES), default), last_named: None }
    }

    /// Forgets everything: `locker`'s limit ids may have moved.
    pub(super) fn reset(&mut self, locker: &Locker) {
        self.plain_memo.0.clear();
        self.plain_memo.1 = locker.find_plain(b"");
        self.last_named = None;
    }

    /// Forgets the plain body: a limit was created, and a plain body of its
    /// name chose the default until now.
    pub(super) fn forget_plain(&mut self) {
        self.plain_memo.0.clear();
    }

    /// The limit a plain body selects.
    #[inline]
    pub(super) fn plain(&mut self, locker: &Locker, body: &[u8]) -> LimitId {
        if body.len() > PLAIN_MEMO_BYTES {
            return locker.find_plain(body);
        }
        let (last, id) = &mut self.plain_memo;
        if !same_bytes(body, last) {
            *id = locker.find_plain(body);
            // Within the capacity reserved at start, so this never allocates.
            last.clear();
            last.extend_from_slice(body);
        }
        *id
    }

    /// The limit a request names, remembering the last named one found.
    #[inline]
    pub(super) fn lookup(&mut self, locker: &Locker, name: Option<&str>) -> Result<LimitId, TableError> {
        let Some(name) = name else { return locker.find(None) };
        if let Some(last) = self.last_named.filter(|&id| locker.limit(id).name() == name) {
            return Ok(last);
        }
        let found = locker.find(Some(name));
        self.last_named = found.as_ref().ok().copied().or(self.last_named);
        found
    }

    /// The limit a request names, counting an error when there is none.
    #[inline]
    pub(super) fn find(&mut self, locker: &mut Locker, name: Option<&str>) -> Result<LimitId, TableError> {
        let found = self.lookup(locker, name);
        if found.is_err() {
            locker.counters().record_error(None);
        }
        found
    }
}

/// Whether `a` and `b` hold the same bytes: a plain body against the
/// last one seen, compared eight bytes at a time in line rather than
/// through a call to `memcmp`, which costs more than the comparison for
/// a body as short as `let me go`.
#[inline]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = a8.remainder().iter().zip(b8.remainder()).all(|(x, y)| x == y);
    tail && a8.zip(b8).all(|(x, y)| {
        u64::from_ne_bytes(x.try_into().unwrap_or_default()) == u64::from_ne_bytes(y.try_into().unwrap_or_default())
    })
}
