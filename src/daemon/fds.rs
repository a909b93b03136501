//! Open files: the locker's own limit on them, and connections it could not
//! accept for want of one.
//!
//! Every client connection takes a file descriptor. A soft limit of 1,024
//! (the common default) leaves a locker with many clients unable to accept
//! more. So at start the soft limit is raised to the hard one and logged.
//!
//! At the limit, libzmq's listener (which the locker does not own) finds
//! its socket readable, fails to accept, and tries again at once, for as
//! long as the connection waits in the kernel's queue: a busy spin of its
//! I/O thread, and of this loop reading the failures. libzmq has no way to
//! pause a listener (`zmq_unbind` would drop every client it accepted,
//! libzmq issue 3317), so the locker refuses such a connection instead:
//! `accept` is interposed here, and when it fails for want of a descriptor
//! it gives up one held in reserve for a moment, accepts the waiting
//! connection and closes it, then takes the reserve back (the classic
//! remedy, as libuv and libev do). The queue empties, the listener is no
//! longer readable, and the refused client reconnects on its own back-off
//! (ZeroMQ's `ZMQ_RECONNECT_IVL`); each refusal is counted once, and a
//! monitor on the serving socket lets the loop log them at most once a
//! second.
//!
//! The same monitor, under CURVE, reports handshakes that failed before
//! any request: a plain client at a CURVE locker, or one holding another
//! server key. ZeroMQ tells such a client nothing (it only gets no
//! answer), so the locker's log is where an operator looks: each is
//! counted, and logged at most once a second too. (A key the allowlist
//! refuses is logged by the ZAP handler, `daemon::zap`.) Nothing here
//! decides go or sorry.

use std::time::{Duration, Instant};

use tracing::{info, warn};

/// The soft and hard limits on open files, after raising the soft one to
/// the hard one where the OS allows it. Logs what the locker has.
#[cfg(target_os = "linux")]
pub fn raise_open_files() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on a struct this function owns.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    info!(open_files = soft, hard_limit = hard, raised_from = before, "open files");
    if soft < 4096 {
        warn!(
            open_files = soft,
            "few open files allowed: each client connection takes one (raise LimitNOFILE or ulimit -n)"
        );
    }
    Some((soft, hard))
}

/// Not on this OS.
#[cfg(not(target_os = "linux"))]
pub fn raise_open_files() -> Option<(u64, u64)> {
    None
}

/// Where the serving socket's accept failures are reported.
const MONITOR: &str = "inproc://locker-accept-failures";

/// Watches the serving socket for connections it could not accept, and
/// under CURVE for handshakes that failed.
pub struct AcceptWatch {
    events: zmq::Socket,
    failed: u64,
    last_logged: Option<Instant>,
    handshakes_failed: u64,
    last_handshake_logged: Option<Instant>,
}

impl AcceptWatch {
    /// Starts watching `socket`, which lives in `ctx` (and its CURVE
    /// handshakes when `curve`), and puts a descriptor in reserve for
    /// refusing what cannot be accepted.
    pub fn start(ctx: &zmq::Context, socket: &zmq::Socket, curve: bool) -> zmq::Result<AcceptWatch> {
        if !refusal::hold_reserve() {
            warn!("no descriptor to hold in reserve: at the open-files limit, libzmq will retry accepts in a spin");
        }
        let handshakes =
            zmq::SocketEvent::HANDSHAKE_FAILED_NO_DETAIL as i32 | zmq::SocketEvent::HANDSHAKE_FAILED_PROTOCOL as i32;
        let watched = zmq::SocketEvent::ACCEPT_FAILED as i32 | if curve { handshakes } else { 0 };
        socket.monitor(MONITOR, watched)?;
        let events = ctx.socket(zmq::PAIR)?;
        events.connect(MONITOR)?;
        Ok(AcceptWatch { events, failed: 0, last_logged: None, handshakes_failed: 0, last_handshake_logged: None })
    }

