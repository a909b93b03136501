//! Asks held for a go instead of an immediate sorry: the seed's "wait a bit
//! with your sorry and after a fraction of a second provide go".
//!
//! An ask that would get sorry, but could go within its hold (the limit's
//! `hold_ms`, or the ask's own), is parked here with the instant it may go
//! (`wake`) and the instant its hold ends (`until`); the daemon keeps the
//! caller's envelope under the same `Token` and sends nothing yet. At
//! `wake` the service decides it again: go, parked again, or sorry when the
//! hold cannot be met. Parked asks of one limit and key form a queue and
//! only its head is decided, so they are answered in arrival order.
//!
//! A held lease request (see `hold_lease`) is parked here too, alone in a
//! queue named by its semaphore and lease id, with one timer at the end of
//! its hold: it is answered when its lease is granted or dropped, which
//! the service learns from the semaphore, not from a timer.
//!
//! An ask parked behind others has a timer of its own at the end of its
//! hold (`expired`): it is answered then even if the asks before it still
//! wait, so that a short hold behind a long queue is honoured.
//!
//! Bounded: at most `max` asks, each of at most `MAX_BODY` bytes; past
//! that an ask is answered at once. This module holds bytes and instants
//! only: it never decides (the service does) and never touches a socket or
//! a clock.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::core::{LimitId, Nanos};

/// What the daemon knows a parked ask by: it keeps the caller's envelope
/// under it and sends the reply when the service hands the token back.
pub type Token = u64;

/// The most asks parked at once unless the daemon says otherwise.
pub const DEFAULT_MAX_PARKED: usize = 10_000;

/// The longest request body that is parked; a longer one is answered at once.
pub const MAX_BODY: usize = 1024;

/// A queue's name: the limit and key its asks count against.
pub type QueueKey = (LimitId, Option<Box<str>>);

/// One parked ask.
#[derive(Debug)]
pub struct Parked {
    pub token: Token,
    pub body: Box<[u8]>,
    /// When the hold ends: past it the ask gets sorry.
    pub until: Nanos,
    /// Whether the hold is only the peers' in-flight wait (see
    /// `Service::hold_for`), which is kept only for short waits.
    pub transient: bool,
    /// Whether this is a lease request waiting for its lease (see
    /// `park_lease`), rather than an ask to decide again.
    pub lease: bool,
    /// When to decide it again.
    wake: Nanos,
    /// Order of arrival, which also tells a heap entry still current.
    seq: u64,
}

/// Every parked ask, by queue, with a timer on each queue's head.
#[derive(Debug, Default)]
pub struct Parking {
    queues: HashMap<QueueKey, VecDeque<Parked>>,
    /// (wake, seq) of queue heads; an entry whose head has moved on is stale.
    heap: BinaryHeap<Reverse<(Nanos, u64, QueueKey)>>,
    /// (until, seq) of asks parked behind a head; an entry whose ask has
    /// become a head, or has been answered, is stale.
    behind: BinaryHeap<Reverse<(Nanos, u64, QueueKey)>>,
    len: usize,
    max: usize,
    next_seq: u64,
    /// Asks held since start, and those answered go after a hold.
    pub held: u64,
    pub held_go: u64,
}

impl Parking {
    /// Room for at most `max` parked asks.
    pub fn new(max: usize) -> Parking {
        Parking { max, ..Parking::default() }
    }

    /// Parked asks now.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is parked.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether one more ask of `body_len` bytes may be parked.
    pub fn has_room(&self, body_len: usize) -> bool {
        self.len < self.max && body_len <= MAX_BODY
    }

    /// Whether `others` more asks, parked elsewhere, leave room for one.
    pub fn has_room_beside(&self, others: usize) -> bool {
        self.len + others < self.max
    }

