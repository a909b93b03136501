//! The loop that owns the sockets and the clock.
//!
//! `Server::bind` binds the REP socket and reports the real endpoint before
//! anything is served, so a caller can print it or hand it to a test. `run`
//! is the single thread that waits on the socket, reads the clock once per
//! request, asks the `Service` for a reply and sends it. Every request gets
//! exactly one reply. The loop makes no decisions of its own.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{debug, info, warn};

use super::clock::Clock;
use super::transport::{self, zmq_err, TransportError};
use crate::config::ServeConfig;
use crate::core::{time::NANOS_PER_MS, Locker};
use crate::service::Service;
use crate::wire::WireError;

/// How long one wait on the sockets may last, so that a stop request is seen
/// well within a second even when no traffic arrives.
const TICK_MS: i64 = 100;

/// How many requests are served back to back before the loop looks at the
/// stop flag again, so a flood cannot delay shutdown.
const BATCH: usize = 1024;

/// A failure of the socket layer, with what was being done.
pub type ServerError = TransportError;

/// A bound locker, ready to run.
pub struct Server {
    // The context must outlive the socket; field order drops the socket first.
    rep: zmq::Socket,
    _ctx: zmq::Context,
    endpoint: String,
    service: Service,
    clock: Clock,
}

impl Server {
    /// Binds the REP socket described by `config` and builds the locker.
    pub fn bind(config: &ServeConfig) -> Result<Server, ServerError> {
        let ctx = transport::context()?;
        let (rep, endpoint) = transport::bind_rep(&ctx, &config.bind, config.max_message_size)?;
        let locker = Locker::new(config.default.clone(), config.limits.clone(), config.max_keys);
        Ok(Server { rep, _ctx: ctx, endpoint, service: Service::new(locker), clock: Clock::start() })
    }

    /// The endpoint actually bound, with the real port when the config asked
    /// for a wildcard one.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Serves until `stop` becomes true.
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), ServerError> {
        info!(endpoint = %self.endpoint, "serving");
        let mut msg = zmq::Message::new();
        let mut out = Vec::with_capacity(256);
        while !stop.load(Ordering::Relaxed) {
            let readable = self.wait_readable()?;
            self.service.on_timeout(self.clock.now());
            if !readable {
                continue;
            }
            for _ in 0..BATCH {
                if !self.serve_one(&mut msg, &mut out)? {
                    break;
                }
            }
        }
        info!("stopping");
        Ok(())
    }

    /// Waits until a request arrives, the service's next deadline passes, or
    /// a tick goes by; returns whether a request is waiting.
    fn wait_readable(&self) -> Result<bool, ServerError> {
        let now = self.clock.now();
        let until_deadline = self.service.next_deadline().map(|d| d.saturating_sub(now).div_ceil(NANOS_PER_MS));
        let timeout = until_deadline.map_or(TICK_MS, |ms| (ms as i64).min(TICK_MS));
        let mut items = [self.rep.as_poll_item(zmq::POLLIN)];
        match zmq::poll(&mut items, timeout) {
            Ok(n) => Ok(n > 0),
            Err(zmq::Error::EINTR) => Ok(false),
            Err(e) => Err(zmq_err("waiting for requests")(e)),
        }
    }

    /// Serves one request if one is waiting; returns whether it did.
    fn serve_one(&mut self, msg: &mut zmq::Message, out: &mut Vec<u8>) -> Result<bool, ServerError> {
        match self.rep.recv(msg, zmq::DONTWAIT) {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => return Ok(false),
            Err(e) => return Err(zmq_err("receiving a request")(e)),
        }
        if msg.get_more() {
            let parts = self.drain_parts(msg)?;
            debug!(parts, "multi-part request refused");
            self.service.reject(WireError::MultiPart(parts), out);
        } else {
            self.service.respond(self.clock.now(), msg, out);
        }
        // A REP socket drops a reply whose requester has gone instead of
        // blocking, so this send cannot stall the loop.
        if let Err(e) = self.rep.send(&out[..], 0) {
            warn!(error = %e, "reply not sent");
        }
        Ok(true)
    }

    /// Reads the rest of a multi-part message; returns how many parts it had.
    fn drain_parts(&self, msg: &mut zmq::Message) -> Result<usize, ServerError> {
        let mut parts = 1;
        while msg.get_more() {
            self.rep.recv(msg, 0).map_err(zmq_err("receiving a request part"))?;
            parts += 1;
        }
        Ok(parts)
    }
}
