//! Leases that wait (issue 41): an acquire with `hold_ms` that must queue is
//! held and answered the instant its count frees, or not held when its
//! wait ends. On the loop step with literal instants: granted in the step
//! of the release, first come first served, bounded by --max-parked,
//! counted, a raised capacity at a reload, a hold shorter than the wait,
//! and polling clients unchanged; on the simulated clock, a waiter granted
//! at the exact nanosecond of the holder's expiry; on a locker served in
//! this process, the client's `lease` waiting on the held reply; on a real
//! process, SIGTERM answering every waiting acquire.

use std::time::{Duration, Instant};

use locker::core::{Algorithm, Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::{step, Answer, Io, Service, Token};
use locker::sim::Group;
use locker::wire::{self, Heartbeat, LeaseAsk, LeaseReply, Release};
use locker::Client;

use crate::support::{Daemon, Served, TempFile, DEADLINE};

const MS: Nanos = 1_000_000;
const T0: Nanos = 1_000_000 * MS;

/// A locker with semaphore `db` of `capacity`.
fn locker(capacity: u32) -> Locker {
    let db = Limit::with_algorithm("db", Quota::new(capacity, 30.0).unwrap(), Algorithm::Semaphore).unwrap();
    Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), vec![db], 1000)
}

fn body(map: &wire::RequestMap) -> Vec<u8> {
    let mut b = Vec::new();
    wire::encode(map, &mut b);
    b
}

/// An acquire of 1 of `db` living `ttl_ms`, waiting and held up to `wait_ms`.
fn waiting(ttl_ms: u64, wait_ms: u64) -> Vec<u8> {
    body(&LeaseAsk::new("db", 1).ttl_ms(ttl_ms).max_wait_ms(wait_ms).hold_ms(wait_ms).to_map())
}

fn lease(reply: &[u8]) -> LeaseReply {
    rmp_serde::from_slice(reply).unwrap_or_else(|e| panic!("not a lease reply ({e}): {reply:?}"))
}

/// The replies loop steps sent, in order.
#[derive(Default)]
struct Sent(Vec<(Token, LeaseReply)>);

impl Io for Sent {
    fn reply(&mut self, token: Token, body: &[u8]) {
        self.0.push((token, lease(body)));
    }
}

/// Drives a service through the loop step, as the daemon does.
struct Loop {
    service: Service,
    sent: Sent,
    next: Token,
}

impl Loop {
    fn new(service: Service) -> Loop {
        Loop { service, sent: Sent::default(), next: 0 }
    }

    /// Serves `body` at `now`; its token, and whether it was held.
    fn send(&mut self, now: Nanos, body: &[u8]) -> (Token, Answer) {
        self.next += 1;
        let answer = step::request(&mut self.service, now, self.next, body, &mut (), &mut self.sent, &mut Vec::new());
        (self.next, answer)
    }

    /// A loop turn at `now` with nothing read.
    fn turn(&mut self, now: Nanos) {
        step::turn(&mut self.service, now, &mut (), &mut self.sent, &mut Vec::new());
    }

    /// The reply sent for `token`, if any has been.
    fn reply(&self, token: Token) -> Option<&LeaseReply> {
        self.sent.0.iter().find(|(t, _)| *t == token).map(|(_, r)| r)
    }

    fn release(&mut self, now: Nanos, id: &str) -> Token {
        self.send(now, &body(&Release { limit: Some("db"), lease: id }.to_map())).0
    }
}

#[test]
fn a_held_acquire_is_granted_in_the_step_of_the_release_and_waiters_are_served_in_arrival_order() {
    let mut l = Loop::new(Service::new(locker(1)));
    let (first, answer) = l.send(T0, &waiting(10_000, 5_000));
    assert_eq!(answer, Answer::Now, "free: held at once");
    let holder = l.reply(first).unwrap().lease.clone().unwrap();
    let waiters: Vec<Token> = (1..=3)
        .map(|i| l.send(T0 + i * MS, &waiting(10_000, 5_000)))
        .map(|(t, a)| {
            assert_eq!(a, Answer::Held);
            t
        })
        .collect();
    assert_eq!(l.service.status().parked, 3);
    assert!(waiters.iter().all(|&t| l.reply(t).is_none()), "nobody is answered pending");
    let mut holder = holder;
    for (i, &waiter) in waiters.iter().enumerate() {
        let release = l.release(T0 + (10 + i as u64) * MS, &holder);
        let at = l.sent.0.iter().position(|(t, _)| *t == release).unwrap();
        let granted = &l.sent.0[at + 1];
        assert_eq!(granted.0, waiter, "the next waiter in arrival order, right after the release's reply");
        let r = &granted.1;
        assert!(r.ok && !r.pending, "{r:?}");
        assert_eq!(r.expires_in_ms, 10_000, "its ttl runs from the grant");
        assert_eq!(r.waited_ms, Some(10 + i as u64 - (i as u64 + 1)), "held from its arrival to the release");
        holder = r.lease.clone().unwrap();
    }
    let status = l.service.status();
    assert_eq!((status.parked, status.held, status.held_go), (0, 3, 3), "counted as held asks");
}

