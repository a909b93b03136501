//! Envoy's calls, as the loop serves them: the requests the gRPC side
//! queued (`rls::bridge`), each under a token of its own, and each reply
//! out to its call, as `serving` does for ZeroMQ clients. A held ask's
//! call waits here under its token; a reply whose call has gone (it gave
//! up waiting) is counted as undelivered, and what a go among them took is
//! handed back to be given back to its limit.
//!
//! Replies leave together when the loop flushes (`take_undelivered`, at
//! the end of each batch), not one by one as they are decided, and they
//! are sent on the gRPC side's scheduler (`rls::Within`): the loop then
//! drives the gRPC side once for the batch, which writes each
//! connection's responses in one go rather than one system call per
//! response.
//!
//! Calls' tokens have the top bit set and the serving socket's never do,
//! so a token alone says where its reply goes.
//!
//! This module only moves bytes; it never decides a request.

use std::collections::HashMap;

use tracing::warn;

use super::serving::{Losses, Lost};
use crate::rls::bridge::{Inbox, RlsCall};
use crate::rls::Within;
use crate::service::Token;
use crate::wire;

/// The bit that marks a call's token.
const CALL: Token = 1 << 63;

/// Whether `token` is a call's (not a ZeroMQ request's).
#[inline]
pub fn is_call(token: Token) -> bool {
    token & CALL != 0
}

/// A reply decided, not yet sent: the call, its reply, and the request
/// when the reply is a go (to be given back if it cannot be delivered).
type DecidedReply = (RlsCall, Vec<u8>, Option<Box<[u8]>>);

/// The calls taken from the inbox and those held, by token.
pub struct Calls {
    inbox: Inbox,
    /// Where replies are sent from.
    within: Within,
    /// Taken, not yet served, in order.
    taken: Vec<RlsCall>,
    /// The call being served.
    current: Option<(Token, RlsCall)>,
    /// Held asks' calls.
    held: HashMap<Token, RlsCall>,
    /// Replies decided, not yet sent.
    outgoing: Vec<DecidedReply>,
    next: Token,
    /// Replies not delivered, and the go among them.
    losses: Losses,
}

impl Calls {
    pub fn new(inbox: Inbox, within: Within) -> Calls {
        Calls {
            inbox,
            within,
            taken: Vec::new(),
            current: None,
            held: HashMap::new(),
            outgoing: Vec::new(),
            next: 0,
            losses: Losses::default(),
        }
    }

    /// Whether calls wait to be taken.
    pub fn waiting(&self) -> bool {
        !self.taken.is_empty() || self.inbox.waiting()
    }

    /// The next call to serve, taking what waits in the inbox when none
    /// is left from the last take: its token and request. The call is the
    /// current one until the next.
    pub fn next(&mut self) -> Option<(Token, Vec<u8>)> {
        // One atomic read when nothing waits: no lock, no system call.
        if self.taken.is_empty() && self.inbox.waiting() {
            self.inbox.take(&mut self.taken);
            // Served in the order they came.
            self.taken.reverse();
        }
        let mut call = self.taken.pop()?;
        self.next = self.next.wrapping_add(1);
        let token = CALL | (self.next & !CALL);
        let request = std::mem::take(&mut call.request);
        if let Some((token, call)) = self.current.replace((token, call)) {
            // Served without a reply: cannot happen, as every request
            // gets one; counted if it did.
            warn!(token, "a call served without a reply");
            drop(call);
            self.losses.lose(b"", None);
        }
        Some((token, request))
    }

    /// Keeps the current call under `token` with its `request`: the
    /// service held it.
    pub fn hold(&mut self, token: Token, request: Vec<u8>) {
        match self.current.take() {
            Some((t, mut call)) if t == token => {
                call.request = request;
                self.held.insert(token, call);
            }
            other => self.current = other,
        }
    }

