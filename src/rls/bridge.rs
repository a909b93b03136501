//! The way from a gRPC call to the locker's loop: the serving socket also
//! binds an `inproc://` endpoint in the loop's ZeroMQ context, and each
//! ShouldRateLimit reaches it as one structured request (a batch of asks),
//! exactly as a ZeroMQ client's would. Peering, the store, the state file,
//! metrics and the loop's order of work then apply unchanged, and the loop
//! never waits on gRPC: it answers the inproc socket as it answers any
//! client, without blocking.
//!
//! Each of tokio's blocking threads keeps its own DEALER socket (a
//! thread-local), connected once and reused: a call borrows no lock and
//! shares no socket, so calls run side by side up to the pool's size, and
//! no bridge thread sits between them and the loop (one more hop and a
//! wake-up per call). A DEALER rather than a REQ socket, because a call
//! that times out leaves a REQ socket stuck; every request carries an id
//! frame that the serving socket sends back, so a late reply to a call
//! that gave up is told apart and dropped.
//!
//! This module only moves bytes; it decides nothing and reads no config.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a waiting call looks whether the gRPC side is closing, in
/// milliseconds: a call in flight when the locker stops ends this soon.
const CLOSING_TICK_MS: i64 = 20;

/// Why a request did not get its reply.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("the locker did not answer within {0} ms")]
    Timeout(i32),
    #[error("the locker's socket failed: {0}")]
    Socket(#[from] zmq::Error),
    #[error("the locker is stopping")]
    Closing,
}

/// Where the loop's inproc endpoint is, and how long a call may wait.
#[derive(Clone)]
pub struct Bridge {
    ctx: zmq::Context,
    endpoint: String,
    timeout_ms: i32,
    closing: Arc<AtomicBool>,
}

/// A thread's socket, the endpoint it is connected to, and the last id sent.
struct Connected {
    socket: zmq::Socket,
    endpoint: String,
    id: u64,
}

thread_local! {
    static SOCKET: RefCell<Option<Connected>> = const { RefCell::new(None) };
}

impl Bridge {
    /// Reaches the loop at `endpoint` (bound in `ctx`), waiting up to
    /// `timeout_ms` for each reply.
    pub fn new(ctx: zmq::Context, endpoint: String, timeout_ms: i32) -> Bridge {
        Bridge { ctx, endpoint, timeout_ms, closing: Arc::default() }
    }

    /// Ends every call waiting now or later: the locker is stopping.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Sends `body` to the loop and waits for its reply. Blocks: call it
    /// from a blocking thread, never from an async task.
    pub fn ask(&self, body: &[u8]) -> Result<Vec<u8>, BridgeError> {
        SOCKET.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|c| c.endpoint != self.endpoint) {
                *slot = Some(self.connect()?);
            }
            let c = slot.as_mut().expect("connected above");
            let result = self.round_trip(c, body);
            if matches!(result, Err(BridgeError::Socket(_))) {
                // A socket in an unknown state is not reused.
                *slot = None;
            }
            result
        })
    }

    fn connect(&self) -> Result<Connected, BridgeError> {
        let socket = self.ctx.socket(zmq::DEALER)?;
        socket.set_linger(0)?;
        socket.set_sndtimeo(self.timeout_ms)?;
        socket.connect(&self.endpoint)?;
        Ok(Connected { socket, endpoint: self.endpoint.clone(), id: 0 })
    }

    fn round_trip(&self, c: &mut Connected, body: &[u8]) -> Result<Vec<u8>, BridgeError> {
        // Nothing is sent once closing: the loop may be gone, and a send
        // to no peer would wait out its whole timeout.
        if self.closing.load(Ordering::Relaxed) {
            return Err(BridgeError::Closing);
        }
        c.id = c.id.wrapping_add(1);
        let id = c.id.to_be_bytes();
        let sent = c.socket.send(&id[..], zmq::SNDMORE).and_then(|_| c.socket.send(&b""[..], zmq::SNDMORE));
        match sent.and_then(|_| c.socket.send(body, 0)) {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN) => return Err(BridgeError::Timeout(self.timeout_ms)),
            Err(e) => return Err(e.into()),
        }
        let deadline = Instant::now() + Duration::from_millis(self.timeout_ms as u64);
        loop {
            if self.closing.load(Ordering::Relaxed) {
                return Err(BridgeError::Closing);
            }
            if Instant::now() >= deadline {
                return Err(BridgeError::Timeout(self.timeout_ms));
            }
            if c.socket.poll(zmq::POLLIN, CLOSING_TICK_MS)? == 0 {
                continue;
            }
            let parts = c.socket.recv_multipart(0)?;
            // [id, "", reply]: the reply to this call, or a late one to an
            // earlier call that gave up waiting, dropped.
            if let [got, empty, reply] = &parts[..] {
                if got[..] == id[..] && empty.is_empty() {
                    return Ok(reply.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A REP socket answers as the loop's serving socket does: the
    /// envelope (the id frame) goes back with the reply.
    #[test]
    fn a_reply_comes_back_and_a_late_one_is_dropped() {
        let ctx = zmq::Context::new();
        let rep = ctx.socket(zmq::ROUTER).unwrap();
        rep.bind("inproc://bridge-test").unwrap();
        let bridge = Bridge::new(ctx.clone(), "inproc://bridge-test".into(), 200);
        let server = std::thread::spawn(move || {
            // The first call gets no reply in time; its late reply arrives
            // just before the second call's.
            let first = rep.recv_multipart(0).unwrap();
            let second = rep.recv_multipart(0).unwrap();
            for (parts, body) in [(first, b"late".as_slice()), (second, b"pong".as_slice())] {
                rep.send_multipart([&parts[0][..], &parts[1][..], &parts[2][..], body], 0).unwrap();
            }
        });
        assert!(matches!(bridge.ask(b"one"), Err(BridgeError::Timeout(200))));
        assert_eq!(bridge.ask(b"two").unwrap(), b"pong");
        server.join().unwrap();
        bridge.close();
        assert!(matches!(bridge.ask(b"three"), Err(BridgeError::Closing)));
    }
}
