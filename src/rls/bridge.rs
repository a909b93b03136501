//! The way from a gRPC call to the locker's loop, and back: a queue the
//! loop drains, a wake-up it polls beside its sockets, and a oneshot per
//! call for the reply. No thread sits between the gRPC side and the loop
//! and no call holds one while it waits: a call pushes its request (a
//! batch of asks, exactly the bytes a ZeroMQ client's would be) and awaits
//! its reply on the gRPC side's own thread.
//!
//! The wake-up is one byte on a datagram socket pair, sent only when a
//! call finds the queue empty: calls that arrive while the loop is busy
//! join the batch it takes next, and cost no system call at all. The loop
//! reads the wake-ups before it takes the queue, so a call pushed after
//! the take always leaves a byte behind it and is never left waiting.
//!
//! The loop answers each call through its sender (`RlsCall::reply`); the
//! daemon keeps the senders of held asks as it keeps the envelopes of
//! ZeroMQ clients, and hands back what a go took when its caller has gone
//! (a call that gave up waiting drops its receiver). Peering, the store,
//! the state file, held asks and metrics therefore apply to these asks
//! unchanged, and the loop never waits on gRPC.
//!
//! This module only moves bytes; it decides nothing and reads no config.

use std::io::ErrorKind;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

/// How many calls may wait for the loop at once: past it a call is refused
/// at once rather than queued without bound.
pub const MAX_WAITING: usize = 10_000;

/// Why a request did not get its reply.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("the locker did not answer within {0} ms")]
    Timeout(u64),
    #[error("the locker has {MAX_WAITING} calls waiting already")]
    Full,
    #[error("the locker is stopping")]
    Closing,
}

/// One call on its way to the loop: the request's bytes and where its
/// reply goes.
pub struct RlsCall {
    pub request: Vec<u8>,
    reply: oneshot::Sender<Vec<u8>>,
}

impl RlsCall {
    /// Sends `body` to the caller; false when it has gone (it gave up
    /// waiting, or the gRPC side stopped), so that the reply is counted as
    /// undelivered.
    pub fn reply(self, body: &[u8]) -> bool {
        self.reply.send(body.to_vec()).is_ok()
    }
}

/// What both sides share.
struct Handoff {
    queue: Mutex<Vec<RlsCall>>,
    closing: AtomicBool,
}

/// The gRPC side's end: sends requests to the loop and awaits replies.
#[derive(Clone)]
pub struct Bridge {
    shared: Arc<Handoff>,
    wake: Arc<UnixDatagram>,
    timeout: Duration,
}

/// The loop's end: the wake-up to poll and the queue to take.
pub struct Inbox {
    shared: Arc<Handoff>,
    woken: UnixDatagram,
}

/// A bridge and its inbox; each call waits up to `timeout_ms` for its reply.
pub fn pair(timeout_ms: u64) -> std::io::Result<(Bridge, Inbox)> {
    let (wake, woken) = UnixDatagram::pair()?;
    wake.set_nonblocking(true)?;
    woken.set_nonblocking(true)?;
    let shared = Arc::new(Handoff { queue: Mutex::new(Vec::new()), closing: AtomicBool::new(false) });
    let bridge = Bridge { shared: shared.clone(), wake: Arc::new(wake), timeout: Duration::from_millis(timeout_ms) };
    Ok((bridge, Inbox { shared, woken }))
}

impl Bridge {
    /// Sends `request` to the loop and waits for its reply. Call it from
    /// within the tokio runtime (the wait is a timer).
    pub async fn ask(&self, request: Vec<u8>) -> Result<Vec<u8>, BridgeError> {
        let (reply, replied) = oneshot::channel();
        self.push(RlsCall { request, reply })?;
        match tokio::time::timeout(self.timeout, replied).await {
            Ok(Ok(body)) => Ok(body),
            // The sender was dropped unanswered: the loop stopped.
            Ok(Err(_)) => Err(BridgeError::Closing),
            Err(_) => Err(BridgeError::Timeout(self.timeout.as_millis() as u64)),
        }
    }

    fn push(&self, call: RlsCall) -> Result<(), BridgeError> {
        let was_empty = {
            let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock, so no call is queued after `close`
            // has emptied the queue.
            if self.shared.closing.load(Ordering::Relaxed) {
                return Err(BridgeError::Closing);
            }
            if queue.len() >= MAX_WAITING {
                return Err(BridgeError::Full);
            }
            queue.push(call);
            queue.len() == 1
        };
        if was_empty {
            // A full socket buffer means wake-ups are already waiting to be
            // read: the loop is woken either way.
            let _ = self.wake.send(&[1]);
        }
        Ok(())
    }

