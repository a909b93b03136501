//! The gRPC side's sockets, waited on by the locker's loop: the listener
//! and each connection are plain non-blocking sockets whose readiness the
//! loop polls beside its ZeroMQ sockets (`Ready::poll_items`), and a task
//! that found its socket not ready leaves its waker here to be woken when
//! the loop's poll says it is (`Ready::wake`).
//!
//! So hyper's and tonic's futures run on the loop's own thread, driven by
//! the loop (`rls::Running::drive`) between its turns: a call goes from
//! its connection to the loop's queue and its reply back with no thread
//! woken and no system call but the socket's own reads and writes. Nothing
//! here blocks, and nothing here decides or reads a clock.
//!
//! Readiness is level-triggered (`poll(2)` under `zmq::poll`): an interest
//! stays until its socket is ready, so no wake-up is ever missed, and a
//! task is woken at most once per interest.

use std::collections::HashMap;
use std::future::Future as _;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The most a read takes at once: what it must zero first.
const READ_AT_MOST: usize = 64 * 1024;

/// How long accepting pauses after a failure other than "none waiting"
/// (out of descriptors, say): the listener stays readable, and accepting
/// again at once would spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The tasks waiting for one socket, to read and to write.
#[derive(Default)]
struct Wakers {
    read: Option<Waker>,
    write: Option<Waker>,
}

/// Which sockets tasks wait on, and their wakers; and the sockets of the
/// last poll, in the order of its items.
#[derive(Default)]
struct Sockets {
    waiting: HashMap<RawFd, Wakers>,
    polled: Vec<RawFd>,
}

/// The sockets tasks wait on. Shared by the sockets (tonic wants them
/// `Send`) but only ever touched on the loop's thread, so its lock is
/// never contended.
#[derive(Clone, Default)]
pub struct Ready(Arc<Mutex<Sockets>>);

