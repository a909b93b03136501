//! The transport's limit: a bare REP (or ROUTER) server that answers every request with
//! `go`, on the same ZeroMQ settings as the locker (`locker::daemon::transport`)
//! and the plainest loop (a blocking receive, then the reply), with no
//! decoding and no decision.
//! `benches/compare.sh` runs it and `locker serve` under the same load; the
//! ratio between the two is the locker's own cost.
//!
//! ```sh
//! cargo run --release --example echo_server -- 'tcp://127.0.0.1:*'
//! cargo run --release --example echo_server -- 'tcp://127.0.0.1:*' 67
//! cargo run --release --example echo_server -- 'tcp://127.0.0.1:*' 2 router
//! ```
//!
//! The optional second argument replaces `go` with a reply of that many
//! bytes: the size of the locker's structured reply, to tell the cost of a
//! larger reply on the transport (ZeroMQ copies replies of up to 33 bytes
//! inline and allocates for larger ones) from the locker's own. A third
//! argument `router` serves on a ROUTER socket, as the locker does (it
//! receives and sends each request's envelope itself: two more socket
//! calls each way than a REP socket), to tell that socket's cost from the
//! locker's own.
//!
//! Like `locker serve`, it prints `listening on <endpoint>` once bound. It
//! runs until killed.

use std::io::Write;

use locker::daemon::transport;
use locker::wire::{DEFAULT_MAX_MESSAGE_SIZE, GO};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "tcp://127.0.0.1:*".to_owned());
    let reply = match std::env::args().nth(2) {
        Some(size) => vec![b'x'; size.parse()?],
        None => GO.to_vec(),
    };
    let router = std::env::args().nth(3).is_some_and(|a| a == "router");
    let ctx = transport::context()?;
    let (rep, endpoint) = match router {
        true => transport::bind_serving_with(&ctx, zmq::ROUTER, &bind, DEFAULT_MAX_MESSAGE_SIZE, |_| Ok(()))?,
        false => transport::bind_rep(&ctx, &bind, DEFAULT_MAX_MESSAGE_SIZE)?,
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {endpoint}")?;
    stdout.flush()?;
    drop(stdout);
    let mut msg = zmq::Message::new();
    let mut envelope = Vec::new();
    loop {
        rep.recv(&mut msg, 0)?;
        // A ROUTER socket hands over the envelope: the routing id, then
        // frames up to the empty delimiter, which go back before the reply.
        envelope.clear();
        while router && msg.get_more() {
            // The routing id comes first and is never the delimiter.
            let delimiter = !envelope.is_empty() && msg.is_empty();
            envelope.push(std::mem::replace(&mut msg, zmq::Message::new()));
            rep.recv(&mut msg, 0)?;
            if delimiter {
                break;
            }
        }
        // Multi-part requests get one reply too, as from the locker.
        while msg.get_more() {
            rep.recv(&mut msg, 0)?;
        }
        for frame in &envelope {
            rep.send(&frame[..], zmq::SNDMORE)?;
        }
        rep.send(&reply[..], 0)?;
    }
}
