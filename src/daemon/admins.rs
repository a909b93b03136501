//! Who may reset a key's count: with CURVE on, only the clients whose keys
//! are listed in `admin_keys`, told apart by the `User-Id` the ZAP handler
//! gives each client it lets in (its key, in Z85); without CURVE there is
//! no way to tell clients apart, and a limit's `allow_reset` alone decides.
//! Every reset asked is logged, with who asked.
//!
//! The service asks this, through the loop's `Io`, about each request it
//! decoded as a reset, before it resets anything (a reset's op may be
//! written in any of MessagePack's string forms, so only the decoded
//! request tells). Whether the limit allows a reset at all is the
//! service's to decide.

use tracing::info;

use crate::curve::{Allowlist, PublicKey, ServerCurve};

/// What a client that may not reset is told.
pub const RESET_REFUSED: &str = "reset refused: with CURVE, only clients whose keys are listed in admin_keys may reset";

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

    /// Whether callers are told apart: only then does the loop read who
    /// sent a request (`caller`), two calls into libzmq.
    #[inline]
    pub fn tells_apart(&self) -> bool {
        self.keys.as_ref().is_some_and(|k| !k.is_empty())
    }

    /// Who sent `msg`: the `User-Id` the ZAP handler gave its connection
    /// (the client's key in Z85), if any.
    pub fn caller(msg: &mut zmq::Message) -> Option<String> {
        msg.gets("User-Id").filter(|id| !id.is_empty()).map(str::to_owned)
    }

    /// Whether a reset of `key` in `limit` asked by `by` (see `caller`) is
    /// refused. Logs every reset asked, with who asked.
    pub fn refuses(&self, by: Option<&str>, limit: &str, key: &str) -> bool {
        let allowed = match &self.keys {
            None => true,
            Some(admins) => by.and_then(|z| PublicKey::from_z85(z, "User-Id").ok()).is_some_and(|k| admins.allows(&k)),
        };
        let by = by.unwrap_or(if self.keys.is_some() { "an unnamed client" } else { "any client (no CURVE)" });
        info!(%limit, %key, by, allowed, "reset asked");
        !allowed
    }
}