    /// For the loop's poll.
    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.events.as_poll_item(zmq::POLLIN)
    }

    /// Reads the failures reported so far, logging at most once a second;
    /// returns how many connections were refused since start for want of
    /// a descriptor (each once, however often libzmq tried it).
    pub fn read(&mut self) -> u64 {
        let (before, handshakes_before) = (self.failed, self.handshakes_failed);
        let mut errno = 0;
        while let Ok(event) = self.events.recv_multipart(zmq::DONTWAIT) {
            // Frame 1: the event (u16) and its value (u32: the errno, or
            // the protocol error), in host order.
            let Some(head) = event.first().filter(|f| f.len() >= 6) else { continue };
            let value = u32::from_ne_bytes([head[2], head[3], head[4], head[5]]);
            if u16::from_ne_bytes([head[0], head[1]]) == zmq::SocketEvent::ACCEPT_FAILED as u16 {
                (errno, self.failed) = (value, self.failed + 1);
            } else {
                self.handshakes_failed += 1;
            }
        }
        self.log_handshakes(handshakes_before);
        let refused = refusal::refused();
        let due = self.last_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if self.failed > before && due {
            self.last_logged = Some(Instant::now());
            let why = std::io::Error::from_raw_os_error(errno as i32);
            warn!(
                refused,
                attempts = self.failed,
                error = %why,
                "could not accept a client connection (out of open files?); refused it, it will reconnect"
            );
        }
        refused
    }

    /// Logs the CURVE handshakes that failed since `before` was the count,
    /// at most once a second.
    fn log_handshakes(&mut self, before: u64) {
        let due = self.last_handshake_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if self.handshakes_failed > before && due {
            self.last_handshake_logged = Some(Instant::now());
            warn!(
                failed = self.handshakes_failed,
                "a client's CURVE handshake failed: a plain client, or one with another server key; \
                 ZeroMQ tells it nothing, so it sees no answer"
            );
        }
    }
}

/// The refusal of connections that cannot be accepted: the reserve, the
/// count, and the interposed `accept`.
#[cfg(target_os = "linux")]
mod refusal {
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

    /// A descriptor (on /dev/null) held for giving up a moment; -1 when none.
    static RESERVE: AtomicI32 = AtomicI32::new(-1);
    /// Connections accepted only to be closed, since start.
    static REFUSED: AtomicU64 = AtomicU64::new(0);

    /// Connections refused for want of a descriptor since start.
    pub fn refused() -> u64 {
        REFUSED.load(Ordering::Relaxed)
    }

    /// Puts a descriptor in reserve, unless one is; whether one is held.
    pub fn hold_reserve() -> bool {
        if RESERVE.load(Ordering::Acquire) >= 0 {
            return true;
        }
        // SAFETY: a plain open of a constant path.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return false;
        }
        if RESERVE.compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // SAFETY: `fd` was opened above and is held nowhere else.
            unsafe { libc::close(fd) };
        }
        true
    }

    /// Refuses the connection waiting on `listener`: gives up the reserve,
    /// accepts the connection into the descriptor that frees, closes it,
    /// and takes the reserve back. Another thread may take the freed
    /// descriptor first; then nothing is refused, and the reserve comes
    /// back when a descriptor frees.
    fn refuse_one(listener: libc::c_int) {
        let reserve = RESERVE.swap(-1, Ordering::AcqRel);
        if reserve >= 0 {
            // SAFETY: the reserve is this module's own descriptor, taken out
            // of `RESERVE` above so that no one else closes it.
            unsafe { libc::close(reserve) };
            // SAFETY: a non-blocking accept on a listener libzmq is
            // accepting on; the address is not asked for.
            let conn =
                unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
            if conn >= 0 {
                // SAFETY: `conn` was just accepted here and is held nowhere else.
                unsafe { libc::close(conn) };
                REFUSED.fetch_add(1, Ordering::Relaxed);
            }
        }
        hold_reserve();
    }

    /// libzmq's `accept` (it calls `accept`, not `accept4`, as built here),
    /// which refuses a connection it cannot take for want of a descriptor
    /// instead of leaving it queued for libzmq to retry in a spin. Before
    /// the daemon holds a reserve (a test, a client), it is `accept` itself.
    ///
    /// # Safety
    /// As `accept(2)`: `addr` and `len` are null or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn accept(
        listener: libc::c_int,
        addr: *mut libc::sockaddr,
        len: *mut libc::socklen_t,
    ) -> libc::c_int {
        // SAFETY: the caller's arguments, passed on as `accept` takes them.
        let got = unsafe { libc::accept4(listener, addr, len, 0) };
        if got >= 0 {
            return got;
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if errno == libc::EMFILE || errno == libc::ENFILE {
            refuse_one(listener);
            // SAFETY: this thread's errno, restored for the caller.
            unsafe { *libc::__errno_location() = errno };
        }
        got
    }
}

/// Not on this OS: nothing is refused, and libzmq retries as it does.
#[cfg(not(target_os = "linux"))]
mod refusal {
    pub fn refused() -> u64 {
        0
    }
    pub fn hold_reserve() -> bool {
        false
    }
}