    /// Parks an ask at the back of `queue`, to be decided at `wake`.
    pub fn park(&mut self, queue: QueueKey, token: Token, body: &[u8], (wake, until): (Nanos, Nanos), transient: bool) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let parked = Parked { token, body: body.into(), until, transient, lease: false, wake, seq };
        let q = self.queues.entry(queue.clone()).or_default();
        if q.is_empty() {
            self.heap.push(Reverse((wake, seq, queue)));
        } else {
            self.behind.push(Reverse((until, seq, queue)));
        }
        q.push_back(parked);
        self.len += 1;
        self.held += 1;
    }

    /// Parks a lease request under `queue`, a queue of its own, until
    /// `until` at the latest (`due` hands it back then), or until `take`.
    pub fn park_lease(&mut self, queue: QueueKey, token: Token, body: &[u8], until: Nanos) {
        self.park(queue.clone(), token, body, (until, until), false);
        if let Some(parked) = self.queues.get_mut(&queue).and_then(VecDeque::back_mut) {
            parked.lease = true;
        }
    }

    /// Takes the head of `queue` out, whatever its timer; the next ask of
    /// the queue, if any, becomes the head, due at once.
    pub fn take(&mut self, queue: &QueueKey) -> Option<Parked> {
        let q = self.queues.get_mut(queue)?;
        let head = q.pop_front()?;
        match q.front_mut() {
            Some(next) => {
                next.wake = head.wake.min(next.wake);
                self.heap.push(Reverse((next.wake, next.seq, queue.clone())));
            }
            None => {
                self.queues.remove(queue);
            }
        }
        self.len -= 1;
        if self.len == 0 {
            self.heap.clear();
            self.behind.clear();
        }
        Some(head)
    }

    /// Puts a head taken by `due` back at the front of its queue, to be
    /// decided again at `wake`.
    pub fn repark(&mut self, queue: QueueKey, mut parked: Parked, wake: Nanos) {
        parked.wake = wake;
        self.heap.push(Reverse((wake, parked.seq, queue.clone())));
        self.queues.entry(queue).or_default().push_front(parked);
        self.len += 1;
    }

    /// When the earliest head is due, or the earliest hold of an ask
    /// behind one ends, if anything is parked (or a moment that has
    /// passed, for an entry `due` or `expired` will find stale).
    pub fn next_wake(&self) -> Option<Nanos> {
        if self.len == 0 {
            return None;
        }
        let head = self.heap.peek().map(|Reverse((wake, _, _))| *wake);
        let behind = self.behind.peek().map(|Reverse((until, _, _))| *until);
        [head, behind].into_iter().flatten().min()
    }

    /// When the head of `queue` is next decided, if asks of it are parked:
    /// no ask behind it is decided before then.
    pub fn head_wake(&self, queue: &QueueKey) -> Option<Nanos> {
        self.queues.get(queue).and_then(VecDeque::front).map(|head| head.wake)
    }

    /// Takes out an ask parked behind a head whose hold has ended at `now`,
    /// if any: the caller answers it (its hold is its own, whatever the
    /// asks before it still wait for).
    pub fn expired(&mut self, now: Nanos) -> Option<(QueueKey, Parked)> {
        while let Some(Reverse((until, _, _))) = self.behind.peek() {
            if *until > now {
                return None;
            }
            let Reverse((_, seq, queue)) = self.behind.pop()?;
            let Some(q) = self.queues.get_mut(&queue) else { continue };
            // A queue is in arrival order (a reparked head keeps the
            // smallest seq at the front), so its asks are found by seq.
            let Ok(at) = q.binary_search_by_key(&seq, |p| p.seq) else { continue };
            if at == 0 {
                continue; // now a head: `due` decides it
            }
            let parked = q.remove(at)?;
            self.len -= 1;
            return Some((queue, parked));
        }
        None
    }

    /// Takes the head that is due at `now`, if any, out of its queue: the
    /// caller decides it, then answers it or `repark`s it. The next ask
    /// of its queue becomes the head, due at once.
    pub fn due(&mut self, now: Nanos) -> Option<(QueueKey, Parked)> {
        self.drop_stale();
        let Reverse((wake, _, _)) = self.heap.peek()?;
        if *wake > now {
            return None;
        }
        let Reverse((_, _, queue)) = self.heap.pop()?;
        let q = self.queues.get_mut(&queue)?;
        let head = q.pop_front()?;
        match q.front_mut() {
            Some(next) => {
                next.wake = now;
                self.heap.push(Reverse((now, next.seq, queue.clone())));
            }
            None => {
                self.queues.remove(&queue);
            }
        }
        self.len -= 1;
        if self.len == 0 {
            self.behind.clear();
        }
        Some((queue, head))
    }

    /// Takes every parked ask, in arrival order, for the last answers at
    /// shutdown.
    pub fn take_all(&mut self) -> Vec<(QueueKey, Parked)> {
        let mut all: Vec<_> =
            self.queues.drain().flat_map(|(queue, q)| q.into_iter().map(move |p| (queue.clone(), p))).collect();
        all.sort_by_key(|(_, p)| p.seq);
        self.heap.clear();
        self.behind.clear();
        self.len = 0;
        all
    }

    /// Drops heap entries whose queue head is no longer the one they name.
    fn drop_stale(&mut self) {
        while let Some(Reverse((wake, seq, queue))) = self.heap.peek() {
            let head = self.queues.get(queue).and_then(VecDeque::front);
            if head.is_some_and(|h| h.seq == *seq && h.wake == *wake) {
                return;
            }
            self.heap.pop();
        }
    }
}

