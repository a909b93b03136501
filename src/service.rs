//! The protocol seam: request bytes in, reply bytes out, given `now`.
//!
//! `Service::respond` always produces exactly one reply, whatever the input,
//! which is what a REP socket needs. It joins the wire format (`wire`) to
//! the decision table (`core`), and it is where protocol tests drive the
//! whole request path without a socket. It must not read a clock or touch a
//! socket: the daemon loop does both.

use crate::core::{time::ceil_ms, AskError, LimitId, Locker, Nanos, Verdict};
use crate::wire::{self, ErrorReply, GoReply, LimitStatsReply, Request, StatsReply, WireError};

/// The longest plain body whose limit is remembered: longer than any limit
/// name, so every body that names a limit fits.
const PLAIN_MEMO_BYTES: usize = 64;

/// The locker behind the wire.
#[derive(Debug)]
pub struct Service {
    locker: Locker,
    /// The last plain body and the limit it selects. A caller sends the same
    /// body over and over, and comparing a few bytes costs less than hashing
    /// them again; limits never change while serving, so this stays true.
    plain_memo: (Vec<u8>, LimitId),
}

impl Service {
    /// Serves requests from `locker`.
    pub fn new(locker: Locker) -> Service {
        let default = locker.find_plain(b"");
        Service { locker, plain_memo: (Vec::with_capacity(PLAIN_MEMO_BYTES), default) }
    }

    /// The decision table, for inspection.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// When the service next needs `on_timeout`, if ever: the loop caps its
    /// wait on the sockets by this instant. Fixed slots need no wake-up (a
    /// stale count is dropped when next asked), so this is `None` for now.
    pub fn next_deadline(&self) -> Option<Nanos> {
        None
    }

    /// Does the work that falls due at `now` (see `next_deadline`).
    pub fn on_timeout(&mut self, _now: Nanos) {}

    /// Answers one single-part request received at `now`, writing the reply
    /// into `out` (cleared first).
    pub fn respond(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) {
        out.clear();
        match wire::decode_request(body) {
            Ok(Request::Plain(body)) => self.plain(now, body, out),
            Ok(Request::Go(go)) => self.go(now, go, out),
            Ok(Request::Stats) => wire::encode(&self.stats(), out),
            Err(e) => self.reject(e, out),
        }
    }

    /// Answers a request that could not be decoded (for instance a
    /// multi-part message), writing an error map into `out` (cleared first).
    pub fn reject(&mut self, error: WireError, out: &mut Vec<u8>) {
        out.clear();
        self.locker.record_error(None);
        wire::encode(&ErrorReply { error: error.to_string() }, out);
    }

    fn plain(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) {
        let id = self.plain_limit(body);
        // A plain request names no key and costs 1, which every limit allows,
        // so it cannot fail.
        let go = self.locker.go(now, id, None, 1).is_ok_and(|v| v.go);
        out.extend_from_slice(if go { wire::GO } else { wire::SORRY });
    }

    fn plain_limit(&mut self, body: &[u8]) -> LimitId {
        if body.len() > PLAIN_MEMO_BYTES {
            return self.locker.find_plain(body);
        }
        let (last, id) = &mut self.plain_memo;
        if body != &last[..] {
            *id = self.locker.find_plain(body);
            // Within the capacity reserved at start, so this never allocates.
            last.clear();
            last.extend_from_slice(body);
        }
        *id
    }

    fn go(&mut self, now: Nanos, go: wire::Ask, out: &mut Vec<u8>) {
        let verdict = match self.locker.find(go.limit) {
            Ok(id) => self.locker.go(now, id, go.key, go.cost),
            Err(e) => {
                self.locker.record_error(None);
                Err(e)
            }
        };
        match verdict {
            Ok(v) => wire::encode_go_reply(&go_reply(&v), out),
            Err(e) => wire::encode(&error_reply(&e), out),
        }
    }

    fn stats(&self) -> StatsReply {
        let limits = self
            .locker
            .stats()
            .map(|(limit, s)| LimitStatsReply {
                name: limit.name().to_owned(),
                max_requests: limit.quota().max_requests(),
                in_seconds: limit.quota().in_seconds(),
                requests: s.requests,
                go: s.go,
                sorry: s.sorry,
                errors: s.errors,
            })
            .collect();
        StatsReply { limits, errors: self.locker.unattributed_errors(), live_keys: self.locker.live_keys() as u64 }
    }
}

fn go_reply(v: &Verdict) -> GoReply {
    GoReply {
        ok: v.go,
        limit: v.limit,
        remaining: v.remaining,
        retry_after_ms: ceil_ms(v.retry_after),
        reset_after_ms: ceil_ms(v.reset_after),
    }
}

fn error_reply(e: &AskError) -> ErrorReply {
    ErrorReply { error: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Limit, Quota, DEFAULT_LIMIT};

    #[test]
    fn plain_bodies_keep_selecting_their_own_limits() {
        let limit = |name, max| Limit::new(name, Quota::new(max, 1.0).unwrap()).unwrap();
        let mut service = Service::new(Locker::new(limit(DEFAULT_LIMIT, 2), vec![limit("api", 1)], 10));
        let mut out = Vec::new();
        let long = vec![b'x'; PLAIN_MEMO_BYTES + 1];
        let mut ask = |body: &[u8]| {
            service.respond(0, body, &mut out);
            String::from_utf8(out.clone()).unwrap()
        };
        // "api" allows 1, the default 2: each answer shows which was asked.
        assert_eq!(ask(b"api"), "go");
        assert_eq!(ask(b"let me go"), "go");
        assert_eq!(ask(b"api"), "sorry");
        assert_eq!(ask(&long), "go");
        assert_eq!(ask(b""), "sorry", "the default's count is spent");
        assert_eq!(ask(b"api"), "sorry");
    }
}
