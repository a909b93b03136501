//! `locker lease acquire|heartbeat|release`: semaphore leases from a shell.
//!
//! `acquire` prints the lease id (and waits in the queue with --wait);
//! scripts keep the lease with `heartbeat` and free it with `release`. Exit
//! codes follow `locker ask`: 0 held (or released), 1 not, 2 an error.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::failure::request_failed;
use super::{exit_for, parse_duration, ConnectArgs};
use crate::wire::{Heartbeat, LeaseAsk, LeaseReply, Release};

#[derive(Debug, Subcommand)]
pub(crate) enum LeaseCommand {
    /// Take a count of a semaphore; print the lease id; exit 0 when held, 1 when not.
    Acquire(AcquireArgs),
    /// Keep a lease alive (with --count, restore it on a locker that restarted).
    Heartbeat(HeartbeatArgs),
    /// Free a lease; exit 0 when it was held, 1 when it had already gone.
    Release(LeaseArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AcquireArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Semaphore limit; the locker's default limit when absent.
    #[arg(long, value_name = "NAME")]
    limit: Option<String>,
    /// How much of the capacity to hold.
    #[arg(long, value_name = "N", default_value_t = 1, allow_negative_numbers = true)]
    count: u64,
    /// How long the lease lives without a heartbeat [default: the limit's in_seconds].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    ttl: Option<Duration>,
    /// Wait in the queue up to this long when the count is not free now.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    wait: Option<Duration>,
}

/// The lease a heartbeat or a release is about, and the lockers to tell.
#[derive(Debug, Args)]
pub(crate) struct LeaseArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Semaphore limit; the locker's default limit when absent.
    #[arg(long, value_name = "NAME")]
    limit: Option<String>,
    /// The lease id `acquire` printed.
    #[arg(long, value_name = "ID")]
    lease: String,
}

#[derive(Debug, Args)]
pub(crate) struct HeartbeatArgs {
    #[command(flatten)]
    held: LeaseArgs,
    /// New time to live from now [default: the limit's in_seconds].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    ttl: Option<Duration>,
    /// The lease's count, to restore it on a locker that does not know it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    count: Option<u64>,
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Runs one lease command and returns its exit code.
pub(crate) fn run(command: LeaseCommand) -> u8 {
    let (connect, result) = match command {
        LeaseCommand::Acquire(a) => {
            let ask = LeaseAsk {
                limit: a.limit.as_deref(),
                count: a.count,
                ttl_ms: a.ttl.map(ms),
                max_wait_ms: a.wait.map(ms),
                ..LeaseAsk::default()
            };
            let result = a.connect.client().and_then(|mut c| c.wait_for_lease(&ask));
            (a.connect, result)
        }
        LeaseCommand::Heartbeat(HeartbeatArgs { held: h, ttl, count }) => {
            let beat = Heartbeat { ttl_ms: ttl.map(ms), count, ..Heartbeat::new(h.limit.as_deref(), &h.lease) };
            let result = h.connect.client().and_then(|mut c| c.heartbeat(&beat));
            (h.connect, result)
        }
        LeaseCommand::Release(r) => {
            let release = Release { limit: r.limit.as_deref(), lease: &r.lease };
            let result = r.connect.client().and_then(|mut c| c.release(&release));
            (r.connect, result)
        }
    };
    match result {
        Ok(reply) => {
            print_lease(&reply, connect.json);
            exit_for(reply.ok)
        }
        Err(e) => request_failed(&e, connect.json),
    }
}

fn print_lease(reply: &LeaseReply, json: bool) {
    if json {
        println!("{}", serde_json::to_string(reply).expect("a reply is plain data"));
    } else if reply.ok {
        println!("{}", reply.lease.as_deref().unwrap_or("released"));
    } else if reply.pending {
        println!("pending");
    } else {
        println!("not held");
    }
}
