//! The one cascade that reads a structured body, whether a request or an
//! entry of a batch: a go in its common shape in one pass, else the
//! contract-checked reader (`fast`), else serde after the contract's
//! checks. `request` and `batch` both read through it, so a body is held
//! to the same contract wherever it comes.
//!
//! Like the rest of `wire`, this only translates.

use super::ask::Ask;
use super::fast::{self, Checked};
use super::{decode_exact, RequestMap, WireError};

/// A structured body, read: a go in its common shape, or the map with a
/// batch's entries (their bytes and count) when it has them.
pub(super) enum Read<'a> {
    Go(Ask<'a>),
    Map(RequestMap<'a>, Option<(&'a [u8], usize)>),
}

/// The one cascade that reads a structured body, a request or a batch's
/// entry: a go in its common shape takes the hand-written path of every
/// ask (`read_go`, or `fast::decode_go_prefix` for an entry; it stops at
/// the first field that is not a go's); anything else is read once by
/// `read_rest_into`, held to the contract as it is read, and what that
/// reader leaves to serde is held to the contract first too (serde would
/// read names and values more loosely).
/// The cascade's first reader: a go in its common shape, when it is the
/// whole body.
#[inline]
pub(super) fn read_go(body: &[u8]) -> Option<Ask<'_>> {
    fast::decode_go_prefix(body).and_then(|(ask, len)| (len == body.len()).then_some(ask))
}

/// The rest of the cascade, for a body the first reader did not read:
/// the entries of its `asks` (a batch's entries, an `all`'s parts) go to
/// `entry` as they are checked (see `fast::read_request_into`).
#[inline]
pub(super) fn read_rest_into<'a>(body: &'a [u8], entry: &mut impl FnMut(Checked<'a>)) -> Result<Read<'a>, WireError> {
    match fast::read_request_into(body, entry)? {
        Some(fields) => Ok(Read::Map(fields.map, fields.asks)),
        None => read_by_serde(body),
    }
}

/// The last reader of the cascade: serde, after the contract's checks.
pub(super) fn read_by_serde(body: &[u8]) -> Result<Read<'_>, WireError> {
    fast::check_fields(body)?;
    let mut map: RequestMap = decode_exact(body)?;
    map.parents = fast::parents_of(body)?;
    Ok(Read::Map(map, None))
}
