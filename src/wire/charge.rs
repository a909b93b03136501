//! Permits charged after the fact: the request `charge` and its reply, a
//! go reply with the debt the charge left.
//!
//! ```text
//! request  {"op": "charge", "limit", "key", "cost", "parents"?}
//! reply    {"ok": true, "limit", "remaining", "retry_after_ms", "reset_after_ms", "granted", "debt"}
//! ```
//!
//! The reply is the go reply's map with `granted` (the cost, always taken)
//! and `debt` after it (0 when the charge fit): written as `encode_go_reply`
//! writes a go reply, one field more. Like the rest of `wire`, this only
//! translates: what a debt does is the core's.

use serde::{Deserialize, Serialize};

use super::parents::Parents;
use super::reply::{ErrorReply, GoReply, Reply};
use super::{decode_exact, RequestMap, WireError};

/// A charge: `cost` permits of `limit` that `key` used before it could
/// know how many, taken whatever is left (and, with `parents`, of each
/// limit above it under the key named for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge<'a> {
    /// A configured limit's name; the default limit when `None`.
    pub limit: Option<&'a str>,
    pub key: Option<&'a str>,
    /// Permits to charge; 1 when absent.
    pub cost: u64,
    /// The keys for the limits above `limit`, when its config names a
    /// `parent`.
    pub parents: Option<Parents<'a>>,
}

impl<'a> Charge<'a> {
    /// The request map that carries this charge.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap {
            op: Some("charge"),
            limit: self.limit,
            key: self.key,
            cost: Some(self.cost),
            parents: self.parents.filter(|p| !p.is_empty()),
            ..RequestMap::default()
        }
    }

    pub(super) fn from_map(map: &RequestMap<'a>) -> Result<Charge<'a>, WireError> {
        if map.max_wait_ms.is_some() || map.hold_ms.is_some() || map.up_to.is_some() {
            return Err(WireError::MisplacedField(
                "a charge is taken at once and in full: it takes no \"max_wait_ms\", \"hold_ms\" or \"up_to\"",
            ));
        }
        Ok(Charge { limit: map.limit, key: map.key, cost: map.cost.unwrap_or(1), parents: map.parents })
    }
}

/// The reply to a charge: a go reply (always `ok`, `granted` the cost,
/// `remaining` 0 while in debt) and the permits owed beyond the limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeReply {
    pub ok: bool,
    pub limit: u32,
    pub remaining: u32,
    pub retry_after_ms: u64,
    pub reset_after_ms: u64,
    pub granted: u32,
    /// Permits owed beyond the limit right now, which later asks of the
    /// key wait out; 0 when the charge fit.
    pub debt: u64,
}

impl ChargeReply {
    /// The go reply it carries, without the debt.
    pub fn go(&self) -> GoReply {
        GoReply {
            ok: self.ok,
            limit: self.limit,
            remaining: self.remaining,
            retry_after_ms: self.retry_after_ms,
            reset_after_ms: self.reset_after_ms,
            granted: Some(self.granted),
            wait_ms: None,
            shadow_sorry: false,
        }
    }
}

/// Appends the encoding of the reply to a charge to `out`: `reply` (its
/// `granted` set, no `wait_ms`) as `encode_go_reply` writes it, with
/// `debt` after; the bytes `encode` gives for a [`ChargeReply`].
///
/// ```
/// use locker::wire::{self, ChargeReply};
///
/// let reply = ChargeReply { ok: true, limit: 10, remaining: 0, retry_after_ms: 0, reset_after_ms: 900, granted: 25, debt: 15 };
/// let (mut fast, mut serde) = (Vec::new(), Vec::new());
/// wire::encode_charge_reply(&reply.go(), reply.debt, &mut fast);
/// wire::encode(&reply, &mut serde);
/// assert_eq!(fast, serde);
/// ```
pub fn encode_charge_reply(reply: &GoReply, debt: u64, out: &mut Vec<u8>) {
    let start = out.len();
    super::encode_go_reply(&GoReply { wait_ms: None, granted: Some(reply.granted.unwrap_or(0)), ..*reply }, out);
    // A fixmap of six fields becomes one of seven.
    out[start] += 1;
    super::encode(&"debt", out);
    super::encode(&debt, out);
}

/// Decodes the reply to a charge: its answer, or the error that refused it.
pub fn decode_charge_reply(body: &[u8]) -> Result<Reply<ChargeReply>, WireError> {
    if let Ok(e) = decode_exact::<ErrorReply>(body) {
        return Ok(Reply::Refused(e.error));
    }
    decode_exact(body).map(Reply::Answer)
}
