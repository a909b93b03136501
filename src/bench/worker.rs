//! One load-generating client: its own socket on its own thread, keeping a
//! fixed number of requests in flight and timing each round trip.
//!
//! With one request in flight it is a plain REQ socket, as the seed's client
//! and `locker::Client` are. With more it is a DEALER that frames each
//! request as REQ would (an empty delimiter, then the body), so a REP server
//! cannot tell the difference; a REP socket answers each connection's
//! requests in order, so the oldest send time belongs to the next reply.
//! Every wait is bounded by the run's timeout, so a dead server ends the run
//! with an error instead of a hang.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::Requests;
use super::report::Measurements;
use super::BenchError;
use crate::wire;

/// A connected client and what it has measured.
pub struct Worker {
    socket: zmq::Socket,
    dealer: bool,
    /// Replies are a batch's: count each ask's reply.
    batched: bool,
    pipeline: usize,
    timeout_ms: i64,
    requests: Arc<Requests>,
    in_flight: VecDeque<Instant>,
    reply: zmq::Message,
    /// Counts and latencies of the timed phase only.
    pub tally: Measurements,
}

fn zerr(what: &'static str) -> impl FnOnce(zmq::Error) -> BenchError {
    move |source| BenchError::Zmq { what, source }
}

impl Worker {
    /// Connects a client with `pipeline` requests in flight to `endpoint`.
    pub fn connect(
        ctx: &zmq::Context,
        endpoint: &str,
        pipeline: usize,
        timeout: Duration,
        requests: Arc<Requests>,
        curve: Option<&crate::curve::ClientCurve>,
    ) -> Result<Worker, BenchError> {
        let dealer = pipeline > 1;
        let socket = ctx.socket(if dealer { zmq::DEALER } else { zmq::REQ }).map_err(zerr("creating a socket"))?;
        let timeout_ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        socket.set_linger(0).map_err(zerr("setting ZMQ_LINGER"))?;
        socket.set_sndtimeo(timeout_ms).map_err(zerr("setting ZMQ_SNDTIMEO"))?;
        if let Some(curve) = curve {
            curve.secure(&socket).map_err(zerr("setting the CURVE keys"))?;
        }
        socket.connect(endpoint).map_err(zerr("connecting"))?;
        Ok(Worker {
            socket,
            dealer,
            batched: false,
            pipeline,
            timeout_ms: i64::from(timeout_ms),
            requests,
            in_flight: VecDeque::with_capacity(pipeline),
            reply: zmq::Message::new(),
            tally: Measurements::default(),
        })
    }

    /// This worker, reading every reply as a batch's when `batched`.
    pub fn batched(self, batched: bool) -> Worker {
        Worker { batched, ..self }
    }

    /// Sends bodies numbered `from` up to `to` once each, untimed.
    pub fn send_range(&mut self, from: usize, to: usize) -> Result<(), BenchError> {
        let mut next = from;
        self.phase(false, || {
            let i = next;
            next += 1;
            (i < to).then_some(i)
        })
    }

    /// Cycles through all bodies from `start` until `until`; records the
    /// round trips when `timed`.
    pub fn run_until(&mut self, start: usize, until: Instant, timed: bool) -> Result<(), BenchError> {
        let n = self.requests.len();
        let mut next = start % n;
        self.phase(timed, move || {
            let i = next;
            next = if next + 1 == n { 0 } else { next + 1 };
            (Instant::now() < until).then_some(i)
        })
    }

    /// Keeps the pipeline full with the bodies `next` picks until it says
    /// stop, then waits for every reply still in flight.
    fn phase(&mut self, timed: bool, mut next: impl FnMut() -> Option<usize>) -> Result<(), BenchError> {
        let mut sending = true;
        loop {
            while sending && self.in_flight.len() < self.pipeline {
                match next() {
                    Some(i) => self.send(i)?,
                    None => sending = false,
                }
            }
            if self.in_flight.is_empty() {
                return Ok(());
            }
            self.receive(timed)?;
        }
    }

    fn send(&mut self, i: usize) -> Result<(), BenchError> {
        if self.dealer {
            self.socket.send(&[][..], zmq::SNDMORE).map_err(zerr("sending a delimiter"))?;
        }
        let body = self.requests.get(i);
        self.socket.send(body, 0).map_err(zerr("sending a request"))?;
        self.in_flight.push_back(Instant::now());
        Ok(())
    }

    /// Waits for at least one reply, then takes every reply already there.
    fn receive(&mut self, timed: bool) -> Result<(), BenchError> {
        let ready = self.socket.poll(zmq::POLLIN, self.timeout_ms).map_err(zerr("waiting for replies"))?;
        if ready == 0 {
            return Err(BenchError::NoAnswer { timeout_ms: self.timeout_ms });
        }
        // A REQ socket may only be read while a request is outstanding, so
        // stop as soon as nothing is in flight.
        while let Some(&sent) = self.in_flight.front() {
            if !self.recv_reply()? {
                break;
            }
            self.in_flight.pop_front();
            if timed && self.batched {
                self.tally.record_batch(&self.reply, sent.elapsed());
            } else if timed {
                self.tally.record(wire::classify_reply(&self.reply), self.reply.len(), sent.elapsed());
            }
        }
        Ok(())
    }

    /// Reads one reply into `self.reply` if one is waiting.
    fn recv_reply(&mut self) -> Result<bool, BenchError> {
        match self.socket.recv(&mut self.reply, zmq::DONTWAIT) {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN) => return Ok(false),
            Err(e) => return Err(zerr("receiving a reply")(e)),
        }
        if self.dealer {
            // That was the empty delimiter; the reply follows in the same
            // message, so it is already here.
            self.socket.recv(&mut self.reply, 0).map_err(zerr("receiving a reply"))?;
        }
        Ok(true)
    }
}
