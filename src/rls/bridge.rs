//! The way from a gRPC call to the locker's loop, and back: a queue the
//! loop drains, a wake-up it polls beside its sockets, and a oneshot per
//! call for the reply. No thread sits between the gRPC side and the loop
//! and no call holds one while it waits: a call pushes its request (a
//! batch of asks, exactly the bytes a ZeroMQ client's would be) and awaits
//! its reply on the gRPC side's own thread.
//!
//! The wake-up is one byte on a datagram socket pair, sent only when the
//! loop has said it is about to wait (`Inbox::sleep`): calls that arrive
//! while it works join the batch it takes next and cost no system call
//! at all. Neither side can miss the other: the loop says it sleeps and
//! then looks at the queue, a call joins the queue and then looks whether
//! the loop sleeps (both sequentially consistent), so at least one of the
//! two sees the other, and a call is never left waiting for a turn that
//! has no reason to come.
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
#[derive(Default)]
struct Handoff {
    queue: Mutex<Vec<RlsCall>>,
    /// The queue's length, written under its lock: the loop reads it
    /// without taking the lock.
    waiting: AtomicUsize,
    /// The loop is in (or about to enter) its wait on the sockets: a call
    /// must wake it.
    asleep: AtomicBool,
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
    let shared = Arc::new(Handoff::default());
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
        {
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
            self.shared.waiting.store(queue.len(), Ordering::SeqCst);
        }
        if self.shared.asleep.swap(false, Ordering::SeqCst) {
            match self.wake.send(&[1]) {
                Ok(_) => {}
                // A full socket buffer means wake-ups are already waiting
                // to be read: the loop is woken either way.
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => {
                    // The loop's end is gone: no call would ever be
                    // answered, so every waiting call ends now rather
                    // than at its timeout.
                    tracing::error!(error = %e, "the loop's wake-up failed; refusing Envoy's calls");
                    self.close();
                    return Err(BridgeError::Closing);
                }
            }
        }
        Ok(())
    }

    /// Ends every call waiting now or later: the locker is stopping. The
    /// calls in the queue are dropped, so their callers learn it at once.
    pub fn close(&self) {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.closing.store(true, Ordering::Relaxed);
        queue.clear();
        self.shared.waiting.store(0, Ordering::SeqCst);
    }
}

impl Inbox {
    /// The descriptor to poll for readability: readable when a call woke
    /// the loop.
    pub fn fd(&self) -> RawFd {
        self.woken.as_raw_fd()
    }

    /// Says the loop is about to wait on its sockets, so that the next
    /// call wakes it; returns false, and the loop must not wait, when
    /// calls are waiting already.
    pub fn sleep(&self) -> bool {
        self.shared.asleep.store(true, Ordering::SeqCst);
        if self.waiting() {
            self.shared.asleep.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Says the loop has woken: calls join the queue without waking it
    /// until it sleeps again. `readable`: the poll found wake-ups, which
    /// are read here.
    pub fn awake(&self, readable: bool) {
        self.shared.asleep.store(false, Ordering::SeqCst);
        if !readable {
            return;
        }
        let mut bytes = [0u8; 64];
        loop {
            match self.woken.recv(&mut bytes) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// Whether calls wait in the queue.
    #[inline]
    pub fn waiting(&self) -> bool {
        self.shared.waiting.load(Ordering::SeqCst) > 0
    }

    /// Moves every waiting call into `into`, in the order they came. Never
    /// blocks.
    pub fn take(&self, into: &mut Vec<RlsCall>) {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        if into.is_empty() {
            std::mem::swap(&mut *queue, into);
        } else {
            into.append(&mut queue);
        }
        self.shared.waiting.store(0, Ordering::SeqCst);
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

    /// The loop's side on a thread: it sleeps, a call wakes it, and each
    /// call's request comes back reversed; calls while it is awake wake
    /// nothing.
    #[test]
    fn a_call_wakes_a_sleeping_loop_and_gets_its_reply() {
        let (bridge, inbox) = pair(2_000).unwrap();
        assert!(inbox.sleep(), "nothing waits yet");
        assert!(!readable(inbox.fd()));
        let answerer = std::thread::spawn(move || {
            let mut calls = Vec::new();
            while calls.len() < 2 {
                if inbox.sleep() {
                    let mut items = [zmq::PollItem::from_fd(inbox.fd(), zmq::POLLIN)];
                    zmq::poll(&mut items, 1_000).unwrap();
                    inbox.awake(items[0].is_readable());
                } else {
                    inbox.awake(false);
                }
                inbox.take(&mut calls);
            }
            // A wake-up may be left behind (a call that saw the loop say
            // it sleeps just before it took that back): the next poll
            // reads it, and finds nothing to serve.
            assert!(!inbox.waiting());
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

    /// A loop awake is not woken by calls; one that says it sleeps while
    /// calls wait is told not to.
    #[test]
    fn only_a_sleeping_loop_is_woken() {
        let (bridge, inbox) = pair(60_000).unwrap();
        let (reply, _) = oneshot::channel();
        bridge.push(RlsCall { request: Vec::new(), reply }).unwrap();
        assert!(!readable(inbox.fd()), "the loop never said it sleeps: no wake-up");
        assert!(inbox.waiting());
        assert!(!inbox.sleep(), "a call waits: the loop must not wait");
        let (reply, _) = oneshot::channel();
        bridge.push(RlsCall { request: Vec::new(), reply }).unwrap();
        assert!(!readable(inbox.fd()), "the loop took back its sleep");
        let mut calls = Vec::new();
        inbox.take(&mut calls);
        assert_eq!(calls.len(), 2);
        assert!(inbox.sleep());
        let (reply, _) = oneshot::channel();
        bridge.push(RlsCall { request: Vec::new(), reply }).unwrap();
        assert!(readable(inbox.fd()), "a sleeping loop is woken");
        inbox.awake(true);
        assert!(!readable(inbox.fd()), "the wake-up was read");
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

    /// A loop whose end of the wake-up is gone answers nothing: the calls
    /// end at once, not at their timeout.
    #[test]
    fn a_wake_up_that_fails_ends_the_calls() {
        let (bridge, inbox) = pair(60_000).unwrap();
        assert!(inbox.sleep());
        drop(inbox);
        let asked = runtime().block_on(bridge.ask(b"one".to_vec()));
        assert!(matches!(asked, Err(BridgeError::Closing)), "{asked:?}");
        assert!(matches!(runtime().block_on(bridge.ask(b"two".to_vec())), Err(BridgeError::Closing)));
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