#[test]
fn a_waiter_whose_wait_ends_is_answered_not_held_at_that_instant() {
    let mut l = Loop::new(Service::new(locker(1)));
    let _ = l.send(T0, &waiting(10_000, 100));
    let (waiter, _) = l.send(T0, &waiting(10_000, 100));
    assert_eq!(crate::support::deadline(&l.service), Some(T0 + 100 * MS), "the wait's end wakes the loop");
    l.turn(T0 + 100 * MS - 1);
    assert!(l.reply(waiter).is_none());
    l.turn(T0 + 100 * MS);
    let r = l.reply(waiter).expect("answered when the wait ends");
    assert!(!r.ok && !r.pending && r.lease.is_none(), "{r:?}");
    assert_eq!(r.waited_ms, Some(100));
    assert_eq!(l.service.status().parked, 0);
}

#[test]
fn max_parked_bounds_held_acquires_and_the_one_past_it_is_answered_pending_and_may_poll() {
    let mut l = Loop::new(Service::new(locker(1)).with_max_parked(2));
    let (first, _) = l.send(T0, &waiting(10_000, 5_000));
    let holder = l.reply(first).unwrap().lease.clone().unwrap();
    assert_eq!(l.send(T0, &waiting(10_000, 5_000)).1, Answer::Held);
    assert_eq!(l.send(T0, &waiting(10_000, 5_000)).1, Answer::Held);
    let (third, answer) = l.send(T0, &waiting(10_000, 5_000));
    assert_eq!(answer, Answer::Now, "no room: answered at once");
    let pending = l.reply(third).unwrap().clone();
    assert!(pending.pending && pending.waited_ms.is_none(), "pending as before: {pending:?}");
    assert_eq!(l.service.status().parked, 2);
    // The polling client of today: a heartbeat without hold_ms.
    let id = pending.lease.unwrap();
    let poll = body(&Heartbeat::new(Some("db"), &id).to_map());
    let (t, answer) = l.send(T0 + MS, &poll);
    assert!(answer == Answer::Now && l.reply(t).unwrap().pending);
    l.release(T0 + 2 * MS, &holder);
    let (t, _) = l.send(T0 + 3 * MS, &poll);
    assert!(l.reply(t).unwrap().pending, "the held waiters came first");
}

#[test]
fn a_hold_shorter_than_the_wait_answers_pending_and_a_held_heartbeat_waits_on() {
    let mut l = Loop::new(Service::new(locker(1)));
    let (first, _) = l.send(T0, &waiting(10_000, 5_000));
    let holder = l.reply(first).unwrap().lease.clone().unwrap();
    let short = body(&LeaseAsk::new("db", 1).max_wait_ms(5_000).hold_ms(200).to_map());
    let (waiter, _) = l.send(T0, &short);
    assert_eq!(crate::support::deadline(&l.service), Some(T0 + 200 * MS));
    l.turn(T0 + 200 * MS);
    let r = l.reply(waiter).expect("answered when its hold ends").clone();
    assert!(r.pending && r.waited_ms == Some(200) && r.expires_in_ms == 4_800, "{r:?}");
    let id = r.lease.unwrap();
    let beat = Heartbeat { hold_ms: Some(1_000), ..Heartbeat::new(Some("db"), &id) };
    let (t, answer) = l.send(T0 + 201 * MS, &body(&beat.to_map()));
    assert_eq!(answer, Answer::Held, "the heartbeat of a queued lease is held too");
    l.release(T0 + 300 * MS, &holder);
    let r = l.reply(t).expect("granted at the release");
    assert!(r.ok && r.lease.as_deref() == Some(id.as_str()) && r.waited_ms == Some(99), "{r:?}");
}

#[test]
fn a_reload_that_raises_the_capacity_grants_held_waiters_at_the_next_turn() {
    let mut l = Loop::new(Service::new(locker(1)));
    let _ = l.send(T0, &waiting(10_000, 5_000));
    let (a, _) = l.send(T0, &waiting(10_000, 5_000));
    let (b, _) = l.send(T0, &waiting(10_000, 5_000));
    let raised = Limit::with_algorithm("db", Quota::new(2, 30.0).unwrap(), Algorithm::Semaphore).unwrap();
    let limits = (Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), vec![raised], 1000);
    let _ = step::reload(&mut l.service, T0, limits, &mut ());
    assert!(crate::support::deadline(&l.service).is_some_and(|d| d <= T0 + MS), "the loop turns at once");
    l.turn(T0 + MS);
    assert!(l.reply(a).is_some_and(|r| r.ok), "the raised count goes to the first waiter");
    assert!(l.reply(b).is_none(), "and only to it");
    let removed = Limit::new("other", Quota::new(1, 1.0).unwrap()).unwrap();
    let limits = (Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), vec![removed], 1000);
    let _ = step::reload(&mut l.service, T0 + MS, limits, &mut ());
    l.turn(T0 + 2 * MS);
    let r = l.reply(b).expect("its semaphore is gone: answered");
    assert!(!r.ok && !r.pending, "{r:?}");
}

