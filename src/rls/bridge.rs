//! The way from a gRPC call to the locker's loop, and back: a queue the
//! loop drains and a oneshot per call for the reply. The gRPC side runs on
//! the loop's own thread, driven by the loop between its turns
//! (`rls::Running::drive`), so a call that joins the queue needs no
//! wake-up: the loop looks at the queue after every drive, and a reply
//! sent on a oneshot readies its call's task for the next drive. No
//! thread sits between the two sides and no call holds one while it waits.
//!
//! The loop answers each call through its sender (`RlsCall::reply`); the
//! daemon keeps the senders of held asks as it keeps the envelopes of
//! ZeroMQ clients, and hands back what a go took when its caller has gone
//! (a call that gave up waiting drops its receiver). Peering, the store,
//! the state file, held asks and metrics therefore apply to these asks
//! unchanged, and the loop never waits on gRPC.
//!
//! This module only moves bytes; it decides nothing and reads no config.

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
    closing: AtomicBool,
}

/// The gRPC side's end: sends requests to the loop and awaits replies.
#[derive(Clone)]
pub struct Bridge {
    shared: Arc<Handoff>,
    timeout: Duration,
}

/// The loop's end: the queue to take.
pub struct Inbox {
    shared: Arc<Handoff>,
}

/// A bridge and its inbox; each call waits up to `timeout_ms` for its reply.
pub fn pair(timeout_ms: u64) -> (Bridge, Inbox) {
    let shared = Arc::new(Handoff::default());
    let bridge = Bridge { shared: shared.clone(), timeout: Duration::from_millis(timeout_ms) };
    (bridge, Inbox { shared })
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
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        // Checked under the lock, so no call is queued after `close` has
        // emptied the queue.
        if self.shared.closing.load(Ordering::Relaxed) {
            return Err(BridgeError::Closing);
        }
        if queue.len() >= MAX_WAITING {
            return Err(BridgeError::Full);
        }
        queue.push(call);
        self.shared.waiting.store(queue.len(), Ordering::SeqCst);
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

    /// Calls wait in the queue until the loop takes them, in the order
    /// they came; each reply readies its call, which the runtime's next
    /// drive completes: the loop's turns and the calls' share one thread.
    #[test]
    fn calls_wait_for_the_loop_and_get_their_replies_on_the_same_thread() {
        let (bridge, inbox) = pair(2_000);
        let rt = runtime();
        let asked = rt.spawn({
            let bridge = bridge.clone();
            async move { tokio::join!(bridge.ask(b"ab".to_vec()), bridge.ask(b"cd".to_vec())) }
        });
        assert!(!inbox.waiting(), "nothing runs until the runtime is driven");
        rt.block_on(tokio::task::yield_now());
        assert!(inbox.waiting());
        let mut calls = Vec::new();
        inbox.take(&mut calls);
        assert!(!inbox.waiting());
        assert_eq!(calls.iter().map(|c| &c.request[..]).collect::<Vec<_>>(), [b"ab", b"cd"]);
        for call in calls {
            let mut body = call.request.clone();
            body.reverse();
            assert!(call.reply(&body));
        }
        assert!(!asked.is_finished(), "replied, but not driven yet");
        rt.block_on(tokio::task::yield_now());
        assert!(asked.is_finished(), "one drive delivers the replies");
        let (one, two) = rt.block_on(asked).unwrap();
        assert_eq!((one.unwrap(), two.unwrap()), (b"ba".to_vec(), b"dc".to_vec()));
    }

    /// A call nobody answers times out, and its late reply finds no caller;
    /// after `close` no call is queued.
    #[test]
    fn a_late_reply_is_undelivered_and_a_closed_bridge_refuses() {
        let (bridge, inbox) = pair(50);
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
        let (bridge, _inbox) = pair(60_000);
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
        let (bridge, inbox) = pair(60_000);
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
