//! Open files: the locker's own limit on them, and connections it could not
//! accept for want of one.
//!
//! Every client connection takes a file descriptor. A soft limit of 1,024
//! (the common default) leaves a locker with many clients unable to accept
//! more, and ZeroMQ then retries silently. So at start the soft limit is
//! raised to the hard one and logged; and a monitor on the serving socket
//! reports every accept that failed, which the loop counts and logs at most
//! once a second. Nothing here decides go or sorry.

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

/// Watches the serving socket for connections it could not accept.
pub struct AcceptWatch {
    events: zmq::Socket,
    failed: u64,
    last_logged: Option<Instant>,
}

impl AcceptWatch {
    /// Starts watching `socket`, which lives in `ctx`.
    pub fn start(ctx: &zmq::Context, socket: &zmq::Socket) -> zmq::Result<AcceptWatch> {
        socket.monitor(MONITOR, zmq::SocketEvent::ACCEPT_FAILED as i32)?;
        let events = ctx.socket(zmq::PAIR)?;
        events.connect(MONITOR)?;
        Ok(AcceptWatch { events, failed: 0, last_logged: None })
    }

    /// For the loop's poll.
    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.events.as_poll_item(zmq::POLLIN)
    }

    /// Reads the failures reported so far, logging at most once a second;
    /// returns how many connections could not be accepted since start.
    pub fn read(&mut self) -> u64 {
        let before = self.failed;
        let mut errno = 0;
        while let Ok(event) = self.events.recv_multipart(zmq::DONTWAIT) {
            // Frame 1: the event (u16) and its value (u32, here the errno), in host order.
            if let Some(head) = event.first().filter(|f| f.len() >= 6) {
                errno = u32::from_ne_bytes([head[2], head[3], head[4], head[5]]);
                self.failed += 1;
            }
        }
        let due = self.last_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if self.failed > before && due {
            self.last_logged = Some(Instant::now());
            let why = std::io::Error::from_raw_os_error(errno as i32);
            warn!(failed = self.failed, error = %why, "could not accept a client connection (out of open files?)");
        }
        self.failed
    }
}