    /// Sends `body` to the call served under `token`: the current call,
    /// or a held one; `request` is at hand for the current one.
    pub fn reply(&mut self, token: Token, body: &[u8], request: Option<&[u8]>) {
        if let Some(mut call) = self.held.remove(&token) {
            let request = std::mem::take(&mut call.request);
            return self.deliver(call, body, Some(&request));
        }
        match self.current.take() {
            Some((t, call)) if t == token => self.deliver(call, body, request),
            other => {
                self.current = other;
                warn!(token, "a reply with no call to send it to");
                self.losses.lose(body, request);
            }
        }
    }

    /// Sends the replies decided since the last call; returns the replies
    /// not delivered since then, and how many were go.
    pub fn take_undelivered(&mut self) -> (u64, u64) {
        if self.outgoing.is_empty() {
            return self.losses.take_counts();
        }
        let mut outgoing = std::mem::take(&mut self.outgoing);
        let losses = &mut self.losses;
        self.within.run(|| {
            for (call, body, request) in outgoing.drain(..) {
                if !call.reply(&body) {
                    losses.lose(&body, request.as_deref());
                }
            }
        });
        // The buffer is kept for the next batch.
        self.outgoing = outgoing;
        self.losses.take_counts()
    }

    /// Go replies not delivered since the last call, with their requests.
    pub fn take_lost_go(&mut self) -> Vec<Lost> {
        self.losses.take_lost_go()
    }

    fn deliver(&mut self, call: RlsCall, body: &[u8], request: Option<&[u8]>) {
        let request = request.filter(|_| wire::grants(body)).map(Box::from);
        self.outgoing.push((call, body.to_vec(), request));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rls::bridge;

    /// Calls pushed through a bridge, each with its receiver dropped when
    /// `gone` (the caller gave up), else awaited on a thread.
    fn calls(gone: bool) -> (Calls, Option<std::thread::JoinHandle<Vec<u8>>>) {
        let (bridge, inbox) = bridge::pair(60_000);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let waiter = if gone {
            let asked = rt.block_on(async {
                // The first poll queues the call; then the wait ends at once.
                tokio::time::timeout(std::time::Duration::ZERO, bridge.ask(b"let me go".to_vec())).await
            });
            assert!(asked.is_err(), "the call gave up before any reply");
            None
        } else {
            Some(std::thread::spawn(move || rt.block_on(bridge.ask(b"let me go".to_vec())).unwrap()))
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut calls = Calls::new(inbox, crate::rls::Within::new(std::sync::Arc::new(runtime)));
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while calls.taken.is_empty() {
            assert!(std::time::Instant::now() < end, "the call never reached the inbox");
            std::thread::yield_now();
            calls.inbox.take(&mut calls.taken);
        }
        (calls, waiter)
    }

    #[test]
    fn a_held_call_gets_its_reply_under_its_token() {
        let (mut calls, waiter) = calls(false);
        let (token, request) = calls.next().unwrap();
        assert!(is_call(token));
        assert_eq!(request, b"let me go");
        calls.hold(token, request);
        assert!(calls.current.is_none());
        calls.reply(token, b"go", None);
        assert_eq!(calls.take_undelivered(), (0, 0), "sent at the flush");
        assert_eq!(waiter.unwrap().join().unwrap(), b"go");
    }

    /// A go whose caller has gone is counted, and its request kept so that
    /// what it took is given back; a sorry is only counted.
    #[test]
    fn a_go_to_a_call_that_gave_up_is_handed_back() {
        for (body, go) in [(b"go".as_slice(), true), (b"sorry".as_slice(), false)] {
            let (mut calls, _) = calls(true);
            let (token, request) = calls.next().unwrap();
            calls.reply(token, body, Some(&request));
            assert_eq!(calls.take_undelivered(), (1, u64::from(go)));
            let lost = calls.take_lost_go();
            assert_eq!(
                lost.iter().map(|(r, b)| (&r[..], &b[..])).collect::<Vec<_>>(),
                if go { vec![(&b"let me go"[..], body)] } else { vec![] }
            );
        }
    }
}