impl Ready {
    fn sockets(&self) -> std::sync::MutexGuard<'_, Sockets> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `waker` to be woken when `fd` can be read (`write` false) or
    /// written.
    fn wait(&self, fd: RawFd, write: bool, waker: &Waker) {
        let mut sockets = self.sockets();
        let w = sockets.waiting.entry(fd).or_default();
        let slot = if write { &mut w.write } else { &mut w.read };
        match slot {
            Some(old) if old.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
    }

    /// Whether `fd` still waits to be readable: no poll since the last
    /// `wait` to read found it ready. Then `waker` is kept instead.
    fn still_unreadable(&self, fd: RawFd, waker: &Waker) -> bool {
        let mut sockets = self.sockets();
        let Some(old) = sockets.waiting.get_mut(&fd).and_then(|w| w.read.as_mut()) else { return false };
        if !old.will_wake(waker) {
            *old = waker.clone();
        }
        true
    }

    /// Forgets `fd`: its socket is closing.
    fn forget(&self, fd: RawFd) {
        self.sockets().waiting.remove(&fd);
    }

    /// Adds a poll item for each socket a task waits on; returns how many.
    pub fn poll_items(&self, into: &mut Vec<zmq::PollItem<'_>>) -> usize {
        let Sockets { waiting, polled } = &mut *self.sockets();
        polled.clear();
        for (&fd, w) in waiting.iter() {
            polled.push(fd);
            let mut events = zmq::PollEvents::empty();
            if w.read.is_some() {
                events |= zmq::POLLIN;
            }
            if w.write.is_some() {
                events |= zmq::POLLOUT;
            }
            into.push(zmq::PollItem::from_fd(fd, events));
        }
        polled.len()
    }

    /// Wakes the tasks whose sockets `items` (those `poll_items` added,
    /// polled) found ready; an error wakes both, so that the task sees it.
    pub fn wake(&self, items: &[zmq::PollItem<'_>]) {
        let mut woken = Vec::new();
        {
            let Sockets { waiting, polled } = &mut *self.sockets();
            for (item, fd) in items.iter().zip(polled.iter()) {
                let failed = item.is_error();
                let Some(w) = waiting.get_mut(fd) else { continue };
                if item.is_readable() || failed {
                    woken.extend(w.read.take());
                }
                if item.is_writable() || failed {
                    woken.extend(w.write.take());
                }
                if w.read.is_none() && w.write.is_none() {
                    waiting.remove(fd);
                }
            }
        }
        // Woken outside the lock: a task woken may run at once.
        woken.into_iter().for_each(Waker::wake);
    }
}

/// The listener, as the stream of connections tonic serves.
pub struct Incoming {
    listener: TcpListener,
    ready: Ready,
    paused: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Incoming {
    /// Accepts on `listener` (non-blocking), waiting through `ready`.
    pub fn new(listener: TcpListener, ready: Ready) -> io::Result<Incoming> {
        listener.set_nonblocking(true)?;
        Ok(Incoming { listener, ready, paused: None })
    }
}

impl futures_core::Stream for Incoming {
    type Item = io::Result<Connection>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(pause) = &mut self.paused {
            if pause.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.paused = None;
        }
        loop {
            match self.listener.accept() {
                Ok((stream, remote)) => return Poll::Ready(Some(Connection::new(stream, remote, &self.ready))),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.ready.wait(self.listener.as_raw_fd(), false, cx.waker());
                    return Poll::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "envoy's rate-limit service could not accept a connection");
                    self.paused = Some(Box::pin(tokio::time::sleep(ACCEPT_PAUSE)));
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.ready.forget(self.listener.as_raw_fd());
    }
}

/// One accepted connection, read and written without blocking.
pub struct Connection {
    stream: TcpStream,
    ready: Ready,
    info: TcpConnectInfo,
    /// The last read found nothing: the next one waits for the loop's poll
    /// to find the socket readable, rather than ask the kernel again. (A
    /// connection's task is polled after each batch of its replies, and
    /// would otherwise read once for nothing each time.)
    drained: bool,
}

impl Connection {
    fn new(stream: TcpStream, remote: SocketAddr, ready: &Ready) -> io::Result<Connection> {
        stream.set_nonblocking(true)?;
        // Replies are small and leave at once.
        stream.set_nodelay(true)?;
        let info = TcpConnectInfo { local_addr: stream.local_addr().ok(), remote_addr: Some(remote) };
        Ok(Connection { stream, ready: ready.clone(), info, drained: false })
    }

    /// Runs `op` on the socket; not ready, keeps the waker for when it is.
    fn attempt<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: bool,
        mut op: impl FnMut(&TcpStream) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            match op(&self.stream) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.ready.wait(self.stream.as_raw_fd(), write, cx.waker());
                    return Poll::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => return Poll::Ready(done),
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.ready.forget(self.stream.as_raw_fd());
    }
}

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Connection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.drained && self.ready.still_unreadable(self.stream.as_raw_fd(), cx.waker()) {
            return Poll::Pending;
        }
        let room = buf.remaining().min(READ_AT_MOST);
        let into = buf.initialize_unfilled_to(room);
        let read = self.attempt(cx, false, |mut s| s.read(into));
        self.drained = read.is_pending();
        let n = std::task::ready!(read)?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        self.attempt(cx, true, |mut s| s.write(bytes))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.attempt(cx, true, |mut s| s.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here: every write went to the socket.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.stream.shutdown(Shutdown::Write) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_core::Stream;
    use std::time::Instant;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Polls what `ready` waits on for up to 100 ms, wakes and drives once,
    /// as the loop does.
    fn turn(ready: &Ready, rt: &tokio::runtime::Runtime) {
        let mut items = Vec::new();
        ready.poll_items(&mut items);
        zmq::poll(&mut items, 100).unwrap();
        ready.wake(&items);
        rt.block_on(tokio::task::yield_now());
    }

    /// A connection accepted and echoed on a runtime that only runs when
    /// the "loop" drives it after polling the sockets tasks wait on: the
    /// client's bytes come back, and each socket is forgotten once closed.
    #[test]
    fn tasks_run_when_the_loop_finds_their_sockets_ready() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ready = Ready::default();
        let mut incoming = Incoming::new(listener, ready.clone()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let echoed = rt.spawn(async move {
            let next = std::future::poll_fn(|cx| Pin::new(&mut incoming).poll_next(cx));
            let mut conn = next.await.unwrap().unwrap();
            assert_eq!(conn.connect_info().local_addr, Some(addr));
            let mut bytes = [0u8; 5];
            conn.read_exact(&mut bytes).await.unwrap();
            conn.write_all(&bytes).await.unwrap();
            conn.shutdown().await.unwrap();
        });
        rt.block_on(tokio::task::yield_now());
        assert_eq!(ready.sockets().waiting.len(), 1, "the listener waits to be readable");
        let mut client = TcpStream::connect(addr).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The connection is accepted and waits to be read; the bytes come.
        turn(&ready, &rt);
        client.write_all(b"hello").unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while !echoed.is_finished() {
            assert!(Instant::now() < end, "the echo never ran");
            turn(&ready, &rt);
        }
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"hello");
        rt.block_on(echoed).unwrap();
        assert!(ready.sockets().waiting.is_empty(), "closed sockets are forgotten");
    }

    /// A task is not woken by a poll that found its socket not ready.
    #[test]
    fn a_socket_not_ready_wakes_nothing() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ready = Ready::default();
        let mut incoming = Incoming::new(listener, ready.clone()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = polls.clone();
        rt.spawn(async move {
            std::future::poll_fn(|cx| {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Pin::new(&mut incoming).poll_next(cx)
            })
            .await
        });
        rt.block_on(tokio::task::yield_now());
        let mut items = Vec::new();
        assert_eq!(ready.poll_items(&mut items), 1);
        assert_eq!(zmq::poll(&mut items, 0).unwrap(), 0);
        ready.wake(&items);
        rt.block_on(tokio::task::yield_now());
        assert_eq!(polls.load(std::sync::atomic::Ordering::Relaxed), 1, "polled once, never woken");
    }
}
