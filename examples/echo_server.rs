//! The transport's limit: a bare REP server that answers every request with
//! `go`, on the same ZeroMQ settings as the locker (`locker::daemon::transport`)
//! and the plainest loop (a blocking receive, then the reply), with no
//! decoding and no decision.
//! `benches/compare.sh` runs it and `locker serve` under the same load; the
//! ratio between the two is the locker's own cost.
//!
//! ```sh
//! cargo run --release --example echo_server -- 'tcp://127.0.0.1:*'
//! ```
//!
//! Like `locker serve`, it prints `listening on <endpoint>` once bound. It
//! runs until killed.

use std::io::Write;

use locker::daemon::transport;
use locker::wire::{DEFAULT_MAX_MESSAGE_SIZE, GO};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "tcp://127.0.0.1:*".to_owned());
    let ctx = transport::context()?;
    let (rep, endpoint) = transport::bind_rep(&ctx, &bind, DEFAULT_MAX_MESSAGE_SIZE)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {endpoint}")?;
    stdout.flush()?;
    drop(stdout);
    let mut msg = zmq::Message::new();
    loop {
        rep.recv(&mut msg, 0)?;
        // Multi-part requests get one reply too, as from the locker.
        while msg.get_more() {
            rep.recv(&mut msg, 0)?;
        }
        rep.send(GO, 0)?;
    }
}