/// An ask's own `hold_ms`, at most a limit's longest hold.
pub fn asked_hold(ms: u64) -> Nanos {
    ms.min(crate::core::limit::MAX_HOLD_MS as u64).saturating_mul(crate::core::time::NANOS_PER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(key: &str) -> QueueKey {
        let limit =
            crate::core::Limit::new(crate::core::DEFAULT_LIMIT, crate::core::Quota::new(1, 1.0).unwrap()).unwrap();
        (crate::core::Locker::new(limit, vec![], 10).find(None).unwrap(), Some(key.into()))
    }

    /// A parking with room for 10 holding `asks`, each `(queue's key,
    /// token, (wake, until))`, parked in that order.
    fn parked(asks: &[(&str, Token, (Nanos, Nanos))]) -> Parking {
        let mut p = Parking::new(10);
        for &(key, token, times) in asks {
            p.park(q(key), token, b"x", times, false);
        }
        p
    }

    #[test]
    fn heads_come_due_in_wake_order_and_each_queue_in_arrival_order() {
        let mut p = parked(&[("a", 1, (50, 100)), ("a", 2, (10, 100)), ("b", 3, (20, 100))]);
        assert_eq!(p.next_wake(), Some(20), "only heads have timers: a's head wakes at 50");
        assert!(p.due(19).is_none());
        let (queue, b) = p.due(20).unwrap();
        assert_eq!((queue, b.token), (q("b"), 3));
        let (_, a1) = p.due(50).unwrap();
        assert_eq!(a1.token, 1);
        let (_, a2) = p.due(50).unwrap();
        assert_eq!(a2.token, 2, "the next of a queue is due at once");
        assert!(p.is_empty() && p.due(1_000).is_none());
    }

    #[test]
    fn a_reparked_head_keeps_its_place_before_later_arrivals() {
        let mut p = parked(&[("a", 1, (10, 100)), ("a", 2, (10, 100))]);
        let (queue, head) = p.due(10).unwrap();
        p.repark(queue, head, 30);
        assert_eq!(p.len(), 2);
        assert!(p.due(29).is_none(), "the second is no longer the head");
        assert_eq!(p.next_wake(), Some(30));
        assert_eq!(p.due(30).unwrap().1.token, 1);
        assert_eq!(p.due(30).unwrap().1.token, 2);
    }

    #[test]
    fn an_ask_behind_a_head_is_taken_out_when_its_own_hold_ends() {
        let mut p = parked(&[("a", 1, (800, 1_000)), ("a", 2, (0, 50)), ("a", 3, (0, 900))]);
        assert_eq!(p.head_wake(&q("a")), Some(800));
        assert_eq!(p.next_wake(), Some(50), "the second ask's hold ends before the head's wake");
        assert!(p.expired(49).is_none());
        let (_, short) = p.expired(50).unwrap();
        assert_eq!((short.token, p.len()), (2, 2));
        assert_eq!(p.due(800).unwrap().1.token, 1, "the head keeps its place");
        assert!(p.expired(950).is_none(), "the third is a head now: due decides it");
        assert_eq!(p.due(950).unwrap().1.token, 3);
        assert!(p.is_empty() && p.next_wake().is_none());
    }

    #[test]
    fn room_is_bounded_by_count_and_body_size() {
        let mut p = Parking::new(1);
        assert!(p.has_room(MAX_BODY) && !p.has_room(MAX_BODY + 1));
        p.park(q("a"), 1, b"x", (10, 100), false);
        assert!(!p.has_room(1));
        let all = p.take_all();
        assert_eq!(all.len(), 1);
        assert!(p.is_empty() && p.next_wake().is_none());
    }
}