    /// Ends every call waiting now or later: the locker is stopping. The
    /// calls in the queue are dropped, so their callers learn it at once.
    pub fn close(&self) {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.closing.store(true, Ordering::Relaxed);
        queue.clear();
    }
}

impl Inbox {
    /// The descriptor to poll for readability: readable when calls may
    /// be waiting.
    pub fn fd(&self) -> RawFd {
        self.woken.as_raw_fd()
    }

    /// Moves every waiting call into `into`, in the order they came. Never
    /// blocks.
    pub fn take(&self, into: &mut Vec<RlsCall>) {
        // The wake-ups first: a call pushed after the swap below sends a
        // new one, which stays to wake the next poll.
        let mut bytes = [0u8; 64];
        loop {
            match self.woken.recv(&mut bytes) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        if into.is_empty() {
            std::mem::swap(&mut *queue, into);
        } else {
            into.append(&mut queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    fn readable(fd: RawFd) -> bool {
        let mut items = [zmq::PollItem::from_fd(fd, zmq::POLLIN)];
        zmq::poll(&mut items, 0).unwrap() > 0
    }

    /// The loop's side on a thread: each call's request comes back
    /// reversed; a second call while the first waits wakes nothing more.
    #[test]
    fn a_call_wakes_the_loop_once_and_gets_its_reply() {
        let (bridge, inbox) = pair(2_000).unwrap();
        assert!(!readable(inbox.fd()));
        let answerer = std::thread::spawn(move || {
            let mut calls = Vec::new();
            while calls.len() < 2 {
                let mut items = [zmq::PollItem::from_fd(inbox.fd(), zmq::POLLIN)];
                zmq::poll(&mut items, 1_000).unwrap();
                inbox.take(&mut calls);
            }
            assert!(!readable(inbox.fd()), "a wake-up left behind with the queue empty");
            for call in calls {
                let mut body = call.request.clone();
                body.reverse();
                assert!(call.reply(&body));
            }
        });
        let (one, two) =
            runtime().block_on(async { tokio::join!(bridge.ask(b"ab".to_vec()), bridge.ask(b"cd".to_vec())) });
        answerer.join().unwrap();
        assert_eq!((one.unwrap(), two.unwrap()), (b"ba".to_vec(), b"dc".to_vec()));
    }

    /// A call nobody answers times out, and its late reply finds no caller;
    /// after `close` no call is queued.
    #[test]
    fn a_late_reply_is_undelivered_and_a_closed_bridge_refuses() {
        let (bridge, inbox) = pair(50).unwrap();
        let rt = runtime();
        assert!(matches!(rt.block_on(bridge.ask(b"one".to_vec())), Err(BridgeError::Timeout(50))));
        let mut calls = Vec::new();
        inbox.take(&mut calls);
        assert_eq!(calls.len(), 1);
        assert!(!calls.pop().unwrap().reply(b"late"), "a reply to a call that gave up counts as undelivered");
        bridge.close();
        assert!(matches!(rt.block_on(bridge.ask(b"two".to_vec())), Err(BridgeError::Closing)));
        inbox.take(&mut calls);
        assert!(calls.is_empty());
    }

    /// Calls the loop never takes end when the bridge closes, not at
    /// their timeout.
    #[test]
    fn closing_ends_the_calls_in_the_queue() {
        let (bridge, _inbox) = pair(60_000).unwrap();
        let rt = runtime();
        let closer = bridge.clone();
        let asked = rt.block_on(async {
            let ask = bridge.ask(b"one".to_vec());
            let close = async {
                tokio::task::yield_now().await;
                closer.close();
            };
            tokio::join!(ask, close).0
        });
        assert!(matches!(asked, Err(BridgeError::Closing)));
    }

    /// Past `MAX_WAITING` a call is refused at once.
    #[test]
    fn a_full_queue_refuses_at_once() {
        let (bridge, inbox) = pair(60_000).unwrap();
        for _ in 0..MAX_WAITING {
            let (reply, _) = oneshot::channel();
            bridge.push(RlsCall { request: Vec::new(), reply }).unwrap();
        }
        let (reply, _) = oneshot::channel();
        assert!(matches!(bridge.push(RlsCall { request: Vec::new(), reply }), Err(BridgeError::Full)));
        let mut calls = Vec::new();
        inbox.take(&mut calls);
        assert_eq!(calls.len(), MAX_WAITING);
    }
}
