//! `locker health`: whether a locker's metrics listener says it is serving,
//! for a container's HEALTHCHECK or a load balancer's script. It asks
//! `GET /health` once, under a deadline, and prints what the locker said.
//! It talks HTTP to the metrics listener only; it never asks for a permit.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use clap::Args;

use super::{parse_duration, EXIT_GO};

#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// The locker's --metrics-bind address.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9090")]
    metrics: String,
    /// How long to wait for the answer.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    timeout: Duration,
}

/// Exits 0 when the locker answers 200 `serving`; 1 when it answers
/// anything else (joining, refusing, stopping) or cannot be reached.
pub(crate) fn run(args: HealthArgs) -> u8 {
    match ask(&args.metrics, args.timeout) {
        Ok((200, state)) => {
            println!("{state}");
            EXIT_GO
        }
        Ok((status, state)) => {
            println!("{state} ({status})");
            1
        }
        Err(e) => {
            eprintln!("locker health: {}: {e}", args.metrics);
            1
        }
    }
}

/// `GET /health` on `addr`: the status and the body's first line.
fn ask(addr: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    let unknown = || std::io::Error::new(std::io::ErrorKind::NotFound, "resolves to no address");
    let target = addr.to_socket_addrs()?.next().ok_or_else(unknown)?;
    let mut stream = TcpStream::connect_timeout(&target, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: locker\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    stream.take(4096).read_to_string(&mut text)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer");
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).lines().next().unwrap_or("").to_owned();
    Ok((status, body))
}
