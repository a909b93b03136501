//! The ZeroMQ settings of the locker's serving socket, in one place, so that
//! the bare echo baseline (`examples/echo_server.rs`, a REP socket) runs on
//! the same settings and the benchmark ratio measures the locker's own cost,
//! its ROUTER socket's envelopes included.
//!
//! This module only creates and configures sockets; it never serves a request.

/// A failure of the socket layer, with what was being done.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct TransportError {
    what: String,
    source: zmq::Error,
}

/// Wraps a ZeroMQ error with what was being done when it happened.
pub fn zmq_err(what: impl Into<String>) -> impl FnOnce(zmq::Error) -> TransportError {
    move |source| TransportError { what: what.into(), source }
}

/// ZeroMQ queues this many messages per peer before it pushes back. The
/// default (1000) already covers a few hundred requests in flight; the locker
/// states it so the echo baseline cannot drift from it.
const HWM: i32 = 1000;

/// A context with one I/O thread. On the small machines the locker targets,
/// a second I/O thread only competes with the serving thread for a core: the
/// serving thread, not the I/O thread, is the busy one.
pub fn context() -> Result<zmq::Context, TransportError> {
    let ctx = zmq::Context::new();
    ctx.set_io_threads(1).map_err(zmq_err("setting ZMQ_IO_THREADS"))?;
    Ok(ctx)
}

/// A REP socket bound to `endpoint`, and the endpoint actually bound (with the
/// real port when `endpoint` asked for a wildcard one).
pub fn bind_rep(
    ctx: &zmq::Context,
    endpoint: &str,
    max_message_size: usize,
) -> Result<(zmq::Socket, String), TransportError> {
    bind_serving_with(ctx, zmq::REP, endpoint, max_message_size, |_| Ok(()))
}

/// The locker's serving socket of `kind`, with the REP socket's settings,
/// secured by `secure` before it binds: a ROUTER, which answers REQ
/// clients exactly as a REP socket does (the daemon keeps each request's
/// envelope and sends it back before the reply) but may answer them in any
/// order, so that an ask can be held while others are served; or a REP
/// socket, for a locker that can hold nothing.
pub fn bind_serving_with(
    ctx: &zmq::Context,
    kind: zmq::SocketType,
    endpoint: &str,
    max_message_size: usize,
    secure: impl FnOnce(&zmq::Socket) -> Result<(), TransportError>,
) -> Result<(zmq::Socket, String), TransportError> {
    let rep = ctx.socket(kind).map_err(zmq_err("creating the serving socket"))?;
    rep.set_linger(0).map_err(zmq_err("setting ZMQ_LINGER"))?;
    rep.set_maxmsgsize(max_message_size as i64).map_err(zmq_err("setting ZMQ_MAXMSGSIZE"))?;
    rep.set_rcvhwm(HWM).map_err(zmq_err("setting ZMQ_RCVHWM"))?;
    rep.set_sndhwm(HWM).map_err(zmq_err("setting ZMQ_SNDHWM"))?;
    secure(&rep)?;
    rep.bind(endpoint).map_err(zmq_err(format!("binding {endpoint}")))?;
    let bound = last_endpoint(&rep)?;
    Ok((rep, bound))
}

/// The endpoint `socket` last bound, with the real port.
pub fn last_endpoint(socket: &zmq::Socket) -> Result<String, TransportError> {
    Ok(socket
        .get_last_endpoint()
        .map_err(zmq_err("reading the bound endpoint"))?
        .unwrap_or_else(|raw| String::from_utf8_lossy(&raw).into_owned()))
}
