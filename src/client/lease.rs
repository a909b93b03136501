//! Waiting for a semaphore lease, and `Lease`, the guard that keeps one.
//!
//! A queued acquire asks the locker to hold its reply (`hold_ms`) until
//! the count is granted or the wait ends, each request for at most half
//! of its share of the client's timeout; when a hold runs out first, a
//! heartbeat with `hold_ms` waits on. A locker that answers "pending" at
//! once (an older one, one with no room to hold, or one serving on a REP
//! socket) is polled with heartbeats, 2 ms apart and doubling to 50 ms,
//! until the lease is held or the wait ends. A held lease is kept by a thread with its own
//! socket (ZeroMQ sockets are not shared between threads) that heartbeats
//! every third of the ttl, carrying the lease's count so that a locker that
//! restarted restores it, and releases it when the guard is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::debug;

use super::{Client, ClientError};
use crate::wire::{Heartbeat, LeaseAsk, LeaseReply, Release};

/// The first pause between polls of a pending lease; it doubles up to `MAX_POLL`.
const FIRST_POLL: Duration = Duration::from_millis(2);
/// The longest pause between polls of a pending lease.
const MAX_POLL: Duration = Duration::from_millis(50);

impl Client {
    /// Acquires a lease and waits until it is held or the wait
    /// (`max_wait_ms`) ends: on the locker's held reply, or polling while
    /// the locker answers pending at once. Returns the last reply: `ok`
    /// when held; not `ok` (and not pending) when the count was not free in
    /// time. The end of a wait is not an error: the locker drops a waiter
    /// when its wait ends, so the poll that finds it gone at or after that
    /// instant means "not held"; a refusal before then is an error.
    pub fn wait_for_lease(&mut self, ask: &LeaseAsk) -> Result<LeaseReply, ClientError> {
        let hold = self.lease_hold();
        let first = match ask.max_wait_ms {
            Some(wait) if wait > 0 && ask.hold_ms.is_none() => LeaseAsk { hold_ms: Some(wait.min(hold)), ..*ask },
            _ => *ask,
        };
        let mut reply = self.acquire_lease(&first)?;
        let mut deadline = Instant::now() + Duration::from_millis(reply.expires_in_ms);
        let mut pause = FIRST_POLL;
        while reply.pending {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(self.give_up(ask, &reply));
            }
            // A reply the locker held asks again at once; one it answered
            // at once is polled, ever more slowly.
            if reply.waited_ms.is_none() {
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(MAX_POLL);
            }
            let lease = reply.lease.clone().unwrap_or_default();
            let hold_ms = Some((left.as_millis() as u64).clamp(1, hold));
            let beat = Heartbeat { ttl_ms: ask.ttl_ms, hold_ms, ..Heartbeat::new(ask.limit, &lease) };
            match self.heartbeat(&beat) {
                Ok(next) => reply = next,
                Err(ClientError::Refused(why)) if Instant::now() >= deadline => {
                    debug!(%lease, %why, "the wait ended in the queue");
                    return Ok(not_held(&reply));
                }
                Err(e) => return Err(e),
            }
            if reply.pending && reply.waited_ms.is_some() {
                deadline = Instant::now() + Duration::from_millis(reply.expires_in_ms);
            }
        }
        Ok(reply)
    }

    /// The longest a locker may hold one lease request, in milliseconds:
    /// half of the first endpoint's share of the timeout, so that a held
    /// reply is never taken for a silent locker.
    fn lease_hold(&self) -> u64 {
        let share = self.timeout / (2 * self.endpoint_count().max(1)) as u32;
        (share.as_millis() as u64).max(1)
    }

    /// Gives a still-pending place back when the wait ended here first (the
    /// locker's deadline is rounded up to the millisecond), so the count is
    /// not granted to nobody in the instant before the locker drops it.
    fn give_up(&mut self, ask: &LeaseAsk, pending: &LeaseReply) -> LeaseReply {
        if let Some(lease) = &pending.lease {
            if let Err(e) = self.release(&Release { limit: ask.limit, lease }) {
                debug!(%lease, error = %e, "giving up the place failed; it ends with its wait");
            }
        }
        not_held(pending)
    }

    /// Takes a lease and keeps it alive until the returned guard is dropped.
    /// `Ok(None)` when the count was not free within `max_wait_ms` (at once
    /// when it is absent); an error only when no locker answered, or one
    /// refused the request itself (an unknown limit, a bad count).
    pub fn lease(&mut self, ask: &LeaseAsk) -> Result<Option<Lease>, ClientError> {
        let reply = self.wait_for_lease(ask)?;
        match reply.lease {
            Some(id) if reply.ok => {
                let ttl_ms = ask.ttl_ms.unwrap_or(reply.expires_in_ms).max(1);
                Ok(Some(Lease::keep(self.sibling(), ask.limit.map(str::to_owned), id, ask.count, ttl_ms)))
            }
            _ => Ok(None),
        }
    }
}

