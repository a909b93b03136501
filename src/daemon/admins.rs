//! Who may reset a key's count: with CURVE on, only the clients whose keys
//! are listed in `admin_keys`, told apart by the `User-Id` the ZAP handler
//! gives each client it lets in (its key, in Z85); without CURVE there is
//! no way to tell clients apart, and a limit's `allow_reset` alone decides.
//! Every reset asked is logged, with who asked.
//!
//! The loop asks this about each request before serving it; the request
//! is decoded here only when its bytes name the op `reset`. Whether the
//! limit allows a reset at all is the service's to decide.

use tracing::info;

use crate::core::DEFAULT_LIMIT;
use crate::curve::{Allowlist, PublicKey, ServerCurve};
use crate::wire::{self, Request};

/// What a client that may not reset is told.
pub const RESET_REFUSED: &str = "reset refused: with CURVE, only clients whose keys are listed in admin_keys may reset";

/// The op's name as a MessagePack string: what a reset's bytes hold.
const RESET_OP: &[u8] = b"\xa5reset";

/// The clients that may reset a key's count.
#[derive(Debug, Clone)]
pub struct Admins {
    /// With CURVE, the keys allowed to reset (possibly none); `None`
    /// without CURVE.
    keys: Option<Allowlist>,
}

impl Admins {
    /// The admins of a locker with `curve` on, or of one without.
    pub fn new(curve: Option<&ServerCurve>) -> Admins {
        Admins { keys: curve.map(|c| c.admins.clone()) }
    }

    /// Whether `body` may be a reset: the only requests `refuses` reads.
    #[inline]
    pub fn may_be_reset(body: &[u8]) -> bool {
        wire::is_structured(body) && body.windows(RESET_OP.len()).any(|w| w == RESET_OP)
    }

    /// Whether the request in `msg` is a reset its sender may not make.
    /// Logs every reset asked, with who asked.
    pub fn refuses(&self, msg: &mut zmq::Message) -> bool {
        let body: &[u8] = msg;
        if !Admins::may_be_reset(body) {
            return false;
        }
        let (limit, key) = match wire::decode_request(body) {
            Ok(Request::Reset(r)) => (r.limit.unwrap_or(DEFAULT_LIMIT).to_owned(), r.key.unwrap_or("").to_owned()),
            _ => return false,
        };
        let by = msg.gets("User-Id").filter(|id| !id.is_empty()).map(str::to_owned);
        let allowed = match &self.keys {
            None => true,
            Some(admins) => {
                by.as_deref().and_then(|z| PublicKey::from_z85(z, "User-Id").ok()).is_some_and(|k| admins.allows(&k))
            }
        };
        let by =
            by.as_deref().unwrap_or(if self.keys.is_some() { "an unnamed client" } else { "any client (no CURVE)" });
        info!(%limit, %key, by, allowed, "reset asked");
        !allowed
    }
}
