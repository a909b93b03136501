//! The protocol seam: request bytes in, reply bytes out, given `now`.
//!
//! `Service::respond` always produces exactly one reply, whatever the input,
//! which is what a REP socket needs. It joins the wire format (`wire`) to
//! the decision table (`core`), and it is where protocol tests drive the
//! whole request path without a socket. It must not read a clock or touch a
//! socket: the daemon loop does both. Lease requests are in `service::lease`.

use crate::core::{time::ceil_ms, Algorithm, AskError, LimitId, Locker, Nanos, Verdict};
use crate::wire::{self, ErrorReply, GoReply, LimitStatsReply, Request, StatsReply, WireError};

mod lease;

/// The locker behind the wire.
#[derive(Debug)]
pub struct Service {
    locker: Locker,
}

impl Service {
    /// Serves requests from `locker`.
    pub fn new(locker: Locker) -> Service {
        Service { locker }
    }

    /// The decision table, for inspection.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// When the service next needs `on_timeout`, if ever: the loop caps its
    /// wait on the sockets by this instant. Fixed slots and token buckets
    /// need no wake-up (stale counts are dropped when next asked); the next
    /// lease expiry or end of a queued acquire's wait does.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.locker.next_deadline()
    }

    /// Does the work that falls due at `now` (see `next_deadline`): frees
    /// expired leases and grants their count to waiters.
    pub fn on_timeout(&mut self, now: Nanos) {
        self.locker.expire(now);
    }

    /// Answers one single-part request received at `now`, writing the reply
    /// into `out` (cleared first).
    pub fn respond(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) {
        out.clear();
        match wire::decode_request(body) {
            Ok(Request::Plain(body)) => self.plain(now, body, out),
            Ok(Request::Go(go)) => self.go(now, go, out),
            Ok(Request::Stats) => wire::encode(&self.stats(), out),
            Ok(Request::Acquire(ask)) => self.acquire(now, ask, out),
            Ok(Request::Heartbeat(beat)) => self.heartbeat(now, beat, out),
            Ok(Request::Release(release)) => self.release(now, release, out),
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
        let id = self.locker.find_plain(body);
        // A plain request names no key and costs 1, which every counting
        // limit allows; a semaphore cannot be taken without a lease, so it
        // answers sorry (and counts an error).
        let go = self.locker.go(now, id, None, 1).is_ok_and(|v| v.go);
        out.extend_from_slice(if go { wire::GO } else { wire::SORRY });
    }

    fn go(&mut self, now: Nanos, go: wire::Ask, out: &mut Vec<u8>) {
        let max_wait_ms = go.max_wait_ms.unwrap_or(0);
        let verdict =
            self.find(go.limit).and_then(|id| self.locker.ask(now, id, go.key, go.cost, go.up_to, max_wait_ms));
        match verdict {
            Ok(v) => wire::encode(&go_reply(&v, &go), out),
            Err(e) => wire::encode(&error_reply(&e), out),
        }
    }

    /// The limit a request names, counting an error when there is none.
    fn find(&mut self, name: Option<&str>) -> Result<LimitId, AskError> {
        let found = self.locker.find(name);
        if found.is_err() {
            self.locker.record_error(None);
        }
        found
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
                algorithm: limit.algorithm().name().to_owned(),
                burst: match limit.algorithm() {
                    Algorithm::TokenBucket { burst } => Some(burst.get()),
                    _ => None,
                },
                waited: s.waited,
            })
            .collect();
        StatsReply { limits, errors: self.locker.unattributed_errors(), live_keys: self.locker.live_keys() as u64 }
    }
}

/// The reply to a go; `granted` and `wait_ms` appear only when the ask used
/// `up_to` and `max_wait_ms`, so replies to older clients keep their bytes.
fn go_reply(v: &Verdict, ask: &wire::Ask) -> GoReply {
    GoReply {
        ok: v.go,
        limit: v.limit,
        remaining: v.remaining,
        retry_after_ms: ceil_ms(v.retry_after),
        reset_after_ms: ceil_ms(v.reset_after),
        granted: ask.up_to.then_some(v.granted),
        wait_ms: ask.max_wait_ms.map(|_| ceil_ms(v.wait)),
    }
}

fn error_reply(e: &AskError) -> ErrorReply {
    ErrorReply { error: e.to_string() }
}

#[cfg(test)]
mod tests;