/// The reply for a wait that ended without the count: neither held nor pending.
fn not_held(last: &LeaseReply) -> LeaseReply {
    LeaseReply { ok: false, lease: None, pending: false, expires_in_ms: 0, ..last.clone() }
}

/// A held semaphore lease, heartbeated in the background and released on drop.
///
/// [`Client::lease`] returns one once the count is held. A thread with its
/// own socket heartbeats every third of the ttl, with the lease's count, so
/// a locker that restarted restores the lease; [`Lease::is_held`] turns
/// false if a locker refuses a heartbeat. Dropping the guard (or calling
/// [`Lease::release`]) releases the lease and waits for the thread.
///
/// # Examples
///
/// A semaphore `db` of capacity 1:
///
/// ```
/// # use std::sync::atomic::AtomicBool;
/// # use locker::config::{AlgorithmName, FileConfig, FileLimit, Flags, ServeConfig};
/// # let db = FileLimit { name: "db".into(), max_requests: 1, in_seconds: Some(30.0), algorithm: AlgorithmName::Semaphore, burst: None, margin_ms: None, hold_ms: None, store_failure: None, allow_reset: None, parent: None, shadow: None, period: None, time_zone: None, line: 0 };
/// # let file = FileConfig { limits: vec![db], ..FileConfig::default() };
/// # let flags = Flags { bind: Some("tcp://127.0.0.1:*".into()), ..Flags::default() };
/// # let server = locker::daemon::Server::bind(&ServeConfig::resolve(flags, file)?)?;
/// # let endpoint = server.endpoint().to_owned();
/// # std::thread::spawn(move || server.run(&AtomicBool::new(false)));
/// use std::time::Duration;
/// use locker::{Client, LeaseAsk};
///
/// let mut client = Client::new([endpoint], Duration::from_secs(1))?;
/// // Hold 1 of "db"; the lease lives 10 s between heartbeats.
/// let ask = LeaseAsk::new("db", 1).ttl_ms(10_000);
///
/// let lease = client.lease(&ask)?.expect("the count is free");
/// assert!(lease.is_held());
/// // The whole capacity is held: an acquire that does not wait is refused.
/// assert!(client.lease(&ask)?.is_none());
///
/// lease.release(); // or drop it
/// // Queue for up to a second when the count is not free at once.
/// let again = client.lease(&ask.max_wait_ms(1_000))?;
/// assert!(again.is_some_and(|l| l.is_held()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Lease {
    id: String,
    held: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What the heartbeat thread needs to keep and free one lease.
struct KeepAlive {
    client: Client,
    limit: Option<String>,
    id: String,
    count: u64,
    ttl_ms: u64,
    held: Arc<AtomicBool>,
}

impl Lease {
    fn keep(client: Client, limit: Option<String>, id: String, count: u64, ttl_ms: u64) -> Lease {
        let held = Arc::new(AtomicBool::new(true));
        let (stop, stopped) = mpsc::channel();
        let keeper = KeepAlive { client, limit, id: id.clone(), count, ttl_ms, held: Arc::clone(&held) };
        let thread = std::thread::spawn(move || keeper.run(stopped));
        Lease { id, held, stop: Some(stop), thread: Some(thread) }
    }

    /// The lease's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// False once a locker refused a heartbeat (the lease expired and could
    /// not be restored): the count is then no longer held.
    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// Releases the lease now (dropping the guard does the same).
    pub fn release(self) {}
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Closing the channel wakes the keeper, which releases and exits.
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl KeepAlive {
    fn run(mut self, stopped: mpsc::Receiver<()>) {
        let every = Duration::from_millis(self.ttl_ms / 3).max(Duration::from_millis(1));
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
            self.beat();
        }
        let release = Release { limit: self.limit.as_deref(), lease: &self.id };
        if let Err(e) = self.client.release(&release) {
            debug!(lease = %self.id, error = %e, "release failed; the lease will expire");
        }
    }

    fn beat(&mut self) {
        let beat = Heartbeat {
            ttl_ms: Some(self.ttl_ms),
            count: Some(self.count),
            ..Heartbeat::new(self.limit.as_deref(), &self.id)
        };
        match self.client.heartbeat(&beat) {
            Ok(reply) => self.held.store(reply.ok, Ordering::Relaxed),
            Err(ClientError::Refused(why)) => {
                debug!(lease = %self.id, %why, "heartbeat refused");
                self.held.store(false, Ordering::Relaxed);
            }
            // No answer: try again next time; the lease lives until its ttl.
            Err(e) => debug!(lease = %self.id, error = %e, "heartbeat failed"),
        }
    }
}