#[test]
fn at_a_stop_every_held_acquire_is_answered_not_held_and_its_place_given_up() {
    let mut l = Loop::new(Service::new(locker(1)));
    let _ = l.send(T0, &waiting(10_000, 5_000));
    let tokens: Vec<Token> = (0..3).map(|_| l.send(T0, &waiting(10_000, 5_000)).0).collect();
    let answered = step::stop(&mut l.service, T0 + MS, &mut (), &mut l.sent, &mut Vec::new());
    assert_eq!(answered, 3);
    for t in tokens {
        let r = l.reply(t).unwrap();
        assert!(!r.ok && !r.pending && r.lease.is_none(), "{r:?}");
    }
    let db = l.service.locker().figures().holdings().find(|(limit, _)| limit.name() == "db").unwrap().1;
    let (held, waiting) = (db.leases_held, db.leases_waiting);
    assert_eq!((held, waiting), (1, 0), "no place is left in the queue");
}

/// On the simulated clock, through the loop step: the waiter is answered
/// at the very nanosecond the holder's lease expires, not a tick later.
#[test]
fn on_the_simulated_clock_a_waiter_gets_an_expired_lease_at_the_exact_instant_of_its_expiry() {
    let mut g = Group::new(1, T0, 7, Box::new(|_| Service::new(locker(1))));
    let holder = g.send(0, &body(&LeaseAsk::new("db", 1).ttl_ms(250).to_map()));
    assert!(lease(&g.reply(holder).unwrap()).ok);
    let expiry = g.now() + 250 * MS;
    g.advance(3 * MS);
    let waiter = g.send(0, &waiting(1_000, 1_000));
    g.advance_to(expiry - 1);
    assert_eq!(g.reply(waiter), None, "held while the lease lives");
    g.advance_to(expiry);
    let r = lease(&g.reply(waiter).expect("answered at the expiry"));
    assert!(r.ok && r.expires_in_ms == 1_000, "{r:?}");
    assert_eq!(r.waited_ms, Some(247));
}

const LIMITS: &str = "[[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 1\nin_seconds = 30\n";

/// A locker served in this process on real sockets: the client's `lease`
/// waits on one held acquire while another client holds the count, and
/// is granted when it is released, without a poll.
#[test]
fn the_clients_lease_waits_on_the_held_reply_and_wakes_at_the_release() {
    let file = TempFile::new("held-leases.toml", LIMITS);
    let d = Served::start(&["--config", file.path()]);
    let mut a = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let held = a.lease(&LeaseAsk::new("db", 1).ttl_ms(30_000)).unwrap().expect("free");
    let endpoint = d.endpoint.clone();
    let waiter = std::thread::spawn(move || {
        let mut b = Client::new([endpoint.as_str()], DEADLINE).unwrap();
        let reply = b.wait_for_lease(&LeaseAsk::new("db", 1).ttl_ms(30_000).max_wait_ms(8_000)).unwrap();
        (reply, Instant::now())
    });
    let deadline = Instant::now() + DEADLINE;
    while a.stats().unwrap().parked < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let released = Instant::now();
    drop(held);
    let (reply, got) = waiter.join().unwrap();
    assert!(reply.ok && reply.waited_ms.is_some(), "held, on the held reply: {reply:?}");
    eprintln!("release to grant: {:?}", got.saturating_duration_since(released));
    let stats = a.stats().unwrap();
    let db = stats.limits.iter().find(|l| l.name == "db").unwrap();
    assert_eq!((db.requests, db.waited), (2, 1), "two acquires, one of which waited ({db:?})");
    assert_eq!((stats.held, stats.held_go, stats.parked), (1, 1, 0));
}

#[test]
fn sigterm_answers_every_waiting_acquire_before_the_locker_exits() {
    let file = TempFile::new("held-leases-term.toml", LIMITS);
    let mut d = Daemon::start(&["--config", file.path()]);
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let _held = c.acquire_lease(&LeaseAsk::new("db", 1).ttl_ms(30_000)).unwrap();
    let ctx = zmq::Context::new();
    let sockets: Vec<zmq::Socket> = (0..5).map(|_| crate::support::req(&ctx, &d.endpoint)).collect();
    for s in &sockets {
        s.send(waiting(30_000, 20_000), 0).unwrap();
    }
    let deadline = Instant::now() + DEADLINE;
    while c.stats().unwrap().parked < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    d.signal("TERM");
    for s in &sockets {
        let r = lease(&s.recv_bytes(0).expect("answered before the exit"));
        assert!(!r.ok && !r.pending, "{r:?}");
    }
    let status = d.wait_exit(DEADLINE).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
}
